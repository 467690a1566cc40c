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
#include "tool_main.h"
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
	struct rpclat_bpf *skel;
	struct tool_main m;

	parse_options(&cli, &env, argc, argv);
	if (tool_start(&m, &env, true))
		return 1;
	skel = tool_opened(&m, rpclat_bpf__open());
	if (!skel)
		return tool_end(&m, 1);
	skel->rodata->unit_ns = env.unit_ns;
	skel->rodata->count_hits = env.max_rate > 0;
	PAIR_EXIT_RODATA(skel->rodata, &m.exit);
	bpf_map__set_max_entries(skel->maps.start, env.max_inflight);
	DRAINED_HASH_INIT(skel->maps, hists, env.max_keys);
	/* Reclaim first: a request made once the probes are in is then
	 * never left behind by its process's exit. */
	if (tool_load(&m, true) ||
	    tool_attach_exit(&m, skel->progs.rpc_exit) ||
	    attach_usdt(skel->progs.rpc_request, &m.t, "blktgt", "rpc__request",
			&skel->links.rpc_request) ||
	    attach_usdt(skel->progs.rpc_done, &m.t, "blktgt", "rpc__done",
			&skel->links.rpc_done))
		return tool_end(&m, 1);

	env.hist_dropped = &skel->bss->hist_dropped;
	return tool_run(&m, "JSON-RPC latency", collect, skel);
}
