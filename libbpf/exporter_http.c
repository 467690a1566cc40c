// SPDX-License-Identifier: BSD-2-Clause
/*
 * exporter_http.c: the exporter's HTTP side, on libmicrohttpd.
 *
 * One thread of libmicrohttpd's serves every connection, so scrapes are
 * rendered one at a time.  Everything a client controls is bounded: how
 * many connections (in all and per address), how long one may sit idle,
 * and how much memory its request may take (which bounds the request
 * line and headers).  Only GET /metrics is served; anything else gets an
 * HTTP error status, and the server carries on.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "exporter.h"
#include "trace_helpers.h"

#define HTTP_MAX_CONNS        32	/* connections at once */
#define HTTP_MAX_CONNS_PER_IP 16
#define HTTP_IDLE_TIMEOUT     10	/* seconds a connection may idle */
#define HTTP_CONN_MEMORY      (32u << 10)	/* request line + headers */
#define HTTP_HOST_MAX         255

#define CT_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define CT_OM   "application/openmetrics-text; version=1.0.0; charset=utf-8"

int http_listen(const char *spec, char *shown, size_t shownlen)
{
	char host[HTTP_HOST_MAX + 1], port[8], addr[NI_MAXHOST], serv[NI_MAXSERV];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE };
	struct addrinfo *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	const char *colon = strrchr(spec, ':'), *h = spec;
	size_t hlen;
	long p;
	int fd = -1, one = 1, err;

	if (!colon || colon == spec) {
		tool_err("bad --listen '%.80s': give HOST:PORT, such as "
			 "127.0.0.1:9437", spec);
		return -2;
	}
	hlen = colon - spec;
	if (hlen >= 2 && spec[0] == '[' && spec[hlen - 1] == ']') {
		h++;
		hlen -= 2;
	}
	if (hlen > HTTP_HOST_MAX || parse_long(colon + 1, 0, 65535, &p)) {
		tool_err("bad --listen '%.80s': the host is at most %d "
			 "characters, the port 0..65535", spec, HTTP_HOST_MAX);
		return -2;
	}
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	snprintf(port, sizeof(port), "%ld", p);
	err = getaddrinfo(host, port, &hints, &ai);
	if (err) {
		tool_err("bad --listen '%.80s': %s", spec, gai_strerror(err));
		return -2;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sslen)) {
		err = errno;
		tool_err("cannot listen on %.80s: %s%s", spec, strerror(err),
			 err == EADDRINUSE ? "; pick another port with --listen" :
			 "");
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	if (getnameinfo((struct sockaddr *)&ss, sslen, addr, sizeof(addr), serv,
			sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(shown, shownlen, "%s:%s", host, port);
	else
		snprintf(shown, shownlen, strchr(addr, ':') ? "[%s]:%s" : "%s:%s",
			 addr, serv);
	return fd;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
			     const char *text)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(strlen(text), (void *)text,
					    MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* Whether the Accept header asks for OpenMetrics, as Prometheus 2.42
 * does first (it lists the text format after it, at a lower q). */
static bool wants_openmetrics(struct MHD_Connection *c)
{
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							 MHD_HTTP_HEADER_ACCEPT);

	return accept && strstr(accept, "application/openmetrics-text");
}

static bool has_body(struct MHD_Connection *c)
{
	const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
				MHD_HTTP_HEADER_CONTENT_LENGTH);

	return (len && strcmp(len, "0")) ||
	       MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					   MHD_HTTP_HEADER_TRANSFER_ENCODING);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **req)
{
	const struct exp_state *s = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *body = NULL;
	long len;
	bool om;

	if (strcmp(method, MHD_HTTP_METHOD_GET))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED,
			     "only GET /metrics is served\n");
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND,
			     "not found: metrics are at /metrics\n");
	/* A GET has no body: one that announces one is refused before any
	 * of it is read. */
	if (has_body(c))
		return reply(c, MHD_HTTP_BAD_REQUEST,
			     "a GET of /metrics takes no body\n");
	om = wants_openmetrics(c);
	len = exp_render(s, om, &body);
	if (len < 0)
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
			     "cannot read the metrics\n");
	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				om ? CT_OM : CT_TEXT);
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	if (!*(const bool *)cls)
		return;
	fprintf(stderr, "%s: http: ", command_name());
	vfprintf(stderr, fmt, ap);
}

struct MHD_Daemon *http_start(int fd, const struct exp_state *s,
			      bool verbose)
{
	static bool log_on;
	struct MHD_Daemon *d;

	log_on = verbose;
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
			     MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request,
			     (void *)s,
			     MHD_OPTION_LISTEN_SOCKET, fd,
			     MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNS,
			     MHD_OPTION_PER_IP_CONNECTION_LIMIT,
			     (unsigned)HTTP_MAX_CONNS_PER_IP,
			     MHD_OPTION_CONNECTION_TIMEOUT,
			     (unsigned)HTTP_IDLE_TIMEOUT,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT,
			     (size_t)HTTP_CONN_MEMORY,
			     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &log_on,
			     MHD_OPTION_END);
	if (!d)
		tool_err("cannot start the HTTP server (libmicrohttpd)");
	return d;
}
