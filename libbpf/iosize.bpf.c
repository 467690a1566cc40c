// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * iosize.bpf.c: the length (bytes) of every blktgt I/O, as a log2
 * histogram per (bdev, type) key: by default from the records of
 * blktgt:io__batch (completed I/Os, up to 64 per hit), with --per-io from
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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_HISTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct io_key);
	__type(value, struct hist);
} hists SEC(".maps");

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

/* blktgt:io__batch(s32 thread, s32 count, struct io_rec *recs,
 *                  char *bdev_names) */
SEC("usdt")
int io_batch(struct pt_regs *ctx)
{
	struct io_key key = {};
	struct hist *h = NULL;
	struct hist_run run = {};
	__u32 count = 0, last = BDEV_INDEX_MAX, last_type = 256;
	struct io_rec *r;

	hit_count();
	r = io_batch_copy(ctx, &count);
	if (!r)
		return 0;
	for (__u32 i = 0; i < IO_BATCH_MAX && i < count; i++, r++) {
		__u32 s;

		/* Look the histogram up again only when the key may have
		 * changed: records of one batch mostly share one, and mostly
		 * a size too (one run, one atomic add). */
		if (!h || (per_bdev && r->bdev != last) ||
		    (per_type && r->type != last_type)) {
			hist_run_end(&run);
			io_batch_key(ctx, &key, r, per_bdev, per_type, &last);
			last_type = r->type;
			h = hist_get(&hists, &key);
			if (!h)
				continue;
		} else if (hist_run_extends(&run, r->length)) {
			run.n++;
			continue;
		} else {
			hist_run_end(&run);
		}
		s = hist_slot(r->length, false, 1);
		hist_run_start(&run, h, s, hist_log2_lo(s), hist_log2_hi(s));
	}
	hist_run_end(&run);
	return 0;
}

/* bpf_probe_read_user_str() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
