// SPDX-License-Identifier: BSD-2-Clause
// operands: one USDT probe argument of each operand form that a reader
// cannot take, for probekit-check's tests (test_probecheck_any.py):
// probekit:pick has a scale-index-base operand and a symbol-relative
// %rip one, probekit:konst an immediate.  sys/sdt.h's default constraint
// lets the compiler pick a register; "m" keeps a memory operand as the
// compiler addresses it.
#include <sys/sdt.h>

int counter = 7;

#undef STAP_SDT_ARG_CONSTRAINT
#define STAP_SDT_ARG_CONSTRAINT m
__attribute__((noinline)) int pick(int *p, long i)
{
	STAP_PROBE2(probekit, pick, p[i], counter);
	return 0;
}

#undef STAP_SDT_ARG_CONSTRAINT
#define STAP_SDT_ARG_CONSTRAINT nor
__attribute__((noinline)) int konst(void)
{
	STAP_PROBE1(probekit, konst, 5);
	return 0;
}

int main(int argc, char **argv)
{
	int a[4] = {1, 2, 3, 4};

	(void)argv;
	return pick(a, argc) + konst();
}
