// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * blktgt_io.bpf.h: the histogram tools' keys for blktgt:io__batch's
 * records (io_batch.bpf.h reads them): the bdev name from the batch's
 * name table, the I/O type's name from include/blktgt_states.h's IO_TYPE_LIST, as
 * blktgt's own names are.
 */
#ifndef PROBEKIT_BLKTGT_IO_BPF_H
#define PROBEKIT_BLKTGT_IO_BPF_H

#include "io_batch.bpf.h"
#include "histogram.bpf.h"
#include "blktgt_states.h"
#include "blktgt_io.h"

#define IO_TYPE_NAME(e, name) name,
static const char io_type_names[BDEV_IO_TYPE_COUNT][IOTYPE_LEN] = {
	IO_TYPE_LIST(IO_TYPE_NAME)
};

/* Set key's fields for r the way the per-I/O probes' strings would, as far
 * as the user split by them: the bdev name from the table (io__batch's
 * fourth argument, read only when the index changes: *last holds the one
 * key->bdev has), the type from its number. */
static __always_inline void io_batch_key(struct pt_regs *ctx, struct io_key *key,
					 const struct io_rec *r, bool per_bdev,
					 bool per_type, __u32 *last)
{
	long names;

	if (per_bdev && r->bdev != *last) {
		__builtin_memset(key->bdev, 0, sizeof(key->bdev));
		if (r->bdev < BDEV_INDEX_MAX && !bpf_usdt_arg(ctx, 3, &names))
			bpf_probe_read_user_str(key->bdev, BDEV_NAME_LEN,
						(const char *)names +
						(__u32)r->bdev * BDEV_NAME_LEN);
		*last = r->bdev;
	}
	if (per_type) {
		__builtin_memset(key->type, 0, sizeof(key->type));
		if (r->type < BDEV_IO_TYPE_COUNT)
			__builtin_memcpy(key->type, io_type_names[r->type], IOTYPE_LEN);
		else
			key->type[0] = '?';
	}
}

/* What io__batch hits could not read, by reason, apart from hist_dropped,
 * whose reason is a full table; user space takes each every interval and
 * says why (tool_drain.h, hist_report(); toolspec.LOSSES):
 * hist_busy, the records of hits that found this CPU's batch buffer held
 * by a run they preempted (io_batch.bpf.h); hist_unreadable, the records
 * of hits whose read of them failed (the service's memory paged out or
 * unmapped); hist_bad_count, hits (not records) whose count could not be
 * read or was out of range, so that how many records they lost is
 * unknown. */
__u64 hist_busy, hist_unreadable, hist_bad_count;

/* What io__batch's name table merges, by_bdev (-B): io_batch.bpf.h's
 * merge counts as the last hit that passed them said (the last process's,
 * with -b), -1 until one has; user space says them as each interval's
 * output ends (tool_drain.c, merges_report()). */
__s64 hist_bdevs_merged[IO_BATCH_MERGES] = { -1, -1 };

/*
 * io_batch_take() for a histogram tool: the records, or NULL when it
 * could not read them, which are then counted by reason, as above.  With
 * by_bdev, the merge counts are kept too.
 */
static __always_inline struct io_rec *io_batch_hist_take(struct pt_regs *ctx,
							 __u32 *count, bool by_bdev)
{
	bool busy = false;
	long m[IO_BATCH_MERGES];
	struct io_rec *recs = io_batch_take_why(ctx, count, NULL,
						by_bdev ? m : NULL, &busy);

	if (by_bdev && m[IO_BATCH_MERGE_CUT] >= 0) {
		hist_bdevs_merged[IO_BATCH_MERGE_CUT] = m[IO_BATCH_MERGE_CUT];
		hist_bdevs_merged[IO_BATCH_MERGE_OTHER] = m[IO_BATCH_MERGE_OTHER];
	}
	if (recs)
		return recs;
	if (busy)
		__sync_fetch_and_add(&hist_busy, *count);
	else if (*count)
		__sync_fetch_and_add(&hist_unreadable, *count);
	else
		__sync_fetch_and_add(&hist_bad_count, 1);
	return NULL;
}

/* A histogram tool's walk through a batch: the key the last record had,
 * its histogram, and the run being counted in it. */
struct io_batch_walk {
	struct io_key key;
	struct hist *h;
	struct hist_run run;
	__u32 last, last_type;	/* the bdev and type key holds */
};

#define IO_BATCH_WALK_INIT { .last = BDEV_INDEX_MAX, .last_type = 256 }

/*
 * Record r, whose value is v, in walk w: 1 when v extended w's run (it is
 * counted); 0 when the run ended and w->h is the histogram for a new run,
 * which the caller starts with v's slot; -1 when the map is full and r is
 * dropped.  The histogram is looked up again only when the key may have
 * changed: the records of one batch mostly share one.
 */
static __always_inline int io_batch_next(struct pt_regs *ctx, void *hists,
					 struct io_batch_walk *w,
					 const struct io_rec *r, __u64 v,
					 bool per_bdev, bool per_type)
{
	if (!w->h || (per_bdev && r->bdev != w->last) ||
	    (per_type && r->type != w->last_type)) {
		hist_run_end(&w->run);
		io_batch_key(ctx, &w->key, r, per_bdev, per_type, &w->last);
		w->last_type = r->type;
		w->h = hist_get(hists, &w->key);
		return w->h ? 0 : -1;
	}
	if (hist_run_extends(&w->run, v)) {
		w->run.n++;
		return 1;
	}
	hist_run_end(&w->run);
	return 0;
}

#endif
