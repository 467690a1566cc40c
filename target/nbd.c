// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd.c: the NBD server's connections: their lifetime, the per-reactor
 * lists that own them, the handshake limit, shutdown and figures.
 * Listeners and fixed newstyle negotiation run on reactor 0, which owns
 * the export registry; a client that picks an export is handed by message
 * to a reactor chosen round robin, which owns the connection for the
 * transmission phase and submits its I/O there.
 *
 * This is the top room: it owns each connection's socket callback and
 * calls the rooms below (nbd_conn.h lists them), which report back through
 * return values, nbd_conn_fail() and the callbacks handed to them, never
 * by calling a function here.
 *
 * A connection lives until its socket is closed AND every I/O it submitted
 * has completed, so a client that vanishes mid-I/O leaks nothing and no
 * completion touches freed memory.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "blktgt_probes.h"
#include "export.h"
#include "log.h"
#include "nbd.h"
#include "nbd_conn.h"
#include "nbd_listen.h"
#include "nbd_neg.h"
#include "nbd_tx.h"
#include "reactor.h"

#define NBD_WARN_NS         10000000000ull  /* between two refusal warnings */

static struct nbd_thread threads[REACTOR_MAX];
static uint64_t next_conn_id;           /* reactor 0 */
static uint64_t total_connections;      /* written by reactor 0 */
static unsigned next_reactor = 1;       /* round robin, reactor 0 */
static unsigned handshake_limit_s = NBD_HANDSHAKE_LIMIT_DEFAULT;
static struct reactor_timer *sweep_timer;   /* reactor 0: the handshake limit */
static struct log_limit refuse_warn = LOG_LIMIT_INIT(NBD_WARN_NS);
static atomic_bool shutting_down;
static void (*shutdown_done)(void *ctx);
static void *shutdown_ctx;

static void conn_settle(struct nbd_conn *c);

static const struct nbd_conn_ops conn_ops = {
	.settle = conn_settle,
};

static struct nbd_thread *thread_self(void)
{
	return &threads[reactor_index(reactor_self())];
}

static unsigned open_connections(void)
{
	uint64_t closed = 0;

	for (unsigned i = 0; i < REACTOR_MAX; i++)
		closed += nbd_counter_get(&threads[i].closed);
	return (unsigned)(nbd_counter_get(&total_connections) - closed);
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
		struct reactor_foreach *it = t->shutdown_it;

		t->shutdown_it = NULL;
		reactor_foreach_continue(it, 0);
	}
}

/* Put c on the calling reactor's list: that reactor owns it now. */
static void conn_attach(struct nbd_conn *c)
{
	c->owner = reactor_self();
	c->owner_idx = reactor_index(c->owner);
	thread_add(&threads[c->owner_idx], c);
}

static void conn_detach(struct nbd_conn *c)
{
	thread_del(&threads[c->owner_idx], c);
}

/* Close the socket and drop what can no longer be sent; c is freed by
 * conn_settle() once its in-flight I/O has completed. */
static void conn_close(struct nbd_conn *c)
{
	if (c->why[0])
		log_info("nbd: conn %lu (%s): disconnecting: %s",
			 (unsigned long)c->id, c->peer, c->why);
	c->state = CONN_DEAD;
	if (c->w) {
		reactor_fd_remove(c->w);
		c->w = NULL;
	}
	close(c->fd);
	c->fd = -1;
	nbd_listen_fd_freed();
	nbd_tx_drop(c);
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
	nbd_tx_free(c);
	free(c->rbuf);
	nbd_counter_inc(&t->closed);
	thread_del(t, c);
	free(c);
}

/*
 * Run at the end of every entry point (socket callback, message, timer
 * here; completion and deferred flush in nbd_tx.c, through conn_ops) and
 * nowhere else, so nothing above it on the stack still uses c when it is
 * freed: resumes reading once the in-flight load fell, closes a drained or
 * failed connection, frees a dead one whose I/O is done.
 */
static void conn_settle(struct nbd_conn *c)
{
	if (c->owner != reactor_self())
		reactor_rule_broken(__func__, "connection %lu is used by the reactor that "
				    "owns it only", (unsigned long)c->id);
	if (c->state == CONN_TRANSMITTING && c->rx_blocked)
		nbd_tx_unblock(c);
	if (c->state == CONN_DRAINING && c->nreqs == 0)
		nbd_conn_fail(c, NULL);
	if (c->state == CONN_CLOSING)
		conn_close(c);
	if (c->state == CONN_DEAD && c->io_inflight == 0 && !c->flush_queued)
		conn_free(c);
}

/* --- the phases: socket events, hand-off, adoption ----------------------- */

static void conn_handoff(struct nbd_conn *c);

/* Every connection's socket callback, on the reactor that owns it. */
static void conn_events(void *ctx, uint32_t events)
{
	struct nbd_conn *c = ctx;

	switch (c->state) {
	case CONN_NEGOTIATING:
	case CONN_HANDOFF:
		if (nbd_neg_events(c, events)) {
			conn_handoff(c);
			return;         /* c is its new reactor's now */
		}
		break;
	case CONN_TRANSMITTING:
	case CONN_DRAINING:
		nbd_tx_events(c, events);
		break;
	case CONN_CLOSING:
	case CONN_DEAD:
		break;          /* unwatched when closed: not reached */
	}
	conn_settle(c);
}

/* Message: the calling reactor takes c over for transmission. */
static void conn_adopt(void *ctx)
{
	struct nbd_conn *c = ctx;

	conn_attach(c);
	c->state = CONN_TRANSMITTING;
	BLKTGT_NBD_TRANSMIT(c->id, c->fd, c->owner_idx);
	c->events = EPOLLIN;
	c->w = reactor_fd_add(c->fd, EPOLLIN, conn_events, c);
	if (!c->w)
		nbd_conn_fail(c, "cannot watch the socket");
	else if (atomic_load(&shutting_down))
		nbd_conn_fail(c, "server shutting down");
	else
		nbd_tx_start(c);
	conn_settle(c);
}

/* Pass c, done negotiating, to the next reactor in turn; from then on
 * that reactor owns it (and may already have freed it). */
static void conn_handoff(struct nbd_conn *c)
{
	unsigned n = reactor_count();
	unsigned idx = next_reactor % n;

	/* 1, 2, .. n-1, 0, 1, ..: reactor 0 also runs the control plane, so
	 * it gets its turn last. */
	next_reactor = (idx + 1) % n;

	reactor_fd_remove(c->w);
	c->w = NULL;
	conn_detach(c);
	if (reactor_send_msg(reactor_get(idx), conn_adopt, c) < 0) {
		conn_attach(c);
		nbd_conn_fail(c, "out of memory handing the connection over");
		conn_settle(c);
	}
}

/* --- accepting, and the handshake limit (reactor 0) -------------------- */

/* A listener's client: a connection, negotiating from now on (refused
 * past NBD_MAX_CONNECTIONS or during shutdown). */
static void conn_accepted(int fd, const char *peer)
{
	struct nbd_conn *c;

	REACTOR_0_ONLY();
	if (atomic_load(&shutting_down)) {
		log_limited(&refuse_warn, LOG_WARN, "nbd: refusing a connection: shutting down");
		close(fd);
		return;
	}
	if (open_connections() >= NBD_MAX_CONNECTIONS) {
		log_limited(&refuse_warn, LOG_WARN,
			    "nbd: refusing a connection: %d open, the most allowed",
			    NBD_MAX_CONNECTIONS);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->rbuf = malloc(NBD_RBUF_SIZE);
	if (!c || !c->rbuf) {
		free(c);
		log_error("nbd: out of memory accepting a connection");
		close(fd);
		return;
	}
	c->fd = fd;
	c->ops = &conn_ops;
	c->id = ++next_conn_id;
	c->state = CONN_NEGOTIATING;
	c->accepted_ns = reactor_now_ns();
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	conn_attach(c);
	nbd_counter_inc(&total_connections);
	BLKTGT_NBD_CONNECT(c->id, c->peer);
	log_debug("nbd: conn %lu from %s", (unsigned long)c->id, c->peer);

	c->events = EPOLLIN;
	c->w = reactor_fd_add(c->fd, EPOLLIN, conn_events, c);
	if (!c->w)
		nbd_conn_fail(c, "cannot watch the socket");
	else
		nbd_neg_start(c);
	conn_settle(c);
}

static const struct nbd_listen_ops listen_ops = {
	.accepted = conn_accepted,
	.open_connections = open_connections,
};

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
	uint64_t now = reactor_now_ns();
	uint64_t limit = (uint64_t)handshake_limit_s * 1000000000ull;
	struct nbd_conn *c = thread_self()->conns;

	while (c) {
		struct nbd_conn *next = c->next;

		if ((c->state == CONN_NEGOTIATING || c->state == CONN_HANDOFF) &&
		    now - c->accepted_ns >= limit) {
			char why[64];

			snprintf(why, sizeof(why), "handshake not finished within %u s",
				 handshake_limit_s);
			nbd_conn_fail(c, why);
			conn_settle(c);
		}
		c = next;
	}
}

/* Before the first listener: names for the probes, the handshake limit. */
static int serve_prepare(void)
{
	REACTOR_0_ONLY();
	nbd_proto_init();
	if (!handshake_limit_s || sweep_timer)
		return 0;
	sweep_timer = reactor_timer_add(1000000000ull, 1000000000ull, handshake_sweep, NULL);
	return sweep_timer ? 0 : -errno;
}

int nbd_serve_tcp(const char *host, uint16_t port, uint16_t *bound)
{
	int rc = serve_prepare();

	return rc ? rc : nbd_listen_tcp(host, port, bound, &listen_ops);
}

int nbd_serve_unix(const char *path)
{
	int rc = serve_prepare();

	return rc ? rc : nbd_listen_unix(path, &listen_ops);
}

/* --- shutdown and figures ------------------------------------------- */

static void shutdown_step(struct reactor_foreach *it, void *ctx)
{
	struct nbd_thread *t = thread_self();
	struct nbd_conn *c = t->conns;

	while (c) {
		struct nbd_conn *next = c->next;

		nbd_conn_fail(c, NULL);
		conn_settle(c);
		c = next;
	}
	if (t->nconns == 0)
		reactor_foreach_continue(it, 0);
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
	REACTOR_0_ONLY();
	atomic_store(&shutting_down, true);
	nbd_listen_close_all();
	reactor_timer_remove(sweep_timer);
	sweep_timer = NULL;
	shutdown_done = done;
	shutdown_ctx = ctx;
	if (reactor_for_each_thread(shutdown_step, NULL, shutdown_finish) < 0) {
		log_error("nbd: shutdown: cannot reach the reactors");
		if (done)
			done(ctx);
	}
}

void nbd_get_stats(struct nbd_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->total_connections = nbd_counter_get(&total_connections);
	st->connections = open_connections();
	st->requests = nbd_tx_requests();
}
