// SPDX-License-Identifier: BSD-2-Clause
/* Part of the probelib fixture: a probe without a semaphore whose
 * argument is a constant ($42). */
#include <sys/sdt.h>

__attribute__((noinline)) void nosem(long v)
{
	STAP_PROBE1(fix, konst, 42);
	__asm__ volatile("" : : "r"(v) : "memory");
}
