/* SPDX-License-Identifier: BSD-2-Clause */
/* args.NAME in a usdt block of probekit-bpftrace's scripts: the argument
 * of that name, read from the probekit note of the traced file (the
 * names and C types probekit-gencatalog writes into the binary beside its
 * stapsdt notes), in the argN form bpftrace reads, with the cast a signed
 * type needs.  join.c calls it for each block that names one. */
#ifndef PROBEKIT_WRAPPER_ARGNAMES_H
#define PROBEKIT_WRAPPER_ARGNAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "helper.h"
#include "usdt_notes.h"

/* Where args.NAME (or args->NAME) starts at s[i], outside strings and
 * comments (the caller skips those): the length of the whole token, the
 * name at s[*name, *name + *len); 0 when there is none at i. */
size_t argnames_at(const char *s, size_t i, size_t n, size_t *name, size_t *len);

/* Whether s[a, b) names an argument so (outside strings and comments). */
bool argnames_used(const char *s, size_t a, size_t b);

/* The argument names of the usdt probe SPEC ("provider:name" or "name")
 * in file: its entry, or one line and exit 1 (helper_die) when the file
 * carries no names for it.  where names the block for the line. */
const struct usdt_probe_args *argnames_probe(const char *file, const char *spec, const char *where);

/* The text that reads argument NAME of probe pa onto out ("arg3",
 * "(int32)arg2"): one line and exit 1 for a name the probe lacks (with
 * its nearest), or for a string read (as_string: the argument of str())
 * of an argument that is no char pointer.  Returns its index. */
int argnames_put(struct helper_buf *out, const struct usdt_probe_args *pa, const char *name,
		 size_t len, bool as_string, const char *where);

#endif
