// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_conn.h: what the files of the NBD server share, and nothing outside
 * them includes.  They are rooms on two floors:
 *
 *   nbd.c         a connection's lifetime: accept, hand-off to its reactor,
 *                 close, free; the per-reactor lists, the handshake limit,
 *                 shutdown and figures.  It owns every socket callback and
 *                 calls the rooms below, which never call it back.
 *   ------------- below -------------------------------------------------
 *   nbd_listen.c  listeners: accept() and the fd-limit back-off
 *   nbd_neg.c     negotiation on reactor 0: the socket side of nbd_proto.c's
 *                 byte-buffer engine, the export lookups, the chosen export
 *   nbd_tx.c      transmission on the owner reactor: requests, payloads,
 *                 I/O, replies
 *   nbd_proto.c   the wire protocol, on byte buffers (all of them use it)
 *
 * Each room below has its own header (nbd_listen.h, nbd_neg.h, nbd_tx.h),
 * which nbd.c includes.  A room below reports back up in three ways only:
 * a return value, the state it leaves in the connection (nbd_conn_fail()
 * below), and the callbacks nbd.c hands it (struct nbd_listen_ops in
 * nbd_listen.h, struct nbd_conn_ops).  tests/project/test_rooms.py reads the call
 * graph and holds them to it.
 */
#ifndef BLKTGT_NBD_CONN_H
#define BLKTGT_NBD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "bdev.h"
#include "nbd_proto.h"
#include "reactor.h"

#define NBD_PEER_MAX        128
#define NBD_DESC_MAX        128
#define NBD_WHY_MAX         128

enum conn_state {
	CONN_NEGOTIATING,       /* reactor 0: option haggling */
	CONN_HANDOFF,           /* reactor 0: GO answered, flushing the reply */
	CONN_TRANSMITTING,      /* owner reactor: serving requests */
	CONN_DRAINING,          /* NBD_CMD_DISC seen: close once all is replied */
	CONN_CLOSING,           /* failed (nbd_conn_fail): nbd.c closes it */
	CONN_DEAD,              /* socket closed: freed once its I/O is done */
};

struct nbd_conn;

/* What nbd.c hands the rooms below in every connection, so that they can
 * report without calling it. */
struct nbd_conn_ops {
	/* The end of an entry point a room below owns (an I/O completion,
	 * a deferred flush): nbd.c closes c if it failed, and frees it once
	 * nothing refers to it, so c may be gone when this returns. */
	void (*settle)(struct nbd_conn *c);
};

/* One transmission request, from its header to its reply.  It keeps what
 * the client asked (command, offset, length, flags), so a write whose
 * payload arrives later is started from the request itself. */
struct nbd_req {
	struct bdev_io io;
	struct nbd_conn *conn;
	struct nbd_req *next;           /* free list or reply queue */
	struct nbd_wire_simple_reply reply;
	uint64_t handle;
	uint64_t trace_id;              /* trace ring object: conn id << 32 | request */
	uint64_t offset;                /* the request's offset */
	uint16_t cmd;
	uint16_t flags;                 /* NBD_CMD_FLAG_* */
	uint32_t len;                   /* the request's length */
	uint32_t error;                 /* NBD error of the reply */
	uint32_t got;                   /* write payload bytes received */
	bool discard;                   /* rejected write: payload is skipped */
	uint64_t trim_left;             /* TRIM: bytes not yet submitted */
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
	char why[NBD_WHY_MAX];          /* CONN_CLOSING: the reason ("": none) */
	const struct nbd_conn_ops *ops;
	struct reactor_fd *w;
	uint32_t events;                /* what w watches now */
	bool want_out;                  /* output is waiting for EPOLLOUT */
	struct reactor *owner;
	unsigned owner_idx;
	struct nbd_conn *prev, *next;   /* the owner reactor's list */

	/* negotiation (reactor 0) */
	uint64_t accepted_ns;           /* for the handshake limit */
	struct nbd_proto_neg neg;
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

/* Per-reactor state of nbd.c, touched only by its reactor (the counter is
 * also read, approximately, by nbd_get_stats). */
struct nbd_thread {
	_Alignas(64) struct nbd_conn *conns;
	unsigned nconns;
	struct reactor_foreach *shutdown_it;    /* shutdown waiting for nconns == 0 */
	uint64_t closed;
};

/* A counter one reactor writes and any thread may read (approximately). */
static inline void nbd_counter_inc(uint64_t *v)
{
	__atomic_store_n(v, __atomic_load_n(v, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

static inline uint64_t nbd_counter_get(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

/* --- every room: the connection's state ------------------------------- */

/*
 * c must close (why: logged; NULL for an ordinary close).  A room below
 * says so here and stops serving c at once; nbd.c closes the socket and
 * drops what is queued at the end of the entry point (before its own
 * callbacks return, or when a room below calls ops->settle).  The first
 * reason wins.
 */
static inline void nbd_conn_fail(struct nbd_conn *c, const char *why)
{
	if (c->state == CONN_CLOSING || c->state == CONN_DEAD)
		return;
	c->state = CONN_CLOSING;
	snprintf(c->why, sizeof(c->why), "%s", why ? why : "");
}

/* Make the socket's epoll mask match c's state: input while negotiating or
 * transmitting (unless too much is in flight), output while some waits. */
static inline void nbd_conn_update_events(struct nbd_conn *c)
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

#endif
