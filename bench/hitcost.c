// SPDX-License-Identifier: BSD-2-Clause
/*
 * hitcost: the cost of one USDT probe site per pass of a tight loop.
 *
 *   hitcost [-n PASSES]
 *
 * Prints "hitcost: ready pid=PID" and waits for a line on stdin, so that a
 * tracer can attach first (bench/run starts bpftrace, waits for its BEGIN
 * line, then writes "go").  Then it runs PASSES passes over the probe
 * hitcost:hit and prints
 *
 *   hitcost: passes=N ns=T ns_per_pass=X trampoline=0|1 cpu_ns=C
 *
 * T is the loop's wall-clock time, C its thread's CPU time (the trap and
 * the BPF program of a traced hit run on this thread, so C holds them,
 * and not the time the thread waited for a CPU on a loaded machine).
 * trampoline=1 says the kernel optimized the traced site into a call
 * (a 5-byte nop site on Linux 6.18+); -errno if it could not tell.
 *
 * Built by mk/bench.mk as hitcost-stock (sys/sdt.h's 1-byte nop site) and
 * hitcost-nop5 (probes/nop5's 5-byte nop site, -mno-red-zone).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/sdt.h>

#include "bench.h"

#define HITCOST_MAX_PASSES 10000000000ULL

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* noinline, so every variant runs the same loop around its site. */
static __attribute__((noinline)) void hitcost_loop(uint64_t passes)
{
	for (uint64_t i = 0; i < passes; i++)
		DTRACE_PROBE1(hitcost, hit, i);
}

int main(int argc, char **argv)
{
	uint64_t passes = 100000000ULL, t0, t1, c0, c1;
	int opt, err;

	while ((opt = getopt(argc, argv, "n:h")) != -1) {
		switch (opt) {
		case 'n':
			if (bench_parse_u64(optarg, HITCOST_MAX_PASSES, &passes)) {
				fprintf(stderr, "hitcost: -n wants 1..%llu, got '%s'\n",
					HITCOST_MAX_PASSES, optarg);
				return 2;
			}
			break;
		case 'h':
			printf("usage: hitcost [-n PASSES]\n");
			return 0;
		default:
			fprintf(stderr, "usage: hitcost [-n PASSES]\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "hitcost: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}

	err = bench_wait_go("hitcost");
	if (err) {
		fprintf(stderr, "hitcost: reading stdin: %s\n", strerror(-err));
		return 1;
	}

	c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	t0 = clock_ns(CLOCK_MONOTONIC);
	hitcost_loop(passes);
	t1 = clock_ns(CLOCK_MONOTONIC);
	c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	printf("hitcost: passes=%" PRIu64 " ns=%" PRIu64 " ns_per_pass=%.3f"
	       " trampoline=%d cpu_ns=%" PRIu64 "\n", passes, t1 - t0,
	       (double)(t1 - t0) / (double)passes, bench_uprobe_trampoline(), c1 - c0);
	return 0;
}
