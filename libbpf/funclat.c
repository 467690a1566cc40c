// SPDX-License-Identifier: BSD-2-Clause
/*
 * funclat: summarize a blktgt function's argument, return value and
 * latency as histograms.
 *
 * The libbpf CO-RE twin of bcc/funclat: same options, same output.  A
 * uprobe on FUNC (default bdev_execute) records argument N (1-based,
 * default 4: len in
 *   int64_t bdev_execute(struct bdev *b, uint32_t type, uint64_t offset,
 *                        uint64_t len, void *buf, int fua);)
 * and a uretprobe the return value and the latency.  Three log2
 * histograms: the argument, the non-negative return values (with the
 * count of negative ones, errors, as "negative: N"), and the latency.
 * Entry times are kept by thread, at most --max-inflight; one the full
 * table refuses, and one whose thread exits inside the call, is counted
 * (pair_state.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "funclat.h"
#include "funclat.skel.h"
#include "funclat.spec.h"
#include "probekit_common.spec.h"	/* SPEC_EMPTY_UNCALLED */
#include "tool_attach.h"
#include "tool_loop.h"
#include "tool_main.h"
#include "tool_options.h"
#include "tool_target.h"

const char *tool_name = "funclat";

#define FUNC_MAX 255


static struct {
	struct common_args c;
	const char *func;
	long arg;
	long arg_bits;
	char arg_unit[8];	/* "arg4" */
} env = { .func = SPEC_DEFAULT_FUNCTION, .arg = SPEC_DEFAULT_ARG,
	    .arg_bits = SPEC_DEFAULT_ARG_BITS };

static void option(int key, const char *arg)
{
	switch (key) {
	case OPT_FUNCTION:
		env.func = arg;
		break;
	case 'a':
		if (parse_long(arg, 1, 6, &env.arg))
			usage_error("argument -a/--arg: invalid choice: "
				    "'%s' (choose from 1 to 6)", arg);
		break;
	case OPT_ARG_BITS:
		if (parse_long(arg, 32, 64, &env.arg_bits) ||
		    (env.arg_bits != 32 && env.arg_bits != 64))
			usage_error("argument --arg-bits: invalid choice: "
				    "'%s' (choose from 32, 64)", arg);
		break;
	}
}

/* Options, usage and examples: specs/funclat.toml, through specs/gentool. */
static const struct tool_cli cli = {
	SPEC_CLI,
	.option = option,
	.pairs = true,
};

/* A symbol name as the bcc/ twin accepts it: 1..255 of [A-Za-z0-9_.$]. */
static bool valid_func(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > FUNC_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_.$", *s))
			return false;
	return true;
}

static void parse_args(int argc, char **argv)
{
	parse_options(&cli, &env.c, argc, argv);
	if (!valid_func(env.func))
		usage_error("invalid function name '%.64s'", env.func);
	snprintf(env.arg_unit, sizeof(env.arg_unit), "arg%ld", env.arg);
}

/* Move a live histogram into out, zeroing it slot by slot with an atomic
 * exchange: an increment racing with us lands in this interval or the
 * next, never nowhere. */
static void take_hist(struct hist *live, struct hist *out)
{
	for (int i = 0; i < HIST_LOG2_SLOTS; i++)
		out->slots[i] = __atomic_exchange_n(&live->slots[i], 0,
						    __ATOMIC_SEQ_CST);
}

static int collect(void *ctx, struct hist_entry **entries)
{
	struct funclat_bpf *skel = ctx;
	struct hist_entry *e = calloc(FUNCLAT_NHISTS, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e[FUNCLAT_ARG].name = "arg";
	e[FUNCLAT_ARG].unit = env.arg_unit;
	e[FUNCLAT_RETVAL].name = "retval";
	e[FUNCLAT_RETVAL].unit = "retval";
	e[FUNCLAT_RETVAL].nextras = 1;
	e[FUNCLAT_RETVAL].extra_names[0] = "negative";
	e[FUNCLAT_RETVAL].extra_vals[0] =
		__atomic_exchange_n(&skel->bss->negative, 0, __ATOMIC_SEQ_CST);
	e[FUNCLAT_LATENCY].name = "latency";
	e[FUNCLAT_LATENCY].unit = env.c.unit;
	for (int i = 0; i < FUNCLAT_NHISTS; i++)
		take_hist(&skel->bss->hists[i], &e[i].hist);
	*entries = e;
	return FUNCLAT_NHISTS;
}

int main(int argc, char **argv)
{
	struct funclat_bpf *skel;
	struct tool_main m;
	char what[FUNC_MAX + 8], empty[FUNC_MAX + 64];

	parse_args(argc, argv);
	if (tool_start(&m, &env.c, true))
		return 1;
	skel = tool_opened(&m, funclat_bpf__open());
	if (!skel)
		return tool_end(&m, 1);
	skel->rodata->arg_index = env.arg;
	skel->rodata->arg_mask = env.arg_bits == 32 ? 0xffffffffULL : ~0ULL;
	skel->rodata->unit_ns = env.c.unit_ns;
	skel->rodata->count_hits = env.c.max_rate > 0;
	PAIR_EXIT_RODATA(skel->rodata, &m.exit);
	bpf_map__set_max_entries(skel->maps.start, env.c.max_inflight);
	/* Reclaim first: an entry made once the uprobes are in is then
	 * never left behind by its thread's exit. */
	if (tool_load(&m, false) ||
	    tool_attach_exit(&m, skel->progs.func_exit) ||
	    attach_uprobe(skel->progs.func_entry, &m.t, env.func, false,
			  &skel->links.func_entry) ||
	    attach_uprobe(skel->progs.func_return, &m.t, env.func, true,
			  &skel->links.func_return))
		return tool_end(&m, 1);

	snprintf(what, sizeof(what), "%s()", env.func);
	/* "0 calls", and why: the function is there (attach_uprobe() said
	 * "no function F" otherwise) and was not called. */
	snprintf(empty, sizeof(empty), SPEC_EMPTY_UNCALLED, env.c.empty, what);
	env.c.empty = empty;
	return tool_run(&m, what, collect, skel);
}
