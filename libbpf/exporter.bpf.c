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
/* probekit_exporter_bdevs_merged: idx is the reason (EXP_MERGE_*). */
HASH_MAP(bdev_merges, struct idx_key, __u64, EXP_MAX_KEYS);

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

/* n hits (records, for I/O) counted dropped in slot.  Atomic although
 * per CPU: a uprobe's program can be preempted on its CPU by another
 * run of it (io_batch.bpf.h). */
static __always_inline void series_drop_n(__u32 slot, __u64 n)
{
	__u64 *d = bpf_map_lookup_elem(&series_drops, &slot);

	if (d)
		__sync_fetch_and_add(d, n);
}

static __always_inline void series_drop(__u32 slot)
{
	series_drop_n(slot, 1);
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
	__u64 d = r->done_ns - r->submit_ns, neg = (__s64)d >> 63;

	PK_OPAQUE(neg);	/* else a compare and a branch (pk_bits.h) */
	return d & ~neg;
}

/* 1 when r's I/O failed (status != 0), else 0; no branch. */
static __always_inline __u32 rec_failed(const struct io_rec *r)
{
	__u32 st = (__u32)r->status, t = st | -st;

	PK_OPAQUE(t);
	return t >> 31;
}

/*
 * A key's part of a batch's walk: its runs, its counts, its sums.
 *
 * A record's buckets are counted in lat_counts and size_counts, this CPU's
 * own arrays, with a plain add; each bucket's count is added to the key's
 * series with one atomic add when the key's walk ends (at the batch's end,
 * or when its slot goes to another key), and so are the sums and the
 * errors.  The runs spare most records even that: a record whose latency
 * is in the latency run's bucket, the values [lat_lo, lat_lo + lat_span),
 * and whose size is in the size run's, costs two subtractions, two
 * compares and increments in registers; a run's count goes to its array
 * when a record leaves it.  A span of 0 extends nothing: that is the state
 * with no run.  The series is looked up once, when the walk ends: no
 * pointer to it is kept between steps (the verifier could not follow one
 * through the map), and a key with no room drops exactly the records
 * counted.
 */
struct key_walk {
	__u64 lat_lo, lat_span, size_lo, size_span;
	__u64 lat_sum, size_sum, errors;
	__u64 lat_used, size_used;	/* bit b: *_counts[b] may be > 0 */
	__u32 rec_key;			/* REC_KEY(); REC_KEY_NONE: none */
	__u32 lat_b, lat_n;		/* the latency run's bucket, records */
	__u32 size_b, size_n;		/* the size run's */
	__u32 n;			/* records */
	__u32 name_of;			/* the bdev index key.bdev names */
	__u32 lat_counts[64];		/* per bucket; 64: indexed by b & 63 */
	__u32 size_counts[64];
	struct io_key key;		/* the series' */
};

/*
 * Where a batch's walk stands between two bpf_loop() steps.  Two keys are
 * walked at once, the current one and the one before, since a batch of a
 * read-write workload alternates between two (its reads' and its
 * writes'); a record of the other goes back to it without ending either.
 *
 * It lives in a per-CPU map, not on the stack, for the verifier's sake: a
 * value loaded from a map is any value to it, where one on the stack is
 * the exact range the last step left, which makes each step's bounds a
 * new state to walk.  Per CPU, it belongs to the run that owns the batch's
 * copy (io_batch_take()).
 */
struct batch_walk {
	struct key_walk k[2];
	__u32 i;			/* the next record */
	__u32 pending;			/* record i needs batch_slow() */
	__u32 cur;			/* k[cur] is the current key */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct batch_walk);
} batch_walks SEC(".maps");

/* A batch: its records, and its walk. */
struct batch_ctx {
	const struct io_rec *recs;	/* the copy, in the scratch map */
	struct batch_walk *w;
	long names;			/* blktgt's bdev names; 0: unread
					 * (read before bpf_loop(): its
					 * callback is walked state by state) */
	__u32 count, pid;
};

/* Move a run's n records to counts[b & 63]: no branch; a run of 0 adds 0
 * (and marks its bucket, which hist_flush_one() skips). */
static __always_inline void run_count(__u32 *counts, __u64 *used, __u32 b,
				      __u32 n)
{
	b &= 63;
	counts[b] += n;
	*used |= 1ULL << b;
}

/* What hist_flush_one() needs: one histogram's counts, and where they go. */
struct hist_flush {
	__u32 *counts;
	__u64 *used;
	struct exp_hist *h;
};

/* Add the lowest bucket *used has to the histogram, and clear it; 1 when
 * none is left. */
static long hist_flush_one(__u64 step, void *arg)
{
	struct hist_flush *f = arg;
	__u64 used = *f->used, low = used & -used;
	__u32 b = (pk_bit_length(low) - 1) & 63, n;

	if (!used)
		return 1;
	*f->used = used & ~low;
	n = f->counts[b];
	f->counts[b] = 0;
	if (n && b < EXP_BUCKETS)
		__sync_fetch_and_add(&f->h->buckets[b], n);
	return 0;
}

/* Add the counts marked in used to h, one bpf_loop() step per bucket
 * used: a loop over every bucket would cost 33 loads, and the verifier a
 * state for each. */
static __always_inline void hist_flush(__u32 *counts, __u64 *used,
				       struct exp_hist *h)
{
	struct hist_flush f = { .counts = counts, .used = used, .h = h };

	bpf_loop(64, hist_flush_one, &f, 0);
}

/* End k's walk: its counts, runs and sums go to its series, or, with no
 * room for the series, its records are counted dropped; k walks no key
 * after. */
static __always_inline void key_end(struct key_walk *k)
{
	struct io_stats *st;
	__u32 n = k->n;

	run_count(k->lat_counts, &k->lat_used, k->lat_b, k->lat_n);
	run_count(k->size_counts, &k->size_used, k->size_b, k->size_n);
	k->lat_n = k->size_n = k->n = 0;
	k->lat_span = k->size_span = 0;
	k->rec_key = REC_KEY_NONE;
	if (!n)
		return;
	st = series(&io_stats, &k->key, &io_zero);
	if (!st) {
		series_drop_n(EXP_DROP_IO, n);
		k->lat_used = k->size_used = 0;
		__builtin_memset(k->lat_counts, 0, sizeof(k->lat_counts));
		__builtin_memset(k->size_counts, 0, sizeof(k->size_counts));
	} else {
		hist_flush(k->lat_counts, &k->lat_used, &st->latency);
		hist_flush(k->size_counts, &k->size_used, &st->size);
		__sync_fetch_and_add(&st->latency.sum, k->lat_sum);
		__sync_fetch_and_add(&st->size.sum, k->size_sum);
		__sync_fetch_and_add(&st->errors, k->errors);
	}
	k->lat_sum = k->size_sum = k->errors = 0;
}

/* Make k walk r's key, reading its bdev's name unless k has it. */
static __always_inline void key_begin(struct batch_ctx *b, struct key_walk *k,
				      const struct io_rec *r)
{
	__u32 bdev = r->bdev;

	if (k->name_of != bdev) {
		__builtin_memset(k->key.bdev, 0, sizeof(k->key.bdev));
		if (b->names)
			bpf_probe_read_user_str(k->key.bdev, sizeof(k->key.bdev),
						(const char *)b->names +
						(__u64)bdev * BDEV_NAME_LEN);
		k->name_of = bdev;
	}
	k->key.pid = b->pid;
	k->key.type = r->type;
	k->rec_key = REC_KEY(r);
}

/* Begin a latency run of lat in k, ending the one of n records there;
 * the new run's values are [*lo, *lo + *span) (k's own, or the batch
 * step's copies in registers). */
static __always_inline void lat_run_begin(struct key_walk *k, __u32 n, __u64 lat,
					  __u64 *lo, __u64 *span)
{
	run_count(k->lat_counts, &k->lat_used, k->lat_b, n);
	k->lat_b = lat_bucket(lat);
	lat_range(k->lat_b, lo, span);
}

/* Count r in k: in its runs, or in new ones. */
static __always_inline void key_add(struct key_walk *k, const struct io_rec *r)
{
	__u64 lat = rec_latency(r);

	if (r->length - k->size_lo >= k->size_span) {
		run_count(k->size_counts, &k->size_used, k->size_b, k->size_n);
		k->size_b = size_bucket(r->length);
		size_range(k->size_b, &k->size_lo, &k->size_span);
		k->size_n = 0;
	}
	k->size_n++;
	if (lat - k->lat_lo >= k->lat_span) {
		lat_run_begin(k, k->lat_n, lat, &k->lat_lo, &k->lat_span);
		k->lat_n = 0;
	}
	k->lat_n++;
	k->n++;
	k->lat_sum += lat;
	k->size_sum += r->length;
	k->errors += rec_failed(r);
}

/*
 * Record r, which the step could not count: of the current key but
 * another size bucket; of the other key walked, which becomes the
 * current; or of neither, when the other key's walk ends and its slot
 * takes r's key.
 */
static __always_inline void batch_slow(struct batch_ctx *b, struct batch_walk *w,
				       const struct io_rec *r)
{
	__u32 rec_key = REC_KEY(r), c = w->cur & 1;
	struct key_walk *k;

	if (r->bdev >= BDEV_INDEX_MAX) {
		series_drop(EXP_DROP_IO);	/* blktgt names none */
		return;
	}
	if (w->k[c].rec_key != rec_key) {
		c ^= 1;
		k = &w->k[c];
		if (k->rec_key != rec_key) {
			key_end(k);
			key_begin(b, k, r);
		}
		w->cur = c;
	}
	key_add(&w->k[c], r);
}

/*
 * Records per bpf_loop() step.  A step reads up to EXP_STEP records while
 * each is of the current key and its size bucket, with the runs in
 * registers.  A record that is not ends the step, and the next step begins
 * with it in batch_slow(): one place in the program for the verifier to
 * walk that, not one per record of a step.
 */
#define EXP_STEP 8
_Static_assert((IO_BATCH_MAX & (IO_BATCH_MAX - 1)) == 0,
	       "batch_step() masks a record index with IO_BATCH_MAX - 1");

static long batch_step(__u64 step, void *arg)
{
	struct batch_ctx *b = arg;
	struct batch_walk *w = b->w;
	struct key_walk *k = &w->k[w->cur & 1];
	__u64 lat_lo, lat_span, size_lo, size_span, lat_sum, size_sum, errors;
	__u32 i, count = b->count, key, lat_n, size_n, n, j;
	const struct io_rec *r;

	i = w->i;
	if (i >= count)
		return 1;
	if (w->pending) {
		w->pending = 0;
		batch_slow(b, w, &b->recs[i & (IO_BATCH_MAX - 1)]);
		w->i = i + 1;
		return 0;
	}
	lat_lo = k->lat_lo;
	lat_span = k->lat_span;
	lat_n = k->lat_n;
	size_lo = k->size_lo;
	size_span = k->size_span;
	size_n = k->size_n;
	n = k->n;
	lat_sum = k->lat_sum;
	size_sum = k->size_sum;
	errors = k->errors;
	key = k->rec_key;
	for (j = 0; j < EXP_STEP; j++, i++) {
		__u64 lat;

		if (i >= count)
			break;
		r = &b->recs[i & (IO_BATCH_MAX - 1)];
		if (REC_KEY(r) != key || r->length - size_lo >= size_span) {
			w->pending = 1;
			break;
		}
		lat = rec_latency(r);
		if (lat - lat_lo < lat_span) {
			lat_n++;
		} else {
			lat_run_begin(k, lat_n, lat, &lat_lo, &lat_span);
			lat_n = 1;
		}
		size_n++;
		n++;
		lat_sum += lat;
		size_sum += r->length;
		errors += rec_failed(r);
	}
	k->lat_lo = lat_lo;
	k->lat_span = lat_span;
	k->lat_n = lat_n;
	k->size_n = size_n;
	k->n = n;
	k->lat_sum = lat_sum;
	k->size_sum = size_sum;
	k->errors = errors;
	w->i = i;
	return 0;
}

/* End the walk of k[i], for i < 2: a bpf_loop() callback, so that the
 * verifier walks key_end() once for both. */
static long key_end_one(__u64 i, void *arg)
{
	struct batch_ctx *b = arg;

	key_end(&b->w->k[i & 1]);
	return 0;
}

_Static_assert(EXP_MERGE_REASONS == IO_BATCH_MERGES &&
	       EXP_MERGE_NAME_CUT == IO_BATCH_MERGE_CUT &&
	       EXP_MERGE_TABLE_FULL == IO_BATCH_MERGE_OTHER,
	       "exporter.h's merge reasons are io_batch.bpf.h's merge counts");

/* The merge counts a hit passed (io_batch.bpf.h's, by EXP_MERGE_*, the
 * same order), each a gauge set to what the last hit of its process (of
 * any, without --pid-label) said; written only when it changes. */
static __always_inline void merges_set(const long *m)
{
	for (__u32 i = 0; i < EXP_MERGE_REASONS; i++) {
		struct idx_key key = { .pid = key_pid(), .idx = i };
		__u64 *v;

		if (m[i] < 0)
			return;		/* not passed: the family stays empty */
		v = series(&bdev_merges, &key, &count_zero);
		if (!v)
			series_drop(EXP_DROP_BDEV_MERGES);
		else if (*v != (__u64)m[i])
			*v = m[i];
	}
}

/* blktgt:io__batch(s32 thread, s32 count, struct io_rec *recs,
 *                  char *bdev_names, u64 flush_ns, u64 bdevs_merged)
 *
 * The batch is copied with one read (io_batch.bpf.h), and its records are
 * counted as struct key_walk says: a record costs what it takes to see
 * that it extends the runs, and the atomic adds are one per bucket used
 * and sum, per key walked.  bpf_loop() rather than a bounded loop: the
 * verifier checks its callback, not every record.  A step that takes no
 * record hands its first to the next, which takes it: so twice the
 * records bound the steps. */
SEC("usdt")
int io_batch(struct pt_regs *ctx)
{
	struct batch_ctx b = {};
	long merges[IO_BATCH_MERGES];
	__u32 zero = 0;

	b.w = bpf_map_lookup_elem(&batch_walks, &zero);
	if (!b.w)
		return 0;
	b.recs = io_batch_take(ctx, &b.count, &b.names, merges);
	merges_set(merges);
	if (!b.recs) {
		/* Unreadable, or this CPU's buffer (and walk) is another
		 * run's, which this one preempted: its records are dropped.
		 * A count of 0 is one unreadable or out of range: the hit
		 * is counted, its records cannot be. */
		if (b.count)
			series_drop_n(EXP_DROP_IO, b.count);
		else
			series_drop(EXP_DROP_IO_BATCHES);
		return 0;
	}
	/* The last batch ended both keys' walks: no counts are left.  A
	 * name read for the last batch may be another bdev's now. */
	b.w->i = b.w->cur = 0;
	b.w->k[0].rec_key = b.w->k[1].rec_key = REC_KEY_NONE;
	b.w->k[0].name_of = b.w->k[1].name_of = BDEV_INDEX_MAX;
	b.w->pending = 1;	/* the first record begins a key */
	b.pid = key_pid();
	bpf_loop(2 * IO_BATCH_MAX, batch_step, &b, 0);
	bpf_loop(2, key_end_one, &b, 0);
	io_batch_release();
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
