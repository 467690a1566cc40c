// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpclat: summarize blktgt JSON-RPC latency per method as histograms.
 *
 * The libbpf CO-RE twin of bcc/rpclat: same options, same output.  The
 * latency of a request is the time from blktgt:rpc__request to
 * blktgt:rpc__done of the same RPC id (see rpclat.bpf.c).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

#include "rpclat.h"
#include "rpclat.skel.h"
#include "trace_helpers.h"

const char *tool_name = "rpclat";

static const char usage[] =
"usage: probekit-rpclat -p PID [-h] [-T] [-m|-u|-n] [-d SECS] [-j]\n"
"                       [interval [count]]\n"
"\n"
"Summarize blktgt JSON-RPC latency per method (libbpf CO-RE).\n"
"\n"
"options:\n"
COMMON_HELP
"  -m, --milliseconds   millisecond histogram\n"
"  -u, --microseconds   microsecond histogram (default)\n"
"  -n, --nanoseconds    nanosecond histogram\n"
"\n"
"examples:\n"
"    probekit-rpclat -p 1234\n"
"        summarize RPC latency per method\n"
"    probekit-rpclat -p 1234 -m 5\n"
"        5 second summaries, in milliseconds\n"
"    probekit-rpclat -p 1234 -T -d 60 10\n"
"        10s summaries with timestamps, for 60s\n"
"    probekit-rpclat -p 1234 -j\n"
"        print JSON\n";

#define SHORTOPTS COMMON_SHORTOPTS "mun"

static struct {
	struct common_args c;
	const char *unit;
	unsigned long long unit_ns;
} env = { .unit = "usecs", .unit_ns = 1000 };

static void parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ "milliseconds", no_argument, NULL, 'm' },
		{ "microseconds", no_argument, NULL, 'u' },
		{ "nanoseconds", no_argument, NULL, 'n' },
		{ 0 }
	};
	char unit_given = 0;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, SHORTOPTS, longopts, NULL)) != -1) {
		if (common_option(&env.c, c, optarg) ||
		    unit_option(c, &unit_given, &env.unit, &env.unit_ns))
			continue;
		if (c == 'h') {
			fputs(usage, stdout);
			exit(0);
		}
		option_error(argv, SHORTOPTS);
	}
	common_finish(&env.c, argc, argv, optind);
}

static int collect(void *ctx, struct hist_entry **entries)
{
	struct rpclat_bpf *skel = ctx;
	const struct hist_entry proto = { .name = "latency", .unit = env.unit };

	return collect_by_name(skel->maps.hists, "method", &proto, entries);
}

int main(int argc, char **argv)
{
	struct rpclat_bpf *skel = NULL;
	struct target t;
	int err, rc = 1;

	parse_args(argc, argv);
	libbpf_quiet(env.c.verbose);
	if (target_open(&t, env.c.pid))
		return 1;

	skel = rpclat_bpf__open();
	if (!skel) {
		report_load_error(&t, -errno);
		goto out;
	}
	skel->rodata->unit_ns = env.unit_ns;
	err = rpclat_bpf__load(skel);
	if (err) {
		report_load_error(&t, err);
		goto out;
	}
	if (attach_usdt(skel->progs.rpc_request, &t, "blktgt", "rpc__request",
			&skel->links.rpc_request) ||
	    attach_usdt(skel->progs.rpc_done, &t, "blktgt", "rpc__done",
			&skel->links.rpc_done))
		goto out;

	rc = run_loop(&env.c, &t, "JSON-RPC latency", collect, skel);
out:
	rpclat_bpf__destroy(skel);
	target_close(&t);
	return rc;
}
