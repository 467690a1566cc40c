// SPDX-License-Identifier: BSD-2-Clause
/*
 * pk_bits.h: bit arithmetic that BPF programs use, in plain C, so that a
 * host test can compile the same functions (tests/lib/exp_buckets.c).  The
 * includer has __u32 and __u64 (vmlinux.h, or <linux/types.h>).
 */
#ifndef PROBEKIT_BITS_H
#define PROBEKIT_BITS_H

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/*
 * Make x opaque to the compiler: it must keep the arithmetic around it as
 * written.  clang 19 and later see that a sign bit taken from an
 * arithmetic mask (x >> 63, the top bit of a | (b - a)) is a compare, and
 * turn the branch-free code back into a compare and a branch, since BPF
 * has no conditional move; in a loop the verifier walks each branch as a
 * path of its own (the exporter's batch loop: 184,427 instructions
 * processed, 2.3 s to load, where clang 14's code took 8,016).
 */
#define PK_OPAQUE(x) __asm__ volatile("" : "+r"(x))

/*
 * The number of binary digits of v (0 for 0): copying v's highest set bit
 * into every bit below it leaves a mask of ones as long as v's binary
 * form, and the ones, counted, are that length.  Straight-line code with
 * no loop for the verifier to bound: clang, having no population-count
 * instruction for BPF, expands __builtin_popcountll() into shifts, masks
 * and a multiply.
 */
static __always_inline __u32 pk_bit_length(__u64 v)
{
	v |= v >> 1;
	v |= v >> 2;
	v |= v >> 4;
	v |= v >> 8;
	v |= v >> 16;
	v |= v >> 32;
	return __builtin_popcountll(v);
}

#endif
