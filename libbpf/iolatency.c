// SPDX-License-Identifier: BSD-2-Clause
/*
 * iolatency: how long blktgt's block I/Os take, from submission to
 * completion, shown as a histogram.
 *
 * The libbpf CO-RE twin of bcc/iolatency: same options, same output.  The
 * latency of an I/O is the time from its submission to its completion:
 * by default as blktgt stamped them in the records of blktgt:io__batch,
 * one hit for up to 256 I/Os; with --per-io, from blktgt:io__submit to
 * blktgt:io__done of the same I/O id, two hits per I/O, whose times also
 * hold the cost of the hits (see iolatency.bpf.c); at most --max-inflight
 * I/Os are timed at once, and what is dropped or reclaimed is counted
 * (pair_state.h).  Options reach the BPF
 * program as read-only data set before load, never as text.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "iolatency.h"
#include "iolatency.skel.h"
#include "iolatency.spec.h"
#include "tool_attach.h"
#include "tool_drain.h"
#include "tool_loop.h"
#include "tool_main.h"
#include "tool_options.h"
#include "tool_target.h"

const char *tool_name = "iolatency";

static struct {
	struct common_args c;
	bool per_bdev, per_type, linear, per_io;
	long width;		/* -W, with -L: specs/iolatency.toml's default */
} env = { .width = SPEC_DEFAULT_WIDTH };

static void option(int key, const char *arg)
{
	switch (key) {
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
		env.width = positive_arg("-W/--width", arg, INT_MAX);
		break;
	case OPT_PER_IO:
		env.per_io = true;
		break;
	}
}

/* Options, usage and examples: specs/iolatency.toml, through specs/gentool. */
static const struct tool_cli cli = {
	SPEC_CLI,
	.option = option,
	.pairs = true,		/* with --per-io */
	.hists = true,
};

static int collect(void *ctx, struct hist_entry **entries)
{
	struct iolatency_bpf *skel = ctx;
	const struct hist_entry proto = {
		.name = "latency", .unit = env.c.unit,
		.linear = env.linear, .width = env.width,
	};

	return io_collect(skel->maps.hists, env.per_bdev, env.per_type, &proto,
			  entries);
}

int main(int argc, char **argv)
{
	struct iolatency_bpf *skel;
	struct tool_main m;

	parse_options(&cli, &env.c, argc, argv);
	if (!env.per_io && !kernel_has_bpf_loop()) {
		say_batch_fallback();
		env.per_io = true;
	}
	if (tool_start(&m, &env.c, env.per_io))
		return 1;
	skel = tool_opened(&m, iolatency_bpf__open());
	if (!skel)
		return tool_end(&m, 1);
	skel->rodata->per_bdev = env.per_bdev;
	skel->rodata->per_type = env.per_type;
	skel->rodata->linear = env.linear;
	skel->rodata->width = env.width;
	skel->rodata->unit_ns = env.c.unit_ns;
	skel->rodata->count_hits = env.c.max_rate > 0;
	bpf_program__set_autoload(skel->progs.io_batch, !env.per_io);
	bpf_program__set_autoload(skel->progs.io_submit, env.per_io);
	bpf_program__set_autoload(skel->progs.io_done, env.per_io);
	bpf_program__set_autoload(skel->progs.io_exit, env.per_io);
	if (env.per_io) {
		PAIR_EXIT_RODATA(skel->rodata, &m.exit);
		bpf_map__set_max_entries(skel->maps.start, env.c.max_inflight);
	} else {
		bpf_map__set_max_entries(skel->maps.start, 1);	/* unused */
	}
	DRAINED_HASH_INIT(skel->maps, hists, env.c.max_keys);
	if (tool_load(&m, true))
		return tool_end(&m, 1);
	if (!env.per_io) {
		if (attach_usdt(skel->progs.io_batch, &m.t, "blktgt", "io__batch",
				&skel->links.io_batch))
			return tool_end(&m, 1);
	} else if (tool_attach_exit(&m, skel->progs.io_exit) ||
		   attach_usdt(skel->progs.io_submit, &m.t, "blktgt", "io__submit",
			       &skel->links.io_submit) ||
		   attach_usdt(skel->progs.io_done, &m.t, "blktgt", "io__done",
			       &skel->links.io_done)) {
		return tool_end(&m, 1);
	}

	env.c.hist_dropped = &skel->bss->hist_dropped;
	env.c.hist_busy = &skel->bss->hist_busy;
	env.c.hist_unreadable = &skel->bss->hist_unreadable;
	env.c.hist_bad_count = &skel->bss->hist_bad_count;
	if (!env.per_io && env.per_bdev)
		env.c.hist_bdevs_merged = skel->data->hist_bdevs_merged;
	return tool_run(&m, "block I/O latency", collect, skel);
}
