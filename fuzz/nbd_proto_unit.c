// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_proto_unit.c: unit tests of target/nbd_proto.c, blktgt's NBD wire
 * protocol on byte buffers.  fuzz/nbd_fuzz.c holds the engine to its
 * invariants on any input; this holds it to the exact bytes, states and
 * verdicts of known ones, at the NBD_MAX_* limits of nbd_proto.h.
 */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "nbd_exports.h"
#include "nbd_proto.h"
#include "unit.h"

/* --- a server with two exports, as the fuzz harness has ---------------- */

static const struct nbd_export_info exports[] = {
	{ .name = "disk", .description = "a 1 MiB disk", .size = 1 << 20,
	  .tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		    NBD_FLAG_SEND_TRIM,
	  .min_block = 512, .pref_block = 4096, .max_payload = NBD_MAX_REQUEST_SIZE },
	{ .name = "null", .size = UINT64_C(1) << 40, .tflags = NBD_FLAG_HAS_FLAGS,
	  .min_block = 4096, .pref_block = 4096, .max_payload = 1 << 20 },
};
#define NEXPORTS (sizeof(exports) / sizeof(exports[0]))

static int lookup(void *ctx, const char *name, struct nbd_export_info *out)
{
	return nbd_exports_lookup(exports, NEXPORTS, name, out);
}

static int list(void *ctx, nbd_list_fn fn, void *fctx)
{
	return nbd_exports_list(exports, NEXPORTS, fn, fctx);
}

/* The options the engine reported: how many, and the last one. */
static unsigned reported;
static uint32_t last_option;
static int last_status;

static void option(void *ctx, uint32_t opt, int status)
{
	reported++;
	last_option = opt;
	last_status = status;
}

static const struct nbd_proto_neg_ops ops = { .lookup = lookup, .list = list, .option = option };

/* --- the client's bytes -------------------------------------------------- */

#define FLAGS_LEN  sizeof(struct nbd_wire_client_flags)
#define OPTION_HDR sizeof(struct nbd_wire_option)

/* Room for the longest stream below: NBD_MAX_OPTIONS + 1 empty options,
 * or the flags and an option of NBD_MAX_OPTION_LEN bytes. */
struct wire {
	uint8_t b[FLAGS_LEN + OPTION_HDR * (NBD_MAX_OPTIONS + 1) + NBD_MAX_OPTION_LEN];
	size_t len;
};

static void put(struct wire *w, const void *p, size_t n)
{
	if (n > sizeof(w->b) - w->len) {
		fprintf(stderr, "nbd_proto_unit: a test's stream outgrew struct wire\n");
		exit(2);
	}
	if (n)
		memcpy(w->b + w->len, p, n);
	w->len += n;
}

static void put32(struct wire *w, uint32_t v)
{
	v = htobe32(v);
	put(w, &v, 4);
}

static void put16(struct wire *w, uint16_t v)
{
	v = htobe16(v);
	put(w, &v, 2);
}

static void put_option(struct wire *w, uint32_t opt, const void *data, uint32_t len)
{
	uint64_t magic = htobe64(NBD_OPTS_MAGIC);

	put(w, &magic, 8);
	put32(w, opt);
	put32(w, len);
	put(w, data, len);
}

/* NBD_OPT_GO/INFO data: the name and the information requests. */
static void put_go(struct wire *w, uint32_t opt, const char *name, uint16_t nreq,
		   const uint16_t *req)
{
	uint32_t namelen = (uint32_t)strlen(name);

	put_option(w, opt, NULL, 0);
	/* the option length, now that it is known */
	w->len -= 4;
	put32(w, 4 + namelen + 2 + 2u * nreq);
	put32(w, namelen);
	put(w, name, namelen);
	put16(w, nreq);
	for (uint16_t i = 0; i < nreq; i++)
		put16(w, req[i]);
}

/* --- the server's bytes ------------------------------------------------- */

static struct nbd_proto_neg neg;
static struct nbd_buf out;
static size_t at;       /* the next reply's offset in out */

/* A fresh engine that has sent its greeting and read flags. */
static void start(uint32_t cflags, struct wire *w)
{
	nbd_buf_free(&out);
	nbd_proto_neg_init(&neg, &ops, NULL);
	CHECK_INT(nbd_proto_neg_greeting(&out), 0);
	at = sizeof(struct nbd_wire_greeting);
	reported = 0;
	w->len = 0;
	put32(w, cflags);
}

/* The next option reply in out: its reply type, and its data in *data. */
static uint32_t next_reply(uint32_t opt, const uint8_t **data, uint32_t *len)
{
	struct nbd_wire_option_reply h;

	if (out.len - at < sizeof(h)) {
		CHECK(!"an option reply");
		*len = 0;
		return 0;
	}
	memcpy(&h, out.data + at, sizeof(h));
	CHECK_U64(be64toh(h.magic), NBD_REP_MAGIC);
	CHECK_INT(be32toh(h.option), opt);
	*len = be32toh(h.replylen);
	*data = out.data + at + sizeof(h);
	at += sizeof(h) + *len;
	CHECK(at <= out.len);
	return be32toh(h.reply);
}

/* The next reply is an error of type reply saying msg. */
static void expect_error(uint32_t opt, uint32_t reply, const char *msg)
{
	const uint8_t *data;
	uint32_t len;

	CHECK_INT(next_reply(opt, &data, &len), reply);
	CHECK_INT(len, strlen(msg));
	if (len == strlen(msg))
		CHECK_MEM(data, msg, len);
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return be16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

/* --- negotiation -------------------------------------------------------- */

static void test_greeting_and_flags(void)
{
	static struct wire w;

	start(NBD_FLAG_C_FIXED_NEWSTYLE, &w);
	CHECK_INT(out.len, sizeof(struct nbd_wire_greeting));
	CHECK_U64(get64(out.data), NBD_MAGIC);
	CHECK_U64(get64(out.data + 8), NBD_OPTS_MAGIC);
	CHECK_INT(get16(out.data + 16), NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	/* Part of the flags: nothing read yet. */
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, FLAGS_LEN - 1, &out), 0);
	CHECK_INT(neg.state, NBD_PROTO_NEG_CLIENT_FLAGS);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, FLAGS_LEN, &out), FLAGS_LEN);
	CHECK_INT(neg.state, NBD_PROTO_NEG_OPTIONS);
	CHECK_INT(neg.cflags, NBD_FLAG_C_FIXED_NEWSTYLE);

	start(NBD_FLAG_C_FIXED_NEWSTYLE | (1u << 2), &w);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), FLAGS_LEN);
	CHECK_INT(neg.state, NBD_PROTO_NEG_FAIL);
	CHECK_STR(neg.why, "unknown client flags");
	CHECK_INT(out.len, sizeof(struct nbd_wire_greeting));
}

static void test_option_header(void)
{
	static struct wire w;
	uint64_t bad = htobe64(NBD_OPTS_MAGIC ^ 1);

	/* A bad magic ends the connection: a stream has no resync point. */
	start(0, &w);
	put(&w, &bad, 8);
	put32(&w, NBD_OPT_LIST);
	put32(&w, 0);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), FLAGS_LEN);
	CHECK_INT(neg.state, NBD_PROTO_NEG_FAIL);
	CHECK_STR(neg.why, "bad option magic");
	CHECK_INT(reported, 0);

	/* NBD_MAX_OPTION_LEN bytes of option data are waited for ... */
	start(0, &w);
	put_option(&w, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
	w.len -= 4;
	put32(&w, NBD_MAX_OPTION_LEN);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), FLAGS_LEN);
	CHECK_INT(neg.state, NBD_PROTO_NEG_OPTIONS);
	{
		static const uint8_t data[NBD_MAX_OPTION_LEN];

		put(&w, data, sizeof(data));
	}
	CHECK_INT(nbd_proto_neg_input(&neg, w.b + FLAGS_LEN, w.len - FLAGS_LEN, &out),
		  w.len - FLAGS_LEN);
	expect_error(NBD_OPT_STRUCTURED_REPLY, NBD_REP_ERR_UNSUP,
		     "option not supported by blktgt");
	CHECK_INT(last_status, -ENOTSUP);
	/* ... one byte more is refused before a byte of it is read. */
	start(0, &w);
	put_option(&w, NBD_OPT_GO, NULL, 0);
	w.len -= 4;
	put32(&w, NBD_MAX_OPTION_LEN + 1);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), FLAGS_LEN);
	CHECK_INT(neg.state, NBD_PROTO_NEG_FAIL);
	CHECK_STR(neg.why, "option longer than NBD_MAX_OPTION_LEN");
	CHECK_INT(last_option, NBD_OPT_GO);
	CHECK_INT(last_status, -E2BIG);
}

/* NBD_MAX_OPTIONS options are answered; the next one ends it. */
static void test_option_count(void)
{
	static struct wire wire;
	struct wire *w = &wire;
	size_t used;

	start(0, w);
	for (unsigned i = 0; i < NBD_MAX_OPTIONS + 1; i++)
		put_option(w, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
	used = nbd_proto_neg_input(&neg, w->b, w->len, &out);
	CHECK_INT(used, FLAGS_LEN + OPTION_HDR * NBD_MAX_OPTIONS);
	CHECK_INT(reported, NBD_MAX_OPTIONS);
	CHECK_INT(neg.state, NBD_PROTO_NEG_FAIL);
	CHECK_STR(neg.why, "too many options");
}

static void test_list(void)
{
	static struct wire w;
	const uint8_t *data;
	uint32_t len;

	start(NBD_FLAG_C_FIXED_NEWSTYLE, &w);
	put_option(&w, NBD_OPT_LIST, NULL, 0);
	put_option(&w, NBD_OPT_LIST, "x", 1);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), w.len);
	for (size_t i = 0; i < NEXPORTS; i++) {
		CHECK_INT(next_reply(NBD_OPT_LIST, &data, &len), NBD_REP_SERVER);
		CHECK_INT(len, 4 + strlen(exports[i].name));
		CHECK_INT(get32(data), strlen(exports[i].name));
		CHECK_MEM(data + 4, exports[i].name, strlen(exports[i].name));
	}
	CHECK_INT(next_reply(NBD_OPT_LIST, &data, &len), NBD_REP_ACK);
	CHECK_INT(len, 0);
	expect_error(NBD_OPT_LIST, NBD_REP_ERR_INVALID, "NBD_OPT_LIST takes no data");
	CHECK_INT(at, out.len);
	CHECK_INT(reported, 2);
	CHECK_INT(last_status, -EINVAL);
	CHECK_INT(neg.state, NBD_PROTO_NEG_OPTIONS);
}

static void test_go(void)
{
	static struct wire w;
	static const uint16_t want_both[] = { NBD_INFO_NAME, NBD_INFO_DESCRIPTION };
	const uint8_t *data;
	uint32_t len;
	size_t used;

	/* INFO, then GO on the default export ("") with name and description
	 * asked for; a byte behind GO belongs to transmission. */
	start(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES, &w);
	put_go(&w, NBD_OPT_INFO, "null", 0, NULL);
	put_go(&w, NBD_OPT_GO, "", 2, want_both);
	w.b[w.len++] = 0x25;
	used = nbd_proto_neg_input(&neg, w.b, w.len, &out);
	CHECK_INT(used, w.len - 1);
	CHECK_INT(neg.state, NBD_PROTO_NEG_GO);
	CHECK_STR(neg.chosen.name, "disk");
	CHECK_INT(reported, 2);
	CHECK_INT(last_status, 0);

	CHECK_INT(next_reply(NBD_OPT_INFO, &data, &len), NBD_REP_INFO);
	CHECK_INT(len, sizeof(struct nbd_wire_info_export));
	CHECK_INT(get16(data), NBD_INFO_EXPORT);
	CHECK_U64(get64(data + 2), exports[1].size);
	CHECK_INT(get16(data + 10), exports[1].tflags);
	CHECK_INT(next_reply(NBD_OPT_INFO, &data, &len), NBD_REP_INFO);
	CHECK_INT(len, sizeof(struct nbd_wire_info_block_size));
	CHECK_INT(get16(data), NBD_INFO_BLOCK_SIZE);
	CHECK_INT(get32(data + 2), exports[1].min_block);
	CHECK_INT(get32(data + 6), exports[1].pref_block);
	CHECK_INT(get32(data + 10), exports[1].max_payload);
	CHECK_INT(next_reply(NBD_OPT_INFO, &data, &len), NBD_REP_ACK);

	CHECK_INT(next_reply(NBD_OPT_GO, &data, &len), NBD_REP_INFO);
	CHECK_U64(get64(data + 2), exports[0].size);
	CHECK_INT(next_reply(NBD_OPT_GO, &data, &len), NBD_REP_INFO);
	CHECK_INT(get32(data + 10), NBD_MAX_REQUEST_SIZE);
	CHECK_INT(next_reply(NBD_OPT_GO, &data, &len), NBD_REP_INFO);
	CHECK_INT(get16(data), NBD_INFO_NAME);
	CHECK_INT(len, 2 + strlen("disk"));
	CHECK_MEM(data + 2, "disk", 4);
	CHECK_INT(next_reply(NBD_OPT_GO, &data, &len), NBD_REP_INFO);
	CHECK_INT(get16(data), NBD_INFO_DESCRIPTION);
	CHECK_INT(len, 2 + strlen(exports[0].description));
	CHECK_INT(next_reply(NBD_OPT_GO, &data, &len), NBD_REP_ACK);
	CHECK_INT(at, out.len);
}

/* Each malformed GO with its answer; the engine goes on negotiating. */
static void test_go_errors(void)
{
	static struct wire w;
	static char name[NBD_MAX_NAME_LEN + 2];

	start(0, &w);
	put_option(&w, NBD_OPT_GO, "\0\0\0\0\0", 5);
	put_option(&w, NBD_OPT_GO, "\0\0\0\x05\0\0", 6);
	put_option(&w, NBD_OPT_GO, "\0\0\0\0\0\x01", 6);
	put_option(&w, NBD_OPT_INFO, "\0\0\0\x02" "a\0" "\0\0", 8);
	put_go(&w, NBD_OPT_GO, "nosuch", 0, NULL);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), w.len);
	CHECK_INT(neg.state, NBD_PROTO_NEG_OPTIONS);
	CHECK_INT(reported, 5);
	expect_error(NBD_OPT_GO, NBD_REP_ERR_INVALID, "option data too short");
	expect_error(NBD_OPT_GO, NBD_REP_ERR_INVALID, "name length past the option data");
	expect_error(NBD_OPT_GO, NBD_REP_ERR_INVALID,
		     "information request count does not match the option length");
	expect_error(NBD_OPT_INFO, NBD_REP_ERR_INVALID, "export name too long or contains NUL");
	expect_error(NBD_OPT_GO, NBD_REP_ERR_UNKNOWN, "no such export");
	CHECK_INT(last_status, -ENOENT);

	/* A name of NBD_MAX_NAME_LEN bytes is looked up; one more is not. */
	for (size_t n = NBD_MAX_NAME_LEN; n <= NBD_MAX_NAME_LEN + 1; n++) {
		memset(name, 'n', n);
		name[n] = '\0';
		start(0, &w);
		put_go(&w, NBD_OPT_GO, name, 0, NULL);
		CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), w.len);
		if (n == NBD_MAX_NAME_LEN)
			expect_error(NBD_OPT_GO, NBD_REP_ERR_UNKNOWN, "no such export");
		else
			expect_error(NBD_OPT_GO, NBD_REP_ERR_INVALID,
				     "export name too long or contains NUL");
	}
}

static void test_export_name_and_abort(void)
{
	static struct wire w;
	uint8_t zeroes[sizeof(((struct nbd_wire_export_name_reply *)0)->zeroes)] = { 0 };

	/* Without NO_ZEROES the answer carries its zeroes. */
	for (int nz = 0; nz <= 1; nz++) {
		start(nz ? NBD_FLAG_C_NO_ZEROES : 0, &w);
		put_option(&w, NBD_OPT_EXPORT_NAME, "null", 4);
		CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), w.len);
		CHECK_INT(neg.state, NBD_PROTO_NEG_GO);
		CHECK_STR(neg.chosen.name, "null");
		CHECK_INT(out.len - at, sizeof(struct nbd_wire_export_name_reply) -
			  (nz ? sizeof(zeroes) : 0));
		CHECK_U64(get64(out.data + at), exports[1].size);
		CHECK_INT(get16(out.data + at + 8), exports[1].tflags);
		if (!nz)
			CHECK_MEM(out.data + at + offsetof(struct nbd_wire_export_name_reply, zeroes),
				  zeroes, sizeof(zeroes));
	}
	/* It cannot answer an error: the connection ends. */
	start(0, &w);
	put_option(&w, NBD_OPT_EXPORT_NAME, "nosuch", 6);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), w.len);
	CHECK_INT(neg.state, NBD_PROTO_NEG_FAIL);
	CHECK_STR(neg.why, "NBD_OPT_EXPORT_NAME: no such export");
	CHECK_INT(out.len, at);
	start(0, &w);
	put_option(&w, NBD_OPT_EXPORT_NAME, "di\0k", 4);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), w.len);
	CHECK_STR(neg.why, "NBD_OPT_EXPORT_NAME: name too long or contains NUL");
	CHECK_INT(last_status, -EINVAL);

	/* ABORT is acknowledged, its data ignored, and what follows is left. */
	start(0, &w);
	put_option(&w, NBD_OPT_ABORT, "xyz", 3);
	put_option(&w, NBD_OPT_LIST, NULL, 0);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), FLAGS_LEN + OPTION_HDR + 3);
	CHECK_INT(neg.state, NBD_PROTO_NEG_ABORT);
	{
		const uint8_t *data;
		uint32_t len;

		CHECK_INT(next_reply(NBD_OPT_ABORT, &data, &len), NBD_REP_ACK);
		CHECK_INT(len, 0);
	}
	CHECK_INT(at, out.len);
}

/* Fed a byte at a time, as a slow socket delivers it, the engine reads and
 * answers exactly what it does fed whole. */
static void test_byte_at_a_time(void)
{
	static struct wire w;
	static const uint16_t want_name[] = { NBD_INFO_NAME };
	struct nbd_buf whole = { 0 };
	size_t used = 0;

	start(NBD_FLAG_C_FIXED_NEWSTYLE, &w);
	put_option(&w, NBD_OPT_LIST, NULL, 0);
	put_option(&w, NBD_OPT_SET_META_CONTEXT, "ctx", 3);
	put_go(&w, NBD_OPT_GO, "null", 1, want_name);
	CHECK_INT(nbd_proto_neg_input(&neg, w.b, w.len, &out), w.len);
	whole = out;
	out = (struct nbd_buf){ 0 };
	start(NBD_FLAG_C_FIXED_NEWSTYLE, &w);
	put_option(&w, NBD_OPT_LIST, NULL, 0);
	put_option(&w, NBD_OPT_SET_META_CONTEXT, "ctx", 3);
	put_go(&w, NBD_OPT_GO, "null", 1, want_name);
	for (size_t have = 1; have <= w.len; have++)
		used += nbd_proto_neg_input(&neg, w.b + used, have - used, &out);
	CHECK_INT(used, w.len);
	CHECK_INT(neg.state, NBD_PROTO_NEG_GO);
	CHECK_INT(out.len, whole.len);
	if (out.len == whole.len)
		CHECK_MEM(out.data, whole.data, out.len);
	nbd_buf_free(&whole);
}

/* --- transmission -------------------------------------------------------- */

static void test_decode(void)
{
	static const uint8_t wire[] = {
		0x25, 0x60, 0x95, 0x13,                         /* magic */
		0x00, 0x01,                                     /* flags: FUA */
		0x00, 0x01,                                     /* WRITE */
		1, 2, 3, 4, 5, 6, 7, 8,                         /* handle */
		0, 0, 0, 0, 0, 0, 0x10, 0,                      /* offset 4096 */
		0, 0, 0x02, 0,                                  /* len 512 */
	};
	struct nbd_request r;
	struct nbd_wire_simple_reply rep;

	CHECK_INT(sizeof(wire), sizeof(struct nbd_wire_request));
	CHECK(!nbd_request_decode(wire, sizeof(wire) - 1, &r));
	CHECK(nbd_request_decode(wire, sizeof(wire), &r));
	CHECK_U64(r.magic, NBD_REQUEST_MAGIC);
	CHECK_INT(r.flags, NBD_CMD_FLAG_FUA);
	CHECK_INT(r.type, NBD_CMD_WRITE);
	CHECK_U64(r.handle, UINT64_C(0x0102030405060708));
	CHECK_U64(r.offset, 4096);
	CHECK_INT(r.len, 512);
	CHECK_INT(nbd_request_payload(&r), 512);
	r.type = NBD_CMD_READ;
	CHECK_INT(nbd_request_payload(&r), 0);

	nbd_simple_reply_init(&rep, r.handle, NBD_EINVAL);
	CHECK_MEM(&rep, "\x67\x44\x66\x98" "\0\0\0\x16" "\1\2\3\4\5\6\7\x08", sizeof(rep));
}

static void test_validate(void)
{
	const uint64_t size = UINT64_C(1) << 20;
	const struct nbd_limits rw = {
		.size = size, .min_block = 512, .max_payload = NBD_MAX_REQUEST_SIZE,
		.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
			  NBD_FLAG_SEND_TRIM,
	};
	const struct nbd_limits ro = {
		.size = size, .min_block = 512, .max_payload = NBD_MAX_REQUEST_SIZE,
		.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_READ_ONLY,
	};
	static const struct {
		bool ro;
		uint16_t type, flags;
		uint64_t offset;
		uint32_t len;
		enum nbd_verdict verdict;
		uint32_t error;
		const char *why;
	} cases[] = {
		{ 0, NBD_CMD_READ, 0, 0, 4096, NBD_REQ_OK, 0, NULL },
		{ 0, NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, (1 << 20) - 512, 512, NBD_REQ_OK, 0, NULL },
		{ 0, NBD_CMD_READ, 0, 0, 1 << 20, NBD_REQ_OK, 0, NULL },
		{ 0, NBD_CMD_FLUSH, 0, 0, 0, NBD_REQ_OK, 0, NULL },
		{ 0, NBD_CMD_TRIM, 0, 512, 1024, NBD_REQ_OK, 0, NULL },
		{ 0, NBD_CMD_DISC, 0, 0, 0, NBD_REQ_OK, 0, NULL },
		{ 1, NBD_CMD_READ, 0, 0, 512, NBD_REQ_OK, 0, NULL },
		{ 0, NBD_CMD_WRITE, 0, 0, NBD_MAX_REQUEST_SIZE + 1, NBD_REQ_DISCONNECT, 0,
		  "write payload larger than the maximum payload size" },
		{ 0, NBD_CMD_READ, 0, 0, NBD_MAX_REQUEST_SIZE + 1, NBD_REQ_ERROR, NBD_EINVAL,
		  "read larger than the maximum payload size" },
		{ 0, NBD_CMD_CACHE, 0, 0, 512, NBD_REQ_ERROR, NBD_EINVAL, "unknown command" },
		{ 0, 0xffff, 0, 0, 512, NBD_REQ_ERROR, NBD_EINVAL, "unknown command" },
		{ 1, NBD_CMD_FLUSH, 0, 0, 0, NBD_REQ_ERROR, NBD_EINVAL, "flush not negotiated" },
		{ 1, NBD_CMD_TRIM, 0, 0, 512, NBD_REQ_ERROR, NBD_EINVAL, "trim not negotiated" },
		{ 0, NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 512, NBD_REQ_ERROR, NBD_EINVAL,
		  "unsupported command flag" },
		{ 1, NBD_CMD_READ, NBD_CMD_FLAG_FUA, 0, 512, NBD_REQ_ERROR, NBD_EINVAL,
		  "FUA not negotiated" },
		{ 0, NBD_CMD_FLUSH, 0, 512, 0, NBD_REQ_ERROR, NBD_EINVAL,
		  "flush with a nonzero offset or length" },
		{ 1, NBD_CMD_WRITE, 0, 0, 512, NBD_REQ_ERROR, NBD_EPERM, "export is read-only" },
		{ 0, NBD_CMD_WRITE, 0, 1 << 20, 512, NBD_REQ_ERROR, NBD_ENOSPC,
		  "request past the end of the export" },
		{ 0, NBD_CMD_READ, 0, (1 << 20) - 512, 1024, NBD_REQ_ERROR, NBD_EINVAL,
		  "request past the end of the export" },
		{ 0, NBD_CMD_READ, 0, UINT64_MAX - 511, 1024, NBD_REQ_ERROR, NBD_EINVAL,
		  "request past the end of the export" },
		{ 0, NBD_CMD_READ, 0, 256, 512, NBD_REQ_ERROR, NBD_EINVAL,
		  "request not aligned to the minimum block size" },
		{ 0, NBD_CMD_TRIM, 0, 0, 100, NBD_REQ_ERROR, NBD_EINVAL,
		  "request not aligned to the minimum block size" },
	};
	struct nbd_request r;
	uint32_t error;
	const char *why;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = (struct nbd_request){
			.magic = NBD_REQUEST_MAGIC, .flags = cases[i].flags,
			.type = cases[i].type, .offset = cases[i].offset, .len = cases[i].len,
		};
		error = UINT32_MAX;
		why = "unset";
		CHECK_INT(nbd_request_validate(&r, cases[i].ro ? &ro : &rw, &error, &why),
			  cases[i].verdict);
		CHECK_INT(error, cases[i].error);
		CHECK_STR(why, cases[i].why);
	}
	/* Bad magic is a disconnect whatever else the request says. */
	r = (struct nbd_request){ .magic = NBD_REQUEST_MAGIC + 1, .type = NBD_CMD_READ };
	CHECK_INT(nbd_request_validate(&r, &rw, &error, &why), NBD_REQ_DISCONNECT);
	CHECK_STR(why, "bad request magic");
	CHECK_INT(error, NBD_SUCCESS);
}

static void test_names_and_errors(void)
{
	nbd_proto_init();
	CHECK_STR(nbd_option_name(NBD_OPT_GO), "GO");
	CHECK_STR(nbd_option_name(NBD_OPT_EXTENDED_HEADERS), "EXTENDED_HEADERS");
	CHECK_STR(nbd_option_name(NBD_OPT_EXTENDED_HEADERS + 1), "UNKNOWN");
	CHECK_STR(nbd_option_name(UINT32_MAX), "UNKNOWN");
	CHECK_STR(nbd_cmd_name(NBD_CMD_WRITE_ZEROES), "WRITE_ZEROES");
	CHECK_STR(nbd_cmd_name(NBD_CMD_BLOCK_STATUS + 1), "UNKNOWN");
	CHECK_STR(nbd_cmd_name(UINT32_MAX), "UNKNOWN");

	CHECK_INT(nbd_errno_to_wire(0), NBD_SUCCESS);
	CHECK_INT(nbd_errno_to_wire(-EROFS), NBD_EPERM);
	CHECK_INT(nbd_errno_to_wire(-ENOMEM), NBD_ENOMEM);
	CHECK_INT(nbd_errno_to_wire(-ERANGE), NBD_EINVAL);
	CHECK_INT(nbd_errno_to_wire(-EFBIG), NBD_ENOSPC);
	CHECK_INT(nbd_errno_to_wire(-EOVERFLOW), NBD_EOVERFLOW);
	CHECK_INT(nbd_errno_to_wire(-ENOTSUP), NBD_ENOTSUP);
	CHECK_INT(nbd_errno_to_wire(-ENODEV), NBD_ESHUTDOWN);
	CHECK_INT(nbd_errno_to_wire(-EBADMSG), NBD_EIO);
}

int main(void)
{
	test_greeting_and_flags();
	test_option_header();
	test_option_count();
	test_list();
	test_go();
	test_go_errors();
	test_export_name_and_abort();
	test_byte_at_a_time();
	test_decode();
	test_validate();
	test_names_and_errors();
	nbd_buf_free(&out);
	UNIT_DONE("nbd_proto_unit");
}
