// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * iolatency.bpf.c: latency from blktgt:io__submit to blktgt:io__done.
 *
 * By default, from blktgt:io__batch: each record carries its I/O's
 * submit and completion times, stamped by blktgt, so one hit serves up to
 * 256 I/Os and nothing is kept in flight here.
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
const volatile __u64 width = 0;		/* -W: linear bucket width, in units
					 * (user space sets it: the spec's
					 * default, or -W) */
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

/* Allocated on first use: preallocating 1024 histograms of 8 KB
 * would cost start-up time for nothing. */
DRAINED_HASH(hists, struct io_key, struct hist, MAX_HISTS, BPF_F_NO_PREALLOC);

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

/* What io_batch's loop carries from one record to the next: the batch,
 * the options read once (they are volatile to clang), and the walk. */
struct lat_batch {
	struct pt_regs *ctx;
	const struct io_rec *recs;	/* the copy, in the scratch map */
	__u32 count, unit_log2;
	__u64 unit, unit_width;
	bool lin;
	struct io_batch_walk w;
};

/* The slot of ns, a latency in ns, and the range of ns the slot holds,
 * [*lo, *hi]: where a new run starts. */
static __always_inline __u32 lat_slot(const struct lat_batch *b, __u64 ns,
				      __u64 *lo, __u64 *hi)
{
	__u32 s;

	if (b->lin) {
		/* floor(floor(ns / unit) / width) = floor(ns / uw) */
		s = hist_slot(ns / b->unit, true, width);
		*lo = (__u64)s * b->unit_width;
		*hi = s == HIST_LINEAR_SLOTS - 1 ? ~0ULL : *lo + b->unit_width - 1;
	} else {
		/* A 64-bit division is the dearest instruction here: the log2
		 * histogram goes without it.  Slot 1 holds [0, 2 unit), slot
		 * s > 1 [unit << (s - 1), unit << s). */
		s = log2_slot_of_quotient(ns, b->unit, b->unit_log2);
		*lo = s <= 1 ? 0 : b->unit << (s - 1);
		*hi = s + b->unit_log2 >= 63 ? ~0ULL : (b->unit << s) - 1;
	}
	return s;
}

static __always_inline void lat_one(struct lat_batch *b, const struct io_rec *r)
{
	__u64 ns = r->done_ns - r->submit_ns, lo, hi;
	__u32 s;

	if (io_batch_next(b->ctx, &hists, &b->w, r, ns, per_bdev, per_type))
		return;
	/* A new run: its slot, and the range of ns the slot holds. */
	s = lat_slot(b, ns, &lo, &hi);
	hist_run_start(&b->w.run, b->w.h, s, lo, hi);
}

/* Records per bpf_loop() step: a step is a call, and the walk's state
 * lives in memory across calls, so a step takes several records.  Each
 * one is verified, so more cost start-up time: paired at qd 32 (CPU time
 * of the target, 9 repetitions), 1, 4 and 8 records a step added 19.7,
 * 13.1 and 12.1 ns per I/O, and their loads took 1.7, 3.6 and 7 ms. */
#define LAT_STEP 4

static long lat_step(__u64 step, void *arg)
{
	struct lat_batch *b = arg;
	__u32 i;

	if (step >= IO_BATCH_MAX / LAT_STEP)
		return 1;
	i = (__u32)step * LAT_STEP;
	for (__u32 j = 0; j < LAT_STEP; j++) {
		if (i + j >= b->count)
			return 1;
		lat_one(b, &b->recs[i + j]);
	}
	return 0;
}

/*
 * Without -B and -O every record goes to one histogram, looked up once
 * per batch, and the walk is only the run: lat_fast() keeps the run's
 * range and count in registers for a step of LAT_FAST_STEP records, where
 * lat_step() keeps its walk in memory and checks each record's key.  A
 * record that extends the run costs two loads, two subtractions, a compare
 * and an add.  By the kernel's run-time statistics (kernel.bpf_stats_enabled,
 * bench/RESULTS.md section 7), with 256-record batches at qd 32 the whole
 * program went from about 7.4 to 5.1 ns per record, of which the copy of
 * the batch is about 2.1.  Steps of 16 and 32 records cost 0.5 and 0.8 ns
 * less per record but took the verifier 50 and 130 ms instead of 7.
 */
#define LAT_FAST_STEP 8

/* Start a new run in b's walk with ns, ending the one there. */
static __always_inline void lat_new_run(struct lat_batch *b, __u64 ns)
{
	__u64 lo, hi;
	__u32 s;

	hist_run_end(&b->w.run);
	s = lat_slot(b, ns, &lo, &hi);
	hist_run_start(&b->w.run, b->w.h, s, lo, hi);
}

static long lat_fast(__u64 step, void *arg)
{
	struct lat_batch *b = arg;
	__u64 lo = b->w.run.lo, span = b->w.run.span, i, n, ns;
	__u32 cnt = b->w.run.n;
	const struct io_rec *r;

	if (step >= IO_BATCH_MAX / LAT_FAST_STEP)
		return 1;
	i = step * LAT_FAST_STEP;
	if (i >= b->count)
		return 1;
	n = b->count - i;
	if (n > LAT_FAST_STEP)
		n = LAT_FAST_STEP;
	r = &b->recs[i];
	for (__u64 j = 0; j < LAT_FAST_STEP; j++) {
		if (j >= n)
			break;
		ns = r[j].done_ns - r[j].submit_ns;
		if (ns - lo < span) {	/* hist_run_extends() */
			cnt++;
			continue;
		}
		b->w.run.n = cnt;
		lat_new_run(b, ns);
		lo = b->w.run.lo;
		span = b->w.run.span;
		cnt = 1;
	}
	b->w.run.n = cnt;
	return 0;	/* a short step ends the batch: the next one stops */
}

/* blktgt:io__batch(s32 thread, s32 count, struct io_rec *recs,
 *                  char *bdev_names, u64 flush_ns, u64 bdevs_merged)
 *
 * bpf_loop() rather than a bounded loop: the verifier checks the callback
 * once, where it walked a 256-record loop record by record (about 2 s of
 * start-up here, and past the complexity limit with some options). */
SEC("usdt")
int io_batch(struct pt_regs *ctx)
{
	struct lat_batch b = {
		.ctx = ctx,
		.unit = unit_ns,
		.lin = linear,
		.w = IO_BATCH_WALK_INIT,
	};

	hit_count();
	b.recs = io_batch_hist_take(ctx, &b.count, per_bdev);
	if (!b.recs)
		return 0;	/* counted dropped, with the reason */
	b.unit_width = b.unit * width;	/* < 2^51: -W <= INT_MAX */
	b.unit_log2 = hist_log2_slot(b.unit) - 1;
	if (per_bdev || per_type) {
		bpf_loop(IO_BATCH_MAX / LAT_STEP, lat_step, &b, 0);
	} else {
		/* hist_get() counted one of the batch's records as dropped. */
		b.w.h = hist_get(&hists, &b.w.key);
		if (!b.w.h) {
			io_batch_release();
			hist_drop(b.count - 1);
			return 0;
		}
		bpf_loop(IO_BATCH_MAX / LAT_FAST_STEP, lat_fast, &b, 0);
	}
	io_batch_release();
	hist_run_end(&b.w.run);
	return 0;
}

/* bpf_probe_read_user_str() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
