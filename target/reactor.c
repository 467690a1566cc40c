// SPDX-License-Identifier: BSD-2-Clause
/*
 * reactor.c: reactor threads, each an epoll loop, and the lock-free
 * message queue that is the only way work crosses between them.
 *
 * A reactor's loop pass: run up to REACTOR_MSG_BATCH messages, run the
 * deferred work queued on this reactor, run the idle hooks if nothing is
 * left to do, wait on epoll (not at all when there is work left, forever
 * when there is none), run the ready fd callbacks, then the pass hooks.  A sleeping reactor is woken through its
 * eventfd, which senders write only when the reactor says it is going to
 * sleep, so a busy reactor never pays a syscall per message.
 *
 * The message queue is Dmitry Vyukov's intrusive multi-producer,
 * single-consumer queue, as he published it on 1024cores.net ("Intrusive
 * MPSC node-based queue"): a producer swaps itself in as the head with one
 * atomic exchange, the consumer walks from the tail.  Message nodes come
 * from a per-thread free list, so the steady state does not call malloc.
 * Vyukov published the queue at https://www.1024cores.net/home/lock-free-algorithms/queues/intrusive-mpsc-node-based-queue
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "blktgt_probes.h"
#include "log.h"
#include "reactor.h"
#include "trace.h"

#define REACTOR_EPOLL_EVENTS 64   /* fd events taken per epoll_wait */
#define MSG_CACHE_MAX        1024 /* free message nodes kept per thread */

struct msg {
	_Atomic(struct msg *) next;
	reactor_msg_fn fn;
	void *ctx;
};

struct reactor_fd {
	int fd;
	bool removed;
	struct reactor *r;              /* the reactor whose epoll watches it */
	reactor_fd_fn cb;
	void *ctx;
	struct reactor_fd *next;        /* all watchers, or the graveyard */
};

struct reactor_pass_hook {
	reactor_pass_fn fn;
	void *ctx;
	bool removed;
	struct reactor *r;
	struct reactor_pass_hook *next;
};
/* Idle hooks are the same record, on their own list (reactor->idle). */

struct reactor {
	/* Producers touch only these, on their own cache line. */
	_Alignas(64) _Atomic(struct msg *) head;
	atomic_int sleeping;
	atomic_bool stop;
	atomic_bool exited;             /* left its loop: messages would be lost */
	int evfd;

	/* Everything below belongs to the reactor's own thread. */
	_Alignas(64) struct msg *tail;
	struct msg stub;
	unsigned index;
	char name[16];                  /* "reactor_N": str()-readable */
	int epfd;
	pthread_t thread;
	bool started;
	uint64_t msgs;
	uint64_t passes;                /* loop passes completed */
	struct reactor_defer *defer_head, *defer_tail;
	struct reactor_fd *fds;
	struct reactor_fd *graveyard;
	struct reactor_pass_hook *hooks;
	struct reactor_pass_hook *idle;
	bool hooks_dirty;               /* a removed hook waits to be freed */
};

static struct reactor *reactors[REACTOR_MAX];
static unsigned nreactors;
__thread struct reactor *reactor_cur;
static __thread struct msg *msg_cache;
static __thread unsigned msg_cache_len;

uint64_t reactor_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- the MPSC queue ------------------------------------------------- */

static void mpsc_push(struct reactor *r, struct msg *m)
{
	struct msg *prev;

	atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
	prev = atomic_exchange_explicit(&r->head, m, memory_order_acq_rel);
	atomic_store_explicit(&prev->next, m, memory_order_release);
}

/* Pop one message, or NULL when the queue is empty or a producer is
 * half-way through its push (it will be seen on a later pass). */
static struct msg *mpsc_pop(struct reactor *r)
{
	struct msg *tail = r->tail;
	struct msg *next = atomic_load_explicit(&tail->next, memory_order_acquire);

	if (tail == &r->stub) {
		if (!next)
			return NULL;
		r->tail = next;
		tail = next;
		next = atomic_load_explicit(&next->next, memory_order_acquire);
	}
	if (next) {
		r->tail = next;
		return tail;
	}
	if (tail != atomic_load_explicit(&r->head, memory_order_acquire))
		return NULL;
	mpsc_push(r, &r->stub);
	next = atomic_load_explicit(&tail->next, memory_order_acquire);
	if (next) {
		r->tail = next;
		return tail;
	}
	return NULL;
}

static bool mpsc_empty(struct reactor *r)
{
	return r->tail == &r->stub &&
	       atomic_load_explicit(&r->head, memory_order_seq_cst) == &r->stub;
}

static struct msg *msg_alloc(void)
{
	struct msg *m = msg_cache;

	if (m) {
		msg_cache = atomic_load_explicit(&m->next, memory_order_relaxed);
		msg_cache_len--;
		return m;
	}
	return malloc(sizeof(*m));
}

static void msg_free(struct msg *m)
{
	if (msg_cache_len >= MSG_CACHE_MAX) {
		free(m);
		return;
	}
	atomic_store_explicit(&m->next, msg_cache, memory_order_relaxed);
	msg_cache = m;
	msg_cache_len++;
}

static void msg_cache_drain(void)
{
	while (msg_cache) {
		struct msg *m = msg_cache;

		msg_cache = atomic_load_explicit(&m->next, memory_order_relaxed);
		free(m);
	}
	msg_cache_len = 0;
}

static void reactor_wake(struct reactor *r)
{
	uint64_t one = 1;

	if (write(r->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_error("%s: eventfd write: %s", r->name, strerror(errno));
}

int reactor_send_msg(struct reactor *r, reactor_msg_fn fn, void *ctx)
{
	struct msg *m;

	if (atomic_load_explicit(&r->exited, memory_order_relaxed))
		reactor_rule_broken(__func__, "a message to %s, which has left its loop, "
				    "would never run", r->name);
	m = msg_alloc();
	if (!m)
		return -ENOMEM;
	m->fn = fn;
	m->ctx = ctx;
	if (BLKTGT_MSG_SEND_ENABLED())
		BLKTGT_MSG_SEND(reactor_cur ? reactor_cur->index : UINT32_MAX, r->index, fn, ctx);
	mpsc_push(r, m);
	atomic_thread_fence(memory_order_seq_cst);
	/* Pairs with the reactor's store to sleeping then its emptiness
	 * check: one of the two sides sees the other. */
	if (atomic_load_explicit(&r->sleeping, memory_order_seq_cst) &&
	    atomic_exchange_explicit(&r->sleeping, 0, memory_order_seq_cst))
		reactor_wake(r);
	return 0;
}

/* --- set-up ------------------------------------------------------------ */

int reactors_init(unsigned n)
{
	if (n < 1 || n > REACTOR_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		struct reactor *r;

		if (posix_memalign((void **)&r, 64, sizeof(*r)) != 0) {
			reactors_fini();
			return -ENOMEM;
		}
		memset(r, 0, sizeof(*r));
		r->index = i;
		snprintf(r->name, sizeof(r->name), "reactor_%u", i);
		atomic_init(&r->head, &r->stub);
		atomic_init(&r->stub.next, NULL);
		r->tail = &r->stub;
		r->epfd = epoll_create1(EPOLL_CLOEXEC);
		r->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		reactors[i] = r;
		nreactors = i + 1;
		if (r->epfd < 0 || r->evfd < 0) {
			int err = -errno;

			reactors_fini();
			return err;
		}
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
		if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->evfd, &ev) < 0) {
			int err = -errno;

			reactors_fini();
			return err;
		}
	}
	return 0;
}

void reactors_fini(void)
{
	for (unsigned i = 0; i < nreactors; i++) {
		struct reactor *r = reactors[i];
		struct msg *m;

		if (!r)
			continue;
		while ((m = mpsc_pop(r)) != NULL)
			if (m != &r->stub)
				free(m);
		while (r->fds) {
			struct reactor_fd *w = r->fds;

			r->fds = w->next;
			free(w);
		}
		while (r->graveyard) {
			struct reactor_fd *w = r->graveyard;

			r->graveyard = w->next;
			free(w);
		}
		while (r->hooks) {
			struct reactor_pass_hook *h = r->hooks;

			r->hooks = h->next;
			free(h);
		}
		while (r->idle) {
			struct reactor_pass_hook *h = r->idle;

			r->idle = h->next;
			free(h);
		}
		if (r->epfd >= 0)
			close(r->epfd);
		if (r->evfd >= 0)
			close(r->evfd);
		free(r);
		reactors[i] = NULL;
	}
	nreactors = 0;
	msg_cache_drain();
}

unsigned reactor_count(void)
{
	return nreactors;
}

struct reactor *reactor_get(unsigned index)
{
	return index < nreactors ? reactors[index] : NULL;
}

uint64_t reactor_passes(void)
{
	REACTOR_ANY_ONLY();
	return reactor_cur->passes;
}

void reactor_rule_broken(const char *func, const char *fmt, ...)
{
	char rule[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rule, sizeof(rule), fmt, ap);
	va_end(ap);
	/* Straight to stderr: the log writer thread may never run again. */
	dprintf(STDERR_FILENO, "blktgt: error: thread rule broken in %s(): %s; called on %s\n",
		func, rule, reactor_cur ? reactor_cur->name : "a thread that is not a reactor");
	abort();
}

void reactor_check_0(const char *func)
{
	if (!reactor_cur || reactor_cur->index != 0)
		reactor_rule_broken(func, "it runs on reactor_0 only");
}

unsigned reactor_index(const struct reactor *r)
{
	return r->index;
}

void reactors_stop(void)
{
	for (unsigned i = 0; i < nreactors; i++) {
		atomic_store(&reactors[i]->stop, true);
		reactor_wake(reactors[i]);
	}
}

/* --- deferred work, fds, pass hooks ------------------------------------ */

void reactor_defer(struct reactor_defer *d)
{
	struct reactor *r = reactor_cur;

	REACTOR_ANY_ONLY();
	d->next = NULL;
	if (r->defer_tail)
		r->defer_tail->next = d;
	else
		r->defer_head = d;
	r->defer_tail = d;
}

static void run_deferred(struct reactor *r)
{
	/* Only what was queued before this pass: work queued by a deferred
	 * callback waits for the next pass, after messages and fds. */
	struct reactor_defer *d = r->defer_head;

	r->defer_head = r->defer_tail = NULL;
	while (d) {
		struct reactor_defer *next = d->next;

		d->fn(d->ctx);
		d = next;
	}
}

struct reactor_fd *reactor_fd_add(int fd, uint32_t events, reactor_fd_fn cb, void *ctx)
{
	struct reactor *r = reactor_cur;
	struct reactor_fd *w;
	struct epoll_event ev;

	REACTOR_ANY_ONLY();
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	ev = (struct epoll_event){ .events = events, .data.ptr = w };
	w->r = r;
	w->fd = fd;
	w->cb = cb;
	w->ctx = ctx;
	if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int err = errno;

		free(w);
		errno = err;
		return NULL;
	}
	w->next = r->fds;
	r->fds = w;
	return w;
}

/* w is on its reactor's list and in its epoll set: only that reactor may
 * change either. */
static void check_owner(const char *func, const struct reactor *owner)
{
	if (owner != reactor_cur)
		reactor_rule_broken(func, "what %s added is used by %s only",
				    owner->name, owner->name);
}

int reactor_fd_modify(struct reactor_fd *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	check_owner(__func__, w->r);
	if (epoll_ctl(reactor_cur->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
		return -errno;
	return 0;
}

void reactor_fd_remove(struct reactor_fd *w)
{
	struct reactor *r = reactor_cur;
	struct reactor_fd **pp;

	if (!w || w->removed)
		return;
	check_owner(__func__, w->r);
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->removed = true;
	/* Freed at the end of the pass: an event for it may still sit in
	 * this pass's array. */
	for (pp = &r->fds; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	w->next = r->graveyard;
	r->graveyard = w;
}

struct reactor_timer {
	int fd;
	struct reactor_fd *w;
	reactor_timer_fn fn;
	void *ctx;
};

static void timer_fired(void *ctx, uint32_t events)
{
	struct reactor_timer *t = ctx;
	uint64_t n;

	if (read(t->fd, &n, sizeof(n)) < 0) {
		/* EAGAIN: re-armed since it fired; nothing to take. */
	}
	t->fn(t->ctx);          /* last: fn may remove (free) t */
}

int reactor_timer_set(struct reactor_timer *t, uint64_t first_ns, uint64_t period_ns)
{
	struct itimerspec its = {
		.it_value = { (time_t)(first_ns / 1000000000ull),
			      (long)(first_ns % 1000000000ull) },
		.it_interval = { (time_t)(period_ns / 1000000000ull),
				 (long)(period_ns % 1000000000ull) },
	};

	return timerfd_settime(t->fd, 0, &its, NULL) < 0 ? -errno : 0;
}

void reactor_timer_remove(struct reactor_timer *t)
{
	if (!t)
		return;
	reactor_fd_remove(t->w);
	close(t->fd);
	free(t);
}

struct reactor_timer *reactor_timer_add(uint64_t first_ns, uint64_t period_ns,
					reactor_timer_fn fn, void *ctx)
{
	struct reactor_timer *t = calloc(1, sizeof(*t));
	int err;

	if (!t)
		return NULL;
	t->fn = fn;
	t->ctx = ctx;
	t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (t->fd < 0) {
		err = errno;
		free(t);
		errno = err;
		return NULL;
	}
	err = -reactor_timer_set(t, first_ns, period_ns);
	if (!err) {
		t->w = reactor_fd_add(t->fd, EPOLLIN, timer_fired, t);
		if (!t->w)
			err = errno;
	}
	if (err) {
		close(t->fd);
		free(t);
		errno = err;
		return NULL;
	}
	return t;
}

static struct reactor_pass_hook *hook_append(struct reactor_pass_hook **list,
					     reactor_pass_fn fn, void *ctx)
{
	struct reactor_pass_hook *h, **pp;

	REACTOR_ANY_ONLY();
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->fn = fn;
	h->ctx = ctx;
	h->r = reactor_cur;
	for (pp = list; *pp; pp = &(*pp)->next)
		;
	*pp = h;
	return h;
}

struct reactor_pass_hook *reactor_pass_hook_add(reactor_pass_fn fn, void *ctx)
{
	REACTOR_ANY_ONLY();
	return hook_append(&reactor_cur->hooks, fn, ctx);
}

struct reactor_pass_hook *reactor_idle_hook_add(reactor_pass_fn fn, void *ctx)
{
	REACTOR_ANY_ONLY();
	return hook_append(&reactor_cur->idle, fn, ctx);
}

void reactor_pass_hook_remove(struct reactor_pass_hook *h)
{
	if (!h || h->removed)
		return;
	check_owner(__func__, h->r);
	h->removed = true;
	reactor_cur->hooks_dirty = true;
}

static void free_removed(struct reactor_pass_hook **pp)
{
	while (*pp) {
		struct reactor_pass_hook *h = *pp;

		if (h->removed) {
			*pp = h->next;
			free(h);
		} else {
			pp = &h->next;
		}
	}
}

/* Every hook of list once, in the order they were added; a hook added by
 * a hook runs from this round too, one removed does not. */
static void run_hooks(struct reactor *r, struct reactor_pass_hook **list)
{
	for (struct reactor_pass_hook *h = *list; h; h = h->next)
		if (!h->removed)
			h->fn(h->ctx);
	if (r->hooks_dirty) {
		free_removed(&r->hooks);
		free_removed(&r->idle);
		r->hooks_dirty = false;
	}
}

/* --- the loop ---------------------------------------------------------- */

static unsigned run_messages(struct reactor *r)
{
	unsigned n;

	for (n = 0; n < REACTOR_MSG_BATCH; n++) {
		struct msg *m = mpsc_pop(r);
		reactor_msg_fn fn;
		void *ctx;

		if (!m)
			break;
		fn = m->fn;
		ctx = m->ctx;
		msg_free(m);
		BLKTGT_MSG_EXEC_EV(r->index, fn, ctx);
		fn(ctx);
	}
	r->msgs += n;
	return n;
}

static int reactor_loop(struct reactor *r)
{
	struct epoll_event events[REACTOR_EPOLL_EVENTS];

	reactor_cur = r;
	trace_thread_init(r->index, r->name);
	BLKTGT_THREAD_START_EV(r->index, r->name);
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		unsigned ran = run_messages(r);
		int timeout = 0;
		int n;

		run_deferred(r);
		if (ran < REACTOR_MSG_BATCH && !r->defer_head) {
			if (r->idle)
				run_hooks(r, &r->idle);
			/* Going to sleep: announce it, then look once more, so a
			 * message pushed in between is not missed (reactor_send_msg). */
			atomic_store_explicit(&r->sleeping, 1, memory_order_seq_cst);
			if (mpsc_empty(r) && !atomic_load(&r->stop))
				timeout = -1;
			else
				atomic_store_explicit(&r->sleeping, 0, memory_order_relaxed);
		}
		n = epoll_wait(r->epfd, events, REACTOR_EPOLL_EVENTS, timeout);
		if (timeout)
			atomic_store_explicit(&r->sleeping, 0, memory_order_relaxed);
		if (n < 0 && errno != EINTR) {
			int err = -errno;

			log_error("%s: epoll_wait: %s", r->name, strerror(errno));
			BLKTGT_THREAD_STOP_EV(r->index, r->name, r->msgs);
			return err;
		}
		for (int i = 0; i < n; i++) {
			struct reactor_fd *w = events[i].data.ptr;

			if (!w) {
				uint64_t v;

				if (read(r->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					log_error("%s: eventfd read: %s", r->name, strerror(errno));
				continue;
			}
			if (!w->removed)
				w->cb(w->ctx, events[i].events);
		}
		while (r->graveyard) {
			struct reactor_fd *w = r->graveyard;

			r->graveyard = w->next;
			free(w);
		}
		if (r->hooks)
			run_hooks(r, &r->hooks);
		r->passes++;
	}
	if (r->idle)
		run_hooks(r, &r->idle);
	BLKTGT_THREAD_STOP_EV(r->index, r->name, r->msgs);
	msg_cache_drain();
	atomic_store(&r->exited, true);
	reactor_cur = NULL;
	return 0;
}

static void *reactor_thread(void *arg)
{
	struct reactor *r = arg;

	reactor_loop(r);
	return NULL;
}

int reactors_run(void)
{
	int rc = 0;

	for (unsigned i = 1; i < nreactors; i++) {
		int err = pthread_create(&reactors[i]->thread, NULL, reactor_thread, reactors[i]);

		if (err) {
			log_error("cannot start %s: %s", reactors[i]->name, strerror(err));
			reactors_stop();
			rc = -err;
			break;
		}
		reactors[i]->started = true;
		pthread_setname_np(reactors[i]->thread, reactors[i]->name);
	}
	if (rc == 0)
		rc = reactor_loop(reactors[0]);
	else
		reactors_stop();
	for (unsigned i = 1; i < nreactors; i++) {
		if (reactors[i]->started) {
			pthread_join(reactors[i]->thread, NULL);
			reactors[i]->started = false;
		}
	}
	return rc;
}

/* --- reactor_for_each_thread ----------------------------------------------------- */

struct reactor_foreach {
	uint64_t id;
	reactor_foreach_fn fn;
	void *ctx;
	reactor_foreach_done_fn done;
	struct reactor *origin;
	unsigned next;
	int status;
};

static _Atomic uint64_t foreach_ids;

static void foreach_step(void *arg)
{
	struct reactor_foreach *it = arg;

	it->fn(it, it->ctx);
}

static void foreach_finish(void *arg)
{
	struct reactor_foreach *it = arg;

	BLKTGT_FOREACH_DONE(it->id, it->fn, it->ctx, it->done);
	it->done(it->ctx, it->status);
	free(it);
}

static void foreach_send(struct reactor *r, reactor_msg_fn fn, struct reactor_foreach *it)
{
	/* A foreach cannot be abandoned half-way: its done callback is what
	 * its owner waits for.  Running out of memory here is fatal. */
	if (reactor_send_msg(r, fn, it) != 0) {
		log_error("reactor_for_each_thread: out of memory passing a message");
		abort();
	}
}

int reactor_for_each_thread(reactor_foreach_fn fn, void *ctx, reactor_foreach_done_fn done)
{
	struct reactor_foreach *it;

	/* done runs on the caller's reactor: there must be one. */
	REACTOR_ANY_ONLY();
	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->id = atomic_fetch_add(&foreach_ids, 1) + 1;
	it->fn = fn;
	it->ctx = ctx;
	it->done = done;
	it->origin = reactor_cur;
	BLKTGT_FOREACH_START(it->id, fn, ctx, done);
	it->next = 1;
	foreach_send(reactors[0], foreach_step, it);
	return 0;
}

void reactor_foreach_continue(struct reactor_foreach *it, int status)
{
	/* The step that continues runs on reactors[it->next - 1]. */
	if (reactor_cur != reactors[it->next - 1])
		reactor_rule_broken(__func__, "the step on %s continues its foreach, "
				    "no other thread", reactors[it->next - 1]->name);
	if (status && !it->status)
		it->status = status;
	if (it->next < nreactors)
		foreach_send(reactors[it->next++], foreach_step, it);
	else
		foreach_send(it->origin, foreach_finish, it);
}
