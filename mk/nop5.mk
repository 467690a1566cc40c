# SPDX-License-Identifier: BSD-2-Clause
# make USDT_NOP5=1: 5-byte nop probe sites (optimized uprobes on Linux 6.18+).
#
# probes/nop5/sys/sdt.h shadows <sys/sdt.h> and makes every site the 5-byte
# nop 0f 1f 44 00 00.  The kernel turns a traced 5-byte nop into a call to
# its uprobe trampoline, and that call writes below the stack pointer: a
# leaf function's red zone.  So the same flags turn the red zone off in
# EVERY target/*.c (one shared compile rule, so no file can be missed).
# bench/RESULTS.md has the measured gain; tests/probes/test_nop5.py the proof.

# x86-64 only, all of it: the 5-byte nop is an x86 instruction, the
# optimized uprobe an x86 kernel feature, and the red zone (and so
# -mno-red-zone) the x86-64 ABI's.  An arm64 site is the one 4-byte nop
# sys/sdt.h emits, and arm64 builds (make ARCH=arm64) take none of this.
NOP5_CFLAGS := -Iprobes/nop5 -mno-red-zone
NOP5_X86 := $(filter x86_64-%,$(shell $(CC) -dumpmachine))

USDT_NOP5 ?= 0
ifeq ($(USDT_NOP5),1)
ifeq ($(NOP5_X86),)
$(error USDT_NOP5=1: the 5-byte nop site is for x86-64 only, and $(CC) builds for $(shell $(CC) -dumpmachine); leave USDT_NOP5 unset)
endif
# EXTRA_CFLAGS is part of $(O)/.config, so switching rebuilds everything.
override EXTRA_CFLAGS += $(NOP5_CFLAGS)
endif

# io__batch's site is a 5-byte nop in every x86-64 build (target/bdev.c
# says why), so bdev.c never has a red zone, whatever USDT_NOP5 is.
ifneq ($(NOP5_X86),)
$(O)/obj/target/bdev.o: ALL_CFLAGS += -mno-red-zone
endif
