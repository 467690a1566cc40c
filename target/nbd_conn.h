// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_conn.h: what the files of the NBD server share, and nothing outside
 * them includes.  One connection moves through them in order:
 *
 *   nbd_listen.c  listeners: accept, fd-limit back-off, the handshake limit
 *   nbd_neg.c     negotiation on reactor 0 (glue around nbd_proto.c's
 *                 byte-buffer engine), then the hand-off to a reactor
 *   nbd_tx.c      transmission on the owner reactor: requests, payloads,
 *                 I/O, replies
 *   nbd.c         a connection's lifetime (kill, check, free), the
 *                 per-reactor lists, shutdown and figures
 */
#ifndef BLKTGT_NBD_CONN_H
#define BLKTGT_NBD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bdev.h"
#include "nbd_proto.h"
#include "reactor.h"

#define NBD_PEER_MAX        128
#define NBD_DESC_MAX        128

enum conn_state {
	CONN_NEGOTIATING,       /* reactor 0: option haggling */
	CONN_HANDOFF,           /* reactor 0: GO answered, flushing the reply */
	CONN_TRANSMITTING,      /* owner reactor: serving requests */
	CONN_DRAINING,          /* NBD_CMD_DISC seen: close once all is replied */
	CONN_DEAD,              /* socket closed: freed once its I/O is done */
};

struct nbd_conn;

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

/* Per-reactor state, touched only by its reactor (the counters are also
 * read, approximately, by nbd_get_stats). */
struct nbd_thread {
	_Alignas(64) struct nbd_conn *conns;
	unsigned nconns;
	struct foreach *shutdown_it;    /* shutdown waiting for nconns == 0 */
	uint64_t requests;
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

/* --- nbd.c: lifetime -------------------------------------------------- */

/* The calling reactor's list and counters. */
struct nbd_thread *nbd_thread_self(void);
/* One more transmission request on c, in its and its reactor's counts. */
void nbd_count_request(struct nbd_conn *c);
/* Connections open now, on every reactor. */
unsigned nbd_open_connections(void);
/* Shutdown has begun: no new connection, no new transmission. */
bool nbd_shutting_down(void);

/* A new connection on socket fd, on reactor 0's list (reactor 0 only);
 * NULL on ENOMEM, and fd is then still the caller's.  peer is copied. */
struct nbd_conn *nbd_conn_new(int fd, const char *peer);
/* Move c from the calling reactor's list to the one that adopts it. */
void nbd_conn_detach(struct nbd_conn *c);
void nbd_conn_attach(struct nbd_conn *c);
/* Make the socket's epoll mask match c's state. */
void nbd_conn_update_events(struct nbd_conn *c);
/* Close the socket and drop what can no longer be sent (why: logged, NULL
 * for an ordinary close); c is freed by nbd_conn_check() once its
 * in-flight I/O has completed. */
void nbd_conn_kill(struct nbd_conn *c, const char *why);
/*
 * Called at the end of every entry point (fd callback, completion, deferred
 * flush, message) and nowhere else, so nothing above it on the stack still
 * uses c when it is freed: resumes reading once the in-flight load fell,
 * closes a drained connection, frees a dead one whose I/O is done.
 */
void nbd_conn_check(struct nbd_conn *c);

/* --- nbd_listen.c ------------------------------------------------------ */

/* A descriptor was closed (any reactor): listeners resting for want of
 * one try again. */
void nbd_listen_fd_freed(void);
/* Stop listening and accepting (reactor 0). */
void nbd_listen_close_all(void);

/* --- nbd_neg.c --------------------------------------------------------- */

/* Greet c, just accepted on reactor 0, and negotiate with it. */
void nbd_neg_start(struct nbd_conn *c);

/* --- nbd_tx.c ---------------------------------------------------------- */

/* Message: the calling reactor takes c over for transmission. */
void nbd_tx_adopt(void *ctx);
/* Reading paused for too much in flight: resume it when the load fell. */
void nbd_tx_unblock(struct nbd_conn *c);
/* A dead connection: drop queued replies and a half-received write. */
void nbd_tx_drop(struct nbd_conn *c);
/* Free the idle requests (the connection is being freed). */
void nbd_tx_free(struct nbd_conn *c);

#endif
