// SPDX-License-Identifier: BSD-2-Clause
/*
 * pair_state.h: what a tool that keeps a START until its DONE shares
 * between its BPF programs (pair_state.bpf.h) and user space
 * (tool_drain.h's pair report): the counts of STARTs lost, and the
 * bounds of the tables that hold them.
 *
 * A START can be lost two ways, and both are counted: the in-flight
 * table was full (dropped: its DONE will find nothing, so the histogram
 * misses a pair), or its thread or process exited first (reclaimed: its
 * DONE can never come, and the entry would otherwise fill the table, or
 * pair with a DONE of a later thread given the same id).
 */
#ifndef PROBEKIT_PAIR_STATE_H
#define PROBEKIT_PAIR_STATE_H

/* The in-flight table's default size (MAX_INFLIGHT), the most
 * --max-inflight takes (PAIR_INFLIGHT_LIMIT: a preallocated hash of 4M
 * entries is some 300 MB of kernel memory), and the processes with STARTs
 * in a table at once (PAIR_TGIDS_MAX: an exit of any other process costs
 * one hash lookup; a START of one more process is dropped, and counted as
 * the table being full): specs/limits.toml, which bcc/ reads too. */
#include "probekit_limits.h"
#define PAIR_INFLIGHT_DEFAULT MAX_INFLIGHT

/* The index of each count in pair_state.bpf.h's pair_counts: the first
 * kinds of loss (toolspec.LOSSES, enum spec_loss), whose words
 * tool_drain.c's loss_report() prints by the same index. */
enum pair_count {
	PAIR_DROPPED = SPEC_LOSS_DROPPED,	/* a START found its table full */
	PAIR_RECLAIMED = SPEC_LOSS_RECLAIMED,	/* a START whose thread or
						 * process exited */
	PAIR_NCOUNTS,
};
_Static_assert(PAIR_DROPPED == 0 && PAIR_RECLAIMED == 1,
	       "toolspec.LOSSES begins with enum pair_count's kinds");

/*
 * The first fields of every in-flight key that pair_state.bpf.h reclaims:
 * the process, then the thread for a thread-keyed table (0 otherwise).
 * A tool's key starts with these and adds what it pairs by.
 */
struct pair_key_head {
	__u32 tgid;
	__u32 tid;
};

#endif
