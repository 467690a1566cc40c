/* SPDX-License-Identifier: BSD-2-Clause */
/* The script joiner: probekit-bpftrace's scripts made into one bpftrace
 * program, and the join command that hands it to the wrapper in lines
 * (join.c says how it joins and what the lines are). */
#ifndef PROBEKIT_WRAPPER_JOIN_H
#define PROBEKIT_WRAPPER_JOIN_H

#include <stddef.h>

#include "helper.h"

/* What the program is asked to do besides the scripts. */
struct join_opts {
	const char *pid;	/* the traced PID, or "" when a file is traced */
	const char *ready;	/* the readiness line, a bpftrace format with
				 * one %d for the PID (with no PID, the whole
				 * line) */
	const char *duration;	/* seconds until exit(), or "" */
	const char *max_rate;	/* --max-rate's budget, or "" */
	unsigned max_cpu;	/* the highest possible CPU, for the sums of
				 * --max-rate and --hits */
	const char *gate_pid;	/* bpftrace's own PID: the window's edges are
				 * its syscalls and signals */
	const char *gate_open;	/* the syscall tracepoints (sys_enter_...,
				 * blank-separated) whose first call by
				 * bpftrace opens the window; "" opens it in
				 * BEGIN */
	const char *hits;	/* --hits: "text", "json" or "" */
	const char *exe;	/* the traced file (/proc/PID/exe or PATH), whose
				 * probekit notes name a usdt probe's arguments
				 * (args.NAME); "" for none */
	const char *only_pid;	/* a PID the usdt, uprobe and uretprobe
				 * blocks keep to themselves, when bpftrace
				 * runs without -p; or "" */
};

/* A KIND:__EXE__:SPEC of an attach point. */
struct join_ref {
	const char *kind;	/* usdt, uprobe, uretprobe, U, u or ur */
	char *spec;		/* what follows "KIND:__EXE__:" */
	size_t at;		/* the byte offset of its __EXE__ in the program */
	int reads;		/* the highest argN its block reads, or -1 */
};

/* Program line AT and the lines after it, up to the next entry, are
 * script FILE's (its index from 1 among the paths given; 0: lines the
 * joiner wrote) from LINE on. */
struct join_span {
	long at, line;
	int file;
};

struct join_result {
	struct helper_buf prog;
	struct join_ref *refs;	/* in program order, refs[N - 1] is reference N */
	int nrefs;
	struct join_span *map;
	int nmap;
};

/* Join the scripts at paths[0..n) into *r; every error (an unreadable or
 * malformed script, __PID__ without a PID) is helper_die's line. */
void join_scripts(const struct join_opts *o, char *const *paths, int n, struct join_result *r);
void join_result_free(struct join_result *r);

/* probekit-scan join PID READY DURATION EXE SCRIPT...: join.c. */
int join_command(int argc, char **argv);

#endif
