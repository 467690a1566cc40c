// SPDX-License-Identifier: BSD-2-Clause
/*
 * io_batch.h: the record the io__batch probe carries, one per completed
 * I/O, and the bdev name table it points to.
 *
 * This header is the one declaration of the layout.  blktgt fills it
 * (bdev.c), the libbpf tools include it, and the bpftrace definition is
 * made from blktgt's DWARF at build time (mk/structs.mk: struct pk_io_rec),
 * so no reader copies it.  Fixed layout, no pointers: a BPF program copies
 * a whole batch with one read.
 *
 *   io__batch(int32_t thread, int32_t count, struct io_rec *recs,
 *             char *bdev_names, uint64_t flush_ns, uint64_t bdevs_merged)
 *
 * fires on reactor thread with count (1..IO_BATCH_MAX) records of I/Os
 * that reactor completed, oldest first, at flush_ns (CLOCK_MONOTONIC).  A
 * batch spans loop passes under probekit_batch.h's policy: it is fired
 * when full, when its oldest record (recs[0].done_ns) has waited
 * PK_BATCH_BOUND_NS (1 ms), checked at the end of every pass, before the
 * reactor sleeps, when a workload job ends (before its result is sent),
 * and when the reactor stops.  So flush_ns - recs[0].done_ns is at most
 * the bound plus one loop pass.  Records are filled only while the
 * probe's semaphore is up; those held when it falls are still fired.
 *
 * bdev_names is char[BDEV_INDEX_MAX][BDEV_NAME_LEN]: the name of a record's
 * bdev is the string at bdev_names + bdev * BDEV_NAME_LEN, readable at any
 * time, so a tool attached after the bdevs were created still names them.
 * A name longer than BDEV_NAME_LEN - 1 is cut to that length.  A deleted
 * bdev's index is reused only once every batch that held a record of it
 * has been fired.  Past BDEV_INDEX_MAX - 1 live bdevs, the rest share
 * BDEV_INDEX_OTHER, whose name is "(other)".
 *
 * So a reader that labels records by name merges bdevs two ways, and the
 * last argument, bdevs_merged, counts each as they stand at the hit:
 * bdevs_cut = bdevs_merged & 0xffffffff, the live bdevs with a slot of
 * their own whose cut name another such bdev shares (two bdevs that share
 * their first BDEV_NAME_LEN - 1 characters count 2, a third 3);
 * bdevs_other = bdevs_merged >> 32, the live bdevs under
 * BDEV_INDEX_OTHER.  One argument, in a register: bpftrace 0.17 reads
 * arg0..arg5 only, and no %rip-relative operand.  A service that fires
 * io__batch with only the first five arguments says nothing of merges;
 * readers then say nothing either.
 */
#ifndef BLKTGT_IO_BATCH_H
#define BLKTGT_IO_BATCH_H

#ifndef __bpf__
#include <stdint.h>
#endif

/* IO_BATCH_MAX (records per hit), BDEV_NAME_LEN (one slot of the bdev
 * name table) and BDEV_INDEX_MAX (slots in the table): specs/limits.toml,
 * which the bcc/ tools read too. */
#include "probekit_limits.h"
#define BDEV_INDEX_OTHER  (BDEV_INDEX_MAX - 1)  /* shared by bdevs past the rest */

struct io_rec {
	uint64_t id;            /* the I/O's id, as io__submit/io__done pass it */
	uint64_t offset;        /* bytes */
	uint64_t submit_ns;     /* CLOCK_MONOTONIC, bpftrace's nsecs */
	uint64_t done_ns;       /* when its completion was drained: the clock
				 * read of the first I/O the drain's first
				 * callback submitted, else of the drain's own */
	uint32_t length;        /* bytes */
	int32_t status;         /* 0 or -errno */
	uint16_t bdev;          /* bdev index: bdev_names[bdev] */
	uint8_t type;           /* enum bdev_io_type, as io__submit passes it */
	uint8_t pad[5];
};

_Static_assert(sizeof(struct io_rec) == 48, "struct io_rec is 48 bytes: readers depend on it");

#endif
