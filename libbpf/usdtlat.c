// SPDX-License-Identifier: BSD-2-Clause
/*
 * usdtlat: the time from one USDT probe to another, in any binary, as a
 * histogram.
 *
 * The libbpf CO-RE twin of bcc/usdtlat: same options, same output
 * (bcc/README.md holds the contract).  START and DONE are provider:name
 * as tplist prints them, resolved in the executable and in every file the
 * process maps (-p), or in one file for every process that runs it (-b).
 * Pairs are matched by thread (-k tid) or by an argument (-k NAME, its
 * name, resolved per probe, or -k argN).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "tool_attach.h"
#include "tool_loop.h"
#include "tool_main.h"
#include "tool_options.h"
#include "tool_target.h"
#include "usdt_sites.h"
#include "usdtlat.h"
#include "usdtlat.skel.h"
#include "usdtlat.spec.h"

const char *tool_name = "usdtlat";

static struct {
	struct common_args c;
	const char *probes[2];	/* START, DONE */
	int nprobes;
	bool by_arg;		/* -k NAME or argN, not tid */
	struct usdt_arg_ref key;
} env;

/* -k's argument as START's and DONE's first sites read it: an empty result's
 * cause when their sizes differ (empty_line()). */
static struct usdt_site_arg key_type[2];

static void option(int key, const char *arg)
{
	if (key == OPT_GATE)
		usdt_gate_option(arg);
	if (key == 'k')
		env.by_arg = usdt_arg_option("-k/--key", arg, true, &env.key);
}

/* START and DONE: the first two operands. */
static bool operand(const char *arg)
{
	if (env.nprobes == 2)
		return false;
	if (!usdt_probe_valid(arg, false))
		usage_error("%s: '%s' is not a probe: give provider:name, "
			    "as tplist prints it", env.nprobes ? "DONE" :
			    "START", escaped(arg));
	env.probes[env.nprobes++] = arg;
	return true;
}

/* Options, usage and examples: specs/usdtlat.toml, through specs/gentool;
 * --gate (OPT_GATE) is a common option of the tools on any binary. */
static const struct tool_cli cli = {
	SPEC_CLI,
	.option = option,
	.operand = operand,
	.pairs = true,
};

static void parse_args(int argc, char **argv)
{
	parse_options(&cli, &env.c, argc, argv);
	if (env.nprobes < 2)
		usage_error("the following arguments are required: %s",
			    env.nprobes ? "DONE" : "START, DONE");
}

/* Move the live histogram into out, slot by slot with an atomic
 * exchange, so no count falls between two intervals. */
static void take_hist(struct hist *live, struct hist *out)
{
	for (int i = 0; i < HIST_LOG2_SLOTS; i++)
		out->slots[i] = __atomic_exchange_n(&live->slots[i], 0,
						    __ATOMIC_SEQ_CST);
}

static int print(void *ctx, struct output *o)
{
	struct usdtlat_bpf *skel = ctx;
	struct hist_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->name = "latency";
	e->unit = env.c.unit;
	take_hist(&skel->bss->hist, &e->hist);
	output_emit(o, e, 1);
	free(e);
	return 0;
}

/*
 * Queue prog at every site of probe (which = 0 START, 1 DONE), each site
 * first described in the sites map from *next on.  Nothing is queued
 * when check is set: every site is then only resolved, and its argument
 * checked, so that a bad DONE leaves START unattached.
 */
static int attach_probe(struct usdtlat_bpf *skel, struct usdt_sites *s,
			const struct target *t, int which, __u32 *next,
			bool check)
{
	struct bpf_program *prog = which ? skel->progs.lat_done :
					   skel->progs.lat_start;
	int fd = bpf_map__fd(skel->maps.sites), found = 0, err;

	for (size_t i = s->first; i < s->nbins; i++) {
		struct usdt_bin *b = &s->bins[i];

		for (size_t k = 0; k < b->n; k++) {
			struct usdt_site site = { .probe = which };

			if (!usdt_probe_match(env.probes[which], &b->notes[k]))
				continue;
			found++;
			if (env.by_arg &&
			    usdt_arg_resolve(b, &b->notes[k], &env.key, false,
					     &site.arg))
				return -EINVAL;
			if (found == 1)
				key_type[which] = site.arg;
			if (check)
				continue;
			if (*next == USDT_SITES_MAX) {
				tool_err("%s has more than %d sites; cannot "
					 "attach to them all", env.probes[which],
					 USDT_SITES_MAX);
				return -E2BIG;
			}
			if (bpf_map_update_elem(fd, next, &site, BPF_ANY)) {
				err = -errno;
				tool_err("cannot describe a site to BPF: %s",
					 strerror(-err));
				return err;
			}
			err = usdt_sites_add(s, prog, b, &b->notes[k], *next);
			if (err)
				return err;
			(*next)++;
		}
	}
	if (!found) {
		usdt_sites_missing(s, t, env.probes[which], false);
		return -ENOENT;
	}
	return 0;
}

/* The next free index of the sites map: a follow adds after the sites
 * of the files before. */
static __u32 next_site;

/* Attach START and DONE at their sites in the files from s->first on. */
static int attach_all(struct usdtlat_bpf *skel, struct usdt_sites *s,
		      const struct target *t)
{
	for (int check = 1; check >= 0; check--)
		for (int which = 0; which < 2; which++)
			if (attach_probe(skel, s, t, which, &next_site, check))
				return -1;
	if (usdt_sites_gates(s, skel->progs.gate, t))
		return -1;
	return usdt_sites_commit(s, t);
}

/* -b PATH: a file replaced PATH; attach to it too (common_args.follow). */
static struct {
	struct usdtlat_bpf *skel;
	struct usdt_sites *sites;
	const struct target *t;
	struct usdt_watch watch;
} follow;

static void follow_file(void *ctx)
{
	int fd = usdt_watch_replaced(&follow.watch, follow.t);

	(void)ctx;
	if (fd < 0 || usdt_sites_follow(follow.sites, follow.t, fd))
		return;
	usdt_sites_followed(follow.sites, follow.t,
			    attach_all(follow.skel, follow.sites, follow.t));
}

/*
 * The line an empty interval prints, the spec's "0 pairs", with the
 * likely cause the tool can tell: a gated probe traced without its gate,
 * or a -k argument that START and DONE read with two sizes (a char * and an
 * int32_t), whose values seldom meet (toolspec.EMPTY_KEYS).
 */
static const char *empty_line(char *buf, size_t len)
{
	char names[2][USDT_PROBE_MAX];

	for (int i = 0; i < 2; i++)
		snprintf(names[i], sizeof(names[i]), "%s", env.probes[i]);
	usdt_empty_gated(buf, len, env.c.empty, names, 2);
	if (!strcmp(buf, env.c.empty) && env.by_arg &&
	    key_type[0].size != key_type[1].size)
		usdt_empty_keys(buf, len, env.c.empty, env.key.label, key_type);
	return buf;
}

int main(int argc, char **argv)
{
	struct usdtlat_bpf *skel;
	struct usdt_sites sites = { 0 };
	char where[PATH_MAX + 64], ready[2 * PATH_MAX], empty[512];
	struct tool_main m;
	int rc = 1;

	parse_args(argc, argv);
	if (tool_start(&m, &env.c, true))
		return 1;
	follow.watch.fd = -1;
	if (usdt_watch_open(&follow.watch, &m.t) || usdt_sites_open(&sites, &m.t))
		goto out;
	skel = tool_opened(&m, usdtlat_bpf__open());
	if (!skel)
		goto out;
	usdt_sites_prepare(&sites, skel->progs.lat_start);
	usdt_sites_prepare(&sites, skel->progs.lat_done);
	usdt_sites_prepare(&sites, skel->progs.gate);
	skel->rodata->by_arg = env.by_arg;
	skel->rodata->unit_ns = env.c.unit_ns;
	skel->rodata->count_hits = env.c.max_rate > 0;
	PAIR_EXIT_RODATA(skel->rodata, &m.exit);
	bpf_map__set_max_entries(skel->maps.start, env.c.max_inflight);
	/* Reclaim first: a START made once the uprobes are in is then
	 * never left behind by its thread's exit. */
	if (tool_load(&m, false) ||
	    tool_attach_exit(&m, skel->progs.lat_exit) ||
	    attach_all(skel, &sites, &m.t))
		goto out;

	target_where(&m.t, where, sizeof(where));
	snprintf(ready, sizeof(ready), "Tracing latency of %s to %s in %s",
		 env.probes[0], env.probes[1], where);
	/* Its links are made outside the skeleton: detached through the
	 * sites, not by the loop's skeleton (tool_run()). */
	env.c.hits = skel->maps.hits;
	env.c.detach = usdt_sites_detach;
	env.c.detach_ctx = &sites;
	env.c.pair_counts = skel->maps.pair_counts;
	if (follow.watch.fd >= 0) {
		follow = (typeof(follow)){ skel, &sites, &m.t, follow.watch };
		env.c.follow_fd = follow.watch.fd;
		env.c.follow = follow_file;
	}
	env.c.empty = empty_line(empty, sizeof(empty));
	rc = run_loop_print(&env.c, &m.t, ready, print, skel);
out:
	usdt_watch_close(&follow.watch);
	usdt_sites_close(&sites);
	return tool_end(&m, rc);
}
