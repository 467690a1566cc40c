// SPDX-License-Identifier: BSD-2-Clause
/*
 * trace_helpers.c: see trace_helpers.h.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "probekit_version.h"
#include "trace_helpers.h"
#include "probekit_common.spec.h"

/* What the tool needs (its SPEC_CLI's, from tools/privileges.toml);
 * a program that parses no tool command line (the exporter) keeps a
 * uprobe perf event's needs. */
static const struct tool_cap *needs_own = SPEC_NEEDS_UPROBE,
			     *needs_other = SPEC_NEEDS_UPROBE_OTHER;

const char *command_name(void)
{
	static char name[64];

	if (!name[0])
		snprintf(name, sizeof(name), "probekit-%s", tool_name);
	return name;
}

void tool_err(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", command_name());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *escaped(const char *s)
{
	static char bufs[4][4 * 300 + 1];
	static int next;
	char *out = bufs[next++ % 4], *o = out;

	for (int n = 0; *s && n < 300; s++, n++) {
		unsigned char c = *s;

		if (c == '\n' || c == '\t' || c == '\r')
			o += sprintf(o, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
		else if (c < 0x20 || c == 0x7f)
			o += sprintf(o, "\\x%02x", c);
		else
			*o++ = c;
	}
	*o = '\0';
	return out;
}

void usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", command_name());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see --help)\n", stderr);
	exit(2);
}

int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	/* strtol() skips leading space and takes a sign; a number given on
	 * the command line must be digits, with at most a leading '-'. */
	if (!s || !(*s == '-' || (*s >= '0' && *s <= '9')))
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

long positive_arg(const char *what, const char *arg, long max)
{
	long v;
	int err = parse_long(arg, 1, max, &v);

	if (err == -EINVAL)
		usage_error("%s: not a number: '%s'", what, arg);
	if (err)
		usage_error("%s: must be 1..%ld: '%s'", what, max, arg);
	return v;
}

/* --- options -------------------------------------------------------- */

/* The column where an option's help text starts in --help. */
#define HELP_COL 23
/* Room for every option of a tool: the common ones, its own, -m/-u/-n. */
#define MAX_OPTIONS 32

/* The options every tool takes, their help and -p's for the tools on any
 * binary: tools/common.toml, which the bcc/ tools read too. */
static const struct tool_option common_options[] = {
	SPEC_COMMON_OPTIONS,
	{ 0 }
};

/* -p as the tools on any USDT binary show it. */
static const struct tool_option pid_any = SPEC_OPTION_PID_BINARY;

/* Whether a tool takes option o: -b and --gate only the tools on any
 * binary, --max-inflight only the pair tools (common.toml's "only"). */
static bool takes(const struct tool_cli *cli, const struct tool_option *o)
{
	if (o->key == OPT_MAX_INFLIGHT)
		return cli->pairs;
	if (o->key == OPT_MAX_KEYS)
		return cli->hists;
	if (o->key == 'b' || o->key == OPT_GATE)
		return cli->binary;
	return true;
}

/* Key 0: a positional argument, shown in --help only. */
static const struct tool_option positionals[] = {
	{ 0, "interval", NULL, "output interval, in seconds" },
	{ 0, "count", NULL, "number of outputs" },
};

/* -m, -u, -n: the latency unit, mutually exclusive as in bcc/. */
static const struct unit {
	struct tool_option opt;
	const char *unit;
	unsigned long long ns;
} units[] = {
	{ SPEC_OPTION_MILLISECONDS, "msecs", 1000000 },
	{ SPEC_OPTION_MICROSECONDS, "usecs", 1000 },
	{ SPEC_OPTION_NANOSECONDS, "nsecs", 1 },
};
#define NUNITS (sizeof(units) / sizeof(units[0]))

/*
 * One option's --help lines: "  -p, --pid PID" padded to HELP_COL, then
 * its help.  A long-only option lines up with the long names ("      --
 * version") where that leaves room before the help column, and starts at
 * the short names' column where it would not (funclat's --arg-bits).
 */
static void print_option(const struct tool_option *o, const char *suffix)
{
	char head[128];
	const char *arg = o->arg ? o->arg : "", *sp = o->arg ? " " : "";
	int n;

	if (!o->key)
		n = snprintf(head, sizeof(head), "%s", o->name);
	else if (o->key < OPT_VERSION)
		n = snprintf(head, sizeof(head), "-%c, --%s%s%s", o->key,
			     o->name, sp, arg);
	else {
		n = snprintf(head, sizeof(head), "    --%s%s%s", o->name, sp,
			     arg);
		if (n > HELP_COL - 4)
			n = snprintf(head, sizeof(head), "--%s%s%s", o->name,
				     sp, arg);
	}
	if (n > HELP_COL - 4)
		printf("  %s\n%*s", head, HELP_COL, "");
	else
		printf("  %-*s", HELP_COL - 2, head);
	for (const char *h = o->help; *h; h++) {
		putchar(*h);
		if (*h == '\n')
			printf("%*s", HELP_COL, "");
	}
	printf("%s\n", suffix);
}

static void print_help(const struct tool_cli *cli)
{
	printf("%s\noptions:\n", cli->synopsis);
	for (const struct tool_option *o = common_options; o->name; o++)
		if (takes(cli, o))
			print_option(o->key == 'p' && cli->binary ? &pid_any : o,
				     "");
	for (size_t i = 0; i < sizeof(positionals) / sizeof(positionals[0]);
	     i++)
		print_option(&positionals[i], "");
	for (const struct tool_option *o = cli->options; o && o->name; o++)
		print_option(o, "");
	for (size_t i = 0; cli->unit && i < NUNITS; i++)
		print_option(&units[i].opt,
			     strcmp(units[i].unit, cli->unit) ? "" :
			     " (default)");
	printf("\nexamples:\n%s", cli->examples);
}

/* getopt_long()'s view of a tool's options. */
struct getopt_tables {
	struct option longopts[MAX_OPTIONS + 1];
	char shortopts[2 * MAX_OPTIONS + 1];
	size_t n, ns;
};

static void add_option(struct getopt_tables *g, const struct tool_option *o)
{
	if (g->n == MAX_OPTIONS) {
		tool_err("internal error: more than %d options; raise "
			 "MAX_OPTIONS", MAX_OPTIONS);
		abort();
	}
	g->longopts[g->n++] = (struct option){
		.name = o->name,
		.has_arg = o->arg ? required_argument : no_argument,
		.val = o->key,
	};
	if (o->key >= OPT_VERSION)
		return;
	g->shortopts[g->ns++] = (char)o->key;
	if (o->arg)
		g->shortopts[g->ns++] = ':';
}

static void build_tables(const struct tool_cli *cli, struct getopt_tables *g)
{
	memset(g, 0, sizeof(*g));
	for (const struct tool_option *o = common_options; o->name; o++)
		if (takes(cli, o))
			add_option(g, o);
	for (const struct tool_option *o = cli->options; o && o->name; o++)
		add_option(g, o);
	for (size_t i = 0; cli->unit && i < NUNITS; i++)
		add_option(g, &units[i].opt);
}

/* The usage error for getopt_long()'s '?' (opterr = 0): an unknown
 * option, or one missing its argument. */
static void option_error(char **argv, const char *shortopts)
{
	const char *arg = argv[optind - 1], *p;

	/* A long option given an argument it does not take (--version=1):
	 * getopt_long() reports it with optopt set to the option's value. */
	if (optopt && !strncmp(arg, "--", 2) && (p = strchr(arg, '=')))
		usage_error("option '%.*s' takes no argument", (int)(p - arg),
			    arg);
	if (optopt > 0 && optopt < 128 && isprint(optopt)) {
		p = strchr(shortopts, optopt);
		if (p && p[1] == ':')
			usage_error("option -%c needs an argument", optopt);
		usage_error("unrecognized option '-%c'", optopt);
	}
	/* A long option: without a short form when it lacks its argument
	 * (optopt is its value), unknown when optopt is 0. */
	if (optopt)
		usage_error("option '%s' needs an argument", arg);
	usage_error("unrecognized option '%s'", arg);
}

static void set_unit(struct common_args *a, const struct unit *u)
{
	a->unit = u->unit;
	a->unit_ns = u->ns;
}

/* -m, -u or -n; *given remembers which one was seen before.  False when
 * c is none of them. */
static bool unit_option(struct common_args *a, int c, int *given)
{
	const struct unit *u = NULL, *before = NULL;

	for (size_t i = 0; i < NUNITS; i++) {
		if (units[i].opt.key == c)
			u = &units[i];
		if (units[i].opt.key == *given)
			before = &units[i];
	}
	if (!u)
		return false;
	if (before && before != u)
		usage_error("argument -%c/--%s: not allowed with argument "
			    "-%c/--%s", u->opt.key, u->opt.name,
			    before->opt.key, before->opt.name);
	*given = c;
	set_unit(a, u);
	return true;
}

/* One of the common options; false when c is none of them. */
static bool common_option(const struct tool_cli *cli, struct common_args *a,
			  int c, const char *arg)
{
	long v;

	switch (c) {
	case 'p':
		if (parse_long(arg, 1, INT_MAX, &v))
			usage_error("-p/--pid: invalid PID '%s'", arg);
		a->pid = v;
		return true;
	case 'b':
		if (!*arg)
			usage_error("-b/--binary: the path is empty");
		a->path = arg;
		return true;
	case 'T':
		a->timestamp = true;
		return true;
	case 'd':
		a->duration = positive_arg("-d/--duration", arg, INT_MAX);
		return true;
	case 'j':
		a->json = true;
		return true;
	case 'v':
		a->verbose = true;
		return true;
	case OPT_MAX_RATE:
		a->max_rate = positive_arg("--max-rate", arg, MAX_RATE_LIMIT);
		return true;
	case OPT_MAX_INFLIGHT:
		a->max_inflight = positive_arg("--max-inflight", arg,
					       PAIR_INFLIGHT_LIMIT);
		return true;
	case OPT_MAX_KEYS:
		a->max_keys = positive_arg("--max-keys", arg, HIST_KEYS_LIMIT);
		return true;
	case 'h':
		print_help(cli);
		exit(0);
	case OPT_VERSION:
		printf("%s (probekit) %s\n", command_name(), PROBEKIT_VERSION);
		exit(0);
	}
	return false;
}

void parse_options(const struct tool_cli *cli, struct common_args *a,
		   int argc, char **argv)
{
	struct getopt_tables g;
	int c, unit_given = 0;

	build_tables(cli, &g);
	if (cli->needs)
		needs_own = cli->needs;
	if (cli->needs_other)
		needs_other = cli->needs_other;
	a->max_inflight = PAIR_INFLIGHT_DEFAULT;
	a->max_keys = HIST_KEYS_MAX;
	a->empty = cli->empty;
	for (size_t i = 0; cli->unit && i < NUNITS; i++)
		if (!strcmp(units[i].unit, cli->unit))
			set_unit(a, &units[i]);
	opterr = 0;
	while ((c = getopt_long(argc, argv, g.shortopts, g.longopts,
				NULL)) != -1) {
		if (c == '?')
			option_error(argv, g.shortopts);
		if (common_option(cli, a, c, optarg) ||
		    (cli->unit && unit_option(a, c, &unit_given)))
			continue;
		cli->option(c, optarg);
	}
	while (cli->operand && optind < argc && cli->operand(argv[optind]))
		optind++;
	if (optind < argc)
		a->interval = positive_arg("interval", argv[optind++], INT_MAX);
	if (optind < argc)
		a->count = positive_arg("count", argv[optind++], INT_MAX);
	if (optind < argc)
		usage_error("unrecognized argument '%s'", argv[optind]);
	if (cli->binary && a->pid && a->path)
		usage_error("-p/--pid and -b/--binary exclude each other");
	if (cli->binary && !a->pid && !a->path)
		usage_error("one of the arguments -p/--pid -b/--binary is "
			    "required");
	if (!a->pid && !a->path)
		usage_error("the following arguments are required: -p/--pid");
}

static int libbpf_print_verbose(enum libbpf_print_level level,
				const char *fmt, va_list ap)
{
	return vfprintf(stderr, fmt, ap);
}

static int libbpf_print_none(enum libbpf_print_level level,
			     const char *fmt, va_list ap)
{
	return 0;
}

void libbpf_quiet(bool verbose)
{
	libbpf_set_print(verbose ? libbpf_print_verbose : libbpf_print_none);
}

/* --- privilege ------------------------------------------------------ */

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

/* Whether this process has cap in its effective set. */
static bool has_cap(int cap)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[CAP_TO_INDEX(cap)].effective & CAP_TO_MASK(cap);
}

/* Whether this process has cap, or a capability the kernel grants it
 * through (CAP_SYS_ADMIN for CAP_BPF and CAP_PERFMON). */
static bool holds(int cap)
{
	return has_cap(cap) || ((cap == CAP_BPF || cap == CAP_PERFMON) &&
				has_cap(CAP_SYS_ADMIN));
}

/* names joined as "A", "A and B", "A, B and C" (bcc/probekit_spec.py's
 * and_list()). */
static void and_list(char *out, size_t len, const char **names, int n)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < n && used < len; i++)
		used += snprintf(out + used, len - used, "%s%s",
				 !i ? "" : i == n - 1 ? " and " : ", ",
				 names[i]);
}

/*
 * What tracing needs is tools/privileges.toml's, measured on Linux 6.18
 * (doc/privileges.md): a uprobe perf event needs CAP_SYS_ADMIN again
 * since the fix for CVE-2025-38466, a multi-uprobe link CAP_BPF and
 * CAP_PERFMON, a tracepoint found through tracefs (mode 0700)
 * CAP_DAC_READ_SEARCH too, and another user's process CAP_SYS_PTRACE.
 *
 * Print "TOOL: WHAT: permission denied: tracing WHOM needs root, or ...;
 * this process lacks ..." (bcc/probekit_spec.py's privilege_line()) and
 * return true when a capability is missing; return false, printing
 * nothing, when none is, so that the caller reports the error as it is.
 */
static bool privilege_error(const char *what, pid_t pid)
{
	const char *need[8], *lack[8];
	const struct tool_cap *c;
	char whom[64], path[32], needs[160], lacks[160];
	int nneed = 0, nlack = 0;
	bool other = false;
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (pid > 0 && !stat(path, &st) && st.st_uid != geteuid())
		other = true;
	for (c = other ? needs_other : needs_own; c->name && nneed < 8; c++) {
		need[nneed++] = c->name;
		if (!holds(c->cap))
			lack[nlack++] = c->name;
	}
	if (!nlack)
		return false;
	if (pid <= 0)
		snprintf(whom, sizeof(whom), "every process running a file");
	else if (other)
		snprintf(whom, sizeof(whom), "another user's process");
	else
		snprintf(whom, sizeof(whom), "PID %d", (int)pid);
	and_list(needs, sizeof(needs), need, nneed);
	and_list(lacks, sizeof(lacks), lack, nlack);
	tool_err("%s: permission denied: tracing %s needs root, or %s; "
		 "this process lacks %s", what, whom, needs, lacks);
	return true;
}

bool report_denied(const char *what, pid_t pid)
{
	return privilege_error(what, pid);
}

/* True when /proc/PID/stat says the process is a zombie or dead. */
static bool is_zombie(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

int target_open(struct target *t, pid_t pid)
{
	char link[64], what[96];
	const char *base;
	ssize_t n;
	int err;

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->pidfd = -1;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	if (kill(pid, 0) < 0 && errno == ESRCH) {
		tool_err("no process with PID %d", (int)pid);
		return -ESRCH;
	}
	/* The pidfd tells us when the target exits, and cannot be fooled
	 * by a recycled PID. */
	t->pidfd = syscall(SYS_pidfd_open, pid, 0);
	if ((t->pidfd < 0 && errno == ESRCH) || is_zombie(pid))
		goto exited;
	n = readlink(link, t->exe, sizeof(t->exe) - 1);
	if (n < 0) {
		err = -errno;
		/* A killed process loses its executable's link before its
		 * last thread has exited (and it is a zombie): wait for that,
		 * as target_exited_during_attach() does, to say what
		 * happened, not ENOENT (1 run in 26 under load). */
		if (err == -ENOENT && t->pidfd >= 0) {
			struct pollfd pfd = { .fd = t->pidfd, .events = POLLIN };

			if (poll(&pfd, 1, TARGET_EXIT_WAIT_MS) > 0)
				goto exited;
		}
		snprintf(what, sizeof(what), "cannot read %s", link);
		if (err != -EACCES && err != -EPERM)
			tool_err("%s: %s", what, strerror(-err));
		else if (!privilege_error(what, pid))
			tool_err("%s: permission denied though this process has "
				 "CAP_SYS_ADMIN and CAP_SYS_PTRACE (a process of "
				 "another container?)", what);
		target_close(t);
		return err;
	}
	t->exe[n] = '\0';
	if (n > 10 && !strcmp(t->exe + n - 10, " (deleted)")) {
		tool_err("PID %d runs a deleted executable (%s); restart it",
			 (int)pid, t->exe);
		target_close(t);
		return -ENOENT;
	}
	base = strrchr(t->exe, '/');
	snprintf(t->comm, sizeof(t->comm), "%.255s", base ? base + 1 : t->exe);
	return 0;
exited:
	tool_err("PID %d has exited", (int)pid);
	target_close(t);
	return -ESRCH;
}

/*
 * path made absolute and normal as Python's os.path.abspath() makes it
 * (no "." or ".." components, no repeated '/'), but with its symbolic
 * links kept: the name the user gave is the name the output shows.  -1
 * when it does not fit in len bytes.
 */
static int abs_path(const char *path, char *out, size_t len)
{
	char *buf = malloc(2 * PATH_MAX + 2), *save, *c;
	size_t n = 0;
	int err = 0;

	if (!buf)
		return -1;
	if (path[0] == '/' || !getcwd(buf, PATH_MAX))
		buf[0] = '\0';
	if (path[0] != '/' && !buf[0]) {
		free(buf);
		return -1;
	}
	strcat(buf, "/");
	strncat(buf, path, PATH_MAX);
	out[0] = '\0';
	for (c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		size_t cl = strlen(c);

		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			while (n && out[n - 1] != '/')
				n--;
			if (n)
				n--;
			out[n] = '\0';
			continue;
		}
		if (n + 1 + cl + 1 > len) {
			err = -1;
			break;
		}
		out[n++] = '/';
		memcpy(out + n, c, cl + 1);
		n += cl;
	}
	if (!n && len > 1)
		strcpy(out, "/");
	free(buf);
	return err;
}

int target_open_path(struct target *t, const char *path)
{
	struct stat st;
	const char *base;

	memset(t, 0, sizeof(*t));
	t->pid = -1;
	t->pidfd = -1;
	if (strlen(path) >= PATH_MAX || abs_path(path, t->exe, sizeof(t->exe))) {
		tool_err("cannot trace %.64s...: the path is too long", path);
		return -ENAMETOOLONG;
	}
	if (stat(t->exe, &st)) {
		tool_err("cannot trace %s: %s", t->exe, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		tool_err("cannot trace %s: not a regular file (give the path of "
			 "an executable or a shared library)", path);
		return -EINVAL;
	}
	if (access(t->exe, R_OK)) {
		tool_err("cannot trace %s: %s", path, strerror(errno));
		return -errno;
	}
	base = strrchr(t->exe, '/');
	snprintf(t->comm, sizeof(t->comm), "%.255s", base ? base + 1 : t->exe);
	return 0;
}

bool target_exited_during_attach(const struct target *t)
{
	struct pollfd pfd = { .fd = t->pidfd, .events = POLLIN };
	bool gone;

	if (t->pid <= 0)
		return false;
	/* The pidfd cannot be fooled by a recycled PID; /proc can only
	 * tell a zombie, or no process.  Only a failure asks, and a killed
	 * process loses its mappings (which fails an attach) before its
	 * last thread has exited and its pidfd turns readable: so wait for
	 * that, a moment when the exit caused the failure, at most
	 * TARGET_EXIT_WAIT_MS (on an error path) when it did not. */
	if (t->pidfd >= 0)
		gone = poll(&pfd, 1, TARGET_EXIT_WAIT_MS) > 0;
	else
		gone = is_zombie(t->pid);
	if (gone)
		tool_err("PID %d (%s) exited while its probes were being "
			 "attached", (int)t->pid, t->comm);
	return gone;
}

void target_close(struct target *t)
{
	if (t->pidfd >= 0)
		close(t->pidfd);
	t->pidfd = -1;
}

void report_load_error(const struct target *t, int err)
{
	if (err == -EPERM && privilege_error("cannot load BPF programs",
					     t->pid))
		return;
	if (err == -EPERM)
		tool_err("cannot load BPF programs: %s, though this process has "
			 "CAP_SYS_ADMIN (kernel lockdown, or a security module?)",
			 strerror(-err));
	else if (err == -EACCES)
		tool_err("cannot load BPF programs: the kernel's verifier "
			 "refused one (run with -v for its log)");
	else
		tool_err("cannot load BPF programs: %s (run with -v for "
			 "libbpf's log)", strerror(-err));
}

int attach_usdt(struct bpf_program *prog, const struct target *t,
		const char *provider, const char *name, struct bpf_link **link)
{
	char what[160];
	int err;

	*link = bpf_program__attach_usdt(prog, t->pid, t->exe, provider, name,
					 NULL);
	if (*link)
		return 0;
	err = -errno;
	snprintf(what, sizeof(what), "cannot attach to USDT probe %s:%s of "
		 "PID %d", provider, name, (int)t->pid);
	if (err == -ENOENT)
		tool_err("PID %d (%s) has no USDT probe %s:%s; is it blktgt "
			 "built with USDT=1?", (int)t->pid, t->exe, provider, name);
	else if ((err != -EACCES && err != -EPERM) ||
		 !privilege_error(what, t->pid))
		tool_err("%s: %s", what, strerror(-err));
	return err;
}

int attach_uprobe(struct bpf_program *prog, const struct target *t,
		  const char *func, bool retprobe, struct bpf_link **link)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = func,
		    .retprobe = retprobe);
	char what[320];
	int err;

	*link = bpf_program__attach_uprobe_opts(prog, t->pid, t->exe, 0, &opts);
	if (*link)
		return 0;
	err = -errno;
	snprintf(what, sizeof(what), "cannot attach a %s to %.255s of PID %d",
		 retprobe ? "uretprobe" : "uprobe", func, (int)t->pid);
	if (err == -ENOENT)
		tool_err("no function %s in %s", func, t->exe);
	else if ((err != -EACCES && err != -EPERM) ||
		 !privilege_error(what, t->pid))
		tool_err("%s: %s", what, strerror(-err));
	return err;
}

int hist_map_drain(const struct bpf_map *map, void **keysp,
		   struct hist **histsp)
{
	int fd = bpf_map__fd(map);
	size_t ksz = bpf_map__key_size(map);
	size_t max = bpf_map__max_entries(map);
	char *keys = calloc(max ? max : 1, ksz);
	struct hist *hists;
	void *prev = NULL;
	size_t n = 0, got = 0;
	int err = 0;

	if (!keys)
		return -ENOMEM;
	/* Take the keys first: deleting while walking would restart the
	 * walk. */
	while (n < max && !bpf_map_get_next_key(fd, prev, keys + n * ksz)) {
		prev = keys + n * ksz;
		n++;
	}
	hists = calloc(n ? n : 1, sizeof(*hists));
	if (!hists) {
		free(keys);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		void *k = keys + i * ksz;

		if (!bpf_map_lookup_and_delete_elem(fd, k, &hists[got])) {
			memmove(keys + got * ksz, k, ksz);
			got++;
			continue;
		}
		if (errno == ENOENT)
			continue;	/* gone meanwhile */
		/* Kernels before 5.14 cannot do both on a hash: read, then
		 * delete. */
		if (bpf_map_lookup_elem(fd, k, &hists[got])) {
			if (errno == ENOENT)
				continue;
			err = -errno;
			break;
		}
		bpf_map_delete_elem(fd, k);
		memmove(keys + got * ksz, k, ksz);
		got++;
	}
	if (err) {
		free(keys);
		free(hists);
		return err;
	}
	*keysp = keys;
	*histsp = hists;
	return (int)got;
}

int collect_by_name(const struct bpf_map *map, const char *key_name,
		    const struct hist_entry *proto, struct hist_entry **out)
{
	size_t ksz = bpf_map__key_size(map);
	struct hist_entry *e;
	struct hist *hists;
	char *keys;
	int n = hist_map_drain(map, (void **)&keys, &hists);

	if (n < 0)
		return n;
	e = calloc(n ? n : 1, sizeof(*e));
	if (!e) {
		free(keys);
		free(hists);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		e[i] = *proto;
		e[i].nkeys = 1;
		e[i].key_names[0] = key_name;
		snprintf(e[i].key_vals[0], sizeof(e[i].key_vals[0]), "%.*s",
			 (int)ksz, keys + i * ksz);
		e[i].hist = hists[i];
	}
	hist_sort(e, n);
	free(keys);
	free(hists);
	*out = e;
	if (!n)
		e[0] = *proto;	/* output_emit(): the empty result's header */
	return n ? n : 1;
}

/* --- pair tools ----------------------------------------------------- */

/* Where tracefs may be mounted: its own mount point, or under debugfs. */
static const char *const exit_formats[] = {
	"/sys/kernel/tracing/events/sched/sched_process_exit/format",
	"/sys/kernel/debug/tracing/events/sched/sched_process_exit/format",
};

/* Whether the tracepoint's format has a group_dead field: 1 or 0, or
 * -errno when no format could be read (tracefs is mode 0700: only root
 * reads it, whatever capabilities a user has). */
static int group_dead_in_format(void)
{
	char line[256];
	int err = -ENOENT;

	for (size_t i = 0; i < sizeof(exit_formats) / sizeof(*exit_formats);
	     i++) {
		FILE *f = fopen(exit_formats[i], "r");
		int found = 0;

		if (!f) {
			if (err == -ENOENT)
				err = -errno;
			continue;
		}
		while (fgets(line, sizeof(line), f))
			if (strstr(line, " group_dead;"))
				found = 1;
		fclose(f);
		return found;
	}
	return err;
}

/* Whether the raw tracepoint passes group_dead, from btf: its prototype
 * btf_trace_sched_process_exit is (void *, struct task_struct *[, bool
 * group_dead]).  1 or 0, or -ENOENT when btf has no such prototype. */
static int group_dead_in_btf(const struct btf *btf)
{
	int id = btf__find_by_name_kind(btf, "btf_trace_sched_process_exit",
					BTF_KIND_TYPEDEF);
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, id) : NULL;

	if (t)
		t = btf__type_by_id(btf, t->type);	/* the pointer */
	if (t && btf_is_ptr(t))
		t = btf__type_by_id(btf, t->type);
	if (!t || !btf_is_func_proto(t))
		return -ENOENT;
	return btf_vlen(t) >= 3;
}

/* The byte offset of member name of struct sname in btf; -1 if none. */
static long btf_member_offset(const struct btf *btf, const char *sname,
			      const char *name)
{
	int id = btf__find_by_name_kind(btf, sname, BTF_KIND_STRUCT);
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, id) : NULL;
	const struct btf_member *m = t ? btf_members(t) : NULL;

	for (int i = 0; t && i < btf_vlen(t); i++, m++)
		if (!strcmp(btf__name_by_offset(btf, m->name_off), name))
			return btf_member_bit_offset(t, i) / 8;
	return -1;
}

int pair_exit_detect(struct pair_exit_offsets *o)
{
	int has = group_dead_in_format(), fmt_err = has;
	struct btf *btf = NULL;
	long sig, live;

	memset(o, 0, sizeof(*o));
	/* The kernel's BTF, readable by every user, answers when tracefs
	 * cannot; it is parsed only then, or for a kernel without
	 * group_dead: the tools otherwise start without reading it. */
	if (has < 0 || !has) {
		btf = btf__load_vmlinux_btf();
		if (!btf) {
			if (has < 0)
				tool_err("cannot tell a process's last thread at "
					 "its exit: cannot read the "
					 "sched_process_exit tracepoint's format "
					 "(%s), and no kernel BTF (%s)",
					 strerror(-fmt_err), strerror(errno));
			else
				tool_err("cannot tell a process's last thread at "
					 "its exit: no group_dead in "
					 "sched_process_exit, and no kernel BTF "
					 "(%s)", strerror(errno));
			return -ENOENT;
		}
	}
	if (has < 0)
		has = group_dead_in_btf(btf);
	if (has > 0) {
		/* The raw tracepoint's ctx is its arguments, a u64 each:
		 * group_dead is args[1]. */
		o->group_dead_off = sizeof(__u64);
		btf__free(btf);
		return 0;
	}
	/* A kernel before group_dead (Linux 6.16): its BTF says where a
	 * task's count of live threads is. */
	sig = btf_member_offset(btf, "task_struct", "signal");
	live = btf_member_offset(btf, "signal_struct", "live");
	btf__free(btf);
	if (sig < 0 || live < 0) {
		tool_err("cannot tell a process's last thread at its exit: the "
			 "kernel's BTF has no task_struct.signal or "
			 "signal_struct.live");
		return -ENOENT;
	}
	o->task_signal_off = sig;
	o->signal_live_off = live;
	return 0;
}

int pair_exit_attach(struct bpf_program *prog, struct bpf_link **link)
{
	int err;

	*link = bpf_program__attach_raw_tracepoint(prog, "sched_process_exit");
	if (*link)
		return 0;
	err = -errno;
	if ((err != -EACCES && err != -EPERM) ||
	    !privilege_error("cannot attach to sched_process_exit", -1))
		tool_err("cannot attach to the raw tracepoint "
			 "sched_process_exit: %s", strerror(-err));
	return err;
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

void loss_report(const struct output *o, const char *noun,
		 const unsigned long long *n, int nkinds)
{
	static const char *const what[PAIR_NCOUNTS] = {
		[PAIR_DROPPED] = "dropped (table full)",
		[PAIR_RECLAIMED] = "reclaimed (thread or process exited)",
	};
	static const char *const key[PAIR_NCOUNTS] = {
		[PAIR_DROPPED] = "dropped",
		[PAIR_RECLAIMED] = "reclaimed",
	};

	if (o->json)
		printf(", \"%s\": {", noun);
	for (int k = 0; k < nkinds && k < PAIR_NCOUNTS; k++) {
		if (o->json)
			printf("%s\"%s\": %llu", k ? ", " : "", key[k], n[k]);
		else if (n[k])
			printf("%llu %s %s\n", n[k], noun, what[k]);
	}
	if (o->json)
		putchar('}');
}

void hist_report(const struct output *o, const char *noun, __u64 *dropped)
{
	unsigned long long n = __atomic_exchange_n(dropped, 0, __ATOMIC_SEQ_CST);

	loss_report(o, noun, &n, 1);
}

/* run_loop()'s trailer: the lost STARTs of a pair tool, then the values
 * a histogram tool had no room for. */
struct loop_report {
	struct pair_report pair;
	const struct common_args *a;
};

static void loop_report(struct output *o, void *ctx)
{
	struct loop_report *r = ctx;

	if (r->pair.counts)
		pair_report(o, &r->pair);
	if (r->a->hist_dropped)
		hist_report(o, r->a->hist_noun, r->a->hist_dropped);
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

/* --- the output loop ------------------------------------------------ */

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

enum wake { WAKE_TIME, WAKE_SIGNAL, WAKE_EXIT };

/*
 * Sleep until the monotonic time until_ns (< 0: no limit), a signal, or
 * the target's exit.  SIGINT and SIGTERM are blocked except inside
 * ppoll(), so one sent at any moment ends the very next wait.
 */
static enum wake wait_until(const struct target *t, const sigset_t *mask,
			    long long until_ns)
{
	struct pollfd pfd = { .fd = t->pidfd, .events = POLLIN };

	for (;;) {
		struct timespec ts, *tmo = NULL;
		long long left = until_ns < 0 ? -1 : until_ns - now_ns();
		int n;

		if (got_signal)
			return WAKE_SIGNAL;
		if (t->pid > 0 && t->pidfd < 0 && kill(t->pid, 0) < 0 &&
		    errno == ESRCH)
			return WAKE_EXIT;
		if (until_ns >= 0 && left <= 0)
			return WAKE_TIME;
		/* Without a pidfd (kernels before 5.3), look at the target
		 * every 100 ms, as the bcc/ tools do. */
		if (t->pid > 0 && t->pidfd < 0 &&
		    (left < 0 || left > 100000000LL))
			left = 100000000LL;
		if (left >= 0) {
			ts.tv_sec = left / 1000000000LL;
			ts.tv_nsec = left % 1000000000LL;
			tmo = &ts;
		}
		n = ppoll(t->pidfd >= 0 ? &pfd : NULL, t->pidfd >= 0, tmo, mask);
		if (n > 0)
			return WAKE_EXIT;
		if (n < 0 && errno != EINTR) {
			tool_err("cannot wait: %s", strerror(errno));
			return WAKE_SIGNAL;
		}
	}
}

/* Probe hits so far: the sum of every CPU's slot of histogram.bpf.h's
 * hits map; -errno when it cannot be read. */
static long long hits_total(const struct bpf_map *map)
{
	int ncpus = libbpf_num_possible_cpus();
	unsigned long long *v, sum = 0;
	__u32 zero = 0;
	int err;

	if (ncpus <= 0)
		return ncpus ? ncpus : -EINVAL;
	v = calloc(ncpus, sizeof(*v));
	if (!v)
		return -ENOMEM;
	err = bpf_map__lookup_elem(map, &zero, sizeof(zero), v, ncpus * sizeof(*v), 0);
	for (int i = 0; !err && i < ncpus; i++)
		sum += v[i];
	free(v);
	return err ? (err < 0 ? err : -err) : (long long)sum;
}

struct collect_print {
	collect_fn collect;
	void *ctx;
};

static int print_hists(void *ctx, struct output *out)
{
	struct collect_print *cp = ctx;
	struct hist_entry *e = NULL;
	int n = cp->collect(cp->ctx, &e);

	if (n < 0)
		return n;
	output_emit(out, e, n);
	free(e);
	return 0;
}

static int emit(struct output *out, print_fn print, void *ctx)
{
	int err = print(ctx, out);

	if (err < 0) {
		tool_err("cannot read the histograms: %s", strerror(-err));
		return 1;
	}
	return 0;
}

void target_where(const struct target *t, char *out, size_t len)
{
	if (t->pid > 0)
		snprintf(out, len, "PID %d (%s)", (int)t->pid, t->comm);
	else
		snprintf(out, len, "%s (every process)", t->exe);
}

/*
 * Past --max-rate: detach every probe first, so the histograms read next
 * are final and the target stops paying for hits at once, then print
 * them and one line on stderr saying why tracing ended.  Exit status 0:
 * the guard did what it was asked, and what was printed is valid.
 */
static int stop_over_budget(const struct common_args *a, struct output *out,
			    print_fn print, void *ctx, double rate)
{
	long long total;

	if (a->detach)
		a->detach(a->detach_ctx);
	else
		bpf_object__detach_skeleton(a->skel);
	total = hits_total(a->hits);
	if (emit(out, print, ctx))
		return 1;
	fflush(stdout);
	fprintf(stderr, "%s: %.0f probe hits/s is over --max-rate %ld; detached after %lld "
		"hits\n", command_name(), rate, a->max_rate, total);
	return 0;
}

int run_loop(const struct common_args *a, const struct target *t,
	     const char *what, collect_fn collect, void *ctx)
{
	struct collect_print cp = { collect, ctx };
	char ready[sizeof(t->exe) + 512];

	if (t->pid > 0)
		snprintf(ready, sizeof(ready), "Tracing %s of PID %d (%s)", what,
			 (int)t->pid, t->comm);
	else
		snprintf(ready, sizeof(ready), "Tracing %s of %s (every "
			 "process)", what, t->exe);
	return run_loop_print(a, t, ready, print_hists, &cp);
}

int run_loop_print(const struct common_args *a, const struct target *t,
		   const char *ready, print_fn print, void *ctx)
{
	struct loop_report report = { .pair.counts = a->pair_counts, .a = a };
	struct output out = { .tool = tool_name, .pid = t->pid,
			      .binary = t->exe, .json = a->json,
			      .timestamp = a->timestamp, .empty = a->empty,
			      .trailer = a->pair_counts || a->hist_dropped ?
					 loop_report : NULL,
			      .trailer_ctx = &report };
	struct sigaction sa = { .sa_handler = on_signal };
	long long start, end = -1, next = -1, check = -1, last_check, hits, last_hits = 0;
	double rate;
	sigset_t block, mask;
	long left = a->count;
	enum wake why;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &mask);
	sigdelset(&mask, SIGINT);
	sigdelset(&mask, SIGTERM);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	fprintf(a->json ? stderr : stdout, "%s... Hit Ctrl-C to end.\n", ready);
	fflush(a->json ? stderr : stdout);

	start = now_ns();
	if (a->duration)
		end = start + a->duration * 1000000000LL;
	if (a->interval)
		next = start + a->interval * 1000000000LL;
	if (a->max_rate)
		check = start + MAX_RATE_WINDOW_NS;
	last_check = start;
	for (;;) {
		long long until = next, now;

		if (end >= 0 && (until < 0 || end < until))
			until = end;
		if (check >= 0 && (until < 0 || check < until))
			until = check;
		why = wait_until(t, &mask, until);
		if (why != WAKE_TIME)
			break;
		now = now_ns();
		if (check >= 0 && now >= check) {
			hits = hits_total(a->hits);
			if (hits < 0) {
				tool_err("cannot read the hit counter: %s", strerror((int)-hits));
				return 1;
			}
			rate = (double)(hits - last_hits) * 1e9 / (double)(now - last_check);
			if (rate > (double)a->max_rate)
				return stop_over_budget(a, &out, print, ctx, rate);
			last_hits = hits;
			last_check = now;
			check = now + MAX_RATE_WINDOW_NS;
		}
		if (end >= 0 && now >= end)
			break;
		if (next < 0 || now < next)
			continue;
		if (emit(&out, print, ctx))
			return 1;
		next += a->interval * 1000000000LL;
		if (left && --left == 0)
			return 0;
	}
	if (emit(&out, print, ctx))
		return 1;
	if (why == WAKE_EXIT) {
		fflush(stdout);
		fprintf(stderr, "%s: PID %d (%s) exited; tracing ended\n",
			command_name(), (int)t->pid, t->comm);
	}
	return 0;
}
