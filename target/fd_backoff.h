// SPDX-License-Identifier: BSD-2-Clause
/*
 * fd_backoff.h: what a listener on reactor 0 does when the process is out
 * of descriptors, shared by the NBD listeners and the JSON-RPC server.
 *
 * accept() takes a descriptor before it looks at the backlog, so out of
 * descriptors (EMFILE, ENFILE) or kernel memory it fails at once for as
 * long as a client waits, and a level-triggered listener would spin on
 * it.  Instead the listener rests (its owner stops watching it) until a
 * descriptor is freed or FD_BACKOFF_RETRY_NS has passed (a descriptor
 * freed elsewhere, which its owner does not hear of), and says so at most
 * once per FD_BACKOFF_WARN_NS.  Waiting clients stay in the backlog.
 *
 * A back-off may hold one descriptor in reserve: out of descriptors, it
 * lets one more client in, so that an operator can still reach a process
 * whose other clients took every descriptor.
 */
#ifndef BLKTGT_FD_BACKOFF_H
#define BLKTGT_FD_BACKOFF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "log.h"

struct reactor_timer;

#define FD_BACKOFF_RETRY_NS 1000000000ull   /* a resting listener tries again */
#define FD_BACKOFF_WARN_NS  10000000000ull  /* between two accept warnings */

/* What the owner of the listeners gives its back-off. */
struct fd_backoff_ops {
	/* Stop watching the listeners (resting) or watch them again. */
	void (*rest)(void *ctx, bool resting);
	/* Clients in now, for the warning. */
	unsigned (*clients)(void *ctx);
};

/* Its owner's words in the warning:
 * "WHO: accept: ERROR (N CLIENTS, soft fd limit L); new clients wait until UNTIL" */
struct fd_backoff_conf {
	const char *who;                /* "nbd" */
	const char *clients;            /* "connections open" */
	const char *until;              /* "a connection closes" */
	bool reserve;                   /* hold one descriptor back */
	const struct fd_backoff_ops *ops;
	void *ctx;
};

/* One per server, in static storage (zeroed), touched only through the
 * functions below; everything but fd_backoff_fd_freed() on reactor 0. */
struct fd_backoff {
	const struct fd_backoff_conf *conf;
	struct reactor_timer *retry;
	bool resting;
	atomic_bool wanted;             /* resting: a freed descriptor wakes it */
	int reserve_fd;                 /* -1: spent, or none wanted */
	struct log_limit warn;
};

/* Set up b for conf (its retry timer now: when it is needed there may be
 * no descriptor for one), and take the reserve.  Does nothing if b is set
 * up already.  0 or -errno. */
int fd_backoff_init(struct fd_backoff *b, const struct fd_backoff_conf *conf);
/* Undo init (the owner has stopped watching its listeners); a late
 * fd_backoff_fd_freed() message then does nothing. */
void fd_backoff_fini(struct fd_backoff *b);

/*
 * accept4(lfd, sa, sl, non-blocking and close-on-exec): a client's socket,
 * or -1 when the owner should stop accepting for now: the backlog is
 * empty, or accept failed (said, at most once per FD_BACKOFF_WARN_NS), or
 * the listeners rest.  first: this is the first try since epoll said a
 * client waits; only then does EMFILE mean one does, and makes the
 * listeners rest (or spends the reserve on it).
 */
int fd_backoff_accept(struct fd_backoff *b, int lfd, struct sockaddr *sa, socklen_t *sl,
		      bool first);

/* What a listener's owner does with the clients fd_backoff_accept_all()
 * lets in. */
struct fd_backoff_take {
	/* Before each accept: false leaves the clients in the backlog (the
	 * owner is full).  NULL: always room. */
	bool (*room)(void *ctx);
	/* A client's socket, the owner's now: if it cannot keep it, it
	 * closes it and calls fd_backoff_fd_freed(). */
	void (*accepted)(void *ctx, int fd, const struct sockaddr_storage *ss);
	unsigned batch;         /* clients per call at most; 0: no bound */
};

/* A listener's epoll callback: accept the clients waiting on lfd and
 * hand each to t->accepted(ctx, ...), until the backlog is empty, the
 * owner has no room, the batch is done, or the listeners rest. */
void fd_backoff_accept_all(struct fd_backoff *b, int lfd, const struct fd_backoff_take *t,
			   void *ctx);
/* The listeners rest now. */
bool fd_backoff_resting(const struct fd_backoff *b);
/* A descriptor was closed (any thread): resting listeners try again, and
 * (on reactor 0) the reserve is taken back. */
void fd_backoff_fd_freed(struct fd_backoff *b);
/* Take the reserve back if it is spent and a descriptor is free now
 * (quietly not, when none is); for an owner's periodic tick. */
void fd_backoff_reserve(struct fd_backoff *b);

#endif
