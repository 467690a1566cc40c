// SPDX-License-Identifier: BSD-2-Clause
/*
 * exporter_buckets.h: which bucket of the exporter's histograms a value
 * falls in, and which values a bucket holds, for its BPF programs.  Plain
 * C: tests/lib/exp_buckets.c compiles the same functions and checks that the
 * two agree at every bound, since the batch loop counts a record in its
 * run's bucket by the range alone (exporter.bpf.c, struct batch_walk).
 * The includer has __u32 and __u64.
 */
#ifndef PROBEKIT_EXPORTER_BUCKETS_H
#define PROBEKIT_EXPORTER_BUCKETS_H

#include "exporter.h"
#include "pk_bits.h"

/* The latency bucket of ns: the first i whose bound, floor(2^k * 1e9)
 * with k = EXP_LAT_MIN_EXP + i, is at least ns (exporter.h says why that
 * is exact).  A binary search over the monotonic bounds, without a
 * branch: bound i is (1e9 << i) >> 26 (exact: 1e9 * 2^31 < 2^64), and
 * "bound < ns" is the top bit of ns | (bound - ns) (a bound is below
 * 2^63).  Each branch of the search would be a path the verifier walks
 * to the end of the caller, with a bucket it must keep apart: 64 paths
 * through io_batch's callback, 17331 instructions processed instead of
 * 2458, 14-20 of the exporter's 21 ms of verifier CPU.  Six compares,
 * as before. */
_Static_assert(EXP_LAT_FINITE == 32, "lat_bucket() searches 32 bounds");
#define LAT_BOUND(i) ((1000000000ULL << (i)) >> -EXP_LAT_MIN_EXP)
static __always_inline __u32 lat_below(__u32 i, __u64 ns)
{
	__u64 t = ns | (LAT_BOUND(i) - ns);

	PK_OPAQUE(t);	/* else a compare and a branch (pk_bits.h) */
	return t >> 63;
}

/* At most EXP_BUCKETS - 1: 16 + 8 + 4 + 2 + 1 + 1. */
static __always_inline __u32 lat_bucket(__u64 ns)
{
	__u32 lo = 0;
	int s;

	/* Bounds 0 .. lo-1 are below ns: 32 bounds, steps 16 .. 1. */
	for (s = 4; s >= 0; s--)
		lo += lat_below(lo + (1u << s) - 1, ns) << s;
	return lo + lat_below(lo, ns);	/* all 32 below: +Inf */
}

/* The size bucket of bytes: the smallest i with bytes <= 2^i, or +Inf. */
static __always_inline __u32 size_bucket(__u64 bytes)
{
	__u32 len = pk_bit_length(bytes ? bytes - 1 : 0);

	return len < EXP_SIZE_FINITE ? len : EXP_BUCKETS - 1;
}

/* The latencies lat_bucket() puts in bucket i, for i <= EXP_LAT_FINITE:
 * [*lo, *lo + *span), bound(i - 1) < ns <= bound(i), where bucket 0 starts
 * at 0 and +Inf ends at ~0.  No branch, for the reason lat_bucket() has
 * none: (i + 31) >> 5 is 0 for i == 0, else 1; i >> 5 is 1 for +Inf. */
static __always_inline void lat_range(__u32 i, __u64 *lo, __u64 *span)
{
	__u64 below = (i + 31) >> 5, inf = i >> 5;
	__u64 l = (LAT_BOUND((i - 1) & 31) + 1) & -below;
	__u64 hi = LAT_BOUND(i & 31) | -inf;

	*lo = l;
	*span = hi - l + 1;
}

/* The sizes size_bucket() puts in bucket i: bucket 0 holds 0 and 1, bucket
 * i in 1 .. EXP_SIZE_FINITE - 1 holds (2^(i-1), 2^i], +Inf everything
 * above 2^(EXP_SIZE_FINITE - 1).  A record's length is 32 bits. */
static __always_inline void size_range(__u32 i, __u64 *lo, __u64 *span)
{
	__u32 k = i < EXP_SIZE_FINITE ? i : EXP_SIZE_FINITE;
	__u64 l = k ? (1ULL << ((k - 1) & 31)) + 1 : 0;
	__u64 hi = i < EXP_SIZE_FINITE ? 1ULL << (i & 31) : 0xffffffffULL;

	*lo = l;
	*span = hi - l + 1;
}

#endif
