// SPDX-License-Identifier: BSD-2-Clause
/*
 * lttngcost: the cost of one LTTng-UST event with the payload of the trace
 * ring's bdev_io_submit (bench/lttngcost_tp.h), the peer of tracecost.
 *
 *   lttngcost [-n EVENTS]
 *
 * Records EVENTS probekit_bench:bdev_io_submit events on one thread and
 * prints, on one line,
 *
 *   lttngcost: events=N enabled=E ns_per_event=X cpu_ns_per_event=Y
 *
 * enabled is 1 when a session had the event enabled by the time main()
 * ran (liblttng-ust registers with a running session daemon in its
 * constructor and waits, up to LTTNG_UST_REGISTER_TIMEOUT ms, for the
 * session's enablers), 0 when not: the caller checks it, so a timed run
 * that recorded nothing is never taken for a cost.  The figures are the
 * wall clock and this thread's CPU time per event.  The session, the
 * daemon and the snapshot are bench/lttngsession.py's business.
 * Build: cc -O2 -Ibench bench/lttngcost.c -llttng-ust -ldl
 */
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "lttngcost_tp.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "bench.h"

#define LTTNGCOST_MAX_EVENTS 1000000000ULL

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The same arguments tracecost_loop() passes to the ring. */
static __attribute__((noinline)) void lttngcost_loop(uint64_t n)
{
	static const char name[16] = "Malloc0";

	for (uint64_t i = 0; i < n; i++)
		lttng_ust_tracepoint(probekit_bench, bdev_io_submit, 0, i, 0, name,
				     0, 4096, (int64_t)(i << 12));
}

int main(int argc, char **argv)
{
	uint64_t events = 20000000ULL, t0, t1, c0, c1;
	int opt, enabled;

	while ((opt = getopt(argc, argv, "n:h")) != -1) {
		switch (opt) {
		case 'n':
			if (bench_parse_u64(optarg, LTTNGCOST_MAX_EVENTS, &events)) {
				fprintf(stderr, "lttngcost: -n wants 1..%llu, got '%s'\n",
					LTTNGCOST_MAX_EVENTS, optarg);
				return 2;
			}
			break;
		case 'h':
			printf("usage: lttngcost [-n EVENTS]\n");
			return 0;
		default:
			fprintf(stderr, "usage: lttngcost [-n EVENTS]\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "lttngcost: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	enabled = lttng_ust_tracepoint_enabled(probekit_bench, bdev_io_submit) ? 1 : 0;
	c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	t0 = clock_ns(CLOCK_MONOTONIC);
	lttngcost_loop(events);
	t1 = clock_ns(CLOCK_MONOTONIC);
	c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	printf("lttngcost: events=%" PRIu64 " enabled=%d ns_per_event=%.2f"
	       " cpu_ns_per_event=%.2f\n", events, enabled,
	       (double)(t1 - t0) / (double)events, (double)(c1 - c0) / (double)events);
	return 0;
}
