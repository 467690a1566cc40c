// SPDX-License-Identifier: BSD-2-Clause
/* tests/probes/test_readers.py's window on the C reader of probekit notes
 * (probes/usdt/usdt_notes.h): argnames_dump FILE prints one line per probe,
 * "provider:name" then a tab and "type name" for each argument, or the
 * reader's one-line error on stderr and exits 1. */
#include <stdio.h>
#include <stdlib.h>

#include "usdt_notes.h"

int main(int argc, char **argv)
{
	struct usdt_probe_args *a;
	size_t n, i;
	char err[512];
	int j;

	if (argc != 2) {
		fprintf(stderr, "usage: argnames_dump FILE\n");
		return 2;
	}
	if (usdt_probe_args_read(argv[1], &a, &n, err, sizeof(err))) {
		fprintf(stderr, "argnames_dump: %s\n", err);
		return 1;
	}
	for (i = 0; i < n; i++) {
		printf("%s:%s", a[i].provider, a[i].name);
		for (j = 0; j < a[i].argc; j++)
			printf("\t%s %s", a[i].args[j].type, a[i].args[j].name);
		printf("\n");
	}
	free(a);
	return 0;
}
