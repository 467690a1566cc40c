// SPDX-License-Identifier: BSD-2-Clause
/*
 * redzone: does a probe site corrupt a leaf function's red zone while it
 * is traced?
 *
 *   redzone [-n CALLS]
 *
 * Prints "redzone: ready pid=PID", waits for a line on stdin (so a tracer
 * can attach first), then calls redzone_leaf() CALLS times and prints
 *
 *   redzone: calls=N corrupted=M trampoline=0|1
 *
 * redzone_leaf() is a leaf function: it calls nothing, so the x86-64 ABI
 * lets it keep its locals below the stack pointer (the 128-byte red zone)
 * without moving the stack pointer.  It fills four locals, passes the
 * probe site redzone:site, and checks that the locals still hold what it
 * wrote.  A tracer that writes below the user stack pointer while handling
 * the site (the call into the kernel's uprobe trampoline, on a 5-byte nop
 * site) changes them; int3 on a 1-byte nop site does not touch the user
 * stack.  trampoline=1 says the kernel did optimize the site into such a
 * call, so a variant with corrupted=0 and trampoline=1 is truly safe, not
 * merely untested.  Built by mk/bench.mk in three variants: stock, nop5
 * (-mno-red-zone, the safe way) and nop5-redzone (the hazard).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/sdt.h>

#include "bench.h"

#define REDZONE_MAX_CALLS 1000000000ULL

/* Returns 0 when the locals survived the probe site, 1 when they did not.
 * volatile keeps them in memory (the red zone) instead of registers. */
__attribute__((noinline)) int redzone_leaf(uint64_t x);
__attribute__((noinline)) int redzone_leaf(uint64_t x)
{
	volatile uint64_t a[4];

	a[0] = x;
	a[1] = x ^ 0x5a5a5a5a5a5a5a5aULL;
	a[2] = x * 0x9e3779b97f4a7c15ULL;
	a[3] = ~x;
	DTRACE_PROBE1(redzone, site, x);
	return a[0] != x || a[1] != (x ^ 0x5a5a5a5a5a5a5a5aULL) ||
	       a[2] != x * 0x9e3779b97f4a7c15ULL || a[3] != ~x;
}

int main(int argc, char **argv)
{
	uint64_t calls = 1000000, corrupted = 0;
	int opt, err;

	while ((opt = getopt(argc, argv, "n:h")) != -1) {
		switch (opt) {
		case 'n':
			if (bench_parse_u64(optarg, REDZONE_MAX_CALLS, &calls)) {
				fprintf(stderr, "redzone: -n wants 1..%llu, got '%s'\n",
					REDZONE_MAX_CALLS, optarg);
				return 2;
			}
			break;
		case 'h':
			printf("usage: redzone [-n CALLS]\n");
			return 0;
		default:
			fprintf(stderr, "usage: redzone [-n CALLS]\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "redzone: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}

	err = bench_wait_go("redzone");
	if (err) {
		fprintf(stderr, "redzone: reading stdin: %s\n", strerror(-err));
		return 1;
	}

	for (uint64_t i = 0; i < calls; i++)
		corrupted += (uint64_t)redzone_leaf(i);
	printf("redzone: calls=%" PRIu64 " corrupted=%" PRIu64 " trampoline=%d\n",
	       calls, corrupted, bench_uprobe_trampoline());
	return 0;
}
