// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * funclat.bpf.c: a function's argument, return value and latency, by
 * uprobe and uretprobe.
 *
 * Entry and return of one call run on the same thread, so the entry time
 * is keyed by thread (unlike an I/O, which may finish elsewhere); the
 * key is deleted at return, or at the thread's exit (pair_state.bpf.h), so
 * a later thread given a dead one's id never pairs with its entry.  An
 * entry the full table refuses is counted.  The histograms are global variables that
 * user space reads through the skeleton's mmap and clears slot by slot
 * with an atomic exchange, so no count is lost between intervals.
 */
#include "probekit.bpf.h"

#include "funclat.h"
#include "histogram.bpf.h"
#include "pair_state.bpf.h"

/* Options, set by user space before load. */
const volatile __u32 arg_index = 4;	/* -a: 1..6 */
const volatile __u64 arg_mask = ~0ULL;	/* --arg-bits 32: 0xffffffff */
const volatile __u64 unit_ns = 1;	/* -n 1, -u 1000, -m 1000000 */

struct hist hists[FUNCLAT_NHISTS];
__u64 negative;				/* returns < 0: errors */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PAIR_INFLIGHT_DEFAULT);	/* --max-inflight */
	__type(key, struct pair_key_head);	/* the thread */
	__type(value, __u64);		/* entry time, ns */
} start SEC(".maps");

SEC("uprobe")
int func_entry(struct pt_regs *ctx)
{
	hit_count();
	__u64 id = bpf_get_current_pid_tgid();
	struct pair_key_head key = { .tgid = id >> 32, .tid = (__u32)id };
	__u64 ts = bpf_ktime_get_ns();
	__u64 arg = pk_regs_arg(ctx, arg_index) & arg_mask;

	__sync_fetch_and_add(&hists[FUNCLAT_ARG].slots[hist_slot(arg, false, 1)],
			     1);
	pair_start(&start, &key, &ts);
	return 0;
}

SEC("uretprobe")
int func_return(struct pt_regs *ctx)
{
	hit_count();
	__u64 id = bpf_get_current_pid_tgid();
	struct pair_key_head key = { .tgid = id >> 32, .tid = (__u32)id };
	__s64 ret = PT_REGS_RC(ctx);
	__u64 *tsp, delta;

	tsp = bpf_map_lookup_elem(&start, &key);
	if (!tsp)
		return 0;	/* entered before tracing started */
	delta = (bpf_ktime_get_ns() - *tsp) / unit_ns;
	bpf_map_delete_elem(&start, &key);

	__sync_fetch_and_add(
		&hists[FUNCLAT_LATENCY].slots[hist_slot(delta, false, 1)], 1);
	if (ret < 0)
		__sync_fetch_and_add(&negative, 1);
	else
		__sync_fetch_and_add(
			&hists[FUNCLAT_RETVAL].slots[hist_slot(ret, false, 1)], 1);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int func_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct pair_key_head key = { .tgid = id >> 32, .tid = (__u32)id };

	return pair_on_exit(ctx, &start, &key);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
