// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_options.c: a tool's command line: its name, errors, strict numbers,
 * --help and getopt_long()'s tables made from its one option table, and
 * libbpf's log.
 * (declared in tool_options.h; libbpf/README.md lists the rooms and
 * which may call which).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "pair_state.h"
#include "probekit_common.spec.h"
#include "probekit_version.h"
#include "tool_options.h"


/* What the tool needs (its SPEC_CLI's, from specs/privileges.toml);
 * a program that parses no tool command line (the exporter) keeps a
 * uprobe perf event's needs.  tool_priv.c reads them. */
const struct tool_cap *tool_needs_own = SPEC_NEEDS_UPROBE,
		      *tool_needs_other = SPEC_NEEDS_UPROBE_OTHER,
		      *tool_needs_multi_own, *tool_needs_multi_other;

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
 * binary: specs/common.toml, which the bcc/ tools read too. */
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
 * option, or one missing its argument; a short option the tool no longer
 * takes gets the line that names its new spelling. */
static void option_error(const struct tool_cli *cli, char **argv,
			 const char *shortopts)
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
		for (const struct tool_retired *r = cli->retired; r && r->key;
		     r++)
			if (r->key == optopt) {
				tool_err("%s", r->line);
				exit(2);
			}
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
			usage_error("-p/--pid: " MSG_PID_INVALID, arg);
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

/* The keys of the options given, each once: what cli->rules are held to. */
struct given {
	int key[64];
	int n;
};

static bool given_has(const struct given *gv, int key)
{
	for (int i = 0; i < gv->n; i++)
		if (gv->key[i] == key)
			return true;
	return false;
}

static void given_add(struct given *gv, int key)
{
	if (!given_has(gv, key) && gv->n < (int)(sizeof(gv->key) / sizeof(gv->key[0])))
		gv->key[gv->n++] = key;
}

static void rules_check(const struct tool_rule *rules, const struct given *gv)
{
	for (const struct tool_rule *r = rules; r && r->key; r++)
		if (given_has(gv, r->key) && given_has(gv, r->other) == r->conflicts)
			usage_error("%s", r->line);
}

void parse_options(const struct tool_cli *cli, struct common_args *a,
		   int argc, char **argv)
{
	struct getopt_tables g;
	struct given gv = { .n = 0 };
	int c, unit_given = 0;

	build_tables(cli, &g);
	if (cli->needs)
		tool_needs_own = cli->needs;
	if (cli->needs_other)
		tool_needs_other = cli->needs_other;
	tool_needs_multi_own = cli->needs_multi;
	tool_needs_multi_other = cli->needs_multi_other;
	a->max_inflight = PAIR_INFLIGHT_DEFAULT;
	a->max_keys = HIST_KEYS_MAX;
	a->empty = cli->empty;
	a->hist_noun = cli->hist_noun;
	for (size_t i = 0; cli->unit && i < NUNITS; i++)
		if (!strcmp(units[i].unit, cli->unit))
			set_unit(a, &units[i]);
	opterr = 0;
	while ((c = getopt_long(argc, argv, g.shortopts, g.longopts,
				NULL)) != -1) {
		if (c == '?')
			option_error(cli, argv, g.shortopts);
		if (common_option(cli, a, c, optarg) ||
		    (cli->unit && unit_option(a, c, &unit_given)))
			continue;
		given_add(&gv, c);
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
		usage_error("%s", SPEC_TARGET_BOTH);
	if (!a->pid && !a->path)
		usage_error(SPEC_TARGET_MISSING, cli->binary ?
			    SPEC_TARGET_BOTH_WAYS : SPEC_TARGET_PID);
	rules_check(cli->rules, &gv);
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

