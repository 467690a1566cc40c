// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * blktgt_io.bpf.h: reading blktgt:io__batch in a BPF program.
 *
 *   io__batch(s32 thread, s32 count, struct io_rec *recs, char *bdev_names)
 *
 * The record is declared once, in target/io_batch.h, which this includes;
 * the I/O type names come from target/states.h's IO_TYPE_LIST, as blktgt's
 * own do.  A batch (up to 3 KiB) is larger than the 512-byte BPF stack, so
 * it is copied with one read into a per-CPU scratch map, then walked with
 * a loop bounded by IO_BATCH_MAX.
 */
#ifndef PROBEKIT_BLKTGT_IO_BPF_H
#define PROBEKIT_BLKTGT_IO_BPF_H

#include "../target/io_batch.h"
#include "../target/states.h"
#include "blktgt_io.h"

struct io_batch_buf {
	struct io_rec recs[IO_BATCH_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct io_batch_buf);
} io_batch_scratch SEC(".maps");

#define IO_TYPE_NAME(e, name) name,
static const char io_type_names[BDEV_IO_TYPE_COUNT][IOTYPE_LEN] = {
	IO_TYPE_LIST(IO_TYPE_NAME)
};

/*
 * io__batch's records, copied into this CPU's scratch buffer, and their
 * number in *count; NULL when the count is out of range or a read fails.
 *
 * The arguments are read one by one, only those a program needs: each
 * bpf_usdt_arg() is a helper call through libbpf's argument spec, and
 * BPF_USDT() would read all four on every hit, the thread number and the
 * name table included, which a hit pays for every record it carries.
 */
static __always_inline struct io_rec *io_batch_copy(struct pt_regs *ctx, __u32 *count)
{
	__u32 zero = 0;
	struct io_batch_buf *b = bpf_map_lookup_elem(&io_batch_scratch, &zero);
	long n, recs;
	__u64 size;

	if (!b || bpf_usdt_arg(ctx, 1, &n) || bpf_usdt_arg(ctx, 2, &recs))
		return NULL;
	if (n <= 0 || n > IO_BATCH_MAX)
		return NULL;
	size = (__u64)n * sizeof(struct io_rec);
	/* Keep clang from folding this bound into the count's: the verifier
	 * must see it on the size it checks. */
	__asm__ volatile("" : "+r"(size));
	if (size > sizeof(b->recs))
		return NULL;
	if (bpf_probe_read_user(b->recs, size, (const void *)recs))
		return NULL;
	*count = (__u32)n;
	return b->recs;
}

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

#endif
