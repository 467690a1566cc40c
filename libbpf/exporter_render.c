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

#include "exporter.h"
#include "states.h"

/* enum bdev_io_type's names, from the one list states.h keeps. */
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

/* Fill labels for key; false leaves the series out of this family. */
typedef bool (*labels_fn)(const struct exp_state *s, int sel,
			  const void *key, char *labels, size_t len);

static bool io_labels(const struct exp_state *s, int sel, const void *key,
		      char *labels, size_t len)
{
	const struct io_key *k = key;
	char bdev[EXP_NAME_LEN + 1];

	memcpy(bdev, k->bdev, EXP_NAME_LEN);
	bdev[EXP_NAME_LEN] = '\0';
	label(labels, len, "bdev", bdev);
	label(labels, len, "type", k->type < BDEV_IO_TYPE_COUNT ?
	      io_type_names[k->type] : "unknown");
	label_pid(s, labels, len, k->pid);
	return true;
}

static bool rpc_labels(const struct exp_state *s, int sel, const void *key,
		       char *labels, size_t len)
{
	const struct rpc_key *k = key;
	char method[EXP_METHOD_LEN + 1];

	memcpy(method, k->method, EXP_METHOD_LEN);
	method[EXP_METHOD_LEN] = '\0';
	label(labels, len, "method", method);
	label_pid(s, labels, len, k->pid);
	return true;
}

static bool cmd_labels(const struct exp_state *s, int sel, const void *key,
		       char *labels, size_t len)
{
	const struct cmd_key *k = key;
	char cmd[EXP_CMD_LEN + 1];

	memcpy(cmd, k->cmd, EXP_CMD_LEN);
	cmd[EXP_CMD_LEN] = '\0';
	label(labels, len, "command", cmd);
	label_pid(s, labels, len, k->pid);
	return true;
}

/* nbd_conns, pair_latency: sel picks the index. */
static bool idx_labels(const struct exp_state *s, int sel, const void *key,
		       char *labels, size_t len)
{
	const struct idx_key *k = key;

	if ((int)k->idx != sel)
		return false;
	label_pid(s, labels, len, k->pid);
	return true;
}

/* counts: sel picks the --count; each probe it matched is a series. */
static bool count_labels(const struct exp_state *s, int sel, const void *key,
			 char *labels, size_t len)
{
	const struct idx_key *k = key;

	if ((int)k->idx >= s->ncounts || s->count_probes[k->idx].spec != sel)
		return false;
	label(labels, len, "probe", s->count_probes[k->idx].probe);
	label_pid(s, labels, len, k->pid);
	return true;
}

enum fam_kind { FAM_COUNTER, FAM_SECONDS, FAM_BYTES };

struct family {
	const char *name;	/* a counter's without _total */
	const char *help;
	enum fam_kind kind;
	int fd;
	size_t key_size;
	labels_fn labels;
	int sel;
	/* A value holding more than the family's metric (struct io_stats):
	 * its size, and the metric's offset in it.  0, 0: the metric is the
	 * whole value. */
	size_t val_size, val_off;
	/* Its series_drops slot; -1 for a --count's (one per probe). */
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
	int finite = f->kind == FAM_SECONDS ? EXP_LAT_FINITE : EXP_SIZE_FINITE;
	const char *sep = labels[0] ? "," : "";
	const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
	unsigned long long cum = 0;
	int i;

	for (i = 0; i < finite; i++) {
		cum += h->buckets[i];
		sb_printf(b, "%s_bucket{%s%sle=\"%s\"} %llu\n", f->name, labels,
			  sep, f->kind == FAM_SECONDS ? le_lat[i] : le_size[i],
			  cum);
	}
	for (; i < EXP_BUCKETS; i++)
		cum += h->buckets[i];
	sb_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", f->name, labels, sep,
		  cum);
	if (f->kind == FAM_SECONDS)
		sb_printf(b, "%s_sum%s%s%s %llu.%09llu\n", f->name, open, labels,
			  close, (unsigned long long)h->sum / 1000000000ULL,
			  (unsigned long long)h->sum % 1000000000ULL);
	else
		sb_printf(b, "%s_sum%s%s%s %llu\n", f->name, open, labels, close,
			  (unsigned long long)h->sum);
	sb_printf(b, "%s_count%s%s%s %llu\n", f->name, open, labels, close,
		  cum);
}

/* One family: its HELP and TYPE lines, then its series in label order. */
static int emit_family(struct sbuf *b, const struct exp_state *s,
		       const struct family *f, bool om)
{
	size_t vsize = f->val_size ? f->val_size :
		       f->kind == FAM_COUNTER ? sizeof(__u64) :
						sizeof(struct exp_hist);
	const char *suffix = f->kind == FAM_COUNTER && !om ? "_total" : "";
	const char *type = f->kind == FAM_COUNTER ? "counter" : "histogram";
	char *keys = NULL, *vals = NULL, *k, *prev = NULL;
	struct series *ser = NULL;
	size_t n = 0, cap = 0, w, i;
	int err = 0;

	sb_printf(b, "# HELP %s%s %s\n# TYPE %s%s %s\n", f->name, suffix,
		  f->help, f->name, suffix, type);
	if (f->fd < 0)
		return 0;
	/* Keys are only ever added, so the walk ends; the bound is for a
	 * map that does not behave. */
	for (w = 0; w <= (size_t)s->max_series; w++) {
		if (w == cap) {
			cap = cap ? cap * 2 : 16;
			if (grow(&keys, cap * f->key_size) ||
			    grow(&vals, cap * vsize) ||
			    grow(&ser, cap * sizeof(*ser))) {
				err = -ENOMEM;
				goto out;
			}
			prev = w ? keys + (w - 1) * f->key_size : NULL;
		}
		k = keys + w * f->key_size;
		if (bpf_map_get_next_key(f->fd, prev, k))
			break;
		prev = k;
		if (bpf_map_lookup_elem(f->fd, k, vals + w * vsize))
			continue;	/* cannot happen: keys stay */
		ser[n].labels[0] = '\0';
		ser[n].idx = w;
		if (f->labels(s, f->sel, k, ser[n].labels, LABELS_LEN))
			n++;
	}
	qsort(ser, n, sizeof(*ser), series_cmp);
	for (i = 0; i < n; i++) {
		const char *l = ser[i].labels;
		const void *v = vals + ser[i].idx * vsize + f->val_off;

		if (f->kind == FAM_COUNTER)
			sb_printf(b, "%s_total%s%s%s %llu\n", f->name,
				  l[0] ? "{" : "", l, l[0] ? "}" : "",
				  *(const unsigned long long *)v);
		else
			emit_hist(b, f, l, v);
	}
out:
	free(keys);
	free(vals);
	free(ser);
	return err;
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

static int family_cmp(const void *a, const void *b)
{
	return strcmp(((const struct family *)a)->name,
		      ((const struct family *)b)->name);
}

/* The exporter's own counters: what it could not record, and why. */
static int emit_own(struct sbuf *b, const struct exp_state *s,
		    const struct family *fams, int nf, bool om)
{
	const char *total = om ? "" : "_total";
	struct family sorted[8 + EXP_MAX_PAIRS + EXP_MAX_SPECS];
	unsigned long long n;
	int i, err;

	if (s->pair_counts >= 0) {
		err = percpu_sum(s->pair_counts, PAIR_DROPPED, &n);
		if (err)
			return err;
		sb_printf(b, "# HELP probekit_exporter_starts_dropped%s STARTs "
			  "(RPCs' and --pairs') not kept for want of room "
			  "(--max-inflight); their DONEs go unmeasured.\n"
			  "# TYPE probekit_exporter_starts_dropped%s counter\n"
			  "probekit_exporter_starts_dropped_total"
			  "{reason=\"table_full\"} %llu\n", total, total, n);
		err = percpu_sum(s->pair_counts, PAIR_RECLAIMED, &n);
		if (err)
			return err;
		sb_printf(b, "# HELP probekit_exporter_starts_reclaimed%s STARTs "
			  "whose thread or process exited before their DONE.\n"
			  "# TYPE probekit_exporter_starts_reclaimed%s counter\n"
			  "probekit_exporter_starts_reclaimed_total %llu\n",
			  total, total, n);
	}
	sb_printf(b, "# HELP probekit_exporter_series_dropped%s Hits not "
		  "recorded because their family had no room for a new series "
		  "(--max-series), by family.\n"
		  "# TYPE probekit_exporter_series_dropped%s counter\n",
		  total, total);
	memcpy(sorted, fams, nf * sizeof(*fams));
	qsort(sorted, nf, sizeof(*sorted), family_cmp);
	for (i = 0; i < nf; i++) {
		err = family_drops(s, &sorted[i], &n);
		if (err)
			return err;
		sb_printf(b, "probekit_exporter_series_dropped_total"
			  "{family=\"%s\"} %llu\n", sorted[i].name, n);
	}
	return 0;
}

long exp_render(const struct exp_state *s, bool om, char **out)
{
	struct family fams[8 + EXP_MAX_PAIRS + EXP_MAX_SPECS];
	char names[EXP_MAX_PAIRS + EXP_MAX_SPECS][EXP_METRIC_LEN + 16];
	struct sbuf b = {};
	int nf = 0, i, err;

	le_init();
	if (s->blktgt) {
		fams[nf++] = (struct family){
			.name = "probekit_io_latency_seconds",
			.help = "Block I/O latency, submission to completion, by "
				"bdev and type.",
			.kind = FAM_SECONDS, .fd = s->io_stats,
			.key_size = sizeof(struct io_key), .labels = io_labels,
			.val_size = sizeof(struct io_stats),
			.val_off = offsetof(struct io_stats, latency),
			.drop_slot = EXP_DROP_IO };
		fams[nf++] = (struct family){
			.name = "probekit_io_size_bytes",
			.help = "Block I/O size, by bdev and type.",
			.kind = FAM_BYTES, .fd = s->io_stats,
			.key_size = sizeof(struct io_key), .labels = io_labels,
			.val_size = sizeof(struct io_stats),
			.val_off = offsetof(struct io_stats, size),
			.drop_slot = EXP_DROP_IO };
		fams[nf++] = (struct family){
			.name = "probekit_io_errors",
			.help = "Block I/Os completed with an error, by bdev and "
				"type.",
			.kind = FAM_COUNTER, .fd = s->io_stats,
			.key_size = sizeof(struct io_key), .labels = io_labels,
			.val_size = sizeof(struct io_stats),
			.val_off = offsetof(struct io_stats, errors),
			.drop_slot = EXP_DROP_IO };
		fams[nf++] = (struct family){
			.name = "probekit_rpc_latency_seconds",
			.help = "JSON-RPC latency, request to reply, by method.",
			.kind = FAM_SECONDS, .fd = s->rpc_latency,
			.key_size = sizeof(struct rpc_key), .labels = rpc_labels,
			.drop_slot = EXP_DROP_RPC };
		if (s->nbd_cmds_on)
			fams[nf++] = (struct family){
				.name = "probekit_nbd_commands",
				.help = "NBD commands received, by command.",
				.kind = FAM_COUNTER, .fd = s->nbd_commands,
				.key_size = sizeof(struct cmd_key),
				.labels = cmd_labels, .drop_slot = EXP_DROP_NBD_CMDS };
		fams[nf++] = (struct family){
			.name = "probekit_nbd_connections",
			.help = "NBD connections accepted.",
			.kind = FAM_COUNTER, .fd = s->nbd_conns,
			.key_size = sizeof(struct idx_key), .labels = idx_labels,
			.sel = EXP_NBD_CONNECT, .drop_slot = EXP_DROP_NBD_CONNS };
		fams[nf++] = (struct family){
			.name = "probekit_nbd_disconnections",
			.help = "NBD connections closed.",
			.kind = FAM_COUNTER, .fd = s->nbd_conns,
			.key_size = sizeof(struct idx_key), .labels = idx_labels,
			.sel = EXP_NBD_DISCONNECT,
			.drop_slot = EXP_DROP_NBD_CONNS };
	}
	for (i = 0; i < s->npairs; i++) {
		snprintf(names[i], sizeof(names[i]), "%s_seconds",
			 s->pair_names[i]);
		fams[nf++] = (struct family){
			.name = names[i],
			.help = "Latency between a --pair's two probes.",
			.kind = FAM_SECONDS, .fd = s->pair_latency,
			.key_size = sizeof(struct idx_key), .labels = idx_labels,
			.sel = i, .drop_slot = EXP_DROP_PAIR0 + i };
	}
	for (i = 0; i < s->nspecs; i++)
		fams[nf++] = (struct family){
			.name = s->count_names[i],
			.help = "Hits of the probes a --count matched, by probe.",
			.kind = FAM_COUNTER, .fd = s->counts,
			.key_size = sizeof(struct idx_key),
			.labels = count_labels, .sel = i, .drop_slot = -1 };
	for (i = 0; i < nf; i++) {
		err = emit_family(&b, s, &fams[i], om);
		if (err)
			b.err = err;
	}
	err = emit_own(&b, s, fams, nf, om);
	if (err)
		b.err = err;
	if (om)
		sb_printf(&b, "# EOF\n");
	if (b.err) {
		free(b.p);
		return b.err;
	}
	*out = b.p;
	return b.len;
}
