# SPDX-License-Identifier: BSD-2-Clause
# arm64: the cross-build's extras, and the emulated machine's smoke suite.
#
#   make ARCH=arm64 [USDT=0] [O=DIR]   everything for arm64 (default O:
#                                      build/arm64), the quickstart too
#   make arm64-smoke [O=DIR]           the arm64 userland (scripts/arm64.sh
#                                      sysroot, as root), make ARCH=arm64
#                                      into $(O)/arm64, then the smoke
#                                      suite in qemu-system-aarch64
#
# An arm64 build has nothing to run it here, so it builds the quickstart
# too (examples/quickstart/, through probes/probekit.mk as a project
# would include it), for the emulated machine to trace.

QUICKSTART := $(O)/quickstart/quickstart

ifeq ($(ARCH),arm64)
all: $(QUICKSTART)

# This machine's sys/sdt.h for the cross compiler (the Makefile says why),
# before anything is compiled: every compile depends on $(O)/.config.
HOST_SDT_DIR := $(dir $(firstword $(wildcard /usr/include/*/sys/sdt.h /usr/include/sys/sdt.h)))
$(O)/.config: | $(CROSS_SDT)/sys/sdt.h $(CROSS_SDT)/sys/sdt-config.h
ifneq ($(HOST_SDT_DIR),)
$(CROSS_SDT)/sys/%.h: $(HOST_SDT_DIR)%.h
	$(Q)mkdir -p $(@D) && cp $< $@
else
$(CROSS_SDT)/sys/%.h:
	@echo "ARCH=arm64: no sys/sdt.h on this machine; apt-get install systemtap-sdt-dev" >&2; exit 1
endif

else
.PHONY: arm64-smoke
arm64-smoke:
	$(Q)scripts/arm64.sh sysroot
	$(Q)$(MAKE) --no-print-directory ARCH=arm64 O=$(O)/arm64 all
	$(Q)scripts/arm64.sh smoke $(O)/arm64
endif

# The quickstart (make ARCH=arm64 builds it, and make kernel-smoke for
# this machine).  Its Makefile finds probekit.mk installed; here it is given
# the checkout's (probekit_mk and the generator, on the command line,
# override what it would look up), and the cross compiler with the
# sysroot (dtrace -G compiles the semaphores with the same $$CC).
$(QUICKSTART): examples/quickstart/quickstart.c examples/quickstart/quickstart.d \
		examples/quickstart/Makefile probes/probekit.mk $(O)/.config
	$(call msg,MAKE,$@)
	$(Q)$(MAKE) --no-print-directory -s -C examples/quickstart \
		PROBEKIT_PREFIX=$(CURDIR) probekit_mk=$(CURDIR)/probes/probekit.mk \
		PROBEKIT_GENCATALOG=$(CURDIR)/probes/gencatalog \
		PROBEKIT_INCLUDE=$(CURDIR)/include \
		CC='$(CC) $(SYSROOT_FLAGS)' USDT=$(USDT) O=$(abspath $(O)/quickstart) \
		$(abspath $(QUICKSTART))
