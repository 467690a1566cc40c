// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd.h: the NBD server front end (fixed newstyle negotiation, then
 * transmission), as target.c and the RPC layer see it.  The wire format is in
 * nbd_proto.h; everything here runs on reactor threads.
 *
 * Listeners and negotiation live on reactor 0, which owns the export
 * registry.  Once a client picks an export (NBD_OPT_GO or
 * NBD_OPT_EXPORT_NAME) the connection is handed, by message, to a reactor
 * chosen round robin, which then owns it for transmission.
 */
#ifndef BLKTGT_NBD_H
#define BLKTGT_NBD_H

#include <stdint.h>

/* Serve clients on TCP host:port (port 0 picks one); *bound gets the
 * port.  Reactor 0 only.  0 or -errno. */
int nbd_serve_tcp(const char *host, uint16_t port, uint16_t *bound);
/* Serve clients on a unix socket at path (an old socket file is replaced). */
int nbd_serve_unix(const char *path);

/* Close a connection still negotiating this many seconds after it
 * connected (0: never).  Before the first nbd_serve_*(). */
#define NBD_HANDSHAKE_LIMIT_DEFAULT 10
#define NBD_HANDSHAKE_LIMIT_MAX     86400
void nbd_set_handshake_limit(unsigned seconds);

/* Stop listening and disconnect every client; done(ctx) runs on reactor 0
 * once every connection is gone and its in-flight I/O has completed. */
void nbd_shutdown(void (*done)(void *ctx), void *ctx);

struct nbd_stats {
	uint64_t connections;   /* currently connected */
	uint64_t total_connections;
	uint64_t requests;      /* transmission requests received */
};
/* Figures summed over every reactor (approximate while I/O runs). */
void nbd_get_stats(struct nbd_stats *st);

#endif
