// SPDX-License-Identifier: BSD-2-Clause
/*
 * trace_helpers.h: what every probekit libbpf tool needs besides its BPF
 * programs: the options all tools share, strict number parsing, finding
 * the target process and its binary, attaching USDT probes and uprobes
 * with one clear error line, and the output loop that ends on Ctrl-C,
 * after -d or count intervals, or when the target exits.
 *
 * Options, messages and the loop follow bcc/probekit_bcc.py, so that a
 * libbpf tool is a drop-in for its bcc/ twin.
 */
#ifndef PROBEKIT_TRACE_HELPERS_H
#define PROBEKIT_TRACE_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "histogram.h"

struct bpf_program;
struct bpf_link;
struct bpf_map;

/* The tool's name ("iolatency"), as --json names it; each tool sets it. */
extern const char *tool_name;

/* The command it is run as, probekit-TOOL (README.md, "Names"): what
 * messages and --version start with. */
const char *command_name(void);

/* "tool: message" on stderr. */
void tool_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

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
	pid_t pid;		/* -p PID (required) */
	bool timestamp;		/* -T */
	bool json;		/* -j, --json */
	bool verbose;		/* -v: libbpf's own messages */
	long duration;		/* -d SECS, 0 = none */
	long interval;		/* [interval], 0 = only at the end */
	long count;		/* [count], 0 = no limit */
};

/* getopt_long() option letters and long options of the common options;
 * a tool appends its own.  --version has no short form: 'V' is returned
 * for it but is not in COMMON_SHORTOPTS, so -V stays an unknown option,
 * as in the bcc/ twins. */
#define COMMON_SHORTOPTS "hp:Td:jv"
#define COMMON_LONGOPTS							\
	{ "help", no_argument, NULL, 'h' },				\
	{ "version", no_argument, NULL, 'V' },				\
	{ "pid", required_argument, NULL, 'p' },			\
	{ "timestamp", no_argument, NULL, 'T' },			\
	{ "duration", required_argument, NULL, 'd' },			\
	{ "json", no_argument, NULL, 'j' },				\
	{ "verbose", no_argument, NULL, 'v' }
/* The help text of the common options, for a tool's usage message. */
#define COMMON_HELP							\
	"  -p, --pid PID        trace this blktgt process (required)\n"	\
	"  -T, --timestamp      include a timestamp on output\n"	\
	"  -d, --duration SECS  total duration of the trace, in seconds\n" \
	"  -j, --json           print JSON, one object per interval (schema:\n" \
	"                       bcc/probekit_bcc.py)\n"			\
	"  -v, --verbose        show libbpf's messages\n"			\
	"  -h, --help           show this help and exit\n"		\
	"      --version        show probekit's version and exit\n"	\
	"  interval             output interval, in seconds\n"		\
	"  count                number of outputs\n"

/* Handle one common option (c from getopt_long, with optarg); false when
 * c is not a common option.  Bad values are usage errors; --version prints
 * "TOOL (probekit) VERSION" and exits 0. */
bool common_option(struct common_args *a, int c, const char *arg);

/* Take [interval [count]] from argv[optind..], and check -p was given. */
void common_finish(struct common_args *a, int argc, char **argv, int optind);

/* The usage error for getopt_long()'s '?' (opterr = 0): an unknown
 * option, or one missing its argument.  shortopts is getopt's string. */
void option_error(char **argv, const char *shortopts)
	__attribute__((noreturn));

/* -m, -u, -n: the latency unit, mutually exclusive as in bcc/.  Returns
 * false when c is none of them; *given remembers which one was seen. */
bool unit_option(int c, char *given, const char **unit,
		 unsigned long long *unit_ns);

/* Parse "-W"-style positive numbers: a usage error unless 1..max. */
long positive_arg(const char *what, const char *arg, long max);

/* libbpf's own messages go to stderr only with -v; otherwise a failure
 * is reported in one line of the tool's own. */
void libbpf_quiet(bool verbose);

/* The process to trace: its PID, executable (the path to attach to) and
 * name.  target_open() prints one line and returns -errno when pid is not
 * a live process or cannot be inspected (for a lack of privilege, naming
 * the capabilities missing). */
struct target {
	pid_t pid;
	int pidfd;		/* to notice its exit; -1 if unsupported */
	char exe[4096];		/* its binary, as /proc/PID/exe resolves */
	char comm[256];		/* basename of exe, for messages */
};
int target_open(struct target *t, pid_t pid);
void target_close(struct target *t);

/* One line for a failed skeleton open or load of a tool tracing t (err
 * is -errno); for a lack of privilege, the capabilities missing. */
void report_load_error(const struct target *t, int err);

/* Attach prog to the USDT probe provider:name of the target.  On failure
 * print one line naming the probe and the reason; return -errno. */
int attach_usdt(struct bpf_program *prog, const struct target *t,
		const char *provider, const char *name, struct bpf_link **link);

/* Attach prog to the entry (retprobe false) or return of function func in
 * the target's binary.  Same error handling as attach_usdt(). */
int attach_uprobe(struct bpf_program *prog, const struct target *t,
		  const char *func, bool retprobe, struct bpf_link **link);

/*
 * Read and delete every histogram of a hash map whose values are struct
 * hist.  On success returns how many, with the keys (key_size bytes each)
 * in *keys and the histograms in *hists (the caller frees both); -errno
 * on failure.
 */
int hist_map_drain(const struct bpf_map *map, void **keys,
		   struct hist **hists);

/*
 * For maps keyed by one NUL-terminated name of key_len bytes (a bdev, an
 * RPC method): read and clear them into sorted entries, copies of proto
 * with the key "key_name = NAME".  Returns how many (*out to be freed)
 * or -errno.
 */
int collect_by_name(const struct bpf_map *map, const char *key_name,
		    const struct hist_entry *proto, struct hist_entry **out);

/* The histograms of one interval: the tool reads (and clears) its maps
 * into entries, returns how many, or -errno. */
typedef int (*collect_fn)(void *ctx, struct hist_entry **entries);

/*
 * The output loop.  Prints "Tracing WHAT of PID N (comm)... Hit Ctrl-C to
 * end." (stdout, or stderr with --json): call it only once everything is
 * attached, since that line is the tools' readiness signal.  Then prints
 * collect()'s histograms every interval; ends after count intervals,
 * after -d, on SIGINT or SIGTERM (printing what was collected), or when
 * the target exits (the same, plus one line on stderr).  Returns the exit
 * status: 0, or 1 if collecting failed.
 */
int run_loop(const struct common_args *a, const struct target *t,
	     const char *what, collect_fn collect, void *ctx);

#endif
