// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_listen.c: the NBD listeners, on reactor 0, a room below nbd.c.  They
 * accept clients and hand each socket to nbd.c through the ops it gave
 * them, and rest when the process is out of descriptors instead of
 * spinning on accept() (fd_backoff.h).  They know nothing of connections.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd_backoff.h"
#include "log.h"
#include "nbd_listen.h"
#include "reactor.h"

#define NBD_MAX_LISTENERS   8    /* -L and -U, with room to spare */
#define NBD_LISTEN_BACKLOG  128
#define NBD_ACCEPT_BATCH    16   /* accepts per listener callback */

struct listener {
	int fd;
	bool tcp;
	struct reactor_fd *w;
	const struct nbd_listen_ops *ops;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static struct listener listeners[NBD_MAX_LISTENERS];
static unsigned nlisteners;
static struct fd_backoff backoff;           /* all the listeners rest together */

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

/* A client is in on listener ctx: its socket is the listener's owner's now. */
static void client_accepted(void *ctx, int fd, const struct sockaddr_storage *ss)
{
	const struct listener *l = ctx;
	char peer[NBD_PEER_MAX];
	int one = 1;

	format_peer(peer, sizeof(peer), ss, l);
	if (l->tcp)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	l->ops->accepted(fd, peer);
}

/* The back-off's: stop watching every listener, or watch them again. */
static void listeners_rest(void *ctx, bool resting)
{
	for (unsigned i = 0; i < nlisteners; i++)
		reactor_fd_modify(listeners[i].w, resting ? 0 : EPOLLIN);
}

/* Only while resting, so there is a listener; nbd.c gives them all the
 * same ops. */
static unsigned listeners_clients(void *ctx)
{
	return listeners[0].ops->open_connections();
}

static const struct fd_backoff_ops backoff_ops = {
	.rest = listeners_rest,
	.clients = listeners_clients,
};

static const struct fd_backoff_conf backoff_conf = {
	.who = "nbd",
	.clients = "connections open",
	.until = "a connection closes",
	.ops = &backoff_ops,
};

static const struct fd_backoff_take take = {
	.accepted = client_accepted,
	.batch = NBD_ACCEPT_BATCH,
};

static void listener_cb(void *ctx, uint32_t events)
{
	struct listener *l = ctx;

	fd_backoff_accept_all(&backoff, l->fd, &take, l);
}

static int listener_add(int fd, bool tcp, const char *path, const struct nbd_listen_ops *ops)
{
	struct listener *l = &listeners[nlisteners];
	int rc;

	if (listen(fd, NBD_LISTEN_BACKLOG) < 0)
		return -errno;
	rc = fd_backoff_init(&backoff, &backoff_conf);
	if (rc)
		return rc;
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
	fd_backoff_fd_freed(&backoff);
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
	fd_backoff_fini(&backoff);
}
