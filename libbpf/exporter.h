// SPDX-License-Identifier: BSD-2-Clause
/*
 * exporter.h: what probekit-exporter's BPF programs and its user space
 * share: map keys, the histogram and its buckets, and the attach cookie
 * of the generic probes.
 *
 * Everything is cumulative: BPF only adds, user space only reads, and
 * Prometheus computes rates.  A key's pid is the process's tgid with
 * --pid-label, else 0, so by default one series covers every process.
 */
#ifndef PROBEKIT_EXPORTER_H
#define PROBEKIT_EXPORTER_H

#ifndef __bpf__
#include <linux/types.h>
#endif
#include "pair_state.h"

/*
 * Histogram buckets are powers of two: latency bucket i has the upper
 * bound 2^(EXP_LAT_MIN_EXP + i) seconds, size bucket i 2^i bytes; the
 * last one, EXP_BUCKETS - 1, is +Inf.  For an integer count of
 * nanoseconds v, v <= 2^k s exactly when v <= floor(2^k * 1e9), which
 * for k < 0 is 1e9 >> -k: so the BPF side compares integers and still
 * honours the le label user space prints.
 */
#define EXP_LAT_MIN_EXP  (-26)	/* 2^-26 s, 14.9 ns */
#define EXP_LAT_FINITE   32	/* up to 2^5 s, 32 s */
#define EXP_SIZE_FINITE  31	/* 1 byte .. 2^30 bytes */
#define EXP_BUCKETS      33	/* the larger finite count, plus +Inf */

/* The count is the sum of the buckets: user space adds them up, so a
 * scrape's +Inf bucket always equals its _count. */
struct exp_hist {
	__u64 buckets[EXP_BUCKETS];	/* per bucket, not cumulative */
	__u64 sum;			/* nanoseconds or bytes */
};

#define EXP_NAME_LEN     32	/* bdev names: io_batch.h's BDEV_NAME_LEN */
#define EXP_METHOD_LEN   64	/* RPC methods */
#define EXP_CMD_LEN      16	/* NBD command names */

#define EXP_MAX_KEYS     4096	/* series per map: --max-series */
#define EXP_MAX_KEYS_LIMIT (1 << 20)

struct io_key {
	char bdev[EXP_NAME_LEN];
	__u32 pid;
	__u32 type;		/* enum bdev_io_type */
};

/* All of one key's I/O metrics in one value: one map lookup per record. */
struct io_stats {
	struct exp_hist latency;
	struct exp_hist size;
	__u64 errors;
};

struct rpc_key {
	char method[EXP_METHOD_LEN];
	__u32 pid;
};

struct cmd_key {
	char cmd[EXP_CMD_LEN];
	__u32 pid;
};

/* The NBD connection counters. */
enum { EXP_NBD_CONNECT, EXP_NBD_DISCONNECT };

/* A generic series: a --pair's histogram, or one probe of a --count, or
 * an NBD connection counter (idx is then EXP_NBD_*). */
struct idx_key {
	__u32 pid;
	__u32 idx;
};

/* A START in flight, of a --pair or of blktgt's RPCs: the process and,
 * for a pair keyed by thread, the thread (pair_state.h's head, which the
 * exit of either reclaims); the pair (EXP_IDX_RPC for an RPC); and the
 * argument's value or the RPC id (0 for a thread-keyed pair).  One table
 * for all: one bound, --max-inflight, and one reclaim. */
struct start_key {
	struct pair_key_head h;
	__u32 idx;
	__u32 pad;
	__u64 key;
};

/* probekit_exporter_bdevs_merged's reasons: an idx_key's idx, in the
 * order of io_batch.bpf.h's merge counts (include/io_batch.h's
 * bdevs_cut, bdevs_other). */
enum { EXP_MERGE_NAME_CUT, EXP_MERGE_TABLE_FULL, EXP_MERGE_REASONS };
#define EXP_MERGE_NAMES "name_cut", "table_full"

#define EXP_MAX_PAIRS    16
#define EXP_MAX_COUNTS   256	/* probes matched by all --count patterns */
#define EXP_IDX_RPC      0xffff	/* start_key.idx of an RPC */

/*
 * The series_drops slots: hits not recorded because their map had no room
 * for a new series (--max-series).  One per blktgt map, one per --pair
 * and one per --count probe; and EXP_DROP_IO_BATCHES, no family's:
 * io__batch hits whose record count was unreadable or out of range
 * (probekit_exporter_io_batches_dropped).
 */
enum {
	EXP_DROP_IO,		/* io_stats: all three I/O families */
	EXP_DROP_RPC,
	EXP_DROP_NBD_CMDS,
	EXP_DROP_NBD_CONNS,
	EXP_DROP_IO_BATCHES,	/* hits, how many records unknown */
	EXP_DROP_BDEV_MERGES,	/* bdev_merges: io__batch hits */
	EXP_DROP_PAIR0,		/* + the pair's index */
	EXP_DROP_COUNT0 = EXP_DROP_PAIR0 + EXP_MAX_PAIRS, /* + the probe's */
	EXP_DROP_SLOTS = EXP_DROP_COUNT0 + EXP_MAX_COUNTS,
};

/*
 * The attach cookie of a generic probe location: what the hit means and,
 * for a pair keyed by an argument, where that argument lives.
 *   bits  0..15  idx: the pair, or the counted probe
 *   bits 16..17  role: EXP_ROLE_*
 *   bits 18..19  key: EXP_KEY_*
 *   bits 20..23  the argument's size in bytes (1, 2, 4, 8)
 *   bit  24      the argument is signed
 *   bits 25..31  its register: offset in struct pt_regs / 8
 *   bits 32..63  the displacement of a register dereference (s32)
 */
enum { EXP_ROLE_COUNT, EXP_ROLE_START, EXP_ROLE_DONE };
enum { EXP_KEY_TID, EXP_KEY_REG, EXP_KEY_DEREF };

#define EXP_COOKIE_IDX(c)    ((__u32)((c) & 0xffff))
#define EXP_COOKIE_ROLE(c)   ((__u32)(((c) >> 16) & 3))
#define EXP_COOKIE_KEY(c)    ((__u32)(((c) >> 18) & 3))
#define EXP_COOKIE_SIZE(c)   ((__u32)(((c) >> 20) & 15))
#define EXP_COOKIE_SIGNED(c) ((__u32)(((c) >> 24) & 1))
#define EXP_COOKIE_REGOFF(c) ((__u32)(((c) >> 25) & 127) * 8)
#define EXP_COOKIE_DISP(c)   ((__s32)((c) >> 32))

#define EXP_COOKIE(idx, role, key, size, sgn, regoff, disp) \
	((__u64)(idx) | (__u64)(role) << 16 | (__u64)(key) << 18 | \
	 (__u64)(size) << 20 | (__u64)(sgn) << 24 | \
	 (__u64)((regoff) / 8) << 25 | (__u64)(__u32)(disp) << 32)

#ifndef __bpf__
#include <stdbool.h>
#include <stddef.h>

#define EXP_METRIC_LEN   64	/* a --pair or --count NAME */
#define EXP_PROBE_LEN    258	/* "provider:name", USDT_NAME_MAX each */
#define EXP_MAX_SPECS    16	/* --count options */

/* What a scrape reads: the maps' fds (-1 when not loaded) and the names
 * the maps' indexes stand for. */
struct exp_state {
	bool per_pid;
	bool blktgt;
	bool nbd_cmds_on;	/* --nbd-commands */
	int io_stats, rpc_latency, nbd_commands,
	    nbd_conns, pair_latency, counts, bdev_merges;
	int pair_counts, series_drops;	/* per-CPU arrays */
	int max_series;			/* each map's bound */
	int npairs;
	char pair_names[EXP_MAX_PAIRS][EXP_METRIC_LEN];
	int nspecs;
	char count_names[EXP_MAX_SPECS][EXP_METRIC_LEN];
	int ncounts;
	struct {
		int spec;		/* index in count_names */
		char probe[EXP_PROBE_LEN];
	} count_probes[EXP_MAX_COUNTS];
	/* probekit_exporter_target_up: 1 while -p's process lives, or while
	 * a process maps -b's file (one it followed); asked at each scrape,
	 * on the HTTP thread. */
	bool (*target_up)(void);
	/* The HTTP side's connections now, and those it refused or closed
	 * by reason (EXP_HTTP_*): http_stats(), asked at each scrape. */
	void (*http_stats)(unsigned long long *open, unsigned long long *closed);
};

/* Why the HTTP side refused or closed a connection: the reason label of
 * probekit_exporter_http_closed_total. */
enum {
	EXP_HTTP_ADDRESS_LIMIT,	/* refused: its address held its cap */
	EXP_HTTP_SERVER_LIMIT,	/* refused: the table full of addresses
				 * holding no more than its own */
	EXP_HTTP_DISPLACED,	/* closed for a newcomer from an address
				 * holding fewer */
	EXP_HTTP_DEADLINE,	/* closed: past its deadline */
	EXP_HTTP_NCLOSED,
};
#define EXP_HTTP_CLOSED_NAMES \
	"address_limit", "server_limit", "displaced", "deadline"
#endif

#endif
