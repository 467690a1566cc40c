// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_drain.c: reading the maps: DRAINED_HASHes (histograms, usdtcount
 * -S's strings) swapped and drained, and the pair tools' counts of lost
 * STARTs.
 * (declared in tool_drain.h; libbpf/README.md lists the rooms and
 * which may call which).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "probekit_common.spec.h"
#include "tool_drain.h"
#include "tool_options.h"


/*
 * The wait of drained_hash_take() and of a tool's own double buffer
 * (usdtcount's counts): membarrier(MEMBARRIER_CMD_GLOBAL) returns
 * after an RCU grace period (kernel/sched/membarrier.c), and the BPF
 * programs of uprobes and tracepoints run inside rcu_read_lock(): every
 * program that looked up the old hash has returned by then.  A kernel
 * with nohz_full CPUs refuses it (-EINVAL); then the tool waits a time far
 * beyond a program's microseconds, which is not a proof, and says so once.
 * (With one CPU online the kernel skips the grace period: a program
 * preempted inside its hit on a preemptible-RCU kernel is not waited
 * for there.)
 */
void probes_quiesce(void)
{
	static bool warned;

	if (!syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0))
		return;
	if (!warned) {
		tool_err("membarrier(MEMBARRIER_CMD_GLOBAL) failed (%s; nohz_full "
			 "CPUs?): waiting %d ms at each interval's end instead, "
			 "so a hit still running then could be lost uncounted",
			 strerror(errno), DRAINED_HASH_WAIT_MS);
		warned = true;
	}
	usleep(DRAINED_HASH_WAIT_MS * 1000);
}

/* The DRAINED_HASHes of this tool (one, so far, per tool), and which of
 * each one's two hashes the programs add into.  Kept here, not read back
 * from the array of maps: turning the map id it returns into an fd needs
 * CAP_SYS_ADMIN, which a tool running with CAP_BPF and CAP_PERFMON
 * lacks. */
#define DRAINED_HASHES_MAX 4
static struct drained_hash {
	struct bpf_map *outer;
	struct bpf_map *h[2];
	int cur;
} drained_hashes[DRAINED_HASHES_MAX];


/*
 * Setting slot 0 of an array of maps waits an RCU grace period after the
 * store (the kernel's maybe_wait_bpf_programs()), 10-15 ms or more on a
 * busy machine.  libbpf would set it at load (.values), before the
 * tool's first attach, which waits a grace period of its own.  Instead
 * drained_hash_init(), before load, creates the three maps itself (the
 * skeleton's definitions; bpf_map__reuse_fd() hands them to libbpf) and
 * a thread sets the slot while the verifier runs.  drained_hash_arm(),
 * after load and before the first attach, returns once a lookup sees the
 * slot set, so no probe can fire into an empty slot (hist_get() would
 * count the hit as dropped); drained_hash_ready() joins the thread before
 * the readiness line, and an atexit() handler joins it on every other way
 * out.  The thread works on its own copies of the fds, so the tool may
 * close the skeleton's at any time.  Where the maps cannot be made here
 * (a kernel or a privilege this code does not know), libbpf makes them
 * at load as before, and drained_hash_arm() sets the slot itself.
 */
static struct drained_hash_setter {
	pthread_t thread;
	int outer, inner, err;
	bool started, preset;
	volatile bool done;
} setters[DRAINED_HASHES_MAX];

static void *drained_hash_set(void *arg)
{
	struct drained_hash_setter *s = arg;
	__u32 zero = 0;

	if (bpf_map_update_elem(s->outer, &zero, &s->inner, BPF_ANY))
		s->err = -errno;
	close(s->outer);
	close(s->inner);
	__atomic_store_n(&s->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void drained_hash_join(void)
{
	for (int i = 0; i < DRAINED_HASHES_MAX; i++)
		if (setters[i].started) {
			pthread_join(setters[i].thread, NULL);
			setters[i].started = false;
		}
}

/* A map like m (the skeleton's definition), inner_fd its inner map's
 * template for an array of maps: its fd, or -errno. */
static int drained_hash_create(const struct bpf_map *m, int inner_fd)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = bpf_map__map_flags(m),
		    .inner_map_fd = inner_fd >= 0 ? inner_fd : 0);
	char name[BPF_OBJ_NAME_LEN];
	int fd;

	snprintf(name, sizeof(name), "%s", bpf_map__name(m));
	fd = bpf_map_create(bpf_map__type(m), name, bpf_map__key_size(m),
			    bpf_map__value_size(m), bpf_map__max_entries(m), &o);
	return fd < 0 ? -errno : fd;
}

/* Create d's maps, hand them to libbpf, and start setting slot 0 (the
 * comment above): 0, or -errno, libbpf left to make at load what it was
 * not handed. */
static int drained_hash_preset(struct drained_hash *d,
			       struct drained_hash_setter *s)
{
	static bool at_exit;
	int fd[3] = { -1, -1, -1 }, err = 0;

	fd[0] = drained_hash_create(d->h[0], -1);
	fd[1] = fd[0] < 0 ? fd[0] : drained_hash_create(d->h[1], -1);
	fd[2] = fd[1] < 0 ? fd[1] : drained_hash_create(d->outer, fd[0]);
	for (int i = 0; i < 3 && !err; i++)
		if (fd[i] < 0)
			err = fd[i];
	if (!err)
		err = bpf_map__reuse_fd(d->h[0], fd[0]) ? -errno : 0;
	if (!err)
		err = bpf_map__reuse_fd(d->h[1], fd[1]) ? -errno : 0;
	if (!err)
		err = bpf_map__reuse_fd(d->outer, fd[2]) ? -errno : 0;
	if (err) {
		/* A reused fd stays the map's; libbpf would not make it. */
		for (int i = 0; i < 3; i++)
			if (fd[i] >= 0)
				close(fd[i]);
		return err;
	}
	*s = (struct drained_hash_setter){ .outer = fd[2], .inner = fd[0],
					   .preset = true };
	close(fd[1]);
	if (!at_exit && !atexit(drained_hash_join))
		at_exit = true;
	if (!at_exit || pthread_create(&s->thread, NULL, drained_hash_set, s))
		drained_hash_set(s);	/* no thread: here, and wait here */
	else
		s->started = true;
	return 0;
}

int drained_hash_init(struct bpf_map *outer, struct bpf_map *a,
		      struct bpf_map *b, __u32 max_entries)
{
	int err;

	for (int i = 0; i < DRAINED_HASHES_MAX; i++) {
		struct drained_hash *d = &drained_hashes[i];

		if (d->outer && d->outer != outer)
			continue;
		err = bpf_map__set_max_entries(a, max_entries);
		if (!err)
			err = bpf_map__set_max_entries(b, max_entries);
		if (err)
			return err;
		*d = (struct drained_hash){ outer, { a, b }, 0 };
		if (!setters[i].preset)
			drained_hash_preset(d, &setters[i]);
		return 0;
	}
	return -E2BIG;
}

int drained_hash_arm(void)
{
	for (int i = 0; i < DRAINED_HASHES_MAX; i++) {
		struct drained_hash *d = &drained_hashes[i];
		struct drained_hash_setter *s = &setters[i];
		__u32 zero = 0, id;
		int err = 0;

		if (!d->outer)
			continue;
		if (!s->preset) {
			int inner = bpf_map__fd(d->h[d->cur]);

			if (bpf_map_update_elem(bpf_map__fd(d->outer), &zero,
						&inner, BPF_ANY))
				err = -errno;
		} else {
			/* The store comes before the wait: once a lookup
			 * finds the slot set, every probe attached from now
			 * on sees it. */
			while (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) &&
			       bpf_map_lookup_elem(bpf_map__fd(d->outer), &zero,
						   &id))
				sched_yield();
			if (__atomic_load_n(&s->done, __ATOMIC_ACQUIRE))
				err = s->err;
		}
		if (err) {
			tool_err("cannot point map %s at its first hash: %s",
				 bpf_map__name(d->outer), strerror(-err));
			return err;
		}
	}
	return 0;
}

void drained_hash_ready(void)
{
	drained_hash_join();
}

static struct drained_hash *drained_hash_of(const struct bpf_map *outer)
{
	for (int i = 0; i < DRAINED_HASHES_MAX; i++)
		if (drained_hashes[i].outer == outer)
			return &drained_hashes[i];
	return NULL;
}

int drained_hash_take(const struct bpf_map *map, size_t vsz, void **keysp,
		      void **valsp)
{
	struct drained_hash *d = drained_hash_of(map);
	int outer = bpf_map__fd(map), cur, spare, err = 0;
	__u32 zero = 0;
	char *keys = NULL, *vals = NULL;
	void *prev = NULL;
	size_t n = 0, ksz, max;

	if (!d)
		return -ENOENT;	/* no drained_hash_init() */
	cur = bpf_map__fd(d->h[d->cur]);
	spare = bpf_map__fd(d->h[!d->cur]);
	ksz = bpf_map__key_size(d->h[d->cur]);
	max = bpf_map__max_entries(d->h[d->cur]);
	/* The first set of the slot is over before any swap (the loop joined
	 * its thread before the readiness line; this keeps it so for any
	 * other caller), so the two updates cannot cross. */
	drained_hash_join();
	/* Swap: the hits from now on go into the spare hash, which the last
	 * call emptied. */
	if (bpf_map_update_elem(outer, &zero, &spare, BPF_ANY))
		return -errno;
	d->cur = !d->cur;
	probes_quiesce();
	/* Nothing writes cur any more. */
	keys = calloc(max ? max : 1, ksz);
	if (!keys)
		return -ENOMEM;
	/* Take the keys first: deleting while walking would restart the
	 * walk. */
	while (n < max && !bpf_map_get_next_key(cur, prev, keys + n * ksz)) {
		prev = keys + n * ksz;
		n++;
	}
	vals = calloc(n ? n : 1, vsz);
	if (!vals) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		void *k = keys + i * ksz;

		if (bpf_map_lookup_elem(cur, k, vals + i * vsz) ||
		    /* Emptied for its turn as the spare. */
		    bpf_map_delete_elem(cur, k)) {
			err = -errno;
			goto out;
		}
	}
out:
	if (err) {
		free(keys);
		free(vals);
		return err;
	}
	*keysp = keys;
	*valsp = vals;
	return (int)n;
}

int hist_map_drain(const struct bpf_map *map, void **keys,
		   struct hist **hists)
{
	return drained_hash_take(map, sizeof(**hists), keys, (void **)hists);
}

int hist_entries_drain(const struct bpf_map *map, void **keys,
		       struct hist **hists, struct hist_entry **e)
{
	int n = hist_map_drain(map, keys, hists);

	if (n < 0)
		return n;
	/* One entry at least: an empty drain still has its prototype, the
	 * header the empty result is printed under (output_emit()). */
	*e = calloc(n ? n : 1, sizeof(**e));
	if (!*e) {
		free(*keys);
		free(*hists);
		return -ENOMEM;
	}
	return n;
}

int hist_entries_done(struct hist_entry *e, int n, void *keys,
		      struct hist *hists, const struct hist_entry *proto,
		      struct hist_entry **out)
{
	hist_sort(e, n);
	free(keys);
	free(hists);
	*out = e;
	if (!n)
		e[0] = *proto;
	return n ? n : 1;
}

int collect_by_name(const struct bpf_map *map, const char *key_name,
		    const struct hist_entry *proto, struct hist_entry **out)
{
	struct drained_hash *d = drained_hash_of(map);
	size_t ksz;
	struct hist_entry *e;
	struct hist *hists;
	char *keys;
	int n;

	if (!d)
		return -ENOENT;	/* no drained_hash_init() */
	ksz = bpf_map__key_size(d->h[0]);
	n = hist_entries_drain(map, (void **)&keys, &hists, &e);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		e[i] = *proto;
		e[i].nkeys = 1;
		e[i].key_names[0] = key_name;
		snprintf(e[i].key_vals[0], sizeof(e[i].key_vals[0]), "%.*s",
			 (int)ksz, keys + i * ksz);
		e[i].hist = hists[i];
	}
	return hist_entries_done(e, n, keys, hists, proto, out);
}

/* The totals of pair_counts, summed over the CPUs; -errno. */
static int pair_totals(const struct bpf_map *map,
		       unsigned long long out[PAIR_NCOUNTS])
{
	int ncpus = libbpf_num_possible_cpus(), err = 0;
	unsigned long long *v;

	if (ncpus <= 0)
		return ncpus ? ncpus : -EINVAL;
	v = calloc(ncpus, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (__u32 k = 0; !err && k < PAIR_NCOUNTS; k++) {
		out[k] = 0;
		err = bpf_map__lookup_elem(map, &k, sizeof(k), v,
					   ncpus * sizeof(*v), 0);
		for (int i = 0; !err && i < ncpus; i++)
			out[k] += v[i];
	}
	free(v);
	return err < 0 ? err : -err;
}

/* What a tool lost, by kind: toolspec.LOSSES, whose first two are
 * enum pair_count's (pair_state.h declares them from enum spec_loss). */
static const struct {
	const char *key, *what;
} losses[SPEC_NLOSSES] = { SPEC_LOSSES };

/* loss_report() of the kinds kinds[0..nkinds), n[i] of kinds[i]. */
static void losses_report(const struct output *o, const char *noun,
			  const enum spec_loss *kinds,
			  const unsigned long long *n, int nkinds)
{
	if (o->json)
		printf(", \"%s\": {", noun);
	for (int i = 0; i < nkinds; i++) {
		if (o->json)
			printf("%s\"%s\": %llu", i ? ", " : "",
			       losses[kinds[i]].key, n[i]);
		else if (n[i])
			printf("%llu %s %s\n", n[i], noun, losses[kinds[i]].what);
	}
	if (o->json)
		putchar('}');
}

void loss_report(const struct output *o, const char *noun,
		 const unsigned long long *n, int nkinds)
{
	static const enum spec_loss kinds[PAIR_NCOUNTS] = {
		SPEC_LOSS_DROPPED, SPEC_LOSS_RECLAIMED,
	};

	losses_report(o, noun, kinds, n,
		      nkinds < PAIR_NCOUNTS ? nkinds : PAIR_NCOUNTS);
}

/* *n's value, taken as it stands (0 when n is NULL), so that a value
 * dropped meanwhile is said next time, not lost. */
static unsigned long long take(__u64 *n)
{
	return n ? __atomic_exchange_n(n, 0, __ATOMIC_SEQ_CST) : 0;
}

/* What io__batch's name table merges (blktgt_io.bpf.h's
 * hist_bdevs_merged: bdevs_cut, bdevs_other), unless no hit passed them
 * yet: hist_report()'s last lines. */
static void merges_report(const struct output *o, const __s64 *m)
{
	__s64 cut = __atomic_load_n(&m[0], __ATOMIC_RELAXED);
	__s64 other = __atomic_load_n(&m[1], __ATOMIC_RELAXED);
	char n[24], bound[24];

	if (cut < 0 || other < 0)
		return;
	if (o->json) {
		printf(", \"bdevs_merged\": {\"name_cut\": %lld, "
		       "\"table_full\": %lld}", (long long)cut, (long long)other);
		return;
	}
	if (cut) {
		snprintf(n, sizeof(n), "%lld", (long long)cut);
		snprintf(bound, sizeof(bound), "%d", BDEV_NAME_LEN - 1);
		printf(MSG_BDEVS_NAME_CUT "\n", n, bound);
	}
	if (other) {
		snprintf(n, sizeof(n), "%lld", (long long)other);
		snprintf(bound, sizeof(bound), "%d", BDEV_INDEX_MAX - 1);
		printf(MSG_BDEVS_OTHER "\n", n, bound);
	}
}

void hist_report(const struct output *o, const struct common_args *a)
{
	static const enum spec_loss kinds[] = {
		SPEC_LOSS_DROPPED, SPEC_LOSS_BUSY, SPEC_LOSS_UNREADABLE,
	};
	static const enum spec_loss batch_kinds[] = { SPEC_LOSS_BAD_COUNT };
	unsigned long long n[] = {
		take(a->hist_dropped), take(a->hist_busy),
		take(a->hist_unreadable),
	};
	unsigned long long bad = take(a->hist_bad_count);

	losses_report(o, a->hist_noun, kinds, n,
		      a->hist_busy ? (int)(sizeof(n) / sizeof(n[0])) : 1);
	if (a->hist_busy)
		losses_report(o, SPEC_BATCH_NOUN, batch_kinds, &bad, 1);
	if (a->hist_bdevs_merged)
		merges_report(o, a->hist_bdevs_merged);
}

void pair_report(struct output *o, void *ctx)
{
	struct pair_report *r = ctx;
	unsigned long long total[PAIR_NCOUNTS], n[PAIR_NCOUNTS];
	int err = pair_totals(r->counts, total);

	if (err) {
		tool_err("cannot read the counts of lost STARTs: %s",
			 strerror(-err));
		memcpy(total, r->seen, sizeof(total));
	}
	for (int k = 0; k < PAIR_NCOUNTS; k++) {
		n[k] = total[k] - r->seen[k];
		r->seen[k] = total[k];
	}
	loss_report(o, "starts", n, PAIR_NCOUNTS);
}
