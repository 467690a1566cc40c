// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_neg.c: fixed newstyle negotiation, on reactor 0, a room below
 * nbd.c.  nbd_proto.c does the protocol on byte buffers; this file feeds
 * it what the socket gives, sends what it writes, answers its export
 * lookups from the registry, and when the client has picked an export
 * takes a reference to it and tells nbd.c, by its return value, that the
 * connection is ready for the reactor that will serve it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "blktgt_probes.h"
#include "export.h"
#include "log.h"
#include "nbd_neg.h"
#include "reactor.h"

/* What the server offers on every export: no cache (null, malloc) or one
 * shared by every connection (file: one fd, flush = fdatasync), so
 * CAN_MULTI_CONN holds. */
#define NBD_TFLAGS (NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | \
		    NBD_FLAG_SEND_TRIM | NBD_FLAG_CAN_MULTI_CONN)

static void info_fill(struct nbd_conn *c, struct export *e, struct nbd_export_info *out)
{
	const struct bdev *b = export_bdev(e);

	snprintf(c->desc, sizeof(c->desc), "%s bdev %s", b->type, b->name);
	memset(out, 0, sizeof(*out));
	out->name = export_name(e);
	out->description = c->desc;
	out->size = bdev_size(b);
	out->tflags = NBD_TFLAGS;
	out->min_block = b->block_size;
	out->pref_block = b->block_size > 4096 ? b->block_size : 4096;
	out->max_payload = NBD_MAX_REQUEST_SIZE;
	out->handle = e;
}

/* The default export ("" in NBD_OPT_GO): the first one that is up. */
static struct export *default_export(void)
{
	for (struct export *e = export_first(); e; e = export_next(e))
		if (export_accepting(e))
			return e;
	return NULL;
}

static int neg_lookup(void *ctx, const char *name, struct nbd_export_info *out)
{
	struct export *e = *name ? export_lookup(name) : default_export();

	if (!e || !export_accepting(e))
		return -ENOENT;
	info_fill(ctx, e, out);
	return 0;
}

static int neg_list(void *ctx, nbd_list_fn fn, void *fctx)
{
	for (struct export *e = export_first(); e; e = export_next(e)) {
		struct nbd_export_info info;
		int rc;

		if (!export_accepting(e))
			continue;
		info_fill(ctx, e, &info);
		rc = fn(fctx, &info);
		if (rc)
			return rc;
	}
	return 0;
}

static void neg_option(void *ctx, uint32_t option, int status)
{
	struct nbd_conn *c = ctx;

	if (BLKTGT_NBD_OPTION_ENABLED())
		BLKTGT_NBD_OPTION(c->id, option, nbd_option_name(option), status);
}

static const struct nbd_proto_neg_ops neg_ops = {
	.lookup = neg_lookup,
	.list = neg_list,
	.option = neg_option,
};

/* Send the negotiation output; 0 when all is sent, -EAGAIN when the rest
 * waits for EPOLLOUT, other -errno on a dead socket. */
static int neg_send(struct nbd_conn *c)
{
	while (c->out.off < c->out.len) {
		ssize_t n = send(c->fd, c->out.data + c->out.off, c->out.len - c->out.off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->want_out = true;
				nbd_conn_update_events(c);
				return -EAGAIN;
			}
			return -errno;
		}
		c->out.off += (size_t)n;
	}
	nbd_buf_reset(&c->out);
	if (c->want_out) {
		c->want_out = false;
		nbd_conn_update_events(c);
	}
	return 0;
}

/*
 * Act on where negotiation stands after new input or sent output.  True
 * when c is ready for the hand-off: the export is chosen and held, and
 * the last reply has left.
 */
static bool neg_advance(struct nbd_conn *c)
{
	int rc = neg_send(c);

	if (rc < 0 && rc != -EAGAIN) {
		nbd_conn_fail(c, NULL);
		return false;
	}
	switch (c->neg.state) {
	case NBD_PROTO_NEG_CLIENT_FLAGS:
	case NBD_PROTO_NEG_OPTIONS:
		break;
	case NBD_PROTO_NEG_GO:
		if (c->state == CONN_NEGOTIATING) {
			struct export *e = c->neg.chosen.handle;

			/* The GO reply may have waited for EPOLLOUT, and the
			 * export may have been deleted (or deleted and made
			 * anew) meanwhile: take the reference only if it is
			 * still the export the client was told about. */
			if (!export_accepting(e) ||
			    bdev_size(export_bdev(e)) != c->neg.chosen.size) {
				nbd_conn_fail(c, "export deleted during negotiation");
				return false;
			}
			export_get(e);
			c->exp = e;
			c->lim.size = c->neg.chosen.size;
			c->lim.min_block = c->neg.chosen.min_block;
			c->lim.max_payload = c->neg.chosen.max_payload;
			c->lim.tflags = c->neg.chosen.tflags;
			c->state = CONN_HANDOFF;
			nbd_conn_update_events(c);  /* stop reading: the rest is theirs */
		}
		if (rc == 0) {
			nbd_buf_free(&c->out);      /* negotiation is over */
			return true;
		}
		break;
	case NBD_PROTO_NEG_ABORT:
		if (rc == 0)
			nbd_conn_fail(c, NULL);
		break;
	case NBD_PROTO_NEG_FAIL:
		nbd_conn_fail(c, c->neg.why);
		break;
	}
	return false;
}

bool nbd_neg_events(struct nbd_conn *c, uint32_t events)
{
	if ((events & EPOLLIN) && c->state == CONN_NEGOTIATING) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, NBD_RBUF_SIZE - c->rlen, 0);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR &&
			       errno != EWOULDBLOCK)) {
			nbd_conn_fail(c, NULL);
			return false;
		}
		if (n > 0) {
			size_t used;

			c->rlen += (size_t)n;
			used = nbd_proto_neg_input(&c->neg, c->rbuf, c->rlen, &c->out);
			memmove(c->rbuf, c->rbuf + used, c->rlen - used);
			c->rlen -= used;
		}
	} else if (events & (EPOLLERR | EPOLLHUP)) {
		nbd_conn_fail(c, NULL);
		return false;
	}
	return neg_advance(c);
}

void nbd_neg_start(struct nbd_conn *c)
{
	nbd_proto_neg_init(&c->neg, &neg_ops, c);
	if (nbd_proto_neg_greeting(&c->out) < 0) {
		nbd_conn_fail(c, "out of memory");
		return;
	}
	/* The greeting alone cannot end negotiation: never ready here. */
	neg_advance(c);
}
