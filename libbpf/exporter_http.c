// SPDX-License-Identifier: BSD-2-Clause
/*
 * exporter_http.c: the exporter's HTTP side, on libmicrohttpd.
 *
 * One thread of libmicrohttpd's serves every connection, so scrapes are
 * rendered one at a time.  Everything a client controls is bounded: how
 * many connections (in all and per address), how long one may take to
 * send a whole request and take its answer, and how much memory its
 * request may take (which bounds the request line and headers).  Only GET
 * /metrics is served; anything else gets an HTTP error status, and the
 * server carries on.
 *
 * libmicrohttpd 0.9.75 has only idle timeouts, which each byte a client
 * sends resets: a client sending a byte a second would hold a connection
 * for ever.  So the exporter keeps its own table of connections
 * (MHD_OPTION_NOTIFY_CONNECTION adds and removes them) with a deadline
 * each, and a thread of its own shuts down the socket of a connection
 * past its deadline; libmicrohttpd then sees the end of the stream and
 * closes it.  The table also decides who gets in (MHD_OPTION_ACCEPT_
 * POLICY): an address at its cap is refused, and when the table is full
 * a newcomer from an address holding fewer connections than the largest
 * holder takes the place of that holder's oldest connection, so a flood
 * from some addresses cannot keep a scrape from another one out.
 *
 * A burst must not keep a scrape out either, before anything is
 * accepted: the listen backlog is as deep as the kernel allows
 * (somaxconn), so a scrape's SYN is queued behind a burst rather than
 * dropped and sent again a second later; and one address may hold more
 * connections than a burst of a few hundred (HTTP_MAX_CONNS_PER_IP), so
 * that a burst is held, each until its deadline, rather than refused in
 * waves as its SYNs come back.  Held connections cost a descriptor and
 * libmicrohttpd's memory pool each; the descriptors' soft limit is raised
 * to the hard one at start.  What the table refuses or closes is counted
 * by reason and served (probekit_exporter_http_closed_total).
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "exporter_http.h"
#include "exporter.h"
#include "exporter_render.h"
#include "tool_options.h"

#define HTTP_MAX_CONNS        512	/* connections at once */
#define HTTP_MAX_CONNS_PER_IP 256
#define HTTP_BACKLOG          4096	/* listen(); the kernel caps it at
					 * net.core.somaxconn */
#define HTTP_DEADLINE         10	/* seconds to send a request and
					 * take its answer */
#define HTTP_CONN_MEMORY      (32u << 10)	/* request line + headers */
#define HTTP_HOST_MAX         255
/* Connections libmicrohttpd may hold: ours, plus those whose socket was
 * shut down and that it has not yet closed. */
#define HTTP_TABLE_MAX        (2 * HTTP_MAX_CONNS)

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
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, HTTP_BACKLOG) ||
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

/* --- the connection table ------------------------------------------------ */

/* One connection libmicrohttpd holds.  Its socket stays open while it is
 * in the table: libmicrohttpd tells us a connection is closed before it
 * closes the socket, and both the table's callbacks and the reaper hold
 * conns.lock, so a shutdown() never hits a reused descriptor. */
struct conn {
	bool used;
	bool shut;		/* shut down: leaving, no longer counted */
	int fd;
	struct sockaddr_storage addr;	/* its port zeroed: the address */
	unsigned long long seq;		/* accept order: lower is older */
	long long deadline;		/* CLOCK_MONOTONIC ns */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t reaper;
	bool reaper_on, stopping;
	unsigned long long seq;
	unsigned long long closed[EXP_HTTP_NCLOSED];	/* by reason */
	struct conn c[HTTP_TABLE_MAX];
} conns = { .lock = PTHREAD_MUTEX_INITIALIZER,
	    .wake = PTHREAD_COND_INITIALIZER };

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* addr without its port, so that equal addresses compare equal. */
static void addr_only(struct sockaddr_storage *out, const struct sockaddr *a)
{
	memset(out, 0, sizeof(*out));
	if (a->sa_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)out;

		in->sin_family = AF_INET;
		in->sin_addr = ((const struct sockaddr_in *)a)->sin_addr;
	} else if (a->sa_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;

		in6->sin6_family = AF_INET6;
		in6->sin6_addr = ((const struct sockaddr_in6 *)a)->sin6_addr;
	} else {
		out->ss_family = a->sa_family;
	}
}

/* The live (not shut down) connections from addr; all of them when addr
 * is NULL. */
static int conns_from(const struct sockaddr_storage *addr)
{
	int i, n = 0;

	for (i = 0; i < HTTP_TABLE_MAX; i++)
		n += conns.c[i].used && !conns.c[i].shut &&
		     (!addr || !memcmp(&conns.c[i].addr, addr, sizeof(*addr)));
	return n;
}

/* A shutdown() that fails (other than on a socket the client has
 * already reset) leaves the connection bounded only by libmicrohttpd's
 * idle timeout: say so once rather than hold it silently. */
static void conn_shut(struct conn *c, int why)
{
	static bool told;

	conns.closed[why]++;
	if (shutdown(c->fd, SHUT_RDWR) && errno != ENOTCONN && !told) {
		tool_err("http: cannot close a connection past its deadline "
			 "(fd %d): %s; it stays open until it is idle for %d s",
			 c->fd, strerror(errno), HTTP_DEADLINE);
		told = true;
	}
	c->shut = true;
}

/*
 * Who gets in.  An address at HTTP_MAX_CONNS_PER_IP is refused.  When
 * HTTP_MAX_CONNS are live, the address holding the most gives up its
 * oldest connection to a newcomer holding fewer; a newcomer that holds
 * as many is refused.  Runs on libmicrohttpd's thread, as the notify
 * callbacks do.
 */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr,
				 socklen_t addrlen)
{
	struct sockaddr_storage a;
	struct conn *victim = NULL;
	int mine, most = 0, n, i;
	enum MHD_Result ok = MHD_YES;

	(void)cls;
	(void)addrlen;
	addr_only(&a, addr);
	pthread_mutex_lock(&conns.lock);
	mine = conns_from(&a);
	if (mine >= HTTP_MAX_CONNS_PER_IP) {
		ok = MHD_NO;
		conns.closed[EXP_HTTP_ADDRESS_LIMIT]++;
	} else if (conns_from(NULL) >= HTTP_MAX_CONNS) {
		for (i = 0; i < HTTP_TABLE_MAX; i++) {
			struct conn *c = &conns.c[i];

			if (!c->used || c->shut)
				continue;
			n = conns_from(&c->addr);
			if (n > most || (n == most && c->seq < victim->seq)) {
				most = n;
				victim = c;
			}
		}
		if (victim && most > mine) {
			conn_shut(victim, EXP_HTTP_DISPLACED);
		} else {
			ok = MHD_NO;
			conns.closed[EXP_HTTP_SERVER_LIMIT]++;
		}
	}
	pthread_mutex_unlock(&conns.lock);
	return ok;
}

static void on_connection(void *cls, struct MHD_Connection *mc,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	const union MHD_ConnectionInfo *info;
	struct sockaddr_storage a;
	struct conn *c = *socket_context;
	int i, fd = -1;
	bool have_addr = false;

	(void)cls;
	pthread_mutex_lock(&conns.lock);
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (c)
			c->used = false;
		*socket_context = NULL;
		goto out;
	}
	/* Each answer is copied out before the next call: libmicrohttpd
	 * 1.0 returns one union per connection, which the next call
	 * overwrites (0.9.75 pointed into the connection itself), so a
	 * kept pointer would read the address's bytes as the socket. */
	info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (info)
		fd = info->connect_fd;
	info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (info && info->client_addr) {
		addr_only(&a, info->client_addr);
		have_addr = true;
	}
	for (i = 0; i < HTTP_TABLE_MAX && conns.c[i].used; i++)
		;
	/* No room (cannot happen: libmicrohttpd holds at most
	 * HTTP_TABLE_MAX), or no socket: the connection cannot be timed,
	 * so it is not served. */
	if (i == HTTP_TABLE_MAX || fd < 0 || !have_addr) {
		if (fd >= 0)
			shutdown(fd, SHUT_RDWR);
		goto out;
	}
	c = &conns.c[i];
	c->used = true;
	c->shut = false;
	c->fd = fd;
	c->addr = a;
	c->seq = conns.seq++;
	c->deadline = now_ns() + HTTP_DEADLINE * 1000000000LL;
	*socket_context = c;
	pthread_cond_signal(&conns.wake);
out:
	pthread_mutex_unlock(&conns.lock);
}

/* An answer sent: a kept-alive connection's next request has its own
 * HTTP_DEADLINE. */
static void on_completed(void *cls, struct MHD_Connection *mc, void **req,
			 enum MHD_RequestTerminationCode toe)
{
	const union MHD_ConnectionInfo *ctx;
	struct conn *c;

	(void)cls;
	(void)req;
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
		return;
	ctx = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (!ctx || !ctx->socket_context)
		return;
	c = ctx->socket_context;
	pthread_mutex_lock(&conns.lock);
	if (c->used && !c->shut)
		c->deadline = now_ns() + HTTP_DEADLINE * 1000000000LL;
	pthread_mutex_unlock(&conns.lock);
}

/* Shut down every connection past its deadline, then sleep until the
 * next deadline (at most one HTTP_DEADLINE: a new connection wakes it). */
static void *reaper(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&conns.lock);
	while (!conns.stopping) {
		long long now = now_ns(), next = now + HTTP_DEADLINE * 1000000000LL;
		struct timespec ts;
		int i;

		for (i = 0; i < HTTP_TABLE_MAX; i++) {
			struct conn *c = &conns.c[i];

			if (!c->used || c->shut)
				continue;
			if (c->deadline <= now)
				conn_shut(c, EXP_HTTP_DEADLINE);
			else if (c->deadline < next)
				next = c->deadline;
		}
		/* The condition variable's clock is CLOCK_REALTIME: sleep
		 * for the monotonic time left. */
		clock_gettime(CLOCK_REALTIME, &ts);
		next -= now;
		ts.tv_sec += next / 1000000000LL;
		ts.tv_nsec += next % 1000000000LL;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&conns.wake, &conns.lock, &ts);
	}
	pthread_mutex_unlock(&conns.lock);
	return NULL;
}

void http_stats(unsigned long long *open, unsigned long long *closed)
{
	pthread_mutex_lock(&conns.lock);
	*open = conns_from(NULL);
	memcpy(closed, conns.closed, sizeof(conns.closed));
	pthread_mutex_unlock(&conns.lock);
}

struct MHD_Daemon *http_start(int fd, const struct exp_state *s,
			      bool verbose)
{
	static bool log_on;
	struct MHD_Daemon *d;
	struct rlimit rl;
	int err;

	log_on = verbose;
	/* Room for the connections held besides the probes' descriptors
	 * (a service manager's soft limit is often 1024). */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	err = pthread_create(&conns.reaper, NULL, reaper, NULL);
	if (err) {
		tool_err("cannot start the HTTP server: %s", strerror(err));
		return NULL;
	}
	conns.reaper_on = true;
	/* libmicrohttpd's idle timeout stays as a second bound; the per-
	 * address cap is the table's, which counts what it shut down
	 * apart. */
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
			     MHD_USE_ERROR_LOG, 0, on_accept, NULL, on_request,
			     (void *)s,
			     MHD_OPTION_LISTEN_SOCKET, fd,
			     MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_TABLE_MAX,
			     MHD_OPTION_CONNECTION_TIMEOUT,
			     (unsigned)HTTP_DEADLINE,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT,
			     (size_t)HTTP_CONN_MEMORY,
			     MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
			     MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
			     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &log_on,
			     MHD_OPTION_END);
	if (!d) {
		tool_err("cannot start the HTTP server (libmicrohttpd)");
		http_stop(NULL);
	}
	return d;
}

void http_stop(struct MHD_Daemon *d)
{
	if (conns.reaper_on) {
		pthread_mutex_lock(&conns.lock);
		conns.stopping = true;
		pthread_cond_signal(&conns.wake);
		pthread_mutex_unlock(&conns.lock);
		pthread_join(conns.reaper, NULL);
		conns.reaper_on = false;
	}
	if (d)
		MHD_stop_daemon(d);
}
