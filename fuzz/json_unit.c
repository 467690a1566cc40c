// SPDX-License-Identifier: BSD-2-Clause
/*
 * json_unit.c: unit tests of target/json.c, the bounded JSON parser and
 * writer of blktgt's control plane.  fuzz/jsonrpc_fuzz.c holds the parser
 * to its invariants on any input; this holds it to exact results on known
 * ones: values, offsets, every status and the limits of json.h.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "json.h"
#include "unit.h"

/* Big enough for the longest input below (a document JSON_MAX_VALUES
 * values long, or JSON_MAX_DEPTH + 1 brackets deep). */
#define TEXT_MAX (4 * JSON_MAX_VALUES + 16)

static struct json_val vals[JSON_MAX_VALUES + 1];
static char scratch[TEXT_MAX + 1];
static size_t consumed;

/* Parse text[0..len) with room for max values. */
static int parse_n(const char *text, size_t len, size_t max)
{
	consumed = (size_t)-1;
	return json_parse(text, len, vals, max, scratch, &consumed);
}

static int parse(const char *text)
{
	return parse_n(text, strlen(text), JSON_MAX_VALUES);
}

static void test_document(void)
{
	const char *doc = " {\"a\": [1, \"x\", true, false, null], \"b\": {}} tail";
	const struct json_val *v;

	CHECK_INT(parse(doc), 10);
	CHECK_INT(consumed, strlen(doc) - strlen(" tail"));
	/* Pre-order: the object, then key, value, key, value. */
	CHECK_INT(vals[0].type, JSON_OBJECT);
	CHECK_INT(vals[0].count, 2);
	CHECK_INT(vals[0].skip, 10);
	CHECK_INT(vals[0].raw - doc, 1);
	CHECK_INT(vals[0].raw_len, consumed - 1);
	CHECK(json_str_eq(&vals[1], "a"));
	v = &vals[2];
	CHECK_INT(v->type, JSON_ARRAY);
	CHECK_INT(v->count, 5);
	CHECK_INT(v->skip, 6);
	CHECK_INT(vals[3].type, JSON_NUMBER);
	CHECK_INT(vals[3].len, 1);
	CHECK(json_str_eq(&vals[4], "x"));
	CHECK_INT(vals[5].type, JSON_TRUE);
	CHECK_INT(vals[6].type, JSON_FALSE);
	CHECK_INT(vals[7].type, JSON_NULL);
	/* json_next() steps over the array to the second key. */
	CHECK(json_next(v) == &vals[8]);
	CHECK(json_str_eq(&vals[8], "b"));
	CHECK_INT(vals[9].type, JSON_OBJECT);
	CHECK_INT(vals[9].count, 0);
	CHECK_INT(vals[9].skip, 1);
	CHECK_INT(vals[9].raw_len, 2);
	/* Not the same length, not a string: not equal. */
	CHECK(!json_str_eq(&vals[1], "ab"));
	CHECK(!json_str_eq(&vals[3], "1"));
}

/* Every proper prefix of a valid document asks for more input, and the
 * whole of it parses. */
static void test_truncated(void)
{
	static const char *const docs[] = {
		"{\"key\": [1.5e+3, -0, \"\\u00e9\\ud83d\\ude00\\n\"], \"t\": true}",
		"[null, false, \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"]",
		"\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
	};

	for (size_t d = 0; d < sizeof(docs) / sizeof(docs[0]); d++) {
		size_t len = strlen(docs[d]);

		for (size_t n = 0; n < len; n++)
			CHECK_INT(parse_n(docs[d], n, JSON_MAX_VALUES), JSON_INCOMPLETE);
		CHECK(parse_n(docs[d], len, JSON_MAX_VALUES) > 0);
		CHECK_INT(consumed, len);
	}
	/* A number that runs to the end may have more digits coming. */
	CHECK_INT(parse("12"), JSON_INCOMPLETE);
	CHECK_INT(parse("12 "), 1);
	CHECK_INT(consumed, 2);
	CHECK_INT(parse(""), JSON_INCOMPLETE);
	CHECK_INT(parse("  \n\t"), JSON_INCOMPLETE);
}

static void test_strings(void)
{
	CHECK_INT(parse("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\""), 1);
	CHECK_INT(vals[0].len, 8);
	CHECK_STR(vals[0].str, "\"\\/\b\f\n\r\t");
	/* \u escapes become UTF-8: 2, 3 and 4 bytes (a surrogate pair). */
	CHECK_INT(parse("\"\\u00e9\\u20AC\\ud83d\\ude00\""), 1);
	CHECK_INT(vals[0].len, 9);
	CHECK_STR(vals[0].str, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	/* An escaped NUL is kept, and counted. */
	CHECK_INT(parse("\"a\\u0000b\""), 1);
	CHECK_INT(vals[0].len, 3);
	CHECK_MEM(vals[0].str, "a\0b", 4);
	CHECK(!json_str_eq(&vals[0], "a"));
	/* Raw UTF-8 passes as it is. */
	CHECK_INT(parse("\"\xc3\xa9\xf4\x8f\xbf\xbf\""), 1);
	CHECK_INT(vals[0].len, 6);
}

/* Each bad string with its status, and the offset of the byte at fault. */
static void test_string_errors(void)
{
	static const struct {
		const char *text;
		int status;
		size_t at;
	} bad[] = {
		{ "\"ab\\x\"", JSON_SYNTAX, 3 },                /* unknown escape */
		{ "\"\\u12g4\"", JSON_SYNTAX, 1 },              /* not hex */
		{ "\"\\u12\"", JSON_SYNTAX, 1 },                /* a short \u */
		{ "\"a\nb\"", JSON_SYNTAX, 2 },                 /* a raw control byte */
		{ "\"\\udc00\"", JSON_BAD_SURROGATE, 1 },       /* a lone low half */
		{ "\"\\ud800x\"", JSON_BAD_SURROGATE, 1 },      /* a high half alone */
		{ "\"\\ud800\\u0041\"", JSON_BAD_SURROGATE, 1 },/* paired with no low half */
		{ "\"\\ud800\\uzzzz\"", JSON_SYNTAX, 1 },
		{ "\"\xc0\x80\"", JSON_BAD_UTF8, 1 },           /* an overlong NUL */
		{ "\"\xe0\x80\x80\"", JSON_BAD_UTF8, 1 },       /* overlong, 3 bytes */
		{ "\"\xed\xa0\x80\"", JSON_BAD_UTF8, 1 },       /* a surrogate in UTF-8 */
		{ "\"\xf4\x90\x80\x80\"", JSON_BAD_UTF8, 1 },   /* past U+10FFFF */
		{ "\"ok\x80\"", JSON_BAD_UTF8, 3 },             /* a lone continuation */
		{ "\"\xc3(\"", JSON_BAD_UTF8, 1 },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT(parse(bad[i].text), bad[i].status);
		CHECK_INT(consumed, bad[i].at);
	}
	/* Cut inside a sequence or an escape: more may come. */
	CHECK_INT(parse("\"\xe2\x82"), JSON_INCOMPLETE);
	CHECK_INT(parse("\"\\ud800\\u12"), JSON_INCOMPLETE);
	CHECK_INT(parse("\"\\ud800\\"), JSON_INCOMPLETE);
	CHECK_INT(parse("\"\\u1g"), JSON_SYNTAX);

	CHECK_INT(json_utf8_seq("a", 1), 1);
	CHECK_INT(json_utf8_seq("\xc3\xa9", 2), 2);
	CHECK_INT(json_utf8_seq("\xe2\x82\xac", 3), 3);
	CHECK_INT(json_utf8_seq("\xf0\x9f\x98\x80", 4), 4);
	CHECK_INT(json_utf8_seq("\xf0\x9f\x98", 3), 0);
	CHECK_INT(json_utf8_seq("\xf5\x80\x80\x80", 4), -1);
	CHECK_INT(json_utf8_seq("", 0), 0);
}

static void test_numbers_and_literals(void)
{
	static const struct {
		const char *text;
		int status;
	} cases[] = {
		{ "[0]", 2 }, { "[-0]", 2 }, { "[1.25]", 2 }, { "[1e9]", 2 },
		{ "[-7E-3]", 2 }, { "[01]", JSON_SYNTAX }, { "[+1]", JSON_SYNTAX },
		{ "[-a]", JSON_SYNTAX }, { "[1.]", JSON_SYNTAX }, { "[1.e3]", JSON_SYNTAX },
		{ "[1ex]", JSON_SYNTAX }, { "[.5]", JSON_SYNTAX }, { "[-", JSON_INCOMPLETE },
		{ "[1.", JSON_INCOMPLETE }, { "[1e+", JSON_INCOMPLETE },
		{ "tru", JSON_INCOMPLETE }, { "trUe", JSON_SYNTAX }, { "nul", JSON_INCOMPLETE },
		{ "nulL", JSON_SYNTAX }, { "falsey", 1 },
		{ "{1: 2}", JSON_SYNTAX }, { "{\"a\" 1}", JSON_SYNTAX }, { "[1 2]", JSON_SYNTAX },
		{ "[1,]", JSON_SYNTAX }, { "{\"a\":1,}", JSON_SYNTAX }, { "]", JSON_SYNTAX },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_INT(parse(cases[i].text), cases[i].status);
	CHECK_INT(parse("[-7E-3]"), 2);
	CHECK_INT(vals[1].len, 5);
}

/* json_to_u64: exact, or a named refusal; the bound is UINT64_MAX. */
static void test_to_u64(void)
{
	char text[32];
	uint64_t x = 0;
	size_t n;

	n = (size_t)snprintf(text, sizeof(text), "%llu ", (unsigned long long)UINT64_MAX);
	CHECK_INT(parse(text), 1);
	CHECK_INT(json_to_u64(&vals[0], &x), 0);
	CHECK_U64(x, UINT64_MAX);
	/* One more (its last digit is 5) is out of range. */
	text[n - 2]++;
	CHECK_INT(parse(text), 1);
	CHECK_INT(json_to_u64(&vals[0], &x), -ERANGE);
	CHECK_INT(parse("0 "), 1);
	CHECK_INT(json_to_u64(&vals[0], &x), 0);
	CHECK_U64(x, 0);
	CHECK_INT(parse("[-1, 1.0, 1e3, \"7\", 00]"), JSON_SYNTAX);
	CHECK_INT(parse("[-1, 1.0, 1e3, \"7\"]"), 5);
	for (int i = 1; i < 5; i++)
		CHECK_INT(json_to_u64(&vals[i], &x), -EINVAL);
}

/* JSON_MAX_DEPTH containers nest; one more is refused at its bracket. */
static void test_depth(void)
{
	static char text[TEXT_MAX];

	for (size_t deep = JSON_MAX_DEPTH; deep <= JSON_MAX_DEPTH + 1; deep++) {
		memset(text, '[', deep);
		memset(text + deep, ']', deep);
		text[2 * deep] = '\0';
		if (deep == JSON_MAX_DEPTH) {
			CHECK_INT(parse(text), JSON_MAX_DEPTH);
			CHECK_INT(consumed, 2 * deep);
		} else {
			CHECK_INT(parse(text), JSON_TOO_DEEP);
			CHECK_INT(consumed, JSON_MAX_DEPTH);
		}
	}
	/* Objects count the same. */
	text[0] = '\0';
	for (size_t i = 0; i < JSON_MAX_DEPTH; i++)
		strcat(text, "{\"k\":");
	strcat(text, "{}");
	CHECK_INT(parse(text), JSON_TOO_DEEP);
}

/* A caller's max_vals bounds the values; JSON_MAX_VALUES is the server's. */
static void test_too_many(void)
{
	static char text[TEXT_MAX];
	size_t n = 0;

	CHECK_INT(parse_n("[1,2,3] ", 8, 4), 4);
	CHECK_INT(parse_n("[1,2,3] ", 8, 3), JSON_TOO_MANY);
	CHECK_INT(consumed, 5);
	/* An array of JSON_MAX_VALUES - 1 zeros fills the table exactly. */
	text[n++] = '[';
	for (size_t i = 0; i < JSON_MAX_VALUES - 1; i++) {
		text[n++] = '0';
		text[n++] = ',';
	}
	text[n - 1] = ']';
	text[n] = '\0';
	CHECK_INT(parse(text), JSON_MAX_VALUES);
	CHECK_INT(vals[0].count, JSON_MAX_VALUES - 1);
	text[n - 1] = ',';
	text[n++] = '0';
	text[n++] = ']';
	text[n] = '\0';
	CHECK_INT(parse(text), JSON_TOO_MANY);
}

static void test_status_words(void)
{
	CHECK_STR(json_status_str(JSON_INCOMPLETE), "unexpected end of input");
	CHECK_STR(json_status_str(JSON_SYNTAX), "invalid JSON");
	CHECK_STR(json_status_str(JSON_TOO_MANY), "too many JSON values");
	CHECK_STR(json_status_str(JSON_TOO_DEEP), "JSON nested too deeply");
	CHECK_STR(json_status_str(JSON_BAD_UTF8), "invalid UTF-8 in a string");
	CHECK_STR(json_status_str(JSON_BAD_SURROGATE),
		  "a \\u escape of an unpaired UTF-16 surrogate");
	CHECK_STR(json_status_str(0), "JSON error");
}

static void test_writer(void)
{
	struct json_writer w;
	char *text;
	size_t len;

	jw_init(&w, JSON_MAX_RESPONSE);
	jw_obj_begin(&w);
	jw_kv_str(&w, "s", "q\"\\\n\t\x01\xc3\xa9\xff");
	jw_kv_u64(&w, "u", UINT64_MAX);
	jw_kv_i64(&w, "i", INT64_MIN);
	jw_key(&w, "a");
	jw_arr_begin(&w);
	jw_bool(&w, true);
	jw_bool(&w, false);
	jw_raw(&w, "null", 4);
	jw_strn(&w, "a\0b", 3);
	jw_arr_end(&w);
	jw_obj_end(&w);
	CHECK_INT(w.err, 0);
	text = jw_take(&w, &len);
	CHECK_STR(text, "{\"s\":\"q\\\"\\\\\\n\\t\\u0001\xc3\xa9\\ufffd\","
		  "\"u\":18446744073709551615,\"i\":-9223372036854775808,"
		  "\"a\":[true,false,null,\"a\\u0000b\"]}");
	CHECK_INT(len, strlen(text));
	/* What it writes, it reads back: the object, 4 keys, 3 values and
	 * the array of 4. */
	CHECK_INT(parse_n(text, len, JSON_MAX_VALUES), 13);
	CHECK_INT(consumed, len);
	CHECK_INT(vals[2].len, 11);
	CHECK_MEM(vals[2].str, "q\"\\\n\t\x01\xc3\xa9\xef\xbf\xbd", 12);
	free(text);

	/* Past max bytes: -E2BIG, and nothing more is written. */
	jw_init(&w, 8);
	jw_str(&w, "123456");
	CHECK_INT(w.err, -E2BIG);
	jw_free(&w);
	/* Past JSON_MAX_DEPTH containers: -E2BIG. */
	jw_init(&w, JSON_MAX_RESPONSE);
	for (int i = 0; i <= JSON_MAX_DEPTH; i++)
		jw_arr_begin(&w);
	CHECK_INT(w.err, -E2BIG);
	jw_free(&w);
}

int main(void)
{
	test_document();
	test_truncated();
	test_strings();
	test_string_errors();
	test_numbers_and_literals();
	test_to_u64();
	test_depth();
	test_too_many();
	test_status_words();
	test_writer();
	UNIT_DONE("json_unit");
}
