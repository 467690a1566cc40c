# SPDX-License-Identifier: BSD-2-Clause
# probekit: build, test and demo.
#
#   make            build blktgt with USDT probes into $(O) (default build/)
#   make USDT=0     the same call sites compiled to nothing
#   make O=DIR      build into DIR, so variants can sit side by side
#   make deps       install what building, tracing and testing need (Debian)
#   make test       deps, then make check
#   make check      build every variant, lint, run the suite (installs nothing)
#   make demo       deps, build, then the guided tour
#   make soak       the wrapper and tool tests 50 times under load
#   make unit       the parsers' C unit tests (mk/unit.mk)
#   make install    install under PREFIX (default /usr/local), or DESTDIR
#   make uninstall  remove what make install installed
#   make deb        the Debian package, in $(O)/deb (lintian-clean)
#   make stack STACK=NAME  make test on Debian release NAME's userland, in a
#                   cached chroot on this kernel (scripts/stack.sh)
#   make stack-check  make check less what CI's chroot runs leave out
#   make bench-stacks  the bench's bpftrace rows for each stack's bpftrace
#                   beside the host's (mk/bench.mk)
#   make bench-window  the bench's cost a hit of the wrapper's one window
#                   beside plain bpftrace (mk/bench.mk)
#   make V=1        show full commands
#   make ARCH=arm64 the same for arm64, cross-built into build/arm64 against
#                   the arm64 userland of scripts/arm64.sh (its sysroot)
#   make arm64-smoke that build, smoke-tested in an emulated arm64 machine
#   make kernel-smoke KERNEL=bullseye|bookworm|trixie  this build on Debian
#                   11's, 12's or 13's own kernel (5.10, 6.1, 6.12), in qemu
#
# Components add their own rules in mk/*.mk.

# Cross-building: ARCH=arm64 (or CROSS_COMPILE=aarch64-linux-gnu-) picks
# the cross compiler and builds into build/arm64 unless O says otherwise.
# What links only the C library (blktgt, the quickstart) needs nothing
# more than Debian's cross toolchain.  The rest links arm64 libbpf,
# libelf, zlib and libmicrohttpd: SYSROOT, the arm64 userland or the
# arm64 libraries scripts/arm64.sh keeps ('scripts/arm64.sh libs' fetches
# the libraries in about 20 s).  Without one, make says what it leaves
# out, and builds the rest.  The architecture a build is for is always
# the compiler's (-dumpmachine), never this machine's: mk/libbpf.mk's BPF
# target and vmlinux.h, mk/nop5.mk's x86-only flags and the C code's #ifs
# all follow it.
ifeq ($(ARCH),arm64)
CROSS_COMPILE ?= aarch64-linux-gnu-
else ifneq ($(ARCH),)
$(error ARCH=$(ARCH): probekit cross-builds for ARCH=arm64 only; leave ARCH unset for this machine)
endif
ifneq ($(CROSS_COMPILE),)
ifeq ($(origin CC),default)
CC := $(CROSS_COMPILE)gcc
endif
ifeq ($(origin AR),default)
AR := $(CROSS_COMPILE)ar
endif
ifneq ($(filter aarch64-%,$(shell $(CC) -dumpmachine 2>/dev/null)),)
ARCH := arm64
O ?= build/arm64
SYSROOT ?= $(shell scripts/arm64.sh root 2>/dev/null)
ifeq ($(SYSROOT),)
CROSS_LIBS := 0
$(info ARCH=arm64: no arm64 libraries to link against, so probekit-scan, the libbpf tools and the exporter are not built; fetch them with 'scripts/arm64.sh libs', or name a sysroot with SYSROOT=DIR)
endif
else
$(error CROSS_COMPILE=$(CROSS_COMPILE): $(CC) is not an aarch64 compiler (apt-get install gcc-aarch64-linux-gnu); probekit cross-builds for arm64 only)
endif
# sys/sdt.h is the same header for every architecture (its operands are
# the compiler's), but the cross compiler does not search this machine's
# multiarch include directory, and the libraries' sysroot has none: lend
# it this machine's copy, after the sysroot's own (-idirafter).
CROSS_SDT := $(O)/gen/cross-include
SYSROOT_FLAGS = $(if $(SYSROOT),--sysroot=$(SYSROOT)) -idirafter $(abspath $(CROSS_SDT))
endif
# 0 when a cross-build has no libraries to link against but the C library.
CROSS_LIBS ?= 1

O       ?= build
USDT    ?= 1
SAN     ?= 0
PYTHON  := /usr/bin/python3

CC      ?= cc
CPPFLAGS ?=
CFLAGS  ?= -O2 -g
LDFLAGS ?=
# WERROR=1 makes every compiler warning an error, in the C and the BPF
# builds alike.  make check's builds set it from CHECK_WERROR, 1 by
# default: Debian 12's and 13's compilers build probekit without a warning.
# Unstable's compilers move, so its CI run reports warnings without
# failing on them (mk/stack.mk's STACKS_WARN_ONLY).
WERROR  ?= 0
WERROR_FLAGS = $(if $(filter 1,$(WERROR)),-Werror)
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-unused-parameter -Wformat=2 $(WERROR_FLAGS)

# Hardening, on whatever flags are given: a distribution's CPPFLAGS,
# CFLAGS and LDFLAGS (dpkg-buildflags) come after these, so they can only
# add to them or turn one off on purpose (-fno-stack-protector).
# _FORTIFY_SOURCE is defined only when the given flags do not define it
# (a second definition with another level would be a redefinition),
# and it needs -O, which CFLAGS has by default.
HARDEN_CPPFLAGS = $(if $(findstring _FORTIFY_SOURCE,$(CPPFLAGS) $(CFLAGS)),,-D_FORTIFY_SOURCE=2)
HARDEN_CFLAGS  := -fstack-protector-strong -fPIE
HARDEN_LDFLAGS := -pie -Wl,-z,relro -Wl,-z,now
# Reproducible: no absolute path of the checkout in what is built (DWARF,
# __FILE__), so two checkouts of one commit build the same bytes.  The BPF
# objects take the same map (mk/libbpf.mk).
PREFIX_MAP     := -ffile-prefix-map=$(CURDIR)=.
# Every C compile and link of a program probekit builds starts from these.
BASE_CFLAGS    = $(SYSROOT_FLAGS) $(HARDEN_CPPFLAGS) $(CPPFLAGS) $(HARDEN_CFLAGS) $(PREFIX_MAP) $(CFLAGS)
BASE_LDFLAGS   = $(SYSROOT_FLAGS) $(HARDEN_LDFLAGS) $(LDFLAGS)

ALL_CFLAGS = -std=gnu11 -pthread -fno-omit-frame-pointer -D_GNU_SOURCE \
	   $(WARN) $(BASE_CFLAGS) -I$(O)/gen -Itarget -Iinclude $(SAN_CFLAGS) $(EXTRA_CFLAGS)
ALL_LDFLAGS = -pthread $(SAN_CFLAGS) $(BASE_LDFLAGS) $(EXTRA_LDFLAGS)
LDLIBS  ?=

# The sanitizers of SAN=1, the fuzzers' replays and the unit tests.
SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=undefined
ifeq ($(SAN),1)
SAN_CFLAGS := $(SANITIZE)
endif

ifeq ($(V),1)
Q :=
msg = @true
else
Q := @
msg = @printf '  %-8s %s\n' $(1) $(2);
endif

CATALOG   := probes/blktgt.d
GENCAT    := probes/gencatalog
PROBES_H  := $(O)/gen/blktgt_probes.h
TARGET    := $(O)/bin/blktgt
TARGET_SRCS := $(wildcard target/*.c)
TARGET_OBJS := $(patsubst target/%.c,$(O)/obj/target/%.o,$(TARGET_SRCS))
ifeq ($(USDT),1)
PROBES_O  := $(O)/obj/blktgt_probes.o
endif

.DELETE_ON_ERROR:
.PHONY: all deps test check lint demo soak probes probes-doc clean

all: $(TARGET)

# Remember how $(O) was configured, so that switching USDT or SAN in the
# same directory rebuilds everything instead of mixing objects.
$(O)/.config: FORCE | $(O)/gen
	@echo 'USDT=$(USDT) SAN=$(SAN) CC=$(CC) SYSROOT=$(SYSROOT) CPPFLAGS=$(CPPFLAGS) CFLAGS=$(CFLAGS) LDFLAGS=$(LDFLAGS) EXTRA_CFLAGS=$(EXTRA_CFLAGS)' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
FORCE:

$(O)/gen $(O)/bin $(O)/obj/target:
	$(Q)mkdir -p $@

ifeq ($(USDT),1)
$(O)/gen/blktgt_sdt.h: $(CATALOG) | $(O)/gen
	$(call msg,DTRACE,$@)
	$(Q)dtrace -h -s $< -o $@

$(PROBES_H): $(CATALOG) $(GENCAT) $(O)/gen/blktgt_sdt.h $(O)/.config
	$(call msg,GEN,$@)
	$(Q)$(PYTHON) $(GENCAT) --enabled-header blktgt_sdt.h $< -o $@

# systemtap's dtrace defines the semaphores only in the -G object.  It
# compiles them with $$CC and $$CFLAGS from its environment: give it ours,
# so the object is hardened and maps the checkout's path like the rest.
$(PROBES_O): $(CATALOG) $(O)/.config | $(O)/obj/target
	$(call msg,DTRACE,$@)
	$(Q)CC='$(CC)' CFLAGS='$(BASE_CFLAGS)' dtrace -G -s $< -o $@
else
$(PROBES_H): $(CATALOG) $(GENCAT) $(O)/.config | $(O)/gen
	$(call msg,GEN,$@)
	$(Q)$(PYTHON) $(GENCAT) --disabled-header $< -o $@
endif

$(O)/obj/target/%.o: target/%.c $(PROBES_H) $(O)/gen/probekit_limits.h $(O)/.config | $(O)/obj/target
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(TARGET): $(TARGET_OBJS) $(PROBES_O) | $(O)/bin
	$(call msg,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

-include $(TARGET_OBJS:.o=.d)

deps:
	$(Q)scripts/deps.sh

# make check: the whole suite, for a machine that already has what it needs
# (after make deps, or a package build): it installs nothing and uses no
# network.  make test is make deps, then make check.
#
# The suite builds the variants it compares: the default build, a USDT=0
# build beside it, and an ASan+UBSan build, which runs the target's own
# tests (a leak or a sanitizer report makes blktgt exit non-zero, and every
# test checks its exit status).  The fuzz tests build their own sanitized
# harnesses, so they run once, in the whole suite.
#
# make check runs the suite strict, whoever calls it (a developer, .ci/run,
# make stack-check in a chroot): CHECK_ENV sets CI=true, so
# a test that needs a program make deps installs, or BPF tracing, fails
# rather than skips, and a skip not on tests/lib/allowed_skips.py's list fails.
# Each pytest run ends with its skips and their reasons.  A plain pytest
# run of one file by hand is not strict: it may skip, and says so.
CHECK_ENV = CI=true
SAN_TESTS = $(addprefix target/,test_target_rpc.py test_target_workload.py \
	    test_target_export.py test_target_lifecycle.py test_nbd.py \
	    test_bdev_delay.py)
# make check runs its stages in this order; make stack-check (mk/stack.mk)
# runs them less its STACK_LEAVE_OUT.  CHECK_DESELECT: pytest node id
# prefixes the whole suite leaves out.
CHECK_STAGES = check-build check-lint check-asan check-suite
CHECK_DESELECT =
# The builds of make check make warnings errors (WERROR above); 0 only
# reports them.
CHECK_WERROR ?= 1
.PHONY: $(CHECK_STAGES)
test: deps
	$(Q)$(MAKE) --no-print-directory check

check:
	$(Q)for t in $(CHECK_STAGES); do $(MAKE) --no-print-directory $$t || exit; done

check-build:
	$(Q)$(MAKE) --no-print-directory WERROR=$(CHECK_WERROR) all
	$(Q)$(MAKE) --no-print-directory O=$(O)/nousdt USDT=0 WERROR=$(CHECK_WERROR) all

check-lint:
	$(Q)$(MAKE) --no-print-directory lint

check-asan:
	$(Q)$(MAKE) --no-print-directory O=$(O)/asan SAN=1 WERROR=$(CHECK_WERROR) all
	@echo "== the target's own tests against the ASan+UBSan build"
	$(Q)cd tests && $(CHECK_ENV) BUILD=$(abspath $(O)/asan) $(PYTHON) -m pytest -k 'not fuzz' \
		$(SAN_TESTS) $(PYTEST_ARGS)

check-suite:
	@echo "== the whole suite$(if $(CHECK_DESELECT), less $(CHECK_DESELECT))"
	$(Q)cd tests && $(CHECK_ENV) BUILD=$(abspath $(O)) $(PYTHON) -m pytest \
		$(addprefix --deselect=,$(CHECK_DESELECT)) $(PYTEST_ARGS)

# Every wrapper and tool test SOAK_RUNS times beside a busy loop per CPU,
# as a loaded CI machine runs them; a flake shows here before CI sees it.
# SOAK_TESTS picks other files, SOAK_K a pytest -k expression.
SOAK_RUNS  ?= 50
SOAK_TESTS ?= wrapper/test_wrapper.py bt/test_bt.py bcc/test_bcc.py libbpf/test_libbpf.py
soak: all
	$(Q)cd tests && BUILD=$(abspath $(O)) ../scripts/soak.sh -n $(SOAK_RUNS) \
		$(if $(SOAK_K),-k '$(SOAK_K)') $(SOAK_TESTS)

demo: deps all
	$(Q)scripts/demo.sh $(TARGET)

# The probe list: from the catalog (no privilege needed), then from the
# binary's stapsdt notes as BCC's tplist reads them.
probes: $(TARGET)
	$(Q)$(PYTHON) $(GENCAT) --markdown $(CATALOG)
	$(Q)if command -v tplist-bpfcc >/dev/null; then tplist-bpfcc -l $(TARGET) -vv; \
	else echo "probes: tplist-bpfcc not found; run 'make deps'" >&2; exit 1; fi

# The probe table in probes/README.md is made from the catalog.
probes-doc:
	$(Q)$(PYTHON) $(GENCAT) --update-doc probes/README.md $(CATALOG)
	$(Q)$(PYTHON) $(GENCAT) --trace-defs $(CATALOG) -o target/trace_defs.h

# Everything that names a probe: checked against the catalog and binary.
# The generic tools (usdtlat, usdtcount) attach what their command line
# names, for any binary: they name no probe to check.
LINT_GENERIC = libbpf/usdtlat.bpf.c libbpf/usdtcount.bpf.c
# bench/window.bt traces bench/hitcost.c's own probe, not blktgt's catalog.
LINT_OTHER = bench/window.bt
# The BCC tools: every file in bcc/ but the modules they share, their
# examples and Python's byte-code cache (which running them leaves there,
# unless PYTHONDONTWRITEBYTECODE is set).
BCC_TOOL_FILES := $(filter-out %.txt %.md %.py bcc/__pycache__,$(wildcard bcc/*))
LINT_FILES = $(wildcard bt/*.bt) $(BCC_TOOL_FILES) \
             $(filter-out $(LINT_GENERIC),$(wildcard libbpf/*.bpf.c)) \
             $(filter-out $(LINT_OTHER),$(wildcard bench/*.bt bench/*_bcc.py))

lint: $(TARGET)
	$(Q)$(PYTHON) probes/probecheck --binary $(TARGET) --catalog $(CATALOG) $(LINT_FILES)

clean:
	rm -rf $(O)

# Variables that name what the build writes are the build's own: O=DIR is
# the one way to choose where output goes.  A value given on the command
# line would override them (make TARGET=/usr/bin/x would link over
# /usr/bin/x), so refuse it before anything is built.  tests/mk/test_make.py finds
# every variable that names an output and checks that it is listed here.
OUTPUT_VARS := PROBES_H TARGET TARGET_SRCS TARGET_OBJS PROBES_O \
	BENCH_DIR BENCH_PROGS FUZZ_JSONRPC_DIR FUZZ_NBD_DIR LIBBPF_TOOLS \
	LIBBPF_HELPERS LIBBPF_GEN LIBBPF_OBJ LIBBPF_BINS TRACE_TOOL \
	PROBEKIT_VERSION_H PROBEKIT_VERSION_SHARE BCC_TOOL_FILES BCC_TOOLS SCRIPT_LINKS SCRIPT_CMDS \
	GDB_SECTION_O STRUCTS_DIR STRUCTS_BT USDT_OBJ USDT_LIB USDT_REGS_H \
	WRAPPER_OBJ WRAPPER_OBJS WRAPPER_SCAN \
	EXPORTER EXPORTER_OBJS QUICKSTART CROSS_SDT FUZZ_NBD_DEPS FUZZ_NBD_SRCS LIMITS_H \
	COMPLETION_DIR COMPLETIONS UNIT_DIR UNIT_BINS UNIT_HDRS
$(foreach v,$(OUTPUT_VARS),$(if $(findstring command line,$(origin $(v)))$(findstring environment override,$(origin $(v))),\
	$(error $(v) names a build output and cannot be set on the command line; use O=DIR to build elsewhere)))

include $(wildcard mk/*.mk)
