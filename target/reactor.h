// SPDX-License-Identifier: BSD-2-Clause
/*
 * reactor.h: reactor threads, each with its own event loop, and the message
 * passing that is the only way work crosses from one thread to another.
 *
 * Reactor 0 runs on the thread that called reactor_run() (main's thread);
 * it also hosts the control plane (RPC, listeners, signals).  Reactors
 * 1..N-1 are threads created by reactors_start().
 *
 * Contract:
 *  - reactor_send_msg() may be called from any thread, reactor or not; it never
 *    blocks and never takes a lock (a lock-free multi-producer queue).
 *  - each loop pass runs at most REACTOR_MSG_BATCH messages, then the fd
 *    callbacks that are ready, then the pass hooks;
 *  - everything else in this file must be called on a reactor thread, and
 *    acts on that thread's own reactor.
 *
 * Thread rules are checked at run time where breaking one would corrupt
 * state (a list or an epoll set of another thread, a message never run):
 * the process aborts with one line naming the function and the rule.  A
 * check is a thread-local pointer compare, so release builds keep it.
 */
#ifndef BLKTGT_REACTOR_H
#define BLKTGT_REACTOR_H

#include <stdbool.h>
#include <stdint.h>

#define REACTOR_MAX        64   /* -t N is bounded by this */
#define REACTOR_MSG_BATCH  64   /* messages run per loop pass */

struct reactor;

typedef void (*reactor_msg_fn)(void *ctx);

/* Create n reactors (1 <= n <= REACTOR_MAX); threads start in reactor_run(). */
int reactors_init(unsigned n);
/* Run reactor 0 on the calling thread and the others on their own threads,
 * until reactors_stop(); then join them.  Returns 0 or -errno. */
int reactors_run(void);
/* Ask every reactor to leave its loop after the current pass (any thread). */
void reactors_stop(void);
void reactors_fini(void);

unsigned reactor_count(void);
struct reactor *reactor_get(unsigned index);
/* The calling thread's reactor, or NULL when not on a reactor thread.
 * Inline, so that a thread-rule check costs one thread-local load. */
extern __thread struct reactor *reactor_cur;
static inline struct reactor *reactor_self(void)
{
	return reactor_cur;
}
unsigned reactor_index(const struct reactor *r);

/* A broken thread rule: one line on stderr naming the function, the rule
 * (printf-style) and the calling thread, then abort(). */
__attribute__((noreturn, cold, format(printf, 2, 3)))
void reactor_rule_broken(const char *func, const char *fmt, ...);
/* Abort unless called on a reactor thread / on reactor 0. */
#define REACTOR_ANY_ONLY() do { \
	if (__builtin_expect(reactor_self() == NULL, 0)) \
		reactor_rule_broken(__func__, "it runs on a reactor thread only"); \
} while (0)
#define REACTOR_0_ONLY() reactor_check_0(__func__)
void reactor_check_0(const char *func);

/* Queue fn(ctx) to run on reactor r.  0, or -ENOMEM.  r must not have left
 * its loop (reactors_stop): the message would never run. */
int reactor_send_msg(struct reactor *r, reactor_msg_fn fn, void *ctx);

/*
 * Run fn on every reactor in turn (0, 1, .. N-1), then done on the reactor
 * that called reactor_for_each_thread().  fn receives the iteration and must call
 * reactor_foreach_continue(it) exactly once, now or later (from the same reactor),
 * which is how a step can wait, e.g. for in-flight I/O to drain.
 */
struct reactor_foreach;
typedef void (*reactor_foreach_fn)(struct reactor_foreach *it, void *ctx);
typedef void (*reactor_foreach_done_fn)(void *ctx, int status);
int reactor_for_each_thread(reactor_foreach_fn fn, void *ctx, reactor_foreach_done_fn done);
/* Move on to the next reactor; a non-zero status is kept for done. */
void reactor_foreach_continue(struct reactor_foreach *it, int status);

/* File descriptors watched by the calling reactor's epoll (level-triggered).
 * events are EPOLLIN/EPOLLOUT bits; cb runs on this reactor. */
struct reactor_fd;
typedef void (*reactor_fd_fn)(void *ctx, uint32_t events);
struct reactor_fd *reactor_fd_add(int fd, uint32_t events, reactor_fd_fn cb, void *ctx);
int reactor_fd_modify(struct reactor_fd *w, uint32_t events);
/* Stop watching; the fd is not closed.  Safe inside w's own callback. */
void reactor_fd_remove(struct reactor_fd *w);

/* A timer on the calling reactor (a timerfd it watches): fn(ctx) runs
 * first_ns from now (0 disarms it), then every period_ns (0: once).
 * reactor_timer_set()
 * re-arms it, also from inside fn; remove (also from inside fn) frees it.
 * add returns NULL with errno set. */
struct reactor_timer;
typedef void (*reactor_timer_fn)(void *ctx);
struct reactor_timer *reactor_timer_add(uint64_t first_ns, uint64_t period_ns,
					reactor_timer_fn fn, void *ctx);
int reactor_timer_set(struct reactor_timer *t, uint64_t first_ns, uint64_t period_ns);
void reactor_timer_remove(struct reactor_timer *t);

/* A pass hook: fn(ctx) runs once at the end of every loop pass of the
 * reactor that added it, after the fd callbacks, until it is removed.  It
 * does not keep the loop awake (the pass it ends may have slept), so it
 * suits work gathered during a pass and finished once per pass, such as
 * flushing a batch of probe records.  add returns NULL on ENOMEM; remove
 * (on the same reactor) is safe inside fn. */
struct reactor_pass_hook;
typedef void (*reactor_pass_fn)(void *ctx);
struct reactor_pass_hook *reactor_pass_hook_add(reactor_pass_fn fn, void *ctx);
void reactor_pass_hook_remove(struct reactor_pass_hook *h);
/* Loop passes the calling reactor has completed. */
uint64_t reactor_passes(void);

/* Deferred work on the calling reactor: d->fn(d->ctx) runs at its next loop
 * pass, after the current callback has returned, without allocating (d is
 * the caller's storage and stays queued until it runs; queue it again only
 * after that).  The loop does not sleep while deferred work is queued.
 * This is how bdev.c completes I/O "later, on the submitting reactor". */
struct reactor_defer {
	void (*fn)(void *ctx);
	void *ctx;
	struct reactor_defer *next;
};
void reactor_defer(struct reactor_defer *d);

/* Monotonic nanoseconds (CLOCK_MONOTONIC), the clock every figure uses. */
uint64_t reactor_now_ns(void);

#endif
