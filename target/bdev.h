// SPDX-License-Identifier: BSD-2-Clause
/*
 * bdev.h: the block device interface and the I/O that flows through it.
 *
 * A bdev is created and deleted by the control plane on reactor 0; the
 * registry is touched only there.  I/O may be submitted on any reactor; a
 * bdev's backends are written so that this needs no lock (null and malloc
 * work on plain memory, file uses pread/pwrite on a shared fd).
 *
 * Contract of bdev_submit():
 *  - it validates the request (type, offset and length in range and
 *    aligned to the block size, buffer present for read/write) and fails
 *    with -EINVAL/-ERANGE instead of touching the backend;
 *  - the completion callback always runs later, on the submitting reactor,
 *    never from inside bdev_submit(), so callers can resubmit from it;
 *  - io->status is 0 or a negative errno when the callback runs.
 * bdev_submit() and bdev_io_complete() are real, non-inlined symbols so that
 * uprobe tools can attach to them (see bcc/funclat).
 */
#ifndef BLKTGT_BDEV_H
#define BLKTGT_BDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io_batch.h"    /* struct io_rec, the bdev name table's sizes */
#include "states.h"      /* enum bdev_io_type: READ 0, WRITE 1, FLUSH 2, TRIM 3 */

#define BDEV_NAME_MAX    63     /* longest bdev or export name */
#define BDEV_MAX_IO_SIZE (32u << 20) /* largest single I/O, bytes */
#define BDEV_MIN_BLOCK_SIZE 512u     /* block sizes are powers of two ... */
#define BDEV_MAX_BLOCK_SIZE 65536u   /* ... in this range */
#define BDEV_MAX_SIZE_MB  (1ull << 20) /* null: 1 TiB */
#define BDEV_MALLOC_MAX_SIZE_MB 16384ull /* malloc: RAM, 16 GiB */
#define BDEV_MAX_COUNT    1024  /* bdevs in the registry */
#define BDEV_PATH_MAX     4095  /* file bdev path */

struct bdev;
struct bdev_io;

typedef void (*bdev_io_cb)(struct bdev_io *io, void *cb_ctx);

struct bdev_io {
	uint64_t id;            /* unique while in flight: set by bdev_submit */
	struct bdev *bdev;
	enum bdev_io_type type;
	uint64_t offset;        /* bytes */
	uint64_t len;           /* bytes */
	void *buf;              /* len bytes, for read and write */
	bool fua;               /* write: durable before completion */
	int status;             /* 0 or -errno, set at completion */
	uint64_t submit_ns;
	uint64_t trace_cause;   /* trace ring: the object that caused it, 0: none */
	bdev_io_cb cb;
	void *cb_ctx;
	struct bdev_io *next;   /* for queues owned by whoever holds the io */
	/* Where export_submit() keeps the caller's cb/cb_ctx while it
	 * interposes its own completion (export.c). */
	bdev_io_cb user_cb;
	void *user_ctx;
};

struct bdev_ops {
	const char *type;       /* "null", "malloc", "file" */
	/* Do one already validated operation now, as bdev_execute() describes:
	 * return len or -errno.  Completion is bdev.c's job. */
	int64_t (*execute)(struct bdev *b, enum bdev_io_type type, uint64_t offset,
			   uint64_t len, void *buf, bool fua);
	/* Optional, for a backend that completes later (delay): take the
	 * validated io instead of execute, and call bdev_io_done() for it on
	 * this reactor, never from inside submit.  0, or -errno to fail the
	 * io (bdev.c then completes it with that status). */
	int (*submit)(struct bdev *b, struct bdev_io *io);
	void (*destroy)(struct bdev *b);
};

struct bdev {
	char name[BDEV_NAME_MAX + 1];
	char type[16];          /* copy of ops->type: str()-readable */
	uint64_t num_blocks;
	uint32_t block_size;
	const struct bdev_ops *ops;
	void *priv;
	unsigned exports;       /* exports using it; delete refused while > 0 */
	unsigned users;         /* running workloads and flushes: likewise */
	unsigned stacked;       /* bdevs over it (delay): likewise */
	uint16_t index;         /* its slot in io__batch's name table */
	struct bdev *next;
};

/* Registry (reactor 0 only).  Each backend's create is its own header's
 * (bdev_null.h, bdev_malloc.h, bdev_file.h, bdev_delay.h). */
int bdev_delete(const char *name);      /* -ENOENT, -EBUSY */
struct bdev *bdev_lookup(const char *name);
struct bdev *bdev_first(void);
void bdev_delete_all(void);

uint64_t bdev_size(const struct bdev *b);

/* Submit io (fields bdev, type, offset, len, buf, fua, cb, cb_ctx set).
 * Returns 0 when accepted; the callback then always runs.  A negative
 * return means rejected outright and the callback will not run. */
int bdev_submit(struct bdev_io *io);

/* Perform one backend operation (already validated by bdev_submit) and
 * return the bytes done (len) or -errno.  A real symbol, so that a uprobe
 * sees len as arg3 and the result as the return value. */
int64_t bdev_execute(struct bdev *b, uint32_t type, uint64_t offset, uint64_t len,
		     void *buf, int fua);

/* Called by bdev.c on the submitting reactor when io is done; fires
 * io__done, then io->cb.  A real symbol for uprobe tools. */
void bdev_io_complete(struct bdev_io *io);

/* For a backend's submit op: io (its status set) is done; its completion
 * runs at the next loop pass.  Call it on the reactor that submitted io. */
void bdev_io_done(struct bdev_io *io);

/* Fire the calling reactor's io__batch records now, if it holds any: so
 * whoever is told next that their I/O is done finds them at the tool. */
void bdev_batch_flush(void);

/* BLKTGT_IO_BATCH_CAP=N (1..IO_BATCH_MAX): fire io__batch every N records
 * at most, for measuring the cost per record apart from the cost per hit
 * (bench/batch.py).  Before the reactors start; 0, or -EINVAL after one
 * line on stderr. */
#define BDEV_BATCH_CAP_ENV "BLKTGT_IO_BATCH_CAP"
int bdev_batch_cap_from_env(void);

/* Used by backends: register a new bdev (reactor 0).  On success priv is
 * the bdev's (ops->destroy frees it); on failure it is still the caller's. */
int bdev_register(const char *name, const struct bdev_ops *ops, uint64_t num_blocks,
		  uint32_t block_size, void *priv, struct bdev **out);
/* Check a name and block size as every create does: 0 or -EINVAL. */
int bdev_check_params(const char *name, uint32_t block_size);

/* I/O figures summed over every reactor (approximate while I/O runs). */
struct bdev_stats {
	uint64_t submitted;     /* accepted by bdev_submit */
	uint64_t completed;
	uint64_t errors;        /* completed with status < 0 */
	uint64_t bytes;         /* bytes of successful reads and writes */
	uint64_t batch_held;    /* io__batch records not yet fired */
};
void bdev_get_stats(struct bdev_stats *st);

#endif
