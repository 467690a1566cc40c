// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_tx.c: the transmission phase, on the reactor that owns the
 * connection; a room below nbd.c.  nbd.c calls it on socket events; its
 * own entry points (an I/O completion, a deferred flush) end in
 * c->ops->settle, and a connection that must close is failed
 * (nbd_conn_fail) for nbd.c to close.
 *
 *  - receive: one recv() fills a per-connection buffer with as many
 *    requests as the client has sent; every whole request is checked
 *    (nbd_request_validate) and started before the next recv().  Large
 *    write payloads are received straight into the request's buffer.
 *  - requests come from a per-connection free list, buffer included, so
 *    the steady state allocates nothing.
 *  - a request keeps the command, offset, length and flags it came with;
 *    a write is started from them once its payload is in.  A TRIM longer
 *    than BDEV_MAX_IO_SIZE goes to the bdev in pieces, one after another
 *    (req_trim_next).
 *  - replies are queued as I/O completes and leave together, when the last
 *    in-flight I/O of a batch completes or at the next loop pass: one
 *    sendmsg() gathers many headers and read payloads.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "blktgt_probes.h"
#include "export.h"
#include "log.h"
#include "nbd_tx.h"
#include "reactor.h"
#include "trace.h"

#define NBD_RECV_PASSES     4    /* recv()s per callback while data keeps coming */
#define NBD_FREE_REQS_MAX   64   /* idle requests kept per connection */
#define NBD_BUF_ALIGN       4096

/* Requests received, per reactor: written by that reactor only. */
static struct {
	_Alignas(64) uint64_t requests;
} tx_threads[REACTOR_MAX];

static void conn_parse(struct nbd_conn *c);

/* A connection nbd.c is closing or has closed: serve it no more. */
static bool conn_gone(const struct nbd_conn *c)
{
	return c->state == CONN_CLOSING || c->state == CONN_DEAD;
}

/* --- requests ------------------------------------------------------------ */

static bool conn_over_limit(const struct nbd_conn *c)
{
	return c->nreqs >= NBD_MAX_INFLIGHT || c->inflight_bytes >= NBD_MAX_INFLIGHT_BYTES;
}

/* A request with room for bufsize bytes of data; NULL on ENOMEM. */
static struct nbd_req *req_get(struct nbd_conn *c, size_t bufsize)
{
	struct nbd_req *r = c->free;

	if (r) {
		c->free = r->next;
		c->nfree--;
	} else {
		r = calloc(1, sizeof(*r));
		if (!r)
			return NULL;
		r->conn = c;
	}
	if (bufsize > r->cap) {
		void *p;

		if (posix_memalign(&p, NBD_BUF_ALIGN, bufsize) != 0) {
			r->next = c->free;
			c->free = r;
			c->nfree++;
			return NULL;
		}
		free(r->buf);
		r->buf = p;
		r->cap = bufsize;
	}
	r->next = NULL;
	r->error = NBD_SUCCESS;
	r->got = 0;
	r->discard = false;
	r->trim_left = 0;
	r->sent = 0;
	r->charged = bufsize;
	c->nreqs++;
	c->inflight_bytes += bufsize;
	return r;
}

static void req_free(struct nbd_req *r)
{
	free(r->buf);
	free(r);
}

static void req_put(struct nbd_req *r)
{
	struct nbd_conn *c = r->conn;

	c->nreqs--;
	c->inflight_bytes -= r->charged;
	if (c->nfree >= NBD_FREE_REQS_MAX) {
		req_free(r);
		return;
	}
	if (r->cap > NBD_REQ_BUF_KEEP) {
		free(r->buf);
		r->buf = NULL;
		r->cap = 0;
	}
	r->next = c->free;
	c->free = r;
	c->nfree++;
}

/* --- replies ------------------------------------------------------------- */

static size_t reply_len(const struct nbd_req *r)
{
	size_t len = sizeof(r->reply);

	if (r->cmd == NBD_CMD_READ && r->error == NBD_SUCCESS)
		len += r->len;
	return len;
}

/*
 * Send queued replies until the queue is empty or the socket is full;
 * then wait for EPOLLOUT.  Many replies go out in one sendmsg().
 */
static void tx_flush(struct nbd_conn *c)
{
	while (c->txq_head) {
		struct iovec iov[NBD_TX_IOV_MAX];
		struct msghdr msg = { .msg_iov = iov };
		size_t want = 0;
		int n = 0;

		for (struct nbd_req *r = c->txq_head; r && n + 2 <= NBD_TX_IOV_MAX; r = r->next) {
			size_t hdr = sizeof(r->reply);
			size_t data = reply_len(r) - hdr;

			if (r->sent < hdr) {
				iov[n].iov_base = (uint8_t *)&r->reply + r->sent;
				iov[n++].iov_len = hdr - r->sent;
				if (data) {
					iov[n].iov_base = r->buf;
					iov[n++].iov_len = data;
				}
			} else {
				iov[n].iov_base = (uint8_t *)r->buf + (r->sent - hdr);
				iov[n++].iov_len = data - (r->sent - hdr);
			}
			want += reply_len(r) - r->sent;
		}
		msg.msg_iovlen = (size_t)n;

		ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->want_out = true;
				nbd_conn_update_events(c);
				return;
			}
			nbd_conn_fail(c, strerror(errno));
			return;
		}

		size_t left = (size_t)w;
		while (left && c->txq_head) {
			struct nbd_req *r = c->txq_head;
			size_t rest = reply_len(r) - r->sent;

			if (left < rest) {
				r->sent += left;
				break;
			}
			left -= rest;
			c->txq_head = r->next;
			if (!c->txq_head)
				c->txq_tail = NULL;
			BLKTGT_NBD_REPLY_EV(r->trace_id, c->id, r->handle, r->cmd, r->error);
			req_put(r);
		}
		if ((size_t)w < want) {
			/* The socket took less than offered: it is full. */
			c->want_out = true;
			nbd_conn_update_events(c);
			return;
		}
	}
	if (c->want_out) {
		c->want_out = false;
		nbd_conn_update_events(c);
	}
}

static void conn_flush_deferred(void *ctx)
{
	struct nbd_conn *c = ctx;

	c->flush_queued = false;
	if (c->state == CONN_TRANSMITTING || c->state == CONN_DRAINING)
		tx_flush(c);
	c->ops->settle(c);
}

/* Queue r's reply; replies queued in one loop pass leave together. */
static void reply_queue(struct nbd_req *r)
{
	struct nbd_conn *c = r->conn;

	nbd_simple_reply_init(&r->reply, r->handle, r->error);
	r->sent = 0;
	r->next = NULL;
	if (c->txq_tail)
		c->txq_tail->next = r;
	else
		c->txq_head = r;
	c->txq_tail = r;
	if (!c->flush_queued && !c->want_out) {
		c->flush_queued = true;
		c->flush.fn = conn_flush_deferred;
		c->flush.ctx = c;
		reactor_defer(&c->flush);
	}
}

/* --- I/O ------------------------------------------------------------------ */

static int req_trim_next(struct nbd_req *r);

static void req_io_done(struct bdev_io *io, void *ctx)
{
	struct nbd_req *r = ctx;
	struct nbd_conn *c = r->conn;

	c->io_inflight--;
	if (io->status == 0 && r->trim_left > 0 && !conn_gone(c)) {
		int rc = req_trim_next(r);

		if (rc == 0)
			return;
		io->status = rc;
	}
	r->error = nbd_errno_to_wire(io->status);
	if (conn_gone(c)) {
		req_put(r);
	} else {
		reply_queue(r);
		/* Completions of one batch run back to back: the last of them
		 * sends every queued reply now instead of a loop pass later. */
		if (c->io_inflight == 0 && !c->want_out)
			tx_flush(c);
	}
	c->ops->settle(c);
}

/* Submit one bdev I/O for r; FUA goes with it where the command has it. */
static int req_submit_io(struct nbd_req *r, enum bdev_io_type type,
			 uint64_t offset, uint64_t len)
{
	struct nbd_conn *c = r->conn;
	struct bdev_io *io = &r->io;
	int rc;

	io->bdev = export_bdev(c->exp);
	io->type = type;
	io->offset = offset;
	io->len = len;
	io->buf = (type == BDEV_IO_READ || type == BDEV_IO_WRITE) ? r->buf : NULL;
	io->fua = (type == BDEV_IO_WRITE || type == BDEV_IO_TRIM) &&
		  (r->flags & NBD_CMD_FLAG_FUA);
	io->status = 0;
	io->cb = req_io_done;
	io->cb_ctx = r;
	io->next = NULL;
	io->trace_cause = r->trace_id;
	c->io_inflight++;
	rc = export_submit(c->exp, io);
	if (rc < 0)
		c->io_inflight--;
	return rc;
}

/* The next piece of a TRIM: the bdev takes at most BDEV_MAX_IO_SIZE at
 * once, so a longer one is split here, and only here.  The first call
 * starts at the request's offset; each completion calls it again while
 * bytes are left. */
static int req_trim_next(struct nbd_req *r)
{
	uint64_t off = r->offset + (r->len - r->trim_left);
	uint64_t len = r->trim_left < BDEV_MAX_IO_SIZE ? r->trim_left : BDEV_MAX_IO_SIZE;

	r->trim_left -= len;
	return req_submit_io(r, BDEV_IO_TRIM, off, len);
}

/* Start r's I/O; a rejected submission is answered at once. */
static void req_start(struct nbd_req *r)
{
	int rc;

	switch (r->cmd) {
	case NBD_CMD_READ:
		rc = req_submit_io(r, BDEV_IO_READ, r->offset, r->len);
		break;
	case NBD_CMD_WRITE:
		rc = req_submit_io(r, BDEV_IO_WRITE, r->offset, r->len);
		break;
	case NBD_CMD_FLUSH:
		rc = req_submit_io(r, BDEV_IO_FLUSH, 0, 0);
		break;
	case NBD_CMD_TRIM:
		r->trim_left = r->len;
		rc = req_trim_next(r);
		break;
	default:
		abort();        /* nbd_request_validate let through a command */
	}
	if (rc < 0) {
		r->error = nbd_errno_to_wire(rc);
		reply_queue(r);
	}
}

/* One whole request header has arrived: check it, then start it, answer
 * it, or start receiving its payload. */
static void conn_request(struct nbd_conn *c, const struct nbd_request *q)
{
	uint32_t error;
	const char *why;
	enum nbd_verdict v;
	struct nbd_req *r;

	c->requests++;
	nbd_counter_inc(&tx_threads[c->owner_idx].requests);
	/* The ring's id of the request, the same whatever becomes of it. */
	uint64_t trace_id = (c->id << 32) | (uint32_t)c->requests;
	BLKTGT_NBD_REQUEST_EV(trace_id, c->id, q->handle, q->type, q->offset, q->len,
			      nbd_cmd_name(q->type), q->flags);

	v = nbd_request_validate(q, &c->lim, &error, &why);
	if (v == NBD_REQ_DISCONNECT) {
		nbd_conn_fail(c, why);
		return;
	}
	if (q->type == NBD_CMD_DISC) {
		/* No reply; finish what is in flight, then close. */
		c->state = CONN_DRAINING;
		nbd_conn_update_events(c);
		return;
	}

	bool payload = nbd_request_payload(q) > 0;
	bool has_data = v == NBD_REQ_OK && (q->type == NBD_CMD_READ || payload);
	r = req_get(c, has_data ? q->len : 0);
	if (!r) {
		nbd_conn_fail(c, "out of memory for a request");
		return;
	}
	r->handle = q->handle;
	r->cmd = q->type;
	r->offset = q->offset;
	r->len = q->len;
	r->flags = q->flags;
	r->trace_id = trace_id;

	if (v == NBD_REQ_ERROR) {
		log_debug("nbd: conn %lu: %s request rejected: %s",
			  (unsigned long)c->id, nbd_cmd_name(q->type), why);
		r->error = error;
		if (payload) {
			r->discard = true;      /* skip its data, then reply */
			c->cur = r;
		} else {
			reply_queue(r);
		}
		return;
	}
	if (q->len == 0 && q->type != NBD_CMD_FLUSH) {
		/* Nothing to do; the spec asks servers not to fail it. */
		reply_queue(r);
		return;
	}
	if (payload) {
		c->cur = r;             /* started once its data is in */
		return;
	}
	req_start(r);
}

/* The payload of c->cur is complete: submit the write, or answer the
 * rejected request whose data was skipped. */
static void conn_payload_done(struct nbd_conn *c)
{
	struct nbd_req *r = c->cur;

	c->cur = NULL;
	if (r->discard)
		reply_queue(r);
	else
		req_start(r);
}

/* Consume whatever whole requests and payload bytes sit in rbuf. */
static void conn_parse(struct nbd_conn *c)
{
	size_t off = 0;

	while (c->state == CONN_TRANSMITTING) {
		struct nbd_req *r = c->cur;
		struct nbd_request q;

		if (r) {
			size_t take = r->len - r->got;

			if (take > c->rlen - off)
				take = c->rlen - off;
			if (!r->discard)
				memcpy((uint8_t *)r->buf + r->got, c->rbuf + off, take);
			r->got += take;
			off += take;
			if (r->got < r->len)
				break;
			conn_payload_done(c);
			continue;
		}
		if (c->rlen - off < sizeof(struct nbd_wire_request))
			break;
		if (conn_over_limit(c)) {
			c->rx_blocked = true;   /* nbd.c resumes, when it settles c */
			nbd_conn_update_events(c);
			break;
		}
		nbd_request_decode(c->rbuf + off, c->rlen - off, &q);
		off += sizeof(struct nbd_wire_request);
		conn_request(c, &q);
	}
	if (off && !conn_gone(c)) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
}

static void conn_rx(struct nbd_conn *c)
{
	for (int pass = 0; pass < NBD_RECV_PASSES; pass++) {
		struct nbd_req *r = c->cur;
		ssize_t n;
		size_t room;

		if (c->state != CONN_TRANSMITTING || c->rx_blocked)
			return;
		if (r && !r->discard && c->rlen == 0 && r->len - r->got >= NBD_DIRECT_READ_MIN) {
			/* A big payload: straight into the request's buffer. */
			room = r->len - r->got;
			n = recv(c->fd, (uint8_t *)r->buf + r->got, room, 0);
			if (n > 0) {
				r->got += (uint32_t)n;
				if (r->got == r->len)
					conn_payload_done(c);
			}
		} else {
			room = NBD_RBUF_SIZE - c->rlen;
			n = recv(c->fd, c->rbuf + c->rlen, room, 0);
			if (n > 0) {
				c->rlen += (size_t)n;
				conn_parse(c);
			}
		}
		if (n == 0) {
			nbd_conn_fail(c, NULL);     /* the client closed */
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				nbd_conn_fail(c, strerror(errno));
			return;
		}
		if ((size_t)n < room)
			return;         /* drained the socket for now */
	}
}

/* --- called by nbd.c ------------------------------------------------- */

void nbd_tx_events(struct nbd_conn *c, uint32_t events)
{
	if (events & EPOLLOUT)
		tx_flush(c);
	if ((events & EPOLLERR) ||
	    ((events & EPOLLHUP) && !(events & EPOLLIN)))
		nbd_conn_fail(c, events & EPOLLERR ? "socket error" : NULL);
	else if (events & EPOLLIN)
		conn_rx(c);
}

void nbd_tx_start(struct nbd_conn *c)
{
	if (c->rlen)
		conn_parse(c);  /* requests sent right behind NBD_OPT_GO */
}

void nbd_tx_unblock(struct nbd_conn *c)
{
	if (conn_over_limit(c))
		return;
	c->rx_blocked = false;
	conn_parse(c);          /* what already sits in the buffer first */
	nbd_conn_update_events(c);
}

void nbd_tx_drop(struct nbd_conn *c)
{
	while (c->txq_head) {
		struct nbd_req *r = c->txq_head;

		c->txq_head = r->next;
		req_put(r);
	}
	c->txq_tail = NULL;
	if (c->cur) {
		req_put(c->cur);
		c->cur = NULL;
	}
}

void nbd_tx_free(struct nbd_conn *c)
{
	while (c->free) {
		struct nbd_req *r = c->free;

		c->free = r->next;
		req_free(r);
	}
}

uint64_t nbd_tx_requests(void)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < REACTOR_MAX; i++)
		n += nbd_counter_get(&tx_threads[i].requests);
	return n;
}
