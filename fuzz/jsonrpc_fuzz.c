// SPDX-License-Identifier: BSD-2-Clause
/*
 * jsonrpc_fuzz.c: libFuzzer harness for blktgt's JSON parser and JSON-RPC
 * request handling (target/json.c, target/jsonrpc_parse.c): everything an
 * RPC client's bytes go through before a method runs.  Built and run by
 * `make fuzz-jsonrpc` (mk/fuzz.mk).
 *
 * Each input is:
 *  - parsed as a stream of requests the way the server reads a connection
 *    (whole, then again in small chunks: both must agree on every verdict
 *    and every byte consumed);
 *  - for each request parsed, its params decoded against the specs of real
 *    methods, and every decoded string checked against its bounds;
 *  - every string value written back with the JSON writer and parsed
 *    again: it must round-trip byte for byte;
 *  - every string the parser stored, and the error reply the server would
 *    send (id, method and message quoted from the input), checked as
 *    UTF-8 by a decoder of its own, and the reply parsed back as JSON;
 *  - an input refused as bad UTF-8 really is bad at the offset named.
 * A broken invariant aborts, which libFuzzer reports as a crash.
 *
 * With -DJSONRPC_FUZZ_STANDALONE it has a main() that replays the files
 * given as arguments, or writes seed inputs with --seeds DIR, so the same
 * checks run under any compiler (and in the test suite).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "jsonrpc.h"

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
	abort(); } } while (0)

static struct json_val vals[JSON_MAX_VALUES];
static struct json_val vals2[JSON_MAX_VALUES];
static char scratch[JSON_MAX_REQUEST + 1];
static char scratch2[JSON_MAX_REQUEST + 1];

/* The params of bdev_malloc_create and workload_run, as the methods use. */
struct create_params {
	char name[64];
	uint64_t size_mb, block_size;
};

static const struct rpc_param create_spec[] = {
	{ "name", RPC_PARAM_STRING, true, offsetof(struct create_params, name), 64, 0, 0 },
	{ "size_mb", RPC_PARAM_U64, true, offsetof(struct create_params, size_mb), 0, 1, 1u << 20 },
	{ "block_size", RPC_PARAM_U64, true, offsetof(struct create_params, block_size), 0,
	  512, 65536 },
};

struct run_params {
	char bdev[64], pattern[16];
	uint64_t count;
	bool flag;
};

static const struct rpc_param run_spec[] = {
	{ "bdev", RPC_PARAM_STRING, false, offsetof(struct run_params, bdev), 64, 0, 0 },
	{ "pattern", RPC_PARAM_STRING, true, offsetof(struct run_params, pattern), 16, 0, 0 },
	{ "count", RPC_PARAM_U64, false, offsetof(struct run_params, count), 0, 1, UINT64_MAX },
	{ "flag", RPC_PARAM_BOOL, false, offsetof(struct run_params, flag), 0, 0, 0 },
};

/* RFC 3629 by decoding, not by the parser's byte-range table, so the two
 * check each other: the sequence at p[0..n) decodes to a code point that
 * needs exactly its length, is no surrogate and is at most U+10FFFF.
 * Returns its length, or -1. */
static int utf8_decode_one(const unsigned char *p, size_t n)
{
	static const uint32_t min_cp[] = { 0, 0, 0x80, 0x800, 0x10000 };
	int len = p[0] < 0x80 ? 1 : (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 :
		  (p[0] & 0xf8) == 0xf0 ? 4 : 0;
	uint32_t cp;

	if (!len || (size_t)len > n)
		return -1;
	cp = len == 1 ? p[0] : p[0] & (0x7fu >> len);
	for (int i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return -1;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	return len;
}

static bool utf8_valid(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		int len = utf8_decode_one((const unsigned char *)s + i, n - i);

		if (len < 0)
			return false;
		i += (size_t)len;
	}
	return true;
}

/* The error reply the server builds for this verdict (jsonrpc.c): for a
 * request that parsed, the one an unknown method gets, which quotes the
 * method.  It must be UTF-8 and parse back as one JSON value. */
static void check_reply(const struct jsonrpc_msg *msg, int rc, const char *err)
{
	char text_msg[JSONRPC_MAX_ERROR_MSG];
	struct json_writer w;
	size_t len, used;
	char *text;
	int m;

	if (rc == 0)
		snprintf(text_msg, sizeof(text_msg), "method not found: %s", msg->method->str);
	else
		snprintf(text_msg, sizeof(text_msg), "%s", err);
	CHECK(utf8_valid(msg->id, msg->id_len));
	jw_init(&w, JSON_MAX_RESPONSE);
	jw_obj_begin(&w);
	jw_kv_str(&w, "jsonrpc", "2.0");
	jw_key(&w, "id");
	jw_raw(&w, msg->id, msg->id_len);
	jw_key(&w, "error");
	jw_obj_begin(&w);
	jw_kv_i64(&w, "code", rc ? rc : JSONRPC_METHOD_NOT_FOUND);
	jw_kv_str(&w, "message", text_msg);
	jw_obj_end(&w);
	jw_obj_end(&w);
	CHECK(w.err == 0);
	text = jw_take(&w, &len);
	CHECK(text);
	CHECK(utf8_valid(text, len));
	m = json_parse(text, len, vals2, JSON_MAX_VALUES, scratch2, &used);
	CHECK(m > 0 && used == len && vals2[0].type == JSON_OBJECT);
	free(text);
}

static void check_params(const struct json_val *params)
{
	struct create_params cp;
	struct run_params rp;
	char err[JSONRPC_MAX_ERROR_MSG];
	uint32_t present;

	memset(&cp, 0x5a, sizeof(cp));
	if (jsonrpc_decode_params(params, create_spec, 3, &cp, &present, err, sizeof(err)) == 0) {
		CHECK(present == 7);
		CHECK(strlen(cp.name) >= 1 && strlen(cp.name) < sizeof(cp.name));
		CHECK(cp.size_mb >= 1 && cp.size_mb <= (1u << 20));
		CHECK(cp.block_size >= 512 && cp.block_size <= 65536);
	} else {
		CHECK(strncmp(err, "invalid params: ", 16) == 0);
	}
	memset(&rp, 0, sizeof(rp));
	if (jsonrpc_decode_params(params, run_spec, 4, &rp, &present, err, sizeof(err)) == 0) {
		CHECK(present & 2);
		CHECK(strlen(rp.pattern) >= 1 && strlen(rp.pattern) < sizeof(rp.pattern));
		CHECK(!(present & 4) || rp.count >= 1);
	}
}

/* Every string in the document survives writer -> parser unchanged. */
static void check_roundtrip(const struct json_val *v, int n)
{
	for (int i = 0; i < n; i++) {
		struct json_writer w;
		size_t len, used;
		char *text;
		int m;

		if (v[i].type != JSON_STRING)
			continue;
		CHECK(utf8_valid(v[i].str, v[i].len));
		jw_init(&w, JSON_MAX_REQUEST);
		jw_strn(&w, v[i].str, v[i].len);
		CHECK(w.err == 0);
		text = jw_take(&w, &len);
		CHECK(text);
		/* A string ends at its quote, so it never needs more input. */
		m = json_parse(text, len, vals2, 1, scratch2, &used);
		CHECK(m == 1 && used == len && vals2[0].type == JSON_STRING);
		CHECK(vals2[0].len == v[i].len && memcmp(vals2[0].str, v[i].str, v[i].len) == 0);
		free(text);
	}
}

/* Parse requests from buf[0..len) as the server would; returns the number
 * of bytes consumed and stores each verdict in verdicts[]. */
static size_t run_stream(const char *buf, size_t len, size_t chunk, int *verdicts, int max,
			 int *nverdicts, bool deep)
{
	size_t off = 0, avail = chunk ? 0 : len;
	char err[JSONRPC_MAX_ERROR_MSG];

	*nverdicts = 0;
	while (off < len && *nverdicts < max) {
		struct jsonrpc_msg msg;
		size_t used = 0;
		int rc;

		while (off < len && strchr(" \t\r\n", buf[off]) && buf[off])
			off++;
		if (off >= len)
			break;
		if (chunk && avail < off)
			avail = off;
		if (chunk && avail == off)
			avail = off + chunk < len ? off + chunk : len;
		rc = jsonrpc_parse_request(buf + off, avail - off, vals, JSON_MAX_VALUES, scratch,
					   &msg, &used, err, sizeof(err));
		if (rc == JSONRPC_MORE) {
			if (avail < len) {
				avail = avail + chunk < len ? avail + chunk : len;
				continue;
			}
			verdicts[(*nverdicts)++] = rc;
			break;
		}
		verdicts[(*nverdicts)++] = rc;
		if (deep)
			check_reply(&msg, rc, err);
		if (rc == JSONRPC_PARSE_ERROR) {
			if (deep && strstr(err, json_status_str(JSON_BAD_UTF8))) {
				CHECK(used < avail - off);
				CHECK(utf8_decode_one((const unsigned char *)buf + off + used,
						      avail - off - used) < 0);
			}
			break;          /* the server closes the connection */
		}
		CHECK(used > 0 && used <= avail - off);
		CHECK(msg.id_len <= JSONRPC_MAX_ID_LEN && strlen(msg.id) == msg.id_len);
		if (rc == 0) {
			CHECK(msg.method && msg.method->type == JSON_STRING);
			CHECK(msg.method->len >= 1 && msg.method->len <= JSONRPC_MAX_METHOD_LEN);
			if (deep) {
				check_params(msg.params);
				check_roundtrip(vals, (int)vals[0].skip);
			}
		} else {
			CHECK(rc == JSONRPC_INVALID_REQUEST);
		}
		off += used;
	}
	return off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int v1[64], v2[64], n1, n2;
	size_t o1, o2;
	char *buf;

	if (size > JSON_MAX_REQUEST)
		return 0;       /* the server refuses more before parsing */
	/* An exact-size copy, so ASan sees any read past the end. */
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	o1 = run_stream(buf, size, 0, v1, 64, &n1, true);
	o2 = run_stream(buf, size, 7, v2, 64, &n2, false);
	CHECK(o1 == o2 && n1 == n2);
	CHECK(memcmp(v1, v2, (size_t)n1 * sizeof(int)) == 0);
	free(buf);
	return 0;
}

#ifdef JSONRPC_FUZZ_STANDALONE
static const char *const seeds[] = {
	"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"bdev_list\"}",
	"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"bdev_malloc_create\","
	"\"params\":{\"name\":\"Malloc0\",\"size_mb\":64,\"block_size\":512}}",
	"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"workload_run\",\"params\":{\"bdev\":\"n\","
	"\"pattern\":\"randrw\",\"count\":1009,\"flag\":true}}\n"
	"{\"jsonrpc\":\"2.0\",\"method\":\"target_stats\"}",
	"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"x\",\"params\":{\"name\":\"\\u00e9\\ud83d\\ude00\\n\"}}",
	"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"bdev_list\"}]",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"m\",\"params\":{\"a\":1,\"a\":2}}",
	"{\"jsonrpc\":\"2.0\",\"id\":-1.5e3,\"method\":\"m\",\"params\":[1,[2,[3]],{}]}",
	"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": x}",
	"{\"jsonrpc\": \"2.0\", \"id\": 1",
	/* Not UTF-8, in the id, the method and a param: each is -32700. */
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xc0\xaf\",\"method\":\"bdev_list\"}", /* overlong 2 */
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xe0\x80\xaf\"}",       /* overlong 3 */
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"name\":\"\xf0\x80\x80\xaf\"}}",
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xed\xa0\x80\",\"method\":\"m\"}",  /* U+D800 */
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xed\xbf\xbf\"}",       /* U+DFFF */
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xf4\x90\x80\x80\"}",   /* U+110000 */
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xe2\x82\",\"method\":\"m\"}",       /* truncated */
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\x80\"}",               /* stray */
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xf5\x80\x80\x80\xff\"}",
	/* Lone surrogates as escapes, and the good forms next to them. */
	"{\"jsonrpc\":\"2.0\",\"id\":\"\\ud800\",\"method\":\"m\"}",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\\udc00x\"}",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\\ud83d\\u0041\"}",
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\"method\":\"\xf4\x8f\xbf\xbf\"}",
};

static int write_seeds(const char *dir)
{
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/seed%02zu.json", dir, i);
		f = fopen(path, "w");
		if (!f || fputs(seeds[i], f) < 0 || fclose(f) != 0) {
			perror(path);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static char buf[JSON_MAX_REQUEST + 1];

	if (argc == 3 && strcmp(argv[1], "--seeds") == 0)
		return write_seeds(argv[2]);
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		size_t n;

		if (!f) {
			perror(argv[i]);
			return 1;
		}
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
	}
	printf("jsonrpc_fuzz: %d inputs replayed, no invariant broken\n", argc - 1);
	return 0;
}
#endif
