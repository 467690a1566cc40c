// SPDX-License-Identifier: BSD-2-Clause
/*
 * histogram.h: the histogram every probekit libbpf tool keeps, shared by
 * the BPF programs (which fill it) and user space (which prints it).
 *
 * A histogram is an array of counters indexed by slot; histogram.bpf.h
 * says how a value picks its slot.  Slots, text and JSON are those of the
 * bcc/ tools (doc/output.md documents them), so a libbpf tool and
 * its bcc/ twin print the same bytes for the same events.
 */
#ifndef PROBEKIT_HISTOGRAM_H
#define PROBEKIT_HISTOGRAM_H

#define HIST_LOG2_SLOTS   65	/* slot 1 + floor(log2(v)) of any u64 */
#define HIST_LINEAR_SLOTS 1000	/* slot v / width; the last one is open */
#define HIST_MAX_SLOTS    HIST_LINEAR_SLOTS

struct hist {
	__u64 slots[HIST_MAX_SLOTS];
};

#ifndef __bpf__
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#define HIST_MAX_KEYS   2	/* a histogram is split by up to two fields */
#define HIST_MAX_EXTRAS 2	/* counters shown after a histogram */

/* One histogram as printed: what it measures and how it is split. */
struct hist_entry {
	const char *name;		/* "latency", "size": JSON only */
	const char *unit;		/* column header: "usecs", "bytes" */
	bool linear;			/* linear slots of width, else log2 */
	unsigned long long width;
	int nkeys;			/* -B, -O: "bdev = x, type = y" */
	const char *key_names[HIST_MAX_KEYS];
	char key_vals[HIST_MAX_KEYS][64];
	int nextras;			/* funclat's "negative: N" */
	const char *extra_names[HIST_MAX_EXTRAS];
	unsigned long long extra_vals[HIST_MAX_EXTRAS];
	struct hist hist;
};

/* Sort entries by their key values, as the bcc/ tools order sections. */
void hist_sort(struct hist_entry *e, size_t n);

/* How one run of a tool prints its intervals. */
struct output {
	const char *tool;
	pid_t pid;			/* < 0: -b, every process running binary */
	const char *binary;
	bool json;			/* --json: one object per line */
	bool timestamp;			/* -T */
	const char *empty;		/* "0 I/Os": see output_emit() */
	unsigned long n;		/* intervals printed so far */
	/* NULL, or called by output_emit() after the histograms: in JSON
	 * before the object closes (it prints ', "key": value'), in text
	 * after the last line (it prints whole lines). */
	void (*trailer)(struct output *o, void *ctx);
	void *trailer_ctx;
};

/* Print one interval's histograms (n entries, sorted) as text or JSON,
 * then flush stdout.  Empty histograms are left out.  When none is left,
 * the text is e[0]'s header and the line o->empty (an interval that saw
 * nothing says so, as the bcc/ twin does), the JSON an empty
 * "histograms" list; so a collector returns at least one entry, its
 * prototype without counts when it read none. */
void output_emit(struct output *o, const struct hist_entry *e, size_t n);

/* For tools that print more than histograms: start one interval, as
 * output_emit() does.  JSON: '{"tool": T, "pid": P, ' ('"pid": null,
 * "binary": PATH, ' for -b), then '"ts": "2026-11-28T21:50:02.123+00:00", '
 * (always: local time, RFC 3339, milliseconds, the zone's offset); text:
 * a blank line after the first interval, then -T's time.  The caller
 * prints the rest, the closing brace and newline included. */
void output_begin(struct output *o);

/* s as a JSON string, as Python's json.dumps() writes it. */
void output_json_string(const char *s);

/* One character below 0x80 inside a JSON string, escaped as json.dumps()
 * escapes it. */
void output_json_ascii(unsigned char c);

/* One histogram's text (its rows and extras), as output_emit() prints
 * it, or as a JSON object; false when it has nothing to show. */
bool output_hist_text(const struct hist_entry *e);
bool output_hist_json(const struct hist_entry *e);
#endif

#endif
