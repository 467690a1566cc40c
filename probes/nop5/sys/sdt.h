// SPDX-License-Identifier: BSD-2-Clause
/*
 * probes/nop5/sys/sdt.h: systemtap's <sys/sdt.h> with a 5-byte nop at
 * every probe site instead of the stock 1-byte nop.
 *
 * Put this directory first on the include path (make USDT_NOP5=1 does).
 * Linux 6.18 can turn a uprobe on a 5-byte nop (0f 1f 44 00 00) into a
 * call to a trampoline ("optimized uprobes"), which is cheaper per hit
 * than the int3 a 1-byte nop site takes.
 *
 * The call writes a return address (and the trampoline saves registers)
 * below the stack pointer, i.e. in the x86-64 red zone, where a leaf
 * function may keep its locals.  So every file that holds a probe site,
 * directly or through an inlined function, MUST be compiled with
 * -mno-red-zone; tests/probes/test_nop5.py shows the corruption otherwise.
 *
 * sys/sdt.h defines _SDT_NOP unconditionally, so it cannot be set before
 * the include; it is expanded only where a probe is used, so redefining
 * it after the include works.  ".nops 5" has neither commas nor '%',
 * which the header's stringified extended-asm template cannot take, and
 * GNU as encodes it as the single 5-byte nop.
 */
#ifndef PROBEKIT_NOP5_SDT_H
#define PROBEKIT_NOP5_SDT_H

#if !defined(__x86_64__)
#error "probes/nop5: the 5-byte nop probe site is for x86-64 only"
#endif

#include_next <sys/sdt.h>

#undef _SDT_NOP
#define _SDT_NOP .nops 5

#endif
