// SPDX-License-Identifier: BSD-2-Clause
/* probekit-scan's shared parts (helper.h). */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helper.h"
#include "usdt_notes.h"

void helper_die(const char *fmt, ...)
{
	char line[8192], shown[4 * sizeof(line)];
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, HELPER_PROG ": %s\n", usdt_escape(line, shown, sizeof(shown)));
	exit(1);
}

void helper_buf_add(struct helper_buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (b->len + n + 1 > cap)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			helper_die("out of memory");
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void helper_buf_str(struct helper_buf *b, const char *s)
{
	helper_buf_add(b, s, strlen(s));
}

void helper_buf_printf(struct helper_buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	helper_buf_add(b, tmp, n < (int)sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

void helper_buf_cat(struct helper_buf *b, const struct helper_buf *s)
{
	if (s->len)
		helper_buf_add(b, s->p, s->len);
}
