// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * blktgt_io.bpf.h: the histogram tools' keys for blktgt:io__batch's
 * records (io_batch.bpf.h reads them): the bdev name from the batch's
 * name table, the I/O type's name from target/states.h's IO_TYPE_LIST, as
 * blktgt's own names are.
 */
#ifndef PROBEKIT_BLKTGT_IO_BPF_H
#define PROBEKIT_BLKTGT_IO_BPF_H

#include "io_batch.bpf.h"
#include "../target/states.h"
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

#endif
