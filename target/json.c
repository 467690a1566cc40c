// SPDX-License-Identifier: BSD-2-Clause
/*
 * json.c: bounded JSON parsing and writing (see json.h).
 *
 * The parser is recursive descent with an explicit depth bound, so its
 * stack use is bounded too.  Every failure is a status, never an abort:
 * the input is untrusted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

struct parser {
	const char *p, *end;
	struct json_val *vals;
	size_t nvals, max_vals;
	char *scratch;          /* next free byte */
};

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Four hex digits at p (bounds checked by the caller); -1 when invalid. */
static long hex4(const char *p)
{
	long v = 0;

	for (int i = 0; i < 4; i++) {
		int h = hexval(p[i]);

		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

static char *put_utf8(char *o, unsigned long cp)
{
	if (cp < 0x80) {
		*o++ = (char)cp;
	} else if (cp < 0x800) {
		*o++ = (char)(0xc0 | (cp >> 6));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*o++ = (char)(0xe0 | (cp >> 12));
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*o++ = (char)(0xf0 | (cp >> 18));
		*o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	}
	return o;
}

int json_utf8_seq(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned char lo = 0x80, hi = 0xbf;     /* the second byte's range */
	int need;

	if (n == 0)
		return 0;
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		need = 2;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		need = 3;
		if (p[0] == 0xe0)
			lo = 0xa0;      /* below: an overlong form */
		else if (p[0] == 0xed)
			hi = 0x9f;      /* above: a UTF-16 surrogate */
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		need = 4;
		if (p[0] == 0xf0)
			lo = 0x90;      /* below: an overlong form */
		else if (p[0] == 0xf4)
			hi = 0x8f;      /* above: past U+10FFFF */
	} else {
		return -1;      /* a continuation byte, C0, C1 or F5..FF */
	}
	for (int i = 1; i < need; i++) {
		if ((size_t)i >= n)
			return 0;
		if (p[i] < (i == 1 ? lo : 0x80) || p[i] > (i == 1 ? hi : 0xbf))
			return -1;
	}
	return need;
}

/* After "\u" and a high surrogate's four digits: the low half must follow
 * as another \uXXXX.  Its code unit, JSON_INCOMPLETE, or
 * JSON_BAD_SURROGATE as soon as what is there cannot become one. */
static long low_surrogate(const char *p, const char *end)
{
	static const char want[] = "\\u";
	long lo;

	for (int i = 0; i < 2; i++) {
		if (p + i >= end)
			return JSON_INCOMPLETE;
		if (p[i] != want[i])
			return JSON_BAD_SURROGATE;
	}
	if (end - p < 6) {
		for (const char *q = p + 2; q < end; q++)
			if (hexval(*q) < 0)
				return JSON_SYNTAX;
		return JSON_INCOMPLETE;
	}
	lo = hex4(p + 2);
	if (lo < 0)
		return JSON_SYNTAX;
	if (lo < 0xdc00 || lo > 0xdfff)
		return JSON_BAD_SURROGATE;
	return lo;
}

/* At the opening quote.  Decoded output never outgrows the input.  Raw
 * bytes must be well-formed UTF-8 and \u escapes must pair their
 * surrogates, so every decoded string is valid UTF-8 (NUL included) and
 * can be quoted back in a reply.  On an error ps->p is left at the
 * offending byte. */
static int parse_string(struct parser *ps, struct json_val *v)
{
	char *out = ps->scratch;

	v->str = out;
	ps->p++;
	for (;;) {
		const char *at = ps->p;
		unsigned char c;

		if (ps->p >= ps->end)
			return JSON_INCOMPLETE;
		c = (unsigned char)*ps->p++;
		if (c == '"')
			break;
		if (c < 0x20) {
			ps->p = at;
			return JSON_SYNTAX;
		}
		if (c >= 0x80) {
			int n = json_utf8_seq(at, (size_t)(ps->end - at));

			if (n == 0)
				return JSON_INCOMPLETE;
			ps->p = at;
			if (n < 0)
				return JSON_BAD_UTF8;
			memcpy(out, at, (size_t)n);
			out += n;
			ps->p += n;
			continue;
		}
		if (c != '\\') {
			*out++ = (char)c;
			continue;
		}
		if (ps->p >= ps->end)
			return JSON_INCOMPLETE;
		c = (unsigned char)*ps->p++;
		switch (c) {
		case '"': *out++ = '"'; break;
		case '\\': *out++ = '\\'; break;
		case '/': *out++ = '/'; break;
		case 'b': *out++ = '\b'; break;
		case 'f': *out++ = '\f'; break;
		case 'n': *out++ = '\n'; break;
		case 'r': *out++ = '\r'; break;
		case 't': *out++ = '\t'; break;
		case 'u': {
			long cp, lo;

			if (ps->end - ps->p < 4) {
				for (const char *q = ps->p; q < ps->end; q++) {
					if (hexval(*q) < 0) {
						ps->p = at;
						return JSON_SYNTAX;
					}
				}
				return JSON_INCOMPLETE;
			}
			cp = hex4(ps->p);
			if (cp < 0) {
				ps->p = at;
				return JSON_SYNTAX;
			}
			if (cp >= 0xdc00 && cp <= 0xdfff) {
				ps->p = at;
				return JSON_BAD_SURROGATE;      /* a lone low half */
			}
			ps->p += 4;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				lo = low_surrogate(ps->p, ps->end);
				if (lo == JSON_INCOMPLETE)
					return JSON_INCOMPLETE;
				if (lo < 0) {
					ps->p = at;
					return (int)lo;
				}
				ps->p += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			/* \uXXXX is 6 input bytes, at most 3 output bytes; a
			 * pair is 12 input bytes for 4 output bytes. */
			out = put_utf8(out, (unsigned long)cp);
			break;
		}
		default:
			ps->p = at;
			return JSON_SYNTAX;
		}
	}
	v->len = (uint32_t)(out - v->str);
	*out++ = '\0';
	ps->scratch = out;
	return 0;
}

static int parse_number(struct parser *ps, struct json_val *v)
{
	const char *p = ps->p;

	if (p < ps->end && *p == '-')
		p++;
	if (p >= ps->end)
		return JSON_INCOMPLETE;
	if (*p == '0') {
		p++;
	} else if (*p >= '1' && *p <= '9') {
		while (p < ps->end && *p >= '0' && *p <= '9')
			p++;
	} else {
		return JSON_SYNTAX;
	}
	if (p < ps->end && *p == '.') {
		p++;
		if (p >= ps->end)
			return JSON_INCOMPLETE;
		if (!(*p >= '0' && *p <= '9'))
			return JSON_SYNTAX;
		while (p < ps->end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < ps->end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < ps->end && (*p == '+' || *p == '-'))
			p++;
		if (p >= ps->end)
			return JSON_INCOMPLETE;
		if (!(*p >= '0' && *p <= '9'))
			return JSON_SYNTAX;
		while (p < ps->end && *p >= '0' && *p <= '9')
			p++;
	}
	/* More digits may still be on their way. */
	if (p >= ps->end)
		return JSON_INCOMPLETE;
	v->len = (uint32_t)(p - ps->p);
	ps->p = p;
	return 0;
}

static int parse_literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	size_t have = (size_t)(ps->end - ps->p);

	if (memcmp(ps->p, word, have < n ? have : n) != 0)
		return JSON_SYNTAX;
	if (have < n)
		return JSON_INCOMPLETE;
	ps->p += n;
	return 0;
}

static int parse_value(struct parser *ps, unsigned depth)
{
	struct json_val *v;
	size_t idx;
	int rc = 0;

	skip_ws(ps);
	if (ps->p >= ps->end)
		return JSON_INCOMPLETE;
	if (ps->nvals >= ps->max_vals)
		return JSON_TOO_MANY;
	idx = ps->nvals++;
	v = &ps->vals[idx];
	memset(v, 0, sizeof(*v));
	v->raw = ps->p;

	switch (*ps->p) {
	case '{':
	case '[': {
		bool obj = *ps->p == '{';
		char close = obj ? '}' : ']';

		if (depth >= JSON_MAX_DEPTH)
			return JSON_TOO_DEEP;
		v->type = obj ? JSON_OBJECT : JSON_ARRAY;
		ps->p++;
		skip_ws(ps);
		if (ps->p >= ps->end)
			return JSON_INCOMPLETE;
		if (*ps->p == close) {
			ps->p++;
			break;
		}
		for (;;) {
			if (obj) {
				skip_ws(ps);
				if (ps->p >= ps->end)
					return JSON_INCOMPLETE;
				if (*ps->p != '"')
					return JSON_SYNTAX;
				rc = parse_value(ps, depth + 1);
				if (rc)
					return rc;
				skip_ws(ps);
				if (ps->p >= ps->end)
					return JSON_INCOMPLETE;
				if (*ps->p++ != ':')
					return JSON_SYNTAX;
			}
			rc = parse_value(ps, depth + 1);
			if (rc)
				return rc;
			v = &ps->vals[idx];
			v->count++;
			skip_ws(ps);
			if (ps->p >= ps->end)
				return JSON_INCOMPLETE;
			if (*ps->p == ',') {
				ps->p++;
				continue;
			}
			if (*ps->p == close) {
				ps->p++;
				break;
			}
			return JSON_SYNTAX;
		}
		break;
	}
	case '"':
		v->type = JSON_STRING;
		rc = parse_string(ps, v);
		break;
	case 't':
		v->type = JSON_TRUE;
		rc = parse_literal(ps, "true");
		break;
	case 'f':
		v->type = JSON_FALSE;
		rc = parse_literal(ps, "false");
		break;
	case 'n':
		v->type = JSON_NULL;
		rc = parse_literal(ps, "null");
		break;
	default:
		v->type = JSON_NUMBER;
		rc = parse_number(ps, v);
		break;
	}
	if (rc)
		return rc;
	v = &ps->vals[idx];
	v->skip = (uint32_t)(ps->nvals - idx);
	v->raw_len = (uint32_t)(ps->p - v->raw);
	return 0;
}

int json_parse(const char *buf, size_t len, struct json_val *vals, size_t max_vals,
	       char *scratch, size_t *consumed)
{
	struct parser ps = {
		.p = buf, .end = buf + len, .vals = vals, .max_vals = max_vals,
		.scratch = scratch,
	};
	int rc;

	if (len > UINT32_MAX / 2)
		return JSON_TOO_MANY;
	rc = parse_value(&ps, 0);
	*consumed = (size_t)(ps.p - buf);
	if (rc)
		return rc;
	return (int)ps.nvals;
}

const char *json_status_str(int status)
{
	switch (status) {
	case JSON_INCOMPLETE: return "unexpected end of input";
	case JSON_SYNTAX: return "invalid JSON";
	case JSON_TOO_MANY: return "too many JSON values";
	case JSON_TOO_DEEP: return "JSON nested too deeply";
	case JSON_BAD_UTF8: return "invalid UTF-8 in a string";
	case JSON_BAD_SURROGATE: return "a \\u escape of an unpaired UTF-16 surrogate";
	default: return "JSON error";
	}
}

int json_to_u64(const struct json_val *v, uint64_t *out)
{
	uint64_t x = 0;

	if (v->type != JSON_NUMBER || v->raw[0] == '-')
		return -EINVAL;
	for (uint32_t i = 0; i < v->len; i++) {
		unsigned d;

		if (v->raw[i] < '0' || v->raw[i] > '9')
			return -EINVAL;
		d = (unsigned)(v->raw[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -ERANGE;
		x = x * 10 + d;
	}
	*out = x;
	return 0;
}

bool json_str_eq(const struct json_val *v, const char *s)
{
	return v->type == JSON_STRING && strlen(s) == v->len && memcmp(v->str, s, v->len) == 0;
}

/* --- writer ------------------------------------------------------------ */

void jw_init(struct json_writer *w, size_t max)
{
	memset(w, 0, sizeof(*w));
	w->max = max;
	w->first[0] = true;
}

void jw_free(struct json_writer *w)
{
	free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
}

char *jw_take(struct json_writer *w, size_t *len)
{
	char *b = w->buf;

	if (!b) {
		b = malloc(1);
		if (b)
			b[0] = '\0';
	}
	*len = w->len;
	w->buf = NULL;
	w->len = w->cap = 0;
	return b;
}

static void put(struct json_writer *w, const char *s, size_t n)
{
	if (w->err)
		return;
	if (w->len + n + 1 > w->max) {
		w->err = -E2BIG;
		return;
	}
	if (w->len + n + 1 > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		char *b;

		while (cap < w->len + n + 1)
			cap *= 2;
		b = realloc(w->buf, cap);
		if (!b) {
			w->err = -ENOMEM;
			return;
		}
		w->buf = b;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

/* Before a value: the comma that separates it from the previous one. */
static void sep(struct json_writer *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (!w->first[w->depth])
		put(w, ",", 1);
	w->first[w->depth] = false;
}

static void open_(struct json_writer *w, char c)
{
	sep(w);
	put(w, &c, 1);
	if (w->depth >= JSON_MAX_DEPTH) {
		w->err = -E2BIG;
		return;
	}
	w->first[++w->depth] = true;
}

static void close_(struct json_writer *w, char c)
{
	if (w->depth > 0)
		w->depth--;
	put(w, &c, 1);
}

void jw_obj_begin(struct json_writer *w) { open_(w, '{'); }
void jw_obj_end(struct json_writer *w) { close_(w, '}'); }
void jw_arr_begin(struct json_writer *w) { open_(w, '['); }
void jw_arr_end(struct json_writer *w) { close_(w, ']'); }

/* s[0..n) as a JSON string.  Bytes that are not UTF-8 (which no parsed
 * string holds) each become U+FFFD. */
static void put_escaped(struct json_writer *w, const char *s, size_t n)
{
	size_t start = 0;

	put(w, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];

		if (c >= 0x80) {
			int len = json_utf8_seq(s + i, n - i);

			if (len > 0) {
				i += (size_t)len - 1;
				continue;
			}
			/* Not ours to pass on: a reply must stay valid JSON. */
			put(w, s + start, i - start);
			put(w, "\\ufffd", 6);
			start = i + 1;
			continue;
		}
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(w, s + start, i - start);
		if (c == '"' || c == '\\')
			snprintf(esc, sizeof(esc), "\\%c", c);
		else if (c == '\n')
			strcpy(esc, "\\n");
		else if (c == '\t')
			strcpy(esc, "\\t");
		else
			snprintf(esc, sizeof(esc), "\\u%04x", c);
		put(w, esc, strlen(esc));
		start = i + 1;
	}
	put(w, s + start, n - start);
	put(w, "\"", 1);
}

void jw_key(struct json_writer *w, const char *key)
{
	sep(w);
	put_escaped(w, key, strlen(key));
	put(w, ":", 1);
	w->after_key = true;
}

void jw_strn(struct json_writer *w, const char *s, size_t n)
{
	sep(w);
	put_escaped(w, s, n);
}

void jw_str(struct json_writer *w, const char *s)
{
	jw_strn(w, s, strlen(s));
}

void jw_u64(struct json_writer *w, uint64_t v)
{
	char num[24];

	sep(w);
	put(w, num, (size_t)snprintf(num, sizeof(num), "%llu", (unsigned long long)v));
}

void jw_i64(struct json_writer *w, int64_t v)
{
	char num[24];

	sep(w);
	put(w, num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)v));
}

void jw_bool(struct json_writer *w, bool v)
{
	sep(w);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void jw_raw(struct json_writer *w, const char *text, size_t n)
{
	sep(w);
	put(w, text, n);
}

void jw_kv_str(struct json_writer *w, const char *key, const char *s) { jw_key(w, key); jw_str(w, s); }
void jw_kv_u64(struct json_writer *w, const char *key, uint64_t v) { jw_key(w, key); jw_u64(w, v); }
void jw_kv_i64(struct json_writer *w, const char *key, int64_t v) { jw_key(w, key); jw_i64(w, v); }
