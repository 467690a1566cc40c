// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_attach.c: loading and attaching a tool's BPF programs (USDT, uprobe,
 * sched_process_exit), each failure one line that names the fix.
 * (declared in tool_attach.h; libbpf/README.md lists the rooms and
 * which may call which).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* memfd_create() */
#endif
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "tool_attach.h"
#include "tool_options.h"
#include "tool_priv.h"
#include "tool_target.h"


/*
 * The first uprobe a tool attaches waits an RCU grace period, 8-25 ms
 * here: registering a uprobe takes the kernel's dup_mmap_sem (uprobes.c,
 * register_for_each_vma()) for writing, a per-CPU rwsem whose writer
 * waits a grace period (rcu_sync_enter()) unless another writer took it
 * less than about a grace period before.  So a thread registers
 * throwaway uprobes from before load until the tool's last attach:
 * the first pays the grace period while the verifier runs, and one every
 * ATTACH_WARM_PERIOD_MS keeps the lock's fast path open for the tool's
 * own attaches.  The throwaway uprobes sit in a memfd that no process
 * maps and are filtered to this process, so no breakpoint is written
 * anywhere (strace shows each one after the first at ~0.05 ms).  They
 * are closed after the readiness line, by the thread (each close waits
 * its own grace periods, 50-100 ms), which an atexit() handler joins.
 * Any failure only leaves the tool to pay the wait itself, as before.
 */
#define ATTACH_WARM_PERIOD_MS 5
#define ATTACH_WARM_MAX 16

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool started, stop;
	int pmu, memfd;
} warm = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, .memfd = -1 };

static void *warm_run(void *arg)
{
	int fds[ATTACH_WARM_MAX], n = 0;
	char path[64];
	struct perf_event_attr a = {
		.size = sizeof(a), .type = warm.pmu,
		.config1 = (uintptr_t)path, .config2 = 0 };
	struct timespec until;

	(void)arg;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", warm.memfd);
	pthread_mutex_lock(&warm.lock);
	while (!warm.stop && n < ATTACH_WARM_MAX) {
		pthread_mutex_unlock(&warm.lock);
		fds[n] = syscall(__NR_perf_event_open, &a, getpid(), -1, -1,
				 PERF_FLAG_FD_CLOEXEC);
		pthread_mutex_lock(&warm.lock);
		if (fds[n] < 0)
			break;
		n++;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += ATTACH_WARM_PERIOD_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!warm.stop &&
		       pthread_cond_timedwait(&warm.cond, &warm.lock, &until) !=
		       ETIMEDOUT)
			;
	}
	/* Closing one takes the lock too, then waits long: not before the
	 * tool's own attaches are done. */
	while (n && !warm.stop)
		pthread_cond_wait(&warm.cond, &warm.lock);
	pthread_mutex_unlock(&warm.lock);
	while (n)
		close(fds[--n]);
	close(warm.memfd);
	return NULL;
}

static void attach_warm_join(void)
{
	attach_warm_stop();
	if (warm.started)
		pthread_join(warm.thread, NULL);
	warm.started = false;
}

void attach_warm_start(void)
{
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "re");
	bool typed = f && fscanf(f, "%d", &warm.pmu) == 1;

	if (f)
		fclose(f);
	if (!typed || warm.started || atexit(attach_warm_join))
		return;
	warm.memfd = memfd_create("probekit-warm", MFD_CLOEXEC);
	if (warm.memfd < 0)
		return;
	/* A uprobe's offset must lie inside the file. */
	if (ftruncate(warm.memfd, getpagesize()) ||
	    pthread_create(&warm.thread, NULL, warm_run, NULL)) {
		close(warm.memfd);
		warm.memfd = -1;
		return;
	}
	warm.started = true;
}

void attach_warm_stop(void)
{
	pthread_mutex_lock(&warm.lock);
	warm.stop = true;
	pthread_cond_signal(&warm.cond);
	pthread_mutex_unlock(&warm.lock);
}

bool kernel_has_bpf_loop(void)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_loop,
				       NULL) != 0;
}

void say_batch_fallback(void)
{
	tool_err("kernel lacks bpf_loop() (5.17): reading as --per-io does");
}

/*
 * The helpers a tool's programs call that a kernel still in use may lack,
 * and the release that brought each.  Without one the verifier refuses
 * the program with a log a user cannot act on (before 5.13, a callback's
 * function even makes it "number of funcs in func_info doesn't match").
 */
static const struct { int id; const char *name; } recent_helpers[] = {
	{ BPF_FUNC_for_each_map_elem, "bpf_for_each_map_elem() (Linux 5.13)" },
	{ BPF_FUNC_get_attach_cookie, "bpf_get_attach_cookie() (Linux 5.15)" },
	{ BPF_FUNC_loop, "bpf_loop() (Linux 5.17)" },
};

/* Into out, the recent helpers that a program obj loads calls and this
 * kernel refuses (asked of the kernel: a probe load each); 0 when none. */
static size_t helpers_lacking(struct bpf_object *obj, char *out,
			      size_t len)
{
	enum { N = sizeof(recent_helpers) / sizeof(recent_helpers[0]) };
	bool used[N] = { 0 };
	enum bpf_prog_type type[N];	/* of a program that calls it */
	struct bpf_program *prog;
	size_t i, j, n = 0, at = 0;

	bpf_object__for_each_program(prog, obj) {
		const struct bpf_insn *in = bpf_program__insns(prog);

		/* libbpf's own USDT programs read the cookie only where
		 * the kernel has it (LINUX_HAS_BPF_COOKIE): dead code else. */
		bool usdt = !strncmp(bpf_program__section_name(prog), "usdt", 4);

		if (!bpf_program__autoload(prog) || !in)
			continue;
		for (i = 0; i < bpf_program__insn_cnt(prog); i++) {
			if (in[i].code != (BPF_JMP | BPF_CALL) || in[i].src_reg)
				continue;
			for (j = 0; j < N; j++) {
				if (in[i].imm != recent_helpers[j].id ||
				    (in[i].imm == BPF_FUNC_get_attach_cookie &&
				     usdt))
					continue;
				used[j] = true;
				type[j] = bpf_program__type(prog);
			}
		}
	}
	for (j = 0; j < N; j++) {
		if (!used[j] || libbpf_probe_bpf_helper(type[j],
				recent_helpers[j].id, NULL) != 0)
			continue;
		at += snprintf(out + at, at < len ? len - at : 0, "%s%s",
			       n++ ? " and " : "", recent_helpers[j].name);
	}
	return n;
}

void report_object_load_error(const struct target *t,
			      struct bpf_object *obj, int err)
{
	char lacks[200];

	if (err != -EPERM && helpers_lacking(obj, lacks, sizeof(lacks))) {
		tool_err("cannot load BPF programs: this kernel lacks %s; "
			 "the BCC tools (-bcc) and the bt/ scripts do without",
			 lacks);
		return;
	}
	report_load_error(t, err);
}

void report_load_error(const struct target *t, int err)
{
	if (err == -EPERM && report_denied("cannot load BPF programs",
					   t->pid))
		return;
	if (err == -EPERM)
		tool_err("cannot load BPF programs: %s, though this process has "
			 "CAP_SYS_ADMIN (kernel lockdown, or a security module?)",
			 strerror(-err));
	else if (err == -EACCES)
		tool_err("cannot load BPF programs: the kernel's verifier "
			 "refused one (run with -v for its log)");
	else
		tool_err("cannot load BPF programs: %s (run with -v for "
			 "libbpf's log)", strerror(-err));
}

int attach_usdt(struct bpf_program *prog, const struct target *t,
		const char *provider, const char *name, struct bpf_link **link)
{
	char what[160];
	int err;

	*link = bpf_program__attach_usdt(prog, t->pid, t->exe, provider, name,
					 NULL);
	if (*link)
		return 0;
	err = -errno;
	snprintf(what, sizeof(what), "cannot attach to USDT probe %s:%s of "
		 "PID %d", provider, name, (int)t->pid);
	if (err == -ENOENT)
		tool_err("PID %d (%s) has no USDT probe %s:%s; is it blktgt "
			 "built with USDT=1?", (int)t->pid, t->exe, provider, name);
	else if ((err != -EACCES && err != -EPERM) ||
		 !report_denied(what, t->pid))
		tool_err("%s: %s", what, strerror(-err));
	return err;
}

int attach_uprobe(struct bpf_program *prog, const struct target *t,
		  const char *func, bool retprobe, struct bpf_link **link)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = func,
		    .retprobe = retprobe);
	char what[320];
	int err;

	*link = bpf_program__attach_uprobe_opts(prog, t->pid, t->exe, 0, &opts);
	if (*link)
		return 0;
	err = -errno;
	snprintf(what, sizeof(what), "cannot attach a %s to %.255s of PID %d",
		 retprobe ? "uretprobe" : "uprobe", func, (int)t->pid);
	if (err == -ENOENT)
		tool_err("no function %s in %s", func, t->exe);
	else if ((err != -EACCES && err != -EPERM) ||
		 !report_denied(what, t->pid))
		tool_err("%s: %s", what, strerror(-err));
	return err;
}

/* Where tracefs may be mounted: its own mount point, or under debugfs. */
static const char *const tracefs_roots[] = {
	"/sys/kernel/tracing",
	"/sys/kernel/debug/tracing",
};

/* Whether the tracefs format of event ("group/name") declares field: 1
 * with *off its byte offset in the event's record, 0 when it has no
 * such field, or -errno when no format could be read (tracefs is mode
 * 0700: only root reads it, whatever capabilities a user has). */
static int tracefs_field(const char *event, const char *field, long *off)
{
	char path[256], line[256], name[64], arr[64];
	int err = -ENOENT;

	snprintf(name, sizeof(name), " %s;", field);
	snprintf(arr, sizeof(arr), " %s[", field);
	for (size_t i = 0; i < sizeof(tracefs_roots) / sizeof(*tracefs_roots);
	     i++) {
		FILE *f;
		int found = 0;
		char *o;

		snprintf(path, sizeof(path), "%s/events/%s/format",
			 tracefs_roots[i], event);
		f = fopen(path, "r");
		if (!f) {
			if (err == -ENOENT)
				err = -errno;
			continue;
		}
		while (!found && fgets(line, sizeof(line), f))
			if ((strstr(line, name) || strstr(line, arr)) &&
			    (o = strstr(line, "offset:")) &&
			    sscanf(o, "offset:%ld;", off) == 1)
				found = 1;
		fclose(f);
		return found;
	}
	return err;
}

/* Whether the tracepoint's format has a group_dead field: 1 or 0, or
 * -errno when no format could be read. */
static int group_dead_in_format(void)
{
	long off;

	return tracefs_field("sched/sched_process_exit", "group_dead", &off);
}

/* Whether the raw tracepoint passes group_dead, from btf: its prototype
 * btf_trace_sched_process_exit is (void *, struct task_struct *[, bool
 * group_dead]).  1 or 0, or -ENOENT when btf has no such prototype. */
static int group_dead_in_btf(const struct btf *btf)
{
	int id = btf__find_by_name_kind(btf, "btf_trace_sched_process_exit",
					BTF_KIND_TYPEDEF);
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, id) : NULL;

	if (t)
		t = btf__type_by_id(btf, t->type);	/* the pointer */
	if (t && btf_is_ptr(t))
		t = btf__type_by_id(btf, t->type);
	if (!t || !btf_is_func_proto(t))
		return -ENOENT;
	return btf_vlen(t) >= 3;
}

/* The byte offset of member name of struct sname in btf; -1 if none. */
static long btf_member_offset(const struct btf *btf, const char *sname,
			      const char *name)
{
	int id = btf__find_by_name_kind(btf, sname, BTF_KIND_STRUCT);
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, id) : NULL;
	const struct btf_member *m = t ? btf_members(t) : NULL;

	for (int i = 0; t && i < btf_vlen(t); i++, m++)
		if (!strcmp(btf__name_by_offset(btf, m->name_off), name))
			return btf_member_bit_offset(t, i) / 8;
	return -1;
}

long tracepoint_field_offset(const char *event, const char *field,
			     const char *sname, const char *member)
{
	long off = -1;
	int has = tracefs_field(event, field, &off), fmt_err = has;
	struct btf *btf;

	if (has > 0)
		return off;
	if (!has) {
		tool_err("tracepoint %s has no field %s", event, field);
		return -ENOENT;
	}
	/* tracefs is not readable by this user: the kernel's BTF, readable
	 * by every user, says where the member is (the attach, which reads
	 * tracefs too, then says what is missing). */
	btf = btf__load_vmlinux_btf();
	if (!btf) {
		tool_err("cannot find field %s of tracepoint %s: cannot read "
			 "its format (%s), and no kernel BTF (%s)", field,
			 event, strerror(-fmt_err), strerror(errno));
		return -ENOENT;
	}
	off = btf_member_offset(btf, sname, member);
	btf__free(btf);
	if (off < 0) {
		tool_err("cannot find field %s of tracepoint %s: cannot read "
			 "its format (%s), and the kernel's BTF has no %s.%s",
			 field, event, strerror(-fmt_err), sname, member);
		return -ENOENT;
	}
	return off;
}

int pair_exit_detect(struct pair_exit_offsets *o)
{
	int has = group_dead_in_format(), fmt_err = has;
	struct btf *btf = NULL;
	long sig, live;

	memset(o, 0, sizeof(*o));
	/* The kernel's BTF, readable by every user, answers when tracefs
	 * cannot; it is parsed only then, or for a kernel without
	 * group_dead: the tools otherwise start without reading it. */
	if (has < 0 || !has) {
		btf = btf__load_vmlinux_btf();
		if (!btf) {
			if (has < 0)
				tool_err("cannot tell a process's last thread at "
					 "its exit: cannot read the "
					 "sched_process_exit tracepoint's format "
					 "(%s), and no kernel BTF (%s)",
					 strerror(-fmt_err), strerror(errno));
			else
				tool_err("cannot tell a process's last thread at "
					 "its exit: no group_dead in "
					 "sched_process_exit, and no kernel BTF "
					 "(%s)", strerror(errno));
			return -ENOENT;
		}
	}
	if (has < 0)
		has = group_dead_in_btf(btf);
	if (has > 0) {
		/* The raw tracepoint's ctx is its arguments, a u64 each:
		 * group_dead is args[1]. */
		o->group_dead_off = sizeof(__u64);
		btf__free(btf);
		return 0;
	}
	/* A kernel before group_dead (Linux 6.16): its BTF says where a
	 * task's count of live threads is. */
	sig = btf_member_offset(btf, "task_struct", "signal");
	live = btf_member_offset(btf, "signal_struct", "live");
	btf__free(btf);
	if (sig < 0 || live < 0) {
		tool_err("cannot tell a process's last thread at its exit: the "
			 "kernel's BTF has no task_struct.signal or "
			 "signal_struct.live");
		return -ENOENT;
	}
	o->task_signal_off = sig;
	o->signal_live_off = live;
	return 0;
}

int pair_exit_attach(struct bpf_program *prog, struct bpf_link **link)
{
	int err;

	*link = bpf_program__attach_raw_tracepoint(prog, "sched_process_exit");
	if (*link)
		return 0;
	err = -errno;
	if ((err != -EACCES && err != -EPERM) ||
	    !report_denied("cannot attach to sched_process_exit", -1))
		tool_err("cannot attach to the raw tracepoint "
			 "sched_process_exit: %s", strerror(-err));
	return err;
}
