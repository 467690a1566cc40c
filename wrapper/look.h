/* SPDX-License-Identifier: BSD-2-Clause */
/* What an ELF file has, in bpftrace's terms: the look-ups of
 * probekit-bpftrace's helper, on the C reader of notes
 * (probes/usdt/usdt_notes.h) and libelf's symbol tables. */
#ifndef PROBEKIT_WRAPPER_LOOK_H
#define PROBEKIT_WRAPPER_LOOK_H

#include <stdbool.h>
#include <stddef.h>

#include "helper.h"
#include "usdt_notes.h"

/* The longest probe or function name a script or want-list may give:
 * as long as usdt_distance() measures, so that each can be suggested. */
#define LOOK_SPEC_MAX USDT_DISTANCE_MAX

/* A probe or symbol the wrapper looks for. */
struct look_want {
	long id;
	bool usdt;		/* a USDT probe, else a function symbol */
	const char *spec;	/* a bpftrace wildcard ('*'); a usdt spec
				 * without a provider matches any provider */
	int file;		/* the index of the first file that has it, or -1 */
	int nargs;		/* a usdt want: the fewest arguments of the probes
				 * it matches in that file */
};

/* Set each want's file, reading files in order, each once, until every
 * want is found: USDT probes from their stapsdt notes, symbols as
 * nm --defined-only (and -D) lists them with type T, t, W, i or u
 * (functions and anything else in a code section), without a @VERSION
 * suffix.  A file that cannot be opened (it went away) or is not ELF has
 * nothing; a corrupt one, or one that is not a regular file, is an error. */
void look_find(struct look_want *w, int nw, char *const *files, int nfiles);

/* For a usdt spec that none of files has: the index of the file with the
 * nearest probe by edit distance (the first of equals), its
 * "PROVIDER:NAME" in found; -1 when none is within a third of spec's
 * length (then it is no misspelling but a script for another program). */
int look_nearest(const char *spec, char *const *files, int nfiles, char *found, size_t cap);

/* The GNU build-id of path in hex onto out; nothing when it has none or
 * is not ELF. */
void look_build_id(const char *path, struct helper_buf *out);

/* The target of the link path as "LEN:TARGET" onto out (path itself when
 * it is a file, not a link), or "-" when it cannot be read: a target may
 * hold any byte but NUL, a newline too, so its length delimits it. */
void look_link(const char *path, struct helper_buf *out);

#endif
