// SPDX-License-Identifier: BSD-2-Clause
/*
 * probekit_batch.h: a batch probe for a service's own hot path.
 *
 * One probe hit costs a trap (400-800 ns on a VM); the event it reports
 * may cost 100 ns.  A batch probe fires once for many events: the service
 * fills fixed-layout records while the probe's semaphore is up, and fires
 * the probe with their count and address.  This header is the flush
 * policy, shared by blktgt (io__batch) and any service that includes it:
 *
 *   - a batch is flushed when it is full,
 *   - when its oldest record has waited PK_BATCH_BOUND_NS, checked once
 *     per pass of the service's loop with a timestamp the pass already
 *     has (pk_batch_due()),
 *   - and before the thread sleeps (pk_batch_held()), or exits.
 *
 * So a record waits at most the bound plus one loop pass, and none is
 * kept while its thread sleeps.  A tool that reads a batch needs no
 * clock: each record carries what it measures.
 *
 * Use, one batch per thread (nothing here is atomic):
 *
 *   struct my_rec { uint64_t id, start_ns, done_ns; };  // declared once
 *   struct my_batch {
 *           struct pk_batch b;
 *           struct my_rec recs[MY_BATCH_MAX];
 *   };
 *   static __thread struct my_batch mb = { .b = PK_BATCH_INIT(MY_BATCH_MAX) };
 *
 *   static void my_flush(uint64_t now)       // the one probe site
 *   {
 *           MY_BATCH((int32_t)mb.b.n, mb.recs, now);
 *           pk_batch_clear(&mb.b);
 *   }
 *
 *   // per event, behind one predictable branch:
 *   if (MY_BATCH_ENABLED()) {
 *           struct my_rec *r = &mb.recs[pk_batch_add(&mb.b, now)];
 *           ... fill r ...
 *           if (pk_batch_full(&mb.b))
 *                   my_flush(now);
 *   }
 *   // end of a loop pass, with the pass's timestamp:
 *   if (pk_batch_due(&mb.b, now)) my_flush(now);
 *   // before sleeping or exiting:
 *   if (pk_batch_held(&mb.b)) my_flush(pk_batch_now());
 *
 * Fire what is held even when the semaphore has fallen since (a site
 * nobody traces is a nop), so a tool attached later never reads records
 * older than itself.  Give the probe the count in a register, the records'
 * address, and the flush time (bpftrace's nsecs clock, CLOCK_MONOTONIC),
 * so a reader can check the bound.  probekit-structs makes the record's
 * definition for bpftrace scripts from the service's DWARF:
 *   probekit-structs ./myservice my_rec > my.structs.bt
 */
#ifndef PROBEKIT_BATCH_H
#define PROBEKIT_BATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* How long a record may wait for company before its batch is flushed:
 * short enough that no reader notices (a histogram tool prints once a
 * second or more), long enough that a thread running one event per loop
 * pass fills hundreds of records per hit.  A service may define its own
 * before including this header. */
#ifndef PK_BATCH_BOUND_NS
#define PK_BATCH_BOUND_NS 1000000ull    /* 1 ms */
#endif

struct pk_batch {
	uint32_t n;             /* records held */
	uint32_t cap;           /* records the array beside it holds */
	uint64_t first_ns;      /* when the oldest of them was added */
};

#define PK_BATCH_INIT(capacity) { .n = 0, .cap = (capacity), .first_ns = 0 }

/* CLOCK_MONOTONIC in nanoseconds: bpftrace's nsecs, BPF's ktime. */
static inline uint64_t pk_batch_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The index of a new record, added at now; call only when not full. */
static inline uint32_t pk_batch_add(struct pk_batch *b, uint64_t now)
{
	if (b->n == 0)
		b->first_ns = now;
	return b->n++;
}

static inline bool pk_batch_full(const struct pk_batch *b)
{
	return b->n >= b->cap;
}

/* Records are held: flush them before sleeping or exiting. */
static inline bool pk_batch_held(const struct pk_batch *b)
{
	return b->n != 0;
}

/* The batch is due at now: full, or its oldest record has waited the
 * bound.  now may be any recent timestamp the caller already has. */
static inline bool pk_batch_due(const struct pk_batch *b, uint64_t now)
{
	return b->n && (b->n >= b->cap || now - b->first_ns >= PK_BATCH_BOUND_NS);
}

/* After the probe fired. */
static inline void pk_batch_clear(struct pk_batch *b)
{
	b->n = 0;
}

#endif
