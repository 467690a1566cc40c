// SPDX-License-Identifier: BSD-2-Clause
/*
 * fd_backoff.c: a listener's rest when the process is out of descriptors
 * (see fd_backoff.h), for the NBD listeners and the JSON-RPC server.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fd_backoff.h"
#include "reactor.h"

static void backoff_wake(void *ctx);

void fd_backoff_reserve(struct fd_backoff *b)
{
	/* Set up (b->retry) and not yet undone by fini. */
	if (b->retry && b->conf->reserve && b->reserve_fd < 0)
		b->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

int fd_backoff_init(struct fd_backoff *b, const struct fd_backoff_conf *conf)
{
	REACTOR_0_ONLY();
	if (b->retry)
		return 0;
	b->retry = reactor_timer_add(0, 0, backoff_wake, b);
	if (!b->retry)
		return -errno;
	b->conf = conf;
	b->resting = false;
	atomic_store(&b->wanted, false);
	b->reserve_fd = -1;
	b->warn = (struct log_limit)LOG_LIMIT_INIT(FD_BACKOFF_WARN_NS);
	fd_backoff_reserve(b);
	return 0;
}

void fd_backoff_fini(struct fd_backoff *b)
{
	reactor_timer_remove(b->retry);
	b->retry = NULL;
	b->resting = false;
	atomic_store(&b->wanted, false);
	if (b->reserve_fd >= 0)
		close(b->reserve_fd);
	b->reserve_fd = -1;
}

bool fd_backoff_resting(const struct fd_backoff *b)
{
	return b->resting;
}

static void backoff_rest(struct fd_backoff *b, int err)
{
	const struct fd_backoff_conf *conf = b->conf;
	struct rlimit rl = { 0, 0 };

	getrlimit(RLIMIT_NOFILE, &rl);
	log_limited(&b->warn, LOG_WARN,
		    "%s: accept: %s (%u %s, soft fd limit %llu); new clients wait until %s",
		    conf->who, strerror(err), conf->ops->clients(conf->ctx), conf->clients,
		    (unsigned long long)rl.rlim_cur, conf->until);
	if (b->resting)
		return;
	b->resting = true;
	conf->ops->rest(conf->ctx, true);
	reactor_timer_set(b->retry, FD_BACKOFF_RETRY_NS, 0);
	atomic_store(&b->wanted, true);
}

/* Reactor 0, as a message after a descriptor was freed, or the retry
 * timer.  After fd_backoff_fini() nothing rests, so a late message does
 * nothing. */
static void backoff_wake(void *ctx)
{
	struct fd_backoff *b = ctx;

	if (!b->resting)
		return;
	atomic_store(&b->wanted, false);
	b->resting = false;
	reactor_timer_set(b->retry, 0, 0);
	/* The reserve first, then new clients. */
	fd_backoff_reserve(b);
	b->conf->ops->rest(b->conf->ctx, false);
}

void fd_backoff_fd_freed(struct fd_backoff *b)
{
	if (reactor_self() && reactor_self() == reactor_get(0))
		fd_backoff_reserve(b);
	if (atomic_exchange(&b->wanted, false) &&
	    reactor_send_msg(reactor_get(0), backoff_wake, b) != 0)
		log_warn("%s: out of memory; listeners wait for their retry timer", b->conf->who);
}

static bool out_of_resources(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

int fd_backoff_accept(struct fd_backoff *b, int lfd, struct sockaddr *sa, socklen_t *sl,
		      bool first)
{
	socklen_t len = sl ? *sl : 0;

	for (;; first = false) {
		int fd, err;

		if (sl)
			*sl = len;
		fd = accept4(lfd, sa, sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0)
			return fd;
		err = errno;
		if (err == EINTR || err == ECONNABORTED)
			continue;
		if (err == EAGAIN || err == EWOULDBLOCK)
			return -1;
		if (!out_of_resources(err)) {
			log_limited(&b->warn, LOG_WARN, "%s: accept: %s", b->conf->who,
				    strerror(err));
			return -1;
		}
		if (!first)             /* EMFILE on an empty backlog too */
			return -1;
		if ((err == EMFILE || err == ENFILE) && b->reserve_fd >= 0) {
			close(b->reserve_fd);   /* for this client */
			b->reserve_fd = -1;
			continue;
		}
		backoff_rest(b, err);
		return -1;
	}
}

void fd_backoff_accept_all(struct fd_backoff *b, int lfd, const struct fd_backoff_take *t,
			   void *ctx)
{
	for (unsigned i = 0; !t->batch || i < t->batch; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd;

		if (t->room && !t->room(ctx))
			return;
		fd = fd_backoff_accept(b, lfd, (struct sockaddr *)&ss, &sl, i == 0);
		if (fd < 0)
			return;
		t->accepted(ctx, fd, &ss);
	}
}
