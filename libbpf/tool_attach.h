// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_attach.h: loading and attaching a tool's programs, each failure
 * said in one line (tool_attach.c).
 */
#ifndef PROBEKIT_TOOL_ATTACH_H
#define PROBEKIT_TOOL_ATTACH_H

#include <stdbool.h>
#include <linux/types.h>

#include "tool_target.h"

struct bpf_program;
struct bpf_link;
struct bpf_object;

/* One line for a failed skeleton open or load of a tool tracing t (err
 * is -errno); for a lack of privilege, the capabilities missing. */
void report_load_error(const struct target *t, int err);
/* The same for a failed load of obj, except where its programs call a
 * helper this kernel lacks: then one line naming it (and the release that
 * brought it), not the verifier's refusal. */
void report_object_load_error(const struct target *t,
			      struct bpf_object *obj, int err);
/* Whether this kernel has the bpf_loop() helper (Linux 5.17 and later),
 * with which the io__batch programs and the exporter walk a batch's
 * records: asked of the kernel (a probe load), not read from its version.
 * Only a kernel that refuses it is "no": where the probe cannot tell (no
 * privilege to load), the tool goes on and its load reports why. */
bool kernel_has_bpf_loop(void);
/* The one line iolatency and iosize print when the kernel has no
 * bpf_loop(), before reading each I/O's io__submit and io__done instead
 * of io__batch (as --per-io does); exact either way. */
void say_batch_fallback(void);

/* Before load, and after the tool's tracefs reads (the thread's first
 * registration holds the lock they take, through its wait): start
 * paying, in a thread, the grace period that the first uprobe attach
 * would wait (tool_attach.c says how); after the
 * last attach, before the readiness line: attach_warm_stop() (which
 * run_loop_print() calls).  Failures only lose the head start. */
void attach_warm_start(void);
void attach_warm_stop(void);

/* Attach prog to the USDT probe provider:name of the target.  On failure
 * print one line naming the probe and the reason; return -errno. */
int attach_usdt(struct bpf_program *prog, const struct target *t,
		const char *provider, const char *name, struct bpf_link **link);

/* Attach prog to the entry (retprobe false) or return of function func in
 * the target's binary.  Same error handling as attach_usdt(). */
int attach_uprobe(struct bpf_program *prog, const struct target *t,
		  const char *func, bool retprobe, struct bpf_link **link);

/* The byte offset of field in the record of tracepoint event
 * ("group/name"), from its tracefs format, or, when tracefs is not
 * readable, of member in the kernel's struct sname from the kernel's BTF
 * (parsing it costs tens of ms, so the format comes first).  >= 0, or
 * one line and -errno. */
long tracepoint_field_offset(const char *event, const char *field,
			     const char *sname, const char *member);

/* --- pair tools (pair_state.h) -------------------------------------- */

/* pair_state.bpf.h's rodata, found on the running kernel. */
struct pair_exit_offsets {
	__u32 group_dead_off;	/* group_dead in the raw tracepoint's args */
	__u32 task_signal_off;	/* else task_struct.signal, */
	__u32 signal_live_off;	/* and signal_struct.live */
};

/*
 * How pair_state.bpf.h tells a process's last thread at
 * sched_process_exit on this kernel: the tracepoint's group_dead argument
 * when it has one (its tracefs format says, or, when tracefs is not
 * readable, the kernel's BTF), else the task offsets from the BTF.
 * 0, or one line and -errno.
 */
int pair_exit_detect(struct pair_exit_offsets *o);

/* Into a pair tool's skeleton's rodata, the offsets o that
 * pair_state.bpf.h reads a process's last thread at sched_process_exit
 * with. */
#define PAIR_EXIT_RODATA(rodata, o) do {				\
	(rodata)->pair_group_dead_off = (o)->group_dead_off;		\
	(rodata)->pair_task_signal_off = (o)->task_signal_off;		\
	(rodata)->pair_signal_live_off = (o)->signal_live_off;		\
} while (0)

/* Attach a tool's sched_process_exit program, a raw tracepoint (no
 * tracefs needed): 0, or one line and -errno. */
int pair_exit_attach(struct bpf_program *prog, struct bpf_link **link);

#endif
