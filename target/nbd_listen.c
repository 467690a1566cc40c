// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_listen.c: the NBD listeners, on reactor 0.  They accept clients
 * (refusing those past NBD_MAX_CONNECTIONS or during shutdown), rest when
 * the process is out of descriptors instead of spinning on accept(), and
 * close connections that never finish the handshake.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "nbd.h"
#include "nbd_conn.h"
#include "reactor.h"

#define NBD_MAX_LISTENERS   8    /* -L and -U, with room to spare */
#define NBD_LISTEN_BACKLOG  128
#define NBD_ACCEPT_BATCH    16   /* accepts per listener callback */
#define NBD_ACCEPT_RETRY_NS 1000000000ull   /* a resting listener tries again */
#define NBD_WARN_NS         10000000000ull  /* between two accept warnings */

struct listener {
	int fd;
	bool tcp;
	struct reactor_fd *w;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static struct listener listeners[NBD_MAX_LISTENERS];
static unsigned nlisteners;
static unsigned handshake_limit_s = NBD_HANDSHAKE_LIMIT_DEFAULT;
static struct reactor_timer *sweep_timer;   /* reactor 0: the handshake limit */
static struct reactor_timer *retry_timer;   /* reactor 0: resting listeners */
static bool accept_resting;                 /* reactor 0 */
static atomic_bool accept_wanted;           /* a closed fd should wake them */
static struct log_limit accept_warn = LOG_LIMIT_INIT(NBD_WARN_NS);
static struct log_limit refuse_warn = LOG_LIMIT_INIT(NBD_WARN_NS);

static void listeners_wake(void *ctx);

static void format_peer(char *buf, size_t len, const struct sockaddr_storage *ss,
			const struct listener *l)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (!l->tcp) {
		snprintf(buf, len, "unix:%s", l->path);
	} else if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
}

/* A client is in: a connection, negotiating from now on. */
static void conn_accept(int fd, const struct sockaddr_storage *ss, const struct listener *l)
{
	char peer[NBD_PEER_MAX];
	struct nbd_conn *c;
	int one = 1;

	format_peer(peer, sizeof(peer), ss, l);
	c = nbd_conn_new(fd, peer);
	if (!c) {
		log_error("nbd: out of memory accepting a connection");
		close(fd);
		return;
	}
	if (l->tcp)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	nbd_neg_start(c);
}

/*
 * Out of descriptors (EMFILE, ENFILE) or kernel memory, accept() fails
 * at once for as long as a connection waits in the backlog, and a
 * level-triggered listener would spin on it.  So the listeners rest (no
 * events) until a connection closes or NBD_ACCEPT_RETRY_NS has passed
 * (a descriptor freed elsewhere, such as by an RPC client), and say so at
 * most once per NBD_WARN_NS.  Waiting clients stay in the backlog.
 */
static void listeners_rest(int err)
{
	struct rlimit rl = { 0, 0 };

	getrlimit(RLIMIT_NOFILE, &rl);
	log_limited(&accept_warn, LOG_WARN,
		    "nbd: accept: %s (%u connections open, soft fd limit %llu); new clients "
		    "wait until a connection closes", strerror(err), nbd_open_connections(),
		    (unsigned long long)rl.rlim_cur);
	if (accept_resting)
		return;
	for (unsigned i = 0; i < nlisteners; i++)
		reactor_fd_modify(listeners[i].w, 0);
	accept_resting = true;
	reactor_timer_set(retry_timer, NBD_ACCEPT_RETRY_NS, 0);
	atomic_store(&accept_wanted, true);
}

/* Reactor 0, as a message from a closing connection or the retry timer. */
static void listeners_wake(void *ctx)
{
	if (!accept_resting || nbd_shutting_down())
		return;
	atomic_store(&accept_wanted, false);
	accept_resting = false;
	reactor_timer_set(retry_timer, 0, 0);
	for (unsigned i = 0; i < nlisteners; i++)
		reactor_fd_modify(listeners[i].w, EPOLLIN);
}

static void listener_cb(void *ctx, uint32_t events)
{
	struct listener *l = ctx;

	/* accept() takes a descriptor before it looks at the backlog, so it
	 * fails with EMFILE on an empty backlog too: only a failure on the
	 * first try, when epoll said a client waits, means one does. */
	for (int i = 0; i < NBD_ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				if (i == 0)
					listeners_rest(errno);
			} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
				log_limited(&accept_warn, LOG_WARN, "nbd: accept: %s",
					    strerror(errno));
			}
			return;
		}
		if (nbd_shutting_down() ||
		    nbd_open_connections() >= NBD_MAX_CONNECTIONS) {
			if (nbd_shutting_down())
				log_limited(&refuse_warn, LOG_WARN,
					    "nbd: refusing a connection: shutting down");
			else
				log_limited(&refuse_warn, LOG_WARN,
					    "nbd: refusing a connection: %d open, the most allowed",
					    NBD_MAX_CONNECTIONS);
			close(fd);
			continue;
		}
		conn_accept(fd, &ss, l);
	}
}

/* --- the handshake limit (reactor 0) --------------------------------- */

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
	uint64_t now = now_ns();
	uint64_t limit = (uint64_t)handshake_limit_s * 1000000000ull;
	struct nbd_conn *c = nbd_thread_self()->conns;

	while (c) {
		struct nbd_conn *next = c->next;

		if ((c->state == CONN_NEGOTIATING || c->state == CONN_HANDOFF) &&
		    now - c->accepted_ns >= limit) {
			char why[64];

			snprintf(why, sizeof(why), "handshake not finished within %u s",
				 handshake_limit_s);
			nbd_conn_kill(c, why);
			nbd_conn_check(c);
		}
		c = next;
	}
}

static int handshake_sweep_start(void)
{
	if (!handshake_limit_s || sweep_timer)
		return 0;
	sweep_timer = reactor_timer_add(1000000000ull, 1000000000ull, handshake_sweep, NULL);
	return sweep_timer ? 0 : -errno;
}

static int listener_add(int fd, bool tcp, const char *path)
{
	struct listener *l = &listeners[nlisteners];
	int rc;

	if (listen(fd, NBD_LISTEN_BACKLOG) < 0)
		return -errno;
	rc = handshake_sweep_start();
	if (rc)
		return rc;
	/* Now: when it is needed, there may be no descriptor for a timerfd. */
	if (!retry_timer && !(retry_timer = reactor_timer_add(0, 0, listeners_wake, NULL)))
		return -errno;
	memset(l, 0, sizeof(*l));
	l->fd = fd;
	l->tcp = tcp;
	if (path)
		snprintf(l->path, sizeof(l->path), "%s", path);
	l->w = reactor_fd_add(fd, EPOLLIN, listener_cb, l);
	if (!l->w)
		return -errno;
	nlisteners++;
	return 0;
}

int nbd_listen_tcp(const char *host, uint16_t port, uint16_t *bound)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res, *ai;
	char hostbuf[256], portbuf[8];
	int fd = -1, err = -EADDRNOTAVAIL, rc;

	REACTOR_0_ONLY();
	nbd_proto_init();
	if (nlisteners == NBD_MAX_LISTENERS)
		return -ENOSPC;
	if (host && host[0] == '[') {   /* [v6addr] */
		size_t len = strlen(host);

		if (len < 2 || host[len - 1] != ']' || len - 2 >= sizeof(hostbuf))
			return -EINVAL;
		memcpy(hostbuf, host + 1, len - 2);
		hostbuf[len - 2] = '\0';
		host = hostbuf;
	}
	if (host && !*host)
		host = NULL;
	snprintf(portbuf, sizeof(portbuf), "%u", port);
	rc = getaddrinfo(host, portbuf, &hints, &res);
	if (rc) {
		log_error("nbd: cannot resolve %s: %s", host ? host : "*", gai_strerror(rc));
		return -EINVAL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int one = 1;

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return err;

	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	*bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	rc = listener_add(fd, true, NULL);
	if (rc) {
		close(fd);
		return rc;
	}
	return 0;
}

int nbd_listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	REACTOR_0_ONLY();
	nbd_proto_init();
	if (nlisteners == NBD_MAX_LISTENERS)
		return -ENOSPC;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if (lstat(path, &st) == 0) {
		/* Replace an old socket, never anything else. */
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		if (unlink(path) < 0)
			return -errno;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rc = listener_add(fd, false, path);
	if (rc) {
		close(fd);
		unlink(path);
		return rc;
	}
	return 0;
}

/* A descriptor was closed (any reactor): listeners resting for want of
 * one may take it. */
void nbd_listen_fd_freed(void)
{
	if (atomic_exchange(&accept_wanted, false) &&
	    send_msg(reactor_get(0), listeners_wake, NULL) != 0)
		log_warn("nbd: out of memory; listeners wait for their retry timer");
}

void nbd_listen_close_all(void)
{
	for (unsigned i = 0; i < nlisteners; i++) {
		struct listener *l = &listeners[i];

		reactor_fd_remove(l->w);
		close(l->fd);
		if (!l->tcp)
			unlink(l->path);
	}
	nlisteners = 0;
	reactor_timer_remove(sweep_timer);
	sweep_timer = NULL;
	reactor_timer_remove(retry_timer);
	retry_timer = NULL;
	accept_resting = false;
	atomic_store(&accept_wanted, false);
}
