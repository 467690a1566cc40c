// SPDX-License-Identifier: BSD-2-Clause
/*
 * tracecost: the cost of one trace ring event (target/trace.h), enabled
 * and disabled, on THREADS threads at once (each on its own ring).
 *
 *   tracecost [-n EVENTS] [-t THREADS]
 *
 * Each thread records EVENTS bdev_io_submit events (a string and three
 * integers, as blktgt's I/O path records them) into a ring of the default
 * size, so the ring wraps many times: the steady state of a busy target.
 * Then the same loop with the bdev group disabled, and the bare timestamp
 * read every event pays (the TSC, or CLOCK_MONOTONIC: whichever
 * trace_init() chose; BLKTGT_TRACE_CLOCK picks one).  Prints
 *
 *   tracecost: threads=T events=N clock=C enabled_ns_per_event=X
 *              disabled_ns_per_event=Y clock_ns=Z enabled_cpu_ns=X'
 *              disabled_cpu_ns=Y' clock_cpu_ns=Z'
 *
 * on one line: per-thread figures, the mean over the threads, by the wall
 * clock and by the thread's CPU time (which other processes on a busy
 * machine do not inflate).  Its trace file is removed.  Build: cc -O2 -pthread -Itarget -Ibench bench/tracecost.c target/trace.c
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "trace.h"

#define TRACECOST_MAX_EVENTS 1000000000ULL

static uint64_t events = 20000000ULL;
static pthread_barrier_t barrier;

/* ns per event: wall clock, and this thread's CPU time (which a busy
 * machine's other processes do not inflate). */
struct result {
	double enabled, disabled, clock;
	double enabled_cpu, disabled_cpu, clock_cpu;
};

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* noinline, so the loop is the same code whatever the group mask is. */
static __attribute__((noinline)) void tracecost_loop(unsigned t, uint64_t n)
{
	static const char name[] = "Malloc0";

	for (uint64_t i = 0; i < n; i++)
		trace_bdev_io_submit(t, i, 0, name, 0, 4096, (int64_t)(i << 12));
}

static __attribute__((noinline)) uint64_t tracecost_clock(uint64_t n)
{
	uint64_t sum = 0;

	for (uint64_t i = 0; i < n; i++)
		sum += trace_now();
	return sum;
}

static double per_event(uint64_t t0, uint64_t t1, uint64_t n)
{
	return (double)(t1 - t0) / (double)n;
}

struct thread_arg {
	unsigned index;
	struct result res;
};

/* Thread index records on ring index; main flips the group between the
 * barriers, so every thread times the same state at the same time. */
static void *tracecost_thread(void *arg)
{
	struct thread_arg *a = arg;
	volatile uint64_t sink;
	uint64_t t0, t1, c0, c1;

	if (trace_thread_init(a->index, "tracecost")) {
		fprintf(stderr, "tracecost: trace_thread_init failed\n");
		exit(1);
	}
	pthread_barrier_wait(&barrier);
	pthread_barrier_wait(&barrier);
	c0 = cpu_ns();
	t0 = trace_now_ns();
	tracecost_loop(a->index, events);
	t1 = trace_now_ns();
	c1 = cpu_ns();
	a->res.enabled = per_event(t0, t1, events);
	a->res.enabled_cpu = per_event(c0, c1, events);
	pthread_barrier_wait(&barrier);
	pthread_barrier_wait(&barrier);
	c0 = cpu_ns();
	t0 = trace_now_ns();
	tracecost_loop(a->index, events);
	t1 = trace_now_ns();
	c1 = cpu_ns();
	a->res.disabled = per_event(t0, t1, events);
	a->res.disabled_cpu = per_event(c0, c1, events);
	c0 = cpu_ns();
	t0 = trace_now_ns();
	sink = tracecost_clock(events / 4 + 1);
	t1 = trace_now_ns();
	c1 = cpu_ns();
	(void)sink;
	a->res.clock = per_event(t0, t1, events / 4 + 1);
	a->res.clock_cpu = per_event(c0, c1, events / 4 + 1);
	trace_thread_fini();
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t threads = 1;
	struct thread_arg args[TRACE_MAX_THREADS];
	pthread_t tids[TRACE_MAX_THREADS];
	struct result sum = { 0 };
	const char *clock;
	int opt, rc;

	while ((opt = getopt(argc, argv, "n:t:h")) != -1) {
		switch (opt) {
		case 'n':
			if (bench_parse_u64(optarg, TRACECOST_MAX_EVENTS, &events)) {
				fprintf(stderr, "tracecost: -n wants 1..%llu, got '%s'\n",
					TRACECOST_MAX_EVENTS, optarg);
				return 2;
			}
			break;
		case 't':
			if (bench_parse_u64(optarg, TRACE_MAX_THREADS, &threads)) {
				fprintf(stderr, "tracecost: -t wants 1..%d, got '%s'\n",
					TRACE_MAX_THREADS, optarg);
				return 2;
			}
			break;
		case 'h':
			printf("usage: tracecost [-n EVENTS] [-t THREADS]\n");
			return 0;
		default:
			fprintf(stderr, "usage: tracecost [-n EVENTS] [-t THREADS]\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "tracecost: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	/* Enabled before trace_init, so the rings are faulted in up front. */
	if (trace_parse_enable("bdev"))
		return 2;
	rc = trace_init((unsigned)threads, 0);
	if (rc) {
		fprintf(stderr, "tracecost: trace_init: %s\n", strerror(-rc));
		return 1;
	}
	pthread_barrier_init(&barrier, NULL, (unsigned)threads + 1);
	for (unsigned t = 0; t < threads; t++) {
		args[t].index = t;
		pthread_create(&tids[t], NULL, tracecost_thread, &args[t]);
	}
	pthread_barrier_wait(&barrier);
	trace_enable_group("bdev", 0);
	pthread_barrier_wait(&barrier);
	pthread_barrier_wait(&barrier);
	trace_disable_group("bdev");
	pthread_barrier_wait(&barrier);
	for (unsigned t = 0; t < threads; t++) {
		pthread_join(tids[t], NULL);
		sum.enabled += args[t].res.enabled;
		sum.disabled += args[t].res.disabled;
		sum.clock += args[t].res.clock;
		sum.enabled_cpu += args[t].res.enabled_cpu;
		sum.disabled_cpu += args[t].res.disabled_cpu;
		sum.clock_cpu += args[t].res.clock_cpu;
	}
	/* Keep nothing: the numbers are the result, not the events. */
	clock = trace_clock_name();
	{
		char path[64];

		snprintf(path, sizeof(path), "%s", trace_file_path());
		trace_fini();
		unlink(path);
	}
	printf("tracecost: threads=%" PRIu64 " events=%" PRIu64 " clock=%s"
	       " enabled_ns_per_event=%.2f disabled_ns_per_event=%.2f clock_ns=%.2f"
	       " enabled_cpu_ns=%.2f disabled_cpu_ns=%.2f clock_cpu_ns=%.2f\n",
	       threads, events, clock, sum.enabled / (double)threads,
	       sum.disabled / (double)threads, sum.clock / (double)threads,
	       sum.enabled_cpu / (double)threads, sum.disabled_cpu / (double)threads,
	       sum.clock_cpu / (double)threads);
	return 0;
}
