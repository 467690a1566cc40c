// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_loop.h: the output loop that ends on Ctrl-C, after -d or count
 * intervals, when the target exits, or past --max-rate (tool_loop.c).
 */
#ifndef PROBEKIT_TOOL_LOOP_H
#define PROBEKIT_TOOL_LOOP_H

#include "histogram.h"
#include "tool_options.h"
#include "tool_target.h"

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

#endif
