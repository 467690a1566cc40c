// SPDX-License-Identifier: BSD-2-Clause
/*
 * iosize: summarize blktgt block I/O sizes as a histogram.
 *
 * The libbpf CO-RE twin of bcc/iosize: same options, same output.  Counts
 * the length (bytes) of every blktgt I/O as a log2 histogram, optionally
 * split per bdev (-B) and per I/O type (-O): by default from the records
 * of blktgt:io__batch, one hit for up to 256 completed I/Os; with --per-io
 * from blktgt:io__submit, one hit per I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "iosize.h"
#include "iosize.skel.h"
#include "iosize.spec.h"
#include "tool_attach.h"
#include "tool_drain.h"
#include "tool_loop.h"
#include "tool_main.h"
#include "tool_options.h"
#include "tool_target.h"

const char *tool_name = "iosize";

static struct {
	struct common_args c;
	bool per_bdev, per_type, per_io;
} env;

static void option(int key, const char *arg)
{
	if (key == 'B')
		env.per_bdev = true;
	else if (key == 'O')
		env.per_type = true;
	else if (key == OPT_PER_IO)
		env.per_io = true;
}

/* Options, usage and examples: specs/iosize.toml, through specs/gentool. */
static const struct tool_cli cli = { SPEC_CLI, .option = option,
				       .hists = true };

static int collect(void *ctx, struct hist_entry **entries)
{
	struct iosize_bpf *skel = ctx;
	const struct hist_entry proto = { .name = "size", .unit = "bytes" };

	return io_collect(skel->maps.hists, env.per_bdev, env.per_type, &proto,
			  entries);
}

int main(int argc, char **argv)
{
	struct iosize_bpf *skel;
	struct tool_main m;

	parse_options(&cli, &env.c, argc, argv);
	if (tool_start(&m, &env.c, false))
		return 1;
	if (!env.per_io && !kernel_has_bpf_loop()) {
		say_batch_fallback();
		env.per_io = true;
	}
	skel = tool_opened(&m, iosize_bpf__open());
	if (!skel)
		return tool_end(&m, 1);
	skel->rodata->per_bdev = env.per_bdev;
	skel->rodata->per_type = env.per_type;
	skel->rodata->count_hits = env.c.max_rate > 0;
	bpf_program__set_autoload(skel->progs.io_batch, !env.per_io);
	bpf_program__set_autoload(skel->progs.io_submit, env.per_io);
	DRAINED_HASH_INIT(skel->maps, hists, env.c.max_keys);
	if (tool_load(&m, true) ||
	    (env.per_io ? attach_usdt(skel->progs.io_submit, &m.t, "blktgt", "io__submit",
				      &skel->links.io_submit)
			: attach_usdt(skel->progs.io_batch, &m.t, "blktgt", "io__batch",
				      &skel->links.io_batch)))
		return tool_end(&m, 1);

	env.c.hist_dropped = &skel->bss->hist_dropped;
	env.c.hist_busy = &skel->bss->hist_busy;
	env.c.hist_unreadable = &skel->bss->hist_unreadable;
	env.c.hist_bad_count = &skel->bss->hist_bad_count;
	if (!env.per_io && env.per_bdev)
		env.c.hist_bdevs_merged = skel->data->hist_bdevs_merged;
	return tool_run(&m, "block I/O size", collect, skel);
}
