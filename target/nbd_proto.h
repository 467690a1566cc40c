// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_proto.h: the NBD wire protocol, as NetworkBlockDevice/nbd
 * doc/proto.md defines it, and the pure (socket-free) code that speaks it.
 *
 * Every struct here is packed and every field is in network byte order:
 * convert with htobe*()/be*toh() at the point of use, never in place.
 *
 * Everything an untrusted client controls is bounded by one of the NBD_MAX_*
 * limits below, checked before any allocation or copy.
 *
 * The negotiation engine (nbd_proto_neg_*) and the request checks
 * (nbd_request_decode, nbd_request_validate) take buffers, not sockets, so
 * the fuzz harness (fuzz/nbd_fuzz.c) drives exactly the code the server
 * runs.  The server's rooms (nbd_conn.h lists them) own the sockets, the
 * reactors and the exports.
 */
#ifndef BLKTGT_NBD_PROTO_H
#define BLKTGT_NBD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bdev.h"

/* --- magics ------------------------------------------------------------ */

#define NBD_MAGIC               UINT64_C(0x4e42444d41474943) /* "NBDMAGIC" */
#define NBD_OPTS_MAGIC          UINT64_C(0x49484156454f5054) /* "IHAVEOPT" */
#define NBD_REP_MAGIC           UINT64_C(0x0003e889045565a9) /* option replies */
#define NBD_REQUEST_MAGIC       UINT32_C(0x25609513)
#define NBD_SIMPLE_REPLY_MAGIC  UINT32_C(0x67446698)

/* --- handshake flags (server, 16 bits) and client flags (32 bits) ----- */

#define NBD_FLAG_FIXED_NEWSTYLE   (1u << 0)
#define NBD_FLAG_NO_ZEROES        (1u << 1)

#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES      (1u << 1)

/* --- transmission flags (16 bits) ------------------------------------- */

#define NBD_FLAG_HAS_FLAGS          (1u << 0)
#define NBD_FLAG_READ_ONLY          (1u << 1)
#define NBD_FLAG_SEND_FLUSH         (1u << 2)
#define NBD_FLAG_SEND_FUA           (1u << 3)
#define NBD_FLAG_ROTATIONAL         (1u << 4)
#define NBD_FLAG_SEND_TRIM          (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES  (1u << 6)
#define NBD_FLAG_SEND_DF            (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN     (1u << 8)
#define NBD_FLAG_SEND_CACHE         (1u << 10)

/* --- options ----------------------------------------------------------- */

#define NBD_OPT_EXPORT_NAME        1
#define NBD_OPT_ABORT              2
#define NBD_OPT_LIST               3
#define NBD_OPT_PEEK_EXPORT        4
#define NBD_OPT_STARTTLS           5
#define NBD_OPT_INFO               6
#define NBD_OPT_GO                 7
#define NBD_OPT_STRUCTURED_REPLY   8
#define NBD_OPT_LIST_META_CONTEXT  9
#define NBD_OPT_SET_META_CONTEXT   10
#define NBD_OPT_EXTENDED_HEADERS   11

/* --- option replies ---------------------------------------------------- */

#define NBD_REP_ACK                 UINT32_C(1)
#define NBD_REP_SERVER              UINT32_C(2)
#define NBD_REP_INFO                UINT32_C(3)
#define NBD_REP_META_CONTEXT        UINT32_C(4)
#define NBD_REP_ERR(n)              ((UINT32_C(1) << 31) | (n))
#define NBD_REP_ERR_UNSUP           NBD_REP_ERR(1)
#define NBD_REP_ERR_POLICY          NBD_REP_ERR(2)
#define NBD_REP_ERR_INVALID         NBD_REP_ERR(3)
#define NBD_REP_ERR_PLATFORM        NBD_REP_ERR(4)
#define NBD_REP_ERR_TLS_REQD        NBD_REP_ERR(5)
#define NBD_REP_ERR_UNKNOWN         NBD_REP_ERR(6)
#define NBD_REP_ERR_SHUTDOWN        NBD_REP_ERR(7)
#define NBD_REP_ERR_BLOCK_SIZE_REQD NBD_REP_ERR(8)
#define NBD_REP_ERR_TOO_BIG         NBD_REP_ERR(9)

/* --- NBD_REP_INFO information types ----------------------------------- */

#define NBD_INFO_EXPORT       0
#define NBD_INFO_NAME         1
#define NBD_INFO_DESCRIPTION  2
#define NBD_INFO_BLOCK_SIZE   3

/* --- transmission commands and command flags -------------------------- */

#define NBD_CMD_READ          0
#define NBD_CMD_WRITE         1
#define NBD_CMD_DISC          2
#define NBD_CMD_FLUSH         3
#define NBD_CMD_TRIM          4
#define NBD_CMD_CACHE         5
#define NBD_CMD_WRITE_ZEROES  6
#define NBD_CMD_BLOCK_STATUS  7

#define NBD_CMD_FLAG_FUA        (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE    (1u << 1)
#define NBD_CMD_FLAG_DF         (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE    (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO  (1u << 4)

/* --- error values in replies ------------------------------------------ */

#define NBD_SUCCESS     0
#define NBD_EPERM       1
#define NBD_EIO         5
#define NBD_ENOMEM      12
#define NBD_EINVAL      22
#define NBD_ENOSPC      28
#define NBD_EOVERFLOW   75
#define NBD_ENOTSUP     95
#define NBD_ESHUTDOWN   108

/* --- limits on what a client controls -------------------------------- */

/* Longest string (export name) the spec allows; longer is a violation. */
#define NBD_MAX_NAME_LEN       4096
/* Longest option payload read; a longer option length is a hard
 * disconnect, since skipping gigabytes of option data is a free DoS.  Fits
 * NBD_OPT_GO with a maximal name and 2000 information requests. */
#define NBD_MAX_OPTION_LEN     8192
/* Options one connection may send before it is disconnected: bounds how
 * long a client can hold reactor 0 in negotiation. */
#define NBD_MAX_OPTIONS        4096
/* Largest READ or WRITE payload (advertised as the maximum payload); a
 * WRITE above it is a hard disconnect because its data cannot be skipped
 * cheaply, a READ above it is NBD_EINVAL. */
#define NBD_MAX_REQUEST_SIZE   BDEV_MAX_IO_SIZE
/* Connections open at once, over every reactor; more are closed at accept. */
#define NBD_MAX_CONNECTIONS    1024
/* Requests one connection may have in flight (submitted or waiting for
 * their reply to be sent), and their payload bytes; beyond either the
 * server stops reading from that client until replies drain. */
#define NBD_MAX_INFLIGHT       256
#define NBD_MAX_INFLIGHT_BYTES (64u << 20)

/* --- server-side buffer sizes (not client controlled) ----------------- */

/* Receive buffer per connection: many small requests per recv(). */
#define NBD_RBUF_SIZE          (128u * 1024)
/* A write payload at least this large that is not yet buffered is read
 * straight into the request's own buffer, skipping the copy. */
#define NBD_DIRECT_READ_MIN    (64u * 1024)
/* Request buffers at most this large are kept on the connection's free
 * list for reuse; larger ones are freed when the request ends. */
#define NBD_REQ_BUF_KEEP       (128u * 1024)
/* Iovecs gathered into one sendmsg() of replies. */
#define NBD_TX_IOV_MAX         64

/* --- wire structs ----------------------------------------------------- */

/* S: greeting of fixed newstyle negotiation. */
struct nbd_wire_greeting {
	uint64_t magic;           /* NBD_MAGIC */
	uint64_t opts_magic;      /* NBD_OPTS_MAGIC */
	uint16_t hflags;          /* NBD_FLAG_FIXED_NEWSTYLE | ... */
} __attribute__((packed));

/* C: client flags, the answer to the greeting. */
struct nbd_wire_client_flags {
	uint32_t cflags;
} __attribute__((packed));

/* C: header of one option; optlen bytes of data follow. */
struct nbd_wire_option {
	uint64_t magic;           /* NBD_OPTS_MAGIC */
	uint32_t option;          /* NBD_OPT_* */
	uint32_t optlen;
} __attribute__((packed));

/* S: header of one option reply; replylen bytes of data follow. */
struct nbd_wire_option_reply {
	uint64_t magic;           /* NBD_REP_MAGIC */
	uint32_t option;
	uint32_t reply;           /* NBD_REP_* */
	uint32_t replylen;
} __attribute__((packed));

/* S: NBD_REP_INFO / NBD_INFO_EXPORT payload. */
struct nbd_wire_info_export {
	uint16_t info;            /* NBD_INFO_EXPORT */
	uint64_t size;
	uint16_t tflags;
} __attribute__((packed));

/* S: NBD_REP_INFO / NBD_INFO_BLOCK_SIZE payload. */
struct nbd_wire_info_block_size {
	uint16_t info;            /* NBD_INFO_BLOCK_SIZE */
	uint32_t minimum;
	uint32_t preferred;
	uint32_t maximum;
} __attribute__((packed));

/* S: the answer to NBD_OPT_EXPORT_NAME (the zeroes unless NO_ZEROES). */
struct nbd_wire_export_name_reply {
	uint64_t size;
	uint16_t tflags;
	uint8_t zeroes[124];
} __attribute__((packed));

/* C: a transmission request; len bytes of data follow an NBD_CMD_WRITE. */
struct nbd_wire_request {
	uint32_t magic;           /* NBD_REQUEST_MAGIC */
	uint16_t flags;           /* NBD_CMD_FLAG_* */
	uint16_t type;            /* NBD_CMD_* */
	uint64_t handle;          /* the client's cookie, opaque */
	uint64_t offset;
	uint32_t len;
} __attribute__((packed));

/* S: a simple reply; a successful NBD_CMD_READ is followed by its data. */
struct nbd_wire_simple_reply {
	uint32_t magic;           /* NBD_SIMPLE_REPLY_MAGIC */
	uint32_t error;           /* NBD_E* */
	uint64_t handle;
} __attribute__((packed));

_Static_assert(sizeof(struct nbd_wire_greeting) == 18, "greeting size");
_Static_assert(sizeof(struct nbd_wire_option) == 16, "option size");
_Static_assert(sizeof(struct nbd_wire_option_reply) == 20, "option reply size");
_Static_assert(sizeof(struct nbd_wire_info_export) == 12, "info export size");
_Static_assert(sizeof(struct nbd_wire_info_block_size) == 14, "info block size size");
_Static_assert(sizeof(struct nbd_wire_export_name_reply) == 134, "export name reply size");
_Static_assert(sizeof(struct nbd_wire_request) == 28, "request size");
_Static_assert(sizeof(struct nbd_wire_simple_reply) == 16, "simple reply size");

/* --- names, for probes and logs --------------------------------------- */

/* Copy the name tables into writable memory the program touches, so that
 * bpftrace's str() can read the names passed to probes.  Idempotent; call
 * on reactor 0 before the first connection. */
void nbd_proto_init(void);
/* "GO", "LIST", ... or "UNKNOWN"; never NULL. */
const char *nbd_option_name(uint32_t option);
/* "READ", "WRITE", ... or "UNKNOWN"; never NULL. */
const char *nbd_cmd_name(uint32_t cmd);

/* Map a bdev status (0 or -errno) to the NBD error of a reply. */
uint32_t nbd_errno_to_wire(int status);

/* --- output buffer ------------------------------------------------------ */

struct nbd_buf {
	uint8_t *data;
	size_t len;               /* bytes queued */
	size_t off;               /* bytes already sent (owner's bookkeeping) */
	size_t cap;
};

int nbd_buf_append(struct nbd_buf *b, const void *p, size_t n); /* 0/-ENOMEM */
void nbd_buf_reset(struct nbd_buf *b);
void nbd_buf_free(struct nbd_buf *b);

/* --- negotiation engine ----------------------------------------------- */

/* What the server says about one export. */
struct nbd_export_info {
	const char *name;         /* canonical name, NUL-terminated */
	const char *description;  /* NULL when none */
	uint64_t size;            /* bytes */
	uint16_t tflags;          /* NBD_FLAG_HAS_FLAGS | ... */
	uint32_t min_block;       /* power of two, <= 64 KiB */
	uint32_t pref_block;      /* power of two, >= max(min_block, 512) */
	uint32_t max_payload;     /* >= pref_block */
	void *handle;             /* the server's own, opaque to the engine */
};

typedef int (*nbd_list_fn)(void *fctx, const struct nbd_export_info *e);

struct nbd_proto_neg_ops {
	/* Fill *out for the export called name ("" = the default export);
	 * 0 or -ENOENT. */
	int (*lookup)(void *ctx, const char *name, struct nbd_export_info *out);
	/* Call fn once per export, in order; stop at and return the first
	 * non-zero fn returns, else 0. */
	int (*list)(void *ctx, nbd_list_fn fn, void *fctx);
	/* One call per option handled; status 0 or -errno (NULL: none). */
	void (*option)(void *ctx, uint32_t option, int status);
};

enum nbd_proto_neg_state {
	NBD_PROTO_NEG_CLIENT_FLAGS,     /* waiting for the client's flags */
	NBD_PROTO_NEG_OPTIONS,          /* option haggling */
	NBD_PROTO_NEG_GO,               /* done: send the output, then transmit */
	NBD_PROTO_NEG_ABORT,            /* done: send the output, then close */
	NBD_PROTO_NEG_FAIL,             /* done: close at once (hard disconnect) */
};

struct nbd_proto_neg {
	const struct nbd_proto_neg_ops *ops;
	void *ctx;
	enum nbd_proto_neg_state state;
	uint32_t cflags;
	unsigned options;         /* options handled so far */
	struct nbd_export_info chosen; /* valid in NBD_PROTO_NEG_GO */
	const char *why;          /* NBD_PROTO_NEG_FAIL: the reason, for the log */
};

void nbd_proto_neg_init(struct nbd_proto_neg *n, const struct nbd_proto_neg_ops *ops,
			void *ctx);
/* The server's greeting: append it to out first.  0 or -ENOMEM. */
int nbd_proto_neg_greeting(struct nbd_buf *out);
/*
 * Feed client bytes in[0..len).  Whole messages are consumed and their
 * replies appended to out; a partial message is left for the next call
 * (feed it again with more bytes behind it).  Returns the bytes consumed.
 * Stops after the option that ends negotiation, so bytes behind it belong
 * to the transmission phase.  n->state says what to do next.
 */
size_t nbd_proto_neg_input(struct nbd_proto_neg *n, const uint8_t *in, size_t len,
			   struct nbd_buf *out);

/* --- transmission requests ------------------------------------------ */

/* A request header in host byte order. */
struct nbd_request {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t handle;
	uint64_t offset;
	uint32_t len;
};

/* What the connection agreed on, against which requests are checked. */
struct nbd_limits {
	uint64_t size;
	uint32_t min_block;
	uint32_t max_payload;
	uint16_t tflags;
};

enum nbd_verdict {
	NBD_REQ_OK,               /* submit it */
	NBD_REQ_ERROR,            /* reply with *error (after skipping a
				   * WRITE's payload) */
	NBD_REQ_DISCONNECT,       /* hard disconnect: no resync possible */
};

/* Decode one request header from buf; false if len < its size. */
bool nbd_request_decode(const void *buf, size_t len, struct nbd_request *r);
/* Bytes of payload that follow r on the wire (a WRITE's data). */
static inline uint32_t nbd_request_payload(const struct nbd_request *r)
{
	return r->type == NBD_CMD_WRITE ? r->len : 0;
}
/*
 * Check one request against the connection's limits.  On NBD_REQ_ERROR
 * *error is the NBD error to reply with; *why names the problem (static
 * string) for anything but NBD_REQ_OK.  An NBD_REQ_OK request is in range,
 * aligned to min_block and within max_payload (READ/WRITE), so the layers
 * below may assert it.
 */
enum nbd_verdict nbd_request_validate(const struct nbd_request *r,
				      const struct nbd_limits *lim,
				      uint32_t *error, const char **why);

/* Build a simple reply header. */
void nbd_simple_reply_init(struct nbd_wire_simple_reply *rep, uint64_t handle,
			   uint32_t error);

#endif
