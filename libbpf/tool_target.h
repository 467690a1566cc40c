// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_target.h: the process a tool traces, or -b's file (tool_target.c).
 */
#ifndef PROBEKIT_TOOL_TARGET_H
#define PROBEKIT_TOOL_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The process to trace: its PID, executable (the path to attach to) and
 * name.  target_open() prints one line and returns -errno when pid is not
 * a live process or cannot be inspected (for a lack of privilege, naming
 * the capabilities missing). */
struct target {
	pid_t pid;
	int pidfd;		/* to notice its exit; -1 if unsupported */
	char exe[4096];		/* its binary, as /proc/PID/exe resolves */
	char comm[256];		/* basename of exe, for messages */
};
int target_open(struct target *t, pid_t pid);
/* -b PATH: every process that runs the executable or library at path,
 * now or later.  pid is -1 and pidfd -1; exe is path made absolute.
 * One line and -errno when path is not a readable regular file. */
int target_open_path(struct target *t, const char *path);
void target_close(struct target *t);

/* After target_open(): when the process has exited since (it is gone,
 * or a zombie), print "PID N (COMM) exited while its probes were being
 * attached" and return true, so that a failure it caused (ENOENT,
 * ESRCH) is reported as what it is; false, printing nothing, when it
 * is alive or t is -b's. */
bool target_exited_during_attach(const struct target *t);

/* "PID N (COMM)", or "PATH (every process)" for -b: where the generic
 * tools say they trace. */
void target_where(const struct target *t, char *out, size_t len);

#endif
