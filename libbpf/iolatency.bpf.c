// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * iolatency.bpf.c: latency from blktgt:io__submit to blktgt:io__done.
 *
 * By default, from blktgt:io__batch: each record carries its I/O's
 * submit and completion times, stamped by blktgt, so one hit serves up to
 * 64 I/Os and nothing is kept in flight here.
 *
 * With --per-io, from the two per-I/O probes: an I/O is keyed by its id
 * (the first argument of both) and process, never by thread, since a
 * reactor may complete an I/O that another one submitted.  The key is
 * deleted at completion, so the map holds only I/Os in flight, and I/Os
 * already in flight when tracing starts are not counted.  A submit the
 * full map refuses is counted, and the process's exit reclaims what it
 * left in flight (pair_state.bpf.h).
 */
#include "probekit.bpf.h"
#include <bpf/usdt.bpf.h>

#include "iolatency.h"
#include "histogram.bpf.h"
#include "blktgt_io.bpf.h"
#include "pair_state.bpf.h"

/* Options, set by user space before load. */
const volatile bool per_bdev = false;	/* -B */
const volatile bool per_type = false;	/* -O */
const volatile bool linear = false;	/* -L */
const volatile __u64 width = 10;	/* -W: linear bucket width, in units */
const volatile __u64 unit_ns = 1000;	/* -n 1, -u 1000, -m 1000000 */

/* An I/O in flight: its process (tid 0: any thread may end it), its id. */
struct io_start_key {
	struct pair_key_head head;
	__u64 id;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PAIR_INFLIGHT_DEFAULT);	/* --max-inflight */
	__type(key, struct io_start_key);
	__type(value, __u64);		/* submit time, ns */
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_HISTS);
	/* Allocated on first use: preallocating 1024 histograms of 8 KB
	 * would cost start-up time for nothing. */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct io_key);
	__type(value, struct hist);
} hists SEC(".maps");

/* blktgt:io__submit(u64 id, char *bdev, u32 type, u64 offset, u64 len,
 *                   char *type_name) */
SEC("usdt")
int BPF_USDT(io_submit, __u64 id)
{
	hit_count();
	struct io_start_key key = { .head.tgid = bpf_get_current_pid_tgid() >> 32,
				    .id = id };
	__u64 ts = bpf_ktime_get_ns();

	pair_start(&start, &key, &ts);
	return 0;
}

static __always_inline int handle_done(__u64 id, const char *bdev,
				       const char *type_name)
{
	struct io_start_key skey = { .head.tgid = bpf_get_current_pid_tgid() >> 32,
				     .id = id };
	struct io_key key = {};
	__u64 *tsp, delta;

	tsp = bpf_map_lookup_elem(&start, &skey);
	if (!tsp)
		return 0;	/* submitted before tracing started */
	delta = (bpf_ktime_get_ns() - *tsp) / unit_ns;
	bpf_map_delete_elem(&start, &skey);

	/* _str stops at the NUL of a zeroed key: equal names, equal keys. */
	if (per_bdev)
		bpf_probe_read_user_str(key.bdev, sizeof(key.bdev), bdev);
	if (per_type)
		bpf_probe_read_user_str(key.type, sizeof(key.type), type_name);
	hist_increment(&hists, &key, hist_slot(delta, linear, width));
	return 0;
}

/* blktgt:io__done(u64 id, char *bdev, u32 type, u64 len, s32 status,
 *                 char *type_name) */
SEC("usdt")
int BPF_USDT(io_done, __u64 id, const char *bdev, __u32 type, __u64 len,
	     __s32 status, const char *type_name)
{
	hit_count();
	return handle_done(id, bdev, type_name);
}

/* --per-io: a process's exit reclaims the I/Os it left in flight. */
SEC("raw_tp/sched_process_exit")
int io_exit(void *ctx)
{
	return pair_on_exit(ctx, &start, NULL);
}

/* The log2 slot of v / unit, for unit >= 1 and unit_log2 its floor(log2),
 * without the division: hist_log2_slot(v / unit) is 1 + floor(log2(v /
 * unit)), and with L = floor(log2(v)), M = unit_log2 and d = L - M, that
 * floor is d when v >= unit << d and d - 1 otherwise (v / unit lies in
 * (2^(d-1), 2^(d+1))).  unit << d < 2^(L+1) cannot overflow. */
static __always_inline __u32 log2_slot_of_quotient(__u64 v, __u64 unit, __u32 unit_log2)
{
	__u32 d, s;

	if (v < unit)
		return 1;
	d = (hist_log2_slot(v) - 1 - unit_log2) & 63;
	s = v >= unit << d ? d + 1 : d;
	return s < HIST_MAX_SLOTS ? s : HIST_MAX_SLOTS - 1;
}

/* blktgt:io__batch(s32 thread, s32 count, struct io_rec *recs,
 *                  char *bdev_names) */
SEC("usdt")
int io_batch(struct pt_regs *ctx)
{
	struct io_batch_walk w = IO_BATCH_WALK_INIT;
	__u32 count = 0;
	/* The options once, not per record (they are volatile to clang). */
	const __u64 unit = unit_ns;
	const bool lin = linear;
	const __u64 unit_width = unit * width;	/* < 2^51: -W <= INT_MAX */
	__u32 unit_log2 = hist_log2_slot(unit) - 1;
	struct io_rec *r, *end;

	hit_count();
	r = io_batch_copy(ctx, &count);
	if (!r)
		return 0;
	end = r + count;
	for (__u32 i = 0; i < IO_BATCH_MAX && r < end; i++, r++) {
		__u64 ns = r->done_ns - r->submit_ns, lo, hi;
		__u32 s;

		if (io_batch_next(ctx, &hists, &w, r, ns, per_bdev, per_type))
			continue;
		/* A new run: its slot, and the range of ns the slot holds. */
		if (lin) {
			/* floor(floor(ns / unit) / width) = floor(ns / uw) */
			s = hist_slot(ns / unit, true, width);
			lo = (__u64)s * unit_width;
			hi = s == HIST_LINEAR_SLOTS - 1 ? ~0ULL : lo + unit_width - 1;
		} else {
			/* A 64-bit division is the dearest instruction here:
			 * the log2 histogram goes without it.  Slot 1 holds
			 * [0, 2 unit), slot s > 1 [unit << (s - 1), unit << s). */
			s = log2_slot_of_quotient(ns, unit, unit_log2);
			lo = s <= 1 ? 0 : unit << (s - 1);
			hi = s + unit_log2 >= 63 ? ~0ULL : (unit << s) - 1;
		}
		hist_run_start(&w.run, w.h, s, lo, hi);
	}
	hist_run_end(&w.run);
	return 0;
}

/* bpf_probe_read_user_str() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
