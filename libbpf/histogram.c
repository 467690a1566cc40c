// SPDX-License-Identifier: BSD-2-Clause
/*
 * histogram.c: print histograms as the bcc/ tools do.
 *
 * doc/output.md documents the text and JSON formats; this file
 * reproduces them to the byte, so tests can compare a libbpf tool with its
 * bcc/ twin.  The log2 text is BCC's print_log2_hist() layout, the linear
 * text that of libbpf-tools' print_linear_hist().
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/types.h>

#include "histogram.h"

#define STARS_MAX 40

/* The rows a histogram prints: slots first..last.  Log2 rows start at
 * slot 1 (0 -> 1) and run to the highest non-empty slot; linear rows run
 * from the lowest to the highest non-empty slot.  Returns false when the
 * histogram prints nothing. */
static bool hist_rows(const struct hist_entry *e, int *first, int *last)
{
	int lo = -1, hi = -1;
	int n = e->linear ? HIST_LINEAR_SLOTS : HIST_LOG2_SLOTS;

	for (int i = 0; i < n; i++) {
		if (!e->hist.slots[i])
			continue;
		if (lo < 0)
			lo = i;
		hi = i;
	}
	if (e->linear) {
		*first = lo;
		*last = hi;
		return hi >= 0;
	}
	*first = 1;
	*last = hi;
	return hi >= 1;
}

static void row_bounds(const struct hist_entry *e, int i,
		       unsigned long long *low, unsigned long long *high,
		       bool *open)
{
	*open = false;
	if (e->linear) {
		*low = i * e->width;
		*high = *low + e->width - 1;
		*open = i >= HIST_LINEAR_SLOTS - 1;
		return;
	}
	/* Slot i holds [2^(i-1), 2^i - 1]; slot 1 is shown as 0 -> 1. */
	*low = 1ULL << (i - 1);
	*high = i == 64 ? UINT64_MAX : (1ULL << i) - 1;
	if (*low == *high)
		(*low)--;
}

static void print_stars(unsigned long long val, unsigned long long max,
			int width)
{
	unsigned __int128 n = (unsigned __int128)width * val / max;
	int i, k = n > (unsigned __int128)width ? width : (int)n;

	for (i = 0; i < k; i++)
		putchar('*');
	for (; i < width; i++)
		putchar(' ');
}

static void print_header(const struct hist_entry *e, bool wide)
{
	if (e->linear)
		printf("     %-13s : count     distribution\n", e->unit);
	else if (wide)
		printf("               %-29s : count     distribution\n", e->unit);
	else
		printf("     %-19s : count     distribution\n", e->unit);
}

static void print_text(const struct hist_entry *e, int first, int last)
{
	unsigned long long max = 0, low, high;
	bool wide = !e->linear && last - first + 1 > 32, open;
	int stars = wide ? STARS_MAX / 2 : STARS_MAX;

	for (int i = first; i <= last; i++)
		if (e->hist.slots[i] > max)
			max = e->hist.slots[i];
	print_header(e, wide);
	for (int i = first; i <= last; i++) {
		unsigned long long c = e->hist.slots[i];

		row_bounds(e, i, &low, &high, &open);
		if (e->linear)
			printf("        %-10llu : %-8llu |", low, c);
		else if (wide)
			printf("%20llu -> %-20llu : %-8llu |", low, high, c);
		else
			printf("%10llu -> %-10llu : %-8llu |", low, high, c);
		print_stars(c, max, stars);
		fputs("|\n", stdout);
	}
}

/* A JSON string as Python's json.dumps() writes it (ensure_ascii):
 * control characters and everything beyond ASCII escaped, bytes that are
 * not UTF-8 shown as U+FFFD, as bytes.decode(errors="replace") does. */
void output_json_ascii(unsigned char c)
{
	switch (c) {
	case '"': fputs("\\\"", stdout); break;
	case '\\': fputs("\\\\", stdout); break;
	case '\n': fputs("\\n", stdout); break;
	case '\r': fputs("\\r", stdout); break;
	case '\t': fputs("\\t", stdout); break;
	case '\b': fputs("\\b", stdout); break;
	case '\f': fputs("\\f", stdout); break;
	default:
		if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
}

void output_json_string(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putchar('"');
	while (*p) {
		unsigned c = *p, cp, need;

		if (c < 0x80) {
			p++;
			output_json_ascii(c);
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			need = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			need = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			need = 3, cp = c & 0x07;
		else
			need = 0, cp = 0xfffd;
		p++;
		for (unsigned k = 0; k < need; k++) {
			if ((p[0] & 0xc0) != 0x80) {
				cp = 0xfffd;
				break;
			}
			cp = cp << 6 | (p[0] & 0x3f);
			p++;
		}
		if ((need == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (need == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			cp = 0xfffd;
		if (cp >= 0x10000) {
			cp -= 0x10000;
			printf("\\u%04x\\u%04x", 0xd800 + (cp >> 10),
			       0xdc00 + (cp & 0x3ff));
		} else {
			printf("\\u%04x", cp);
		}
	}
	putchar('"');
}

static void print_json(const struct hist_entry *e, int first, int last)
{
	unsigned long long total = 0, low, high;
	bool open;

	fputs("{\"name\": ", stdout);
	output_json_string(e->name);
	fputs(", \"unit\": ", stdout);
	output_json_string(e->unit);
	printf(", \"scale\": \"%s\"", e->linear ? "linear" : "log2");
	if (e->linear)
		printf(", \"width\": %llu", e->width);
	fputs(", \"key\": {", stdout);
	for (int k = 0; k < e->nkeys; k++) {
		if (k)
			fputs(", ", stdout);
		output_json_string(e->key_names[k]);
		fputs(": ", stdout);
		output_json_string(e->key_vals[k]);
	}
	for (int i = first; i <= last; i++)
		total += e->hist.slots[i];
	printf("}, \"total\": %llu, \"buckets\": [", total);
	for (int i = first; i <= last; i++) {
		row_bounds(e, i, &low, &high, &open);
		if (i > first)
			fputs(", ", stdout);
		if (open)
			printf("{\"low\": %llu, \"high\": null, \"count\": %llu}",
			       low, (unsigned long long)e->hist.slots[i]);
		else
			printf("{\"low\": %llu, \"high\": %llu, \"count\": %llu}",
			       low, high, (unsigned long long)e->hist.slots[i]);
	}
	putchar(']');
	for (int k = 0; k < e->nextras; k++) {
		fputs(", ", stdout);
		output_json_string(e->extra_names[k]);
		printf(": %llu", e->extra_vals[k]);
	}
	putchar('}');
}

static int cmp_entry(const void *a, const void *b)
{
	const struct hist_entry *x = a, *y = b;

	for (int k = 0; k < x->nkeys && k < y->nkeys; k++) {
		int c = strcmp(x->key_vals[k], y->key_vals[k]);

		if (c)
			return c;
	}
	return x->nkeys - y->nkeys;
}

void hist_sort(struct hist_entry *e, size_t n)
{
	qsort(e, n, sizeof(*e), cmp_entry);
}

/* Empty histograms are left out, unless an extra counter is set. */
static bool shown(const struct hist_entry *e, int *first, int *last)
{
	bool rows = hist_rows(e, first, last);

	for (int k = 0; k < e->nextras; k++)
		if (e->extra_vals[k])
			return true;
	return rows;
}

/* Now as RFC 3339 local time with milliseconds and the zone's offset,
 * "2026-11-28T21:50:02.123+00:00", as Python's
 * datetime.now().astimezone().isoformat(timespec="milliseconds") writes
 * it (bcc/probekit_bcc_hist.py's Output.start()). */
static void iso_stamp(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	long off;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	off = tm.tm_gmtoff / 60;
	snprintf(buf + n, len - n, ".%03ld%c%02ld:%02ld", ts.tv_nsec / 1000000,
		 off < 0 ? '-' : '+', labs(off) / 60, labs(off) % 60);
}

void output_begin(struct output *o)
{
	char stamp[48];

	if (o->json) {
		iso_stamp(stamp, sizeof(stamp));
		printf("{\"tool\": \"%s\", ", o->tool);
		if (o->pid > 0) {
			printf("\"pid\": %d, ", (int)o->pid);
		} else {
			fputs("\"pid\": null, \"binary\": ", stdout);
			output_json_string(o->binary ? o->binary : "");
			fputs(", ", stdout);
		}
		printf("\"ts\": \"%s\", ", stamp);
	} else {
		time_t t = time(NULL);
		struct tm tm;

		/* A blank line between intervals, then -T's time. */
		if (o->n)
			putchar('\n');
		if (o->timestamp) {
			localtime_r(&t, &tm);
			strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
			printf("%-8s\n", stamp);
		}
	}
	o->n++;
}

bool output_hist_json(const struct hist_entry *e)
{
	int first, last;

	if (!shown(e, &first, &last))
		return false;
	print_json(e, first, last);
	return true;
}

bool output_hist_text(const struct hist_entry *e)
{
	int first, last;

	if (!shown(e, &first, &last))
		return false;
	if (first <= last && last >= 0)
		print_text(e, first, last);
	for (int k = 0; k < e->nextras; k++)
		printf("%s: %llu\n", e->extra_names[k], e->extra_vals[k]);
	return true;
}

void output_emit(struct output *o, const struct hist_entry *e, size_t n)
{
	size_t printed = 0;
	int first, last;

	output_begin(o);
	if (o->json) {
		fputs("\"histograms\": [", stdout);
		for (size_t i = 0; i < n; i++) {
			if (!shown(&e[i], &first, &last))
				continue;
			if (printed++)
				fputs(", ", stdout);
			print_json(&e[i], first, last);
		}
		putchar(']');
		if (o->trailer)
			o->trailer(o, o->trailer_ctx);
		fputs("}\n", stdout);
		fflush(stdout);
		return;
	}

	/* Each histogram shown, headed by its key when it has one, else
	 * separated from the previous one by a blank line. */
	for (size_t i = 0; i < n; i++) {
		if (!shown(&e[i], &first, &last))
			continue;
		if (e[i].nkeys) {
			putchar('\n');
			for (int k = 0; k < e[i].nkeys; k++)
				printf("%s%s = %s", k ? ", " : "",
				       e[i].key_names[k], e[i].key_vals[k]);
			putchar('\n');
		} else if (printed) {
			putchar('\n');
		}
		printed++;
		output_hist_text(&e[i]);
	}
	if (!printed && o->empty) {
		if (n)
			print_header(&e[0], false);
		printf("%s\n", o->empty);
	}
	if (o->trailer)
		o->trailer(o, o->trailer_ctx);
	fflush(stdout);
}
