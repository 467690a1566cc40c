// SPDX-License-Identifier: BSD-2-Clause
/*
 * workload.h: the built-in workload generator behind workload_run.
 *
 * A job runs on one reactor, keeps queue_depth I/Os in flight against a
 * bdev (or through an export, so that pause/resume can be watched under
 * load) and stops after exactly `count` I/Os or after `seconds`.  Every
 * I/O goes through bdev_submit(), so each fires io__submit and io__done
 * once.  Writes carry a known pattern: every 8-byte little-endian word
 * holds its own byte offset on the bdev, so data can be checked later.
 */
#ifndef BLKTGT_WORKLOAD_H
#define BLKTGT_WORKLOAD_H

#include <stdint.h>

#include "bdev.h"

#define WORKLOAD_MAX_QD       256
#define WORKLOAD_MAX_COUNT    (1ull << 40)
#define WORKLOAD_MAX_SECONDS  3600
#define WORKLOAD_MAX_BUFFERS  (256ull << 20)  /* queue_depth * io_size */
#define WORKLOAD_MAX_JOBS     64

#define WORKLOAD_PATTERN_LIST(X) \
	X(WORKLOAD_READ, "read") \
	X(WORKLOAD_WRITE, "write") \
	X(WORKLOAD_RANDREAD, "randread") \
	X(WORKLOAD_RANDWRITE, "randwrite") \
	X(WORKLOAD_RANDRW, "randrw")

#define WORKLOAD_ENUM(e, name) e,
enum workload_pattern { WORKLOAD_PATTERN_LIST(WORKLOAD_ENUM) WORKLOAD_PATTERN_COUNT };

struct workload_opts {
	char bdev[BDEV_NAME_MAX + 1];   /* one of bdev ... */
	char export[BDEV_NAME_MAX + 1]; /* ... or export, the other "" */
	enum workload_pattern pattern;
	uint64_t io_size;               /* bytes, a multiple of the block size */
	uint32_t queue_depth;
	uint64_t count;                 /* exactly this many I/Os, or ... */
	uint64_t seconds;               /* ... for this long (count == 0) */
};

struct workload_result {
	uint64_t ios, reads, writes, errors, bytes;
	uint64_t elapsed_ns;
	uint64_t lat_min_ns, lat_max_ns, lat_sum_ns;
	int status;                     /* 0, or -ECANCELED when stopped */
};

typedef void (*workload_done_fn)(void *ctx, const struct workload_result *res);

/* -1 when s names no pattern. */
int workload_pattern_parse(const char *s);
const char *workload_pattern_name(enum workload_pattern p);

/* Start a job (reactor 0).  0, then done(ctx, res) on reactor 0 when it
 * ends; or -ENOENT (no such bdev/export), -EINVAL (io_size not a block
 * multiple or larger than the bdev), -EBUSY (too many jobs), -ENOMEM. */
int workload_run(const struct workload_opts *o, workload_done_fn done, void *ctx);

/* Stop every job early (shutdown); done(ctx) on reactor 0 once all ended. */
void workload_stop_all(void (*done)(void *ctx), void *ctx);
unsigned workload_running(void);

#endif
