// SPDX-License-Identifier: BSD-2-Clause
/*
 * exp_buckets.c: the exporter's bucket of a value against the values its
 * bucket holds (libbpf/exporter_buckets.h), compiled for the host by
 * tests/libbpf/test_exporter.py.  The BPF batch loop bins a record by its run's
 * range alone, so a range one value too wide would put values in a wrong
 * bucket unseen.  Checked: the ranges tile every value without a gap or an
 * overlap; each range's ends, and the values on either side of them, fall
 * in the buckets they should; each latency bound is floor(2^k * 1e9), the
 * label's value; and values between, spread over every bucket.  Prints
 * the number of checks and exits 0, or names the first failure and exits 1.
 */
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>

#include "exporter_buckets.h"

static unsigned long long checks;

#define CHECK(cond, ...) do {						\
	checks++;							\
	if (!(cond)) {							\
		fprintf(stderr, "exp_buckets: " __VA_ARGS__);		\
		fputc('\n', stderr);					\
		exit(1);						\
	}								\
} while (0)

/* floor(2^k * 1e9), k = EXP_LAT_MIN_EXP + i, another way than LAT_BOUND. */
static __u64 label_bound(int i)
{
	int k = EXP_LAT_MIN_EXP + i;

	return k < 0 ? 1000000000ULL >> -k : 1000000000ULL << k;
}

/* The values near v, and a spread below it, into bucket want by fn. */
static void around(__u32 (*fn)(__u64), __u64 v, __u32 want, const char *what)
{
	CHECK(fn(v) == want, "%s(%llu) = %u, want %u", what,
	      (unsigned long long)v, fn(v), want);
}

static __u32 lat(__u64 v) { return lat_bucket(v); }
static __u32 size(__u64 v) { return size_bucket(v); }

/* Buckets 0 .. last (skipping those in skip) tile [0, top]: bucket i is
 * [lo, lo + span) by range(), and fn puts both ends, and a spread of
 * values between, in i, and the values just outside in the neighbours. */
static void tile(void (*range)(__u32, __u64 *, __u64 *), __u32 (*fn)(__u64),
		 __u32 last, __u32 skip, __u64 top, const char *what)
{
	__u64 next = 0, lo, span, hi = 0;
	__u32 i, prev = 0;

	for (i = 0; i <= last; i++) {
		if (i == skip)
			continue;
		range(i, &lo, &span);
		hi = lo + span - 1;	/* span 0: all 2^64 values */
		CHECK(lo == next, "%s bucket %u starts at %llu, want %llu", what,
		      i, (unsigned long long)lo, (unsigned long long)next);
		CHECK(hi >= lo && hi <= top, "%s bucket %u ends at %llu", what, i,
		      (unsigned long long)hi);
		around(fn, lo, i, what);
		around(fn, hi, i, what);
		for (__u64 d = 1; d <= hi - lo; d = d * 3 + 1) {
			around(fn, lo + d, i, what);
			if (d > (hi - lo) / 3)
				break;	/* d * 3 + 1 would wrap */
		}
		if (i)
			around(fn, lo - 1, prev, what);
		prev = i;
		next = hi + 1;
	}
	CHECK(hi == top, "%s's last bucket ends at %llu, not %llu", what,
	      (unsigned long long)hi, (unsigned long long)top);
}

static void lat_range_fn(__u32 i, __u64 *lo, __u64 *span) { lat_range(i, lo, span); }
static void size_range_fn(__u32 i, __u64 *lo, __u64 *span) { size_range(i, lo, span); }

int main(void)
{
	__u64 lo, span;

	for (int i = 0; i < EXP_LAT_FINITE; i++) {
		lat_range(i, &lo, &span);
		CHECK(lo + span - 1 == label_bound(i), "latency bucket %d ends at "
		      "%llu, not at its label's floor(2^%d * 1e9) = %llu", i,
		      (unsigned long long)(lo + span - 1), EXP_LAT_MIN_EXP + i,
		      (unsigned long long)label_bound(i));
	}
	tile(lat_range_fn, lat, EXP_BUCKETS - 1, EXP_BUCKETS, ~0ULL, "latency");
	/* Size bucket EXP_SIZE_FINITE is never used: +Inf follows 2^30. */
	tile(size_range_fn, size, EXP_BUCKETS - 1, EXP_SIZE_FINITE, 0xffffffffULL,
	     "size");
	for (int i = 0; i < EXP_SIZE_FINITE; i++)
		around(size, 1ULL << i, i, "size");
	printf("exp_buckets: %llu checks passed\n", checks);
	return 0;
}
