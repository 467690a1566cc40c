// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd.c: the NBD server.  Listeners and fixed newstyle negotiation run on
 * reactor 0, which owns the export registry; a client that picks an export
 * is handed by message to a reactor chosen round robin, which owns the
 * connection for the transmission phase and submits its I/O there.
 *
 * The protocol itself (wire structs, negotiation, request checks) is in
 * nbd_proto.c; this file moves bytes and requests:
 *
 *  - receive: one recv() fills a per-connection buffer with as many
 *    requests as the client has sent; every whole request is checked
 *    (nbd_request_validate) and submitted before the next recv().  Large
 *    write payloads are received straight into the request's buffer.
 *  - requests come from a per-connection free list, buffer included, so
 *    the steady state allocates nothing.
 *  - replies are queued as I/O completes and leave together, when the last
 *    in-flight I/O of a batch completes or at the next loop pass: one
 *    sendmsg() gathers many headers and read payloads.
 *  - a connection lives until its socket is closed AND every I/O it
 *    submitted has completed, so a client that vanishes mid-I/O leaks
 *    nothing and no completion touches freed memory.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "blktgt_probes.h"
#include "bdev.h"
#include "export.h"
#include "log.h"
#include "nbd.h"
#include "nbd_proto.h"
#include "reactor.h"
#include "trace.h"

#define NBD_MAX_LISTENERS   8    /* -L and -U, with room to spare */
#define NBD_LISTEN_BACKLOG  128
#define NBD_ACCEPT_BATCH    16   /* accepts per listener callback */
#define NBD_ACCEPT_RETRY_NS 1000000000ull   /* a resting listener tries again */
#define NBD_WARN_NS         10000000000ull  /* between two accept warnings */
#define NBD_RECV_PASSES     4    /* recv()s per callback while data keeps coming */
#define NBD_PEER_MAX        128
#define NBD_DESC_MAX        128
#define NBD_FREE_REQS_MAX   64   /* idle requests kept per connection */
#define NBD_BUF_ALIGN       4096

/* What the server offers on every export: no cache (null, malloc) or one
 * shared by every connection (file: one fd, flush = fdatasync), so
 * CAN_MULTI_CONN holds. */
#define NBD_TFLAGS (NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | \
		    NBD_FLAG_SEND_TRIM | NBD_FLAG_CAN_MULTI_CONN)

enum conn_state {
	CONN_NEGOTIATING,       /* reactor 0: option haggling */
	CONN_HANDOFF,           /* reactor 0: GO answered, flushing the reply */
	CONN_TRANSMITTING,      /* owner reactor: serving requests */
	CONN_DRAINING,          /* NBD_CMD_DISC seen: close once all is replied */
	CONN_DEAD,              /* socket closed: freed once its I/O is done */
};

struct nbd_conn;

struct nbd_req {
	struct bdev_io io;
	struct nbd_conn *conn;
	struct nbd_req *next;           /* free list or reply queue */
	struct nbd_wire_simple_reply reply;
	uint64_t handle;
	uint64_t trace_id;              /* trace ring object: conn id << 32 | request */
	uint16_t cmd;
	uint32_t len;                   /* the request's length */
	uint32_t error;                 /* NBD error of the reply */
	uint32_t got;                   /* write payload bytes received */
	bool discard;                   /* rejected write: payload is skipped */
	uint64_t trim_off, trim_left;   /* TRIM in BDEV_MAX_IO_SIZE pieces */
	void *buf;
	size_t cap;
	size_t charged;                 /* bytes counted in inflight_bytes */
	size_t sent;                    /* reply bytes already sent */
};

struct nbd_conn {
	uint64_t id;
	char peer[NBD_PEER_MAX];        /* str()-readable for nbd__connect */
	char desc[NBD_DESC_MAX];        /* NBD_INFO_DESCRIPTION */
	int fd;
	enum conn_state state;
	struct reactor_fd *w;
	uint32_t events;                /* what w watches now */
	bool want_out;                  /* output is waiting for EPOLLOUT */
	struct reactor *owner;
	unsigned owner_idx;
	struct nbd_conn *prev, *next;   /* the owner reactor's list */

	/* negotiation (reactor 0) */
	uint64_t accepted_ns;           /* for the handshake limit */
	struct nbd_neg neg;
	struct nbd_buf out;

	/* transmission (owner reactor) */
	struct export *exp;
	struct nbd_limits lim;
	uint8_t *rbuf;
	size_t rlen;
	struct nbd_req *cur;            /* write whose payload is arriving */
	struct nbd_req *free;
	unsigned nfree;
	unsigned nreqs;                 /* requests out of the free list */
	size_t inflight_bytes;
	unsigned io_inflight;           /* submitted, completion pending */
	struct nbd_req *txq_head, *txq_tail;
	struct reactor_defer flush;
	bool flush_queued;
	bool rx_blocked;                /* too much in flight: not reading */
	uint64_t requests;
};

/* Per-reactor state, touched only by its reactor (the counters are also
 * read, approximately, by nbd_get_stats). */
struct nbd_thread {
	_Alignas(64) struct nbd_conn *conns;
	unsigned nconns;
	struct foreach *shutdown_it;    /* shutdown waiting for nconns == 0 */
	uint64_t requests;
	uint64_t closed;
};

struct listener {
	int fd;
	bool tcp;
	struct reactor_fd *w;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static struct nbd_thread threads[REACTOR_MAX];
static struct listener listeners[NBD_MAX_LISTENERS];
static unsigned nlisteners;
static uint64_t next_conn_id;           /* reactor 0 */
static uint64_t total_connections;      /* written by reactor 0 */
static unsigned next_reactor = 1;       /* round robin, reactor 0 */
static atomic_bool shutting_down;
static unsigned handshake_limit_s = NBD_HANDSHAKE_LIMIT_DEFAULT;
static struct reactor_timer *sweep_timer;   /* reactor 0: the handshake limit */
static struct reactor_timer *retry_timer;   /* reactor 0: resting listeners */
static bool accept_resting;                 /* reactor 0 */
static atomic_bool accept_wanted;           /* a closed fd should wake them */
static struct log_limit accept_warn = LOG_LIMIT_INIT(NBD_WARN_NS);
static struct log_limit refuse_warn = LOG_LIMIT_INIT(NBD_WARN_NS);
static void (*shutdown_done)(void *ctx);
static void *shutdown_ctx;

static void conn_check(struct nbd_conn *c);
static void listeners_wake(void *ctx);
static void conn_tx_cb(void *ctx, uint32_t events);
static void conn_parse(struct nbd_conn *c);

static struct nbd_thread *this_thread(void)
{
	return &threads[reactor_index(reactor_self())];
}

static void counter_inc(uint64_t *v)
{
	__atomic_store_n(v, __atomic_load_n(v, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

static uint64_t counter_get(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

static void thread_add(struct nbd_thread *t, struct nbd_conn *c)
{
	c->prev = NULL;
	c->next = t->conns;
	if (t->conns)
		t->conns->prev = c;
	t->conns = c;
	t->nconns++;
}

/* Unlink c; a shutdown waiting on this reactor moves on when it was the
 * last. */
static void thread_del(struct nbd_thread *t, struct nbd_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	t->nconns--;
	if (t->nconns == 0 && t->shutdown_it) {
		struct foreach *it = t->shutdown_it;

		t->shutdown_it = NULL;
		foreach_continue(it, 0);
	}
}

/* --- socket event mask ------------------------------------------------ */

static void conn_update_events(struct nbd_conn *c)
{
	uint32_t ev = 0;

	if (!c->w)
		return;
	if (c->state == CONN_NEGOTIATING ||
	    (c->state == CONN_TRANSMITTING && !c->rx_blocked))
		ev |= EPOLLIN;
	if (c->want_out)
		ev |= EPOLLOUT;
	if (ev == c->events)
		return;
	if (reactor_fd_modify(c->w, ev) == 0)
		c->events = ev;
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

static void conn_kill(struct nbd_conn *c, const char *why);

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
				conn_update_events(c);
				return;
			}
			conn_kill(c, strerror(errno));
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
			BLKTGT_NBD_REPLY(c->id, r->handle, r->cmd, r->error);
			trace_nbd_reply((uint32_t)c->id, r->trace_id, 0, (int32_t)r->error);
			req_put(r);
		}
		if ((size_t)w < want) {
			/* The socket took less than offered: it is full. */
			c->want_out = true;
			conn_update_events(c);
			return;
		}
	}
	if (c->want_out) {
		c->want_out = false;
		conn_update_events(c);
	}
}

static void conn_flush_deferred(void *ctx)
{
	struct nbd_conn *c = ctx;

	c->flush_queued = false;
	if (c->state == CONN_TRANSMITTING || c->state == CONN_DRAINING)
		tx_flush(c);
	conn_check(c);
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

static int req_submit_io(struct nbd_req *r, enum bdev_io_type type,
			 uint64_t offset, uint64_t len, bool fua);

static void req_io_done(struct bdev_io *io, void *ctx)
{
	struct nbd_req *r = ctx;
	struct nbd_conn *c = r->conn;

	c->io_inflight--;
	if (io->status == 0 && r->cmd == NBD_CMD_TRIM && r->trim_left > 0 &&
	    c->state != CONN_DEAD) {
		uint64_t len = r->trim_left < BDEV_MAX_IO_SIZE ? r->trim_left : BDEV_MAX_IO_SIZE;
		int rc = req_submit_io(r, BDEV_IO_TRIM, r->trim_off, len, io->fua);

		if (rc == 0)
			return;
		io->status = rc;
	}
	r->error = nbd_errno_to_wire(io->status);
	if (c->state == CONN_DEAD) {
		req_put(r);
	} else {
		reply_queue(r);
		/* Completions of one batch run back to back: the last of them
		 * sends every queued reply now instead of a loop pass later. */
		if (c->io_inflight == 0 && !c->want_out)
			tx_flush(c);
	}
	conn_check(c);
}

static int req_submit_io(struct nbd_req *r, enum bdev_io_type type,
			 uint64_t offset, uint64_t len, bool fua)
{
	struct nbd_conn *c = r->conn;
	struct bdev_io *io = &r->io;
	int rc;

	io->bdev = export_bdev(c->exp);
	io->type = type;
	io->offset = offset;
	io->len = len;
	io->buf = (type == BDEV_IO_READ || type == BDEV_IO_WRITE) ? r->buf : NULL;
	io->fua = fua;
	io->status = 0;
	io->cb = req_io_done;
	io->cb_ctx = r;
	io->next = NULL;
	io->trace_cause = r->trace_id;
	if (type == BDEV_IO_TRIM) {
		r->trim_off = offset + len;
		r->trim_left -= len;
	}
	c->io_inflight++;
	rc = export_submit(c->exp, io);
	if (rc < 0)
		c->io_inflight--;
	return rc;
}

/* Start r's I/O; a rejected submission is answered at once. */
static void req_start(struct nbd_req *r, const struct nbd_request *q)
{
	bool fua = q->flags & NBD_CMD_FLAG_FUA;
	int rc;

	switch (q->type) {
	case NBD_CMD_READ:
		rc = req_submit_io(r, BDEV_IO_READ, q->offset, q->len, false);
		break;
	case NBD_CMD_WRITE:
		rc = req_submit_io(r, BDEV_IO_WRITE, q->offset, q->len, fua);
		break;
	case NBD_CMD_FLUSH:
		rc = req_submit_io(r, BDEV_IO_FLUSH, 0, 0, false);
		break;
	case NBD_CMD_TRIM:
		r->trim_left = q->len;
		rc = req_submit_io(r, BDEV_IO_TRIM, q->offset,
				   q->len < BDEV_MAX_IO_SIZE ? q->len : BDEV_MAX_IO_SIZE, fua);
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
	counter_inc(&threads[c->owner_idx].requests);
	if (BLKTGT_NBD_REQUEST_ENABLED())
		BLKTGT_NBD_REQUEST(c->id, q->handle, q->type, q->offset, q->len,
				   nbd_cmd_name(q->type), q->flags);

	v = nbd_request_validate(q, &c->lim, &error, &why);
	if (v == NBD_REQ_DISCONNECT) {
		conn_kill(c, why);
		return;
	}
	if (q->type == NBD_CMD_DISC) {
		/* No reply; finish what is in flight, then close. */
		c->state = CONN_DRAINING;
		conn_update_events(c);
		return;
	}

	bool payload = nbd_request_payload(q) > 0;
	bool has_data = v == NBD_REQ_OK && (q->type == NBD_CMD_READ || payload);
	r = req_get(c, has_data ? q->len : 0);
	if (!r) {
		conn_kill(c, "out of memory for a request");
		return;
	}
	r->handle = q->handle;
	r->cmd = q->type;
	r->len = q->len;
	r->trace_id = (c->id << 32) | (uint32_t)c->requests;
	trace_nbd_request((uint32_t)c->id, r->trace_id, 0, (int32_t)q->type, (int32_t)q->len,
			  (int64_t)q->offset, (int64_t)q->handle);

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
		c->cur = r;             /* submitted once its data is in */
		r->io.offset = q->offset;
		r->io.fua = q->flags & NBD_CMD_FLAG_FUA;
		return;
	}
	req_start(r, q);
}

/* The payload of c->cur is complete: submit the write, or answer the
 * rejected request whose data was skipped. */
static void conn_payload_done(struct nbd_conn *c)
{
	struct nbd_req *r = c->cur;

	c->cur = NULL;
	if (r->discard) {
		reply_queue(r);
		return;
	}
	struct nbd_request q = {
		.type = NBD_CMD_WRITE,
		.flags = r->io.fua ? NBD_CMD_FLAG_FUA : 0,
		.offset = r->io.offset,
		.len = r->len,
	};
	req_start(r, &q);
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
			c->rx_blocked = true;   /* conn_check() resumes */
			conn_update_events(c);
			break;
		}
		nbd_request_decode(c->rbuf + off, c->rlen - off, &q);
		off += sizeof(struct nbd_wire_request);
		conn_request(c, &q);
	}
	if (off && c->state != CONN_DEAD) {
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
			conn_kill(c, NULL);     /* the client closed */
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_kill(c, strerror(errno));
			return;
		}
		if ((size_t)n < room)
			return;         /* drained the socket for now */
	}
}

static void conn_tx_cb(void *ctx, uint32_t events)
{
	struct nbd_conn *c = ctx;

	if (events & EPOLLOUT)
		tx_flush(c);
	if ((events & EPOLLERR) ||
	    ((events & EPOLLHUP) && !(events & EPOLLIN)))
		conn_kill(c, events & EPOLLERR ? "socket error" : NULL);
	else if (events & EPOLLIN)
		conn_rx(c);
	conn_check(c);
}

/* --- connection lifetime ------------------------------------------------ */

/* Close the socket and drop what can no longer be sent; the connection is
 * freed by conn_check() once its in-flight I/O has completed. */
static void conn_kill(struct nbd_conn *c, const char *why)
{
	if (c->state == CONN_DEAD)
		return;
	if (why)
		log_info("nbd: conn %lu (%s): disconnecting: %s",
			 (unsigned long)c->id, c->peer, why);
	c->state = CONN_DEAD;
	if (c->w) {
		reactor_fd_remove(c->w);
		c->w = NULL;
	}
	close(c->fd);
	c->fd = -1;
	/* Listeners resting for want of a descriptor may take this one. */
	if (atomic_exchange(&accept_wanted, false) &&
	    send_msg(reactor_get(0), listeners_wake, NULL) != 0)
		log_warn("nbd: out of memory; listeners wait for their retry timer");
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
	nbd_buf_free(&c->out);
}

static void conn_free(struct nbd_conn *c)
{
	struct nbd_thread *t = &threads[c->owner_idx];

	BLKTGT_NBD_DISCONNECT(c->id, c->peer, c->requests);
	log_debug("nbd: conn %lu (%s): closed after %lu requests",
		  (unsigned long)c->id, c->peer, (unsigned long)c->requests);
	if (c->exp)
		export_put(c->exp);
	while (c->free) {
		struct nbd_req *r = c->free;

		c->free = r->next;
		req_free(r);
	}
	free(c->rbuf);
	counter_inc(&t->closed);
	thread_del(t, c);
	free(c);
}

/*
 * Called at the end of every entry point (fd callback, completion, deferred
 * flush, message) and nowhere else, so nothing above it on the stack still
 * uses c when it is freed: resumes reading once the in-flight load fell,
 * closes a drained connection, frees a dead one whose I/O is done.
 */
static void conn_check(struct nbd_conn *c)
{
	if (c->state == CONN_TRANSMITTING && c->rx_blocked && !conn_over_limit(c)) {
		c->rx_blocked = false;
		conn_parse(c);          /* what already sits in the buffer first */
		conn_update_events(c);
	}
	if (c->state == CONN_DRAINING && c->nreqs == 0)
		conn_kill(c, NULL);
	if (c->state == CONN_DEAD && c->io_inflight == 0 && !c->flush_queued)
		conn_free(c);
}

/* --- hand-off to the transmission reactor --------------------------- */

static void conn_adopt(void *ctx)
{
	struct nbd_conn *c = ctx;

	c->owner_idx = reactor_index(reactor_self());
	thread_add(this_thread(), c);
	c->state = CONN_TRANSMITTING;
	BLKTGT_NBD_TRANSMIT(c->id, c->fd, c->owner_idx);
	c->events = EPOLLIN;
	c->w = reactor_fd_add(c->fd, EPOLLIN, conn_tx_cb, c);
	if (!c->w)
		conn_kill(c, "cannot watch the socket");
	else if (atomic_load(&shutting_down))
		conn_kill(c, "server shutting down");
	else if (c->rlen)
		conn_parse(c);  /* requests sent right behind NBD_OPT_GO */
	conn_check(c);
}

/* Pass c to the next reactor in turn; true when it is on its way. */
static bool conn_handoff(struct nbd_conn *c)
{
	unsigned n = reactor_count();
	unsigned idx = next_reactor % n;
	struct reactor *r = reactor_get(idx);

	/* 1, 2, .. n-1, 0, 1, ..: reactor 0 also runs the control plane, so
	 * it gets its turn last. */
	next_reactor = (idx + 1) % n;

	reactor_fd_remove(c->w);
	c->w = NULL;
	nbd_buf_free(&c->out);
	thread_del(&threads[0], c);
	c->owner = r;
	if (send_msg(r, conn_adopt, c) < 0) {
		thread_add(&threads[0], c);
		conn_kill(c, "out of memory handing the connection over");
		return false;
	}
	return true;
}

/* --- negotiation (reactor 0) ---------------------------------------- */

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

static const struct nbd_neg_ops neg_ops = {
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
				conn_update_events(c);
				return -EAGAIN;
			}
			return -errno;
		}
		c->out.off += (size_t)n;
	}
	nbd_buf_reset(&c->out);
	if (c->want_out) {
		c->want_out = false;
		conn_update_events(c);
	}
	return 0;
}

/*
 * Act on where negotiation stands after new input or sent output, then
 * conn_check().  Returns true when c was handed to another reactor: from
 * then on that reactor owns it (and may already have freed it), so the
 * caller must not touch c again.
 */
static bool neg_advance(struct nbd_conn *c)
{
	int rc = neg_send(c);

	if (rc < 0 && rc != -EAGAIN) {
		conn_kill(c, NULL);
		conn_check(c);
		return false;
	}
	switch (c->neg.state) {
	case NBD_NEG_CLIENT_FLAGS:
	case NBD_NEG_OPTIONS:
		break;
	case NBD_NEG_GO:
		if (c->state == CONN_NEGOTIATING) {
			struct export *e = c->neg.chosen.handle;

			/* The GO reply may have waited for EPOLLOUT, and the
			 * export may have been deleted (or deleted and made
			 * anew) meanwhile: take the reference only if it is
			 * still the export the client was told about. */
			if (!export_accepting(e) ||
			    bdev_size(export_bdev(e)) != c->neg.chosen.size) {
				conn_kill(c, "export deleted during negotiation");
				conn_check(c);
				return false;
			}
			export_get(e);
			c->exp = e;
			c->lim.size = c->neg.chosen.size;
			c->lim.min_block = c->neg.chosen.min_block;
			c->lim.max_payload = c->neg.chosen.max_payload;
			c->lim.tflags = c->neg.chosen.tflags;
			c->state = CONN_HANDOFF;
			conn_update_events(c);  /* stop reading: the rest is theirs */
		}
		if (rc == 0 && conn_handoff(c))
			return true;
		break;
	case NBD_NEG_ABORT:
		if (rc == 0)
			conn_kill(c, NULL);
		break;
	case NBD_NEG_FAIL:
		conn_kill(c, c->neg.why);
		break;
	}
	conn_check(c);
	return false;
}

static void conn_neg_cb(void *ctx, uint32_t events)
{
	struct nbd_conn *c = ctx;

	if ((events & EPOLLIN) && c->state == CONN_NEGOTIATING) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, NBD_RBUF_SIZE - c->rlen, 0);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR &&
			       errno != EWOULDBLOCK)) {
			conn_kill(c, NULL);
			conn_check(c);
			return;
		}
		if (n > 0) {
			size_t used;

			c->rlen += (size_t)n;
			used = nbd_neg_input(&c->neg, c->rbuf, c->rlen, &c->out);
			memmove(c->rbuf, c->rbuf + used, c->rlen - used);
			c->rlen -= used;
		}
	} else if (events & (EPOLLERR | EPOLLHUP)) {
		conn_kill(c, NULL);
		conn_check(c);
		return;
	}
	neg_advance(c);
}

static void format_peer(char *buf, size_t len, const struct sockaddr_storage *ss,
			const struct listener *l)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (!l->tcp) {
		snprintf(buf, len, "unix:%s", l->path);
	} else if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
}

static void conn_accept(int fd, const struct sockaddr_storage *ss, const struct listener *l)
{
	struct nbd_conn *c = calloc(1, sizeof(*c));
	int one = 1;

	if (c)
		c->rbuf = malloc(NBD_RBUF_SIZE);
	if (!c || !c->rbuf) {
		log_error("nbd: out of memory accepting a connection");
		if (c)
			free(c);
		close(fd);
		return;
	}
	if (l->tcp)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	c->id = ++next_conn_id;
	c->state = CONN_NEGOTIATING;
	c->owner = reactor_self();
	c->owner_idx = 0;
	c->accepted_ns = now_ns();
	format_peer(c->peer, sizeof(c->peer), ss, l);
	thread_add(&threads[0], c);
	counter_inc(&total_connections);
	BLKTGT_NBD_CONNECT(c->id, c->peer);
	log_debug("nbd: conn %lu from %s", (unsigned long)c->id, c->peer);

	nbd_neg_init(&c->neg, &neg_ops, c);
	if (nbd_neg_greeting(&c->out) < 0) {
		conn_kill(c, "out of memory");
		conn_check(c);
		return;
	}
	c->events = EPOLLIN;
	c->w = reactor_fd_add(fd, EPOLLIN, conn_neg_cb, c);
	if (!c->w) {
		conn_kill(c, "cannot watch the socket");
		conn_check(c);
		return;
	}
	neg_advance(c);
}

/* --- listeners -------------------------------------------------------- */

static unsigned open_connections(void)
{
	uint64_t closed = 0;

	for (unsigned i = 0; i < REACTOR_MAX; i++)
		closed += counter_get(&threads[i].closed);
	return (unsigned)(counter_get(&total_connections) - closed);
}

/*
 * Out of descriptors (EMFILE, ENFILE) or kernel memory, accept() fails
 * at once for as long as a connection waits in the backlog, and a
 * level-triggered listener would spin on it.  So the listeners rest (no
 * events) until a connection closes or NBD_ACCEPT_RETRY_NS has passed
 * (a descriptor freed elsewhere, such as by an RPC client), and say so at
 * most once per NBD_WARN_NS.  Waiting clients stay in the backlog.
 */
static void listeners_rest(int err)
{
	struct rlimit rl = { 0, 0 };

	getrlimit(RLIMIT_NOFILE, &rl);
	log_limited(&accept_warn, LOG_WARN,
		    "nbd: accept: %s (%u connections open, soft fd limit %llu); new clients "
		    "wait until a connection closes", strerror(err), open_connections(),
		    (unsigned long long)rl.rlim_cur);
	if (accept_resting)
		return;
	for (unsigned i = 0; i < nlisteners; i++)
		reactor_fd_modify(listeners[i].w, 0);
	accept_resting = true;
	reactor_timer_set(retry_timer, NBD_ACCEPT_RETRY_NS, 0);
	atomic_store(&accept_wanted, true);
}

/* Reactor 0, as a message from a closing connection or the retry timer. */
static void listeners_wake(void *ctx)
{
	if (!accept_resting || atomic_load(&shutting_down))
		return;
	atomic_store(&accept_wanted, false);
	accept_resting = false;
	reactor_timer_set(retry_timer, 0, 0);
	for (unsigned i = 0; i < nlisteners; i++)
		reactor_fd_modify(listeners[i].w, EPOLLIN);
}

static void listener_cb(void *ctx, uint32_t events)
{
	struct listener *l = ctx;

	/* accept() takes a descriptor before it looks at the backlog, so it
	 * fails with EMFILE on an empty backlog too: only a failure on the
	 * first try, when epoll said a client waits, means one does. */
	for (int i = 0; i < NBD_ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				if (i == 0)
					listeners_rest(errno);
			} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
				log_limited(&accept_warn, LOG_WARN, "nbd: accept: %s",
					    strerror(errno));
			}
			return;
		}
		if (atomic_load(&shutting_down) ||
		    open_connections() >= NBD_MAX_CONNECTIONS) {
			if (atomic_load(&shutting_down))
				log_limited(&refuse_warn, LOG_WARN,
					    "nbd: refusing a connection: shutting down");
			else
				log_limited(&refuse_warn, LOG_WARN,
					    "nbd: refusing a connection: %d open, the most allowed",
					    NBD_MAX_CONNECTIONS);
			close(fd);
			continue;
		}
		conn_accept(fd, &ss, l);
	}
}

/* --- the handshake limit (reactor 0) --------------------------------- */

/*
 * A client that connects and never finishes negotiating (or never reads
 * the NBD_OPT_GO reply) would hold one of NBD_MAX_CONNECTIONS forever, so
 * a few idle sockets could lock every real client out.  Once a second,
 * reactor 0 closes connections still in the handshake after the limit,
 * so one goes between limit and limit + 1 s after it connected.
 */
void nbd_set_handshake_limit(unsigned seconds)
{
	handshake_limit_s = seconds;
}

static void handshake_sweep(void *ctx)
{
	uint64_t now = now_ns();
	uint64_t limit = (uint64_t)handshake_limit_s * 1000000000ull;
	struct nbd_conn *c = threads[0].conns;

	while (c) {
		struct nbd_conn *next = c->next;

		if ((c->state == CONN_NEGOTIATING || c->state == CONN_HANDOFF) &&
		    now - c->accepted_ns >= limit) {
			char why[64];

			snprintf(why, sizeof(why), "handshake not finished within %u s",
				 handshake_limit_s);
			conn_kill(c, why);
			conn_check(c);
		}
		c = next;
	}
}

static int handshake_sweep_start(void)
{
	if (!handshake_limit_s || sweep_timer)
		return 0;
	sweep_timer = reactor_timer_add(1000000000ull, 1000000000ull, handshake_sweep, NULL);
	return sweep_timer ? 0 : -errno;
}

static int listener_add(int fd, bool tcp, const char *path)
{
	struct listener *l = &listeners[nlisteners];
	int rc;

	if (listen(fd, NBD_LISTEN_BACKLOG) < 0)
		return -errno;
	rc = handshake_sweep_start();
	if (rc)
		return rc;
	/* Now: when it is needed, there may be no descriptor for a timerfd. */
	if (!retry_timer && !(retry_timer = reactor_timer_add(0, 0, listeners_wake, NULL)))
		return -errno;
	memset(l, 0, sizeof(*l));
	l->fd = fd;
	l->tcp = tcp;
	if (path)
		snprintf(l->path, sizeof(l->path), "%s", path);
	l->w = reactor_fd_add(fd, EPOLLIN, listener_cb, l);
	if (!l->w)
		return -errno;
	nlisteners++;
	return 0;
}

int nbd_listen_tcp(const char *host, uint16_t port, uint16_t *bound)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res, *ai;
	char hostbuf[256], portbuf[8];
	int fd = -1, err = -EADDRNOTAVAIL, rc;

	nbd_proto_init();
	if (nlisteners == NBD_MAX_LISTENERS)
		return -ENOSPC;
	if (host && host[0] == '[') {   /* [v6addr] */
		size_t len = strlen(host);

		if (len < 2 || host[len - 1] != ']' || len - 2 >= sizeof(hostbuf))
			return -EINVAL;
		memcpy(hostbuf, host + 1, len - 2);
		hostbuf[len - 2] = '\0';
		host = hostbuf;
	}
	if (host && !*host)
		host = NULL;
	snprintf(portbuf, sizeof(portbuf), "%u", port);
	rc = getaddrinfo(host, portbuf, &hints, &res);
	if (rc) {
		log_error("nbd: cannot resolve %s: %s", host ? host : "*", gai_strerror(rc));
		return -EINVAL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int one = 1;

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return err;

	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	*bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	rc = listener_add(fd, true, NULL);
	if (rc) {
		close(fd);
		return rc;
	}
	return 0;
}

int nbd_listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	nbd_proto_init();
	if (nlisteners == NBD_MAX_LISTENERS)
		return -ENOSPC;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if (lstat(path, &st) == 0) {
		/* Replace an old socket, never anything else. */
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		if (unlink(path) < 0)
			return -errno;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rc = listener_add(fd, false, path);
	if (rc) {
		close(fd);
		unlink(path);
		return rc;
	}
	return 0;
}

/* --- shutdown and figures ------------------------------------------- */

static void shutdown_step(struct foreach *it, void *ctx)
{
	struct nbd_thread *t = this_thread();
	struct nbd_conn *c = t->conns;

	while (c) {
		struct nbd_conn *next = c->next;

		conn_kill(c, NULL);
		conn_check(c);
		c = next;
	}
	if (t->nconns == 0)
		foreach_continue(it, 0);
	else
		t->shutdown_it = it;    /* thread_del() continues */
}

static void shutdown_finish(void *ctx, int status)
{
	log_debug("nbd: every connection is closed");
	if (shutdown_done)
		shutdown_done(shutdown_ctx);
}

void nbd_shutdown(void (*done)(void *ctx), void *ctx)
{
	atomic_store(&shutting_down, true);
	for (unsigned i = 0; i < nlisteners; i++) {
		struct listener *l = &listeners[i];

		reactor_fd_remove(l->w);
		close(l->fd);
		if (!l->tcp)
			unlink(l->path);
	}
	nlisteners = 0;
	reactor_timer_remove(sweep_timer);
	sweep_timer = NULL;
	reactor_timer_remove(retry_timer);
	retry_timer = NULL;
	accept_resting = false;
	atomic_store(&accept_wanted, false);
	shutdown_done = done;
	shutdown_ctx = ctx;
	if (for_each_thread(shutdown_step, NULL, shutdown_finish) < 0) {
		log_error("nbd: shutdown: cannot reach the reactors");
		if (done)
			done(ctx);
	}
}

void nbd_get_stats(struct nbd_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->total_connections = counter_get(&total_connections);
	st->connections = open_connections();
	for (unsigned i = 0; i < REACTOR_MAX; i++)
		st->requests += counter_get(&threads[i].requests);
}
