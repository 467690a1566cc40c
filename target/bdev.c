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
 * records each I/O in its reactor's batch (io_batch.h), then runs the
 * completions.  The drain's timestamp (the records' done_ns) is the
 * clock read of the first I/O the first completion's callback submits,
 * so a drain that resubmits reads no clock for the batch
 * (batch_drain_head()).  A batch spans loop passes: it is fired under
 * probekit_batch.h's policy (full; oldest record 1 ms old, checked with
 * the drain's timestamp or at the end of a pass that had no drain; before
 * the reactor sleeps; when it stops), and when a workload job ends
 * (bdev_batch_flush()), so a job's result never reaches its caller before
 * its records reach a tool.  Untraced, this costs one branch on the
 * semaphore per drain, not per I/O, and the hooks are not even added
 * (bdev_submit() keeps its clock read in t->now_ns either way: one store
 * to a line it writes anyway); a USDT=0 build drops it all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probekit_batch.h"
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
	/* The clock as this reactor's last bdev_submit() read it: a traced
	 * drain stamps its records with it (batch_drain_head()), so the
	 * batch costs no clock read of its own where callbacks resubmit.
	 * Beside next_id, on the line bdev_submit() writes anyway. */
	uint64_t now_ns;
	struct bdev_io *done_head, *done_tail;
	struct reactor_defer defer;
	bool defer_queued;
	struct bdev_stats stats;
	/* io__batch: records not yet fired, and the flushes so far (read by
	 * reactor 0 to know when a deleted bdev's slot is free). */
	struct pk_batch batch;
	uint64_t flushes;
	bool hooks_added;       /* this reactor's pass and idle hooks */
	bool drained;           /* a drain checked the batch this pass */
	bool stamp_due;         /* recs[stamp_from..n) wait for their done_ns */
	uint32_t stamp_from;
	struct io_rec recs[IO_BATCH_MAX];
};

static struct bdev_thread threads[REACTOR_MAX] = {
	[0 ... REACTOR_MAX - 1] = { .batch = PK_BATCH_INIT(IO_BATCH_MAX) },
};
static struct bdev *bdevs;
static unsigned nbdevs;

/* io__batch's name table (io_batch.h), and which slots a bdev holds
 * (reactor 0 only).  A deleted bdev's slot stays held until every batch
 * that may hold a record of it has been fired (slot_hold), so a record
 * is never named after a bdev created later. */
static char bdev_names[BDEV_INDEX_MAX][BDEV_NAME_LEN];
static bool slot_used[BDEV_INDEX_MAX];

/* What the table merges, as io__batch passes it (io_batch.h): the live
 * bdevs whose cut name another live bdev with a slot of its own shares,
 * and the live bdevs past the table, under BDEV_INDEX_OTHER.  Reactor 0
 * writes them as bdevs come and go; batch_flush() reads them on any
 * reactor, a gauge each, so relaxed atomics. */
static uint32_t bdevs_cut, bdevs_other;

/* A deleted bdev's slot, held until each reactor in mask has flushed
 * past its count of flushes at the deletion.  Its I/O all completed
 * before the deletion (a bdev with users cannot be deleted), and the
 * messages that told reactor 0 so order the records before these reads. */
struct slot_hold {
	uint16_t slot;
	uint64_t mask;
	uint64_t flushes[REACTOR_MAX];
	struct slot_hold *next;
};
static struct slot_hold *slot_holds;

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

static uint32_t read_u32(const uint32_t *p)
{
	return *(const volatile uint32_t *)p;
}

static uint64_t read_u64(const uint64_t *p)
{
	return *(const volatile uint64_t *)p;
}

/* Free the slots whose holds have been flushed past. */
static void slot_holds_check(void)
{
	for (struct slot_hold **pp = &slot_holds; *pp;) {
		struct slot_hold *h = *pp;

		for (unsigned i = 0; i < REACTOR_MAX; i++)
			if ((h->mask >> i & 1) && read_u64(&threads[i].flushes) != h->flushes[i])
				h->mask &= ~(1ull << i);
		if (h->mask) {
			pp = &h->next;
			continue;
		}
		slot_used[h->slot] = false;
		*pp = h->next;
		free(h);
	}
}

/* The live bdevs other than b that hold a slot of their own under b's
 * name as the table cuts it. */
static unsigned label_peers(const struct bdev *b)
{
	unsigned n = 0;

	for (const struct bdev *o = bdevs; o; o = o->next)
		if (o != b && o->index != BDEV_INDEX_OTHER &&
		    strncmp(o->name, b->name, BDEV_NAME_LEN - 1) == 0)
			n++;
	return n;
}

/* Count b in (add 1) or out of (add -1) what the table merges: b, of a
 * slot of its own, and its peers share a label once there are two. */
static void labels_count(const struct bdev *b, uint32_t add)
{
	uint32_t *c = &bdevs_other, v;

	if (b->index != BDEV_INDEX_OTHER) {
		unsigned peers = label_peers(b);

		c = &bdevs_cut;
		add *= peers == 0 ? 0 : peers == 1 ? 2 : 1;
	}
	v = __atomic_load_n(c, __ATOMIC_RELAXED) + add;
	__atomic_store_n(c, v, __ATOMIC_RELAXED);
}

/* A name table slot for b: the lowest free one, else BDEV_INDEX_OTHER. */
static void slot_take(struct bdev *b)
{
	unsigned i;

	if (slot_holds)
		slot_holds_check();
	for (i = 0; i < BDEV_INDEX_OTHER; i++)
		if (!slot_used[i])
			break;
	b->index = (uint16_t)i;
	/* Written before b can take I/O: readers see the whole name. */
	if (i == BDEV_INDEX_OTHER) {
		snprintf(bdev_names[i], BDEV_NAME_LEN, "(other)");
	} else {
		slot_used[i] = true;
		snprintf(bdev_names[i], BDEV_NAME_LEN, "%s", b->name);
	}
	labels_count(b, 1);
}

/* b is deleted: its slot is free once no batch can hold its records.  If
 * the hold cannot be allocated the slot is never reused: a lost slot
 * beats a misnamed record. */
static void slot_release(const struct bdev *b)
{
	struct slot_hold *h;

	labels_count(b, (uint32_t)-1);
	if (b->index == BDEV_INDEX_OTHER)
		return;
	h = calloc(1, sizeof(*h));
	if (!h)
		return;
	h->slot = b->index;
	for (unsigned i = 0; i < REACTOR_MAX; i++) {
		if (!read_u32(&threads[i].batch.n))
			continue;
		h->mask |= 1ull << i;
		h->flushes[i] = read_u64(&threads[i].flushes);
	}
	h->next = slot_holds;
	slot_holds = h;
	slot_holds_check();
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
#if BLKTGT_USDT
	t->now_ns = io->submit_ns;      /* batch_drain_head()'s stamp */
#endif
	io->next = NULL;
	t->stats.submitted++;
	BLKTGT_IO_SUBMIT_EV((uint32_t)(t - threads), io->trace_cause, io->id, io->bdev->name,
			    io->type, io->offset, io->len, bdev_io_type_name(io->type));
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

/* The records of the drain under way get their done_ns, now (which is
 * after the drain began), and so does the batch's first_ns if the drain
 * began it: batch_drain_head() adds records before it has a time. */
static inline void batch_stamp(struct bdev_thread *t, uint64_t now)
{
	if (!t->stamp_due)
		return;
	t->stamp_due = false;
	for (uint32_t i = t->stamp_from; i < t->batch.n; i++)
		t->recs[i].done_ns = now;
	if (t->stamp_from == 0)
		t->batch.first_ns = now;
}

/* Fire t's batch (which holds records) at now.  Fired even if the
 * semaphore fell since they were filled: a site nobody traces is a nop.
 * Out of line, so the probe has one site. */
__attribute__((noinline))
static void batch_flush(struct bdev_thread *t, uint64_t now)
{
	uint64_t merged = __atomic_load_n(&bdevs_cut, __ATOMIC_RELAXED) |
		(uint64_t)__atomic_load_n(&bdevs_other, __ATOMIC_RELAXED) << 32;
	int32_t n;

	batch_stamp(t, now);
	n = (int32_t)t->batch.n;
	/* In a register, not an operand in memory (-4@88(%rdi)): a reader
	 * then takes the count with one register read instead of also a
	 * read of blktgt's memory, on every hit.  The merge counts too, or
	 * they could be %rip-relative operands, which bpftrace 0.17 cannot
	 * read. */
	__asm__ volatile("" : "+r"(n), "+r"(merged));
	BLKTGT_IO_BATCH((int32_t)(t - threads), n, t->recs, bdev_names[0], now,
			merged);
	pk_batch_clear(&t->batch);
	/* Seen by reactor 0 only after the records are gone (slot_hold). */
	__atomic_store_n(&t->flushes, t->flushes + 1, __ATOMIC_RELEASE);
}

#ifdef BDEV_BATCH_NOP5
#pragma pop_macro("_SDT_NOP")
#endif

/* The clock, out of line: its callers keep no timespec, so no stack
 * frame or canary, on their fast paths. */
__attribute__((noinline))
static uint64_t batch_clock(void)
{
	return pk_batch_now();
}

/* The end of a pass: a batch whose oldest record is past the bound goes
 * now.  A pass with a drain was checked with the drain's timestamp; only
 * a pass without one (the reactor busy with fds or messages) reads the
 * clock, and only while records are held. */
__attribute__((noinline))
static void batch_pass_check(struct bdev_thread *t)
{
	uint64_t now = batch_clock();

	if (pk_batch_due(&t->batch, now))
		batch_flush(t, now);
}

/* Runs every pass while traced: its common case kept to a load and a
 * store, with no stack frame (batch_pass_check() has it). */
static void batch_pass_end(void *arg)
{
	struct bdev_thread *t = arg;

	if (t->drained)
		t->drained = false;
	else if (pk_batch_held(&t->batch))
		batch_pass_check(t);
}

/* The reactor may sleep, or is stopping: nothing is kept over it. */
static void batch_idle(void *arg)
{
	struct bdev_thread *t = arg;

	if (pk_batch_held(&t->batch))
		batch_flush(t, batch_clock());
}

int bdev_batch_cap_from_env(void)
{
	const char *v = getenv(BDEV_BATCH_CAP_ENV);
	char *end;
	unsigned long n;

	if (!v)
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || n < 1 || n > IO_BATCH_MAX) {
		fprintf(stderr, "blktgt: %s='%s' is not a number of records in 1..%d; "
			"give one or unset it\n", BDEV_BATCH_CAP_ENV, v, IO_BATCH_MAX);
		return -EINVAL;
	}
	for (unsigned i = 0; i < REACTOR_MAX; i++)
		threads[i].batch.cap = (uint32_t)n;
	return 0;
}

void bdev_batch_flush(void)
{
	struct bdev_thread *t = this_thread();

	if (t && pk_batch_held(&t->batch))
		batch_flush(t, batch_clock());
}

/* The first record on this reactor: its hooks, added once.  Without them
 * the batch would only go when full, so on ENOMEM it goes at once. */
static bool batch_hooks(struct bdev_thread *t)
{
	if (t->hooks_added)
		return true;
	if (!reactor_pass_hook_add(batch_pass_end, t))
		return false;
	/* A pass hook without its idle hook is harmless: retried next time. */
	if (!reactor_idle_hook_add(batch_idle, t))
		return false;
	t->hooks_added = true;
	return true;
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
	BLKTGT_IO_DONE_EV((uint32_t)(t - threads), io->id, io->bdev->name, io->type, io->len,
			  io->status, bdev_io_type_name(io->type));
	io->cb(io, io->cb_ctx);
}

/*
 * A traced drain: record every io of the list at head in t's batch
 * (fired when full), complete the first io, then give the records their
 * done_ns, check the bound with it, and return the rest of the list.
 *
 * done_ns is the clock read of the first I/O the first completion's
 * callback submitted (t->now_ns: a workload or an NBD connection
 * resubmits there), else a clock read of our own.  Reading the clock per
 * drain cost about 25 ns, at queue depth 1 per I/O (bench/BATCH_BOUND.md);
 * the drain is now at most one callback later than the time recorded
 * before, far below a histogram's microsecond slots.  A flush before
 * then (full, or bdev_batch_flush() from that callback) stamps the
 * records with its own time.  Out of line: untraced, the drain keeps only
 * the semaphore test.
 */
__attribute__((noinline))
static struct bdev_io *batch_drain_head(struct bdev_thread *t, struct bdev_io *head)
{
	/* n in a register: the records' stores may alias the batch's. */
	uint32_t n = t->batch.n, cap = t->batch.cap;
	struct bdev_io *rest;
	uint64_t now;

	t->now_ns = 0;
	t->stamp_from = n;
	t->stamp_due = true;
	for (const struct bdev_io *io = head; io; io = io->next) {
		struct io_rec *r = &t->recs[n++];

		r->id = io->id;
		r->offset = io->offset;
		r->submit_ns = io->submit_ns;
		r->length = (uint32_t)io->len;          /* <= BDEV_MAX_IO_SIZE */
		r->status = io->status;
		r->bdev = io->bdev->index;
		r->type = (uint8_t)io->type;
		/* r->pad stays as threads[] was initialised, zero: nothing
		 * writes it, so it is not written per record either. */
		/* Full (pk_batch_full()) with more to record: fired now, at a
		 * clock read of its own.  Full at the list's end, it waits
		 * for the stamp below and goes with it (pk_batch_due()). */
		if (n >= cap && io->next) {
			t->batch.n = n;
			batch_flush(t, batch_clock());
			n = 0;
			t->stamp_from = 0;
			t->stamp_due = true;
		}
	}
	t->batch.n = n;

	rest = head->next;
	head->next = NULL;
	bdev_io_complete(head);

	now = t->now_ns ? t->now_ns : batch_clock();
	batch_stamp(t, now);
	if (pk_batch_held(&t->batch) &&
	    (pk_batch_due(&t->batch, now) || !batch_hooks(t)))
		batch_flush(t, now);
	t->drained = true;
	return rest;
}

static void drain_completions(void *arg)
{
	struct bdev_thread *t = arg;
	/* Take the list as it is: callbacks that resubmit start a new one,
	 * completed on the next pass, so one reactor keeps serving its fds. */
	struct bdev_io *io = t->done_head;

	t->done_head = t->done_tail = NULL;
	t->defer_queued = false;
	if (BLKTGT_IO_BATCH_ENABLED() && io)
		io = batch_drain_head(t, io);
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
		st->batch_held += read_u32(&threads[i].batch.n);
	}
}
