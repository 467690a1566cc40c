// SPDX-License-Identifier: BSD-2-Clause
/* A fixture for probelib's readers: probes with semaphores, a probe with
 * two sites (an inlined helper called twice), and functions and data of
 * known kinds.  Built with sites_nosem.c, whose probe has no semaphore and
 * a constant operand. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

unsigned short fix_hit_semaphore __attribute__((section(".probes"))) = 0;
unsigned short fix_twice_semaphore __attribute__((section(".probes"))) = 0;

int fix_data_object = 7;
void nosem(long v);

__attribute__((noinline)) void site(int i, long v)
{
	STAP_PROBE2(fix, hit, i, v);
}

static inline __attribute__((always_inline)) void twice(long v, char *s)
{
	STAP_PROBE2(fix, twice, v, s);
}

int main(int argc, char **argv)
{
	site(argc, (long)argc * 3);
	twice(argc, argv[0]);
	twice(argc + 1, argv[0]);
	nosem(argc);
	return fix_data_object - 7;
}
