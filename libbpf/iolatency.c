// SPDX-License-Identifier: BSD-2-Clause
/*
 * iolatency: summarize blktgt block I/O latency as a histogram.
 *
 * The libbpf CO-RE twin of bcc/iolatency: same options, same output.  The
 * latency of an I/O is the time from blktgt:io__submit to blktgt:io__done
 * of the same I/O id (see iolatency.bpf.c).  Options reach the BPF
 * program as read-only data set before load, never as text.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "iolatency.h"
#include "iolatency.skel.h"
#include "trace_helpers.h"

const char *tool_name = "iolatency";

static const char usage[] =
"usage: probekit-iolatency -p PID [-h] [-T] [-B] [-O] [-m|-u|-n] [-L [-W WIDTH]]\n"
"                          [-d SECS] [-j] [interval [count]]\n"
"\n"
"Summarize blktgt block I/O latency as a histogram (libbpf CO-RE).\n"
"\n"
"options:\n"
COMMON_HELP
"  -B, --bdevs          print a histogram per bdev\n"
"  -O, --types          print a histogram per I/O type (read, write, ...)\n"
"  -L, --linear         linear histogram instead of log2\n"
"  -W, --width WIDTH    linear bucket width, in the unit (default 10)\n"
"  -m, --milliseconds   millisecond histogram\n"
"  -u, --microseconds   microsecond histogram (default)\n"
"  -n, --nanoseconds    nanosecond histogram\n"
"\n"
"examples:\n"
"    probekit-iolatency -p 1234\n"
"        summarize I/O latency as a histogram\n"
"    probekit-iolatency -p 1234 1 10\n"
"        print 1 second summaries, 10 times\n"
"    probekit-iolatency -p 1234 -mT 1\n"
"        1s summaries, milliseconds, timestamps\n"
"    probekit-iolatency -p 1234 -B\n"
"        a histogram per bdev\n"
"    probekit-iolatency -p 1234 -BO\n"
"        a histogram per bdev and I/O type\n"
"    probekit-iolatency -p 1234 -L -W 5\n"
"        linear histogram, 5 usec buckets\n"
"    probekit-iolatency -p 1234 -d 10 -j\n"
"        trace for 10 seconds, print JSON\n";

static struct {
	struct common_args c;
	bool per_bdev, per_type, linear;
	long width;		/* 0: not given */
	const char *unit;	/* column header */
	unsigned long long unit_ns;
} env = { .unit = "usecs", .unit_ns = 1000 };

static void parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ "bdevs", no_argument, NULL, 'B' },
		{ "types", no_argument, NULL, 'O' },
		{ "linear", no_argument, NULL, 'L' },
		{ "width", required_argument, NULL, 'W' },
		{ "milliseconds", no_argument, NULL, 'm' },
		{ "microseconds", no_argument, NULL, 'u' },
		{ "nanoseconds", no_argument, NULL, 'n' },
		{ 0 }
	};
	char unit_given = 0;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS "BOLW:mun",
				longopts, NULL)) != -1) {
		if (common_option(&env.c, c, optarg) ||
		    unit_option(c, &unit_given, &env.unit, &env.unit_ns))
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
		case 'L':
			env.linear = true;
			break;
		case 'W':
			env.width = positive_arg("-W/--width", optarg, INT_MAX);
			break;
		default:
			option_error(argv, COMMON_SHORTOPTS "BOLW:mun");
		}
	}
	common_finish(&env.c, argc, argv, optind);
	if (env.width && !env.linear)
		usage_error("-W/--width needs -L/--linear");
	if (!env.width)
		env.width = 10;
}

static int collect(void *ctx, struct hist_entry **entries)
{
	struct iolatency_bpf *skel = ctx;
	const struct hist_entry proto = {
		.name = "latency", .unit = env.unit,
		.linear = env.linear, .width = env.width,
	};

	return io_collect(skel->maps.hists, env.per_bdev, env.per_type, &proto,
			  entries);
}

int main(int argc, char **argv)
{
	struct iolatency_bpf *skel = NULL;
	struct target t;
	int err, rc = 1;

	parse_args(argc, argv);
	libbpf_quiet(env.c.verbose);
	if (target_open(&t, env.c.pid))
		return 1;

	skel = iolatency_bpf__open();
	if (!skel) {
		report_load_error(&t, -errno);
		goto out;
	}
	skel->rodata->per_bdev = env.per_bdev;
	skel->rodata->per_type = env.per_type;
	skel->rodata->linear = env.linear;
	skel->rodata->width = env.width;
	skel->rodata->unit_ns = env.unit_ns;
	err = iolatency_bpf__load(skel);
	if (err) {
		report_load_error(&t, err);
		goto out;
	}
	if (attach_usdt(skel->progs.io_submit, &t, "blktgt", "io__submit",
			&skel->links.io_submit) ||
	    attach_usdt(skel->progs.io_done, &t, "blktgt", "io__done",
			&skel->links.io_done))
		goto out;

	rc = run_loop(&env.c, &t, "block I/O latency", collect, skel);
out:
	iolatency_bpf__destroy(skel);
	target_close(&t);
	return rc;
}
