// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * usdtcount.bpf.c: hits per USDT probe, and optionally the distribution
 * of one argument of each, in any binary.
 *
 * One program, attached as a plain uprobe at every site of every probe
 * counted (usdt_sites.h says why); the site's cookie names its probe and
 * the argument operand there.  Counts and histograms are global arrays
 * that user space reads through the skeleton's mmap.  The counts are
 * double-buffered: a hit adds into counts[count_buf]; user space flips
 * count_buf, waits until no program can still add into the other
 * (probes_quiesce()), and reads it.  So every probe's count of an
 * interval ends at one instant: a pair (io__submit, io__done) agrees
 * within what was in flight, where reading one counter after the other
 * let a reader preempted between the two reads see the second gain
 * hundreds (437 apart, measured under load).  The window opens the same
 * way: the hits while the probes attach, one after another, go to
 * counts[1], emptied once all are attached.  The histograms, which
 * pair nothing, are cleared with an atomic exchange, so no hit falls
 * between two intervals.
 */
#include "probekit.bpf.h"

#include "usdtcount.h"
#include "histogram.bpf.h"
#include "usdt_site.bpf.h"

/* Options, set by user space before load. */
const volatile __u32 mode = USDTCOUNT_COUNT;	/* enum usdtcount_mode */

__u32 count_buf;	/* which of counts[] the hits add into: 0 or 1 */
__u64 counts[2][USDTCOUNT_PROBES_MAX];
/* -H: negative values are counted, not bucketed. */
__u64 negative[USDTCOUNT_PROBES_MAX];
__u64 hists[USDTCOUNT_PROBES_MAX][HIST_LOG2_SLOTS];

/* -S: hits whose value found strs full, so that no value shows them:
 * counted, and said ("N strings dropped (table full)"). */
__u64 strs_dropped;

/* Sized by user space (--max-strings) before load. */
DRAINED_HASH(strs, struct usdtcount_str, __u64, USDTCOUNT_STRS_MAX, 0);

static __always_inline void count_str(__u32 probe, __u64 ptr)
{
	struct usdtcount_str key;
	__u64 one = 1, *c;
	void *map = drained_hash_cur(&strs);

	if (!map) {
		__sync_fetch_and_add(&strs_dropped, 1);
		return;
	}

	__builtin_memset(&key, 0, sizeof(key));
	key.probe = probe;
	/* A string the process never touched reads empty; it is still
	 * counted, as the value "". */
	bpf_probe_read_user_str(key.s, sizeof(key.s), (const void *)ptr);
	c = bpf_map_lookup_elem(map, &key);
	if (c) {
		__sync_fetch_and_add(c, 1);
		return;
	}
	/* Another CPU may have inserted it meanwhile; else the map is
	 * full, and the value is dropped and counted. */
	if (bpf_map_update_elem(map, &key, &one, BPF_NOEXIST)) {
		c = bpf_map_lookup_elem(map, &key);
		if (c)
			__sync_fetch_and_add(c, 1);
		else
			__sync_fetch_and_add(&strs_dropped, 1);
	}
}

SEC("uprobe")
int hit(struct pt_regs *ctx)
{
	const struct usdt_site *site = usdt_site_this(ctx);
	__u32 p, s;
	__u64 v;

	hit_count();
	if (!site)
		return 0;
	p = site->probe;
	if (p >= USDTCOUNT_PROBES_MAX)
		return 0;
	__sync_fetch_and_add(&counts[*(volatile __u32 *)&count_buf & 1][p], 1);
	if (mode == USDTCOUNT_COUNT)
		return 0;
	v = usdt_site_arg(ctx, &site->arg);
	if (mode == USDTCOUNT_STR) {
		count_str(p, v);
		return 0;
	}
	/* Only an argument whose spec is signed ("-4@...") has negative
	 * values: an unsigned one above 2^63 is large, not negative. */
	if (site->arg.is_signed && (__s64)v < 0) {
		__sync_fetch_and_add(&negative[p], 1);
		return 0;
	}
	s = hist_log2_slot(v);
	/* Always true (a u64 has 64 bits), so clang would drop the test
	 * that proves the bound to the verifier; the empty asm hides s. */
	asm volatile("" : "+r"(s));
	if (s < HIST_LOG2_SLOTS)
		__sync_fetch_and_add(&hists[p][s], 1);
	return 0;
}

/* --gate: attached only for the semaphore it raises. */
SEC("uprobe")
int gate(struct pt_regs *ctx)
{
	return 0;
}

/* bpf_probe_read_user_str() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
