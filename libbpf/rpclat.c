// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpclat: summarize blktgt JSON-RPC latency per method as histograms.
 *
 * The libbpf CO-RE twin of bcc/rpclat: same options, same output.  The
 * latency of a request is the time from blktgt:rpc__request to
 * blktgt:rpc__done of the same RPC id (see rpclat.bpf.c); at most
 * --max-inflight requests are timed at once, and what is dropped or
 * reclaimed is counted (pair_state.h); at most --max-keys methods keep a
 * histogram per interval, and a latency none has room for is counted
 * (histogram.bpf.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

#include "rpclat.h"
#include "rpclat.skel.h"
#include "rpclat.spec.h"
#include "tool_attach.h"
#include "tool_drain.h"
#include "tool_loop.h"
#include "tool_options.h"
#include "tool_target.h"

const char *tool_name = "rpclat";

/* Usage and examples: specs/rpclat.toml, through specs/gentool. */
static const struct tool_cli cli = {
	SPEC_CLI,
	.pairs = true,
	.hists = true,
};

static struct common_args env;

static int collect(void *ctx, struct hist_entry **entries)
{
	struct rpclat_bpf *skel = ctx;
	const struct hist_entry proto = { .name = "latency", .unit = env.unit };

	return collect_by_name(skel->maps.hists, "method", &proto, entries);
}

int main(int argc, char **argv)
{
	struct rpclat_bpf *skel = NULL;
	struct pair_exit_offsets exit_offs;
	struct bpf_link *exit_link = NULL;
	struct target t;
	int err, rc = 1;

	parse_options(&cli, &env, argc, argv);
	libbpf_quiet(env.verbose);
	if (target_open(&t, env.pid))
		return 1;
	if (pair_exit_detect(&exit_offs))
		goto out;

	attach_warm_start();
	skel = rpclat_bpf__open();
	if (!skel) {
		report_load_error(&t, -errno);
		goto out;
	}
	skel->rodata->unit_ns = env.unit_ns;
	skel->rodata->count_hits = env.max_rate > 0;
	skel->rodata->pair_group_dead_off = exit_offs.group_dead_off;
	skel->rodata->pair_task_signal_off = exit_offs.task_signal_off;
	skel->rodata->pair_signal_live_off = exit_offs.signal_live_off;
	bpf_map__set_max_entries(skel->maps.start, env.max_inflight);
	DRAINED_HASH_INIT(skel->maps, hists, env.max_keys);
	err = rpclat_bpf__load(skel);
	if (err) {
		report_object_load_error(&t, skel->obj, err);
		goto out;
	}
	if (drained_hash_arm())
		goto out;
	/* Reclaim first: a request made once the probes are in is then
	 * never left behind by its process's exit. */
	if (pair_exit_attach(skel->progs.rpc_exit, &exit_link) ||
	    attach_usdt(skel->progs.rpc_request, &t, "blktgt", "rpc__request",
			&skel->links.rpc_request) ||
	    attach_usdt(skel->progs.rpc_done, &t, "blktgt", "rpc__done",
			&skel->links.rpc_done))
		goto out;

	env.hits = skel->maps.hits;
	env.skel = skel->skeleton;
	env.pair_counts = skel->maps.pair_counts;
	env.hist_dropped = &skel->bss->hist_dropped;
	rc = run_loop(&env, &t, "JSON-RPC latency", collect, skel);
out:
	bpf_link__destroy(exit_link);
	rpclat_bpf__destroy(skel);
	target_close(&t);
	return rc;
}
