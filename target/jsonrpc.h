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

#define JSONRPC_PARSE_ERROR      -32700
#define JSONRPC_INVALID_REQUEST  -32600
#define JSONRPC_METHOD_NOT_FOUND -32601
#define JSONRPC_INVALID_PARAMS   -32602
#define JSONRPC_INTERNAL_ERROR   -32603

/* The method name the rpc probes and the trace ring give a request for a
 * method blktgt does not have (the client's text comes from outside and
 * would make the keys of per-method tools unbounded). */
#define JSONRPC_UNKNOWN_METHOD "unknown"

/* --- parsing (pure functions: no I/O, no globals; fuzzed) --------------- */

#define JSONRPC_MORE 1          /* jsonrpc_parse_request: read more input */

struct jsonrpc_msg {
	const struct json_val *method;  /* a string */
	const struct json_val *params;  /* NULL when absent */
	bool has_id;                    /* false: a notification */
	char id[JSONRPC_MAX_ID_LEN + 1];/* the id as JSON text ("null" if none) */
	size_t id_len;
};

/* Parse one request from buf[0..len) into vals/scratch (scratch holds at
 * least len + 1 bytes).  Returns 0 (request in *msg, *consumed bytes
 * used), JSONRPC_MORE, or a negative JSON-RPC error code with a message in
 * err; for -32600 the id is in *msg when it could be read, and *consumed
 * is set so the next request can be read. */
int jsonrpc_parse_request(const char *buf, size_t len, struct json_val *vals, size_t max_vals,
			  char *scratch, struct jsonrpc_msg *msg, size_t *consumed,
			  char *err, size_t errlen);

/* Table-driven params: each entry names a member of params and where its
 * decoded value goes in the caller's struct. */
enum rpc_param_type {
	RPC_PARAM_STRING,       /* char[size], no NUL inside, 1..size-1 bytes */
	RPC_PARAM_U64,          /* uint64_t in [min, max] */
	RPC_PARAM_BOOL,         /* bool */
};

struct rpc_param {
	const char *name;
	enum rpc_param_type type;
	bool required;
	size_t offset;          /* offsetof(struct ..., field) */
	size_t size;            /* STRING: sizeof the char array */
	uint64_t min, max;      /* U64 */
};

#define RPC_PARAMS_MAX 16       /* entries in one spec (the presence mask) */

/* Decode params (an object, or NULL when absent) by spec.  Unknown and
 * duplicate members, a missing required member, a wrong type or a value
 * out of range fail with -32602 and a message naming the param.  *present
 * gets bit i set when spec[i] was given.  Returns 0 or -32602. */
int jsonrpc_decode_params(const struct json_val *params, const struct rpc_param *spec,
			  size_t n, void *out, uint32_t *present, char *err, size_t errlen);

/* --- the server (reactor 0) --------------------------------------------- */

struct rpc_request;
typedef void (*rpc_handler_fn)(struct rpc_request *req, const struct json_val *params);

struct rpc_method {
	const char *name;
	rpc_handler_fn handler;
};

/* The method tables, each ending with { NULL, NULL } (rpc_*.c). */
extern const struct rpc_method rpc_bdev_methods[];
extern const struct rpc_method rpc_export_methods[];
extern const struct rpc_method rpc_workload_methods[];
extern const struct rpc_method rpc_target_methods[];
extern const struct rpc_method rpc_trace_methods[];
/* Test-only methods (rpc_debug.c), found only with BLKTGT_DEBUG_RPC=1. */
extern const struct rpc_method rpc_debug_methods[];

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
