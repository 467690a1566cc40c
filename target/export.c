// SPDX-License-Identifier: BSD-2-Clause
/*
 * export.c: named exports and their state machine.
 *
 * Every reactor keeps its own view of each export (state, in-flight count,
 * queue of I/O held while paused), touched only by that reactor, so the
 * I/O path takes no lock.  A state change walks the reactors with
 * reactor_for_each_thread(): on each, the reactor flips its view and, when the new
 * state stops I/O (PAUSED or INACTIVE), waits for its in-flight I/O to
 * finish before the walk moves on.  When the walk is done every reactor
 * has the new state and no I/O of the old one is still running.
 *
 * Changes are serialised per export: one at a time, others get -EBUSY.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "blktgt_probes.h"
#include "export.h"
#include "log.h"

struct export_thread {
	_Alignas(64) enum export_state state;
	uint64_t inflight;
	struct bdev_io *held_head, *held_tail;  /* submitted while paused */
	struct reactor_foreach *waiting;                /* a change waiting for inflight == 0 */
};

struct export {
	char name[BDEV_NAME_MAX + 1];
	struct bdev *bdev;
	enum export_state state;        /* reactor 0's view of the last completed change */
	bool changing;
	bool deleting;
	bool abandoned;         /* left behind at shutdown, still referenced */
	atomic_uint refs;
	struct export *next;
	struct export_thread per[REACTOR_MAX];
};

struct change {
	struct export *e;
	enum export_state from, to;
	export_done_fn done;
	void *ctx;
};

static struct export *exports;
static unsigned nexports;
static bool closing;            /* shutdown has begun: no new pauses */
static struct delete_all *delete_waiting;   /* export_delete_all, until a change ends */

static void change_settled(void);

struct export *export_lookup(const char *name)
{
	REACTOR_0_ONLY();
	for (struct export *e = exports; e; e = e->next)
		if (strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

struct export *export_first(void)
{
	REACTOR_0_ONLY();
	return exports;
}

struct export *export_next(struct export *e) { return e->next; }
const char *export_name(const struct export *e) { return e->name; }
struct bdev *export_bdev(const struct export *e) { return e->bdev; }
enum export_state export_state(const struct export *e) { return e->state; }

bool export_accepting(const struct export *e)
{
	REACTOR_0_ONLY();
	/* By address first: a caller may hold a pointer it found earlier, on
	 * an earlier loop pass, to an export deleted since. */
	for (struct export *x = exports; x; x = x->next)
		if (x == e)
			return !x->deleting && !x->abandoned && x->state != EXPORT_INACTIVE;
	return false;
}

unsigned export_clients(const struct export *e)
{
	return atomic_load(&((struct export *)e)->refs);
}

void export_get(struct export *e)
{
	REACTOR_0_ONLY();
	atomic_fetch_add(&e->refs, 1);
}

void export_put(struct export *e)
{
	atomic_fetch_sub(&e->refs, 1);
}

/* --- the I/O path ------------------------------------------------------ */

static void thread_step_done(struct export *e, struct export_thread *t, struct reactor_foreach *it)
{
	if (BLKTGT_EXPORT_THREAD_DONE_ENABLED())
		BLKTGT_EXPORT_THREAD_DONE(e->name, reactor_index(reactor_self()), t->state,
					  export_state_name(t->state));
	reactor_foreach_continue(it, 0);
}

static void export_io_done(struct bdev_io *io, void *ctx)
{
	struct export *e = ctx;
	struct export_thread *t = &e->per[reactor_index(reactor_self())];

	io->cb = io->user_cb;
	io->cb_ctx = io->user_ctx;
	t->inflight--;
	io->cb(io, io->cb_ctx);
	/* After the callback: anything it resubmitted while pausing is held,
	 * so inflight only falls from here. */
	if (t->inflight == 0 && t->waiting) {
		struct reactor_foreach *it = t->waiting;

		t->waiting = NULL;
		thread_step_done(e, t, it);
	}
}

static int export_start_io(struct export *e, struct export_thread *t, struct bdev_io *io)
{
	int rc;

	io->user_cb = io->cb;
	io->user_ctx = io->cb_ctx;
	io->cb = export_io_done;
	io->cb_ctx = e;
	t->inflight++;
	rc = bdev_submit(io);
	if (rc) {
		t->inflight--;
		io->cb = io->user_cb;
		io->cb_ctx = io->user_ctx;
	}
	return rc;
}

int export_submit(struct export *e, struct bdev_io *io)
{
	struct reactor *r = reactor_self();
	struct export_thread *t;

	if (!r)
		return -EINVAL;
	t = &e->per[reactor_index(r)];
	switch (t->state) {
	case EXPORT_ACTIVE:
		io->bdev = e->bdev;
		return export_start_io(e, t, io);
	case EXPORT_PAUSED:
		io->bdev = e->bdev;
		io->next = NULL;
		if (t->held_tail)
			t->held_tail->next = io;
		else
			t->held_head = io;
		t->held_tail = io;
		return 0;
	default:
		return -ENODEV;
	}
}

/* Submit (ACTIVE) or fail (INACTIVE) what was held while paused.  Called
 * from a message, never from inside a caller's export_submit(), so
 * running a callback directly keeps the completion contract. */
static void release_held(struct export *e, struct export_thread *t)
{
	struct bdev_io *io = t->held_head;

	t->held_head = t->held_tail = NULL;
	while (io) {
		struct bdev_io *next = io->next;
		int rc = t->state == EXPORT_ACTIVE ? export_start_io(e, t, io) : -ENODEV;

		io->next = NULL;
		if (rc) {
			io->status = rc;
			io->cb(io, io->cb_ctx);
		}
		io = next;
	}
}

/* --- state changes ----------------------------------------------------- */

static void change_step(struct reactor_foreach *it, void *ctx)
{
	struct change *ch = ctx;
	struct export *e = ch->e;
	unsigned idx = reactor_index(reactor_self());
	struct export_thread *t = &e->per[idx];

	if (BLKTGT_EXPORT_THREAD_START_ENABLED())
		BLKTGT_EXPORT_THREAD_START(e->name, idx, ch->to, export_state_name(ch->to));
	t->state = ch->to;
	if (t->held_head && ch->to != EXPORT_PAUSED)
		release_held(e, t);
	if (ch->to != EXPORT_ACTIVE && t->inflight > 0) {
		t->waiting = it;        /* export_io_done() continues */
		return;
	}
	thread_step_done(e, t, it);
}

static void export_free(struct export *e)
{
	struct export **pp;

	for (pp = &exports; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	}
	nexports--;
	e->bdev->exports--;
	log_info("export %s deleted", e->name);
	free(e);
}

static void change_done(void *ctx, int status)
{
	struct change *ch = ctx;
	struct export *e = ch->e;

	e->state = ch->to;
	e->changing = false;
	if (BLKTGT_EXPORT_CHANGE_DONE_ENABLED())
		BLKTGT_EXPORT_CHANGE_DONE(e->name, ch->from, ch->to, export_state_name(ch->to),
					  status);
	if (BLKTGT_EXPORT_STATE_ENABLED())
		BLKTGT_EXPORT_STATE(e, ch->from);
	if (e->deleting)
		export_free(e);
	if (ch->done)
		ch->done(ch->ctx, status);
	free(ch);
	change_settled();
}

static int change_start(struct export *e, enum export_state to, export_done_fn done, void *ctx)
{
	struct change *ch;
	int rc;

	if (e->changing)
		return -EBUSY;
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->e = e;
	ch->from = e->state;
	ch->to = to;
	ch->done = done;
	ch->ctx = ctx;
	e->changing = true;
	if (BLKTGT_EXPORT_CHANGE_START_ENABLED())
		BLKTGT_EXPORT_CHANGE_START(e->name, ch->from, to, export_state_name(ch->from),
					   export_state_name(to));
	rc = reactor_for_each_thread(change_step, ch, change_done);
	if (rc) {
		e->changing = false;
		free(ch);
	}
	return rc;
}

int export_create(const char *name, const char *bdev_name, export_done_fn done, void *ctx)
{
	struct bdev *b;
	struct export *e;
	size_t len = strlen(name);
	int rc;

	REACTOR_0_ONLY();
	if (len == 0 || len > BDEV_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] <= ' ' || name[i] == '/' || name[i] == 0x7f)
			return -EINVAL;
	if (export_lookup(name))
		return -EEXIST;
	b = bdev_lookup(bdev_name);
	if (!b)
		return -ENOENT;
	if (nexports >= EXPORT_MAX_COUNT)
		return -ENOSPC;
	if (posix_memalign((void **)&e, 64, sizeof(*e)) != 0)
		return -ENOMEM;
	memset(e, 0, sizeof(*e));
	strcpy(e->name, name);
	e->bdev = b;
	e->state = EXPORT_INACTIVE;
	atomic_init(&e->refs, 0);
	rc = change_start(e, EXPORT_ACTIVE, done, ctx);
	if (rc) {
		free(e);
		return rc;
	}
	b->exports++;
	e->next = exports;
	exports = e;
	nexports++;
	log_info("export %s of bdev %s created", e->name, b->name);
	return 0;
}

int export_pause(const char *name, export_done_fn done, void *ctx)
{
	struct export *e = export_lookup(name);

	if (!e)
		return -ENOENT;
	if (closing)
		return -ESHUTDOWN;
	if (e->deleting || e->changing)
		return -EBUSY;
	if (e->state != EXPORT_ACTIVE)
		return -EALREADY;
	return change_start(e, EXPORT_PAUSED, done, ctx);
}

int export_resume(const char *name, export_done_fn done, void *ctx)
{
	struct export *e = export_lookup(name);

	if (!e)
		return -ENOENT;
	if (e->deleting || e->changing)
		return -EBUSY;
	if (e->state != EXPORT_PAUSED)
		return -EALREADY;
	return change_start(e, EXPORT_ACTIVE, done, ctx);
}

int export_delete(const char *name, export_done_fn done, void *ctx)
{
	struct export *e = export_lookup(name);
	int rc;

	if (!e)
		return -ENOENT;
	if (e->deleting || e->changing || atomic_load(&e->refs) > 0)
		return -EBUSY;
	e->deleting = true;
	rc = change_start(e, EXPORT_INACTIVE, done, ctx);
	if (rc)
		e->deleting = false;
	return rc;
}

/* --- shutdown ---------------------------------------------------------- */

/*
 * Shutdown waits for the I/O of every workload and client, and I/O that a
 * paused export holds would never complete.  So once shutdown begins no
 * export may pause, and every paused one is resumed: the held I/O runs and
 * nothing is lost.  An export whose change (a pause, say) is still under
 * way cannot be resumed or deleted yet; shutdown does not poll for it but
 * goes on from change_settled(), when any change completes.
 */
struct delete_all {
	export_done_fn done;
	void *ctx;
	int status;
};

static void delete_next(void *ctx, int status);

static void resume_done(void *ctx, int status)
{
	if (status)
		log_warn("shutdown: resuming an export failed: %s", strerror(-status));
}

/* Start resuming every paused export that no change holds. */
static void resume_paused(void)
{
	for (struct export *e = exports; e; e = e->next) {
		int rc;

		if (e->changing || e->deleting || e->state != EXPORT_PAUSED)
			continue;
		log_info("shutdown: resuming export %s to let its held I/O finish", e->name);
		rc = change_start(e, EXPORT_ACTIVE, resume_done, NULL);
		if (rc)
			log_error("shutdown: cannot resume export %s: %s; its held I/O holds "
				  "shutdown up", e->name, strerror(-rc));
	}
}

/* A change has completed: shutdown work that waited for one goes on. */
static void change_settled(void)
{
	struct delete_all *da = delete_waiting;

	if (!closing)
		return;
	resume_paused();
	if (da) {
		delete_waiting = NULL;
		delete_next(da, 0);
	}
}

void export_shutdown_begin(void)
{
	REACTOR_0_ONLY();
	closing = true;
	resume_paused();
}

static void delete_next(void *ctx, int status)
{
	struct delete_all *da = ctx;
	struct export *e;

	if (status && !da->status)
		da->status = status;
	for (e = exports; e && e->abandoned; e = e->next)
		;
	if (!e) {
		da->done(da->ctx, da->status);
		free(da);
		return;
	}
	if (e->changing) {
		/* A pause or resume is finishing: change_settled() goes on. */
		delete_waiting = da;
		return;
	}
	if (export_delete(e->name, delete_next, da) == 0)
		return;
	/* Clients still hold it (they should be gone by now): leave it
	 * rather than free memory they point at. */
	log_warn("export %s: still in use at shutdown; not deleted", e->name);
	e->abandoned = true;
	if (!da->status)
		da->status = -EBUSY;
	delete_next(da, 0);
}

void export_delete_all(export_done_fn done, void *ctx)
{
	struct delete_all *da = calloc(1, sizeof(*da));

	REACTOR_0_ONLY();
	if (!da) {
		done(ctx, -ENOMEM);
		return;
	}
	da->done = done;
	da->ctx = ctx;
	delete_next(da, 0);
}
