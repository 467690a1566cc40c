// SPDX-License-Identifier: BSD-2-Clause
/*
 * iosize: summarize blktgt block I/O sizes as a histogram.
 *
 * The libbpf CO-RE twin of bcc/iosize: same options, same output.  Counts
 * the len argument (bytes) of every blktgt:io__submit as a log2
 * histogram, optionally split per bdev (-B) and per I/O type (-O).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "iosize.h"
#include "iosize.skel.h"
#include "trace_helpers.h"

const char *tool_name = "iosize";

static const char usage[] =
"usage: probekit-iosize -p PID [-h] [-T] [-B] [-O] [-d SECS] [-j]\n"
"                       [interval [count]]\n"
"\n"
"Summarize blktgt block I/O sizes as a histogram (libbpf CO-RE).\n"
"\n"
"options:\n"
COMMON_HELP
"  -B, --bdevs          print a histogram per bdev\n"
"  -O, --types          print a histogram per I/O type (read, write, ...)\n"
"\n"
"examples:\n"
"    probekit-iosize -p 1234\n"
"        summarize I/O sizes as a histogram\n"
"    probekit-iosize -p 1234 1 10\n"
"        print 1 second summaries, 10 times\n"
"    probekit-iosize -p 1234 -BO\n"
"        a histogram per bdev and I/O type\n"
"    probekit-iosize -p 1234 -T -d 60 10\n"
"        10s summaries with timestamps, for 60s\n"
"    probekit-iosize -p 1234 -j\n"
"        print JSON\n";

static struct {
	struct common_args c;
	bool per_bdev, per_type;
} env;

static void parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ "bdevs", no_argument, NULL, 'B' },
		{ "types", no_argument, NULL, 'O' },
		{ 0 }
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS "BO", longopts,
				NULL)) != -1) {
		if (common_option(&env.c, c, optarg))
			continue;
		switch (c) {
		case 'h':
			fputs(usage, stdout);
			exit(0);
		case 'B':
			env.per_bdev = true;
			break;
		case 'O':
			env.per_type = true;
			break;
		default:
			option_error(argv, COMMON_SHORTOPTS "BO");
		}
	}
	common_finish(&env.c, argc, argv, optind);
}

static int collect(void *ctx, struct hist_entry **entries)
{
	struct iosize_bpf *skel = ctx;
	const struct hist_entry proto = { .name = "size", .unit = "bytes" };

	return io_collect(skel->maps.hists, env.per_bdev, env.per_type, &proto,
			  entries);
}

int main(int argc, char **argv)
{
	struct iosize_bpf *skel = NULL;
	struct target t;
	int err, rc = 1;

	parse_args(argc, argv);
	libbpf_quiet(env.c.verbose);
	if (target_open(&t, env.c.pid))
		return 1;

	skel = iosize_bpf__open();
	if (!skel) {
		report_load_error(&t, -errno);
		goto out;
	}
	skel->rodata->per_bdev = env.per_bdev;
	skel->rodata->per_type = env.per_type;
	err = iosize_bpf__load(skel);
	if (err) {
		report_load_error(&t, err);
		goto out;
	}
	if (attach_usdt(skel->progs.io_submit, &t, "blktgt", "io__submit",
			&skel->links.io_submit))
		goto out;

	rc = run_loop(&env.c, &t, "block I/O size", collect, skel);
out:
	iosize_bpf__destroy(skel);
	target_close(&t);
	return rc;
}
