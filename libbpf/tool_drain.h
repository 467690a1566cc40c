// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_drain.h: reading what the programs counted, exactly, and saying
 * what they lost (tool_drain.c).
 */
#ifndef PROBEKIT_TOOL_DRAIN_H
#define PROBEKIT_TOOL_DRAIN_H

#include <stddef.h>
#include <linux/types.h>

#include "histogram.h"
#include "pair_state.h"
#include "tool_options.h"

struct bpf_map;

/* Return once every BPF program run that began before the call has
 * returned, so that a buffer the programs no longer choose can be read
 * whole (one RCU grace period; tool_drain.c says how, and what happens
 * where the kernel refuses it). */
void probes_quiesce(void);
/*
 * The hits of one interval from map, a DRAINED_HASH (histogram.bpf.h):
 * swap its two hashes, wait until no program can still write the old
 * one, then read and empty it.  Exact: a hit at the interval's end counts
 * in this interval or the next, never in neither.  On success returns
 * how many entries, with their keys (the hash's key_size bytes each) in
 * *keys and their values (vsz bytes each) in *vals (the caller frees
 * both); -errno on failure.
 */
int drained_hash_take(const struct bpf_map *map, size_t vsz, void **keys,
		      void **vals);
/* Before load: size both hashes of a DRAINED_HASH to max_entries,
 * register them for drained_hash_take(), and create the maps so that a
 * thread sets the slot while the verifier runs (tool_drain.c says why;
 * where they cannot be created here, libbpf creates them at load); 0 or
 * -errno.
 * DRAINED_HASH_INIT(skel->maps, name, n) for DRAINED_HASH(name, ...). */
int drained_hash_init(struct bpf_map *outer, struct bpf_map *a,
		      struct bpf_map *b, __u32 max_entries);
#define DRAINED_HASH_INIT(maps, name, n)				\
	drained_hash_init((maps).name, (maps).name##_a, (maps).name##_b, (n))
/* After load, before attaching: return once each DRAINED_HASH's slot 0
 * is set (set here if libbpf made the maps); 0, or -errno once one line
 * has said what failed: the only place a failed set is seen, since a
 * slot a lookup finds set was set by a store that succeeded.
 * drained_hash_ready(), before the readiness line (run_loop_print()
 * calls it), joins the threads. */
int drained_hash_arm(void);
void drained_hash_ready(void);
/* drained_hash_take() for a hash whose values are struct hist. */
int hist_map_drain(const struct bpf_map *map, void **keys,
		   struct hist **hists);
/* hist_map_drain() into keys and hists, with the entries for them
 * allocated (one at least, for an empty result's header): the number of
 * keys, or -errno.  hist_entries_done() sorts the n filled entries, frees
 * keys and hists, hands the entries out, and returns how many to print
 * (proto alone when n is 0). */
int hist_entries_drain(const struct bpf_map *map, void **keys,
		       struct hist **hists, struct hist_entry **e);
int hist_entries_done(struct hist_entry *e, int n, void *keys,
		      struct hist *hists, const struct hist_entry *proto,
		      struct hist_entry **out);

/*
 * For maps keyed by one NUL-terminated name of key_len bytes (a bdev, an
 * RPC method): read and clear them into sorted entries, copies of proto
 * with the key "key_name = NAME", or proto alone when the map is empty
 * (output_emit()).  Returns how many (*out to be freed) or -errno.
 */
int collect_by_name(const struct bpf_map *map, const char *key_name,
		    const struct hist_entry *proto, struct hist_entry **out);

/*
 * The STARTs lost since the last report, as each interval's output ends
 * (output.trailer; run_loop() installs it when a->pair_counts is set):
 * in text "N starts dropped (table full)" and "N starts reclaimed
 * (thread or process exited)", each only when N > 0; in JSON, always,
 * '"starts": {"dropped": N, "reclaimed": M}'.  bcc/probekit_bcc_drain.py's
 * PairReport prints the same.
 */
struct pair_report {
	const struct bpf_map *counts;
	unsigned long long seen[PAIR_NCOUNTS];	/* totals reported */
};
void pair_report(struct output *o, void *report);

/*
 * What a tool lost in one interval, said as its output ends, for the
 * first nkinds counts n[] (indexed by enum pair_count): in text
 * "N NOUN dropped (table full)" and "N NOUN reclaimed (thread or process
 * exited)", each only when N > 0; in JSON, always, ', "NOUN":
 * {"dropped": N[, "reclaimed": M]}'.  pair_report() says it of "starts",
 * usdtcount -S of "strings"; bcc/probekit_bcc_drain.py's loss_report() the same.
 */
void loss_report(const struct output *o, const char *noun,
		 const unsigned long long *n, int nkinds);

/*
 * The values a histogram tool's map had no room for since the last
 * report, taken from *a->hist_dropped (histogram.bpf.h's hist_dropped)
 * as each interval's output ends: loss_report() of a->hist_noun, "N I/Os
 * dropped (table full)".  With a->hist_busy (blktgt_io.bpf.h's), also
 * what io__batch hits could not read (toolspec.LOSSES): "N I/Os
 * dropped (batch buffer held by a preempted run)", "N I/Os dropped
 * (unreadable batch)" and "N batches dropped (count unreadable or out of
 * range)", in JSON ', "I/Os": {"dropped": N, "busy": M, "unreadable": K},
 * "batches": {"bad_count": B}', every key always.  run_loop() says it
 * when a->hist_dropped is set, after the histograms are read, so a value
 * dropped meanwhile is not lost.  With a->hist_bdevs_merged, once a hit
 * has passed them, also what io__batch's name table merges, as the last
 * hit said: MSG_BDEVS_NAME_CUT and MSG_BDEVS_OTHER, each when not 0, in
 * JSON ', "bdevs_merged": {"name_cut": N, "table_full": M}'.
 */
void hist_report(const struct output *o, const struct common_args *a);

#endif
