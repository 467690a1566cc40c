# SPDX-License-Identifier: BSD-2-Clause
# The kernels Debian ships: the smoke suite on each, in qemu.
#
#   make kernel-smoke KERNEL=R   deps, this machine's build and the
#                                quickstart, then scripts/kernel.sh smoke:
#                                Debian R's own kernel (R: bullseye 5.10,
#                                bookworm 6.1, trixie 6.12) booted in
#                                qemu-system-x86_64 on this userland, and
#                                tests/machines/kernel_smoke.py in it
#
# scripts/kernel.sh installs what it needs beyond make deps (qemu, cpio,
# busybox, kmod) and caches each kernel's packages.

.PHONY: kernel-smoke
kernel-smoke: deps
	$(Q)case " $(KERNEL_RELEASES) " in *" $(KERNEL) "*) ;; \
		*) echo "make kernel-smoke: KERNEL=$(KERNEL): name one of: $(KERNEL_RELEASES)" >&2; exit 2 ;; esac
	$(Q)$(MAKE) --no-print-directory all $(QUICKSTART)
	$(Q)scripts/kernel.sh smoke $(KERNEL) $(O)

KERNEL_RELEASES = $(shell scripts/kernel.sh releases)
