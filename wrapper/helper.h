/* SPDX-License-Identifier: BSD-2-Clause */
/* What the rooms of probekit-scan, probekit-bpftrace's helper, share: its
 * one-line error and a growing string.  The joiner (join.c), the argument
 * names (argnames.c), the ELF look-ups (look.c) and main (scan.c) use
 * them. */
#ifndef PROBEKIT_WRAPPER_HELPER_H
#define PROBEKIT_WRAPPER_HELPER_H

#include <stddef.h>

/* The helper speaks for the wrapper: its errors reach the user as the
 * wrapper's own lines. */
#define HELPER_PROG "probekit-bpftrace"

/* One line on stderr, "probekit-bpftrace: ...", escaped whole (a path or
 * a probe name in it may hold a newline), and exit 1. */
void helper_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A string that grows as text is added, always NUL-terminated; running
 * out of memory is fatal (helper_die). */
struct helper_buf {
	char *p;
	size_t len, cap;
};

void helper_buf_add(struct helper_buf *b, const char *s, size_t n);
void helper_buf_str(struct helper_buf *b, const char *s);
void helper_buf_printf(struct helper_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void helper_buf_cat(struct helper_buf *b, const struct helper_buf *s);

#endif
