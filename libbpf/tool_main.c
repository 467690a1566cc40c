// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_main.c: the steps every libbpf tool's main() takes, around what
 * the tool declares (declared in tool_main.h, which shows the order;
 * libbpf/README.md lists the rooms and which may call which).  Before it,
 * nine main()s repeated them, and their wiring had drifted apart.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "tool_drain.h"
#include "tool_main.h"

int tool_start(struct tool_main *m, struct common_args *c, bool pairs)
{
	memset(m, 0, sizeof(*m));
	m->t.pidfd = -1;
	m->c = c;
	m->pairs = pairs;
	libbpf_quiet(c->verbose);
	if (c->pid ? target_open(&m->t, c->pid) : target_open_path(&m->t, c->path))
		return 1;
	if (pairs && pair_exit_detect(&m->exit))
		return tool_end(m, 1);
	attach_warm_start();
	return 0;
}

void *tool_opened(struct tool_main *m, void *skel)
{
	if (!skel)
		report_load_error(&m->t, -errno);
	m->skel = skel;
	return skel;
}

int tool_load(struct tool_main *m, bool drained)
{
	struct bpf_object_skeleton *s = *m->skel;
	int err = bpf_object__load_skeleton(s);

	if (err) {
		report_object_load_error(&m->t, *s->obj, err);
		return err;
	}
	return drained ? drained_hash_arm() : 0;
}

int tool_attach_exit(struct tool_main *m, struct bpf_program *prog)
{
	return pair_exit_attach(prog, &m->exit_link);
}

/* What the loop reads of every tool's skeleton: its probe hits
 * (--max-rate) and the links to detach, and a pair tool's lost STARTs. */
static void wire(struct tool_main *m)
{
	struct bpf_object *obj = *(*m->skel)->obj;

	m->c->skel = *m->skel;
	m->c->hits = bpf_object__find_map_by_name(obj, "hits");
	if (m->pairs)
		m->c->pair_counts = bpf_object__find_map_by_name(obj, "pair_counts");
}

int tool_run(struct tool_main *m, const char *what, collect_fn collect,
	     void *ctx)
{
	wire(m);
	return tool_end(m, run_loop(m->c, &m->t, what, collect, ctx));
}

int tool_end(struct tool_main *m, int rc)
{
	bpf_link__destroy(m->exit_link);
	m->exit_link = NULL;
	if (m->skel) {
		if (*m->skel)
			bpf_object__destroy_skeleton(*m->skel);
		free(m->skel);
		m->skel = NULL;
	}
	target_close(&m->t);
	return rc;
}
