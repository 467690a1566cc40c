// SPDX-License-Identifier: BSD-2-Clause
// batch_driver: fires blktgt:io__batch as a service of the user's own
// might, with the batches blktgt never makes, for test_batch_loss.py:
// records the tool cannot read, and counts out of range.  The record and
// the name table are include/io_batch.h's (the BCC tools read the record
// from this program's DWARF, so build it with -g).  Commands, one a line
// on stdin, each answered with "ok" once done:
//   good N        N records (batches of at most IO_BATCH_MAX), each a
//                 4096-byte read of bdev 0 ("Drv0") that took 3 us
//   unreadable N  N records (likewise batched) whose address is a
//                 PROT_NONE mapping: the tool's read of them fails
//   count C K     K hits whose count is C (0, negative, or more than
//                 IO_BATCH_MAX), the records' address a readable batch
// blktgt's other probes the exporter attaches are here too, never fired.
#define _SDT_HAS_SEMAPHORES 1
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/sdt.h>

#include "io_batch.h"
#include "blktgt_states.h"

// Semaphores, as blktgt's probes have.
#define SEM(name) \
	__extension__ unsigned short blktgt_##name##_semaphore \
	__attribute__((unused)) __attribute__((section(".probes")))
SEM(io__batch);
SEM(rpc__request);
SEM(rpc__done);
SEM(nbd__request);
SEM(nbd__connect);
SEM(nbd__disconnect);

static struct io_rec recs[IO_BATCH_MAX];
static char names[BDEV_INDEX_MAX][BDEV_NAME_LEN] = { "Drv0" };
// Kept in the DWARF: the BCC tools name types from it.
enum bdev_io_type batch_driver_type = BDEV_IO_READ;

static void __attribute__((noinline)) fire(int32_t count, struct io_rec *r)
{
	STAP_PROBE5(blktgt, io__batch, 0, count, r, names, (uint64_t)0);
}

// n records from r, in batches of at most IO_BATCH_MAX.
static void fire_n(long n, struct io_rec *r)
{
	while (n > 0) {
		int32_t k = n > IO_BATCH_MAX ? IO_BATCH_MAX : (int32_t)n;

		fire(k, r);
		n -= k;
	}
}

// The sites probekit-exporter attaches besides io__batch (blktgt's
// argument counts); a hit of any would be a bug of this driver.
static void __attribute__((noinline)) never(long a)
{
	STAP_PROBE2(blktgt, rpc__request, a, a);
	STAP_PROBE3(blktgt, rpc__done, a, a, (int)a);
	STAP_PROBE7(blktgt, nbd__request, a, a, (int)a, a, (int)a, a, (int)a);
	STAP_PROBE2(blktgt, nbd__connect, a, a);
	STAP_PROBE3(blktgt, nbd__disconnect, a, a, a);
}

int main(int argc, char **argv)
{
	struct io_rec *none;
	char line[64];
	long n, c;

	for (int i = 0; i < IO_BATCH_MAX; i++)
		recs[i] = (struct io_rec){ .id = i, .submit_ns = 1000,
			.done_ns = 4000, .length = 4096,
			.type = batch_driver_type };
	none = mmap(NULL, sizeof(recs), PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (none == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (argc > 1 && argv[1][0] == '!')	/* never, but kept */
		never(argc);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "good %ld", &n) == 1) {
			fire_n(n, recs);
		} else if (sscanf(line, "unreadable %ld", &n) == 1) {
			fire_n(n, none);
		} else if (sscanf(line, "count %ld %ld", &c, &n) == 2) {
			for (long i = 0; i < n; i++)
				fire((int32_t)c, recs);
		} else {
			fprintf(stderr, "batch_driver: unknown command: %s", line);
			return 2;
		}
		printf("ok\n");
	}
	return 0;
}
