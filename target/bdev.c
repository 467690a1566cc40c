// SPDX-License-Identifier: BSD-2-Clause
/*
 * bdev.c: the bdev registry and the I/O path every backend shares.
 *
 * bdev_submit() validates, fires io__submit, calls bdev_execute() (the
 * backend does the work synchronously) and queues the io on its reactor's
 * completion list, or hands the io to a backend's submit op, which queues
 * it later through bdev_io_done(); the list is drained from deferred work on the same
 * reactor, where bdev_io_complete() fires io__done and calls back.  So a
 * completion never runs inside bdev_submit(), and the I/O path takes no
 * lock and allocates nothing: all its state is per reactor.
 *
 * While io__batch is traced, the drain of a pass's completions first
 * records each I/O in its reactor's batch (io_batch.h), firing io__batch
 * when the batch is full and once more for the rest, and only then runs
 * the completions.  So a tool has every record before a callback can tell
 * anyone (an RPC reply, an NBD reply) that the I/O is done, and the drain,
 * not a pass hook, ends the batch: hooks run after the loop's epoll wait,
 * which sleeps when there is nothing left to do, so the record of an I/O
 * that completed alone would wait there for the next event.  Untraced,
 * this costs one branch on the semaphore per drain, not per I/O; a USDT=0
 * build drops it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bdev.h"
#include "blktgt_probes.h"
#include "log.h"
#include "reactor.h"
#include "trace.h"

/* Symbols uprobe tools attach to: never inlined, never cloned. */
#if defined(__clang__)
#define UPROBE_SYMBOL __attribute__((noinline, used))
#else
#define UPROBE_SYMBOL __attribute__((noinline, noipa, used))
#endif

/* Per-reactor I/O state, one cache line each so reactors never share. */
struct bdev_thread {
	_Alignas(64) uint64_t next_id;
	struct bdev_io *done_head, *done_tail;
	struct reactor_defer defer;
	bool defer_queued;
	struct bdev_stats stats;
	/* io__batch: records not yet fired (none outside batch_record()). */
	uint32_t batch_n;
	struct io_rec batch[IO_BATCH_MAX];
};

static struct bdev_thread threads[REACTOR_MAX];
static struct bdev *bdevs;
static unsigned nbdevs;

/* io__batch's name table (io_batch.h), and which slots a bdev holds
 * (reactor 0 only).  A freed slot can be reused at once: every record is
 * fired before the completion callbacks of its drain run, and a bdev is
 * deleted only after the callbacks of all its I/O, so no record of a
 * deleted bdev is ever fired after it. */
static char bdev_names[BDEV_INDEX_MAX][BDEV_NAME_LEN];
static bool slot_used[BDEV_INDEX_MAX];

static void drain_completions(void *arg);
static void queue_completion(struct bdev_thread *t, struct bdev_io *io);

static struct bdev_thread *this_thread(void)
{
	struct reactor *r = reactor_self();

	return r ? &threads[reactor_index(r)] : NULL;
}

int bdev_check_params(const char *name, uint32_t block_size)
{
	size_t len = strlen(name);

	if (len == 0 || len > BDEV_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == ':'))
			return -EINVAL;
	}
	if (block_size < BDEV_MIN_BLOCK_SIZE || block_size > BDEV_MAX_BLOCK_SIZE ||
	    (block_size & (block_size - 1)))
		return -EINVAL;
	return 0;
}

/* A name table slot for b: the lowest free one, else BDEV_INDEX_OTHER. */
static void slot_take(struct bdev *b)
{
	unsigned i;

	for (i = 0; i < BDEV_INDEX_OTHER; i++)
		if (!slot_used[i])
			break;
	b->index = (uint16_t)i;
	/* Written before b can take I/O: readers see the whole name. */
	if (i == BDEV_INDEX_OTHER) {
		snprintf(bdev_names[i], BDEV_NAME_LEN, "(other)");
		return;
	}
	slot_used[i] = true;
	snprintf(bdev_names[i], BDEV_NAME_LEN, "%s", b->name);
}

static void slot_release(const struct bdev *b)
{
	if (b->index != BDEV_INDEX_OTHER)
		slot_used[b->index] = false;
}

int bdev_register(const char *name, const struct bdev_ops *ops, uint64_t num_blocks,
		  uint32_t block_size, void *priv, struct bdev **out)
{
	struct bdev *b;

	REACTOR_0_ONLY();
	if (bdev_lookup(name))
		return -EEXIST;
	if (nbdevs >= BDEV_MAX_COUNT)
		return -ENOSPC;
	if (num_blocks == 0)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	strcpy(b->name, name);
	strncpy(b->type, ops->type, sizeof(b->type) - 1);
	b->num_blocks = num_blocks;
	b->block_size = block_size;
	b->ops = ops;
	b->priv = priv;
	slot_take(b);
	b->next = bdevs;
	bdevs = b;
	nbdevs++;
	BLKTGT_BDEV_CREATE(b->name, b->type, b->num_blocks, b->block_size);
	log_info("bdev %s created: %s, %llu blocks of %u bytes", b->name, b->type,
		 (unsigned long long)num_blocks, block_size);
	if (out)
		*out = b;
	return 0;
}

struct bdev *bdev_lookup(const char *name)
{
	for (struct bdev *b = bdevs; b; b = b->next)
		if (strcmp(b->name, name) == 0)
			return b;
	return NULL;
}

struct bdev *bdev_first(void)
{
	return bdevs;
}

static void bdev_free(struct bdev *b)
{
	slot_release(b);
	BLKTGT_BDEV_DELETE(b->name, b->type);
	log_info("bdev %s deleted", b->name);
	b->ops->destroy(b);
	free(b);
}

int bdev_delete(const char *name)
{
	struct bdev **pp;

	REACTOR_0_ONLY();
	for (pp = &bdevs; *pp; pp = &(*pp)->next) {
		struct bdev *b = *pp;

		if (strcmp(b->name, name) != 0)
			continue;
		if (b->exports || b->users || b->stacked)
			return -EBUSY;
		*pp = b->next;
		nbdevs--;
		bdev_free(b);
		return 0;
	}
	return -ENOENT;
}

void bdev_delete_all(void)
{
	while (bdevs) {
		struct bdev *b = bdevs;

		if (b->exports || b->users)
			log_warn("bdev %s deleted while still in use", b->name);
		bdevs = b->next;
		nbdevs--;
		bdev_free(b);
	}
}

uint64_t bdev_size(const struct bdev *b)
{
	return b->num_blocks * b->block_size;
}

/* The checks of bdev.h's contract; 0 or -EINVAL/-ERANGE. */
static int validate(const struct bdev_io *io)
{
	const struct bdev *b = io->bdev;
	uint64_t size;

	if (!b || (unsigned)io->type >= BDEV_IO_TYPE_COUNT)
		return -EINVAL;
	size = bdev_size(b);
	if (io->type == BDEV_IO_FLUSH && io->offset == 0 && io->len == 0)
		return 0;       /* the whole device */
	if (io->len == 0 || io->len > BDEV_MAX_IO_SIZE)
		return -EINVAL;
	if ((io->offset | io->len) & (b->block_size - 1))
		return -EINVAL;
	if (io->offset >= size || io->len > size - io->offset)
		return -ERANGE;
	if ((io->type == BDEV_IO_READ || io->type == BDEV_IO_WRITE) && !io->buf)
		return -EINVAL;
	return 0;
}

UPROBE_SYMBOL
int64_t bdev_execute(struct bdev *b, uint32_t type, uint64_t offset, uint64_t len,
		     void *buf, int fua)
{
	return b->ops->execute(b, (enum bdev_io_type)type, offset, len, buf, fua != 0);
}

UPROBE_SYMBOL
int bdev_submit(struct bdev_io *io)
{
	struct bdev_thread *t = this_thread();
	int64_t done;
	int rc;

	if (!t)
		return -EINVAL;         /* completions need a reactor */
	rc = validate(io);
	if (rc)
		return rc;
	io->id = ((uint64_t)(t - threads) << 48) | (++t->next_id & ((1ull << 48) - 1));
	io->submit_ns = reactor_now_ns();
	io->next = NULL;
	t->stats.submitted++;
	if (BLKTGT_IO_SUBMIT_ENABLED())
		BLKTGT_IO_SUBMIT(io->id, io->bdev->name, io->type, io->offset, io->len,
				 bdev_io_type_name(io->type));
	trace_bdev_io_submit((uint32_t)(t - threads), io->id, io->trace_cause, io->bdev->name,
			     (int32_t)io->type, (int32_t)io->len, (int64_t)io->offset);
	if (io->bdev->ops->submit) {
		io->status = 0;
		rc = io->bdev->ops->submit(io->bdev, io);
		if (rc == 0)
			return 0;
		io->status = rc;
		queue_completion(t, io);
		return 0;
	}
	done = bdev_execute(io->bdev, io->type, io->offset, io->len, io->buf, io->fua);
	io->status = done < 0 ? (int)done : 0;
	queue_completion(t, io);
	return 0;
}

void bdev_io_done(struct bdev_io *io)
{
	queue_completion(this_thread(), io);
}

static void queue_completion(struct bdev_thread *t, struct bdev_io *io)
{
	io->next = NULL;
	if (t->done_tail)
		t->done_tail->next = io;
	else
		t->done_head = io;
	t->done_tail = io;
	if (!t->defer_queued) {
		t->defer_queued = true;
		t->defer.fn = drain_completions;
		t->defer.ctx = t;
		reactor_defer(&t->defer);
	}
}

/*
 * io__batch's site is a 5-byte nop in every x86-64 build, not only in
 * USDT_NOP5=1's: Linux 6.18 turns a traced 5-byte nop into a call to its
 * uprobe trampoline, about half the cost of the int3 a 1-byte nop takes
 * (bench/RESULTS.md), and every hit of this probe is paid by a whole
 * batch's I/Os.  That call writes below the stack pointer, so this file is
 * compiled with -mno-red-zone (mk/nop5.mk), and the site sits only here:
 * batch_flush() is static and nothing outside this file can inline it.
 * _SDT_NOP is expanded where a probe macro is used, so redefining it
 * around this one function changes this site alone.
 */
#if defined(__x86_64__) && defined(_SDT_NOP)
#pragma push_macro("_SDT_NOP")
#undef _SDT_NOP
#define _SDT_NOP .nops 5
#define BDEV_BATCH_NOP5 1
#endif

/* Fire t's batch (which holds records).  Fired even if the semaphore
 * fell since they were filled: a site nobody traces is a nop. */
static void batch_flush(struct bdev_thread *t)
{
	int32_t n = (int32_t)t->batch_n;

	/* In a register, not an operand in memory (-4@88(%rdi)): a reader
	 * then takes the count with one register read instead of also a
	 * read of blktgt's memory, on every hit. */
	__asm__ volatile("" : "+r"(n));
	BLKTGT_IO_BATCH((int32_t)(t - threads), n, t->batch, bdev_names[0]);
	t->batch_n = 0;
}

#ifdef BDEV_BATCH_NOP5
#pragma pop_macro("_SDT_NOP")
#endif

/* Record every io of the list at head, done now, in t's batches, and fire
 * them all.  Out of line: untraced, the drain keeps only the semaphore
 * test. */
__attribute__((noinline))
static void batch_record(struct bdev_thread *t, const struct bdev_io *head)
{
	uint64_t now = reactor_now_ns();

	for (const struct bdev_io *io = head; io; io = io->next) {
		struct io_rec *r = &t->batch[t->batch_n++];

		r->id = io->id;
		r->offset = io->offset;
		r->submit_ns = io->submit_ns;
		r->done_ns = now;
		r->length = (uint32_t)io->len;          /* <= BDEV_MAX_IO_SIZE */
		r->status = io->status;
		r->bdev = io->bdev->index;
		r->type = (uint8_t)io->type;
		memset(r->pad, 0, sizeof(r->pad));
		if (t->batch_n == IO_BATCH_MAX)
			batch_flush(t);
	}
	if (t->batch_n)
		batch_flush(t);
}

UPROBE_SYMBOL
void bdev_io_complete(struct bdev_io *io)
{
	struct bdev_thread *t = this_thread();

	t->stats.completed++;
	if (io->status < 0)
		t->stats.errors++;
	else if (io->type == BDEV_IO_READ || io->type == BDEV_IO_WRITE)
		t->stats.bytes += io->len;
	if (BLKTGT_IO_DONE_ENABLED())
		BLKTGT_IO_DONE(io->id, io->bdev->name, io->type, io->len, io->status,
			       bdev_io_type_name(io->type));
	trace_bdev_io_done((uint32_t)(t - threads), io->id, 0, io->status, (int32_t)io->len);
	io->cb(io, io->cb_ctx);
}

static void drain_completions(void *arg)
{
	struct bdev_thread *t = arg;
	/* Take the list as it is: callbacks that resubmit start a new one,
	 * completed on the next pass, so one reactor keeps serving its fds. */
	struct bdev_io *io = t->done_head;

	t->done_head = t->done_tail = NULL;
	t->defer_queued = false;
	if (BLKTGT_IO_BATCH_ENABLED())
		batch_record(t, io);
	while (io) {
		struct bdev_io *next = io->next;

		io->next = NULL;
		bdev_io_complete(io);
		io = next;
	}
}

void bdev_get_stats(struct bdev_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (unsigned i = 0; i < REACTOR_MAX; i++) {
		const volatile struct bdev_stats *s = &threads[i].stats;

		st->submitted += s->submitted;
		st->completed += s->completed;
		st->errors += s->errors;
		st->bytes += s->bytes;
	}
}
