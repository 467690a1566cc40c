// SPDX-License-Identifier: BSD-2-Clause
/*
 * probekit-exporter: USDT probes as Prometheus metrics, served over HTTP.
 *
 * Traces one process (-p PID) or every process that runs a binary (-b
 * PATH, including ones started later), and serves what it counts at
 * http://HOST:PORT/metrics, cumulatively, until SIGINT or SIGTERM.
 * blktgt's own metrics come from its probes (exporter.bpf.c); --pair and
 * --count work on any binary with USDT probes, found in the executable and
 * the files a process maps (usdt_sites.h reads them), attached as plain
 * uprobes at each note location with the semaphore raised through the
 * kernel's reference counter (ref_ctr_offset).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <microhttpd.h>

#include "exporter.h"
#include "exporter.skel.h"
#include "exporter_http.h"
#include "probekit_common.spec.h"	/* SPEC_TARGET_*: one wording */
#include "probekit_version.h"
#include "tool_attach.h"
#include "tool_options.h"
#include "tool_target.h"
#include "usdt_notes.h"
#include "usdt_sites.h"

const char *tool_name = "exporter";

#define MAX_LINKS  4096		/* uprobe and USDT attachments */
#define SPEC_MAX   512		/* a --pair or --count argument */

static const char usage_text[] =
"usage: probekit-exporter (-p PID | -b PATH) [--listen HOST:PORT] [--blktgt]\n"
"                         [--pair NAME=PROV:START,PROV:DONE[,KEY]]...\n"
"                         [--count NAME=PATTERN]... [--pid-label]\n"
"                         [--max-inflight N] [--max-series N] [-v]\n"
"\n"
"Serve USDT probe metrics in the Prometheus text format (OpenMetrics when\n"
"the scraper asks for it) at http://HOST:PORT/metrics.  All cumulative.\n"
"\n"
"options:\n"
"  -p, --pid PID          trace this process\n"
"  -b, --binary PATH      trace every process running PATH, later ones too\n"
"  -l, --listen HOST:PORT where to serve (127.0.0.1:9437; port 0: any)\n"
"      --blktgt           blktgt's I/O, RPC and NBD metrics (the default\n"
"                         without --pair and --count)\n"
"      --nbd-commands     with them, NBD commands by command: one probe hit\n"
"                         per command, where I/O costs one per batch\n"
"      --pair SPEC        a histogram NAME_seconds of the time from START to\n"
"                         DONE, paired by KEY: tid (default), an argument's\n"
"                         name (id, resolved per probe), or argN (N from 1)\n"
"      --count SPEC       a counter NAME_total of hits per probe matching\n"
"                         PATTERN (a glob on provider:name), label probe\n"
"      --pid-label        a pid label on every series (unbounded on a busy\n"
"                         service: aggregate is the default)\n"
"      --max-inflight N   STARTs (pairs' and RPCs') awaiting their DONE that\n"
"                         are kept (default 65536); more are dropped, and\n"
"                         counted\n"
"      --max-series N     series each map holds (default 4096); hits of more\n"
"                         are dropped, and counted\n"
"  -v, --verbose          libbpf's and libmicrohttpd's own messages\n"
"  -h, --help             show this help and exit\n"
"      --version          show probekit's version and exit\n"
"\n"
"examples:\n"
"  probekit-exporter -p $(pgrep blktgt) --listen 127.0.0.1:9437\n"
"  probekit-exporter -b /usr/lib/postgresql/15/bin/postgres \\\n"
"      --pair pg_query=postgresql:query__start,postgresql:query__done \\\n"
"      --count pg_txn='postgresql:transaction__*'\n";

enum { OPT_BLKTGT = 256, OPT_NBD_COMMANDS, OPT_PAIR, OPT_COUNT, OPT_PID_LABEL,
       OPT_VERS, OPT_INFLIGHT, OPT_SERIES };

struct pair_spec {
	char start[2][USDT_NAME_MAX];	/* provider, name */
	char done[2][USDT_NAME_MAX];
	int arg;			/* 0: tid or a name, else argN */
	char key[USDT_NAME_MAX];	/* a name, resolved per probe; "" */
};

struct options {
	pid_t pid;
	const char *binary;
	const char *listen;
	bool blktgt, nbd_commands, per_pid, verbose;
	long max_inflight, max_series;
	int npairs;
	struct pair_spec pairs[EXP_MAX_PAIRS];
	int nspecs;
	char patterns[EXP_MAX_SPECS][EXP_PROBE_LEN];
};

static struct exp_state state;
static struct bpf_link *links[MAX_LINKS];
static int nlinks;

/*
 * s as an error line may show it: control bytes (a newline would split
 * the line, an escape would drive the terminal) and backslash escaped as
 * C escapes them, at most 80 bytes of s.  Four buffers in turn, so that
 * one message may show four strings.
 */
static const char *shown(const char *s, size_t len)
{
	static char bufs[4][4 * 80 + 4];
	static int next;
	char *b = bufs[next++ % 4], *o = b;
	size_t i;

	for (i = 0; i < len && s[i] && i < 80; i++) {
		unsigned char c = s[i];

		if (c == '\\')
			o += sprintf(o, "\\\\");
		else if (c == '\n')
			o += sprintf(o, "\\n");
		else if (c == '\t')
			o += sprintf(o, "\\t");
		else if (c < 0x20 || c == 0x7f)
			o += sprintf(o, "\\x%02x", c);
		else
			*o++ = c;
	}
	if (i < len && s[i])
		o += sprintf(o, "...");
	*o = '\0';
	return b;
}

#define SHOWN(s) shown(s, strlen(s))

/* A metric name of ours: [a-zA-Z_][a-zA-Z0-9_]*, bounded, unique. */
static void check_name(const char *opt, const char *name, size_t len)
{
	size_t i;
	int j;

	if (!len || len >= EXP_METRIC_LEN)
		usage_error("bad %s NAME '%s': 1 to %d characters", opt,
			    shown(name, len), EXP_METRIC_LEN - 1);
	for (i = 0; i < len; i++)
		if (!(name[i] == '_' || (name[i] >= 'a' && name[i] <= 'z') ||
		      (name[i] >= 'A' && name[i] <= 'Z') ||
		      (i && name[i] >= '0' && name[i] <= '9')))
			usage_error("bad %s NAME '%s': letters, digits and _ "
				    "only, not starting with a digit", opt,
				    shown(name, len));
	if (len >= 9 && !strncmp(name, "probekit_", 9))
		usage_error("bad %s NAME '%s': probekit_ names are the "
			    "exporter's own", opt, shown(name, len));
	for (j = 0; j < state.npairs; j++)
		if (strlen(state.pair_names[j]) == len &&
		    !strncmp(state.pair_names[j], name, len))
			usage_error("%s NAME '%s' is given twice", opt,
				    shown(name, len));
	for (j = 0; j < state.nspecs; j++)
		if (strlen(state.count_names[j]) == len &&
		    !strncmp(state.count_names[j], name, len))
			usage_error("%s NAME '%s' is given twice", opt,
				    shown(name, len));
}

/*
 * The suffixes a sample name may add to its family's name, in either
 * format (histograms' three, counters' two).  A family claims its name
 * with each of them, whatever its type, as OpenMetrics parsers read them:
 * "a_seconds_count" beside a histogram "a_seconds" is that histogram's
 * _count, not a metric of its own.
 */
static const char *const name_suffixes[] = {
	"", "_bucket", "_count", "_sum", "_total", "_created",
};
#define NSUFFIXES (sizeof(name_suffixes) / sizeof(name_suffixes[0]))

/* A --pair's or --count's family name, and the option that made it. */
struct family_name {
	char name[EXP_METRIC_LEN + 16];
	const char *opt;
	const char *given;	/* its NAME */
};

/* Whether a and b claim a name in common: one's name with a suffix is
 * the other's with one. */
static bool names_clash(const char *a, const char *b, char *which,
			size_t len)
{
	size_t i, k;

	for (i = 0; i < NSUFFIXES; i++)
		for (k = 0; k < NSUFFIXES; k++) {
			char x[96], y[96];

			snprintf(x, sizeof(x), "%.80s%s", a, name_suffixes[i]);
			snprintf(y, sizeof(y), "%.80s%s", b, name_suffixes[k]);
			if (!strcmp(x, y)) {
				snprintf(which, len, "%s", x);
				return true;
			}
		}
	return false;
}

/* Refuse two families whose sample names would mix in a scrape: a parser
 * rejects the scrape (two TYPE lines of one name, or metadata after
 * samples), so Prometheus would see none of it. */
static void check_clashes(void)
{
	struct family_name f[EXP_MAX_PAIRS + EXP_MAX_SPECS];
	char which[EXP_METRIC_LEN + 32];
	int n = 0, i, k;

	for (i = 0; i < state.npairs; i++) {
		snprintf(f[n].name, sizeof(f[n].name), "%s_seconds",
			 state.pair_names[i]);
		f[n].opt = "--pair";
		f[n++].given = state.pair_names[i];
	}
	for (i = 0; i < state.nspecs; i++) {
		snprintf(f[n].name, sizeof(f[n].name), "%s",
			 state.count_names[i]);
		f[n].opt = "--count";
		f[n++].given = state.count_names[i];
	}
	for (i = 0; i < n; i++)
		for (k = i + 1; k < n; k++)
			if (names_clash(f[i].name, f[k].name, which,
					sizeof(which)))
				usage_error("%s %s and %s %s both make a metric "
					    "named %s (a name with _bucket, "
					    "_count, _sum, _total or _created is "
					    "the same family's); rename one",
					    f[i].opt, f[i].given, f[k].opt,
					    f[k].given, which);
}

/* "provider:name" of len bytes at s into p[2]. */
static bool split_probe(const char *s, size_t len, char p[2][USDT_NAME_MAX])
{
	const char *colon = memchr(s, ':', len);
	size_t a, b;

	if (!colon)
		return false;
	a = colon - s;
	b = len - a - 1;
	if (!a || !b || a >= USDT_NAME_MAX || b >= USDT_NAME_MAX ||
	    memchr(colon + 1, ':', b))
		return false;
	memcpy(p[0], s, a);
	p[0][a] = '\0';
	memcpy(p[1], colon + 1, b);
	p[1][b] = '\0';
	return true;
}

/* NAME=PROVIDER:START,PROVIDER:DONE[,KEY] */
static void parse_pair(struct options *o, const char *arg)
{
	const char *eq = strchr(arg, '='), *c1, *c2;
	struct pair_spec *p = &o->pairs[o->npairs];
	long n;

	if (strlen(arg) > SPEC_MAX)
		usage_error("--pair is longer than %d characters", SPEC_MAX);
	if (o->npairs == EXP_MAX_PAIRS)
		usage_error("more than %d --pair options", EXP_MAX_PAIRS);
	if (!eq)
		usage_error("bad --pair '%s': give NAME=PROVIDER:START,"
			    "PROVIDER:DONE[,tid|NAME|argN]", SHOWN(arg));
	check_name("--pair", arg, eq - arg);
	c1 = strchr(eq + 1, ',');
	c2 = c1 ? strchr(c1 + 1, ',') : NULL;
	if (!c1 || !split_probe(eq + 1, c1 - eq - 1, p->start) ||
	    !split_probe(c1 + 1, c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1),
			 p->done))
		usage_error("bad --pair '%s': give NAME=PROVIDER:START,"
			    "PROVIDER:DONE[,tid|NAME|argN]", SHOWN(arg));
	for (int e = 0; e < 2; e++) {
		char probe[EXP_PROBE_LEN];
		char (*q)[USDT_NAME_MAX] = e ? p->done : p->start;

		snprintf(probe, sizeof(probe), "%s:%s", q[0], q[1]);
		if (!usdt_probe_valid(probe, false))
			usage_error("bad --pair %s '%s': give provider:name, as "
				    "tplist prints it", e ? "DONE" : "START",
				    SHOWN(probe));
	}
	p->arg = 0;
	p->key[0] = '\0';
	if (c2 && usdt_arg_name_valid(c2 + 1) && strcmp(c2 + 1, "tid")) {
		snprintf(p->key, sizeof(p->key), "%s", c2 + 1);
	} else if (c2 && strcmp(c2 + 1, "tid")) {
		if (strncmp(c2 + 1, "arg", 3) ||
		    parse_long(c2 + 4, 1, USDT_ARGC_MAX, &n))
			usage_error("bad --pair key '%s': tid, an argument's "
				    "name, or argN with N from 1 to %d",
				    SHOWN(c2 + 1), USDT_ARGC_MAX);
		p->arg = n;
	}
	memcpy(state.pair_names[o->npairs], arg, eq - arg);
	state.pair_names[o->npairs][eq - arg] = '\0';
	state.npairs = ++o->npairs;
}

/* NAME=PATTERN, PATTERN a glob on provider:name. */
static void parse_count(struct options *o, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char probe[2][USDT_NAME_MAX];

	if (strlen(arg) > SPEC_MAX)
		usage_error("--count is longer than %d characters", SPEC_MAX);
	if (o->nspecs == EXP_MAX_SPECS)
		usage_error("more than %d --count options", EXP_MAX_SPECS);
	if (!eq || !split_probe(eq + 1, strlen(eq + 1), probe) ||
	    !usdt_probe_valid(eq + 1, true))
		usage_error("bad --count '%s': give NAME=PROVIDER:PROBE, "
			    "globs allowed (postgresql:query__*)", SHOWN(arg));
	check_name("--count", arg, eq - arg);
	if (strlen(eq + 1) >= EXP_PROBE_LEN)
		usage_error("--count pattern '%s' is too long", SHOWN(eq + 1));
	memcpy(state.count_names[o->nspecs], arg, eq - arg);
	state.count_names[o->nspecs][eq - arg] = '\0';
	strcpy(o->patterns[o->nspecs], eq + 1);
	state.nspecs = ++o->nspecs;
}

static void parse_args(struct options *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "binary", required_argument, NULL, 'b' },
		{ "listen", required_argument, NULL, 'l' },
		{ "blktgt", no_argument, NULL, OPT_BLKTGT },
		{ "nbd-commands", no_argument, NULL, OPT_NBD_COMMANDS },
		{ "pair", required_argument, NULL, OPT_PAIR },
		{ "count", required_argument, NULL, OPT_COUNT },
		{ "pid-label", no_argument, NULL, OPT_PID_LABEL },
		{ "max-inflight", required_argument, NULL, OPT_INFLIGHT },
		{ "max-series", required_argument, NULL, OPT_SERIES },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERS },
		{ 0 }
	};
	long n;
	int c;

	o->listen = "127.0.0.1:9437";
	o->max_inflight = PAIR_INFLIGHT_DEFAULT;
	o->max_series = EXP_MAX_KEYS;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:b:l:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_long(optarg, 1, 0x7fffffff, &n))
				usage_error("-p/--pid: " MSG_PID_INVALID, SHOWN(optarg));
			o->pid = n;
			break;
		case 'b':
			if (strlen(optarg) >= sizeof(((struct target *)0)->exe))
				usage_error("-b PATH is too long");
			o->binary = optarg;
			break;
		case 'l': o->listen = optarg; break;
		case OPT_BLKTGT: o->blktgt = true; break;
		case OPT_NBD_COMMANDS: o->nbd_commands = true; break;
		case OPT_PAIR: parse_pair(o, optarg); break;
		case OPT_COUNT: parse_count(o, optarg); break;
		case OPT_PID_LABEL: o->per_pid = true; break;
		case OPT_INFLIGHT:
			o->max_inflight = positive_arg("--max-inflight", optarg,
						       PAIR_INFLIGHT_LIMIT);
			break;
		case OPT_SERIES:
			o->max_series = positive_arg("--max-series", optarg,
						     EXP_MAX_KEYS_LIMIT);
			break;
		case 'v': o->verbose = true; break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case OPT_VERS:
			printf("%s (probekit) %s\n", command_name(),
			       PROBEKIT_VERSION);
			exit(0);
		case ':':
			usage_error("option %s needs an argument",
				    SHOWN(argv[optind - 1]));
		default:
			usage_error("unknown option %s", SHOWN(argv[optind - 1]));
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", SHOWN(argv[optind]));
	check_clashes();
	if (o->pid && o->binary)
		usage_error("%s", SPEC_TARGET_BOTH);
	if (!o->pid && !o->binary)
		usage_error(SPEC_TARGET_MISSING, SPEC_TARGET_BOTH_WAYS);
	if (!o->npairs && !o->nspecs)
		o->blktgt = true;
	if (o->nbd_commands && !o->blktgt)
		usage_error("--nbd-commands is one of blktgt's metrics: give "
			    "--blktgt too");
}

static int keep_link(struct bpf_link *l)
{
	if (nlinks == MAX_LINKS) {
		bpf_link__destroy(l);
		tool_err("more than %d probe locations; narrow the patterns",
			 MAX_LINKS);
		return -E2BIG;
	}
	links[nlinks++] = l;
	return 0;
}

/* blktgt's probes in the file at path (t's, or a follow's /proc/self/fd/N). */
static int attach_blktgt(struct exporter_bpf *skel, const struct target *t,
			 const char *path, bool nbd_commands)
{
	static const struct { const char *name; int off; } probes[] = {
		{ "io__batch", offsetof(struct exporter_bpf, progs.io_batch) },
		{ "rpc__request", offsetof(struct exporter_bpf, progs.rpc_request) },
		{ "rpc__done", offsetof(struct exporter_bpf, progs.rpc_done) },
		{ "nbd__request", offsetof(struct exporter_bpf, progs.nbd_request) },
		{ "nbd__connect", offsetof(struct exporter_bpf, progs.nbd_connect) },
		{ "nbd__disconnect", offsetof(struct exporter_bpf, progs.nbd_disconnect) },
	};
	struct bpf_link *l;
	size_t i;
	int err;

	for (i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		struct bpf_program *prog =
			*(struct bpf_program **)((char *)skel + probes[i].off);

		/* A hit per NBD command: only when asked for. */
		if (!nbd_commands && !strcmp(probes[i].name, "nbd__request"))
			continue;
		l = bpf_program__attach_usdt(prog, t->pid > 0 ? t->pid : -1,
					     path, "blktgt", probes[i].name,
					     NULL);
		if (!l) {
			err = -errno;
			if (target_exited_during_attach(t))
				return -ESRCH;
			if (t->pid > 0 && (err == -EPERM || err == -EACCES))
				/* Once more, for the line that names the
				 * capabilities missing. */
				err = attach_usdt(prog, t, "blktgt",
						  probes[i].name, &l);
			else if (err == -ENOENT)
				tool_err("%s has no USDT probe blktgt:%s; is it "
					 "blktgt built with USDT=1?", t->exe,
					 probes[i].name);
			else
				tool_err("cannot attach to blktgt:%s of %s: %s",
					 probes[i].name, t->exe, strerror(-err));
			if (!l)
				return err;
		}
		err = keep_link(l);
		if (err)
			return err;
	}
	return 0;
}

/* The cookie of one pair location: its key (argN, or the argument named
 * key, resolved at this probe by usdt_arg_index()) read as the note's
 * spec says, by the reader the generic tools share (usdt_site_arg_of());
 * -1 after one line when that argument cannot be read. */
static int pair_cookie(const struct usdt_bin *b, const struct usdt_note *n,
		       int idx, int role, int arg, const char *key,
		       __u64 *cookie)
{
	struct usdt_site_arg a;
	char why[PATH_MAX + 512];

	if (*key) {
		arg = usdt_arg_index(b, n, key, why, sizeof(why));
		if (arg < 0) {
			tool_err("%s", why);
			return -1;
		}
	}
	if (!arg) {
		*cookie = EXP_COOKIE(idx, role, EXP_KEY_TID, 0, 0, 0, 0);
		return 0;
	}
	if (usdt_site_arg_why(b, n, arg, &a, why, sizeof(why))) {
		tool_err("%s; pair by tid", why);
		return -1;
	}
	/* A constant is one key for every start: no pairing at all.  The
	 * cookie holds a 32-bit displacement. */
	if (a.kind == USDT_SITE_CONST || a.val < INT32_MIN || a.val > INT32_MAX) {
		tool_err("arg%d of %s:%s is %s; pair by tid", arg, n->provider,
			 n->name, a.kind == USDT_SITE_CONST ? "a constant, the "
			 "same key at every start" : "at a displacement beyond "
			 "32 bits");
		return -1;
	}
	*cookie = EXP_COOKIE(idx, role, a.kind == USDT_SITE_REG ? EXP_KEY_REG :
			     EXP_KEY_DEREF, a.size, a.is_signed, a.reg_off,
			     a.kind == USDT_SITE_REG ? 0 : a.val);
	return 0;
}

static int attach_location(struct bpf_program *prog, const struct target *t,
			   const struct usdt_bin *b, const struct usdt_note *n,
			   __u64 cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = n->sema_off,
		    .bpf_cookie = cookie);
	struct bpf_link *l;
	int err;

	l = bpf_program__attach_uprobe_opts(prog, t->pid > 0 ? t->pid : -1,
					    b->path, n->pc_off, &opts);
	if (!l) {
		err = -errno;
		if (target_exited_during_attach(t))
			return -ESRCH;
		tool_err("cannot attach to %s:%s at 0x%llx of %s: %s",
			 SHOWN(n->provider), SHOWN(n->name), n->pc_off,
			 b->shown, strerror(-err));
		return err;
	}
	return keep_link(l);
}

/* No probe matched pattern: one line, which names the process's exit
 * when that is why (its maps may have been read as it went). */
static int report_missing(const struct usdt_sites *s, const struct target *t,
			  const char *pattern, bool glob)
{
	usdt_sites_missing(s, t, pattern, glob);
	return -ENOENT;
}

/* Attach the pair's role (start or done) to every location of probe p,
 * in every file of the target. */
static int attach_pair_end(struct bpf_program *prog, const struct target *t,
			   const struct usdt_sites *s,
			   const char p[2][USDT_NAME_MAX], int idx, int role,
			   int arg, const char *key)
{
	char probe[EXP_PROBE_LEN];
	__u64 cookie;
	size_t i, k;
	int found = 0, err;

	for (i = s->first; i < s->nbins; i++)
		for (k = 0; k < s->bins[i].n; k++) {
			const struct usdt_note *n = &s->bins[i].notes[k];

			if (strcmp(n->provider, p[0]) || strcmp(n->name, p[1]))
				continue;
			found++;
			if (pair_cookie(&s->bins[i], n, idx, role, arg, key,
					&cookie))
				return -EINVAL;
			err = attach_location(prog, t, &s->bins[i], n, cookie);
			if (err)
				return err;
		}
	if (!found) {
		snprintf(probe, sizeof(probe), "%s:%s", p[0], p[1]);
		return report_missing(s, t, probe, false);
	}
	return 0;
}

/* The index of probe provider:name among the --count series of spec,
 * added if new; -1 when full. */
static int count_index(int spec, const struct usdt_note *n)
{
	char probe[EXP_PROBE_LEN];
	int i;

	snprintf(probe, sizeof(probe), "%s:%s", n->provider, n->name);
	for (i = 0; i < state.ncounts; i++)
		if (state.count_probes[i].spec == spec &&
		    !strcmp(state.count_probes[i].probe, probe))
			return i;
	if (state.ncounts == EXP_MAX_COUNTS)
		return -1;
	state.count_probes[i].spec = spec;
	strcpy(state.count_probes[i].probe, probe);
	/* A follow adds probes while the HTTP thread renders: the entry
	 * first, then the count that shows it. */
	__atomic_store_n(&state.ncounts, state.ncounts + 1, __ATOMIC_RELEASE);
	return i;
}

static int attach_generic(struct exporter_bpf *skel, const struct options *o,
			  const struct target *t, const struct usdt_sites *s)
{
	struct bpf_program *prog = skel->progs.usdt_hit;
	size_t i, k;
	int sp, idx, ret = 0;

	for (sp = 0; sp < o->npairs && !ret; sp++) {
		ret = attach_pair_end(prog, t, s, o->pairs[sp].start, sp,
				      EXP_ROLE_START, o->pairs[sp].arg,
				      o->pairs[sp].key);
		if (!ret)
			ret = attach_pair_end(prog, t, s, o->pairs[sp].done, sp,
					      EXP_ROLE_DONE, o->pairs[sp].arg,
					      o->pairs[sp].key);
	}
	for (sp = 0; sp < o->nspecs && !ret; sp++) {
		int found = 0;

		for (i = s->first; i < s->nbins && !ret; i++)
			for (k = 0; k < s->bins[i].n && !ret; k++) {
				const struct usdt_note *n = &s->bins[i].notes[k];

				if (!usdt_probe_match(o->patterns[sp], n))
					continue;
				found++;
				idx = count_index(sp, n);
				if (idx < 0) {
					tool_err("--count patterns match more "
						 "than %d probes; narrow them",
						 EXP_MAX_COUNTS);
					return -E2BIG;
				}
				ret = attach_location(prog, t, &s->bins[i], n,
						      EXP_COOKIE(idx,
								 EXP_ROLE_COUNT,
								 0, 0, 0, 0, 0));
			}
		if (!ret && !found)
			ret = report_missing(s, t, o->patterns[sp], true);
	}
	return ret;
}

/* --- the target: its exit (-p), a file replacing it (-b) ------------------ */

static struct usdt_watch watch = { .fd = -1 };
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static bool target_gone;	/* -p: its pidfd turned readable */
static bool by_path;		/* -b */

static bool target_up(void)
{
	bool up;

	if (!by_path)
		return !__atomic_load_n(&target_gone, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&watch_lock);
	up = usdt_watch_mapped(&watch);
	pthread_mutex_unlock(&watch_lock);
	return up;
}

/* Whether the file at path (a replacement of t's) has blktgt's batch
 * probe; if not, one line, and the old file alone stays traced. */
static bool blktgt_probes_in(const struct target *t, const char *path)
{
	struct usdt_note *notes;
	char err[256];
	bool found = false;
	size_t n;

	if (usdt_notes_read(path, &notes, &n, err, sizeof(err))) {
		char why[300];

		size_t pl = strlen(path);

		/* The reader names the path it opened: the descriptor's. */
		snprintf(why, sizeof(why), "cannot read its USDT probes: %s",
			 !strncmp(err, path, pl) && !strncmp(err + pl, ": ", 2) ?
			 err + pl + 2 : err);
		tool_err(MSG_REPLACED_NO_PROBES, t->exe, why);
		return false;
	}
	for (size_t i = 0; i < n && !found; i++)
		found = !strcmp(notes[i].provider, "blktgt") &&
			!strcmp(notes[i].name, "io__batch");
	usdt_notes_free(notes);
	if (!found)
		tool_err(MSG_REPLACED_NO_PROBES, t->exe,
			 "no USDT probe blktgt:io__batch");
	return found;
}

/*
 * -b PATH replaced by a new file: attach what was attached to the old
 * one to it too, the old file's links kept (its processes, and its
 * counts).  Attaching adds series only, so a scrape meanwhile is whole.
 */
static void follow_file(struct exporter_bpf *skel, const struct options *o,
			const struct target *t, struct usdt_sites *s)
{
	bool generic = o->npairs || o->nspecs;
	char path[64];
	int fd, err = 0;

	pthread_mutex_lock(&watch_lock);
	fd = usdt_watch_replaced(&watch, t);
	pthread_mutex_unlock(&watch_lock);
	if (fd < 0)
		return;
	/* Read and attached through fd: the file that was at PATH when it
	 * was opened, whatever lands there meanwhile. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (generic) {
		if (usdt_sites_follow(s, t, fd))	/* s owns fd now */
			return;
		err = attach_generic(skel, o, t, s);
	}
	if (!err && o->blktgt && !blktgt_probes_in(t, path))
		err = -ENOENT;
	if (!err && o->blktgt)
		err = attach_blktgt(skel, t, path, o->nbd_commands);
	if (!generic)
		close(fd);
	/* A missing probe was said in its own line; the old file's links
	 * stay either way. */
	if (!err)
		tool_err(MSG_REPLACED_FOLLOWED, t->exe);
	fflush(stderr);
}

/*
 * Serve until SIGINT or SIGTERM (0), following -b's file and noting -p's
 * exit on the way; 1 when waiting fails.  Signals arrive on a signalfd,
 * so one poll() waits for all three.
 */
static int serve(struct exporter_bpf *skel, const struct options *o,
		 const struct target *t, struct usdt_sites *s,
		 const sigset_t *sigs)
{
	struct pollfd pfd[3] = {
		{ .fd = signalfd(-1, sigs, SFD_CLOEXEC), .events = POLLIN },
		{ .fd = t->pidfd, .events = POLLIN },
		{ .fd = watch.fd, .events = POLLIN },
	};
	int sig;

	if (pfd[0].fd < 0) {
		/* No signalfd: wait for the signal alone, as before. */
		return sigwait(sigs, &sig) ? 1 : 0;
	}
	for (;;) {
		if (poll(pfd, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			tool_err("cannot wait: %s", strerror(errno));
			break;
		}
		if (pfd[0].revents)
			break;
		if (pfd[1].revents) {
			__atomic_store_n(&target_gone, true, __ATOMIC_RELEASE);
			tool_err("PID %d (%s) exited; still serving its metrics, "
				 "with probekit_exporter_target_up 0",
				 (int)t->pid, t->comm);
			fflush(stderr);
			pfd[1].fd = -1;
		}
		if (pfd[2].revents)
			follow_file(skel, o, t, s);
	}
	close(pfd[0].fd);
	return pfd[0].revents ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct options o = {};
	struct exporter_bpf *skel = NULL;
	struct MHD_Daemon *httpd = NULL;
	struct target t = { .pidfd = -1 };
	struct usdt_sites sites = { 0 };
	struct pair_exit_offsets exit_offs = { 0 };
	struct bpf_link *exit_link = NULL;
	bool starts, generic, loop;
	char shown[300];
	sigset_t sigs;
	int fd, err, i, status = 1;

	parse_args(&o, argc, argv);
	state.per_pid = o.per_pid;
	state.blktgt = o.blktgt;
	state.nbd_cmds_on = o.nbd_commands;
	state.max_series = o.max_series;
	/* STARTs wait for their DONE: RPCs (blktgt) and pairs. */
	starts = o.blktgt || o.npairs;
	generic = o.npairs || o.nspecs;
	libbpf_quiet(o.verbose);

	/* Signals go to this thread only, so that sigwait() below sees them
	 * whichever threads libmicrohttpd starts. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	/* The port first: taken, it is the cheapest error to find. */
	fd = http_listen(o.listen, shown, sizeof(shown));
	if (fd < 0)
		return fd == -2 ? 2 : 1;
	if (o.pid ? target_open(&t, o.pid) : target_open_path(&t, o.binary))
		goto out;
	/* -b: a file replacing PATH is followed (follow_file()). */
	by_path = o.binary;
	if (usdt_watch_open(&watch, &t))
		goto out;
	state.target_up = target_up;
	state.http_stats = http_stats;
	/* The probes of the executable and of every file it maps (-p), or
	 * of the file (-b). */
	if (generic && usdt_sites_open(&sites, &t))
		goto out;
	if (starts && pair_exit_detect(&exit_offs))
		goto out;

	/* Only io__batch's walk needs bpf_loop(). */
	loop = kernel_has_bpf_loop();
	if (!loop && o.blktgt) {
		tool_err("kernel lacks bpf_loop() (5.17), which --blktgt's "
			 "I/O series need; --pair and --count do not use it");
		goto out;
	}

	attach_warm_start();
	skel = exporter_bpf__open();
	if (!skel) {
		report_load_error(&t, -errno);
		goto out;
	}
	skel->rodata->per_pid = o.per_pid;
	for (i = 0; i < o.npairs; i++)
		if (!o.pairs[i].arg)
			skel->rodata->tid_pairs |= 1u << i;
	PAIR_EXIT_RODATA(skel->rodata, &exit_offs);
	bpf_program__set_autoload(skel->progs.start_exit, starts);
	bpf_program__set_autoload(skel->progs.io_batch, loop);
	bpf_map__set_max_entries(skel->maps.starts, o.max_inflight);
	bpf_map__set_max_entries(skel->maps.io_stats, o.max_series);
	bpf_map__set_max_entries(skel->maps.rpc_latency, o.max_series);
	bpf_map__set_max_entries(skel->maps.nbd_commands, o.max_series);
	bpf_map__set_max_entries(skel->maps.nbd_conns, o.max_series);
	bpf_map__set_max_entries(skel->maps.pair_latency, o.max_series);
	bpf_map__set_max_entries(skel->maps.counts, o.max_series);
	bpf_map__set_max_entries(skel->maps.bdev_merges, o.max_series);
	err = exporter_bpf__load(skel);
	if (err) {
		report_object_load_error(&t, skel->obj, err);
		goto out;
	}
	/* Reclaim first: a START made once the probes are in is then never
	 * left behind by its thread's or process's exit. */
	if (starts && pair_exit_attach(skel->progs.start_exit, &exit_link))
		goto out;
	if (o.blktgt && attach_blktgt(skel, &t, t.exe, o.nbd_commands))
		goto out;
	if (generic && attach_generic(skel, &o, &t, &sites))
		goto out;

	state.io_stats = bpf_map__fd(skel->maps.io_stats);
	state.rpc_latency = bpf_map__fd(skel->maps.rpc_latency);
	state.nbd_commands = bpf_map__fd(skel->maps.nbd_commands);
	state.nbd_conns = bpf_map__fd(skel->maps.nbd_conns);
	state.pair_latency = bpf_map__fd(skel->maps.pair_latency);
	state.counts = bpf_map__fd(skel->maps.counts);
	state.bdev_merges = bpf_map__fd(skel->maps.bdev_merges);
	state.pair_counts = starts ? bpf_map__fd(skel->maps.pair_counts) : -1;
	state.series_drops = bpf_map__fd(skel->maps.series_drops);

	attach_warm_stop();
	httpd = http_start(fd, &state, o.verbose);
	if (!httpd)
		goto out;
	if (o.pid)
		printf("Serving metrics of PID %d (%s) at http://%s/metrics... "
		       "Hit Ctrl-C to end.\n", (int)t.pid, t.comm, shown);
	else
		printf("Serving metrics of every process running %s at "
		       "http://%s/metrics... Hit Ctrl-C to end.\n", t.exe, shown);
	fflush(stdout);
	status = serve(skel, &o, &t, &sites, &sigs);
out:
	http_stop(httpd);
	close(fd);
	while (nlinks)
		bpf_link__destroy(links[--nlinks]);
	bpf_link__destroy(exit_link);
	exporter_bpf__destroy(skel);
	usdt_sites_close(&sites);
	usdt_watch_close(&watch);
	target_close(&t);
	return status;
}
