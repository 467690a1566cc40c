// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_fuzz.c: libFuzzer harness for blktgt's NBD negotiation engine and
 * request checks (target/nbd_proto.c), the code that parses everything an
 * NBD client sends.  Built and run by `make fuzz-nbd` (mk/fuzz_nbd.mk).
 *
 * The first input byte picks what is fuzzed:
 *  - even: the rest is a client's negotiation stream (after the server's
 *    greeting).  It is fed to the engine twice, whole and in small chunks
 *    the way a socket delivers it; both runs must consume the same bytes,
 *    reach the same state and write byte-identical replies, and every
 *    reply must be a well-formed option reply.
 *  - odd: the rest is a transmission stream; the next bytes set the
 *    export's size and block size, then requests are decoded and checked
 *    until a disconnect verdict.  Whatever is accepted must lie inside the
 *    export, be aligned and within the maximum payload.
 *
 * With -DNBD_FUZZ_STANDALONE it has a main() that replays files given as
 * arguments, so the same checks run under any compiler (and in tests).
 */
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbd_exports.h"
#include "nbd_proto.h"

static const struct nbd_export_info fake_exports[] = {
	{ .name = "disk", .description = "a 1 MiB disk", .size = 1 << 20,
	  .tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		    NBD_FLAG_SEND_TRIM | NBD_FLAG_CAN_MULTI_CONN,
	  .min_block = 512, .pref_block = 4096, .max_payload = NBD_MAX_REQUEST_SIZE },
	{ .name = "null", .size = UINT64_C(1) << 40,
	  .tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH,
	  .min_block = 4096, .pref_block = 4096, .max_payload = 1 << 20 },
};
#define NFAKE (sizeof(fake_exports) / sizeof(fake_exports[0]))

static int fake_lookup(void *ctx, const char *name, struct nbd_export_info *out)
{
	return nbd_exports_lookup(fake_exports, NFAKE, name, out);
}

static int fake_list(void *ctx, nbd_list_fn fn, void *fctx)
{
	return nbd_exports_list(fake_exports, NFAKE, fn, fctx);
}

static void fake_option(void *ctx, uint32_t option, int status)
{
	unsigned *count = ctx;
	assert(status <= 0);
	assert(nbd_option_name(option) != NULL);
	(*count)++;
}

static const struct nbd_proto_neg_ops fake_ops = {
	.lookup = fake_lookup,
	.list = fake_list,
	.option = fake_option,
};

/* Every byte the engine wrote after the greeting is an option reply, or the
 * fixed NBD_OPT_EXPORT_NAME answer as the very last thing. */
static void check_replies(const struct nbd_buf *out, const struct nbd_proto_neg *n)
{
	size_t off = sizeof(struct nbd_wire_greeting);
	while (off < out->len) {
		struct nbd_wire_option_reply h;
		if (out->len - off >= sizeof(h))
			memcpy(&h, out->data + off, sizeof(h));
		if (out->len - off < sizeof(h) || be64toh(h.magic) != NBD_REP_MAGIC) {
			/* must be the export-name answer, ending the stream */
			size_t left = out->len - off;
			assert(n->state == NBD_PROTO_NEG_GO);
			assert(left == 10 || left == 134);
			return;
		}
		uint32_t len = be32toh(h.replylen);
		assert(len <= out->len - off - sizeof(h));
		off += sizeof(h) + len;
	}
}

static void fuzz_negotiation(const uint8_t *data, size_t size)
{
	struct nbd_proto_neg whole, chunked;
	struct nbd_buf out1 = { 0 }, out2 = { 0 };
	unsigned opts1 = 0, opts2 = 0;
	size_t step = size ? (size_t)(data[0] % 7) + 1 : 1;

	nbd_proto_neg_init(&whole, &fake_ops, &opts1);
	assert(nbd_proto_neg_greeting(&out1) == 0);
	size_t used1 = nbd_proto_neg_input(&whole, data, size, &out1);
	assert(used1 <= size);

	/* As the server does: a window of unconsumed bytes that grows by
	 * whatever the socket delivered, fed again each time. */
	nbd_proto_neg_init(&chunked, &fake_ops, &opts2);
	assert(nbd_proto_neg_greeting(&out2) == 0);
	size_t used2 = 0, have = 0;
	while (have < size && (chunked.state == NBD_PROTO_NEG_CLIENT_FLAGS ||
			       chunked.state == NBD_PROTO_NEG_OPTIONS)) {
		have = have + step < size ? have + step : size;
		used2 += nbd_proto_neg_input(&chunked, data + used2, have - used2, &out2);
	}

	assert(used1 == used2);
	assert(whole.state == chunked.state);
	assert(opts1 == opts2);
	assert(out1.len == out2.len && !memcmp(out1.data, out2.data, out1.len));
	if (whole.state == NBD_PROTO_NEG_GO) {
		struct nbd_export_info e;
		assert(fake_lookup(NULL, whole.chosen.name, &e) == 0);
	}
	if (whole.state == NBD_PROTO_NEG_FAIL)
		assert(whole.why != NULL);
	check_replies(&out1, &whole);
	nbd_buf_free(&out1);
	nbd_buf_free(&out2);
}

static void fuzz_requests(const uint8_t *data, size_t size)
{
	struct nbd_limits lim = {
		.size = UINT64_C(1) << 30,
		.min_block = 512,
		.max_payload = 1 << 20,
		.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH |
			  NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM,
	};
	size_t off = 0;

	if (size >= 3) {
		/* export size: up to 2^40, any value; block size 1..64 KiB */
		lim.size = ((uint64_t)data[0] << 32) | ((uint64_t)data[1] << 9);
		lim.min_block = 1u << (data[2] % 17);
		if (data[2] & 0x80)
			lim.tflags |= NBD_FLAG_READ_ONLY;
		off = 3;
	}

	for (;;) {
		struct nbd_request r;
		uint32_t error;
		const char *why;

		if (!nbd_request_decode(data + off, size - off, &r))
			break;
		off += sizeof(struct nbd_wire_request);
		enum nbd_verdict v = nbd_request_validate(&r, &lim, &error, &why);
		assert(nbd_cmd_name(r.type) != NULL);
		if (v == NBD_REQ_DISCONNECT) {
			assert(why);
			break;
		}
		if (v == NBD_REQ_ERROR) {
			assert(why && error != NBD_SUCCESS);
		} else {
			assert(error == NBD_SUCCESS && why == NULL);
			assert(r.magic == NBD_REQUEST_MAGIC);
			assert((r.flags & ~NBD_CMD_FLAG_FUA) == 0);
			if (r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE ||
			    r.type == NBD_CMD_TRIM) {
				assert(r.offset <= lim.size);
				assert(r.len <= lim.size - r.offset);
				assert(r.offset % lim.min_block == 0);
				assert(r.len % lim.min_block == 0);
				assert(!(lim.tflags & NBD_FLAG_READ_ONLY) ||
				       r.type == NBD_CMD_READ);
			}
			if (r.type == NBD_CMD_READ || r.type == NBD_CMD_WRITE)
				assert(r.len <= lim.max_payload);
			if (r.type == NBD_CMD_FLUSH)
				assert(r.offset == 0 && r.len == 0);
			if (r.type == NBD_CMD_DISC)
				break;
		}
		/* Whatever the verdict short of disconnect, a WRITE's payload
		 * follows and must be skipped; it is bounded by max_payload. */
		uint32_t payload = nbd_request_payload(&r);
		assert(payload <= lim.max_payload);
		if (size - off < payload)
			break;
		off += payload;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;

	if (!init) {
		nbd_proto_init();
		init = 1;
	}
	if (size < 1)
		return 0;
	if (data[0] & 1)
		fuzz_requests(data + 1, size - 1);
	else
		fuzz_negotiation(data + 1, size - 1);
	return 0;
}

#ifdef NBD_FUZZ_STANDALONE
/* Replay inputs: nbd_fuzz FILE...  Exits non-zero on the first input that
 * cannot be read; a failed check aborts. */
int main(int argc, char **argv)
{
	static uint8_t buf[1 << 20];

	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			fprintf(stderr, "nbd_fuzz: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		size_t n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
	}
	printf("nbd_fuzz: %d inputs replayed\n", argc - 1);
	return 0;
}
#endif
