// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * iosize.bpf.c: the length (bytes) of every blktgt I/O, as a log2
 * histogram per (bdev, type) key: by default from the records of
 * blktgt:io__batch (completed I/Os, up to 256 per hit), with --per-io from
 * the len argument of every blktgt:io__submit.
 */
#include "probekit.bpf.h"
#include <bpf/usdt.bpf.h>

#include "iosize.h"
#include "histogram.bpf.h"
#include "blktgt_io.bpf.h"

/* Options, set by user space before load. */
const volatile bool per_bdev = false;	/* -B */
const volatile bool per_type = false;	/* -O */

DRAINED_HASH(hists, struct io_key, struct hist, MAX_HISTS, BPF_F_NO_PREALLOC);

static __always_inline int handle_submit(const char *bdev, __u64 len,
					 const char *type_name)
{
	struct io_key key = {};

	/* _str stops at the NUL of a zeroed key: equal names, equal keys. */
	if (per_bdev)
		bpf_probe_read_user_str(key.bdev, sizeof(key.bdev), bdev);
	if (per_type)
		bpf_probe_read_user_str(key.type, sizeof(key.type), type_name);
	hist_increment(&hists, &key, hist_slot(len, false, 1));
	return 0;
}

/* blktgt:io__submit(u64 id, char *bdev, u32 type, u64 offset, u64 len,
 *                   char *type_name) */
SEC("usdt")
int BPF_USDT(io_submit, __u64 id, const char *bdev, __u32 type,
	     __u64 offset, __u64 len, const char *type_name)
{
	hit_count();
	return handle_submit(bdev, len, type_name);
}

struct size_batch {
	struct pt_regs *ctx;
	const struct io_rec *recs;	/* the copy, in the scratch map */
	__u32 count;
	struct io_batch_walk w;
};

static __always_inline void size_one(struct size_batch *b,
				     const struct io_rec *r)
{
	__u32 s;

	/* A batch's records mostly share a size too: one run. */
	if (io_batch_next(b->ctx, &hists, &b->w, r, r->length, per_bdev, per_type))
		return;
	s = hist_slot(r->length, false, 1);
	hist_run_start(&b->w.run, b->w.h, s, hist_log2_lo(s), hist_log2_hi(s));
}

/*
 * Records per bpf_loop() step, as iolatency's lat_step() takes them.  Not
 * one: a kernel whose verifier checks a callback as if it ran once, from
 * the state at the bpf_loop() call (Debian 12's 6.1 does; 6.7 checks it
 * as run any number of times), saw the walk only as it starts (no
 * histogram, no run), dropped the branches that use a run as dead code,
 * and so counted one record a batch, saying nothing (seen in qemu: 9 of
 * 37).  With several records a step, every branch is reached within one
 * step, from a walk that an earlier record changed.
 */
#define SIZE_STEP 4

static long size_step(__u64 step, void *arg)
{
	struct size_batch *b = arg;
	__u32 i;

	if (step >= IO_BATCH_MAX / SIZE_STEP)
		return 1;
	i = (__u32)step * SIZE_STEP;
	for (__u32 j = 0; j < SIZE_STEP; j++) {
		if (i + j >= b->count)
			return 1;
		size_one(b, &b->recs[i + j]);
	}
	return 0;
}

/* blktgt:io__batch(s32 thread, s32 count, struct io_rec *recs,
 *                  char *bdev_names, u64 flush_ns, u64 bdevs_merged)
 *
 * bpf_loop(): the verifier checks the callback once, not each of 256
 * records (iolatency.bpf.c). */
SEC("usdt")
int io_batch(struct pt_regs *ctx)
{
	struct size_batch b = { .ctx = ctx, .w = IO_BATCH_WALK_INIT };

	hit_count();
	b.recs = io_batch_hist_take(ctx, &b.count, per_bdev);
	if (!b.recs)
		return 0;	/* counted dropped, with the reason */
	bpf_loop(IO_BATCH_MAX / SIZE_STEP, size_step, &b, 0);
	io_batch_release();
	hist_run_end(&b.w.run);
	return 0;
}

/* bpf_probe_read_user_str() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
