// SPDX-License-Identifier: BSD-2-Clause
/*
 * trace_helpers.h: what every probekit libbpf tool needs besides its BPF
 * programs, one header over the six rooms that define it (tool_options.c,
 * tool_priv.c, tool_target.c, tool_attach.c, tool_drain.c, tool_loop.c;
 * libbpf/README.md says which may call which): the options all tools share, strict number parsing, finding
 * the target process and its binary, attaching USDT probes and uprobes
 * with one clear error line, and the output loop that ends on Ctrl-C,
 * after -d or count intervals, when the target exits, or past --max-rate.
 *
 * Options, messages and the loop follow bcc/probekit_bcc.py, so that a
 * libbpf tool is a drop-in for its bcc/ twin.
 */
#ifndef PROBEKIT_TRACE_HELPERS_H
#define PROBEKIT_TRACE_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

#include "histogram.h"
#include "pair_state.h"

struct bpf_program;
struct bpf_link;
struct bpf_map;
struct bpf_object;
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
/* -b PATH: every process that runs the executable or library at path,
 * now or later.  pid is -1 and pidfd -1; exe is path made absolute.
 * One line and -errno when path is not a readable regular file. */
int target_open_path(struct target *t, const char *path);
void target_close(struct target *t);

/* After target_open(): when the process has exited since (it is gone,
 * or a zombie), print "PID N (COMM) exited while its probes were being
 * attached" and return true, so that a failure it caused (ENOENT,
 * ESRCH) is reported as what it is; false, printing nothing, when it
 * is alive or t is -b's. */
bool target_exited_during_attach(const struct target *t);

/* One line for a failed skeleton open or load of a tool tracing t (err
 * is -errno); for a lack of privilege, the capabilities missing. */
void report_load_error(const struct target *t, int err);
/* The same for a failed load of obj, except where its programs call a
 * helper this kernel lacks: then one line naming it (and the release that
 * brought it), not the verifier's refusal. */
void report_object_load_error(const struct target *t,
			      struct bpf_object *obj, int err);
/* Whether this kernel has the bpf_loop() helper (Linux 5.17 and later),
 * with which the io__batch programs and the exporter walk a batch's
 * records: asked of the kernel (a probe load), not read from its version.
 * Only a kernel that refuses it is "no": where the probe cannot tell (no
 * privilege to load), the tool goes on and its load reports why. */
bool kernel_has_bpf_loop(void);
/* The one line iolatency and iosize print when the kernel has no
 * bpf_loop(), before reading each I/O's io__submit and io__done instead
 * of io__batch (as --per-io does); exact either way. */
void say_batch_fallback(void);

/* Before load, and after the tool's tracefs reads (the thread's first
 * registration holds the lock they take, through its wait): start
 * paying, in a thread, the grace period that the first uprobe attach
 * would wait (tool_attach.c says how); after the
 * last attach, before the readiness line: attach_warm_stop() (which
 * run_loop_print() calls).  Failures only lose the head start. */
void attach_warm_start(void);
void attach_warm_stop(void);

/* When this process lacks a capability that tracing pid needs (the
 * tool's, specs/privileges.toml; pid <= 0: every process running a
 * file), print "WHAT: permission denied: tracing ... needs root, or ...;
 * this process lacks ..." and return true; else print nothing and return
 * false, for the caller to report its error as it is. */
bool report_denied(const char *what, pid_t pid);

/* Attach prog to the USDT probe provider:name of the target.  On failure
 * print one line naming the probe and the reason; return -errno. */
int attach_usdt(struct bpf_program *prog, const struct target *t,
		const char *provider, const char *name, struct bpf_link **link);

/* Attach prog to the entry (retprobe false) or return of function func in
 * the target's binary.  Same error handling as attach_usdt(). */
int attach_uprobe(struct bpf_program *prog, const struct target *t,
		  const char *func, bool retprobe, struct bpf_link **link);

/* Return once every BPF program run that began before the call has
 * returned, so that a buffer the programs no longer choose can be read
 * whole (one RCU grace period; tool_drain.c says how, and what happens
 * where the kernel refuses it). */
void probes_quiesce(void);
/*
 * The hits of one interval from map, a DRAINED_HASH (histogram.bpf.h):
 * swap its two hashes, wait until no program can still write the old
 * one, then read and empty it.  Exact: a hit at the interval's end counts
 * in this interval or the next, never in neither.  On success returns
 * how many entries, with their keys (the hash's key_size bytes each) in
 * *keys and their values (vsz bytes each) in *vals (the caller frees
 * both); -errno on failure.
 */
int drained_hash_take(const struct bpf_map *map, size_t vsz, void **keys,
		      void **vals);
/* Before load: size both hashes of a DRAINED_HASH to max_entries,
 * register them for drained_hash_take(), and create the maps so that a
 * thread sets the slot while the verifier runs (tool_drain.c says why;
 * where they cannot be created here, libbpf creates them at load); 0 or
 * -errno.
 * DRAINED_HASH_INIT(skel->maps, name, n) for DRAINED_HASH(name, ...). */
int drained_hash_init(struct bpf_map *outer, struct bpf_map *a,
		      struct bpf_map *b, __u32 max_entries);
#define DRAINED_HASH_INIT(maps, name, n)				\
	drained_hash_init((maps).name, (maps).name##_a, (maps).name##_b, (n))
/* After load, before attaching: return once each DRAINED_HASH's slot 0
 * is set (set here if libbpf made the maps); 0, or -errno once one line
 * has said what failed: the only place a failed set is seen, since a
 * slot a lookup finds set was set by a store that succeeded.
 * drained_hash_ready(), before the readiness line (run_loop_print()
 * calls it), joins the threads. */
int drained_hash_arm(void);
void drained_hash_ready(void);
/* drained_hash_take() for a hash whose values are struct hist. */
int hist_map_drain(const struct bpf_map *map, void **keys,
		   struct hist **hists);
/* hist_map_drain() into keys and hists, with the entries for them
 * allocated (one at least, for an empty result's header): the number of
 * keys, or -errno.  hist_entries_done() sorts the n filled entries, frees
 * keys and hists, hands the entries out, and returns how many to print
 * (proto alone when n is 0). */
int hist_entries_drain(const struct bpf_map *map, void **keys,
		       struct hist **hists, struct hist_entry **e);
int hist_entries_done(struct hist_entry *e, int n, void *keys,
		      struct hist *hists, const struct hist_entry *proto,
		      struct hist_entry **out);

/*
 * For maps keyed by one NUL-terminated name of key_len bytes (a bdev, an
 * RPC method): read and clear them into sorted entries, copies of proto
 * with the key "key_name = NAME", or proto alone when the map is empty
 * (output_emit()).  Returns how many (*out to be freed) or -errno.
 */
int collect_by_name(const struct bpf_map *map, const char *key_name,
		    const struct hist_entry *proto, struct hist_entry **out);

/* The histograms of one interval: the tool reads (and clears) its maps
 * into entries, returns how many (at least one: output_emit()), or
 * -errno. */
typedef int (*collect_fn)(void *ctx, struct hist_entry **entries);

/*
 * The output loop.  Prints "Tracing WHAT of PID N (comm)... Hit Ctrl-C to
 * end." ("of every process running PATH" for -b; stdout, or stderr with
 * --json): call it only once everything is
 * attached, since that line is the tools' readiness signal.  Then prints
 * collect()'s histograms every interval; ends after count intervals,
 * after -d, on SIGINT or SIGTERM (printing what was collected), or when
 * the target exits (the same, plus one line on stderr).  With --max-rate,
 * checks the probe hits of every MAX_RATE_WINDOW_NS; past the budget it
 * detaches the probes, prints what was collected and one line on stderr.
 * Returns the exit status: 0, or 1 if collecting failed.
 */
int run_loop(const struct common_args *a, const struct target *t,
	     const char *what, collect_fn collect, void *ctx);

/* One interval's output, for tools that print more than histograms
 * (output_begin() starts it): 0, or -errno when reading the maps failed. */
typedef int (*print_fn)(void *ctx, struct output *o);

/* run_loop() for the generic tools: the readiness line is ready followed
 * by "... Hit Ctrl-C to end.", and print() prints each interval. */
int run_loop_print(const struct common_args *a, const struct target *t,
		   const char *ready, print_fn print, void *ctx);

/* The byte offset of field in the record of tracepoint event
 * ("group/name"), from its tracefs format, or, when tracefs is not
 * readable, of member in the kernel's struct sname from the kernel's BTF
 * (parsing it costs tens of ms, so the format comes first).  >= 0, or
 * one line and -errno. */
long tracepoint_field_offset(const char *event, const char *field,
			     const char *sname, const char *member);

/* --- pair tools (pair_state.h) -------------------------------------- */

/* pair_state.bpf.h's rodata, found on the running kernel. */
struct pair_exit_offsets {
	__u32 group_dead_off;	/* group_dead in the raw tracepoint's args */
	__u32 task_signal_off;	/* else task_struct.signal, */
	__u32 signal_live_off;	/* and signal_struct.live */
};

/*
 * How pair_state.bpf.h tells a process's last thread at
 * sched_process_exit on this kernel: the tracepoint's group_dead argument
 * when it has one (its tracefs format says, or, when tracefs is not
 * readable, the kernel's BTF), else the task offsets from the BTF.
 * 0, or one line and -errno.
 */
int pair_exit_detect(struct pair_exit_offsets *o);

/* Attach a tool's sched_process_exit program, a raw tracepoint (no
 * tracefs needed): 0, or one line and -errno. */
int pair_exit_attach(struct bpf_program *prog, struct bpf_link **link);

/*
 * The STARTs lost since the last report, as each interval's output ends
 * (output.trailer; run_loop() installs it when a->pair_counts is set):
 * in text "N starts dropped (table full)" and "N starts reclaimed
 * (thread or process exited)", each only when N > 0; in JSON, always,
 * '"starts": {"dropped": N, "reclaimed": M}'.  bcc/probekit_bcc.py's
 * PairReport prints the same.
 */
struct pair_report {
	const struct bpf_map *counts;
	unsigned long long seen[PAIR_NCOUNTS];	/* totals reported */
};
void pair_report(struct output *o, void *report);

/*
 * What a tool lost in one interval, said as its output ends, for the
 * first nkinds counts n[] (indexed by enum pair_count): in text
 * "N NOUN dropped (table full)" and "N NOUN reclaimed (thread or process
 * exited)", each only when N > 0; in JSON, always, ', "NOUN":
 * {"dropped": N[, "reclaimed": M]}'.  pair_report() says it of "starts",
 * usdtcount -S of "strings"; bcc/probekit_bcc.py's loss_report() the same.
 */
void loss_report(const struct output *o, const char *noun,
		 const unsigned long long *n, int nkinds);

/*
 * The values a histogram tool's map had no room for since the last
 * report, taken from *a->hist_dropped (histogram.bpf.h's hist_dropped)
 * as each interval's output ends: loss_report() of a->hist_noun, "N I/Os
 * dropped (table full)".  With a->hist_busy (blktgt_io.bpf.h's), also
 * what io__batch hits could not read (toolspec.LOSSES): "N I/Os
 * dropped (batch buffer held by a preempted run)", "N I/Os dropped
 * (unreadable batch)" and "N batches dropped (count unreadable or out of
 * range)", in JSON ', "I/Os": {"dropped": N, "busy": M, "unreadable": K},
 * "batches": {"bad_count": B}', every key always.  run_loop() says it
 * when a->hist_dropped is set, after the histograms are read, so a value
 * dropped meanwhile is not lost.  With a->hist_bdevs_merged, once a hit
 * has passed them, also what io__batch's name table merges, as the last
 * hit said: MSG_BDEVS_NAME_CUT and MSG_BDEVS_OTHER, each when not 0, in
 * JSON ', "bdevs_merged": {"name_cut": N, "table_full": M}'.
 */
void hist_report(const struct output *o, const struct common_args *a);

/* "PID N (COMM)", or "PATH (every process)" for -b: where the generic
 * tools say they trace. */
void target_where(const struct target *t, char *out, size_t len);

#endif
