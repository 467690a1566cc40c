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
	struct qdepth_bpf *skel = NULL;
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
	skel = qdepth_bpf__open();
	if (!skel) {
		report_load_error(&t, -errno);
		goto out;
	}
	skel->rodata->count_hits = env.max_rate > 0;
	skel->rodata->pair_group_dead_off = exit_offs.group_dead_off;
	skel->rodata->pair_task_signal_off = exit_offs.task_signal_off;
	skel->rodata->pair_signal_live_off = exit_offs.signal_live_off;
	bpf_map__set_max_entries(skel->maps.inflight_ids, env.max_inflight);
	DRAINED_HASH_INIT(skel->maps, hists, env.max_keys);
	err = qdepth_bpf__load(skel);
	if (err) {
		report_object_load_error(&t, skel->obj, err);
		goto out;
	}
	if (drained_hash_arm())
		goto out;
	/* Reclaim first: an I/O submitted once the probes are in is then
	 * never left behind by its process's exit. */
	if (pair_exit_attach(skel->progs.qd_exit, &exit_link) ||
	    attach_usdt(skel->progs.io_submit, &t, "blktgt", "io__submit",
			&skel->links.io_submit) ||
	    attach_usdt(skel->progs.io_done, &t, "blktgt", "io__done",
			&skel->links.io_done))
		goto out;

	env.hits = skel->maps.hits;
	env.skel = skel->skeleton;
	env.pair_counts = skel->maps.pair_counts;
	env.hist_dropped = &skel->bss->hist_dropped;
	rc = run_loop(&env, &t, "queue depth", collect, skel);
out:
	bpf_link__destroy(exit_link);
	qdepth_bpf__destroy(skel);
	target_close(&t);
	return rc;
}
