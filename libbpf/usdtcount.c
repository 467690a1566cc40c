// SPDX-License-Identifier: BSD-2-Clause
/*
 * usdtcount: how often each USDT probe of any binary fires, per interval;
 * or the distribution of one argument of each probe, by its name
 * (resolved per probe) or as argN.
 *
 * The libbpf CO-RE twin of bcc/usdtcount: same options, same output
 * (bcc/README.md holds the contract).  PATTERNs are provider:name globs.
 * With --catalog FILE.d it also names the catalog's probes that never
 * fired, and --require-all makes that a failure: a service's probe smoke
 * test, run under its own workload.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "tool_attach.h"
#include "tool_drain.h"
#include "tool_loop.h"
#include "tool_main.h"
#include "tool_options.h"
#include "tool_target.h"
#include "usdt_sites.h"
#include "usdtcount.h"
#include "usdtcount.skel.h"
#include "usdtcount.spec.h"

const char *tool_name = "usdtcount";

#define PATTERNS_MAX 64			/* PATTERN operands */
#define CATALOG_SIZE_MAX (4 << 20)	/* bytes of a --catalog file */
#define CATALOG_PROBES_MAX 4096
#define STR_TOP 10			/* -S: values shown per probe */


static struct {
	struct common_args c;
	const char *patterns[PATTERNS_MAX];
	int npatterns;
	enum usdtcount_mode mode;
	struct usdt_arg_ref arg;	/* -H/-S: NAME or argN */
	long max_strings;		/* --max-strings: strs's size */
	const char *catalog;
	bool require_all;
} env;

/* The probes counted, sorted by name: a probe's index is its place. */
static char (*probes)[USDT_PROBE_MAX];
static size_t nprobes;
static bool fired[USDTCOUNT_PROBES_MAX];

/* The catalog's probes that some PATTERN names, sorted. */
static char (*catalog)[USDT_PROBE_MAX];
static size_t ncatalog;

static void option(int key, const char *arg)
{
	switch (key) {
	case 'H':
	case 'S':
		/* Repeated, the last one counts, as in argparse. */
		if (env.mode != USDTCOUNT_COUNT &&
		    env.mode != (key == 'H' ? USDTCOUNT_HIST : USDTCOUNT_STR))
			usage_error("argument -%c: not allowed with argument -%c",
				    key, env.mode == USDTCOUNT_HIST ? 'H' : 'S');
		env.mode = key == 'H' ? USDTCOUNT_HIST : USDTCOUNT_STR;
		usdt_arg_option(key == 'H' ? "-H/--histogram" :
				"-S/--strings", arg, false, &env.arg);
		break;
	case OPT_MAX_STRINGS:
		env.max_strings = positive_arg("--max-strings", arg,
					       USDTCOUNT_STRS_LIMIT);
		break;
	case OPT_CATALOG:
		env.catalog = arg;
		break;
	case OPT_REQUIRE_ALL:
		env.require_all = true;
		break;
	case OPT_GATE:
		usdt_gate_option(arg);
		break;
	}
}

/* PATTERNs: every operand before the decimal [interval [count]]. */
static bool operand(const char *arg)
{
	const char *p = arg;

	while (*p >= '0' && *p <= '9')
		p++;
	if (*arg && !*p)
		return false;
	if (!usdt_probe_valid(arg, true))
		usage_error("'%s' is not a probe pattern: give provider:name "
			    "or name, with * ? [...] wildcards", escaped(arg));
	if (env.npatterns == PATTERNS_MAX)
		usage_error("more than %d patterns", PATTERNS_MAX);
	env.patterns[env.npatterns++] = arg;
	return true;
}

/* Options, usage and examples: specs/usdtcount.toml, through
 * specs/gentool; --gate (OPT_GATE) is a common option of the tools on
 * any binary. */
static const struct tool_cli cli = {
	SPEC_CLI,
	.option = option,
	.operand = operand,
};

static void parse_args(int argc, char **argv)
{
	env.max_strings = SPEC_DEFAULT_MAX_STRINGS;
	parse_options(&cli, &env.c, argc, argv);
	if (!env.npatterns)
		usage_error("the following arguments are required: PATTERN");
	if (env.require_all && !env.catalog)
		usage_error("--require-all needs --catalog");
}

static bool named(const char *probe)
{
	char provider[USDT_NAME_MAX];
	const char *colon = strchr(probe, ':');
	struct usdt_note n;

	snprintf(provider, sizeof(provider), "%.*s", (int)(colon - probe),
		 probe);
	snprintf(n.provider, sizeof(n.provider), "%s", provider);
	snprintf(n.name, sizeof(n.name), "%s", colon + 1);
	for (int i = 0; i < env.npatterns; i++)
		if (usdt_probe_match(env.patterns[i], &n))
			return true;
	return false;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* --- the catalog ------------------------------------------------------------ */

/* The next identifier of a .d file at *p (comments skipped), or its next
 * punctuation character; false at the end. */
static bool next_token(const char **p, char *tok, size_t len)
{
	const char *s = *p;
	size_t n = 0;

	for (;;) {
		while (isspace((unsigned char)*s))
			s++;
		if (s[0] == '/' && s[1] == '*') {
			const char *e = strstr(s + 2, "*/");

			s = e ? e + 2 : s + strlen(s);
		} else if (s[0] == '/' && s[1] == '/') {
			s += strcspn(s, "\n");
		} else {
			break;
		}
	}
	if (!*s)
		return false;
	if (isalnum((unsigned char)*s) || *s == '_') {
		while (isalnum((unsigned char)*s) || *s == '_') {
			if (n + 1 < len)
				tok[n++] = *s;
			s++;
		}
	} else {
		tok[n++] = *s++;
	}
	tok[n] = '\0';
	*p = s;
	return true;
}

/*
 * The probes a DTrace provider file declares, as provider:name: each
 * "probe NAME(" inside "provider NAME { ... }".  Only their names: the
 * tool needs no types.  0, or one line and -errno.
 */
static int read_catalog(const char *path)
{
	char provider[USDT_NAME_MAX] = "", tok[USDT_NAME_MAX], name[USDT_NAME_MAX];
	const char *p;
	struct stat st;
	char *text;
	FILE *f;
	size_t got;
	int err = 0;

	f = fopen(path, "r");
	if (!f || fstat(fileno(f), &st)) {
		err = -errno;
		tool_err("--catalog: cannot read %s: %s", path, strerror(-err));
		if (f)
			fclose(f);
		return err;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > CATALOG_SIZE_MAX) {
		tool_err("--catalog: %s is not a provider file (%s)", path,
			 S_ISREG(st.st_mode) ? "larger than 4 MiB" :
			 "not a regular file");
		fclose(f);
		return -EINVAL;
	}
	text = calloc(1, st.st_size + 1);
	catalog = calloc(CATALOG_PROBES_MAX, sizeof(*catalog));
	if (!text || !catalog) {
		fclose(f);
		free(text);
		tool_err("--catalog: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	got = fread(text, 1, st.st_size, f);
	fclose(f);
	text[got] = '\0';
	for (p = text; next_token(&p, tok, sizeof(tok));) {
		if (!strcmp(tok, "provider") && next_token(&p, provider,
							   sizeof(provider)))
			continue;
		if (strcmp(tok, "probe") || !provider[0] ||
		    !next_token(&p, name, sizeof(name)) ||
		    !next_token(&p, tok, sizeof(tok)) || strcmp(tok, "("))
			continue;
		if (ncatalog == CATALOG_PROBES_MAX) {
			tool_err("--catalog: %s declares more than %d probes",
				 path, CATALOG_PROBES_MAX);
			err = -E2BIG;
			break;
		}
		snprintf(catalog[ncatalog], USDT_PROBE_MAX, "%s:%s", provider,
			 name);
		if (named(catalog[ncatalog]))
			ncatalog++;
	}
	free(text);
	if (!err && !ncatalog) {
		tool_err("--catalog: %s declares no probe that a PATTERN names",
			 path);
		err = -ENOENT;
	}
	qsort(catalog, ncatalog, sizeof(*catalog), cmp_name);
	return err;
}

/* --- the probes ------------------------------------------------------------- */

/* Every probe some PATTERN names, sorted; each PATTERN must name one. */
static int find_probes(const struct usdt_sites *s, const struct target *t)
{
	char name[USDT_PROBE_MAX];

	probes = calloc(USDTCOUNT_PROBES_MAX, sizeof(*probes));
	if (!probes) {
		tool_err("%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	for (int i = 0; i < env.npatterns; i++) {
		bool found = false;

		for (size_t b = 0; b < s->nbins; b++)
			for (size_t k = 0; k < s->bins[b].n; k++) {
				const struct usdt_note *n = &s->bins[b].notes[k];

				if (!usdt_probe_match(env.patterns[i], n))
					continue;
				found = true;
				usdt_probe_name(n, name, sizeof(name));
				if (lfind(name, probes, &nprobes, sizeof(*probes),
					  cmp_name))
					continue;
				if (nprobes == USDTCOUNT_PROBES_MAX) {
					tool_err("the patterns name more than %d "
						 "probes; name fewer",
						 USDTCOUNT_PROBES_MAX);
					return -E2BIG;
				}
				memcpy(probes[nprobes++], name, sizeof(name));
			}
		if (!found) {
			usdt_sites_missing(s, t, env.patterns[i], true);
			return -ENOENT;
		}
	}
	qsort(probes, nprobes, sizeof(*probes), cmp_name);
	return 0;
}

/* The next free index of the sites map: a follow adds after the sites
 * of the files before. */
static __u32 next_site;

/* Attach at every site of every probe counted, in the files from
 * s->first on; with -H/-S each site's
 * operand is checked first, so that nothing is attached if one fails. */
static int attach_all(struct usdtcount_bpf *skel, struct usdt_sites *s,
		      const struct target *t)
{
	int fd = bpf_map__fd(skel->maps.sites), err;
	char name[USDT_PROBE_MAX];
	__u32 next = next_site;

	for (int check = 1; check >= 0; check--)
		for (size_t b = s->first; b < s->nbins; b++)
			for (size_t k = 0; k < s->bins[b].n; k++) {
				struct usdt_bin *bin = &s->bins[b];
				const struct usdt_note *n = &bin->notes[k];
				struct usdt_site site = { 0 };
				char (*p)[USDT_PROBE_MAX];

				usdt_probe_name(n, name, sizeof(name));
				p = bsearch(name, probes, nprobes,
					    sizeof(*probes), cmp_name);
				if (!p)
					continue;
				site.probe = p - probes;
				if (env.mode != USDTCOUNT_COUNT &&
				    usdt_arg_resolve(bin, n, &env.arg,
						     env.mode == USDTCOUNT_STR,
						     &site.arg))
					return -EINVAL;
				if (check)
					continue;
				if (next == USDT_SITES_MAX) {
					tool_err("the patterns name more than %d "
						 "probe sites; name fewer",
						 USDT_SITES_MAX);
					return -E2BIG;
				}
				if (bpf_map_update_elem(fd, &next, &site, BPF_ANY)) {
					err = -errno;
					tool_err("cannot describe a site to BPF: "
						 "%s", strerror(-err));
					return err;
				}
				err = usdt_sites_add(s, skel->progs.hit, bin, n,
						     next++);
				if (err)
					return err;
			}
	if (usdt_sites_gates(s, skel->progs.gate, t))
		return -1;
	next_site = next;
	return usdt_sites_commit(s, t);
}

/* -b PATH: a file replaced PATH; attach to it too (common_args.follow),
 * at the sites of the probes counted: each PATTERN must still name one
 * there, as at the start. */
static struct {
	struct usdtcount_bpf *skel;
	struct usdt_sites *sites;
	const struct target *t;
	struct usdt_watch watch;
} follow;

static void follow_file(void *ctx)
{
	struct usdt_sites *s = follow.sites;
	int fd = usdt_watch_replaced(&follow.watch, follow.t);

	(void)ctx;
	if (fd < 0 || usdt_sites_follow(s, follow.t, fd))
		return;
	for (int i = 0; i < env.npatterns; i++) {
		bool found = false;

		for (size_t k = 0; k < s->bins[s->first].n && !found; k++) {
			const struct usdt_note *n = &s->bins[s->first].notes[k];
			char name[USDT_PROBE_MAX];

			usdt_probe_name(n, name, sizeof(name));
			found = usdt_probe_match(env.patterns[i], n) &&
				bsearch(name, probes, nprobes, sizeof(*probes),
					cmp_name);
		}
		if (!found) {
			usdt_sites_missing(s, follow.t, env.patterns[i], true);
			return;
		}
	}
	usdt_sites_followed(s, follow.t, attach_all(follow.skel, s, follow.t));
}

/* --- output ----------------------------------------------------------------- */

static __u64 take(__u64 *live)
{
	return __atomic_exchange_n(live, 0, __ATOMIC_SEQ_CST);
}

/* The counts of one interval.  The text's header comes first even when
 * nothing fired, and print() then says "0 hits", so that an empty result
 * reads as one (as BCC's tools print it), not as a trace that printed
 * nothing. */
static void print_counts(struct output *o, const __u64 *counts)
{
	bool any = false;

	if (!o->json)
		printf("%-40s %12s\n", "PROBE", "COUNT");

	for (size_t i = 0; i < nprobes; i++) {
		if (!counts[i])
			continue;
		if (o->json) {
			fputs(any ? ", {\"probe\": " : "{\"probe\": ", stdout);
			output_json_string(probes[i]);
			printf(", \"count\": %llu}", (unsigned long long)counts[i]);
		} else {
			printf("%-40s %12llu\n", probes[i],
			       (unsigned long long)counts[i]);
		}
		any = true;
	}
}

/* Whether a -H histogram has anything to show: a count or a negative. */
static bool shown(const struct hist_entry *e)
{
	for (int s = 0; s < HIST_LOG2_SLOTS; s++)
		if (e->hist.slots[s])
			return true;
	return e->nextras && e->extra_vals[0];
}

static void print_hists(struct output *o, struct usdtcount_bpf *skel)
{
	struct hist_entry *e = calloc(1, sizeof(*e));
	bool any = false;

	if (!e)
		return;
	for (size_t i = 0; i < nprobes; i++) {
		memset(e, 0, sizeof(*e));
		e->name = e->unit = env.arg.label;
		e->nkeys = 1;
		e->key_names[0] = "probe";
		snprintf(e->key_vals[0], sizeof(e->key_vals[0]), "%s", probes[i]);
		for (int s = 0; s < HIST_LOG2_SLOTS; s++)
			e->hist.slots[s] = take(&skel->bss->hists[i][s]);
		e->extra_names[0] = "negative";
		e->extra_vals[0] = take(&skel->bss->negative[i]);
		/* The text shows "negative: N" only when N > 0. */
		e->nextras = o->json || e->extra_vals[0];
		if (o->json) {
			if (any)
				fputs(", ", stdout);
			any |= output_hist_json(e);
			continue;
		}
		if (!shown(e))
			continue;
		printf("\nprobe = %s\n", probes[i]);
		output_hist_text(e);
	}
	free(e);
}

struct str_count {
	struct usdtcount_str key;
	__u64 count;
};

/* By probe, then count descending, then value in byte order. */
static int cmp_str(const void *a, const void *b)
{
	const struct str_count *x = a, *y = b;

	if (x->key.probe != y->key.probe)
		return x->key.probe < y->key.probe ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strncmp(x->key.s, y->key.s, sizeof(x->key.s));
}

/* A -S value in JSON: its bytes as Latin-1 characters, as the bcc/ twin
 * decodes them, so that no byte is lost; escaped as Python's
 * json.dumps() escapes them. */
static void print_json_latin1(const char *s, size_t len)
{
	putchar('"');
	for (size_t i = 0; i < len && s[i]; i++) {
		unsigned char c = s[i];

		if (c >= 0x80)
			printf("\\u%04x", c);
		else
			output_json_ascii(c);
	}
	putchar('"');
}

/* A -S value as the text shows it: quoted, printable ASCII as is but
 * '"' and '\', which are escaped, and any other byte as \xHH. */
static void print_quoted(const char *s, size_t len)
{
	putchar('"');
	for (size_t i = 0; i < len && s[i]; i++) {
		unsigned char c = s[i];

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c >= 0x20 && c < 0x7f)
			putchar(c);
		else
			printf("\\x%02x", c);
	}
	putchar('"');
}

static int print_strs(struct output *o, struct usdtcount_bpf *skel)
{
	struct usdtcount_str *keys;
	__u64 *counts;
	struct str_count *v;
	int got = drained_hash_take(skel->maps.strs, sizeof(*counts),
				    (void **)&keys, (void **)&counts);
	size_t n = got > 0 ? got : 0, shown = 0;
	__u32 probe = UINT32_MAX;
	bool any = false;
	char s[USDTCOUNT_STR_LEN + 1];

	if (got < 0)
		return got;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		free(keys);
		free(counts);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		v[i].key = keys[i];
		v[i].count = counts[i];
	}
	free(keys);
	free(counts);
	qsort(v, n, sizeof(*v), cmp_str);
	for (size_t i = 0; i < n; i++) {
		if (!v[i].count || v[i].key.probe >= nprobes)
			continue;
		if (v[i].key.probe != probe) {
			probe = v[i].key.probe;
			shown = 0;
			if (!o->json)
				printf("\nprobe = %s\n%10s  %s\n", probes[probe],
				       "COUNT", env.arg.label);
		}
		if (shown++ == STR_TOP)
			continue;
		memcpy(s, v[i].key.s, USDTCOUNT_STR_LEN);
		s[USDTCOUNT_STR_LEN] = '\0';
		if (o->json) {
			fputs(any ? ", {\"probe\": " : "{\"probe\": ", stdout);
			output_json_string(probes[probe]);
			fputs(", \"value\": ", stdout);
			print_json_latin1(s, USDTCOUNT_STR_LEN);
			printf(", \"count\": %llu}", (unsigned long long)v[i].count);
		} else {
			printf("%10llu  ", (unsigned long long)v[i].count);
			print_quoted(s, USDTCOUNT_STR_LEN);
			putchar('\n');
		}
		any = true;
	}
	free(v);
	return 0;
}

static size_t never_fired(void)
{
	size_t k = 0;

	for (size_t i = 0; i < ncatalog; i++) {
		char (*p)[USDT_PROBE_MAX] = bsearch(catalog[i], probes, nprobes,
						    sizeof(*probes), cmp_name);

		if (!p || !fired[p - probes])
			k++;
	}
	return k;
}

static void print_never_fired(struct output *o)
{
	size_t k = never_fired();
	bool first = true;

	if (o->json)
		fputs(", \"never_fired\": [", stdout);
	else if (k)
		printf("\nnever fired (%zu of %zu catalog probes):\n", k,
		       ncatalog);
	for (size_t i = 0; i < ncatalog; i++) {
		char (*p)[USDT_PROBE_MAX] = bsearch(catalog[i], probes, nprobes,
						    sizeof(*probes), cmp_name);

		if (p && fired[p - probes])
			continue;
		if (!o->json) {
			printf("    %s\n", catalog[i]);
			continue;
		}
		if (!first)
			fputs(", ", stdout);
		output_json_string(catalog[i]);
		first = false;
	}
	if (o->json)
		putchar(']');
}

static int print(void *ctx, struct output *o)
{
	struct usdtcount_bpf *skel = ctx;
	__u64 *counts = calloc(USDTCOUNT_PROBES_MAX, sizeof(*counts));
	bool none = true;
	char empty[512];
	int err = 0;

	if (!counts)
		return -ENOMEM;
	/* The hits go into the other buffer from here; once no program can
	 * still add into this one, it holds the interval whole, ended at one
	 * instant for every probe (usdtcount.bpf.c). */
	__u32 buf = skel->bss->count_buf & 1;

	__atomic_store_n(&skel->bss->count_buf, buf ^ 1, __ATOMIC_SEQ_CST);
	probes_quiesce();
	for (size_t i = 0; i < nprobes; i++) {
		counts[i] = take(&skel->bss->counts[buf][i]);
		fired[i] |= counts[i] > 0;
		none &= !counts[i];
	}
	output_begin(o);
	if (o->json)
		fputs(env.mode == USDTCOUNT_COUNT ? "\"counts\": [" :
		      env.mode == USDTCOUNT_HIST ? "\"histograms\": [" :
		      "\"values\": [", stdout);
	if (env.mode == USDTCOUNT_COUNT)
		print_counts(o, counts);
	else if (env.mode == USDTCOUNT_HIST)
		print_hists(o, skel);
	else
		err = print_strs(o, skel);
	if (o->json)
		putchar(']');
	/* No probe fired: the spec's "0 hits", and why when it can tell. */
	else if (none)
		printf("%s\n", usdt_empty_gated(empty, sizeof(empty), o->empty,
						probes, nprobes));
	if (env.mode == USDTCOUNT_STR) {
		/* Read after the values: a hit dropped while they were read
		 * and cleared is in this interval's count, not lost. */
		unsigned long long dropped = take(&skel->bss->strs_dropped);

		loss_report(o, "strings", &dropped, 1);
	}
	if (env.catalog)
		print_never_fired(o);
	if (o->json)
		fputs("}\n", stdout);
	fflush(stdout);
	free(counts);
	return err;
}

int main(int argc, char **argv)
{
	struct usdtcount_bpf *skel;
	struct usdt_sites sites = { 0 };
	char where[PATH_MAX + 64], ready[PATH_MAX + 128];
	struct tool_main m;
	size_t k;
	int err, rc = 1;

	parse_args(argc, argv);
	if (env.catalog && read_catalog(env.catalog))
		return 1;
	if (tool_start(&m, &env.c, false))
		return 1;
	follow.watch.fd = -1;
	if (usdt_watch_open(&follow.watch, &m.t) ||
	    usdt_sites_open(&sites, &m.t) || find_probes(&sites, &m.t))
		goto out;
	skel = tool_opened(&m, usdtcount_bpf__open());
	if (!skel)
		goto out;
	usdt_sites_prepare(&sites, skel->progs.hit);
	usdt_sites_prepare(&sites, skel->progs.gate);
	skel->rodata->mode = env.mode;
	err = DRAINED_HASH_INIT(skel->maps, strs, env.mode ==
				   USDTCOUNT_STR ? env.max_strings : 1);
	if (err) {
		report_load_error(&m.t, err);
		goto out;
	}
	skel->rodata->count_hits = env.c.max_rate > 0;
	if (tool_load(&m, true))
		goto out;
	/* The probes attach one after another, some milliseconds apart on a
	 * loaded machine: the hits of that time go to counts[1], which is
	 * emptied once every probe is attached, so that every probe counts
	 * from one instant (usdtcount.bpf.c). */
	skel->bss->count_buf = 1;
	if (attach_all(skel, &sites, &m.t))
		goto out;
	__atomic_store_n(&skel->bss->count_buf, 0, __ATOMIC_SEQ_CST);
	probes_quiesce();
	memset(skel->bss->counts[1], 0, sizeof(skel->bss->counts[1]));

	target_where(&m.t, where, sizeof(where));
	snprintf(ready, sizeof(ready), "Tracing %zu USDT probe%s in %s",
		 nprobes, nprobes == 1 ? "" : "s", where);
	/* Its links are made outside the skeleton: detached through the
	 * sites, not by the loop's skeleton (tool_run()). */
	env.c.hits = skel->maps.hits;
	env.c.detach = usdt_sites_detach;
	env.c.detach_ctx = &sites;
	if (follow.watch.fd >= 0) {
		follow = (typeof(follow)){ skel, &sites, &m.t, follow.watch };
		env.c.follow_fd = follow.watch.fd;
		env.c.follow = follow_file;
	}
	rc = run_loop_print(&env.c, &m.t, ready, print, skel);
	if (!rc && env.require_all && (k = never_fired())) {
		tool_err("%zu of %zu catalog probes never fired", k, ncatalog);
		rc = 1;
	}
out:
	usdt_watch_close(&follow.watch);
	usdt_sites_close(&sites);
	free(probes);
	free(catalog);
	return tool_end(&m, rc);
}
