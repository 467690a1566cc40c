// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_listen.h: the NBD listeners (nbd_listen.c): TCP and unix sockets,
 * accepting clients for nbd.c.
 */
#ifndef BLKTGT_NBD_LISTEN_H
#define BLKTGT_NBD_LISTEN_H

#include <stdint.h>

#include "nbd_conn.h"

/* What nbd.c hands a listener. */
struct nbd_listen_ops {
	/* A client connected: fd is its socket (non-blocking, close-on-exec),
	 * now the callee's; peer ("host:port", "unix:PATH") is copied. */
	void (*accepted)(int fd, const char *peer);
	/* Connections open now, for the warning when accept() rests. */
	unsigned (*open_connections)(void);
};

/* Listen on TCP host:port (port 0 picks one; *bound gets it) or on a unix
 * socket at path (an old socket file is replaced), handing clients to ops.
 * Reactor 0 only.  0 or -errno. */
int nbd_listen_tcp(const char *host, uint16_t port, uint16_t *bound,
		   const struct nbd_listen_ops *ops);
int nbd_listen_unix(const char *path, const struct nbd_listen_ops *ops);
/* A descriptor was closed (any reactor): listeners resting for want of
 * one try again. */
void nbd_listen_fd_freed(void);
/* Stop listening and accepting (reactor 0). */
void nbd_listen_close_all(void);

#endif
