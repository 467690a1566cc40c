// SPDX-License-Identifier: BSD-2-Clause
/*
 * quickstart: a small service with USDT probes, built against an installed
 * probekit (README.md here).  It reads one count N per line on stdin, runs
 * N requests, and prints "done N" once they are finished; at end of input
 * it exits.  Each request fires request__start and request__done, with the
 * request's id first, as probekit's catalogs do.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quickstart_probes.h"

#define QS_LINE_MAX	32		/* a count is at most this long */
#define QS_BATCH_MAX	1000000UL	/* requests per line */
#define QS_SIZE_MAX	64		/* units of work per request */

struct request {
	uint64_t id;
	uint32_t size;
};

/* The work a request stands for. */
static uint64_t request_sum(const struct request *r)
{
	uint64_t sum = 0;

	for (uint32_t i = 1; i <= r->size; i++)
		sum += (r->id + i) * i;
	return sum;
}

static void request_run(struct request *r)
{
	QUICKSTART_REQUEST_START(r->id, r->size);
	/* The sum is paid for only while a tracer holds the semaphore.  Each
	 * argument is a value the program computes: a constant would compile
	 * to an immediate operand, which bpftrace 0.17 cannot read (and
	 * probekit-check refuses). */
	if (QUICKSTART_REQUEST_DONE_ENABLED())
		QUICKSTART_REQUEST_DONE(r->id, request_sum(r));
}

/* A whole line holding a count in 1..QS_BATCH_MAX, or 0. */
static unsigned long parse_count(const char *line)
{
	char *end;
	unsigned long n;

	if (line[0] < '0' || line[0] > '9')
		return 0;
	errno = 0;
	n = strtoul(line, &end, 10);
	if (errno || (*end != '\n' && *end != '\0') || n > QS_BATCH_MAX)
		return 0;
	return n;
}

int main(void)
{
	char line[QS_LINE_MAX + 2];
	uint64_t next_id = 1;

	printf("quickstart: pid %d, %s; one count per line\n", (int)getpid(),
	       QUICKSTART_USDT ? "probes compiled in" : "built without probes");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		unsigned long n;

		if (!strchr(line, '\n') && !feof(stdin)) {
			fprintf(stderr, "quickstart: a line is longer than %d characters; give one count per line\n",
				QS_LINE_MAX);
			return 1;
		}
		n = parse_count(line);
		if (n == 0) {
			fprintf(stderr, "quickstart: '%.*s' is not a count in 1..%lu; give one per line\n",
				(int)strcspn(line, "\n"), line, QS_BATCH_MAX);
			return 1;
		}
		for (unsigned long i = 0; i < n; i++) {
			struct request r = { next_id++, (uint32_t)(i % QS_SIZE_MAX) + 1 };

			request_run(&r);
		}
		printf("done %lu\n", n);
		fflush(stdout);
	}
	return 0;
}
