// SPDX-License-Identifier: BSD-2-Clause
/*
 * qdepth: summarize blktgt queue depth per bdev as a histogram.
 *
 * The libbpf CO-RE twin of bcc/qdepth: same options, same output.  At
 * each blktgt:io__submit, counts how many I/Os the bdev then has in
 * flight, this one included, so a workload at queue depth Q shows values
 * 1..Q (see qdepth.bpf.c).  At most --max-inflight I/Os are followed at
 * once, and what is dropped or reclaimed is counted (pair_state.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

#include "qdepth.h"
#include "qdepth.skel.h"
#include "qdepth.spec.h"
#include "tool_attach.h"
#include "tool_drain.h"
#include "tool_loop.h"
#include "tool_main.h"
#include "tool_options.h"
#include "tool_target.h"

const char *tool_name = "qdepth";

/* Usage and examples: specs/qdepth.toml, through specs/gentool. */
static const struct tool_cli cli = {
	SPEC_CLI,
	.pairs = true,
	.hists = true,
};

static struct common_args env;

/* Only the histogram is drained: the in-flight counts are state, kept
 * from one interval to the next. */
static int collect(void *ctx, struct hist_entry **entries)
{
	struct qdepth_bpf *skel = ctx;
	const struct hist_entry proto = { .name = "qdepth", .unit = "depth",
					  .linear = true, .width = 1 };

	return collect_by_name(skel->maps.hists, "bdev", &proto, entries);
}

int main(int argc, char **argv)
{
	struct qdepth_bpf *skel;
	struct tool_main m;

	parse_options(&cli, &env, argc, argv);
	if (tool_start(&m, &env, true))
		return 1;
	skel = tool_opened(&m, qdepth_bpf__open());
	if (!skel)
		return tool_end(&m, 1);
	skel->rodata->count_hits = env.max_rate > 0;
	PAIR_EXIT_RODATA(skel->rodata, &m.exit);
	bpf_map__set_max_entries(skel->maps.inflight_ids, env.max_inflight);
	DRAINED_HASH_INIT(skel->maps, hists, env.max_keys);
	/* Reclaim first: an I/O submitted once the probes are in is then
	 * never left behind by its process's exit. */
	if (tool_load(&m, true) ||
	    tool_attach_exit(&m, skel->progs.qd_exit) ||
	    attach_usdt(skel->progs.io_submit, &m.t, "blktgt", "io__submit",
			&skel->links.io_submit) ||
	    attach_usdt(skel->progs.io_done, &m.t, "blktgt", "io__done",
			&skel->links.io_done))
		return tool_end(&m, 1);

	env.hist_dropped = &skel->bss->hist_dropped;
	return tool_run(&m, "queue depth", collect, skel);
}
