// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_listen.c: the NBD listeners, on reactor 0, a room below nbd.c.  They
 * accept clients and hand each socket to nbd.c through the ops it gave
 * them, and rest when the process is out of descriptors instead of
 * spinning on accept().  They know nothing of connections.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdbool.h>
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
	const struct nbd_listen_ops *ops;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static struct listener listeners[NBD_MAX_LISTENERS];
static unsigned nlisteners;
static struct reactor_timer *retry_timer;   /* reactor 0: resting listeners */
static bool accept_resting;                 /* reactor 0 */
static atomic_bool accept_wanted;           /* a closed fd should wake them */
static struct log_limit accept_warn = LOG_LIMIT_INIT(NBD_WARN_NS);

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

/* A client is in: its socket is the listener's owner's now. */
static void client_accepted(int fd, const struct sockaddr_storage *ss, const struct listener *l)
{
	char peer[NBD_PEER_MAX];
	int one = 1;

	format_peer(peer, sizeof(peer), ss, l);
	if (l->tcp)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	l->ops->accepted(fd, peer);
}

/*
 * Out of descriptors (EMFILE, ENFILE) or kernel memory, accept() fails
 * at once for as long as a connection waits in the backlog, and a
 * level-triggered listener would spin on it.  So the listeners rest (no
 * events) until a connection closes or NBD_ACCEPT_RETRY_NS has passed
 * (a descriptor freed elsewhere, such as by an RPC client), and say so at
 * most once per NBD_WARN_NS.  Waiting clients stay in the backlog.
 */
static void listeners_rest(const struct listener *l, int err)
{
	struct rlimit rl = { 0, 0 };

	getrlimit(RLIMIT_NOFILE, &rl);
	log_limited(&accept_warn, LOG_WARN,
		    "nbd: accept: %s (%u connections open, soft fd limit %llu); new clients "
		    "wait until a connection closes", strerror(err), l->ops->open_connections(),
		    (unsigned long long)rl.rlim_cur);
	if (accept_resting)
		return;
	for (unsigned i = 0; i < nlisteners; i++)
		reactor_fd_modify(listeners[i].w, 0);
	accept_resting = true;
	reactor_timer_set(retry_timer, NBD_ACCEPT_RETRY_NS, 0);
	atomic_store(&accept_wanted, true);
}

/* Reactor 0, as a message from a closing connection or the retry timer.
 * After nbd_listen_close_all() nothing rests, so a late message does
 * nothing. */
static void listeners_wake(void *ctx)
{
	if (!accept_resting)
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
					listeners_rest(l, errno);
			} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
				log_limited(&accept_warn, LOG_WARN, "nbd: accept: %s",
					    strerror(errno));
			}
			return;
		}
		client_accepted(fd, &ss, l);
	}
}

static int listener_add(int fd, bool tcp, const char *path, const struct nbd_listen_ops *ops)
{
	struct listener *l = &listeners[nlisteners];

	if (listen(fd, NBD_LISTEN_BACKLOG) < 0)
		return -errno;
	/* Now: when it is needed, there may be no descriptor for a timerfd. */
	if (!retry_timer && !(retry_timer = reactor_timer_add(0, 0, listeners_wake, NULL)))
		return -errno;
	memset(l, 0, sizeof(*l));
	l->fd = fd;
	l->tcp = tcp;
	l->ops = ops;
	if (path)
		snprintf(l->path, sizeof(l->path), "%s", path);
	l->w = reactor_fd_add(fd, EPOLLIN, listener_cb, l);
	if (!l->w)
		return -errno;
	nlisteners++;
	return 0;
}

int nbd_listen_tcp(const char *host, uint16_t port, uint16_t *bound,
		   const struct nbd_listen_ops *ops)
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
	rc = listener_add(fd, true, NULL, ops);
	if (rc) {
		close(fd);
		return rc;
	}
	return 0;
}

int nbd_listen_unix(const char *path, const struct nbd_listen_ops *ops)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	REACTOR_0_ONLY();
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
	rc = listener_add(fd, false, path, ops);
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
	    reactor_send_msg(reactor_get(0), listeners_wake, NULL) != 0)
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
	reactor_timer_remove(retry_timer);
	retry_timer = NULL;
	accept_resting = false;
	atomic_store(&accept_wanted, false);
}
