# SPDX-License-Identifier: BSD-2-Clause
# probekit-config.cmake: USDT probes for a CMake project, from a DTrace
# provider file (doc/probes-in-your-code.md).  Installed as
# PREFIX/share/probekit/cmake/, where find_package(probekit) looks under
# each prefix it searches (CMAKE_PREFIX_PATH, and PREFIX itself when
# PREFIX/bin is on PATH):
#
#   find_package(probekit REQUIRED)
#   add_executable(mysvc mysvc.c)
#   probekit_probes(mysvc CATALOG mysvc.d)
#
# probekit_probes(TARGET CATALOG FILE.d [USDT ON|OFF] [OUTPUT_DIRECTORY DIR])
#   adds to TARGET the header its call sites include (NAME_probes.h), the
#   object that defines the semaphores (USDT ON only), and the include
#   path of both headers (and of probekit_batch.h).  USDT defaults to the
#   cache variable PROBEKIT_USDT (ON; -DPROBEKIT_USDT=OFF builds every
#   probe out, still type-checked).  DIR defaults to
#   CMAKE_CURRENT_BINARY_DIR/TARGET.probekit.
#
# The pipeline is probekit.mk's, run by make, so that it is declared once:
# at configure time it says what it makes ("probekit-outputs"), and the
# build runs it ("probekit-generate") with the project's compiler and
# flags for dtrace -G's object.

if(CMAKE_VERSION VERSION_LESS 3.18)
  set(probekit_FOUND FALSE)
  set(probekit_NOT_FOUND_MESSAGE "probekit needs CMake 3.18 or later (file(CONFIGURE)); this is ${CMAKE_VERSION}")
  return()
endif()

get_filename_component(PROBEKIT_HOME "${CMAKE_CURRENT_LIST_DIR}/.." REALPATH)
set(PROBEKIT_MK "${PROBEKIT_HOME}/probekit.mk")
set(PROBEKIT_USDT ON CACHE BOOL "Build USDT probes in (OFF: every probe compiles to nothing)")

find_program(PROBEKIT_MAKE NAMES make gmake)
if(NOT PROBEKIT_MAKE)
  set(probekit_FOUND FALSE)
  set(probekit_NOT_FOUND_MESSAGE
      "probekit runs its probekit.mk with make, and there is no make on PATH; install make (apt install make)")
  return()
endif()

function(probekit_probes target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "CATALOG;USDT;OUTPUT_DIRECTORY" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "probekit_probes: unknown argument(s) ${arg_UNPARSED_ARGUMENTS}; give CATALOG FILE.d [USDT ON|OFF] [OUTPUT_DIRECTORY DIR]")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "probekit_probes: no target '${target}'; call it after add_executable() or add_library()")
  endif()
  if(NOT arg_CATALOG)
    message(FATAL_ERROR "probekit_probes: give the catalog: probekit_probes(${target} CATALOG FILE.d)")
  endif()
  get_filename_component(catalog "${arg_CATALOG}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${catalog}")
    message(FATAL_ERROR "probekit_probes: no catalog ${catalog}")
  endif()
  if(NOT DEFINED arg_USDT)
    set(arg_USDT ${PROBEKIT_USDT})
  endif()
  if(arg_USDT)
    set(usdt 1)
    find_program(PROBEKIT_DTRACE dtrace)
    if(NOT PROBEKIT_DTRACE)
      message(FATAL_ERROR "probekit_probes: USDT ON needs systemtap's dtrace, which is not on PATH; install systemtap-sdt-dev, or configure with -DPROBEKIT_USDT=OFF")
    endif()
    set(dtrace "PROBEKIT_DTRACE=${PROBEKIT_DTRACE}")
  else()
    set(usdt 0)
    set(dtrace)
  endif()
  set(out "${arg_OUTPUT_DIRECTORY}")
  if(NOT out)
    set(out "${CMAKE_CURRENT_BINARY_DIR}/${target}.probekit")
  endif()
  get_filename_component(out "${out}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")

  set(mk "${PROBEKIT_MAKE}" -s --no-print-directory -f "${PROBEKIT_MK}"
      "PROBEKIT_CATALOG=${catalog}" "PROBEKIT_OUT=${out}" "USDT=${usdt}" ${dtrace})
  execute_process(COMMAND ${mk} probekit-outputs
                  OUTPUT_VARIABLE lines ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(STRIP "${err}" err)
    message(FATAL_ERROR "probekit_probes: ${PROBEKIT_MK} failed for ${catalog}: ${err}")
  endif()
  string(REPLACE "\n" ";" lines "${lines}")
  set(outputs)
  set(objects)
  set(cflags)
  foreach(line IN LISTS lines)
    if(line MATCHES "^header (.+)$")
      list(APPEND outputs "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^object (.+)$")
      list(APPEND outputs "${CMAKE_MATCH_1}")
      list(APPEND objects "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^cflag (.+)$")
      list(APPEND cflags "${CMAKE_MATCH_1}")
    endif()
  endforeach()

  # dtrace -G compiles the semaphores with the project's compiler and flags.
  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  set(flags "${CMAKE_C_FLAGS} ${CMAKE_C_FLAGS_${config}}")
  if(CMAKE_C_COMPILE_OPTIONS_PIE)
    string(APPEND flags " ${CMAKE_C_COMPILE_OPTIONS_PIE}")
  endif()
  # Switching USDT changes this file's contents, so the outputs are made
  # again (CMake writes it only when they change).
  file(CONFIGURE OUTPUT "${out}/probekit-usdt.cmake" CONTENT "USDT=${usdt}\n")
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND ${mk} "CC=${CMAKE_C_COMPILER}" "CFLAGS=${flags}" probekit-generate
    DEPENDS "${catalog}" "${PROBEKIT_MK}" "${out}/probekit-usdt.cmake"
    COMMENT "probekit: probes of ${catalog} (USDT=${usdt})"
    VERBATIM)
  target_sources(${target} PRIVATE ${outputs})
  target_compile_options(${target} PRIVATE ${cflags})
endfunction()
