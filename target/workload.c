// SPDX-License-Identifier: BSD-2-Clause
/*
 * workload.c: workload jobs.  A job is set up on reactor 0 (which owns the
 * bdev and export registries and holds a reference on what it uses), runs
 * on one reactor with no locks, and is torn down on reactor 0 again.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "blktgt_probes.h"
#include "export.h"
#include "log.h"
#include "reactor.h"
#include "workload.h"

struct job;

struct slot {
	struct bdev_io io;
	struct job *job;
	uint64_t start_ns;
};

struct job {
	uint64_t id;
	struct bdev *bdev;
	struct export *export;
	struct workload_opts o;
	char bdev_name[BDEV_NAME_MAX + 1];      /* probe strings: struct memory */
	char pattern_name[16];
	struct reactor *reactor;
	workload_done_fn done;
	void *done_ctx;

	/* Owned by the job's reactor while it runs. */
	uint64_t submitted, inflight, deadline_ns, start_ns, seq_off, rng;
	uint64_t slots_per_dev;                 /* io_size units on the bdev */
	bool stop;                              /* set on its reactor */
	atomic_bool stop_req;                   /* set by reactor 0 (shutdown) */
	struct workload_result res;
	struct slot *slots;
	unsigned char *bufs;

	struct job *next;                       /* reactor 0's list */
	bool stopping;
};

#define PATTERN_LITERAL(e, name) name,
static const char *const pattern_names[] = { WORKLOAD_PATTERN_LIST(PATTERN_LITERAL) };

static struct job *jobs;
static unsigned njobs;
static uint64_t job_ids;
static unsigned next_reactor;
static void (*stop_all_done)(void *ctx);
static void *stop_all_ctx;

int workload_pattern_parse(const char *s)
{
	for (int i = 0; i < WORKLOAD_PATTERN_COUNT; i++)
		if (strcmp(s, pattern_names[i]) == 0)
			return i;
	return -1;
}

const char *workload_pattern_name(enum workload_pattern p)
{
	return (unsigned)p < WORKLOAD_PATTERN_COUNT ? pattern_names[p] : "?";
}

unsigned workload_running(void)
{
	return njobs;
}

static uint64_t rng_next(struct job *j)
{
	/* xorshift64*: fast, and deterministic for a given job. */
	j->rng ^= j->rng >> 12;
	j->rng ^= j->rng << 25;
	j->rng ^= j->rng >> 27;
	return j->rng * 0x2545F4914F6CDD1Dull;
}

static void fill_pattern(void *buf, uint64_t offset, uint64_t len)
{
	uint64_t *w = buf;

	for (uint64_t i = 0; i < len / 8; i++)
		w[i] = offset + i * 8;
}

static void slot_prepare(struct job *j, struct slot *s)
{
	struct bdev_io *io = &s->io;
	enum bdev_io_type type;
	uint64_t off;

	switch (j->o.pattern) {
	case WORKLOAD_READ:
	case WORKLOAD_WRITE:
		off = j->seq_off;
		j->seq_off += j->o.io_size;
		if (j->seq_off + j->o.io_size > j->slots_per_dev * j->o.io_size)
			j->seq_off = 0;
		type = j->o.pattern == WORKLOAD_READ ? BDEV_IO_READ : BDEV_IO_WRITE;
		break;
	case WORKLOAD_RANDREAD:
	case WORKLOAD_RANDWRITE:
		off = (rng_next(j) % j->slots_per_dev) * j->o.io_size;
		type = j->o.pattern == WORKLOAD_RANDREAD ? BDEV_IO_READ : BDEV_IO_WRITE;
		break;
	default:
		off = (rng_next(j) % j->slots_per_dev) * j->o.io_size;
		type = (rng_next(j) >> 63) ? BDEV_IO_WRITE : BDEV_IO_READ;
		break;
	}
	io->bdev = j->bdev;
	io->type = type;
	io->offset = off;
	io->len = j->o.io_size;
	io->fua = false;
	io->status = 0;
	io->next = NULL;
	if (type == BDEV_IO_WRITE)
		fill_pattern(io->buf, off, io->len);
}

static void job_io_done(struct bdev_io *io, void *ctx);
static void job_finish_on_reactor(struct job *j);

static bool job_more(struct job *j)
{
	if (j->stop || atomic_load_explicit(&j->stop_req, memory_order_relaxed))
		return false;
	if (j->o.count)
		return j->submitted < j->o.count;
	return reactor_now_ns() < j->deadline_ns;
}

/* Submit on slot s; false when it was refused outright (counted). */
static bool slot_submit(struct job *j, struct slot *s)
{
	int rc;

	slot_prepare(j, s);
	s->io.cb = job_io_done;
	s->io.cb_ctx = s;
	s->start_ns = reactor_now_ns();
	j->submitted++;
	j->inflight++;
	rc = j->export ? export_submit(j->export, &s->io) : bdev_submit(&s->io);
	if (rc) {
		/* Refused before reaching the bdev (an inactive export): the job
		 * cannot make progress, so end it with the error. */
		j->inflight--;
		j->res.errors++;
		j->res.ios++;
		if (!j->res.status)
			j->res.status = rc;
		j->stop = true;
		return false;
	}
	return true;
}

static void job_io_done(struct bdev_io *io, void *ctx)
{
	struct slot *s = ctx;
	struct job *j = s->job;
	uint64_t lat = reactor_now_ns() - s->start_ns;

	j->inflight--;
	j->res.ios++;
	if (io->status < 0) {
		j->res.errors++;
	} else {
		if (io->type == BDEV_IO_READ)
			j->res.reads++;
		else
			j->res.writes++;
		j->res.bytes += io->len;
	}
	if (lat < j->res.lat_min_ns || j->res.lat_min_ns == 0)
		j->res.lat_min_ns = lat ? lat : 1;
	if (lat > j->res.lat_max_ns)
		j->res.lat_max_ns = lat;
	j->res.lat_sum_ns += lat;
	if (job_more(j))
		slot_submit(j, s);
	if (j->inflight == 0)
		job_finish_on_reactor(j);
}

static void job_end(void *ctx);

static void job_finish_on_reactor(struct job *j)
{
	j->res.elapsed_ns = reactor_now_ns() - j->start_ns;
	if (reactor_send_msg(reactor_get(0), job_end, j) != 0) {
		log_error("workload %llu: out of memory ending the job",
			  (unsigned long long)j->id);
		abort();
	}
}

static void job_start(void *ctx)
{
	struct job *j = ctx;
	uint64_t first = j->o.count && j->o.count < j->o.queue_depth ? j->o.count
								      : j->o.queue_depth;

	j->start_ns = reactor_now_ns();
	j->deadline_ns = j->start_ns + j->o.seconds * 1000000000ull;
	for (uint64_t i = 0; i < first && !j->stop; i++)
		slot_submit(j, &j->slots[i]);
	if (j->inflight == 0)
		job_finish_on_reactor(j);
}

static void job_free(struct job *j)
{
	free(j->slots);
	free(j->bufs);
	free(j);
}

/* Back on reactor 0: release what the job held and report. */
static void job_end(void *ctx)
{
	struct job *j = ctx;
	struct job **pp;

	for (pp = &jobs; *pp; pp = &(*pp)->next) {
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	}
	njobs--;
	if (j->export)
		export_put(j->export);
	j->bdev->users--;
	if (j->stopping && !j->res.status)
		j->res.status = -ECANCELED;
	BLKTGT_WORKLOAD_DONE(j->id, j->res.ios, j->res.status);
	j->done(j->done_ctx, &j->res);
	job_free(j);
	if (njobs == 0 && stop_all_done) {
		void (*done)(void *) = stop_all_done;

		stop_all_done = NULL;
		done(stop_all_ctx);
	}
}

int workload_run(const struct workload_opts *o, workload_done_fn done, void *ctx)
{
	struct export *e = NULL;
	struct bdev *b;
	struct job *j;
	unsigned n = reactor_count();

	if (o->export[0]) {
		e = export_lookup(o->export);
		if (!e)
			return -ENOENT;
		b = export_bdev(e);
	} else {
		b = bdev_lookup(o->bdev);
		if (!b)
			return -ENOENT;
	}
	if ((unsigned)o->pattern >= WORKLOAD_PATTERN_COUNT || o->queue_depth == 0 ||
	    o->queue_depth > WORKLOAD_MAX_QD || o->count > WORKLOAD_MAX_COUNT ||
	    o->seconds > WORKLOAD_MAX_SECONDS || (o->count == 0) == (o->seconds == 0))
		return -EINVAL;
	if (o->io_size == 0 || o->io_size > BDEV_MAX_IO_SIZE || o->io_size % b->block_size ||
	    o->io_size % 8 || o->io_size > bdev_size(b) ||
	    o->io_size * o->queue_depth > WORKLOAD_MAX_BUFFERS)
		return -EINVAL;
	if (stop_all_done || njobs >= WORKLOAD_MAX_JOBS)
		return -EBUSY;

	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->slots = calloc(o->queue_depth, sizeof(*j->slots));
	j->bufs = aligned_alloc(4096, (o->io_size * o->queue_depth + 4095) & ~4095ull);
	if (!j->slots || !j->bufs) {
		job_free(j);
		return -ENOMEM;
	}
	memset(j->bufs, 0, o->io_size * o->queue_depth);
	j->id = ++job_ids;
	j->o = *o;
	j->bdev = b;
	j->export = e;
	j->done = done;
	j->done_ctx = ctx;
	j->slots_per_dev = bdev_size(b) / o->io_size;
	j->rng = 0x9E3779B97F4A7C15ull ^ (j->id * 0xD1B54A32D192ED03ull);
	for (uint32_t i = 0; i < o->queue_depth; i++) {
		j->slots[i].job = j;
		j->slots[i].io.buf = j->bufs + (uint64_t)i * o->io_size;
	}
	strcpy(j->bdev_name, b->name);
	strcpy(j->pattern_name, workload_pattern_name(o->pattern));
	/* Off reactor 0 when there is another, so the control plane stays
	 * responsive; jobs take turns over the other reactors. */
	j->reactor = reactor_get(n > 1 ? 1 + (next_reactor++ % (n - 1)) : 0);

	if (e)
		export_get(e);
	b->users++;
	j->next = jobs;
	jobs = j;
	njobs++;
	BLKTGT_WORKLOAD_START(j->id, j->bdev_name, j->pattern_name, o->io_size, o->queue_depth);
	if (reactor_send_msg(j->reactor, job_start, j) != 0) {
		jobs = j->next;
		njobs--;
		b->users--;
		if (e)
			export_put(e);
		job_free(j);
		return -ENOMEM;
	}
	return 0;
}

void workload_stop_all(void (*done)(void *ctx), void *ctx)
{
	if (njobs == 0) {
		done(ctx);
		return;
	}
	stop_all_done = done;
	stop_all_ctx = ctx;
	for (struct job *j = jobs; j; j = j->next) {
		/* j is freed only here on reactor 0, after it ends, so a flag
		 * it polls is safe where a message could outlive it. */
		j->stopping = true;
		atomic_store(&j->stop_req, true);
	}
}
