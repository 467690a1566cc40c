// SPDX-License-Identifier: BSD-2-Clause
/*
 * jsonrpc_parse.h: parsing a JSON-RPC 2.0 request and decoding its params
 * by a table (jsonrpc_parse.c): pure functions, no I/O, no globals;
 * fuzzed (fuzz/jsonrpc_fuzz.c).  The server (jsonrpc.h) is built on it.
 *
 * Error codes: -32700 parse error, -32600 invalid request, -32601 unknown
 * method, -32602 invalid params, -32603 internal error.
 */
#ifndef BLKTGT_JSONRPC_PARSE_H
#define BLKTGT_JSONRPC_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define JSONRPC_PARSE_ERROR      -32700
#define JSONRPC_INVALID_REQUEST  -32600
#define JSONRPC_METHOD_NOT_FOUND -32601
#define JSONRPC_INVALID_PARAMS   -32602
#define JSONRPC_INTERNAL_ERROR   -32603

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

#endif
