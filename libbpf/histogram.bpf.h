// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * histogram.bpf.h: how a value picks its slot, for the BPF programs.
 *
 * The slots are those of the bcc/ tools, so a libbpf tool and its bcc/
 * twin fill the same slots from the same events:
 *  - log2: slot 1 + floor(log2(v)), with 0 and 1 both in slot 1, as
 *    the bcc/ tools count; slot s > 1 holds [2^(s-1), 2^s - 1];
 *  - linear: slot v / width, the last slot also holding everything above.
 */
#ifndef PROBEKIT_HISTOGRAM_BPF_H
#define PROBEKIT_HISTOGRAM_BPF_H

#include "probekit.bpf.h"
#include "histogram.h"

/* The log2 slot of v: floor(log2(v)) + 1, the length of v's binary form,
 * for any v > 0; v == 0 shares slot 1 with v == 1. */
static __always_inline __u32 hist_log2_slot(__u64 v)
{
	__u32 len = pk_bit_length(v);

	return len ? len : 1;
}

/* The values of log2 slot s: slot 1 holds 0 and 1, slot s > 1
 * [2^(s - 1), 2^s - 1]. */
static __always_inline __u64 hist_log2_lo(__u32 s)
{
	return s <= 1 ? 0 : 1ULL << ((s - 1) & 63);
}

static __always_inline __u64 hist_log2_hi(__u32 s)
{
	return s >= 64 ? ~0ULL : (1ULL << s) - 1;
}

/* width is never 0: user space refuses it. */
static __always_inline __u32 hist_linear_slot(__u64 v, __u64 width)
{
	__u64 s = width ? v / width : v;

	return s < HIST_LINEAR_SLOTS - 1 ? (__u32)s : HIST_LINEAR_SLOTS - 1;
}

static __always_inline __u32 hist_slot(__u64 v, bool linear, __u64 width)
{
	__u32 s = linear ? hist_linear_slot(v, width) : hist_log2_slot(v);

	/* Redundant for the arithmetic above; it proves the bound to the
	 * verifier. */
	return s < HIST_MAX_SLOTS ? s : HIST_MAX_SLOTS - 1;
}

/*
 * --max-rate: with count_hits set before load, every program calls
 * hit_count() first, so hits[0] holds, per CPU, how many times the tool's
 * probes fired.  User space sums the CPUs' slots (tool_loop.h,
 * run_loop()).  Without --max-rate the branch is all a hit pays.
 */
const volatile bool count_hits = false;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline void hit_count(void)
{
	__u32 zero = 0;
	__u64 *n;

	if (!count_hits)
		return;
	n = bpf_map_lookup_elem(&hits, &zero);
	if (n)
		*n += 1;
}

/*
 * A run: consecutive counts into one slot of one histogram, added with one
 * atomic add when the run ends instead of one per value.  The records of
 * an io__batch mostly share a histogram and a slot (their I/Os were
 * submitted and completed together), and the atomic add was the dearest
 * step of binning a record.  [lo, lo + span) is the range of values the
 * slot holds, so a value that extends the run costs a subtraction and a
 * compare, not its slot's arithmetic.  Zeroed, it is no run: span 0
 * extends nothing and h NULL adds nothing.  No branch tests n: a count
 * the verifier must track exactly would make every path through a batch
 * loop a state of its own.
 */
struct hist_run {
	struct hist *h;
	__u64 lo, span;
	__u32 slot, n;
};

static __always_inline void hist_run_end(struct hist_run *run)
{
	__u32 s = run->slot;

	if (run->h && s < HIST_MAX_SLOTS)
		__sync_fetch_and_add(&run->h->slots[s], run->n);
	run->h = NULL;
	run->span = 0;
}

/* Whether v extends the run (of histogram h: a caller that changes
 * histograms ends the run first). */
static __always_inline bool hist_run_extends(const struct hist_run *run, __u64 v)
{
	return v - run->lo < run->span;
}

/* Start a run of one value in slot s of h, whose values are [lo, hi]
 * (hi inclusive, so that the top slot can reach ~0). */
static __always_inline void hist_run_start(struct hist_run *run, struct hist *h,
					   __u32 s, __u64 lo, __u64 hi)
{
	run->h = h;
	run->slot = s;
	run->lo = lo;
	run->span = hi - lo + 1;	/* 0 for [0, ~0]: no value extends it */
	run->n = 1;
}

/*
 * A hash that user space empties each interval, double-buffered so that no
 * hit is lost to the emptying: name_a and name_b hold the values, and
 * name, an array of maps of one slot, names the one the programs add into
 * (name_a from before the tool attaches; user space keeps which is which).  A program looks the
 * slot up once per hit (drained_hash_cur()) and adds into what it got
 * before it returns.  User space points the slot at the other hash, waits
 * until every program that may still hold the old one has returned, then
 * reads and empties the old hash, which no program writes any more
 * (tool_drain.c, drained_hash_take()).  One slot, not one per hash: each
 * update of an array of maps from user space waits an RCU grace period
 * (about 15 ms here), and the tool waits for the first before it says it
 * is ready: no .values, so libbpf does not set it at load; user space
 * creates the maps and sets it while libbpf loads (tool_drain.c,
 * drained_hash_init()).  Each hash holds max (--max-keys,
 * --max-strings; user space sets both before load): the bound of one
 * interval, as before.
 */
#define DRAINED_HASH(name, key_t, value_t, max, flags)			\
struct name##_hash {							\
	__uint(type, BPF_MAP_TYPE_HASH);				\
	__uint(max_entries, max);					\
	__uint(map_flags, flags);					\
	__type(key, key_t);						\
	__type(value, value_t);						\
};									\
/* Initialized, so emitted here, before name: clang's BTF would else	\
 * meet the key and value types first through name's inner map and	\
 * emit them as forward declarations, which libbpf refuses. */		\
struct name##_hash name##_a SEC(".maps") = {},				\
	name##_b SEC(".maps") = {};					\
struct {								\
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);			\
	__uint(max_entries, 1);						\
	__type(key, __u32);						\
	__array(values, struct name##_hash);				\
} name SEC(".maps")

/* The hash of a DRAINED_HASH that this interval's hits go into; NULL
 * never, in fact (slot 0 is always set), but the verifier must see the
 * check. */
static __always_inline void *drained_hash_cur(void *outer)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(outer, &zero);
}

/* An all-zero histogram to create new map entries from. */
static const struct hist hist_zero;

/* Values hist_get() found no room for: the histogram map was full (its
 * --max-keys keys this interval).  User space takes it each interval and
 * says "N I/Os dropped (table full)" (tool_drain.h, hist_report()). */
__u64 hist_dropped;

/* n values dropped, which user space says (bcc/probekit_bcc_drain.py's
 * hist_drop(), its twin). */
static __always_inline void hist_drop(__u64 n)
{
	__sync_fetch_and_add(&hist_dropped, n);
}

/* The histogram at key in outer (a DRAINED_HASH of struct hist), created
 * on first use; NULL, and one value counted in hist_dropped, when this
 * interval's hash is full.  Each caller drops the value it called for
 * when NULL comes back. */
static __always_inline struct hist *hist_get(void *outer, const void *key)
{
	void *map = drained_hash_cur(outer);
	struct hist *h;

	if (!map) {
		hist_drop(1);
		return NULL;
	}
	h = bpf_map_lookup_elem(map, key);
	if (!h) {
		bpf_map_update_elem(map, key, &hist_zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(map, key);
		if (!h)
			hist_drop(1);
	}
	return h;
}

/* Count one value in slot of the histogram at key in map.  A full map
 * drops the count rather than failing the probe. */
static __always_inline void hist_increment(void *map, const void *key,
					   __u32 slot)
{
	struct hist *h = hist_get(map, key);

	if (h)
		__sync_fetch_and_add(&h->slots[slot], 1);
}

#endif
