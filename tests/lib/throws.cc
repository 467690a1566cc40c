// SPDX-License-Identifier: BSD-2-Clause
// throws: a known number of C++ exceptions, for counting libstdc++'s
// libstdcxx:throw and libstdcxx:catch probes (test_usdt_generic.py).
// Usage: throws N.  It prints "ready" and waits for a line on stdin, so a
// tracer can attach first; then it throws and catches N exceptions and
// prints "caught N".
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

static int __attribute__((noinline)) fail(int i)
{
	if (i >= 0)
		throw std::runtime_error("probekit");
	return i;
}

int main(int argc, char **argv)
{
	char line[16];
	char *end;
	long n;
	long caught = 0;

	if (argc != 2)
		return 2;
	n = strtol(argv[1], &end, 10);
	if (*end != '\0' || n < 0 || n > 1000000)
		return 2;
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (long i = 0; i < n; i++) {
		try {
			fail((int)i);
		} catch (const std::runtime_error &) {
			caught++;
		}
	}
	printf("caught %ld\n", caught);
	return 0;
}
