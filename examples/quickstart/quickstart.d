/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * quickstart.d: the probe catalog of the quickstart example, the one place
 * its probes are declared.  probekit.mk makes the headers and the
 * semaphore object from it.  The comment above each probe documents it.
 */

provider quickstart {
	/* A request started; size is how many units of work it does. */
	probe request__start(uint64_t id, uint32_t size);

	/* A request finished; sum is its result (computed only while traced). */
	probe request__done(uint64_t id, uint64_t sum);

	/* Up to 64 finished requests, oldest first: count struct qs_rec (quickstart.c) at recs; fired at flush_ns when full, 1 ms after the oldest record's done_ns, and before the program waits for input (probekit_batch.h). */
	probe request__batch(int32_t count, void *recs, uint64_t flush_ns);
};
