// SPDX-License-Identifier: BSD-2-Clause
/*
 * jsonrpc.c: the JSON-RPC 2.0 server on a unix socket, on reactor 0.
 *
 * Each connection buffers at most JSON_MAX_REQUEST bytes of input.  Input
 * is parsed only when the connection has no request in progress, so the
 * requests of one connection run and reply in order.  The parse area is
 * shared by every connection: everything here runs on reactor 0, and a
 * handler decodes its params before it returns.
 *
 * Clients cannot lock each other out, and a client that works is never
 * closed to make room.  A client that sends part of a request and stops,
 * or does not read its last reply, is closed after the stall limit (-H).
 * When all JSONRPC_MAX_CONNS places are taken, the listener rests and new
 * clients wait in the listen backlog: a place frees when a client leaves,
 * or when a client waits there and a connection has waited on its client
 * (no request running) for JSONRPC_EVICT_IDLE_S; the one that has waited
 * longest is then closed.  A client that has just connected and not yet
 * written is thus never the one closed, as it was when the table made
 * room at once.  When the process runs out of descriptors, one held in
 * reserve lets one more client in, so an operator can still reach a
 * target whose NBD clients took every descriptor; beyond that the
 * listener rests until a client leaves, or a second has passed, rather
 * than spinning on accept() (fd_backoff.h, as the NBD listeners do).
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "blktgt_probes.h"
#include "fd_backoff.h"
#include "jsonrpc.h"
#include "log.h"
#include "reactor.h"
#include "rpc_bdev.h"
#include "rpc_debug.h"
#include "rpc_export.h"
#include "rpc_target.h"
#include "rpc_trace.h"
#include "rpc_workload.h"
#include "trace.h"

/* Symbols uprobe tools attach to: never inlined, never cloned. */
#if defined(__clang__)
#define UPROBE_SYMBOL __attribute__((noinline, used))
#else
#define UPROBE_SYMBOL __attribute__((noinline, noipa, used))
#endif

#define JSONRPC_MAX_OUTPUT (4 * JSON_MAX_RESPONSE) /* unread replies per client */
#define JSONRPC_MAX_LINGER (1024 * 1024) /* input discarded before a close */
#define JSONRPC_TICK_NS    1000000000ull /* stall sweep; eviction */
#define JSONRPC_WARN_NS    10000000000ull /* between two "all places taken" notes */

struct rpc_conn {
	int fd;
	struct reactor_fd *watch;
	char in[JSON_MAX_REQUEST];
	size_t inlen;
	char *out;
	size_t outlen, outoff;
	struct rpc_request *busy;       /* the request in progress */
	bool dispatching;               /* inside process_input's dispatch */
	bool eof;                       /* the client shut down its side */
	bool closing;                   /* close once the output is flushed */
	bool lingering;                 /* output done; discarding input until EOF */
	size_t discarded;
	bool dead;                      /* fd gone; free when busy finishes */
	uint64_t owed_since;            /* the stall clock (-H) runs since (0: not) */
	uint64_t idle_since;            /* when it connected or last finished a
					 * request (the eviction clock) */
	struct rpc_conn *next;
};

struct rpc_request {
	uint64_t id;                    /* probe id, unique */
	char method[JSONRPC_MAX_METHOD_LEN + 1];
	char json_id[JSONRPC_MAX_ID_LEN + 1];
	size_t json_id_len;
	bool notify;
	bool in_result;
	struct rpc_conn *conn;          /* NULL: an internal call */
	rpc_internal_done_fn internal_done;
	void *internal_ctx;
	struct json_writer w;
};

/* One parse area for everything on reactor 0. */
static struct json_val parse_vals[JSON_MAX_VALUES];
static char parse_scratch[JSON_MAX_REQUEST + 1];

static int listen_fd = -1;
static struct reactor_fd *listen_watch;
static char listen_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static struct rpc_conn *conns;
static unsigned nconns;
static uint64_t request_ids;
static unsigned stall_limit_s = JSONRPC_STALL_LIMIT_DEFAULT;
static struct reactor_timer *tick;
static bool listen_watched;             /* the listener's watch has EPOLLIN */
static struct fd_backoff backoff;       /* out of descriptors */
static struct log_limit full_note = LOG_LIMIT_INIT(JSONRPC_WARN_NS);

static void process_input(struct rpc_conn *c);
static void conn_update_events(struct rpc_conn *c);
static void listener_update(void);

uint64_t jsonrpc_request_count(void)
{
	return request_ids;
}

const char *rpc_method_name(const struct rpc_request *req)
{
	return req->method;
}

/* --- connections ----------------------------------------------------- */

static void conn_free(struct rpc_conn *c)
{
	free(c->out);
	free(c);
}

static void conn_free_msg(void *ctx)
{
	conn_free(ctx);
}

/* Close now, free later: callers up the stack may still look at c->dead. */
static void conn_close(struct rpc_conn *c)
{
	struct rpc_conn **pp;

	if (c->dead)
		return;
	reactor_fd_remove(c->watch);
	close(c->fd);
	c->fd = -1;
	c->dead = true;
	for (pp = &conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	nconns--;
	if (!c->busy && reactor_send_msg(reactor_self(), conn_free_msg, c) != 0)
		log_warn("rpc: out of memory; leaking a closed connection");
	/* else: freed when its request finishes (jsonrpc_request_finish). */
	/* A descriptor is free again: the reserve first, then new clients. */
	fd_backoff_fd_freed(&backoff);
	listener_update();
}

/* Run the stall clock while the connection waits on its client, for the
 * rest of a request or to read its last reply and leave; stop it while a
 * request runs or the client is idle between requests. */
static void conn_stall_clock(struct rpc_conn *c)
{
	if (!(c->closing || (!c->busy && c->inlen > 0)))
		c->owed_since = 0;
	else if (!c->owed_since)
		c->owed_since = reactor_now_ns();
}

static void conn_flush(struct rpc_conn *c)
{
	while (c->outoff < c->outlen) {
		ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			conn_close(c);  /* the client went away */
			return;
		}
		c->outoff += (size_t)n;
	}
	if (c->outoff == c->outlen) {
		c->outoff = c->outlen = 0;
		if (c->eof && !c->busy && (c->inlen == 0 || c->closing)) {
			conn_close(c);
			return;
		}
		if (c->closing && !c->lingering) {
			/* Closing a socket with unread input resets it, and the
			 * client could lose the error reply it has not read yet:
			 * end our side, then read until the client ends its own. */
			shutdown(c->fd, SHUT_WR);
			c->lingering = true;
		}
	}
	conn_update_events(c);
}

static void conn_queue(struct rpc_conn *c, const char *text, size_t len)
{
	char *out;

	if (c->dead)
		return;
	if (c->outlen + len > JSONRPC_MAX_OUTPUT) {
		log_warn("rpc: client is not reading its replies; closing it");
		conn_close(c);
		return;
	}
	out = realloc(c->out, c->outlen + len + 1);
	if (!out) {
		conn_close(c);
		return;
	}
	c->out = out;
	memcpy(c->out + c->outlen, text, len);
	c->outlen += len;
	c->out[c->outlen++] = '\n';
	conn_flush(c);
}

static void conn_update_events(struct rpc_conn *c)
{
	uint32_t ev = 0;

	if (c->dead)
		return;
	/* Read while there is room and nothing stops us from parsing. */
	if (c->lingering || (!c->eof && !c->closing && c->inlen < sizeof(c->in)))
		ev |= EPOLLIN;
	if (c->outlen > c->outoff)
		ev |= EPOLLOUT;
	reactor_fd_modify(c->watch, ev);
}

/* --- replies ----------------------------------------------------------- */

static void envelope_begin(struct json_writer *w, const char *id, size_t id_len)
{
	jw_init(w, JSON_MAX_RESPONSE);
	jw_obj_begin(w);
	jw_kv_str(w, "jsonrpc", "2.0");
	jw_key(w, "id");
	jw_raw(w, id, id_len);
}

/* The error reply to request id (JSON text) as a malloc'd text of *len
 * bytes; NULL out of memory. */
static char *error_reply(const char *id, size_t id_len, int code, const char *msg,
			 size_t *len)
{
	struct json_writer w;

	envelope_begin(&w, id, id_len);
	jw_key(&w, "error");
	jw_obj_begin(&w);
	jw_kv_i64(&w, "code", code);
	jw_kv_str(&w, "message", msg);
	jw_obj_end(&w);
	jw_obj_end(&w);
	return jw_take(&w, len);
}

/* An error for a request that never became an rpc_request. */
static void send_bare_error(struct rpc_conn *c, const char *id, size_t id_len, int code,
			    const char *msg)
{
	size_t len;
	char *text = error_reply(id, id_len, code, msg, &len);

	if (text)
		conn_queue(c, text, len);
	free(text);
}

UPROBE_SYMBOL
void jsonrpc_request_finish(struct rpc_request *req, int code, const char *text, size_t len,
			    const char *errmsg)
{
	struct rpc_conn *c = req->conn;

	BLKTGT_RPC_DONE_EV(0, req->id, req->method, code);
	if (code && code != JSONRPC_METHOD_NOT_FOUND && code != JSONRPC_INVALID_PARAMS)
		log_info("rpc %s: error %d: %s", req->method, code, errmsg ? errmsg : "");
	if (!c) {
		req->internal_done(req->internal_ctx, code, code ? errmsg : text);
	} else {
		if (!req->notify && !c->dead)
			conn_queue(c, text, len);
		c->busy = NULL;
		c->idle_since = reactor_now_ns();
		if (c->dead) {
			/* Closed while busy: nobody else will free it.  Later, since
			 * process_input may be up the stack. */
			if (reactor_send_msg(reactor_self(), conn_free_msg, c) != 0)
				log_warn("rpc: out of memory; leaking a closed connection");
		} else if (!c->dispatching)
			process_input(c);
	}
	jw_free(&req->w);
	free(req);
}

struct json_writer *rpc_result_begin(struct rpc_request *req)
{
	if (req->conn) {
		envelope_begin(&req->w, req->json_id, req->json_id_len);
		jw_key(&req->w, "result");
	} else {
		jw_init(&req->w, JSON_MAX_RESPONSE);
	}
	req->in_result = true;
	return &req->w;
}

void rpc_result_end(struct rpc_request *req)
{
	char *text;
	size_t len;

	if (req->conn)
		jw_obj_end(&req->w);
	if (req->w.err) {
		jw_free(&req->w);
		rpc_error(req, JSONRPC_INTERNAL_ERROR, "result too large (limit %d bytes)",
			  JSON_MAX_RESPONSE);
		return;
	}
	text = jw_take(&req->w, &len);
	if (!text) {
		rpc_error(req, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	jsonrpc_request_finish(req, 0, text, len, NULL);
	free(text);
}

void rpc_result_bool(struct rpc_request *req, bool v)
{
	jw_bool(rpc_result_begin(req), v);
	rpc_result_end(req);
}

void rpc_result_str(struct rpc_request *req, const char *s)
{
	jw_str(rpc_result_begin(req), s);
	rpc_result_end(req);
}

void rpc_error(struct rpc_request *req, int code, const char *fmt, ...)
{
	char msg[JSONRPC_MAX_ERROR_MSG];
	char *text = NULL;
	size_t len = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (req->conn)
		text = error_reply(req->json_id, req->json_id_len, code, msg, &len);
	jsonrpc_request_finish(req, code, text ? text : "", len, msg);
	free(text);
}

int rpc_params(struct rpc_request *req, const struct json_val *params,
	       const struct rpc_param *spec, size_t n, void *out, uint32_t *present)
{
	char err[JSONRPC_MAX_ERROR_MSG];
	uint32_t dummy;
	int rc = jsonrpc_decode_params(params, spec, n, out, present ? present : &dummy,
				       err, sizeof(err));

	if (rc)
		rpc_error(req, rc, "%s", err);
	return rc;
}

/* --- dispatch ----------------------------------------------------------- */

static const struct rpc_method *const method_tables[] = {
	rpc_bdev_methods, rpc_export_methods, rpc_workload_methods, rpc_target_methods,
	rpc_trace_methods,
};

static const struct rpc_method *find_in(const struct rpc_method *m, const char *name)
{
	for (; m->name; m++)
		if (strcmp(m->name, name) == 0)
			return m;
	return NULL;
}

static const struct rpc_method *find_method(const char *name)
{
	static int debug = -1;
	const struct rpc_method *m;

	for (size_t t = 0; t < sizeof(method_tables) / sizeof(method_tables[0]); t++)
		if ((m = find_in(method_tables[t], name)) != NULL)
			return m;
	/* Test-only methods, for a target started with BLKTGT_DEBUG_RPC=1. */
	if (debug < 0) {
		const char *v = getenv("BLKTGT_DEBUG_RPC");

		debug = v && strcmp(v, "1") == 0;
	}
	return debug ? find_in(rpc_debug_methods, name) : NULL;
}

UPROBE_SYMBOL
int jsonrpc_dispatch(struct rpc_request *req, const struct json_val *params)
{
	char asked[sizeof(req->method)];
	const struct rpc_method *m;

	req->id = ++request_ids;
	m = find_method(req->method);
	if (!m) {
		/* Tools key their maps and labels by this name, and a client
		 * can send any: the probes and the ring see one name for every
		 * method blktgt does not have, so a key's count is bounded by
		 * the method tables.  The reply still names what was asked. */
		memcpy(asked, req->method, sizeof(asked));
		snprintf(req->method, sizeof(req->method), "%s", JSONRPC_UNKNOWN_METHOD);
	}
	BLKTGT_RPC_REQUEST_EV(0, req->id, req->method);
	if (!m) {
		rpc_error(req, JSONRPC_METHOD_NOT_FOUND, "method not found: %s", asked);
		return JSONRPC_METHOD_NOT_FOUND;
	}
	m->handler(req, params);
	return 0;
}

void jsonrpc_call(const char *method, const struct json_val *params,
		  rpc_internal_done_fn done, void *ctx)
{
	struct rpc_request *req = calloc(1, sizeof(*req));

	if (!req) {
		done(ctx, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	snprintf(req->method, sizeof(req->method), "%s", method);
	req->internal_done = done;
	req->internal_ctx = ctx;
	jsonrpc_dispatch(req, params);
}

/* A request is used up: what follows is the next one, timed anew. */
static void consume(struct rpc_conn *c, size_t used)
{
	memmove(c->in, c->in + used, c->inlen - used);
	c->inlen -= used;
	c->owed_since = 0;
}

/* Parse and run what is buffered, one request at a time. */
static void process_input(struct rpc_conn *c)
{
	char err[JSONRPC_MAX_ERROR_MSG];

	while (!c->dead && !c->busy && !c->closing) {
		struct jsonrpc_msg msg;
		struct rpc_request *req;
		size_t skip = 0, used = 0;
		int rc;

		while (skip < c->inlen && (c->in[skip] == ' ' || c->in[skip] == '\n' ||
					   c->in[skip] == '\r' || c->in[skip] == '\t'))
			skip++;
		if (skip) {
			memmove(c->in, c->in + skip, c->inlen - skip);
			c->inlen -= skip;
		}
		if (c->inlen == 0)
			break;
		rc = jsonrpc_parse_request(c->in, c->inlen, parse_vals, JSON_MAX_VALUES,
					   parse_scratch, &msg, &used, err, sizeof(err));
		if (rc == JSONRPC_MORE) {
			if (c->inlen == sizeof(c->in)) {
				snprintf(err, sizeof(err),
					 "invalid request: larger than %d bytes", JSON_MAX_REQUEST);
				send_bare_error(c, "null", 4, JSONRPC_INVALID_REQUEST, err);
				c->closing = true;
			} else if (c->eof) {
				send_bare_error(c, "null", 4, JSONRPC_PARSE_ERROR,
						"parse error: unexpected end of input");
				c->closing = true;
			}
			break;
		}
		if (rc == JSONRPC_PARSE_ERROR) {
			send_bare_error(c, "null", 4, rc, err);
			c->closing = true;
			break;
		}
		if (rc < 0) {
			consume(c, used);
			/* Invalid requests are answered even without an id. */
			send_bare_error(c, msg.id, msg.id_len, rc, err);
			continue;
		}
		req = calloc(1, sizeof(*req));
		if (!req) {
			send_bare_error(c, msg.id, msg.id_len, JSONRPC_INTERNAL_ERROR, "out of memory");
			continue;
		}
		memcpy(req->method, msg.method->str, msg.method->len + 1);
		memcpy(req->json_id, msg.id, msg.id_len + 1);
		req->json_id_len = msg.id_len;
		req->notify = !msg.has_id;
		req->conn = c;
		c->busy = req;
		c->dispatching = true;
		jsonrpc_dispatch(req, msg.params);
		c->dispatching = false;
		/* Only now: the parsed values point into c->in. */
		if (!c->dead)
			consume(c, used);
	}
	if (!c->dead) {
		conn_stall_clock(c);
		if (c->closing || (c->eof && !c->busy && c->inlen == 0))
			conn_flush(c);
		else
			conn_update_events(c);
	}
}

static void conn_event(void *ctx, uint32_t events)
{
	struct rpc_conn *c = ctx;

	if (events & EPOLLOUT) {
		conn_flush(c);
		if (c->dead)
			return;
	}
	if (c->lingering) {
		char sink[4096];
		ssize_t n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);

		if (n > 0)
			c->discarded += (size_t)n;
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
		    c->discarded > JSONRPC_MAX_LINGER)
			conn_close(c);
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		if (c->inlen < sizeof(c->in) && !c->eof) {
			ssize_t n = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen,
					 MSG_DONTWAIT);

			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				conn_close(c);
				return;
			}
			if (n == 0)
				c->eof = true;
			if (n > 0)
				c->inlen += (size_t)n;
		} else if (events & (EPOLLHUP | EPOLLERR)) {
			c->eof = true;
		}
		process_input(c);
	}
}

/* Watch the listener unless the table is full (new clients wait in its
 * backlog, and the tick runs meanwhile to look for one waiting) or the
 * back-off rests. */
static void listener_update(void)
{
	bool full = nconns >= JSONRPC_MAX_CONNS;
	bool want = listen_fd >= 0 && !full && !fd_backoff_resting(&backoff);

	if (want == listen_watched || reactor_fd_modify(listen_watch, want ? EPOLLIN : 0) != 0)
		return;
	listen_watched = want;
	if (full && !stall_limit_s)
		reactor_timer_set(tick, JSONRPC_TICK_NS, 0);
}

static void backoff_rest(void *ctx, bool resting)
{
	listener_update();
}

static unsigned backoff_clients(void *ctx)
{
	return nconns;
}

static const struct fd_backoff_ops backoff_ops = {
	.rest = backoff_rest,
	.clients = backoff_clients,
};

static const struct fd_backoff_conf backoff_conf = {
	.who = "rpc",
	.clients = "clients connected",
	.until = "a descriptor is free",
	.reserve = true,
	.ops = &backoff_ops,
};

/* A client waits in the backlog (the listener is not watched meanwhile). */
static bool client_waiting(void)
{
	struct pollfd p = { .fd = listen_fd, .events = POLLIN };

	return listen_fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* The connection that has waited on its client longest, if that is at
 * least JSONRPC_EVICT_IDLE_S; NULL when there is none.  A connection
 * running a request is never one. */
static struct rpc_conn *stalled_longest(uint64_t now)
{
	struct rpc_conn *best = NULL;

	for (struct rpc_conn *c = conns; c; c = c->next)
		if (!c->busy && (!best || c->idle_since < best->idle_since))
			best = c;
	if (best && now - best->idle_since < JSONRPC_EVICT_IDLE_S * 1000000000ull)
		return NULL;
	return best;
}

/* The table is full and a client waits: give it the place of a stalled
 * connection, if there is one.  True when a place is free. */
static bool conn_evict_stalled(void)
{
	uint64_t now = reactor_now_ns();
	struct rpc_conn *victim = stalled_longest(now);

	if (!victim)
		return false;
	log_info("rpc: %d clients connected and one waiting; closing fd %d, which has "
		 "waited on its client %llu s (%zu bytes of a request held, %s), to let "
		 "it in", JSONRPC_MAX_CONNS, victim->fd,
		 (unsigned long long)((now - victim->idle_since) / 1000000000ull),
		 victim->inlen, victim->closing ? "its last reply unread" :
		 victim->inlen ? "the rest not sent" : "nothing sent");
	conn_close(victim);
	return true;
}

/* Before each accept.  Full: a client stays in the backlog, unless a
 * stalled connection gives up its place to it now.  (Only for a client
 * that is there: after the first pass, epoll has not said so.) */
static bool conn_room(void *ctx)
{
	if (nconns < JSONRPC_MAX_CONNS || (client_waiting() && conn_evict_stalled()))
		return true;
	log_limited(&full_note, LOG_INFO,
		    "rpc: all %d places taken; new clients wait in the listen "
		    "backlog until one is free", JSONRPC_MAX_CONNS);
	listener_update();
	return false;
}

static void conn_accepted(void *ctx, int fd, const struct sockaddr_storage *ss)
{
	struct rpc_conn *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		fd_backoff_fd_freed(&backoff);
		return;
	}
	c->fd = fd;
	c->idle_since = reactor_now_ns();
	c->watch = reactor_fd_add(fd, EPOLLIN, conn_event, c);
	if (!c->watch) {
		close(fd);
		free(c);
		fd_backoff_fd_freed(&backoff);
		return;
	}
	c->next = conns;
	conns = c;
	nconns++;
}

static const struct fd_backoff_take take = {
	.room = conn_room,
	.accepted = conn_accepted,
};

static void accept_event(void *ctx, uint32_t events)
{
	fd_backoff_accept_all(&backoff, listen_fd, &take, NULL);
}

/* Once a second while the stall limit is on, or while the table is full. */
static void tick_event(void *ctx)
{
	uint64_t now = reactor_now_ns();
	uint64_t limit = (uint64_t)stall_limit_s * 1000000000ull;
	struct rpc_conn *c = conns;

	while (c && stall_limit_s) {
		struct rpc_conn *next = c->next;

		if (c->owed_since && now - c->owed_since >= limit) {
			log_info("rpc: closing fd %d: %s within %u s (%zu bytes of a request held)",
				 c->fd, c->closing ? "its last reply was not read" :
				 "the rest of its request did not come", stall_limit_s, c->inlen);
			conn_close(c);
		}
		c = next;
	}
	if (nconns >= JSONRPC_MAX_CONNS && client_waiting())
		conn_evict_stalled();
	fd_backoff_reserve(&backoff);
	listener_update();
	if (!listen_watched && nconns >= JSONRPC_MAX_CONNS && !stall_limit_s)
		reactor_timer_set(tick, JSONRPC_TICK_NS, 0);
}

void jsonrpc_set_stall_limit(unsigned seconds)
{
	stall_limit_s = seconds;
}

int jsonrpc_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A socket file left by an earlier run would make bind fail. */
	if (unlink(path) < 0 && errno != ENOENT) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, JSONRPC_BACKLOG) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	tick = reactor_timer_add(stall_limit_s ? JSONRPC_TICK_NS : 0,
				 stall_limit_s ? JSONRPC_TICK_NS : 0, tick_event, NULL);
	listen_watch = tick ? reactor_fd_add(fd, EPOLLIN, accept_event, NULL) : NULL;
	rc = listen_watch ? fd_backoff_init(&backoff, &backoff_conf) : -errno;
	if (rc) {
		reactor_fd_remove(listen_watch);
		listen_watch = NULL;
		reactor_timer_remove(tick);
		tick = NULL;
		close(fd);
		unlink(path);
		return rc;
	}
	listen_fd = fd;
	listen_watched = true;
	strcpy(listen_path, path);
	return 0;
}

void jsonrpc_stop(void)
{
	if (listen_fd >= 0) {
		reactor_fd_remove(listen_watch);
		close(listen_fd);
		unlink(listen_path);
		listen_fd = -1;
	}
	listen_watched = false;
	reactor_timer_remove(tick);
	tick = NULL;
	fd_backoff_fini(&backoff);
	while (conns) {
		struct rpc_conn *c = conns;

		/* A reply already queued (target_shutdown's) gets one last try. */
		if (c->outlen > c->outoff)
			conn_flush(c);
		if (conns == c)
			conn_close(c);
	}
}
