// SPDX-License-Identifier: BSD-2-Clause
/*
 * jsonrpc_parse_unit.c: unit tests of target/jsonrpc_parse.c, the JSON-RPC
 * 2.0 envelope and the table-driven params decoder.  Each request below
 * gets its exact code and message, as a client reads them in the reply;
 * the bounds are jsonrpc.h's and json.h's own.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "jsonrpc_parse.h"
#include "unit.h"

static struct json_val vals[JSON_MAX_VALUES];
static char scratch[JSON_MAX_REQUEST + 1];
static struct jsonrpc_msg msg;
static size_t consumed;
static char err[JSONRPC_MAX_ERROR_MSG];

static int request_n(const char *text, size_t len)
{
	err[0] = '\0';
	consumed = (size_t)-1;
	return jsonrpc_parse_request(text, len, vals, JSON_MAX_VALUES, scratch, &msg,
				     &consumed, err, sizeof(err));
}

static int request(const char *text)
{
	return request_n(text, strlen(text));
}

static void test_valid(void)
{
	const char *two = "{\"jsonrpc\":\"2.0\",\"method\":\"bdev_list\",\"id\":7}"
			  "\n{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":[1]}";
	size_t first = strlen("{\"jsonrpc\":\"2.0\",\"method\":\"bdev_list\",\"id\":7}");

	CHECK_INT(request(two), 0);
	CHECK_INT(consumed, first);
	CHECK(json_str_eq(msg.method, "bdev_list"));
	CHECK(msg.params == NULL);
	CHECK(msg.has_id);
	CHECK_STR(msg.id, "7");
	CHECK_INT(msg.id_len, 1);
	/* The next one, a notification with params: no id, "null" to log. */
	CHECK_INT(request(two + first), 0);
	CHECK_INT(consumed, strlen(two) - first);
	CHECK(json_str_eq(msg.method, "x"));
	CHECK_INT(msg.params->type, JSON_ARRAY);
	CHECK(!msg.has_id);
	CHECK_STR(msg.id, "null");

	/* An id is kept as its JSON text: a string with its quotes, null. */
	CHECK_INT(request("{\"id\":\"a\\\"b\",\"method\":\"m\",\"jsonrpc\":\"2.0\","
			  "\"params\":{\"k\":1}}"), 0);
	CHECK_STR(msg.id, "\"a\\\"b\"");
	CHECK_INT(msg.params->type, JSON_OBJECT);
	CHECK_INT(request("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":null}"), 0);
	CHECK(msg.has_id);
	CHECK_STR(msg.id, "null");
	CHECK_INT(request("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":-1.5e3}"), 0);
	CHECK_STR(msg.id, "-1.5e3");
}

static void test_more_and_parse_errors(void)
{
	const char *whole = "{\"jsonrpc\":\"2.0\",\"method\":\"bdev_list\",\"id\":7}";

	for (size_t n = 0; n < strlen(whole); n++)
		CHECK_INT(request_n(whole, n), JSONRPC_MORE);
	CHECK_INT(request("{\"jsonrpc\":\"2.0\",]"), JSONRPC_PARSE_ERROR);
	CHECK_STR(err, "parse error: invalid JSON at byte 17");
	CHECK_INT(request("{\"method\":\"\xff\"}"), JSONRPC_PARSE_ERROR);
	CHECK_STR(err, "parse error: invalid UTF-8 in a string at byte 11");
	CHECK_INT(request("[\"\\udc00\"]"), JSONRPC_PARSE_ERROR);
	CHECK_STR(err, "parse error: a \\u escape of an unpaired UTF-16 surrogate at byte 2");
}

/* JSON_MAX_DEPTH and JSON_MAX_VALUES bound a request before it is read. */
static void test_limits(void)
{
	static char text[JSON_MAX_REQUEST];
	char want[JSONRPC_MAX_ERROR_MSG];
	size_t n;

	/* The request object is depth 0, so the params' JSON_MAX_DEPTH - 1
	 * brackets are still being read, and one more is one too deep. */
	n = (size_t)sprintf(text, "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":");
	for (size_t i = 0; i < JSON_MAX_DEPTH - 1; i++)
		text[n++] = '[';
	text[n] = '\0';
	CHECK_INT(request(text), JSONRPC_MORE);
	text[n++] = '[';
	text[n] = '\0';
	CHECK_INT(request(text), JSONRPC_PARSE_ERROR);
	snprintf(want, sizeof(want), "parse error: JSON nested too deeply at byte %zu", n - 1);
	CHECK_STR(err, want);

	n = (size_t)sprintf(text, "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":[");
	/* The object, 3 keys, 2 values and the array: 7 values before the
	 * array's elements; JSON_MAX_VALUES - 7 of them fill the table. */
	for (size_t i = 0; i < JSON_MAX_VALUES - 7; i++)
		n += (size_t)sprintf(text + n, "0,");
	sprintf(text + n - 1, "]}");
	CHECK_INT(request(text), 0);
	CHECK_INT(msg.params->count, JSON_MAX_VALUES - 7);
	sprintf(text + n - 1, ",0]}");
	CHECK_INT(request(text), JSONRPC_PARSE_ERROR);
	snprintf(want, sizeof(want), "parse error: too many JSON values at byte %zu", n);
	CHECK_STR(err, want);
}

static void test_invalid_requests(void)
{
	static const struct {
		const char *text;
		const char *err;
		const char *id;         /* what the error reply carries */
	} bad[] = {
		{ "[{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1}]",
		  "invalid request: batch requests are not supported", "null" },
		{ "[]", "invalid request: batch requests are not supported", "null" },
		{ "\"bdev_list\"", "invalid request: a request is a JSON object", "null" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":true}",
		  "invalid request: id must be a string, number or null", "null" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":[1]}",
		  "invalid request: id must be a string, number or null", "null" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":{}}",
		  "invalid request: id must be a string, number or null", "null" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":3,\"extra\":1}",
		  "invalid request: unknown member 'extra'", "3" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":3,\"id\":4}",
		  "invalid request: duplicate member 'id'", "3" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"method\":\"n\",\"id\":5}",
		  "invalid request: duplicate member 'method'", "5" },
		{ "{\"method\":\"m\",\"id\":11}",
		  "invalid request: \"jsonrpc\" must be \"2.0\"", "11" },
		{ "{\"jsonrpc\":\"1.0\",\"method\":\"m\",\"id\":13}",
		  "invalid request: \"jsonrpc\" must be \"2.0\"", "13" },
		{ "{\"jsonrpc\":2.0,\"method\":\"m\",\"id\":13}",
		  "invalid request: \"jsonrpc\" must be \"2.0\"", "13" },
		{ "{\"jsonrpc\":\"2.0\",\"id\":17}",
		  "invalid request: \"method\" must be a string", "17" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":7,\"id\":17}",
		  "invalid request: \"method\" must be a string", "17" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"a\\u0000b\",\"id\":19}",
		  NULL, "19" },         /* "must be 1..JSONRPC_MAX_METHOD_LEN bytes" */
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"\",\"id\":19}", NULL, "19" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":\"p\",\"id\":\"x\"}",
		  "invalid request: \"params\" must be an object or array", "\"x\"" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":null,\"id\":23}",
		  "invalid request: \"params\" must be an object or array", "23" },
	};
	char method_err[JSONRPC_MAX_ERROR_MSG];

	snprintf(method_err, sizeof(method_err),
		 "invalid request: \"method\" must be 1..%d bytes", JSONRPC_MAX_METHOD_LEN);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT(request(bad[i].text), JSONRPC_INVALID_REQUEST);
		CHECK_STR(err, bad[i].err ? bad[i].err : method_err);
		CHECK_STR(msg.id, bad[i].id);
		/* The next request starts right after this one. */
		CHECK_INT(consumed, strlen(bad[i].text));
	}
	/* An unknown member's name is quoted bounded and printable. */
	CHECK_INT(request("{\"jsonrpc\":\"2.0\",\"method\":\"m\","
			  "\"\\n0123456789012345678901234567890123456789\":1}"),
		  JSONRPC_INVALID_REQUEST);
	CHECK_STR(err, "invalid request: unknown member '?01234567890123456789012345678901...'");
}

/* An id of JSONRPC_MAX_ID_LEN bytes of JSON text, and one of one more;
 * a method of JSONRPC_MAX_METHOD_LEN bytes, and one of one more. */
static void test_lengths(void)
{
	static char text[JSON_MAX_REQUEST];
	char want[JSONRPC_MAX_ERROR_MSG];
	char id[JSONRPC_MAX_ID_LEN + 2];
	char method[JSONRPC_MAX_METHOD_LEN + 2];

	for (size_t len = JSONRPC_MAX_ID_LEN; len <= JSONRPC_MAX_ID_LEN + 1; len++) {
		/* A string id: its quotes count. */
		memset(id, 'i', len);
		id[0] = id[len - 1] = '"';
		id[len] = '\0';
		snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":%s}", id);
		if (len == JSONRPC_MAX_ID_LEN) {
			CHECK_INT(request(text), 0);
			CHECK_STR(msg.id, id);
			CHECK_INT(msg.id_len, JSONRPC_MAX_ID_LEN);
		} else {
			snprintf(want, sizeof(want), "invalid request: id longer than %d bytes",
				 JSONRPC_MAX_ID_LEN);
			CHECK_INT(request(text), JSONRPC_INVALID_REQUEST);
			CHECK_STR(err, want);
			CHECK_STR(msg.id, "null");
		}
		/* A number id of the same length. */
		memset(id, '9', len);
		snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":%s}", id);
		CHECK_INT(request(text), (len == JSONRPC_MAX_ID_LEN ? 0 : JSONRPC_INVALID_REQUEST));
	}
	snprintf(want, sizeof(want), "invalid request: \"method\" must be 1..%d bytes",
		 JSONRPC_MAX_METHOD_LEN);
	for (size_t len = JSONRPC_MAX_METHOD_LEN; len <= JSONRPC_MAX_METHOD_LEN + 1; len++) {
		memset(method, 'm', len);
		method[len] = '\0';
		snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"id\":1}",
			 method);
		if (len == JSONRPC_MAX_METHOD_LEN) {
			CHECK_INT(request(text), 0);
			CHECK(json_str_eq(msg.method, method));
		} else {
			CHECK_INT(request(text), JSONRPC_INVALID_REQUEST);
			CHECK_STR(err, want);
			CHECK_STR(msg.id, "1");
		}
	}
}

/* --- params ------------------------------------------------------------- */

struct args {
	char name[8];
	uint64_t count;
	bool force;
};

static const struct rpc_param spec[] = {
	{ "name", RPC_PARAM_STRING, true, offsetof(struct args, name),
	  sizeof(((struct args *)0)->name), 0, 0 },
	{ "count", RPC_PARAM_U64, false, offsetof(struct args, count), 0, 3, 1000 },
	{ "force", RPC_PARAM_BOOL, false, offsetof(struct args, force), 0, 0, 0 },
};
#define NSPEC (sizeof(spec) / sizeof(spec[0]))

static struct args out;
static uint32_t present;

/* Decode the params of {"jsonrpc":"2.0","method":"m","params":PARAMS}. */
static int decode(const char *params)
{
	static char text[JSON_MAX_REQUEST];

	snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"method\":\"m\"%s%s}",
		 params ? ",\"params\":" : "", params ? params : "");
	if (request(text) != 0)
		return 1;
	memset(&out, 0, sizeof(out));
	err[0] = '\0';
	present = UINT32_MAX;
	return jsonrpc_decode_params(msg.params, spec, NSPEC, &out, &present, err, sizeof(err));
}

static void test_params(void)
{
	static const struct {
		const char *params;
		const char *err;
	} bad[] = {
		{ NULL, "invalid params: missing param 'name'" },
		{ "{}", "invalid params: missing param 'name'" },
		{ "[\"a\"]", "invalid params: params must be an object of named params" },
		{ "{\"name\":\"a\",\"colour\":1}", "invalid params: unknown param 'colour'" },
		{ "{\"name\":\"a\",\"name\":\"b\"}", "invalid params: duplicate param 'name'" },
		{ "{\"name\":1}", "invalid params: 'name' must be a string" },
		{ "{\"name\":\"\"}", "invalid params: 'name' must be 1..7 bytes without NUL" },
		{ "{\"name\":\"12345678\"}",
		  "invalid params: 'name' must be 1..7 bytes without NUL" },
		{ "{\"name\":\"a\\u0000\"}",
		  "invalid params: 'name' must be 1..7 bytes without NUL" },
		{ "{\"name\":\"a\",\"count\":2}",
		  "invalid params: 'count' must be an integer in 3..1000" },
		{ "{\"name\":\"a\",\"count\":1001}",
		  "invalid params: 'count' must be an integer in 3..1000" },
		{ "{\"name\":\"a\",\"count\":-5}",
		  "invalid params: 'count' must be an integer in 3..1000" },
		{ "{\"name\":\"a\",\"count\":5.0}",
		  "invalid params: 'count' must be an integer in 3..1000" },
		{ "{\"name\":\"a\",\"count\":\"5\"}",
		  "invalid params: 'count' must be an integer in 3..1000" },
		{ "{\"name\":\"a\",\"count\":99999999999999999999}",
		  "invalid params: 'count' must be an integer in 3..1000" },
		{ "{\"name\":\"a\",\"force\":1}", "invalid params: 'force' must be a boolean" },
	};
	struct rpc_param big[RPC_PARAMS_MAX + 1];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT(decode(bad[i].params), JSONRPC_INVALID_PARAMS);
		CHECK_STR(err, bad[i].err);
		CHECK_INT(present, 0);
	}
	/* The bounds themselves are in. */
	CHECK_INT(decode("{\"count\":3,\"name\":\"1234567\"}"), 0);
	CHECK_STR(out.name, "1234567");
	CHECK_U64(out.count, 3);
	CHECK_INT(present, 0x3);
	CHECK_INT(decode("{\"name\":\"n\",\"force\":true,\"count\":1000}"), 0);
	CHECK_STR(out.name, "n");
	CHECK_U64(out.count, 1000);
	CHECK(out.force);
	CHECK_INT(present, 0x7);
	CHECK_INT(decode("{\"force\":false,\"name\":\"n\"}"), 0);
	CHECK(!out.force);
	CHECK_INT(present, 0x5);

	/* A spec longer than the presence mask is the caller's bug, said so. */
	for (size_t i = 0; i < RPC_PARAMS_MAX + 1; i++)
		big[i] = spec[2];
	CHECK_INT(request("{\"jsonrpc\":\"2.0\",\"method\":\"m\"}"), 0);
	CHECK_INT(jsonrpc_decode_params(NULL, big, RPC_PARAMS_MAX + 1, &out, &present,
					err, sizeof(err)), JSONRPC_INVALID_PARAMS);
	CHECK_STR(err, "invalid params: internal: spec too long");
	CHECK_INT(jsonrpc_decode_params(NULL, big, RPC_PARAMS_MAX, &out, &present,
					err, sizeof(err)), 0);
}

int main(void)
{
	test_valid();
	test_more_and_parse_errors();
	test_limits();
	test_invalid_requests();
	test_lengths();
	test_params();
	UNIT_DONE("jsonrpc_parse_unit");
}
