// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_options.h: the command line every probekit libbpf tool shares
 * (tool_options.c): the common options, a tool's own options and rules
 * as its spec declares them, strict number parsing, and the one-line
 * usage and error messages.  Options and messages follow
 * doc/output.md, so that a libbpf tool is a drop-in for its bcc/
 * twin.
 */
#ifndef PROBEKIT_TOOL_OPTIONS_H
#define PROBEKIT_TOOL_OPTIONS_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>

struct bpf_map;
struct bpf_object_skeleton;

/* The tool's name ("iolatency"), as --json names it; each tool sets it. */
extern const char *tool_name;

/* The command it is run as, probekit-TOOL (README.md, "Names"): what
 * messages and --version start with. */
const char *command_name(void);

/* "tool: message" on stderr. */
void tool_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* s as an error line may echo it: control characters (a newline in a
 * probe name) as \n, \t, \r or \xHH, so the error stays one line; at
 * most 300 bytes of s.  Valid until the fourth call after. */
const char *escaped(const char *s);

/* A usage error: one line "tool: message (see --help)", exit 2. */
void usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

/*
 * Parse a whole string as a decimal integer in [min, max].  Unlike a bare
 * strtol(), "abc", "12x", " 1", "" and out-of-range values are refused:
 * -EINVAL or -ERANGE.
 */
int parse_long(const char *s, long min, long max, long *out);

/* The options every tool takes. */
struct common_args {
	pid_t pid;		/* -p PID (required, unless -b is taken) */
	const char *path;	/* -b PATH: every process running PATH */
	bool timestamp;		/* -T */
	bool json;		/* -j, --json */
	bool verbose;		/* -v: libbpf's own messages */
	long duration;		/* -d SECS, 0 = none */
	long interval;		/* [interval], 0 = only at the end */
	long count;		/* [count], 0 = no limit */
	const char *unit;	/* -m/-u/-n: "msecs", "usecs" or "nsecs" */
	unsigned long long unit_ns;	/* nanoseconds per unit */
	long max_rate;		/* --max-rate HITS_PER_S, 0 = no limit */
	/* For --max-rate, set by the tool before run_loop(): histogram.bpf.h's
	 * hits map (count_hits set before load) and the skeleton to detach,
	 * or, for links made outside the skeleton, detach(detach_ctx). */
	const struct bpf_map *hits;
	struct bpf_object_skeleton *skel;
	void (*detach)(void *detach_ctx);
	void *detach_ctx;
	/* Pair tools (cli->pairs): --max-inflight N, the in-flight table's
	 * size (PAIR_INFLIGHT_DEFAULT unless given); and, set by the tool
	 * before run_loop(), pair_state.bpf.h's pair_counts, which each
	 * interval's output reports (pair_report()). */
	long max_inflight;
	const struct bpf_map *pair_counts;
	/* Histogram tools (cli->hists): --max-keys N, the histogram map's
	 * size (HIST_KEYS_MAX unless given); and, set by the tool before
	 * run_loop(), histogram.bpf.h's hist_dropped (in the skeleton's bss),
	 * which each interval's output reports (hist_report()) as values of
	 * hist_noun (cli->hist_noun, "I/Os"); for a tool that reads
	 * io__batch, also blktgt_io.bpf.h's hist_busy, hist_unreadable and
	 * hist_bad_count, what it could not read of batches, by reason
	 * (NULL for the others); and, when it labels records by bdev (-B),
	 * blktgt_io.bpf.h's hist_bdevs_merged (NULL otherwise). */
	long max_keys;
	__u64 *hist_dropped;
	__u64 *hist_busy, *hist_unreadable, *hist_bad_count;
	__s64 *hist_bdevs_merged;
	const char *hist_noun;
	/* The tool's empty result, from its tool_cli (struct output's). */
	const char *empty;
	/* -b PATH followed (usdt_sites.h's usdt_watch), set by the tool
	 * before run_loop(): when follow_fd polls readable, the loop calls
	 * follow(follow_ctx) between intervals.  follow NULL: none. */
	int follow_fd;
	void (*follow)(void *follow_ctx);
	void *follow_ctx;
};

/* --max-rate: the largest budget taken, and the window the rate is
 * measured over (the budget is checked at the end of every window). */
/* MAX_RATE_LIMIT: specs/limits.toml. */
#include "probekit_limits.h"
#define MAX_RATE_WINDOW_NS 1000000000LL

/*
 * One option, declared once: getopt_long()'s short-option string, its
 * long options and the --help lines are all made from these.  key is the
 * short option's letter, or OPT_LONG_ONLY + n for an option without one.
 * arg names the option's argument in --help; NULL when it takes none.
 * help may hold '\n': each further line is indented to the help column.
 */
struct tool_option {
	int key;
	const char *name;
	const char *arg;
	const char *help;
};

enum {
	OPT_VERSION = 256,	/* --version: no short form, as in bcc/ */
	OPT_MAX_RATE,		/* --max-rate: no short form, as in bcc/ */
	OPT_MAX_INFLIGHT,	/* --max-inflight: pair tools, as in bcc/ */
	OPT_GATE,		/* --gate: the tools on any binary, which take
				 * it in their option callback */
	OPT_MAX_KEYS,		/* --max-keys: histogram tools, as in bcc/ */
	OPT_LONG_ONLY = 512,	/* the first key of a tool's long-only option */
};

/* A short option the tool no longer takes (its spec's [[retired]]): line,
 * "-f is not --function any more: ...; write --function", is what the
 * tool says to it, after its name; exit 2.  An array ends in key 0. */
struct tool_retired {
	int key;
	const char *line;
};

/* A capability, by number and name; an array of them ends in name NULL. */
struct tool_cap {
	int cap;
	const char *name;
};

/* What this tool needs to trace its own user's processes, and another
 * user's: set by parse_options() (tool_options.c) from the tool's spec,
 * read by tool_priv.c's permission-denied line. */
extern const struct tool_cap *tool_needs_own, *tool_needs_other;
/* The same where the libbpf in use attaches USDT probes with multi-uprobe
 * links (specs/privileges.toml's libbpf_usdt); NULL: no different. */
extern const struct tool_cap *tool_needs_multi_own, *tool_needs_multi_other;

/* What a tool's command line is. */
/* A cross-option rule of a tool's spec (toolspec.RULES): key given
 * without other (or, for conflicts, with it) is refused with line, a
 * usage error. */
struct tool_rule {
	int key, other;
	bool conflicts;
	const char *line;
};

struct tool_cli {
	/* --help up to its option list: "usage: ...", the description.
	 * The usage line stays written out: it groups options ([-m|-u|-n],
	 * [-L [-W WIDTH]]) in ways the table does not know. */
	const char *synopsis;
	/* The tool's own options, after the common ones; ends with { 0 }. */
	const struct tool_option *options;
	/* -m/-u/-n are taken, this unit ("usecs") the default; NULL: not. */
	const char *unit;
	/* The lines after "examples:". */
	const char *examples;
	/* Called for each of the tool's own options, with its argument
	 * (NULL if it takes none); bad values are usage errors. */
	void (*option)(int key, const char *arg);
	/* Tools on any USDT binary: -b PATH may stand for -p PID, and the
	 * help says "this process", not "this blktgt process". */
	bool binary;
	/* NULL, or offered each positional argument in turn before
	 * [interval [count]]: true when the tool took it (usdtlat's START
	 * and DONE).  The first one refused starts [interval [count]]. */
	bool (*operand)(const char *arg);
	/* Tools that pair a START with its DONE: --max-inflight is taken. */
	bool pairs;
	/* Tools with a map of histograms by key: --max-keys is taken. */
	bool hists;
	/* What tracing a process of this user needs without root, and what
	 * tracing another user's does (specs/privileges.toml): the
	 * privilege errors name them. */
	const struct tool_cap *needs, *needs_other;
	/* What they are where the libbpf in use attaches USDT probes with
	 * multi-uprobe links, when that differs (else NULL). */
	const struct tool_cap *needs_multi, *needs_multi_other;
	/* What the output says under its header when an interval saw
	 * nothing ("0 I/Os": the spec's counts); NULL: the tool says it
	 * itself. */
	const char *empty;
	/* Histogram tools: what one value is, plural, in the drop line
	 * ("I/Os": the spec's values, else its counts). */
	const char *hist_noun;
	/* Short options it no longer takes, each refused with its line;
	 * NULL: none. */
	const struct tool_retired *retired;
	/* Its options' cross-option rules, ending with { 0 }; NULL: none. */
	const struct tool_rule *rules;
};

/*
 * Parse argv: the common options into *a, the tool's own through
 * cli->option, its operands through cli->operand, then [interval
 * [count]]; check that -p (or, for cli->binary, -b) was given, then
 * cli->rules.  A tool's own option keeps the value its tool gave it
 * (its spec's SPEC_DEFAULT_*) unless given.  -h
 * prints --help and exits 0, --version prints "TOOL (probekit) VERSION"
 * and exits 0; a bad option or value is a usage error.
 */
void parse_options(const struct tool_cli *cli, struct common_args *a,
		   int argc, char **argv);

/* Parse "-W"-style positive numbers: a usage error unless 1..max. */
long positive_arg(const char *what, const char *arg, long max);

/* libbpf's own messages go to stderr only with -v; otherwise a failure
 * is reported in one line of the tool's own. */
void libbpf_quiet(bool verbose);

#endif
