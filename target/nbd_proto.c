// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_proto.c: the NBD wire protocol without sockets: fixed newstyle
 * negotiation as an incremental engine over byte buffers, transmission
 * request decoding and validation, and the name tables the probes use.
 *
 * Nothing here knows about reactors, exports or file descriptors: the
 * server (nbd.c) and the fuzz harness (fuzz/nbd_fuzz.c) feed it bytes and
 * act on what it decides, so what is fuzzed is what is served.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nbd_proto.h"

/* --- names ----------------------------------------------------------- */

#define NBD_NAME_MAX 24

/* Indexed by NBD_OPT_*; the last entry is the fallback. */
static const char *const option_names_src[] = {
	[0] = "UNKNOWN",
	[NBD_OPT_EXPORT_NAME] = "EXPORT_NAME",
	[NBD_OPT_ABORT] = "ABORT",
	[NBD_OPT_LIST] = "LIST",
	[NBD_OPT_PEEK_EXPORT] = "PEEK_EXPORT",
	[NBD_OPT_STARTTLS] = "STARTTLS",
	[NBD_OPT_INFO] = "INFO",
	[NBD_OPT_GO] = "GO",
	[NBD_OPT_STRUCTURED_REPLY] = "STRUCTURED_REPLY",
	[NBD_OPT_LIST_META_CONTEXT] = "LIST_META_CONTEXT",
	[NBD_OPT_SET_META_CONTEXT] = "SET_META_CONTEXT",
	[NBD_OPT_EXTENDED_HEADERS] = "EXTENDED_HEADERS",
};
#define OPTION_NAMES (sizeof(option_names_src) / sizeof(option_names_src[0]))

static const char *const cmd_names_src[] = {
	[NBD_CMD_READ] = "READ",
	[NBD_CMD_WRITE] = "WRITE",
	[NBD_CMD_DISC] = "DISC",
	[NBD_CMD_FLUSH] = "FLUSH",
	[NBD_CMD_TRIM] = "TRIM",
	[NBD_CMD_CACHE] = "CACHE",
	[NBD_CMD_WRITE_ZEROES] = "WRITE_ZEROES",
	[NBD_CMD_BLOCK_STATUS] = "BLOCK_STATUS",
	"UNKNOWN",
};
#define CMD_NAMES (sizeof(cmd_names_src) / sizeof(cmd_names_src[0]))

/* Writable copies: the probes hand these addresses to bpftrace, whose
 * str() cannot fault in a page the process never touched. */
static char option_names[OPTION_NAMES][NBD_NAME_MAX];
static char cmd_names[CMD_NAMES][NBD_NAME_MAX];

void nbd_proto_init(void)
{
	for (size_t i = 0; i < OPTION_NAMES; i++)
		strncpy(option_names[i], option_names_src[i], NBD_NAME_MAX - 1);
	for (size_t i = 0; i < CMD_NAMES; i++)
		strncpy(cmd_names[i], cmd_names_src[i], NBD_NAME_MAX - 1);
}

const char *nbd_option_name(uint32_t option)
{
	if (option >= OPTION_NAMES)
		option = 0;
	return option_names[option];
}

const char *nbd_cmd_name(uint32_t cmd)
{
	if (cmd >= CMD_NAMES)
		cmd = CMD_NAMES - 1;
	return cmd_names[cmd];
}

uint32_t nbd_errno_to_wire(int status)
{
	switch (-status) {
	case 0:
		return NBD_SUCCESS;
	case EPERM:
	case EROFS:
		return NBD_EPERM;
	case ENOMEM:
		return NBD_ENOMEM;
	case EINVAL:
	case ERANGE:
		return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return NBD_ENOSPC;
	case EOVERFLOW:
		return NBD_EOVERFLOW;
	case ENOTSUP:
		return NBD_ENOTSUP;
	case ESHUTDOWN:
	case ENODEV:
		return NBD_ESHUTDOWN;
	default:
		return NBD_EIO;
	}
}

/* --- output buffer -------------------------------------------------- */

int nbd_buf_append(struct nbd_buf *b, const void *p, size_t n)
{
	if (b->cap - b->len < n) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap - b->len < n)
			cap *= 2;
		uint8_t *d = realloc(b->data, cap);
		if (!d)
			return -ENOMEM;
		b->data = d;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

void nbd_buf_reset(struct nbd_buf *b)
{
	b->len = 0;
	b->off = 0;
}

void nbd_buf_free(struct nbd_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/* --- negotiation ---------------------------------------------------- */

static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static uint16_t get_be16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

void nbd_proto_neg_init(struct nbd_proto_neg *n, const struct nbd_proto_neg_ops *ops,
			void *ctx)
{
	memset(n, 0, sizeof(*n));
	n->ops = ops;
	n->ctx = ctx;
	n->state = NBD_PROTO_NEG_CLIENT_FLAGS;
}

int nbd_proto_neg_greeting(struct nbd_buf *out)
{
	struct nbd_wire_greeting g = {
		.magic = htobe64(NBD_MAGIC),
		.opts_magic = htobe64(NBD_OPTS_MAGIC),
		.hflags = htobe16(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES),
	};
	return nbd_buf_append(out, &g, sizeof(g));
}

static int send_reply(struct nbd_buf *out, uint32_t option, uint32_t reply,
		      const void *data, uint32_t len)
{
	struct nbd_wire_option_reply h = {
		.magic = htobe64(NBD_REP_MAGIC),
		.option = htobe32(option),
		.reply = htobe32(reply),
		.replylen = htobe32(len),
	};
	int rc = nbd_buf_append(out, &h, sizeof(h));
	return rc ? rc : nbd_buf_append(out, data, len);
}

/* An error reply carries a message for the human at the client. */
static int send_error(struct nbd_buf *out, uint32_t option, uint32_t reply,
		      const char *msg)
{
	return send_reply(out, option, reply, msg, (uint32_t)strlen(msg));
}

/* The status an option reply stands for, for the nbd__option probe. */
static int reply_status(uint32_t reply)
{
	switch (reply) {
	case NBD_REP_ACK:
		return 0;
	case NBD_REP_ERR_UNSUP:
		return -ENOTSUP;
	case NBD_REP_ERR_UNKNOWN:
		return -ENOENT;
	case NBD_REP_ERR_TOO_BIG:
		return -E2BIG;
	default:
		return -EINVAL;
	}
}

static void fail(struct nbd_proto_neg *n, const char *why)
{
	n->state = NBD_PROTO_NEG_FAIL;
	n->why = why;
}

static void option_done(struct nbd_proto_neg *n, uint32_t option, int status)
{
	if (n->ops->option)
		n->ops->option(n->ctx, option, status);
}

/* A name on the wire: at most NBD_MAX_NAME_LEN bytes and no NUL.  Copies
 * it, terminated, into buf (NBD_MAX_NAME_LEN + 1 bytes). */
static bool copy_name(char *buf, const uint8_t *p, uint32_t len)
{
	if (len > NBD_MAX_NAME_LEN || memchr(p, 0, len))
		return false;
	memcpy(buf, p, len);
	buf[len] = '\0';
	return true;
}

struct list_ctx {
	struct nbd_buf *out;
};

static int list_one(void *fctx, const struct nbd_export_info *e)
{
	struct list_ctx *lc = fctx;
	size_t len = strlen(e->name);
	if (len > NBD_MAX_NAME_LEN)
		return 0;       /* cannot be named on the wire: not listed */
	struct nbd_wire_option_reply h = {
		.magic = htobe64(NBD_REP_MAGIC),
		.option = htobe32(NBD_OPT_LIST),
		.reply = htobe32(NBD_REP_SERVER),
		.replylen = htobe32((uint32_t)(4 + len)),
	};
	uint32_t nlen = htobe32((uint32_t)len);
	int rc = nbd_buf_append(lc->out, &h, sizeof(h));
	if (!rc)
		rc = nbd_buf_append(lc->out, &nlen, sizeof(nlen));
	if (!rc)
		rc = nbd_buf_append(lc->out, e->name, len);
	return rc;
}

static int opt_list(struct nbd_proto_neg *n, uint32_t optlen, struct nbd_buf *out)
{
	if (optlen != 0) {
		option_done(n, NBD_OPT_LIST, -EINVAL);
		return send_error(out, NBD_OPT_LIST, NBD_REP_ERR_INVALID,
				  "NBD_OPT_LIST takes no data");
	}
	struct list_ctx lc = { .out = out };
	int rc = n->ops->list(n->ctx, list_one, &lc);
	if (rc)
		return rc;
	option_done(n, NBD_OPT_LIST, 0);
	return send_reply(out, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

static int send_info_string(struct nbd_buf *out, uint32_t option,
			    uint16_t type, const char *s)
{
	size_t len = strlen(s);
	if (len > NBD_MAX_NAME_LEN)
		len = NBD_MAX_NAME_LEN;
	uint8_t buf[2 + NBD_MAX_NAME_LEN];
	uint16_t t = htobe16(type);
	memcpy(buf, &t, 2);
	memcpy(buf + 2, s, len);
	return send_reply(out, option, NBD_REP_INFO, buf, (uint32_t)(2 + len));
}

/* NBD_OPT_INFO and NBD_OPT_GO share their request and replies. */
/* Answer option with NBD_REP_ERR_INVALID, saying why. */
static int opt_invalid(struct nbd_proto_neg *n, uint32_t option, struct nbd_buf *out,
		       const char *why)
{
	option_done(n, option, -EINVAL);
	return send_error(out, option, NBD_REP_ERR_INVALID, why);
}

static int opt_info_go(struct nbd_proto_neg *n, uint32_t option,
		       const uint8_t *data, uint32_t optlen, struct nbd_buf *out)
{
	char name[NBD_MAX_NAME_LEN + 1];
	struct nbd_export_info e;
	bool want_name = false, want_desc = false;
	uint32_t namelen;
	uint16_t nreq;

	/* name length (4), name, request count (2), requests (2 each) */
	if (optlen < 6)
		return opt_invalid(n, option, out, "option data too short");
	namelen = get_be32(data);
	if (namelen > optlen - 6)
		return opt_invalid(n, option, out, "name length past the option data");
	nreq = get_be16(data + 4 + namelen);
	if (optlen != 6 + namelen + 2u * nreq)
		return opt_invalid(n, option, out,
				   "information request count does not match the option length");
	if (!copy_name(name, data + 4, namelen))
		return opt_invalid(n, option, out, "export name too long or contains NUL");
	for (uint16_t i = 0; i < nreq; i++) {
		uint16_t t = get_be16(data + 6 + namelen + 2u * i);

		want_name |= t == NBD_INFO_NAME;
		want_desc |= t == NBD_INFO_DESCRIPTION;
	}
	if (n->ops->lookup(n->ctx, name, &e) != 0) {
		option_done(n, option, -ENOENT);
		return send_error(out, option, NBD_REP_ERR_UNKNOWN, "no such export");
	}

	struct nbd_wire_info_export ie = {
		.info = htobe16(NBD_INFO_EXPORT),
		.size = htobe64(e.size),
		.tflags = htobe16(e.tflags),
	};
	/* Always sent, requested or not: the server enforces min_block, and
	 * the spec asks a server with non-default constraints to say so. */
	struct nbd_wire_info_block_size bs = {
		.info = htobe16(NBD_INFO_BLOCK_SIZE),
		.minimum = htobe32(e.min_block),
		.preferred = htobe32(e.pref_block),
		.maximum = htobe32(e.max_payload),
	};
	int rc = send_reply(out, option, NBD_REP_INFO, &ie, sizeof(ie));
	if (!rc)
		rc = send_reply(out, option, NBD_REP_INFO, &bs, sizeof(bs));
	if (!rc && want_name)
		rc = send_info_string(out, option, NBD_INFO_NAME, e.name);
	if (!rc && want_desc && e.description)
		rc = send_info_string(out, option, NBD_INFO_DESCRIPTION,
				      e.description);
	if (!rc)
		rc = send_reply(out, option, NBD_REP_ACK, NULL, 0);
	if (rc)
		return rc;
	option_done(n, option, 0);
	if (option == NBD_OPT_GO) {
		n->chosen = e;
		n->state = NBD_PROTO_NEG_GO;
	}
	return 0;
}

/* NBD_OPT_EXPORT_NAME cannot report an error: an unknown export is a hard
 * disconnect, as the spec requires. */
static int opt_export_name(struct nbd_proto_neg *n, const uint8_t *data,
			   uint32_t optlen, struct nbd_buf *out)
{
	char name[NBD_MAX_NAME_LEN + 1];
	struct nbd_export_info e;

	if (!copy_name(name, data, optlen)) {
		option_done(n, NBD_OPT_EXPORT_NAME, -EINVAL);
		fail(n, "NBD_OPT_EXPORT_NAME: name too long or contains NUL");
		return 0;
	}
	if (n->ops->lookup(n->ctx, name, &e) != 0) {
		option_done(n, NBD_OPT_EXPORT_NAME, -ENOENT);
		fail(n, "NBD_OPT_EXPORT_NAME: no such export");
		return 0;
	}
	struct nbd_wire_export_name_reply r = {
		.size = htobe64(e.size),
		.tflags = htobe16(e.tflags),
	};
	size_t len = sizeof(r);
	if (n->cflags & NBD_FLAG_C_NO_ZEROES)
		len -= sizeof(r.zeroes);
	int rc = nbd_buf_append(out, &r, len);
	if (rc)
		return rc;
	option_done(n, NBD_OPT_EXPORT_NAME, 0);
	n->chosen = e;
	n->state = NBD_PROTO_NEG_GO;
	return 0;
}

/* Handle one whole option; 0 or -ENOMEM (replies could not be queued). */
static int handle_option(struct nbd_proto_neg *n, uint32_t option,
			 const uint8_t *data, uint32_t optlen,
			 struct nbd_buf *out)
{
	switch (option) {
	case NBD_OPT_EXPORT_NAME:
		return opt_export_name(n, data, optlen, out);
	case NBD_OPT_ABORT:
		/* Any data is ignored, as the spec asks. */
		option_done(n, option, 0);
		n->state = NBD_PROTO_NEG_ABORT;
		return send_reply(out, option, NBD_REP_ACK, NULL, 0);
	case NBD_OPT_LIST:
		return opt_list(n, optlen, out);
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		return opt_info_go(n, option, data, optlen, out);
	default:
		/* Structured replies, TLS, meta contexts and anything newer:
		 * refused, and clients fall back to what is offered. */
		option_done(n, option, reply_status(NBD_REP_ERR_UNSUP));
		return send_error(out, option, NBD_REP_ERR_UNSUP,
				  "option not supported by blktgt");
	}
}

size_t nbd_proto_neg_input(struct nbd_proto_neg *n, const uint8_t *in, size_t len,
			   struct nbd_buf *out)
{
	size_t used = 0;

	while (n->state == NBD_PROTO_NEG_CLIENT_FLAGS || n->state == NBD_PROTO_NEG_OPTIONS) {
		size_t avail = len - used;

		if (n->state == NBD_PROTO_NEG_CLIENT_FLAGS) {
			if (avail < sizeof(struct nbd_wire_client_flags))
				break;
			n->cflags = get_be32(in + used);
			used += sizeof(struct nbd_wire_client_flags);
			if (n->cflags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
				fail(n, "unknown client flags");
				break;
			}
			n->state = NBD_PROTO_NEG_OPTIONS;
			continue;
		}

		struct nbd_wire_option h;
		if (avail < sizeof(h))
			break;
		memcpy(&h, in + used, sizeof(h));
		uint32_t option = be32toh(h.option);
		uint32_t optlen = be32toh(h.optlen);
		if (be64toh(h.magic) != NBD_OPTS_MAGIC) {
			fail(n, "bad option magic");
			break;
		}
		if (optlen > NBD_MAX_OPTION_LEN) {
			option_done(n, option, -E2BIG);
			fail(n, "option longer than NBD_MAX_OPTION_LEN");
			break;
		}
		if (avail - sizeof(h) < optlen)
			break;  /* wait for the whole option */
		if (++n->options > NBD_MAX_OPTIONS) {
			fail(n, "too many options");
			break;
		}
		used += sizeof(h) + optlen;
		if (handle_option(n, option, in + used - optlen, optlen, out) < 0) {
			fail(n, "out of memory");
			break;
		}
	}
	return used;
}

/* --- transmission requests ------------------------------------------ */

bool nbd_request_decode(const void *buf, size_t len, struct nbd_request *r)
{
	struct nbd_wire_request w;

	if (len < sizeof(w))
		return false;
	memcpy(&w, buf, sizeof(w));
	r->magic = be32toh(w.magic);
	r->flags = be16toh(w.flags);
	r->type = be16toh(w.type);
	r->handle = be64toh(w.handle);
	r->offset = be64toh(w.offset);
	r->len = be32toh(w.len);
	return true;
}

static enum nbd_verdict reject(uint32_t *error, const char **why,
			       uint32_t e, const char *msg)
{
	*error = e;
	*why = msg;
	return NBD_REQ_ERROR;
}

enum nbd_verdict nbd_request_validate(const struct nbd_request *r,
				      const struct nbd_limits *lim,
				      uint32_t *error, const char **why)
{
	uint64_t align = lim->min_block ? lim->min_block : 1;

	*error = NBD_SUCCESS;
	*why = NULL;

	/* A stream has no resync point: these two end the connection. */
	if (r->magic != NBD_REQUEST_MAGIC) {
		*why = "bad request magic";
		return NBD_REQ_DISCONNECT;
	}
	if (r->type == NBD_CMD_WRITE && r->len > lim->max_payload) {
		*why = "write payload larger than the maximum payload size";
		return NBD_REQ_DISCONNECT;
	}

	switch (r->type) {
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
	case NBD_CMD_DISC:
		break;
	case NBD_CMD_FLUSH:
		if (!(lim->tflags & NBD_FLAG_SEND_FLUSH))
			return reject(error, why, NBD_EINVAL, "flush not negotiated");
		break;
	case NBD_CMD_TRIM:
		if (!(lim->tflags & NBD_FLAG_SEND_TRIM))
			return reject(error, why, NBD_EINVAL, "trim not negotiated");
		break;
	default:
		return reject(error, why, NBD_EINVAL, "unknown command");
	}
	if (r->flags & ~NBD_CMD_FLAG_FUA)
		return reject(error, why, NBD_EINVAL, "unsupported command flag");
	if ((r->flags & NBD_CMD_FLAG_FUA) && !(lim->tflags & NBD_FLAG_SEND_FUA))
		return reject(error, why, NBD_EINVAL, "FUA not negotiated");
	if (r->type == NBD_CMD_DISC)
		return NBD_REQ_OK;
	if (r->type == NBD_CMD_FLUSH) {
		if (r->offset != 0 || r->len != 0)
			return reject(error, why, NBD_EINVAL,
				      "flush with a nonzero offset or length");
		return NBD_REQ_OK;
	}
	if ((lim->tflags & NBD_FLAG_READ_ONLY) && r->type != NBD_CMD_READ)
		return reject(error, why, NBD_EPERM, "export is read-only");
	if (r->type == NBD_CMD_READ && r->len > lim->max_payload)
		return reject(error, why, NBD_EINVAL,
			      "read larger than the maximum payload size");
	if (r->offset > lim->size || r->len > lim->size - r->offset)
		return reject(error, why,
			      r->type == NBD_CMD_WRITE ? NBD_ENOSPC : NBD_EINVAL,
			      "request past the end of the export");
	if ((r->offset | r->len) & (align - 1))
		return reject(error, why, NBD_EINVAL,
			      "request not aligned to the minimum block size");
	return NBD_REQ_OK;
}

void nbd_simple_reply_init(struct nbd_wire_simple_reply *rep, uint64_t handle,
			   uint32_t error)
{
	rep->magic = htobe32(NBD_SIMPLE_REPLY_MAGIC);
	rep->error = htobe32(error);
	rep->handle = htobe64(handle);
}
