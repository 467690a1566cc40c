// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * exporter.bpf.c: the counters and histograms probekit-exporter serves.
 *
 * blktgt's metrics come from its own probes, which libbpf's USDT support
 * reads: I/O from io__batch (one hit per up to IO_BATCH_MAX completed
 * I/Os, so the exporter can stay attached at full rate), RPC latency from
 * rpc__request/rpc__done keyed by RPC id, NBD commands and connections.
 *
 * --pair and --count probes of any binary hit one program, usdt_hit,
 * attached as a plain uprobe at each note location; its attach cookie
 * (exporter.h) says which pair or probe a hit belongs to and where a
 * pair's key argument lives, so no operand libbpf cannot parse stops an
 * attach.
 *
 * The series maps only grow: user space reads them and never clears
 * them.  A hit whose map has no room for its new series is counted in
 * series_drops.  STARTs (RPCs' and pairs') wait in one table,
 * starts, until their DONE; a START it has no room for is counted,
 * and the STARTs of a thread or process that exits are reclaimed and
 * counted (pair_state.bpf.h).
 */
#include "probekit.bpf.h"
#include <bpf/usdt.bpf.h>

#include "exporter.h"
#include "io_batch.bpf.h"
#include "pair_state.bpf.h"

/* Options, set by user space before load. */
const volatile bool per_pid = false;	/* --pid-label */
const volatile __u32 tid_pairs = 0;	/* bit i: --pair i is keyed by tid */

#define HASH_MAP(name, k, v, n) \
	struct { \
		__uint(type, BPF_MAP_TYPE_HASH); \
		__uint(max_entries, n); \
		__type(key, k); \
		__type(value, v); \
	} name SEC(".maps")

/* Sizes are the defaults: --max-series and --max-inflight set them. */
HASH_MAP(io_stats, struct io_key, struct io_stats, EXP_MAX_KEYS);
HASH_MAP(rpc_latency, struct rpc_key, struct exp_hist, EXP_MAX_KEYS);
HASH_MAP(nbd_commands, struct cmd_key, __u64, EXP_MAX_KEYS);
HASH_MAP(nbd_conns, struct idx_key, __u64, EXP_MAX_KEYS);
HASH_MAP(pair_latency, struct idx_key, struct exp_hist, EXP_MAX_KEYS);
HASH_MAP(starts, struct start_key, __u64, PAIR_INFLIGHT_DEFAULT);
HASH_MAP(counts, struct idx_key, __u64, EXP_MAX_KEYS);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EXP_DROP_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} series_drops SEC(".maps");

static const struct exp_hist hist_zero;
static const struct io_stats io_zero;
static const __u64 count_zero;

static __always_inline __u32 key_pid(void)
{
	return per_pid ? bpf_get_current_pid_tgid() >> 32 : 0;
}

/* The latency bucket of ns: the first i whose bound, floor(2^k * 1e9)
 * with k = EXP_LAT_MIN_EXP + i, is at least ns (exporter.h says why that
 * is exact).  A binary search over the monotonic bounds, without a
 * branch: bound i is (1e9 << i) >> 26 (exact: 1e9 * 2^31 < 2^64), and
 * "bound < ns" is the top bit of ns | (bound - ns) (a bound is below
 * 2^63).  Each branch of the search would be a path the verifier walks
 * to the end of the caller, with a bucket it must keep apart: 64 paths
 * through io_batch's callback, 17331 instructions processed instead of
 * 2458, 14-20 of the exporter's 21 ms of verifier CPU.  Six compares,
 * as before. */
_Static_assert(EXP_LAT_FINITE == 32, "lat_bucket() searches 32 bounds");
#define LAT_BOUND(i) ((1000000000ULL << (i)) >> -EXP_LAT_MIN_EXP)
#define LAT_BELOW(i, ns) ((__u32)(((ns) | (LAT_BOUND(i) - (ns))) >> 63))
static __always_inline __u32 lat_bucket(__u64 ns)
{
	__u32 lo = 0;
	int s;

	/* Bounds 0 .. lo-1 are below ns: 32 bounds, steps 16 .. 1. */
	for (s = 4; s >= 0; s--)
		lo += LAT_BELOW(lo + (1u << s) - 1, ns) << s;
	lo += LAT_BELOW(lo, ns);	/* all 32 below: +Inf */
	return lo < EXP_BUCKETS ? lo : EXP_BUCKETS - 1;
}

/* The size bucket of bytes: the smallest i with bytes <= 2^i, or +Inf. */
static __always_inline __u32 size_bucket(__u64 bytes)
{
	__u32 len = pk_bit_length(bytes ? bytes - 1 : 0);

	return len < EXP_SIZE_FINITE ? len : EXP_BUCKETS - 1;
}

static __always_inline void series_drop(__u32 slot)
{
	__u64 *n = bpf_map_lookup_elem(&series_drops, &slot);

	if (n)
		(*n)++;		/* per CPU: no other writer */
}

static __always_inline void hist_bump(struct exp_hist *h, __u32 bucket,
				      __u64 v)
{
	if (bucket >= EXP_BUCKETS)
		bucket = EXP_BUCKETS - 1;
	__sync_fetch_and_add(&h->buckets[bucket], 1);
	__sync_fetch_and_add(&h->sum, v);
}

/* The value of key in map, made zero first when new; NULL when the map
 * has no room for a new series (the caller counts the hit dropped). */
static __always_inline void *series(void *map, const void *key,
				    const void *zero)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (!v) {
		bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(map, key);
	}
	return v;
}

static __always_inline void hist_add(void *map, const void *key,
				     __u32 bucket, __u64 v, __u32 drop_slot)
{
	struct exp_hist *h = series(map, key, &hist_zero);

	if (h)
		hist_bump(h, bucket, v);
	else
		series_drop(drop_slot);
}

static __always_inline void count_add(void *map, const void *key,
				      __u32 drop_slot)
{
	__u64 *c = series(map, key, &count_zero);

	if (c)
		__sync_fetch_and_add(c, 1);
	else
		series_drop(drop_slot);
}

/* What the batch loop carries from one record to the next: the stats of
 * the key the last records had, and what they add to its sums, added
 * once when the key changes or the batch ends. */
struct batch_ctx {
	const struct io_rec *recs;	/* the copy, in the scratch map */
	long names;			/* blktgt's bdev names; 0: unread */
	__u32 count;
	__u32 last_bdev, last_type;	/* st's key */
	__u32 name_of;			/* the bdev index key.bdev names */
	struct io_stats *st;
	__u64 lat_sum, size_sum, errors;
	struct io_key key;
};

/* Add what the records since the last key change left in b to its stats. */
static __always_inline void batch_key_end(struct batch_ctx *b)
{
	if (b->st) {
		__sync_fetch_and_add(&b->st->latency.sum, b->lat_sum);
		__sync_fetch_and_add(&b->st->size.sum, b->size_sum);
		__sync_fetch_and_add(&b->st->errors, b->errors);
	}
	b->lat_sum = b->size_sum = b->errors = 0;
}

static long batch_one(__u64 i, void *arg)
{
	struct batch_ctx *b = arg;
	const struct io_rec *r;
	__u64 lat;

	if (i >= IO_BATCH_MAX || i >= b->count)
		return 1;
	r = &b->recs[i];
	if (r->bdev >= BDEV_INDEX_MAX)
		return 0;
	if (!b->st || r->bdev != b->last_bdev || r->type != b->last_type) {
		batch_key_end(b);
		/* A batch is mostly one bdev's: its name is read once. */
		if (r->bdev != b->name_of) {
			__builtin_memset(b->key.bdev, 0, sizeof(b->key.bdev));
			if (b->names)
				bpf_probe_read_user_str(b->key.bdev, sizeof(b->key.bdev),
							(const char *)b->names +
							(__u64)r->bdev * BDEV_NAME_LEN);
			b->name_of = r->bdev;
		}
		b->key.type = r->type;
		b->last_bdev = r->bdev;
		b->last_type = r->type;
		b->st = series(&io_stats, &b->key, &io_zero);
	}
	if (!b->st) {
		/* No room: each record of the key is counted, and looks
		 * again (another CPU may add the key meanwhile). */
		series_drop(EXP_DROP_IO);
		return 0;
	}
	lat = r->done_ns > r->submit_ns ? r->done_ns - r->submit_ns : 0;
	__sync_fetch_and_add(&b->st->latency.buckets[lat_bucket(lat)], 1);
	__sync_fetch_and_add(&b->st->size.buckets[size_bucket(r->length)], 1);
	b->lat_sum += lat;
	b->size_sum += r->length;
	b->errors += r->status != 0;
	return 0;
}

/* blktgt:io__batch(s32 thread, s32 count, struct io_rec *recs,
 *                  char *bdev_names)
 *
 * The batch is copied with one read (io_batch.bpf.h), and the records of
 * one key in a row (a batch is mostly one bdev's, one type's) share one
 * map lookup and one add to each sum and to the errors: a record costs
 * two atomic adds, one per histogram bucket.  bpf_loop() rather than a
 * bounded loop: the verifier checks its callback, not every record. */
SEC("usdt")
int io_batch(struct pt_regs *ctx)
{
	struct batch_ctx b = {
		.last_bdev = BDEV_INDEX_MAX,
		.last_type = ~0U, .name_of = BDEV_INDEX_MAX,
	};

	b.recs = io_batch_copy(ctx, &b.count);
	if (!b.recs)
		return 0;
	b.key.pid = key_pid();
	/* Read here, not in the callback: the argument's spec walked once
	 * outside bpf_loop() is far less for the verifier (its callback is
	 * checked state by state). */
	if (bpf_usdt_arg(ctx, 3, &b.names))
		b.names = 0;
	bpf_loop(IO_BATCH_MAX, batch_one, &b, 0);
	batch_key_end(&b);
	return 0;
}

/* An RPC's START: its process and id; any thread may answer it. */
static __always_inline struct start_key rpc_key_of(__u64 id)
{
	struct start_key k = {
		.h.tgid = bpf_get_current_pid_tgid() >> 32,
		.idx = EXP_IDX_RPC, .key = id,
	};

	return k;
}

/* blktgt:rpc__request(u64 id, char *method) */
SEC("usdt")
int BPF_USDT(rpc_request, __u64 id)
{
	struct start_key k = rpc_key_of(id);
	__u64 ts = bpf_ktime_get_ns();

	pair_start(&starts, &k, &ts);
	return 0;
}

/* blktgt:rpc__done(u64 id, char *method, s32 status) */
SEC("usdt")
int BPF_USDT(rpc_done, __u64 id, const char *method)
{
	struct rpc_key key = {};
	struct start_key k = rpc_key_of(id);
	__u64 *tsp, lat;

	tsp = bpf_map_lookup_elem(&starts, &k);
	if (!tsp)
		return 0;	/* requested before the exporter attached, or
				 * dropped at a full table (counted) */
	lat = bpf_ktime_get_ns() - *tsp;
	bpf_map_delete_elem(&starts, &k);
	bpf_probe_read_user_str(key.method, sizeof(key.method), method);
	key.pid = key_pid();
	hist_add(&rpc_latency, &key, lat_bucket(lat), lat, EXP_DROP_RPC);
	return 0;
}

/* blktgt:nbd__request(u64 conn, u64 handle, u32 cmd, u64 offset, u32 len,
 *                     char *cmd_name, u32 flags) */
SEC("usdt")
int BPF_USDT(nbd_request, __u64 conn, __u64 handle, __u32 cmd, __u64 offset,
	     __u32 len, const char *cmd_name)
{
	struct cmd_key key = {};

	bpf_probe_read_user_str(key.cmd, sizeof(key.cmd), cmd_name);
	key.pid = key_pid();
	count_add(&nbd_commands, &key, EXP_DROP_NBD_CMDS);
	return 0;
}

/* blktgt:nbd__connect(u64 conn, char *peer) */
SEC("usdt")
int BPF_USDT(nbd_connect)
{
	struct idx_key key = { .pid = key_pid(), .idx = EXP_NBD_CONNECT };

	count_add(&nbd_conns, &key, EXP_DROP_NBD_CONNS);
	return 0;
}

/* blktgt:nbd__disconnect(u64 conn, char *peer, u64 requests) */
SEC("usdt")
int BPF_USDT(nbd_disconnect)
{
	struct idx_key key = { .pid = key_pid(), .idx = EXP_NBD_DISCONNECT };

	count_add(&nbd_conns, &key, EXP_DROP_NBD_CONNS);
	return 0;
}

/* The key argument of a pair hit, as the cookie describes it. */
static __always_inline __u64 cookie_arg(struct pt_regs *ctx, __u64 c)
{
	__u32 size = EXP_COOKIE_SIZE(c), off = EXP_COOKIE_REGOFF(c);
	__u64 v = 0;

	if (off > sizeof(struct pt_regs) - sizeof(v))
		return 0;
	bpf_probe_read_kernel(&v, sizeof(v), (void *)ctx + off);
	if (EXP_COOKIE_KEY(c) == EXP_KEY_DEREF) {
		__u64 addr = v + (__s64)EXP_COOKIE_DISP(c);

		v = 0;
		bpf_probe_read_user(&v, size <= 8 ? size : 8, (void *)addr);
	}
	if (size < 8) {
		__u32 shift = 64 - size * 8;

		v <<= shift;
		v = EXP_COOKIE_SIGNED(c) ? (__u64)((__s64)v >> shift) : v >> shift;
	}
	return v;
}

/* Every --pair and --count location. */
SEC("uprobe")
int usdt_hit(struct pt_regs *ctx)
{
	__u64 c = bpf_get_attach_cookie(ctx), pid_tgid, *tsp, lat;
	struct start_key sk = {};
	struct idx_key key = { .pid = key_pid(), .idx = EXP_COOKIE_IDX(c) };

	if (EXP_COOKIE_ROLE(c) == EXP_ROLE_COUNT) {
		count_add(&counts, &key, EXP_DROP_COUNT0 +
			  (key.idx < EXP_MAX_COUNTS ? key.idx : 0));
		return 0;
	}
	pid_tgid = bpf_get_current_pid_tgid();
	sk.idx = key.idx;
	sk.h.tgid = pid_tgid >> 32;
	if (EXP_COOKIE_KEY(c) == EXP_KEY_TID)
		sk.h.tid = (__u32)pid_tgid;
	else
		sk.key = cookie_arg(ctx, c);
	if (EXP_COOKIE_ROLE(c) == EXP_ROLE_START) {
		lat = bpf_ktime_get_ns();
		pair_start(&starts, &sk, &lat);
		return 0;
	}
	tsp = bpf_map_lookup_elem(&starts, &sk);
	if (!tsp)
		return 0;	/* started before the exporter attached, or
				 * dropped at a full table (counted) */
	lat = bpf_ktime_get_ns() - *tsp;
	bpf_map_delete_elem(&starts, &sk);
	hist_add(&pair_latency, &key, lat_bucket(lat), lat, EXP_DROP_PAIR0 +
		 (key.idx < EXP_MAX_PAIRS ? key.idx : 0));
	return 0;
}

/*
 * A thread's exit: its STARTs of the pairs keyed by thread go with it (a
 * thread may have one START in each), then pair_on_exit() forgets its
 * process at the last thread, reclaiming every START the process left:
 * an RPC's, or a pair's keyed by an argument.
 */
SEC("raw_tp/sched_process_exit")
int start_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct start_key k = { .h.tgid = id >> 32, .h.tid = (__u32)id };
	__u32 i;

	if (tid_pairs && bpf_map_lookup_elem(&pair_tgids, &k.h.tgid))
		for (i = 0; i < EXP_MAX_PAIRS; i++) {
			if (!(tid_pairs & (1u << i)))
				continue;
			k.idx = i;
			if (!bpf_map_delete_elem(&starts, &k))
				pair_count(PAIR_RECLAIMED);
		}
	return pair_on_exit(ctx, &starts, NULL);
}

/* bpf_probe_read_user_str() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
