// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbdtime: where an NBD request's time goes: the network syscalls, the
 * bdev, or the queue between them.
 *
 * The libbpf CO-RE twin of bcc/nbdtime: same options, same output; that
 * file says what each histogram measures and how a request's share of its
 * connection's syscalls is estimated.  Options reach the BPF program as
 * read-only data set before load, never as text.  At most --max-inflight
 * requests and as many I/Os are timed at once, and what is dropped or
 * reclaimed is counted (pair_state.h); at most --max-keys histograms are
 * kept per interval, and a value none has room for is counted
 * (histogram.bpf.h).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "nbdtime.h"
#include "nbdtime.skel.h"
#include "nbdtime.spec.h"
#include "tool_attach.h"
#include "tool_drain.h"
#include "tool_loop.h"
#include "tool_main.h"
#include "tool_options.h"
#include "tool_priv.h"
#include "tool_target.h"

const char *tool_name = "nbdtime";

/* Section names, by enum nbdtime_stage (bcc/nbdtime's STAGES). */
static const char *const stage_names[STAGE_COUNT] = {
	[STAGE_REQUEST] = "request",
	[STAGE_BDEV] = "bdev",
	[STAGE_SHARE] = "syscalls per request",
	[STAGE_SYS_NBD] = "syscalls on nbd sockets",
	[STAGE_SYS_OTHER] = "syscalls on other sockets",
};

static struct {
	struct common_args c;
	bool per_cmd, linear;
	long width;		/* -W, with -L: specs/nbdtime.toml's default */
} env = { .width = SPEC_DEFAULT_WIDTH };

static void option(int key, const char *arg)
{
	switch (key) {
	case 'C':
		env.per_cmd = true;
		break;
	case 'L':
		env.linear = true;
		break;
	case 'W':
		env.width = positive_arg("-W/--width", arg, INT_MAX);
		break;
	}
}

/* Options, usage and examples: specs/nbdtime.toml, through specs/gentool. */
static const struct tool_cli cli = {
	SPEC_CLI,
	.option = option,
	.pairs = true,
	.hists = true,
};

/* Print order: by stage, then command name, then thread id (numerically,
 * as bcc/nbdtime sorts them). */
struct sorted {
	struct nbdtime_key key;
	struct hist_entry e;
};

static int cmp_sorted(const void *a, const void *b)
{
	const struct nbdtime_key *x = &((const struct sorted *)a)->key;
	const struct nbdtime_key *y = &((const struct sorted *)b)->key;
	int c;

	if (x->stage != y->stage)
		return x->stage < y->stage ? -1 : 1;
	c = strncmp(x->cmd, y->cmd, sizeof(x->cmd));
	if (c)
		return c;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int collect(void *ctx, struct hist_entry **out)
{
	struct nbdtime_bpf *skel = ctx;
	struct nbdtime_key *keys;
	struct hist *hists;
	struct sorted *s;
	struct hist_entry *e;
	const struct hist_entry proto = {
		.name = "latency", .unit = env.c.unit, .linear = env.linear,
		.width = env.linear ? env.width : 0,
	};
	int n = hist_map_drain(skel->maps.hists, (void **)&keys, &hists), m = 0;

	if (n < 0)
		return n;
	s = calloc(n ? n : 1, sizeof(*s));
	e = calloc(n ? n : 1, sizeof(*e));
	if (!s || !e) {
		free(s);
		free(e);
		free(keys);
		free(hists);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		struct hist_entry *h = &s[m].e;

		if (keys[i].stage >= STAGE_COUNT)
			continue;
		s[m].key = keys[i];
		for (size_t j = 0; j < sizeof(keys[i].cmd); j++)
			s[m].key.cmd[j] = (char)tolower((unsigned char)keys[i].cmd[j]);
		*h = proto;
		h->nkeys = 1;
		h->key_names[0] = "stage";
		snprintf(h->key_vals[0], sizeof(h->key_vals[0]), "%s",
			 stage_names[keys[i].stage]);
		if (keys[i].stage >= STAGE_SYS_NBD) {
			h->key_names[h->nkeys] = "tid";
			snprintf(h->key_vals[h->nkeys++], sizeof(h->key_vals[0]),
				 "%u", keys[i].tid);
		} else if (env.per_cmd) {
			h->key_names[h->nkeys] = "cmd";
			snprintf(h->key_vals[h->nkeys++], sizeof(h->key_vals[0]),
				 "%.*s", IOTYPE_LEN, s[m].key.cmd);
		}
		h->hist = hists[i];
		m++;
	}
	qsort(s, m, sizeof(*s), cmp_sorted);
	for (int i = 0; i < m; i++)
		e[i] = s[i].e;
	free(s);
	free(keys);
	free(hists);
	*out = e;
	if (!m)
		e[0] = proto;	/* output_emit(): the empty result's header */
	return m ? m : 1;
}

/* The syscall tracepoints: each program's section names its own. */
static int attach_tracepoints(struct nbdtime_bpf *skel, pid_t pid)
{
	char what[128];
	struct bpf_program *progs[] = {
		skel->progs.enter_recvfrom, skel->progs.enter_recvmsg,
		skel->progs.enter_sendto, skel->progs.enter_sendmsg,
		skel->progs.exit_recvfrom, skel->progs.exit_recvmsg,
		skel->progs.exit_sendto, skel->progs.exit_sendmsg,
	};
	struct bpf_link **links[] = {
		&skel->links.enter_recvfrom, &skel->links.enter_recvmsg,
		&skel->links.enter_sendto, &skel->links.enter_sendmsg,
		&skel->links.exit_recvfrom, &skel->links.exit_recvmsg,
		&skel->links.exit_sendto, &skel->links.exit_sendmsg,
	};

	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		*links[i] = bpf_program__attach(progs[i]);
		if (!*links[i]) {
			int err = -errno;

			/* "tp/syscalls/sys_enter_recvfrom" -> syscalls:...;
			 * its id is read from tracefs, which only root may
			 * read here. */
			snprintf(what, sizeof(what), "cannot attach to "
				 "tracepoint %s",
				 bpf_program__section_name(progs[i]) + 3);
			if ((err == -EACCES || err == -EPERM) &&
			    report_denied(what, pid))
				return err;
			tool_err("%s: %s%s", what, strerror(-err),
				 err == -ENOENT ? " (mount tracefs: mount -t tracefs "
				 "nodev /sys/kernel/tracing)" : "");
			return err;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct nbdtime_bpf *skel;
	struct tool_main m;
	long arg0_off, ret_off;

	parse_options(&cli, &env.c, argc, argv);
	if (tool_start(&m, &env.c, true))
		return 1;
	arg0_off = tracepoint_field_offset("syscalls/sys_enter_sendto", "fd",
					   "trace_event_raw_sys_enter", "args");
	ret_off = tracepoint_field_offset("syscalls/sys_exit_sendto", "ret",
					  "trace_event_raw_sys_exit", "ret");
	if (arg0_off < 0 || ret_off < 0)
		return tool_end(&m, 1);
	skel = tool_opened(&m, nbdtime_bpf__open());
	if (!skel)
		return tool_end(&m, 1);
	skel->rodata->tgid = (__u32)m.t.pid;
	skel->rodata->per_cmd = env.per_cmd;
	skel->rodata->linear = env.linear;
	skel->rodata->width = env.width;
	skel->rodata->unit_ns = env.c.unit_ns;
	skel->rodata->count_hits = env.c.max_rate > 0;
	skel->rodata->sys_arg0_off = arg0_off;
	skel->rodata->sys_ret_off = ret_off;
	PAIR_EXIT_RODATA(skel->rodata, &m.exit);
	bpf_map__set_max_entries(skel->maps.reqs, env.c.max_inflight);
	bpf_map__set_max_entries(skel->maps.ios, env.c.max_inflight);
	DRAINED_HASH_INIT(skel->maps, hists, env.c.max_keys);
	/* Reclaim first: what is kept once the probes are in is then never
	 * left behind by its thread's or process's exit. */
	if (tool_load(&m, true) ||
	    tool_attach_exit(&m, skel->progs.nt_exit) ||
	    attach_usdt(skel->progs.io_submit, &m.t, "blktgt", "io__submit",
			&skel->links.io_submit) ||
	    attach_usdt(skel->progs.io_done, &m.t, "blktgt", "io__done",
			&skel->links.io_done) ||
	    attach_usdt(skel->progs.nbd_request, &m.t, "blktgt", "nbd__request",
			&skel->links.nbd_request) ||
	    attach_usdt(skel->progs.nbd_reply, &m.t, "blktgt", "nbd__reply",
			&skel->links.nbd_reply) ||
	    attach_usdt(skel->progs.nbd_transmit, &m.t, "blktgt", "nbd__transmit",
			&skel->links.nbd_transmit) ||
	    attach_usdt(skel->progs.nbd_disconnect, &m.t, "blktgt", "nbd__disconnect",
			&skel->links.nbd_disconnect) ||
	    attach_tracepoints(skel, m.t.pid))
		return tool_end(&m, 1);

	env.c.hist_dropped = &skel->bss->hist_dropped;
	return tool_run(&m, "NBD request time", collect, skel);
}
