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
#include "exporter_buckets.h"
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

/* A record's key among its batch: its bdev index and type in one word. */
#define REC_KEY(r) ((__u32)(r)->bdev | (__u32)(r)->type << 16)
#define REC_KEY_NONE (~0U)

/* A record's latency: done before submit (no clock blktgt reads goes
 * back, but the record is user memory) is 0, as before; no branch. */
static __always_inline __u64 rec_latency(const struct io_rec *r)
{
	__u64 d = r->done_ns - r->submit_ns;

	return d & ~(__u64)((__s64)d >> 63);
}

/* 1 when r's I/O failed (status != 0), else 0; no branch. */
static __always_inline __u32 rec_failed(const struct io_rec *r)
{
	__u32 st = (__u32)r->status;

	return (st | -st) >> 31;
}

/*
 * Where a batch's walk stands between two bpf_loop() steps.
 *
 * A record's latency bucket is counted in lat_counts, this CPU's own
 * array, with a plain add; each bucket's count is added to the key's
 * histogram with one atomic add when the key changes or the batch ends.
 * The latency run spares most records even that: a record whose latency
 * is in the run's bucket, the values [lat_lo, lat_lo + lat_span), costs a
 * subtraction, a compare and an increment in a register, and the run's
 * count goes to lat_counts when a record leaves it.  The size run does
 * the same for sizes, which change far less often: a record outside it
 * ends the step, and its count is added atomically.  The sums and the
 * errors are added once per key.  A span of 0 extends nothing: that is
 * the state with no run.
 *
 * It lives in a per-CPU map, not on the stack, for the verifier's sake: a
 * value loaded from a map is any value to it, where one on the stack is
 * the exact range the last step left, which makes each step's bounds a
 * new state to walk.  Per CPU: no other program runs on this CPU while
 * one does, as with the batch's copy.
 */
struct batch_walk {
	__u64 lat_lo, lat_span, size_lo, size_span;
	__u64 lat_sum, size_sum, errors;
	__u32 i;			/* the next record */
	__u32 pending;			/* record i needs batch_new_key() */
	__u32 key_of;			/* st's record key, REC_KEY() */
	__u32 name_of;			/* the bdev index key.bdev names */
	__u32 lat_b, lat_n;		/* the latency run's bucket, records */
	__u32 size_b, size_n;		/* the size run's */
	__u64 lat_used;			/* bit b: lat_counts[b] may be > 0 */
	__u32 lat_counts[64];		/* per bucket; 64: indexed by b & 63 */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct batch_walk);
} batch_walks SEC(".maps");

/* A batch: its records, and what its walk keeps on the stack. */
struct batch_ctx {
	const struct io_rec *recs;	/* the copy, in the scratch map */
	struct batch_walk *w;
	struct io_stats *st;		/* NULL: no room (or none yet) */
	long names;			/* blktgt's bdev names; 0: unread */
	__u32 count;
	struct io_key key;
};

/* Add a run's n records to bucket b of h. */
static __always_inline void run_add(struct exp_hist *h, __u32 b, __u32 n)
{
	__u64 i = b;

	/* One register for the check and the index: clang would else
	 * check a copy, and the verifier see the index unbounded. */
	__asm__ volatile("" : "+r"(i));
	if (n && i < EXP_BUCKETS)
		__sync_fetch_and_add(&h->buckets[i], n);
}

/* Move the latency run's count to lat_counts: no branch, a run of 0
 * adds 0 (and marks its bucket, which lat_flush_one() skips). */
static __always_inline void lat_count(struct batch_walk *w)
{
	__u32 b = w->lat_b & 63;

	w->lat_counts[b] += w->lat_n;
	w->lat_used |= 1ULL << b;
	w->lat_n = 0;
}

/* What lat_flush_one() needs. */
struct lat_flush {
	struct batch_walk *w;
	struct io_stats *st;		/* NULL: the counts are dropped */
};

/* Add the lowest latency bucket lat_used has to the key's histogram, and
 * clear it; 1 when none is left. */
static long lat_flush_one(__u64 k, void *arg)
{
	struct lat_flush *f = arg;
	struct batch_walk *w = f->w;
	__u64 used = w->lat_used, low = used & -used;
	__u32 b = (pk_bit_length(low) - 1) & 63, n;

	if (!used)
		return 1;
	w->lat_used = used & ~low;
	n = w->lat_counts[b];
	w->lat_counts[b] = 0;
	if (f->st)
		run_add(&f->st->latency, b, n);
	return 0;
}

/* Add the key's latency counts and runs to its stats (st, unless NULL),
 * and its sums; nothing is left counted.  The buckets counted are the bits
 * of lat_used, each added by a step of its own bpf_loop(): a loop over
 * every bucket would cost each key change 33 loads, and the verifier a
 * state for each bucket. */
static __always_inline void batch_key_end(struct batch_ctx *b,
					  struct batch_walk *w)
{
	struct lat_flush f = { .w = w, .st = b->st };
	struct io_stats *st = b->st;

	lat_count(w);
	w->lat_span = 0;
	bpf_loop(64, lat_flush_one, &f, 0);
	if (st) {
		run_add(&st->size, w->size_b, w->size_n);
		__sync_fetch_and_add(&st->latency.sum, w->lat_sum);
		__sync_fetch_and_add(&st->size.sum, w->size_sum);
		__sync_fetch_and_add(&st->errors, w->errors);
	}
	w->size_n = 0;
	w->size_span = 0;
	w->lat_sum = w->size_sum = w->errors = 0;
}

/* Start a latency run of one record, of latency lat, ending the one
 * there. */
static __always_inline void lat_new_run(struct batch_walk *w, __u64 lat)
{
	__u32 bucket = lat_bucket(lat);

	lat_count(w);
	w->lat_b = bucket;
	lat_range(bucket, &w->lat_lo, &w->lat_span);
	w->lat_n = 1;
}

/*
 * Record r, whose key or size bucket is not the runs' (or whose key has
 * no stats yet): when its key changed or had no room, the key's stats,
 * looked up again, and every run begins anew with r; when only its size
 * left the size run, that run ends, and r begins the next.
 */
static __always_inline void batch_new_key(struct batch_ctx *b,
					  struct batch_walk *w,
					  const struct io_rec *r)
{
	__u32 key = REC_KEY(r);
	__u64 lat = rec_latency(r);

	if (r->bdev >= BDEV_INDEX_MAX) {
		series_drop(EXP_DROP_IO);	/* blktgt names none */
		return;
	}
	if (!b->st || key != w->key_of) {
		batch_key_end(b, w);
		/* A batch is mostly one bdev's: its name is read once. */
		if (r->bdev != w->name_of) {
			__builtin_memset(b->key.bdev, 0, sizeof(b->key.bdev));
			if (b->names)
				bpf_probe_read_user_str(b->key.bdev, sizeof(b->key.bdev),
							(const char *)b->names +
							(__u64)r->bdev * BDEV_NAME_LEN);
			w->name_of = r->bdev;
		}
		b->key.type = r->type;
		w->key_of = key;
		b->st = series(&io_stats, &b->key, &io_zero);
		if (!b->st) {
			/* No room: each record of the key is counted, and
			 * looks again (another CPU may add the key
			 * meanwhile). */
			series_drop(EXP_DROP_IO);
			return;
		}
	} else {
		run_add(&b->st->size, w->size_b, w->size_n);
	}
	w->size_b = size_bucket(r->length);
	size_range(w->size_b, &w->size_lo, &w->size_span);
	w->size_n = 1;
	lat_new_run(w, lat);
	w->lat_sum += lat;
	w->size_sum += r->length;
	w->errors += rec_failed(r);
}

/*
 * Records per bpf_loop() step.  A step reads up to EXP_STEP records while
 * each is of the runs' key and size bucket, with the runs in registers.
 * A record that is not ends the step, and the next step begins with it in
 * batch_new_key(): one place in the program for the verifier to walk
 * that, not one per record of a step.
 */
#define EXP_STEP 8
_Static_assert((IO_BATCH_MAX & (IO_BATCH_MAX - 1)) == 0,
	       "batch_step() masks a record index with IO_BATCH_MAX - 1");

static long batch_step(__u64 step, void *arg)
{
	struct batch_ctx *b = arg;
	struct batch_walk *w = b->w;
	__u64 lat_lo, lat_span, size_lo, size_span, lat_sum, size_sum, errors;
	__u32 i, count = b->count, key_of, lat_n, size_n, j;
	const struct io_rec *r;

	i = w->i;
	if (i >= count)
		return 1;
	if (w->pending || !b->st) {
		w->pending = 0;
		batch_new_key(b, w, &b->recs[i & (IO_BATCH_MAX - 1)]);
		w->i = i + 1;
		return 0;
	}
	lat_lo = w->lat_lo;
	lat_span = w->lat_span;
	lat_n = w->lat_n;
	size_lo = w->size_lo;
	size_span = w->size_span;
	size_n = w->size_n;
	lat_sum = w->lat_sum;
	size_sum = w->size_sum;
	errors = w->errors;
	key_of = w->key_of;
	for (j = 0; j < EXP_STEP; j++, i++) {
		__u64 lat;

		if (i >= count)
			break;
		r = &b->recs[i & (IO_BATCH_MAX - 1)];
		if (REC_KEY(r) != key_of || r->length - size_lo >= size_span) {
			w->pending = 1;
			break;
		}
		lat = rec_latency(r);
		if (lat - lat_lo < lat_span) {
			lat_n++;
		} else {
			w->lat_n = lat_n;
			lat_new_run(w, lat);
			lat_lo = w->lat_lo;
			lat_span = w->lat_span;
			lat_n = 1;
		}
		size_n++;
		lat_sum += lat;
		size_sum += r->length;
		errors += rec_failed(r);
	}
	w->lat_n = lat_n;
	w->size_n = size_n;
	w->lat_sum = lat_sum;
	w->size_sum = size_sum;
	w->errors = errors;
	w->i = i;
	return 0;
}

/* blktgt:io__batch(s32 thread, s32 count, struct io_rec *recs,
 *                  char *bdev_names)
 *
 * The batch is copied with one read (io_batch.bpf.h), and its records are
 * counted as struct batch_walk says: a record costs what it takes to see
 * that it extends the runs, and the atomic adds are one per latency
 * bucket used, size run and sum, per key.  bpf_loop() rather than a
 * bounded loop: the verifier checks its callback, not every record.  A
 * step that takes no record hands its first to the next, which takes it:
 * so twice the records bound the steps. */
SEC("usdt")
int io_batch(struct pt_regs *ctx)
{
	struct batch_ctx b = {};
	__u32 zero = 0;

	b.w = bpf_map_lookup_elem(&batch_walks, &zero);
	if (!b.w)
		return 0;
	b.recs = io_batch_copy(ctx, &b.count);
	if (!b.recs)
		return 0;
	/* lat_counts is all 0: each key's end empties it. */
	b.w->i = b.w->pending = 0;
	b.w->key_of = REC_KEY_NONE;
	b.w->name_of = BDEV_INDEX_MAX;
	b.key.pid = key_pid();
	/* Read here, not in the callback: the argument's spec walked once
	 * outside bpf_loop() is far less for the verifier (its callback is
	 * checked state by state). */
	if (bpf_usdt_arg(ctx, 3, &b.names))
		b.names = 0;
	bpf_loop(2 * IO_BATCH_MAX, batch_step, &b, 0);
	batch_key_end(&b, b.w);
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
