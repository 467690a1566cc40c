// SPDX-License-Identifier: BSD-2-Clause
/*
 * trace_driver: records a known sequence of trace ring events on several
 * threads, so that tests/target/test_trace.py can check the recorder and the dump
 * tool without the rest of blktgt.  Built by the test from this file and
 * target/trace.c.
 *
 *   trace_driver [-t THREADS] [-E ENTRIES] [-n PAIRS] [-l LOST] [-e SPEC]... [-w]
 *
 * Thread t (0-based, ring t) records, for i in 0..PAIRS-1, one NBD request
 * and the bdev I/O it causes:
 *
 *   nbd_request   owner c(t+1)  object r = (t+1)*1000000 + 500000 + i
 *                 cmd = i % 2, len = 4096 * (1 + i % 4), offset = 4096 * i,
 *                 handle = i
 *   bdev_io_submit owner t      object i = (t+1)*1000000 + i, related r
 *                 bdev = "bdev<t>", type = i % 2, len, offset
 *   bdev_io_done  owner t      object i, status = (i % 7 == 3) ? -5 : 0, len
 *   nbd_reply     owner c(t+1)  object r, error = (i % 7 == 3) ? 5 : 0
 *
 * Only enabled groups (-e, parsed by trace_parse_enable) record.  LOST
 * events are recorded on a thread that has no ring.  Then it prints
 *
 *   trace_driver: recorded pid=PID file=PATH
 *
 * and, with -w, waits for a line on stdin (a test dumps the live file, or
 * kills it) before trace_fini(), which prints "trace_driver: fini kept=N".
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace.h"

static uint64_t pairs = 10;
static uint64_t lost = 0;
static pthread_barrier_t start;

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static void *recorder(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	char name[16], bdev[16];

	snprintf(name, sizeof(name), "driver_%u", t);
	snprintf(bdev, sizeof(bdev), "bdev%u", t);
	if (trace_thread_init(t, name)) {
		fprintf(stderr, "trace_driver: trace_thread_init(%u) failed\n", t);
		exit(1);
	}
	pthread_barrier_wait(&start);
	for (uint64_t i = 0; i < pairs; i++) {
		uint64_t io = (t + 1) * 1000000ull + i;
		uint64_t req = (t + 1) * 1000000ull + 500000 + i;
		int32_t len = (int32_t)(4096 * (1 + i % 4));
		int failed = i % 7 == 3;

		trace_nbd_request(t + 1, req, 0, (int32_t)(i % 2), len, (int64_t)(4096 * i), (int64_t)i);
		trace_bdev_io_submit(t, io, req, bdev, (int32_t)(i % 2), len, (int64_t)(4096 * i));
		trace_bdev_io_done(t, io, 0, failed ? -5 : 0, len);
		trace_nbd_reply(t + 1, req, 0, failed ? 5 : 0);
	}
	trace_thread_fini();
	return NULL;
}

/* A thread without a ring: its enabled events are counted as lost. */
static void *ringless(void *arg)
{
	for (uint64_t i = 0; i < lost; i++)
		trace_bdev_io_done(99, i, 0, 0, 512);
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t threads = 2, entries = 0;
	pthread_t tids[TRACE_MAX_THREADS], lt;
	int opt, rc, wait = 0;

	while ((opt = getopt(argc, argv, "t:E:n:l:e:w")) != -1) {
		switch (opt) {
		case 't':
			if (parse_u64(optarg, TRACE_MAX_THREADS, &threads) || !threads)
				goto usage;
			break;
		case 'E':
			if (parse_u64(optarg, TRACE_MAX_ENTRIES, &entries))
				goto usage;
			break;
		case 'n':
			if (parse_u64(optarg, 499999, &pairs))
				goto usage;
			break;
		case 'l':
			if (parse_u64(optarg, 1000000, &lost))
				goto usage;
			break;
		case 'e':
			rc = trace_parse_enable(optarg);
			if (rc > 0)
				return 0;
			if (rc < 0)
				return 2;
			break;
		case 'w':
			wait = 1;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc)
		goto usage;

	rc = trace_init((unsigned)threads, entries);
	if (rc) {
		fprintf(stderr, "trace_driver: trace_init: %s\n", strerror(-rc));
		return 1;
	}
	trace_announce(stdout);
	pthread_barrier_init(&start, NULL, (unsigned)threads);
	for (unsigned t = 0; t < threads; t++)
		pthread_create(&tids[t], NULL, recorder, (void *)(uintptr_t)t);
	pthread_create(&lt, NULL, ringless, NULL);
	for (unsigned t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);
	pthread_join(lt, NULL);

	printf("trace_driver: recorded pid=%d file=%s\n", (int)getpid(), trace_file_path());
	fflush(stdout);
	if (wait) {
		char line[64];

		if (!fgets(line, sizeof(line), stdin) && ferror(stdin))
			return 1;
	}
	printf("trace_driver: fini kept=%" PRIu64 "\n", trace_fini());
	return 0;

usage:
	fprintf(stderr, "usage: trace_driver [-t THREADS] [-E ENTRIES] [-n PAIRS] "
		"[-l LOST] [-e SPEC]... [-w]\n");
	return 2;
}
