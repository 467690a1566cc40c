// SPDX-License-Identifier: BSD-2-Clause
// pairs_driver: a workload for the pair tools' tests (test_usdt_pairs.py)
// that blktgt cannot make: threads that fire a START and die.  Commands,
// one a line on stdin, each answered with "ok" once done:
//   dead N    N threads, one after another, each fires pairs:start
//             (its number as arg1) and exits
//   pairs N   this thread fires pairs:start then pairs:done, N times
//   paced N MS  as pairs N, spread evenly over MS milliseconds (pace.h),
//             with arg1 i % 1021: a log2 histogram of it has 10 slots
//             busy at once, not one slot at a time
//   gated N   pairs:gstart then pairs:gdone, N times, probes that fire
//             only while the semaphore of pairs:gate is raised (as
//             CPython 3.11's function__entry needs python:line's)
// Probes have semaphores, as dtrace -G would make them.
#define _SDT_HAS_SEMAPHORES 1
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>

#include "pace.h"


#define SEM(name) \
	__extension__ unsigned short pairs_##name##_semaphore \
	__attribute__((unused)) __attribute__((section(".probes")))
SEM(start);
SEM(done);
SEM(gate);
SEM(gstart);
SEM(gdone);

static void *dead(void *arg)
{
	long i = (long)arg;

	STAP_PROBE1(pairs, start, i);
	return NULL;
}

int main(void)
{
	char line[64];
	long n, ms;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "dead %ld", &n) == 1) {
			for (long i = 0; i < n; i++) {
				pthread_t t;

				if (pthread_create(&t, NULL, dead, (void *)i) ||
				    pthread_join(t, NULL)) {
					perror("pthread");
					return 1;
				}
			}
		} else if (sscanf(line, "paced %ld %ld", &n, &ms) == 2 && n > 0) {
			struct pace p;

			pace_start(&p, n, ms);
			for (long i = 0; i < n; i++) {
				pace_wait(&p, i);
				STAP_PROBE1(pairs, start, i % 1021);
				STAP_PROBE1(pairs, done, i % 1021);
			}
		} else if (sscanf(line, "pairs %ld", &n) == 1) {
			for (long i = 0; i < n; i++) {
				STAP_PROBE1(pairs, start, i);
				STAP_PROBE1(pairs, done, i);
			}
		} else if (sscanf(line, "gated %ld", &n) == 1) {
			for (long i = 0; i < n; i++)
				if (pairs_gate_semaphore) {
					STAP_PROBE1(pairs, gstart, i);
					STAP_PROBE1(pairs, gdone, i);
				}
			/* The gate's own probe: its semaphore is what counts. */
			if (pairs_gate_semaphore)
				STAP_PROBE(pairs, gate);
		} else {
			fprintf(stderr, "unknown command: %s", line);
			return 1;
		}
		printf("ok\n");
	}
	return 0;
}
