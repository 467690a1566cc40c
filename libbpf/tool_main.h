// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_main.h: the steps every libbpf tool's main() takes, in order,
 * around what the tool itself declares (tool_main.c):
 *
 *	parse its options;
 *	tool_start()	libbpf's messages (-v), the target (-p PID or -b
 *			PATH), a pair tool's thread-exit offsets, and the
 *			attach head start;
 *	tool_opened(m, TOOL_bpf__open())
 *			the skeleton, or its open error said;
 *	the tool's rodata, autoloads and map sizes (PAIR_EXIT_RODATA(rodata,
 *	&m.exit) for the thread-exit offsets), DRAINED_HASH_INIT;
 *	tool_load()	loaded, or its error said; a DRAINED_HASH armed;
 *	tool_attach_exit()
 *			a pair tool's sched_process_exit program, attached
 *			before its probes so that no START is left behind;
 *	the tool's own attaches, and its drop counters in its common_args;
 *	tool_run()	the output loop, then tool_end() (usdtlat and
 *			usdtcount, whose links the sites hold, not the
 *			skeleton, run run_loop_print() themselves);
 *	tool_end()	on any failed step: everything released, the exit
 *			status returned.
 */
#ifndef PROBEKIT_TOOL_MAIN_H
#define PROBEKIT_TOOL_MAIN_H

#include <stdbool.h>

#include <bpf/libbpf.h>

#include "tool_attach.h"
#include "tool_loop.h"
#include "tool_options.h"
#include "tool_target.h"

struct tool_main {
	struct common_args *c;
	struct target t;
	bool pairs;			/* pairs a START with its DONE */
	struct pair_exit_offsets exit;	/* then: tool_start() finds them */
	struct bpf_link *exit_link;	/* tool_attach_exit()'s */
	/* The tool's skeleton, through its first member (every bpftool
	 * skeleton starts with its struct bpf_object_skeleton *). */
	struct bpf_object_skeleton **skel;
};

/* 0, or 1 with its line said and everything released. */
int tool_start(struct tool_main *m, struct common_args *c, bool pairs);

/* skel (TOOL_bpf__open()'s), kept for tool_load() and tool_end(); NULL
 * when it is NULL, with the open's error said. */
void *tool_opened(struct tool_main *m, void *skel);

/* Load the skeleton and, with drained, arm its DRAINED_HASH: 0, or
 * non-zero with the error said. */
int tool_load(struct tool_main *m, bool drained);

/* Attach a pair tool's sched_process_exit program: 0, or the error said. */
int tool_attach_exit(struct tool_main *m, struct bpf_program *prog);

/* The output loop (run_loop()), with the skeleton's hits map and, for a
 * pair tool, its pair_counts, then tool_end(): the exit status. */
int tool_run(struct tool_main *m, const char *what, collect_fn collect,
	     void *ctx);

/* Release the exit link, the skeleton and the target: rc. */
int tool_end(struct tool_main *m, int rc);

#endif
