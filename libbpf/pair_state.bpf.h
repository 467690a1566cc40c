// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * pair_state.bpf.h: the in-flight table of a tool that pairs a START with
 * its DONE, kept honest (pair_state.h says what is counted and why).
 *
 * A tool includes this after probekit.bpf.h and:
 *   - inserts a START with pair_start(&table, &key, &value), which counts
 *     a START the table has no room for;
 *   - defines SEC("raw_tp/sched_process_exit") calling
 *     pair_on_exit(ctx, &table, thread_key), thread_key the key the
 *     exiting thread's START would have, or NULL when the table is keyed
 *     by something else (an argument, a request id);
 *   - in user space, fills pair_group_dead_off (or the task offsets) with
 *     pair_exit_detect() and attaches that program before the uprobes
 *     (tool_attach.h).
 * Its keys start with struct pair_key_head: the tgid, then the tid (or 0).
 *
 * Why sched_process_exit: it fires in the exiting thread (so the current
 * tgid and tid are the dead thread's) once per thread, the last one of a
 * process with group_dead set.  A thread-keyed entry goes with its
 * thread, which also keeps a recycled tid from pairing a dead thread's
 * START with a new thread's DONE; an entry keyed otherwise goes with its
 * process, since a request may finish on another thread.  A raw
 * tracepoint: it needs no tracefs, which is mode 0700 (a user with
 * CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN alone, cannot read it), and
 * no kernel BTF at load time, as tp_btf would (probekit.bpf.h says what
 * that costs).
 */
#ifndef PROBEKIT_PAIR_STATE_BPF_H
#define PROBEKIT_PAIR_STATE_BPF_H

#include "pair_state.h"

/*
 * How to tell that the exiting thread is its process's last, set by user
 * space (pair_exit_detect()): the offset of group_dead in the raw
 * tracepoint's arguments (args[1]) when the kernel passes it (Linux 6.16
 * on), else the offsets of task_struct.signal and signal_struct.live,
 * whose count the kernel has dropped to 0 by then.
 */
const volatile __u32 pair_group_dead_off = 0;
const volatile __u32 pair_task_signal_off = 0;
const volatile __u32 pair_signal_live_off = 0;

/* Counts since load, per CPU, indexed by enum pair_count. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PAIR_NCOUNTS);
	__type(key, __u32);
	__type(value, __u64);
} pair_counts SEC(".maps");

/* The processes that have inserted a START: an exit of any other
 * process is one lookup here and nothing more. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PAIR_TGIDS_MAX);
	__type(key, __u32);
	__type(value, __u8);
} pair_tgids SEC(".maps");

static __always_inline void pair_count(__u32 what)
{
	__u64 *n = bpf_map_lookup_elem(&pair_counts, &what);

	/* Per CPU, but not one writer at a time: a uprobe's program can be
	 * preempted by another on its CPU (io_batch.bpf.h says when), and
	 * an increment split by that would lose one of the two counts. */
	if (n)
		__sync_fetch_and_add(n, 1);
}

/*
 * Insert a START (key starts with struct pair_key_head) into table:
 * 0, or the update's error.  Any refusal drops the START and counts it:
 * a full table or one process more than pair_tgids holds (-E2BIG
 * preallocated, -ENOMEM otherwise), but also -EBUSY, a bucket locked by
 * a program this CPU interrupted, since the START is as lost either way
 * (and a process left unmarked would never have its STARTs reclaimed).
 */
static __always_inline long pair_start(void *table, const void *key,
				       const void *value)
{
	__u32 tgid = ((const struct pair_key_head *)key)->tgid;
	__u8 one = 1;
	long err;

	if (!bpf_map_lookup_elem(&pair_tgids, &tgid)) {
		err = bpf_map_update_elem(&pair_tgids, &tgid, &one, BPF_ANY);
		if (err) {
			pair_count(PAIR_DROPPED);
			return err;
		}
	}
	err = bpf_map_update_elem(table, key, value, BPF_ANY);
	if (err)
		pair_count(PAIR_DROPPED);
	return err;
}

/* Whether the thread exiting now is the last of its process. */
static __always_inline bool pair_group_dead(void *ctx)
{
	void *signal = 0;
	__u64 dead = 0;
	int live = 1;

	/* Read, not dereferenced: a ctx access past the arguments a
	 * kernel without group_dead passes would fail the attach. */
	if (pair_group_dead_off) {
		bpf_probe_read_kernel(&dead, sizeof(dead),
				      ctx + pair_group_dead_off);
		return dead != 0;
	}
	bpf_probe_read_kernel(&signal, sizeof(signal),
			      (void *)bpf_get_current_task() +
			      pair_task_signal_off);
	if (!signal)
		return false;
	bpf_probe_read_kernel(&live, sizeof(live),
			      signal + pair_signal_live_off);
	return live == 0;
}

/* bpf_for_each_map_elem()'s callback: delete the entries of one process
 * (deleting the element being visited is allowed in a hash map). */
static long pair_reclaim_one(void *table, const struct pair_key_head *key,
			     void *value, __u32 *tgid)
{
	if (key->tgid == *tgid && !bpf_map_delete_elem(table, key))
		pair_count(PAIR_RECLAIMED);
	return 0;
}

/*
 * At a thread's exit (ctx: the sched_process_exit raw tracepoint's args):
 * delete its entry in table (thread_key, when table is keyed by thread),
 * and when it is its process's last thread, every entry of the process
 * (a walk of the table, only for a process that has inserted a START).
 * Each entry deleted is counted as reclaimed.  Whether it was the last
 * thread of a process with STARTs: then pair_on_exit() forgets the
 * process.  A tool with several tables calls this for each but one, and
 * pair_on_exit() for that one, last.
 */
static __always_inline bool pair_exit_reclaim(void *ctx, void *table,
					      const void *thread_key)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!bpf_map_lookup_elem(&pair_tgids, &tgid))
		return false;
	if (thread_key && !bpf_map_delete_elem(table, thread_key))
		pair_count(PAIR_RECLAIMED);
	if (!pair_group_dead(ctx))
		return false;
	/* With thread keys, each thread has deleted its own on its way. */
	if (!thread_key)
		bpf_for_each_map_elem(table, pair_reclaim_one, &tgid, 0);
	return true;
}

/* pair_exit_reclaim() for a tool's one table (or its last), then, at
 * the process's last thread, forget the process. */
static __always_inline int pair_on_exit(void *ctx, void *table,
					const void *thread_key)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (pair_exit_reclaim(ctx, table, thread_key))
		bpf_map_delete_elem(&pair_tgids, &tgid);
	return 0;
}

#endif
