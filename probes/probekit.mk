# SPDX-License-Identifier: BSD-2-Clause
# probekit.mk: USDT probes for a C project, from a DTrace provider file.
# Installed as PREFIX/share/probekit/probekit.mk, which pkg-config names:
#   include $(shell pkg-config --variable=probekit_mk probekit)
# examples/quickstart/ shows a whole project built with it
# (doc/probes-in-your-code.md).
#
# Set, then include this file:
#   PROBEKIT_CATALOG  the catalog, NAME.d (one provider block)
#   PROBEKIT_OUT      the directory for generated files (default: gen)
#   USDT              1 (default): probes with semaphores; 0: none at all
# It defines, with rules to make them:
#   PROBEKIT_HEADER   $(PROBEKIT_OUT)/NAME_probes.h, the header call sites
#                     include: PROVIDER_PROBE(args) and
#                     PROVIDER_PROBE_ENABLED() for each probe
#   PROBEKIT_OBJ      $(PROBEKIT_OUT)/NAME_probes.o with USDT=1, the object
#                     that defines the semaphores: link it into the program
#                     (empty with USDT=0)
#   PROBEKIT_TABLE    $(PROBEKIT_OUT)/NAME_probes.md, the probe table for
#                     the docs (make it when wanted)
#   PROBEKIT_CFLAGS   -I$(PROBEKIT_OUT) and the directory of
#                     probekit_batch.h (a batch probe's flush policy), for
#                     the compiler
# Each generated file depends on the catalog and on USDT, so switching
# USDT remakes them.
#
# Another build system runs this file itself, so that the pipeline is
# declared here only (probekit-config.cmake for CMake; Meson's route in
# doc/probes-in-your-code.md):
#   make -f probekit.mk PROBEKIT_CATALOG=... PROBEKIT_OUT=... USDT=... TARGET
# where TARGET is probekit-outputs, at configure time: what the build
# makes and needs, one item a line ("header PATH", "object PATH" for each
# of PROBEKIT_OBJ, "cflag FLAG" for each of PROBEKIT_CFLAGS); or
# probekit-generate, at build time: make the header and the objects.  Needs systemtap's dtrace (systemtap-sdt-dev) for
# USDT=1, and python3.

ifndef PROBEKIT_CATALOG
$(error probekit.mk: set PROBEKIT_CATALOG to your catalog (a .d file) before including probekit.mk)
endif

# The including Makefile's first target stays its default goal.
probekit_goal := $(.DEFAULT_GOAL)

USDT         ?= 1
PROBEKIT_OUT ?= gen
# The generator sits in the tree this file was installed in.
PROBEKIT_HOME := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
PROBEKIT_GENCATALOG ?= $(PROBEKIT_HOME)/probes/gencatalog
# probekit_batch.h's directory: include/ beside an installed probekit.mk;
# a checkout's build (mk/arm64.mk) names its own.
PROBEKIT_INCLUDE ?= $(PROBEKIT_HOME)/include
PROBEKIT_DTRACE ?= dtrace

ifneq ($(USDT),0)
ifneq ($(USDT),1)
$(error probekit.mk: USDT must be 1 (probes) or 0 (none), not '$(USDT)')
endif
endif

probekit_name    := $(basename $(notdir $(PROBEKIT_CATALOG)))
PROBEKIT_HEADER  := $(PROBEKIT_OUT)/$(probekit_name)_probes.h
PROBEKIT_TABLE   := $(PROBEKIT_OUT)/$(probekit_name)_probes.md
PROBEKIT_CFLAGS  := -I$(PROBEKIT_OUT) -I$(PROBEKIT_INCLUDE)
probekit_sdt_h   := $(PROBEKIT_OUT)/$(probekit_name)_sdt.h
probekit_mode    := $(PROBEKIT_OUT)/.probekit-usdt

# Remember USDT, so that switching it remakes the header.
$(probekit_mode): FORCE_PROBEKIT
	@mkdir -p $(@D)
	@echo 'USDT=$(USDT)' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
.PHONY: FORCE_PROBEKIT
FORCE_PROBEKIT:

ifeq ($(USDT),1)
PROBEKIT_OBJ := $(PROBEKIT_OUT)/$(probekit_name)_probes.o

$(probekit_sdt_h): $(PROBEKIT_CATALOG) $(probekit_mode)
	$(PROBEKIT_DTRACE) -h -s $< -o $@

$(PROBEKIT_HEADER): $(PROBEKIT_CATALOG) $(probekit_sdt_h) $(probekit_mode)
	$(PROBEKIT_GENCATALOG) --enabled-header $(notdir $(probekit_sdt_h)) $< -o $@

# systemtap's dtrace defines the semaphores only in the -G object.  It
# compiles them with $$CC and $$CFLAGS from its environment: give it the
# project's, so the object is built (hardened, path-mapped) like the rest.
$(PROBEKIT_OBJ): $(PROBEKIT_CATALOG) $(probekit_mode)
	CC='$(CC)' CFLAGS='$(CPPFLAGS) $(CFLAGS)' $(PROBEKIT_DTRACE) -G -s $< -o $@
else
PROBEKIT_OBJ :=

$(PROBEKIT_HEADER): $(PROBEKIT_CATALOG) $(probekit_mode)
	$(PROBEKIT_GENCATALOG) --disabled-header $< -o $@
endif

$(PROBEKIT_TABLE): $(PROBEKIT_CATALOG)
	@mkdir -p $(@D)
	$(PROBEKIT_GENCATALOG) --markdown $< -o $@

# For another build system (above).  Phony, and never the default goal.
.PHONY: probekit-outputs probekit-generate
probekit-outputs:
	@printf '%s\n' 'header $(PROBEKIT_HEADER)' $(foreach o,$(PROBEKIT_OBJ),'object $(o)') \
		$(foreach f,$(PROBEKIT_CFLAGS),'cflag $(f)')
probekit-generate: $(PROBEKIT_HEADER) $(PROBEKIT_OBJ)

.DEFAULT_GOAL := $(probekit_goal)
