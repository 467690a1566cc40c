// SPDX-License-Identifier: BSD-2-Clause
/*
 * unit.h: the checks of the parsers' unit tests (fuzz/NAME_unit.c, built and
 * run by `make unit`, mk/unit.mk).
 *
 * A failed check prints the file, line, the expression and both values,
 * and the test goes on, so one run shows every broken behaviour; the
 * program's exit status is non-zero if any check failed.  Every test
 * program ends with UNIT_DONE(), which prints one line:
 *
 *     NAME: N checks, F failed
 */
#ifndef PROBEKIT_UNIT_H
#define PROBEKIT_UNIT_H

#include <stdio.h>
#include <string.h>

static unsigned unit_checks, unit_failed;

static inline void unit_result(int ok, const char *file, int line, const char *expr)
{
	unit_checks++;
	if (ok)
		return;
	unit_failed++;
	fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
}

/* A truth. */
#define CHECK(cond) unit_result(!!(cond), __FILE__, __LINE__, #cond)

/* Two integers (any integer type, compared as long long). */
#define CHECK_INT(got, want) do {						\
	long long g_ = (long long)(got), w_ = (long long)(want);		\
	unit_result(g_ == w_, __FILE__, __LINE__, #got " == " #want);		\
	if (g_ != w_)								\
		fprintf(stderr, "    got %lld, want %lld\n", g_, w_);		\
} while (0)

/* Two unsigned 64-bit integers. */
#define CHECK_U64(got, want) do {						\
	unsigned long long g_ = (unsigned long long)(got);			\
	unsigned long long w_ = (unsigned long long)(want);			\
	unit_result(g_ == w_, __FILE__, __LINE__, #got " == " #want);		\
	if (g_ != w_)								\
		fprintf(stderr, "    got %llu, want %llu\n", g_, w_);		\
} while (0)

/* Two NUL-terminated strings (NULL is a value of its own). */
#define CHECK_STR(got, want) do {						\
	const char *g_ = (got), *w_ = (want);					\
	int ok_ = (g_ && w_) ? strcmp(g_, w_) == 0 : g_ == w_;			\
	unit_result(ok_, __FILE__, __LINE__, #got " == " #want);		\
	if (!ok_)								\
		fprintf(stderr, "    got \"%s\", want \"%s\"\n",		\
			g_ ? g_ : "(null)", w_ ? w_ : "(null)");		\
} while (0)

/* n bytes at got equal n bytes at want. */
#define CHECK_MEM(got, want, n) do {						\
	size_t n_ = (n);							\
	unit_result(memcmp((got), (want), n_) == 0, __FILE__, __LINE__,	\
		    #got " == " #want " (" #n " bytes)");			\
} while (0)

/* The last line of main(): the summary, and the exit status. */
#define UNIT_DONE(name) do {							\
	printf("%s: %u checks, %u failed\n", (name), unit_checks, unit_failed);	\
	return unit_failed ? 1 : 0;						\
} while (0)

#endif
