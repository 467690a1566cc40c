// SPDX-License-Identifier: BSD-2-Clause
/*
 * exporter_render.c: the exporter's maps as a scrape, in the Prometheus
 * text format 0.0.4 or in OpenMetrics 1.0.0.
 *
 * The two differ here only where it matters to a parser: OpenMetrics
 * names a counter's family without its _total suffix and ends with
 * "# EOF".  Series are sorted by their label text, and each le string is
 * made once from its power of two, so a scrape is byte-stable from one to
 * the next apart from the values.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "blktgt_states.h"
#include "exporter.h"
#include "exporter_render.h"

/* enum bdev_io_type's names, from the one list blktgt_states.h keeps. */
#define IO_TYPE_NAME(e, name) [e] = name,
static const char *const io_type_names[] = { IO_TYPE_LIST(IO_TYPE_NAME) };

#define SB_MAX (64u << 20)	/* a scrape larger than this fails: -E2BIG */
#define LABELS_LEN 1024	/* one series' labels, escaped: a probe name of
				 * EXP_PROBE_LEN doubled, and a pid */

struct sbuf {
	char *p;
	size_t len, cap;
	int err;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->err = -EINVAL;
			return;
		}
		if ((size_t)n < room) {
			b->len += n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 65536;
		while (cap - b->len <= (size_t)n)
			cap *= 2;
		if (cap > SB_MAX) {
			b->err = -E2BIG;
			return;
		}
		char *p = realloc(b->p, cap);
		if (!p) {
			b->err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

/*
 * Append name="value" to a label list of size len, with the escapes both
 * formats define (\\, \", \n).  Other control bytes and bytes outside
 * ASCII become '?': a label value must be UTF-8, and a bdev name is
 * whatever bytes a user sent over RPC.
 */
static void label(char *labels, size_t len, const char *name,
		  const char *value)
{
	size_t n = strlen(labels);
	const char *v;

	n += snprintf(labels + n, n < len ? len - n : 0, "%s%s=\"",
		      n ? "," : "", name);
	for (v = value; *v && n + 3 < len; v++) {
		unsigned char c = *v;

		if (c == '\\' || c == '"') {
			labels[n++] = '\\';
			labels[n++] = c;
		} else if (c == '\n') {
			labels[n++] = '\\';
			labels[n++] = 'n';
		} else {
			labels[n++] = c < 0x20 || c >= 0x7f ? '?' : c;
		}
	}
	if (n + 1 < len)
		labels[n++] = '"';
	labels[n < len ? n : len - 1] = '\0';
}

static void label_pid(const struct exp_state *s, char *labels, size_t len,
		      unsigned pid)
{
	char v[16];

	if (!s->per_pid)
		return;
	snprintf(v, sizeof(v), "%u", pid);
	label(labels, len, "pid", v);
}

/*
 * The families, declared as data (as ebpf_exporter declares its metrics):
 * what a family is called and says, its kind and buckets, where its
 * series come from, and how a map key's bytes become labels.  One
 * renderer, emit_family(), serves them all: blktgt's, each --pair's and
 * --count's, and the exporter's own counters.
 */
enum fam_kind {
	FAM_COUNTER,		/* NAME_total */
	FAM_SECONDS,		/* a histogram of nanoseconds, le in seconds */
	FAM_BYTES,		/* a histogram of bytes */
	FAM_GAUGE,		/* NAME, a value now */
};

/* Where a family's series come from. */
enum fam_source {
	SRC_MAP,		/* every key of a hash map: one series each */
	SRC_SLOT,		/* one series: a slot of a per-CPU array, summed */
	SRC_DROPS,		/* one series per other family: its drops */
	SRC_TARGET_UP,		/* one series: exp_state's target_up() */
	SRC_HTTP_OPEN,		/* one series: http_stats()'s connections */
	SRC_HTTP_CLOSED,	/* one series per reason: http_stats()'s */
};

/* When a family is served. */
enum fam_when {
	WHEN_ALWAYS,
	WHEN_BLKTGT,		/* --blktgt */
	WHEN_NBD_CMDS,		/* --blktgt --nbd-commands */
	WHEN_PAIR_TABLE,	/* the in-flight table is loaded */
};

/* How a key's bytes, or nothing, become one label's value. */
enum label_kind {
	LBL_STR,		/* char[len] at off, not always terminated */
	LBL_IO_TYPE,		/* a __u32 enum bdev_io_type at off: its name */
	LBL_PROBE,		/* a __u32 --count probe index at off: the probe's
				 * name; a probe of another --count leaves the
				 * series out */
	LBL_CONST,		/* the text value */
	LBL_ENUM,		/* a __u32 at off: names[it], of len names */
};

/* The longest LBL_STR: RPC method names. */
#define LABEL_STR_MAX EXP_METHOD_LEN
_Static_assert(EXP_NAME_LEN <= LABEL_STR_MAX && EXP_CMD_LEN <= LABEL_STR_MAX,
	       "a key's string label is longer than LABEL_STR_MAX");

struct label_spec {
	const char *name;	/* NULL ends the list */
	enum label_kind kind;
	size_t off, len;
	const char *value;
	const char *const *names;
};

#define NO_OFF ((size_t)-1)

struct family_spec {
	const char *name;	/* a counter's without _total; NULL: the
				 * --pair's or --count's NAME */
	const char *help;
	enum fam_kind kind;
	enum fam_when when;
	enum fam_source source;
	/* SRC_MAP, SRC_SLOT: the map's fd in struct exp_state */
	size_t map;
	/* SRC_SLOT: the slot */
	int slot;
	/* SRC_MAP: the key's size, its labels, then its pid (a pid label
	 * with --pid-label), and the offset of a __u32 index that must equal
	 * the family's sel (NO_OFF: none) */
	size_t key_size;
	struct label_spec labels[3];
	size_t pid_off, sel_off;
	int sel;
	/* A value holding more than the family's metric (struct io_stats):
	 * its size, and the metric's offset in it.  0, 0: the metric is the
	 * whole value. */
	size_t val_size, val_off;
	/* Its series_drops slot (a --pair's: this plus its index); -1 for a
	 * --count's (one per probe); -2 for the exporter's own. */
	int drop_slot;
};

#define MAP(field) .source = SRC_MAP, .map = offsetof(struct exp_state, field)
#define IO_KEY .key_size = sizeof(struct io_key), \
	.labels = { { "bdev", LBL_STR, offsetof(struct io_key, bdev), EXP_NAME_LEN }, \
		    { "type", LBL_IO_TYPE, offsetof(struct io_key, type) } }, \
	.pid_off = offsetof(struct io_key, pid), .sel_off = NO_OFF, \
	.val_size = sizeof(struct io_stats), .drop_slot = EXP_DROP_IO
#define IDX_KEY .key_size = sizeof(struct idx_key), \
	.pid_off = offsetof(struct idx_key, pid), .sel_off = offsetof(struct idx_key, idx)

static const char *const merge_names[] = { EXP_MERGE_NAMES };
_Static_assert(sizeof(merge_names) / sizeof(merge_names[0]) == EXP_MERGE_REASONS,
	       "a merge reason without its name");

/* blktgt's, in the order served. */
static const struct family_spec blktgt_families[] = {
	{ .name = "probekit_io_latency_seconds",
	  .help = "Block I/O latency, submission to completion, by bdev and type.",
	  .kind = FAM_SECONDS, .when = WHEN_BLKTGT, MAP(io_stats), IO_KEY,
	  .val_off = offsetof(struct io_stats, latency) },
	{ .name = "probekit_io_size_bytes",
	  .help = "Block I/O size, by bdev and type.",
	  .kind = FAM_BYTES, .when = WHEN_BLKTGT, MAP(io_stats), IO_KEY,
	  .val_off = offsetof(struct io_stats, size) },
	{ .name = "probekit_io_errors",
	  .help = "Block I/Os completed with an error, by bdev and type.",
	  .kind = FAM_COUNTER, .when = WHEN_BLKTGT, MAP(io_stats), IO_KEY,
	  .val_off = offsetof(struct io_stats, errors) },
	{ .name = "probekit_rpc_latency_seconds",
	  .help = "JSON-RPC latency, request to reply, by method.",
	  .kind = FAM_SECONDS, .when = WHEN_BLKTGT, MAP(rpc_latency),
	  .key_size = sizeof(struct rpc_key),
	  .labels = { { "method", LBL_STR, offsetof(struct rpc_key, method), EXP_METHOD_LEN } },
	  .pid_off = offsetof(struct rpc_key, pid), .sel_off = NO_OFF,
	  .drop_slot = EXP_DROP_RPC },
	{ .name = "probekit_nbd_commands",
	  .help = "NBD commands received, by command.",
	  .kind = FAM_COUNTER, .when = WHEN_NBD_CMDS, MAP(nbd_commands),
	  .key_size = sizeof(struct cmd_key),
	  .labels = { { "command", LBL_STR, offsetof(struct cmd_key, cmd), EXP_CMD_LEN } },
	  .pid_off = offsetof(struct cmd_key, pid), .sel_off = NO_OFF,
	  .drop_slot = EXP_DROP_NBD_CMDS },
	{ .name = "probekit_nbd_connections",
	  .help = "NBD connections accepted.",
	  .kind = FAM_COUNTER, .when = WHEN_BLKTGT, MAP(nbd_conns), IDX_KEY,
	  .sel = EXP_NBD_CONNECT, .drop_slot = EXP_DROP_NBD_CONNS },
	{ .name = "probekit_nbd_disconnections",
	  .help = "NBD connections closed.",
	  .kind = FAM_COUNTER, .when = WHEN_BLKTGT, MAP(nbd_conns), IDX_KEY,
	  .sel = EXP_NBD_DISCONNECT, .drop_slot = EXP_DROP_NBD_CONNS },
	{ .name = "probekit_exporter_bdevs_merged",
	  .help = "Live bdevs whose I/O shares its bdev label with another "
		  "bdev's, by reason: name_cut, their names are equal as "
		  "io__batch's name table cuts them; table_full, past the "
		  "table's slots, labelled (other). As the last io__batch hit "
		  "of the process said (include/io_batch.h).",
	  .kind = FAM_GAUGE, .when = WHEN_BLKTGT, MAP(bdev_merges),
	  .key_size = sizeof(struct idx_key),
	  .labels = { { "reason", LBL_ENUM, offsetof(struct idx_key, idx),
			EXP_MERGE_REASONS, .names = merge_names } },
	  .pid_off = offsetof(struct idx_key, pid), .sel_off = NO_OFF,
	  .drop_slot = EXP_DROP_BDEV_MERGES },
};

/* One per --pair: NAME_seconds, sel the pair's index. */
static const struct family_spec pair_family = {
	.help = "Latency between a --pair's two probes.",
	.kind = FAM_SECONDS, MAP(pair_latency), IDX_KEY, .drop_slot = EXP_DROP_PAIR0,
};

/* One per --count, sel its index: each probe it matched is a series. */
static const struct family_spec count_family = {
	.help = "Hits of the probes a --count matched, by probe.",
	.kind = FAM_COUNTER, MAP(counts), .key_size = sizeof(struct idx_key),
	.labels = { { "probe", LBL_PROBE, offsetof(struct idx_key, idx) } },
	.pid_off = offsetof(struct idx_key, pid), .sel_off = NO_OFF, .drop_slot = -1,
};

/* The exporter's own counters: what it could not record, and why. */
static const struct family_spec own_families[] = {
	{ .name = "probekit_exporter_starts_dropped",
	  .help = "STARTs (RPCs' and --pairs') not kept for want of room "
		  "(--max-inflight); their DONEs go unmeasured.",
	  .kind = FAM_COUNTER, .when = WHEN_PAIR_TABLE, .source = SRC_SLOT,
	  .map = offsetof(struct exp_state, pair_counts), .slot = PAIR_DROPPED,
	  .labels = { { "reason", LBL_CONST, .value = "table_full" } }, .drop_slot = -2 },
	{ .name = "probekit_exporter_starts_reclaimed",
	  .help = "STARTs whose thread or process exited before their DONE.",
	  .kind = FAM_COUNTER, .when = WHEN_PAIR_TABLE, .source = SRC_SLOT,
	  .map = offsetof(struct exp_state, pair_counts), .slot = PAIR_RECLAIMED,
	  .drop_slot = -2 },
	{ .name = "probekit_exporter_series_dropped",
	  .help = "Hits not recorded, by family: no room for a new series "
		  "(--max-series), or I/O records whose batch met its CPU's "
		  "buffer in use by a run it preempted, or could not be read.",
	  .kind = FAM_COUNTER, .when = WHEN_ALWAYS, .source = SRC_DROPS, .drop_slot = -2 },
	{ .name = "probekit_exporter_io_batches_dropped",
	  .help = "blktgt:io__batch hits whose record count was unreadable "
		  "or out of range: none of their records, how many unknown, "
		  "was recorded.",
	  .kind = FAM_COUNTER, .when = WHEN_BLKTGT, .source = SRC_SLOT,
	  .map = offsetof(struct exp_state, series_drops), .slot = EXP_DROP_IO_BATCHES,
	  .labels = { { "reason", LBL_CONST, .value = "bad_count" } }, .drop_slot = -2 },
	{ .name = "probekit_exporter_target_up",
	  .help = "1 while the traced process lives (-p) or some process maps "
		  "the traced file (-b, a file it followed included), else 0; "
		  "the metrics stay served.",
	  .kind = FAM_GAUGE, .when = WHEN_ALWAYS, .source = SRC_TARGET_UP,
	  .drop_slot = -2 },
	{ .name = "probekit_exporter_http_connections",
	  .help = "HTTP connections open now, this scrape's included.",
	  .kind = FAM_GAUGE, .when = WHEN_ALWAYS, .source = SRC_HTTP_OPEN,
	  .drop_slot = -2 },
	{ .name = "probekit_exporter_http_closed",
	  .help = "HTTP connections refused (their address at its cap, or "
		  "the server full) or closed (for a newcomer from an address "
		  "holding fewer, or past their deadline), by reason.",
	  .kind = FAM_COUNTER, .when = WHEN_ALWAYS, .source = SRC_HTTP_CLOSED,
	  .drop_slot = -2 },
};

#undef MAP
#undef IO_KEY
#undef IDX_KEY

/* A family served in this scrape. */
struct family {
	const struct family_spec *spec;
	const char *name;
	int sel;
	int drop_slot;
};

struct series {
	char labels[LABELS_LEN];
	size_t idx;		/* its key's and value's place in the walk */
};

/* Grow *p to size bytes: 0, or -ENOMEM with *p unchanged. */
static int grow(void *p, size_t size)
{
	void *q = realloc(*(void **)p, size);

	if (!q)
		return -ENOMEM;
	*(void **)p = q;
	return 0;
}

static int series_cmp(const void *a, const void *b)
{
	return strcmp(((const struct series *)a)->labels,
		      ((const struct series *)b)->labels);
}

/* The le strings, made once: the shortest text that reads back as the
 * exact power of two. */
static char le_lat[EXP_LAT_FINITE][32], le_size[EXP_SIZE_FINITE][32];

static void le_init(void)
{
	int i;

	if (le_lat[0][0])
		return;
	for (i = 0; i < EXP_LAT_FINITE; i++)
		snprintf(le_lat[i], sizeof(le_lat[i]), "%.17g",
			 ldexp(1.0, EXP_LAT_MIN_EXP + i));
	for (i = 0; i < EXP_SIZE_FINITE; i++)
		snprintf(le_size[i], sizeof(le_size[i]), "%.17g", ldexp(1.0, i));
}

static void emit_hist(struct sbuf *b, const struct family *f,
		      const char *labels, const struct exp_hist *h)
{
	bool secs = f->spec->kind == FAM_SECONDS;
	int finite = secs ? EXP_LAT_FINITE : EXP_SIZE_FINITE;
	const char *sep = labels[0] ? "," : "";
	const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
	unsigned long long cum = 0;
	int i;

	for (i = 0; i < finite; i++) {
		cum += h->buckets[i];
		sb_printf(b, "%s_bucket{%s%sle=\"%s\"} %llu\n", f->name, labels,
			  sep, secs ? le_lat[i] : le_size[i], cum);
	}
	for (; i < EXP_BUCKETS; i++)
		cum += h->buckets[i];
	sb_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", f->name, labels, sep,
		  cum);
	if (secs)
		sb_printf(b, "%s_sum%s%s%s %llu.%09llu\n", f->name, open, labels,
			  close, (unsigned long long)h->sum / 1000000000ULL,
			  (unsigned long long)h->sum % 1000000000ULL);
	else
		sb_printf(b, "%s_sum%s%s%s %llu\n", f->name, open, labels, close,
			  (unsigned long long)h->sum);
	sb_printf(b, "%s_count%s%s%s %llu\n", f->name, open, labels, close,
		  cum);
}

static __u32 key_u32(const void *key, size_t off)
{
	__u32 v;

	memcpy(&v, (const char *)key + off, sizeof(v));
	return v;
}

/* Fill labels as f's spec says, from key (NULL: a family without keys);
 * false leaves the series out of this family. */
static bool series_labels(const struct exp_state *s, const struct family *f,
			  const void *key, char *labels, size_t len)
{
	const struct family_spec *spec = f->spec;
	const struct label_spec *l;

	if (key && spec->sel_off != NO_OFF && (int)key_u32(key, spec->sel_off) != f->sel)
		return false;
	for (l = spec->labels; l < spec->labels + 3 && l->name; l++) {
		char str[LABEL_STR_MAX + 1];
		__u32 v;

		switch (l->kind) {
		case LBL_STR:
			memcpy(str, (const char *)key + l->off, l->len);
			str[l->len] = '\0';
			label(labels, len, l->name, str);
			break;
		case LBL_IO_TYPE:
			v = key_u32(key, l->off);
			label(labels, len, l->name,
			      v < BDEV_IO_TYPE_COUNT ? io_type_names[v] : "unknown");
			break;
		case LBL_PROBE:
			v = key_u32(key, l->off);
			if ((int)v >= s->ncounts || s->count_probes[v].spec != f->sel)
				return false;
			label(labels, len, l->name, s->count_probes[v].probe);
			break;
		case LBL_CONST:
			label(labels, len, l->name, l->value);
			break;
		case LBL_ENUM:
			v = key_u32(key, l->off);
			label(labels, len, l->name, v < l->len ? l->names[v] : "unknown");
			break;
		}
	}
	if (key)
		label_pid(s, labels, len, key_u32(key, spec->pid_off));
	return true;
}

/* The sum over CPUs of slot of a per-CPU array of __u64. */
static int percpu_sum(int fd, __u32 slot, unsigned long long *sum)
{
	static int ncpus;
	__u64 *v;
	int i;

	if (!ncpus)
		ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0)
		return -EINVAL;
	v = calloc(ncpus, sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (bpf_map_lookup_elem(fd, &slot, v)) {
		free(v);
		return -errno;
	}
	*sum = 0;
	for (i = 0; i < ncpus; i++)
		*sum += v[i];
	free(v);
	return 0;
}

/* A family's hits not recorded for want of room for their series. */
static int family_drops(const struct exp_state *s, const struct family *f,
			unsigned long long *n)
{
	unsigned long long one;
	int i, err;

	if (f->drop_slot >= 0)
		return percpu_sum(s->series_drops, f->drop_slot, n);
	*n = 0;
	for (i = 0; i < s->ncounts; i++) {
		if (s->count_probes[i].spec != f->sel)
			continue;
		err = percpu_sum(s->series_drops, EXP_DROP_COUNT0 + i, &one);
		if (err)
			return err;
		*n += one;
	}
	return 0;
}

/* The series of a family, gathered: each one's labels, and its value at
 * vals + idx * vsize + the spec's val_off. */
struct gathered {
	char *keys, *vals;
	struct series *ser;
	size_t n, cap, vsize;
};

/* Room for place at (a key of key_size, 0: none, and a value): 0, or
 * -ENOMEM. */
static int gather_room(struct gathered *g, size_t at, size_t key_size)
{
	if (at < g->cap)
		return 0;
	g->cap = g->cap ? g->cap * 2 : 16;
	if ((key_size && grow(&g->keys, g->cap * key_size)) ||
	    grow(&g->vals, g->cap * g->vsize) ||
	    grow(&g->ser, g->cap * sizeof(*g->ser)))
		return -ENOMEM;
	return 0;
}

/* SRC_MAP: every key of the map, as a series unless its labels say not. */
static int gather_map(struct gathered *g, const struct exp_state *s,
		      const struct family *f, int fd)
{
	size_t ks = f->spec->key_size, w;
	char *k, *prev = NULL;
	int err;

	/* Keys are only ever added, so the walk ends; the bound is for a
	 * map that does not behave.  Key and value w sit at place w, a
	 * series' idx. */
	for (w = 0; w <= (size_t)s->max_series; w++) {
		if (w == g->cap) {
			err = gather_room(g, w, ks);
			if (err)
				return err;
			prev = w ? g->keys + (w - 1) * ks : NULL;
		}
		k = g->keys + w * ks;
		if (bpf_map_get_next_key(fd, prev, k))
			break;
		prev = k;
		if (bpf_map_lookup_elem(fd, k, g->vals + w * g->vsize))
			continue;	/* cannot happen: keys stay */
		g->ser[g->n].labels[0] = '\0';
		g->ser[g->n].idx = w;
		if (series_labels(s, f, k, g->ser[g->n].labels, LABELS_LEN))
			g->n++;
	}
	return 0;
}

/* One series of a counter whose value is given. */
static int gather_value(struct gathered *g, unsigned long long v, const char *labels)
{
	int err = gather_room(g, g->n, 0);

	if (err)
		return err;
	memcpy(g->vals + g->n * g->vsize, &v, sizeof(v));
	snprintf(g->ser[g->n].labels, LABELS_LEN, "%s", labels);
	g->ser[g->n].idx = g->n;
	g->n++;
	return 0;
}

/* One family: its HELP and TYPE lines, then its series in label order.
 * fams, nf: the families a SRC_DROPS family counts for. */
static int emit_family(struct sbuf *b, const struct exp_state *s,
		       const struct family *f, bool om,
		       const struct family *fams, int nf)
{
	const struct family_spec *spec = f->spec;
	const char *suffix = spec->kind == FAM_COUNTER && !om ? "_total" : "";
	const char *type = spec->kind == FAM_COUNTER ? "counter" :
			   spec->kind == FAM_GAUGE ? "gauge" : "histogram";
	static const char *const closed_names[] = { EXP_HTTP_CLOSED_NAMES };
	_Static_assert(sizeof(closed_names) / sizeof(closed_names[0]) ==
		       EXP_HTTP_NCLOSED, "a reason without its name");
	unsigned long long open = 0, closed[EXP_HTTP_NCLOSED] = { 0 };
	int fd = spec->source != SRC_MAP && spec->source != SRC_SLOT ? -1 :
		 *(const int *)((const char *)s + spec->map);
	struct gathered g = {
		.vsize = spec->source != SRC_MAP ? sizeof(__u64) :
			 spec->val_size ? spec->val_size :
			 spec->kind == FAM_COUNTER || spec->kind == FAM_GAUGE ?
			 sizeof(__u64) : sizeof(struct exp_hist),
	};
	char labels[LABELS_LEN];
	unsigned long long v;
	size_t i;
	int err = 0;

	sb_printf(b, "# HELP %s%s %s\n# TYPE %s%s %s\n", f->name, suffix,
		  spec->help, f->name, suffix, type);
	switch (spec->source) {
	case SRC_MAP:
		if (fd >= 0)
			err = gather_map(&g, s, f, fd);
		break;
	case SRC_SLOT:
		labels[0] = '\0';
		series_labels(s, f, NULL, labels, sizeof(labels));
		err = percpu_sum(fd, spec->slot, &v);
		if (!err)
			err = gather_value(&g, v, labels);
		break;
	case SRC_TARGET_UP:
		err = gather_value(&g, s->target_up && s->target_up(), "");
		break;
	case SRC_HTTP_OPEN:
	case SRC_HTTP_CLOSED:
		if (s->http_stats)
			s->http_stats(&open, closed);
		if (spec->source == SRC_HTTP_OPEN) {
			err = gather_value(&g, open, "");
			break;
		}
		for (i = 0; i < EXP_HTTP_NCLOSED && !err; i++) {
			labels[0] = '\0';
			label(labels, sizeof(labels), "reason", closed_names[i]);
			err = gather_value(&g, closed[i], labels);
		}
		break;
	case SRC_DROPS:
		for (i = 0; i < (size_t)nf && !err; i++) {
			labels[0] = '\0';
			label(labels, sizeof(labels), "family", fams[i].name);
			err = family_drops(s, &fams[i], &v);
			if (!err)
				err = gather_value(&g, v, labels);
		}
		break;
	}
	if (err)
		goto out;
	qsort(g.ser, g.n, sizeof(*g.ser), series_cmp);
	for (i = 0; i < g.n; i++) {
		const char *l = g.ser[i].labels;
		const void *val = g.vals + g.ser[i].idx * g.vsize +
				  (spec->source == SRC_MAP ? spec->val_off : 0);

		if (spec->kind == FAM_GAUGE)
			sb_printf(b, "%s%s%s%s %llu\n", f->name,
				  l[0] ? "{" : "", l, l[0] ? "}" : "",
				  *(const unsigned long long *)val);
		else if (spec->kind == FAM_COUNTER)
			sb_printf(b, "%s_total%s%s%s %llu\n", f->name,
				  l[0] ? "{" : "", l, l[0] ? "}" : "",
				  *(const unsigned long long *)val);
		else
			emit_hist(b, f, l, val);
	}
out:
	free(g.keys);
	free(g.vals);
	free(g.ser);
	return err;
}

static bool family_served(const struct exp_state *s, const struct family_spec *spec)
{
	switch (spec->when) {
	case WHEN_ALWAYS:
		return true;
	case WHEN_BLKTGT:
		return s->blktgt;
	case WHEN_NBD_CMDS:
		return s->blktgt && s->nbd_cmds_on;
	case WHEN_PAIR_TABLE:
		return s->pair_counts >= 0;
	}
	return false;
}

long exp_render(const struct exp_state *s, bool om, char **out)
{
	enum { NBLKTGT = sizeof(blktgt_families) / sizeof(blktgt_families[0]) };
	struct family fams[NBLKTGT + EXP_MAX_PAIRS + EXP_MAX_SPECS];
	char names[EXP_MAX_PAIRS][EXP_METRIC_LEN + 16];
	struct sbuf b = {};
	int nf = 0, i, err;

	le_init();
	for (i = 0; i < NBLKTGT; i++)
		if (family_served(s, &blktgt_families[i]))
			fams[nf++] = (struct family){
				.spec = &blktgt_families[i],
				.name = blktgt_families[i].name,
				.sel = blktgt_families[i].sel,
				.drop_slot = blktgt_families[i].drop_slot };
	for (i = 0; i < s->npairs; i++) {
		snprintf(names[i], sizeof(names[i]), "%s_seconds",
			 s->pair_names[i]);
		fams[nf++] = (struct family){
			.spec = &pair_family, .name = names[i], .sel = i,
			.drop_slot = pair_family.drop_slot + i };
	}
	for (i = 0; i < s->nspecs; i++)
		fams[nf++] = (struct family){
			.spec = &count_family, .name = s->count_names[i], .sel = i,
			.drop_slot = count_family.drop_slot };
	for (i = 0; i < nf; i++) {
		err = emit_family(&b, s, &fams[i], om, NULL, 0);
		if (err)
			b.err = err;
	}
	for (i = 0; i < (int)(sizeof(own_families) / sizeof(own_families[0])); i++) {
		struct family own = {
			.spec = &own_families[i], .name = own_families[i].name,
			.drop_slot = own_families[i].drop_slot };

		if (!family_served(s, own.spec))
			continue;
		err = emit_family(&b, s, &own, om, fams, nf);
		if (err)
			b.err = err;
	}
	if (om)
		sb_printf(&b, "# EOF\n");
	if (b.err) {
		free(b.p);
		return b.err;
	}
	*out = b.p;
	return b.len;
}
