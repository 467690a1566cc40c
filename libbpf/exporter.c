// SPDX-License-Identifier: BSD-2-Clause
/*
 * probekit-exporter: USDT probes as Prometheus metrics, served over HTTP.
 *
 * Traces one process (-p PID) or every process that runs a binary (-b
 * PATH, including ones started later), and serves what it counts at
 * http://HOST:PORT/metrics, cumulatively, until SIGINT or SIGTERM.
 * blktgt's own metrics come from its probes (exporter.bpf.c); --pair and
 * --count work on any binary with USDT probes, attached as plain uprobes
 * at each note location with the semaphore raised through the kernel's
 * reference counter (ref_ctr_offset).
 */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <asm/ptrace.h>

#include <bpf/libbpf.h>
#include <microhttpd.h>

#include "exporter.h"
#include "exporter.skel.h"
#include "probekit_version.h"
#include "trace_helpers.h"
#include "usdt_notes.h"

const char *tool_name = "exporter";

#define MAX_LINKS  4096		/* uprobe and USDT attachments */
#define SPEC_MAX   512		/* a --pair or --count argument */

static const char usage_text[] =
"usage: probekit-exporter (-p PID | -b PATH) [--listen HOST:PORT] [--blktgt]\n"
"                         [--pair NAME=PROV:START,PROV:DONE[,KEY]]...\n"
"                         [--count NAME=PATTERN]... [--pid-label] [-v]\n"
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
"                         DONE, paired by KEY: tid (default) or argN (N from 1)\n"
"      --count SPEC       a counter NAME_total of hits per probe matching\n"
"                         PATTERN (a glob on provider:name), label probe\n"
"      --pid-label        a pid label on every series (unbounded on a busy\n"
"                         service: aggregate is the default)\n"
"  -v, --verbose          libbpf's and libmicrohttpd's own messages\n"
"  -h, --help             show this help and exit\n"
"      --version          show probekit's version and exit\n"
"\n"
"examples:\n"
"  probekit-exporter -p $(pgrep blktgt) --listen 127.0.0.1:9437\n"
"  probekit-exporter -b /usr/lib/postgresql/15/bin/postgres \\\n"
"      --pair pg_query=postgresql:query__start,postgresql:query__done \\\n"
"      --count pg_txn='postgresql:transaction__*'\n";

enum { OPT_BLKTGT = 256, OPT_NBD_COMMANDS, OPT_PAIR, OPT_COUNT, OPT_PID_LABEL, OPT_VERS };

struct pair_spec {
	char start[2][USDT_NAME_MAX];	/* provider, name */
	char done[2][USDT_NAME_MAX];
	int arg;			/* 0: tid, else argN */
};

struct options {
	pid_t pid;
	const char *binary;
	const char *listen;
	bool blktgt, nbd_commands, per_pid, verbose;
	int npairs;
	struct pair_spec pairs[EXP_MAX_PAIRS];
	int nspecs;
	char patterns[EXP_MAX_SPECS][EXP_PROBE_LEN];
};

static struct exp_state state;
static struct bpf_link *links[MAX_LINKS];
static int nlinks;

/* A metric name of ours: [a-zA-Z_][a-zA-Z0-9_]*, bounded, unique. */
static void check_name(const char *opt, const char *name, size_t len)
{
	size_t i;
	int j;

	if (!len || len >= EXP_METRIC_LEN)
		usage_error("bad %s NAME '%.*s': 1 to %d characters", opt,
			    (int)len, name, EXP_METRIC_LEN - 1);
	for (i = 0; i < len; i++)
		if (!(name[i] == '_' || (name[i] >= 'a' && name[i] <= 'z') ||
		      (name[i] >= 'A' && name[i] <= 'Z') ||
		      (i && name[i] >= '0' && name[i] <= '9')))
			usage_error("bad %s NAME '%.*s': letters, digits and _ "
				    "only, not starting with a digit", opt,
				    (int)len, name);
	if (len >= 9 && !strncmp(name, "probekit_", 9))
		usage_error("bad %s NAME '%.*s': probekit_ names are the "
			    "exporter's own", opt, (int)len, name);
	for (j = 0; j < state.npairs; j++)
		if (strlen(state.pair_names[j]) == len &&
		    !strncmp(state.pair_names[j], name, len))
			usage_error("%s NAME '%.*s' is given twice", opt,
				    (int)len, name);
	for (j = 0; j < state.nspecs; j++)
		if (strlen(state.count_names[j]) == len &&
		    !strncmp(state.count_names[j], name, len))
			usage_error("%s NAME '%.*s' is given twice", opt,
				    (int)len, name);
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
			    "PROVIDER:DONE[,tid|argN]", arg);
	check_name("--pair", arg, eq - arg);
	c1 = strchr(eq + 1, ',');
	c2 = c1 ? strchr(c1 + 1, ',') : NULL;
	if (!c1 || !split_probe(eq + 1, c1 - eq - 1, p->start) ||
	    !split_probe(c1 + 1, c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1),
			 p->done))
		usage_error("bad --pair '%s': give NAME=PROVIDER:START,"
			    "PROVIDER:DONE[,tid|argN]", arg);
	p->arg = 0;
	if (c2 && strcmp(c2 + 1, "tid")) {
		if (strncmp(c2 + 1, "arg", 3) ||
		    parse_long(c2 + 4, 1, USDT_ARGC_MAX, &n))
			usage_error("bad --pair key '%s': tid, or argN with N "
				    "from 1 to %d", c2 + 1, USDT_ARGC_MAX);
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
	if (!eq || !split_probe(eq + 1, strlen(eq + 1), probe))
		usage_error("bad --count '%s': give NAME=PROVIDER:PROBE, "
			    "globs allowed (postgresql:query__*)", arg);
	check_name("--count", arg, eq - arg);
	if (strlen(eq + 1) >= EXP_PROBE_LEN)
		usage_error("--count pattern '%s' is too long", eq + 1);
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
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERS },
		{ 0 }
	};
	long n;
	int c;

	o->listen = "127.0.0.1:9437";
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:b:l:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_long(optarg, 1, 0x7fffffff, &n))
				usage_error("bad PID '%s'", optarg);
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
		case 'v': o->verbose = true; break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case OPT_VERS:
			printf("%s (probekit) %s\n", command_name(),
			       PROBEKIT_VERSION);
			exit(0);
		case ':':
			usage_error("option %s needs an argument", argv[optind - 1]);
		default:
			usage_error("unknown option %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->pid == !o->binary)
		usage_error("give exactly one of -p PID and -b PATH");
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

static int attach_blktgt(struct exporter_bpf *skel, const struct target *t,
			 bool nbd_commands)
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
		if (t->pid > 0) {
			err = attach_usdt(prog, t, "blktgt", probes[i].name, &l);
			if (err)
				return err;
		} else {
			l = bpf_program__attach_usdt(prog, -1, t->exe, "blktgt",
						     probes[i].name, NULL);
			if (!l) {
				err = -errno;
				if (err == -ENOENT)
					tool_err("%s has no USDT probe blktgt:%s; "
						 "is it blktgt built with USDT=1?",
						 t->exe, probes[i].name);
				else
					tool_err("cannot attach to blktgt:%s of %s: "
						 "%s", probes[i].name, t->exe,
						 strerror(-err));
				return err;
			}
		}
		err = keep_link(l);
		if (err)
			return err;
	}
	return 0;
}

/* The offset in struct pt_regs of an x86-64 general register, by any of
 * its names ("rdi", "edi", "di", "dil"); -1 for anything else. */
static int reg_offset(const char *reg)
{
	static const struct { const char *names[4]; int off; } regs[] = {
#define R(a, b, c, d, f) { { a, b, c, d }, offsetof(struct pt_regs, f) }
		R("rax", "eax", "ax", "al", rax), R("rbx", "ebx", "bx", "bl", rbx),
		R("rcx", "ecx", "cx", "cl", rcx), R("rdx", "edx", "dx", "dl", rdx),
		R("rsi", "esi", "si", "sil", rsi), R("rdi", "edi", "di", "dil", rdi),
		R("rbp", "ebp", "bp", "bpl", rbp), R("rsp", "esp", "sp", "spl", rsp),
		R("r8", "r8d", "r8w", "r8b", r8), R("r9", "r9d", "r9w", "r9b", r9),
		R("r10", "r10d", "r10w", "r10b", r10),
		R("r11", "r11d", "r11w", "r11b", r11),
		R("r12", "r12d", "r12w", "r12b", r12),
		R("r13", "r13d", "r13w", "r13b", r13),
		R("r14", "r14d", "r14w", "r14b", r14),
		R("r15", "r15d", "r15w", "r15b", r15),
#undef R
	};
	size_t i, j;

	for (i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		for (j = 0; j < 4; j++)
			if (!strcmp(reg, regs[i].names[j]))
				return regs[i].off;
	return -1;
}

/* The cookie of one pair location: its key read as the note's spec says;
 * -1 after one line when that argument cannot be read. */
static int pair_cookie(const struct usdt_note *n, int idx, int role, int arg,
		       __u64 *cookie)
{
	struct usdt_arg args[USDT_ARGC_MAX];
	char err[160];
	const struct usdt_arg *a;
	int argc, off;

	if (!arg) {
		*cookie = EXP_COOKIE(idx, role, EXP_KEY_TID, 0, 0, 0, 0);
		return 0;
	}
	argc = usdt_args_parse(n->spec, args, USDT_ARGC_MAX, err, sizeof(err));
	if (argc < 0) {
		tool_err("%s:%s: cannot parse its arguments: %s", n->provider,
			 n->name, err);
		return -1;
	}
	if (arg > argc) {
		tool_err("%s:%s has %d argument%s; there is no arg%d to pair "
			 "by", n->provider, n->name, argc, argc == 1 ? "" : "s",
			 arg);
		return -1;
	}
	a = &args[arg - 1];
	off = reg_offset(a->reg);
	if ((a->kind != USDT_ARG_REG && a->kind != USDT_ARG_REG_DEREF) ||
	    off < 0 || a->val < INT32_MIN || a->val > INT32_MAX) {
		tool_err("arg%d of %s:%s is '%s', an operand the exporter cannot "
			 "read (only %%reg and off(%%reg)); pair by tid", arg,
			 n->provider, n->name, a->text);
		return -1;
	}
	*cookie = EXP_COOKIE(idx, role, a->kind == USDT_ARG_REG ? EXP_KEY_REG :
			     EXP_KEY_DEREF, a->size, a->is_signed, off,
			     a->kind == USDT_ARG_REG ? 0 : a->val);
	return 0;
}

static int attach_location(struct bpf_program *prog, pid_t pid,
			   const char *path, const struct usdt_note *n,
			   __u64 cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = n->sema_off,
		    .bpf_cookie = cookie);
	struct bpf_link *l;
	int err;

	l = bpf_program__attach_uprobe_opts(prog, pid ? pid : -1, path,
					    n->pc_off, &opts);
	if (!l) {
		err = -errno;
		tool_err("cannot attach to %s:%s at 0x%llx of %s: %s",
			 n->provider, n->name, n->pc_off, path, strerror(-err));
		return err;
	}
	return keep_link(l);
}

/* Attach the pair's role (start or done) to every location of probe p. */
static int attach_pair_end(struct bpf_program *prog, pid_t pid,
			   const char *path, const struct usdt_note *notes,
			   size_t nn, const char p[2][USDT_NAME_MAX], int idx,
			   int role, int arg)
{
	__u64 cookie;
	size_t i;
	int found = 0, err;

	for (i = 0; i < nn; i++) {
		if (strcmp(notes[i].provider, p[0]) || strcmp(notes[i].name, p[1]))
			continue;
		found++;
		if (pair_cookie(&notes[i], idx, role, arg, &cookie))
			return -EINVAL;
		err = attach_location(prog, pid, path, &notes[i], cookie);
		if (err)
			return err;
	}
	if (!found) {
		tool_err("no probe %s:%s in %s; list them with tplist-bpfcc -l "
			 "%s", p[0], p[1], path, path);
		return -ENOENT;
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
	state.ncounts++;
	return i;
}

static int attach_generic(struct exporter_bpf *skel, const struct options *o,
			  pid_t pid, const char *path)
{
	struct bpf_program *prog = skel->progs.usdt_hit;
	struct usdt_note *notes = NULL;
	char err[256], probe[EXP_PROBE_LEN];
	size_t nn = 0, i;
	int s, idx, ret = 0;

	if (usdt_notes_read(path, &notes, &nn, err, sizeof(err))) {
		tool_err("cannot read the USDT notes of %s: %s", path, err);
		return -EINVAL;
	}
	for (s = 0; s < o->npairs && !ret; s++) {
		ret = attach_pair_end(prog, pid, path, notes, nn,
				      o->pairs[s].start, s, EXP_ROLE_START,
				      o->pairs[s].arg);
		if (!ret)
			ret = attach_pair_end(prog, pid, path, notes, nn,
					      o->pairs[s].done, s,
					      EXP_ROLE_DONE, o->pairs[s].arg);
	}
	for (s = 0; s < o->nspecs && !ret; s++) {
		int found = 0;

		for (i = 0; i < nn && !ret; i++) {
			snprintf(probe, sizeof(probe), "%s:%s",
				 notes[i].provider, notes[i].name);
			if (fnmatch(o->patterns[s], probe, 0))
				continue;
			found++;
			idx = count_index(s, &notes[i]);
			if (idx < 0) {
				tool_err("--count patterns match more than %d "
					 "probes; narrow them", EXP_MAX_COUNTS);
				ret = -E2BIG;
				break;
			}
			ret = attach_location(prog, pid, path, &notes[i],
					      EXP_COOKIE(idx, EXP_ROLE_COUNT,
							 0, 0, 0, 0, 0));
		}
		if (!ret && !found) {
			tool_err("no probe matches '%s' in %s; list them with "
				 "tplist-bpfcc -l %s", o->patterns[s], path, path);
			ret = -ENOENT;
		}
	}
	usdt_notes_free(notes);
	return ret;
}

int main(int argc, char **argv)
{
	struct options o = {};
	struct exporter_bpf *skel = NULL;
	struct MHD_Daemon *httpd = NULL;
	struct target t = { .pidfd = -1 };
	char shown[300];
	sigset_t sigs;
	int fd, sig, err, status = 1;

	parse_args(&o, argc, argv);
	state.per_pid = o.per_pid;
	state.blktgt = o.blktgt;
	state.nbd_cmds_on = o.nbd_commands;
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
	if (o.pid) {
		if (target_open(&t, o.pid))
			goto out;
	} else {
		if (access(o.binary, R_OK)) {
			tool_err("cannot read -b %s: %s", o.binary,
				 strerror(errno));
			goto out;
		}
		t.pid = -1;
		snprintf(t.exe, sizeof(t.exe), "%s", o.binary);
		snprintf(t.comm, sizeof(t.comm), "%s", o.binary);
	}

	skel = exporter_bpf__open();
	if (!skel) {
		report_load_error(&t, -errno);
		goto out;
	}
	skel->rodata->per_pid = o.per_pid;
	err = exporter_bpf__load(skel);
	if (err) {
		report_load_error(&t, err);
		goto out;
	}
	if (o.blktgt && attach_blktgt(skel, &t, o.nbd_commands))
		goto out;
	if ((o.npairs || o.nspecs) &&
	    attach_generic(skel, &o, o.pid, t.exe))
		goto out;

	state.io_stats = bpf_map__fd(skel->maps.io_stats);
	state.rpc_latency = bpf_map__fd(skel->maps.rpc_latency);
	state.nbd_commands = bpf_map__fd(skel->maps.nbd_commands);
	state.nbd_conns = bpf_map__fd(skel->maps.nbd_conns);
	state.pair_latency = bpf_map__fd(skel->maps.pair_latency);
	state.counts = bpf_map__fd(skel->maps.counts);

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
	if (sigwait(&sigs, &sig) == 0)
		status = 0;
out:
	http_stop(httpd);
	close(fd);
	while (nlinks)
		bpf_link__destroy(links[--nlinks]);
	exporter_bpf__destroy(skel);
	if (o.pid)
		target_close(&t);
	return status;
}
