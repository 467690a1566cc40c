// SPDX-License-Identifier: BSD-2-Clause
/*
 * exporter_http.h: the exporter's HTTP side, on libmicrohttpd
 * (exporter_http.c).
 */
#ifndef PROBEKIT_EXPORTER_HTTP_H
#define PROBEKIT_EXPORTER_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "exporter.h"

struct MHD_Daemon;

/*
 * Bind and listen on spec, "HOST:PORT" ("[ADDR]:PORT" for IPv6; port 0
 * picks a free one).  Returns the socket, with "HOST:PORT" as bound in
 * shown; after printing one line saying what is wrong, -2 for a spec
 * that is not HOST:PORT, -1 when the socket fails (a port in use).
 */
int http_listen(const char *spec, char *shown, size_t shownlen);

/* Serve GET /metrics from s on fd, on a thread of libmicrohttpd's, with
 * a thread of ours that closes connections past their deadline.  NULL
 * after printing one line. */
struct MHD_Daemon *http_start(int fd, const struct exp_state *s,
			      bool verbose);

/* Connections open now, and closed[EXP_HTTP_NCLOSED]: exp_state's
 * http_stats. */
void http_stats(unsigned long long *open, unsigned long long *closed);

/* Stop both threads (d may be NULL). */
void http_stop(struct MHD_Daemon *d);

#endif
