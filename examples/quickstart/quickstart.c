// SPDX-License-Identifier: BSD-2-Clause
/*
 * quickstart: a small service with USDT probes, built against an installed
 * probekit (README.md here).  It reads one count N per line on stdin, runs
 * N requests, and prints "done N" once they are finished; at end of input
 * it exits.  Each request fires request__start and request__done, with the
 * request's id first, as probekit's catalogs do.
 *
 * request__batch is the batch probe: one hit for up to QS_RECS_MAX
 * finished requests, each a struct qs_rec, under probekit_batch.h's flush
 * policy (installed with probekit; probekit.mk puts it on the include
 * path).  A tool that reads it pays one trap per batch, not per request.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probekit_batch.h"
#include "quickstart_probes.h"

#define QS_LINE_MAX	32		/* a count is at most this long */
#define QS_BATCH_MAX	1000000UL	/* requests per line */
#define QS_SIZE_MAX	64		/* units of work per request */

struct request {
	uint64_t id;
	uint32_t size;
};

/* request__batch's record: declared here only.  Scripts get its layout
 * from this program's DWARF: probekit-structs BINARY qs_rec. */
struct qs_rec {
	uint64_t id;
	uint64_t sum;
	uint64_t done_ns;       /* CLOCK_MONOTONIC, bpftrace's nsecs */
	uint32_t size;
	uint32_t pad;
};

#define QS_RECS_MAX	64		/* records per request__batch hit */

static struct {
	struct pk_batch b;
	struct qs_rec recs[QS_RECS_MAX];
} batch = { .b = PK_BATCH_INIT(QS_RECS_MAX) };

/* The one request__batch site.  The count and the records' address go
 * through registers: as a global's address, recs would be a %rip-relative
 * operand, which bpftrace 0.17 cannot read. */
static void batch_flush(uint64_t now)
{
	int32_t n = (int32_t)batch.b.n;
	struct qs_rec *recs = batch.recs;

	__asm__ volatile("" : "+r"(n), "+r"(recs));
	QUICKSTART_REQUEST_BATCH(n, recs, now);
	pk_batch_clear(&batch.b);
}

/* Before waiting for input or exiting: nothing is held while idle. */
static void batch_idle(void)
{
	if (pk_batch_held(&batch.b))
		batch_flush(pk_batch_now());
}

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
	/* The sum is paid for only while a tracer holds the semaphore. */
	if (QUICKSTART_REQUEST_DONE_ENABLED())
		QUICKSTART_REQUEST_DONE(r->id, request_sum(r));
	/* Records are filled only while a tool holds the semaphore. */
	if (QUICKSTART_REQUEST_BATCH_ENABLED()) {
		uint64_t now = pk_batch_now();
		struct qs_rec *rec = &batch.recs[pk_batch_add(&batch.b, now)];

		rec->id = r->id;
		rec->sum = request_sum(r);
		rec->done_ns = now;
		rec->size = r->size;
		rec->pad = 0;
		if (pk_batch_due(&batch.b, now))
			batch_flush(now);
	}
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
		/* The records of these requests reach a tool before "done". */
		batch_idle();
		printf("done %lu\n", n);
		fflush(stdout);
	}
	batch_idle();
	return 0;
}
