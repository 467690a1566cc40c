// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_loop.c: the output loop: the ready line, intervals, -d, --max-rate,
 * SIGINT/SIGTERM and the target's exit, and each interval's output.
 * (declared in tool_loop.h; libbpf/README.md lists the rooms and
 * which may call which).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/libbpf.h>

#include "tool_attach.h"
#include "tool_drain.h"
#include "tool_loop.h"
#include "tool_options.h"
#include "tool_target.h"


static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

enum wake { WAKE_TIME, WAKE_SIGNAL, WAKE_EXIT, WAKE_FOLLOW };

/*
 * Sleep until the monotonic time until_ns (< 0: no limit), a signal, the
 * target's exit, or (a->follow) an event on the file followed.  SIGINT
 * and SIGTERM are blocked except inside ppoll(), so one sent at any
 * moment ends the very next wait.
 */
static enum wake wait_until(const struct common_args *a,
			    const struct target *t, const sigset_t *mask,
			    long long until_ns)
{
	struct pollfd pfds[2] = {
		{ .fd = t->pidfd, .events = POLLIN },
		{ .fd = a->follow ? a->follow_fd : -1, .events = POLLIN },
	};

	for (;;) {
		struct timespec ts, *tmo = NULL;
		long long left = until_ns < 0 ? -1 : until_ns - now_ns();
		int n;

		if (got_signal)
			return WAKE_SIGNAL;
		if (t->pid > 0 && t->pidfd < 0 && kill(t->pid, 0) < 0 &&
		    errno == ESRCH)
			return WAKE_EXIT;
		if (until_ns >= 0 && left <= 0)
			return WAKE_TIME;
		/* Without a pidfd (kernels before 5.3), look at the target
		 * every 100 ms, as the bcc/ tools do. */
		if (t->pid > 0 && t->pidfd < 0 &&
		    (left < 0 || left > 100000000LL))
			left = 100000000LL;
		if (left >= 0) {
			ts.tv_sec = left / 1000000000LL;
			ts.tv_nsec = left % 1000000000LL;
			tmo = &ts;
		}
		/* A negative fd is left out by ppoll(). */
		n = ppoll(pfds, 2, tmo, mask);
		if (n > 0 && pfds[0].revents)
			return WAKE_EXIT;
		if (n > 0)
			return WAKE_FOLLOW;
		if (n < 0 && errno != EINTR) {
			tool_err("cannot wait: %s", strerror(errno));
			return WAKE_SIGNAL;
		}
	}
}

/* Probe hits so far: the sum of every CPU's slot of histogram.bpf.h's
 * hits map; -errno when it cannot be read. */
static long long hits_total(const struct bpf_map *map)
{
	int ncpus = libbpf_num_possible_cpus();
	unsigned long long *v, sum = 0;
	__u32 zero = 0;
	int err;

	if (ncpus <= 0)
		return ncpus ? ncpus : -EINVAL;
	v = calloc(ncpus, sizeof(*v));
	if (!v)
		return -ENOMEM;
	err = bpf_map__lookup_elem(map, &zero, sizeof(zero), v, ncpus * sizeof(*v), 0);
	for (int i = 0; !err && i < ncpus; i++)
		sum += v[i];
	free(v);
	return err ? (err < 0 ? err : -err) : (long long)sum;
}

struct collect_print {
	collect_fn collect;
	void *ctx;
};

static int print_hists(void *ctx, struct output *out)
{
	struct collect_print *cp = ctx;
	struct hist_entry *e = NULL;
	int n = cp->collect(cp->ctx, &e);

	if (n < 0)
		return n;
	output_emit(out, e, n);
	free(e);
	return 0;
}

static int emit(struct output *out, print_fn print, void *ctx)
{
	int err = print(ctx, out);

	if (err < 0) {
		tool_err("cannot read the histograms: %s", strerror(-err));
		return 1;
	}
	return 0;
}

/*
 * Past --max-rate: detach every probe first, so the histograms read next
 * are final and the target stops paying for hits at once, then print
 * them and one line on stderr saying why tracing ended.  Exit status 0:
 * the guard did what it was asked, and what was printed is valid.
 */
static int stop_over_budget(const struct common_args *a, struct output *out,
			    print_fn print, void *ctx, double rate)
{
	long long total;

	if (a->detach)
		a->detach(a->detach_ctx);
	else
		bpf_object__detach_skeleton(a->skel);
	total = hits_total(a->hits);
	if (emit(out, print, ctx))
		return 1;
	fflush(stdout);
	fprintf(stderr, "%s: %.0f probe hits/s is over --max-rate %ld; detached after %lld "
		"hits\n", command_name(), rate, a->max_rate, total);
	return 0;
}

int run_loop(const struct common_args *a, const struct target *t,
	     const char *what, collect_fn collect, void *ctx)
{
	struct collect_print cp = { collect, ctx };
	char ready[sizeof(t->exe) + 512];

	if (t->pid > 0)
		snprintf(ready, sizeof(ready), "Tracing %s of PID %d (%s)", what,
			 (int)t->pid, t->comm);
	else
		snprintf(ready, sizeof(ready), "Tracing %s of %s (every "
			 "process)", what, t->exe);
	return run_loop_print(a, t, ready, print_hists, &cp);
}

/* run_loop()'s trailer: the lost STARTs of a pair tool, then the values
 * a histogram tool had no room for. */
struct loop_report {
	struct pair_report pair;
	const struct common_args *a;
};

static void loop_report(struct output *o, void *ctx)
{
	struct loop_report *r = ctx;

	if (r->pair.counts)
		pair_report(o, &r->pair);
	if (r->a->hist_dropped)
		hist_report(o, r->a);
}

int run_loop_print(const struct common_args *a, const struct target *t,
		   const char *ready, print_fn print, void *ctx)
{
	struct loop_report report = { .pair.counts = a->pair_counts, .a = a };
	struct output out = { .tool = tool_name, .pid = t->pid,
			      .binary = t->exe, .json = a->json,
			      .timestamp = a->timestamp, .empty = a->empty,
			      .trailer = a->pair_counts || a->hist_dropped ?
					 loop_report : NULL,
			      .trailer_ctx = &report };
	struct sigaction sa = { .sa_handler = on_signal };
	long long start, end = -1, next = -1, check = -1, last_check, hits, last_hits = 0;
	double rate;
	sigset_t block, mask;
	long left = a->count;
	enum wake why;

	drained_hash_ready();
	attach_warm_stop();
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &mask);
	sigdelset(&mask, SIGINT);
	sigdelset(&mask, SIGTERM);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	fprintf(a->json ? stderr : stdout, "%s... Hit Ctrl-C to end.\n", ready);
	fflush(a->json ? stderr : stdout);

	start = now_ns();
	if (a->duration)
		end = start + a->duration * 1000000000LL;
	if (a->interval)
		next = start + a->interval * 1000000000LL;
	if (a->max_rate)
		check = start + MAX_RATE_WINDOW_NS;
	last_check = start;
	for (;;) {
		long long until = next, now;

		if (end >= 0 && (until < 0 || end < until))
			until = end;
		if (check >= 0 && (until < 0 || check < until))
			until = check;
		why = wait_until(a, t, &mask, until);
		if (why == WAKE_FOLLOW) {
			a->follow(a->follow_ctx);
			continue;
		}
		if (why != WAKE_TIME)
			break;
		now = now_ns();
		if (check >= 0 && now >= check) {
			hits = hits_total(a->hits);
			if (hits < 0) {
				tool_err("cannot read the hit counter: %s", strerror((int)-hits));
				return 1;
			}
			rate = (double)(hits - last_hits) * 1e9 / (double)(now - last_check);
			if (rate > (double)a->max_rate)
				return stop_over_budget(a, &out, print, ctx, rate);
			last_hits = hits;
			last_check = now;
			check = now + MAX_RATE_WINDOW_NS;
		}
		if (end >= 0 && now >= end)
			break;
		if (next < 0 || now < next)
			continue;
		if (emit(&out, print, ctx))
			return 1;
		next += a->interval * 1000000000LL;
		if (left && --left == 0)
			return 0;
	}
	if (emit(&out, print, ctx))
		return 1;
	if (why == WAKE_EXIT) {
		fflush(stdout);
		fprintf(stderr, "%s: PID %d (%s) exited; tracing ended\n",
			command_name(), (int)t->pid, t->comm);
	}
	return 0;
}
