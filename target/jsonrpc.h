// SPDX-License-Identifier: BSD-2-Clause
/*
 * jsonrpc.h: the JSON-RPC 2.0 control plane.
 *
 * The server listens on a unix socket and runs on reactor 0, the thread
 * that owns the bdev and export registries, so method handlers call them
 * directly.  A request is parsed whole (json.h bounds it) before it is
 * dispatched; a connection runs its requests one at a time, in order, so
 * a long workload_run holds only its own connection.
 *
 * Error codes: -32700 parse error, for text that is not JSON or not UTF-8
 * (the connection is then closed: a byte stream has no point to
 * resynchronise at), -32600 invalid request,
 * -32601 unknown method, -32602 invalid params (the message names the
 * param), and a negative errno for a method that failed (e.g. -16 EBUSY).
 */
#ifndef BLKTGT_JSONRPC_H
#define BLKTGT_JSONRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "jsonrpc_parse.h"     /* the error codes, struct rpc_param */

/* The method name the rpc probes and the trace ring give a request for a
 * method blktgt does not have (the client's text comes from outside and
 * would make the keys of per-method tools unbounded). */
#define JSONRPC_UNKNOWN_METHOD "unknown"

/* --- the server (reactor 0) --------------------------------------------- */

struct rpc_request;
typedef void (*rpc_handler_fn)(struct rpc_request *req, const struct json_val *params);

struct rpc_method {
	const char *name;
	rpc_handler_fn handler;
};

/* Close a client that has sent part of a request and not the rest, or
 * that was sent its last reply and has neither read it nor left, this
 * many seconds later (0: never).  An idle client, between requests, is
 * not timed by it; any connection not running a request may give its
 * place to a waiting client once the table is full (JSONRPC_EVICT_IDLE_S,
 * json.h).  Before jsonrpc_listen(). */
void jsonrpc_set_stall_limit(unsigned seconds);

int jsonrpc_listen(const char *path);
/* Close the listener and every connection (replies still pending are
 * dropped; their requests finish without a client), remove the socket. */
void jsonrpc_stop(void);
uint64_t jsonrpc_request_count(void);

/* A handler finishes its request exactly once, now or later (on reactor 0),
 * with one of: */
/* the result value: write exactly one JSON value to the writer, then end */
struct json_writer *rpc_result_begin(struct rpc_request *req);
void rpc_result_end(struct rpc_request *req);
void rpc_result_bool(struct rpc_request *req, bool v);
void rpc_result_str(struct rpc_request *req, const char *s);
__attribute__((format(printf, 3, 4)))
void rpc_error(struct rpc_request *req, int code, const char *fmt, ...);
/* Decode params by spec; on failure the request is finished with -32602
 * and the return is non-zero: the handler just returns. */
int rpc_params(struct rpc_request *req, const struct json_val *params,
	       const struct rpc_param *spec, size_t n, void *out, uint32_t *present);
const char *rpc_method_name(const struct rpc_request *req);

/* Real symbols for uprobe tools (noinline, global).  jsonrpc_dispatch()
 * starts a parsed request: it returns 0 once the method has started (its
 * reply may come later) or -32601; jsonrpc_request_finish() ends one, with
 * code 0 or the error code as its second argument, text/len the reply. */
int jsonrpc_dispatch(struct rpc_request *req, const struct json_val *params);
void jsonrpc_request_finish(struct rpc_request *req, int code, const char *text, size_t len,
			    const char *errmsg);

/* Run one call that did not come from a socket (the -c config file).
 * done(ctx, code, text) runs on reactor 0 when it finishes: code 0 and the
 * result as JSON text, or the error code and message. */
typedef void (*rpc_internal_done_fn)(void *ctx, int code, const char *text);
void jsonrpc_call(const char *method, const struct json_val *params,
		  rpc_internal_done_fn done, void *ctx);

#endif
