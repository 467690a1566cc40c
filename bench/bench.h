// SPDX-License-Identifier: BSD-2-Clause
/*
 * bench.h: what the microbenchmarks share: strict number parsing, the
 * start handshake with a tracer, and whether the kernel optimized a
 * uprobe in this process.
 */
#ifndef PROBEKIT_BENCH_H
#define PROBEKIT_BENCH_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A decimal in 1..max, nothing else ("", "-1", "12x" and overflow fail). */
static inline int bench_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end != '\0' || v == 0 || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Say "NAME: ready pid=PID" and wait for a line on stdin (or EOF): the
 * caller attaches its tracer, waits for the tracer's BEGIN line, and only
 * then lets the timed part start. */
static inline int bench_wait_go(const char *name)
{
	char line[64];

	printf("%s: ready pid=%d\n", name, (int)getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin) && ferror(stdin))
		return -errno;
	return 0;
}

/* 1 when this process has the kernel's [uprobes-trampoline] mapping, i.e.
 * a uprobe on a 5-byte nop was optimized into a call; 0 when not; -errno
 * when /proc/self/maps cannot be read. */
static inline int bench_uprobe_trampoline(void)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "[uprobes-trampoline]"))
			found = 1;
	fclose(f);
	return found;
}

#endif
