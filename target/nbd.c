// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd.c: the NBD server's connections: their lifetime, the per-reactor
 * lists that own them, shutdown and figures.  Listeners and fixed newstyle
 * negotiation run on reactor 0, which owns the export registry; a client
 * that picks an export is handed by message to a reactor chosen round
 * robin, which owns the connection for the transmission phase and submits
 * its I/O there.  nbd_conn.h says which file does what.
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
#include "reactor.h"

static struct nbd_thread threads[REACTOR_MAX];
static uint64_t next_conn_id;           /* reactor 0 */
static uint64_t total_connections;      /* written by reactor 0 */
static atomic_bool shutting_down;
static void (*shutdown_done)(void *ctx);
static void *shutdown_ctx;

struct nbd_thread *nbd_thread_self(void)
{
	return &threads[reactor_index(reactor_self())];
}

void nbd_count_request(struct nbd_conn *c)
{
	c->requests++;
	nbd_counter_inc(&threads[c->owner_idx].requests);
}

bool nbd_shutting_down(void)
{
	return atomic_load(&shutting_down);
}

unsigned nbd_open_connections(void)
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
		struct foreach *it = t->shutdown_it;

		t->shutdown_it = NULL;
		foreach_continue(it, 0);
	}
}

void nbd_conn_attach(struct nbd_conn *c)
{
	c->owner = reactor_self();
	c->owner_idx = reactor_index(c->owner);
	thread_add(&threads[c->owner_idx], c);
}

void nbd_conn_detach(struct nbd_conn *c)
{
	thread_del(&threads[c->owner_idx], c);
}

struct nbd_conn *nbd_conn_new(int fd, const char *peer)
{
	struct nbd_conn *c;

	REACTOR_0_ONLY();
	c = calloc(1, sizeof(*c));
	if (c)
		c->rbuf = malloc(NBD_RBUF_SIZE);
	if (!c || !c->rbuf) {
		free(c);
		return NULL;
	}
	c->fd = fd;
	c->id = ++next_conn_id;
	c->state = CONN_NEGOTIATING;
	c->accepted_ns = now_ns();
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	nbd_conn_attach(c);
	nbd_counter_inc(&total_connections);
	BLKTGT_NBD_CONNECT(c->id, c->peer);
	log_debug("nbd: conn %lu from %s", (unsigned long)c->id, c->peer);
	return c;
}

void nbd_conn_update_events(struct nbd_conn *c)
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

void nbd_conn_kill(struct nbd_conn *c, const char *why)
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

void nbd_conn_check(struct nbd_conn *c)
{
	if (c->owner != reactor_self())
		reactor_rule_broken(__func__, "connection %lu is used by the reactor that "
				    "owns it only", (unsigned long)c->id);
	if (c->state == CONN_TRANSMITTING && c->rx_blocked)
		nbd_tx_unblock(c);
	if (c->state == CONN_DRAINING && c->nreqs == 0)
		nbd_conn_kill(c, NULL);
	if (c->state == CONN_DEAD && c->io_inflight == 0 && !c->flush_queued)
		conn_free(c);
}

/* --- shutdown and figures ------------------------------------------- */

static void shutdown_step(struct foreach *it, void *ctx)
{
	struct nbd_thread *t = nbd_thread_self();
	struct nbd_conn *c = t->conns;

	while (c) {
		struct nbd_conn *next = c->next;

		nbd_conn_kill(c, NULL);
		nbd_conn_check(c);
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
	REACTOR_0_ONLY();
	atomic_store(&shutting_down, true);
	nbd_listen_close_all();
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
	st->total_connections = nbd_counter_get(&total_connections);
	st->connections = nbd_open_connections();
	for (unsigned i = 0; i < REACTOR_MAX; i++)
		st->requests += nbd_counter_get(&threads[i].requests);
}
