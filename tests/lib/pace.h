// SPDX-License-Identifier: BSD-2-Clause
// pace.h: spread a test driver's N events evenly over MS milliseconds, so
// that a tool printing every interval sees them arrive at a steady rate
// across its interval boundaries (its drain races them there), however fast
// the machine.  Call pace_wait(&p, i) before event i.
#ifndef PACE_H
#define PACE_H
#include <time.h>

struct pace {
	struct timespec t0;
	long n, ms;
};

static inline void pace_start(struct pace *p, long n, long ms)
{
	p->n = n;
	p->ms = ms;
	clock_gettime(CLOCK_MONOTONIC, &p->t0);
}

/* Sleep until event i is due (every 64 events: one clock read per call
 * would slow the fast path that the races need). */
static inline void pace_wait(const struct pace *p, long i)
{
	struct timespec now, d;
	long long due, at;

	if (p->ms <= 0 || i % 64)
		return;
	due = (long long)p->ms * 1000000LL * i / p->n;
	clock_gettime(CLOCK_MONOTONIC, &now);
	at = (now.tv_sec - p->t0.tv_sec) * 1000000000LL + (now.tv_nsec - p->t0.tv_nsec);
	if (at >= due)
		return;
	d.tv_sec = (due - at) / 1000000000LL;
	d.tv_nsec = (due - at) % 1000000000LL;
	nanosleep(&d, NULL);
}
#endif
