// SPDX-License-Identifier: BSD-2-Clause
/*
 * json.h: a bounded JSON parser and a JSON writer for the control plane.
 *
 * Every limit on untrusted JSON is a named constant here, in one place.
 *
 * The parser reads one complete JSON value into a caller-provided array of
 * values in document order (pre-order): a container is followed by its
 * members, and its `skip` counts it and all its descendants, so the next
 * sibling of v is `v + v->skip` (json_next()).  An object's members come as
 * key, value, key, value...  Strings are decoded into a caller-provided
 * scratch buffer (at least len + 1 bytes), NUL-terminated, with their
 * length kept (a string may contain "\u0000").
 */
#ifndef BLKTGT_JSON_H
#define BLKTGT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits on untrusted input. */
#define JSON_MAX_REQUEST       (64 * 1024)  /* bytes in one JSON-RPC request */
#define JSON_MAX_VALUES        1024         /* values in one request */
#define JSON_MAX_DEPTH         32           /* nesting of arrays and objects */
#define JSON_MAX_CONFIG        (1024 * 1024) /* bytes in a -c config file */
#define JSON_MAX_CONFIG_VALUES (64 * 1024)  /* values in a config file */
#define JSON_MAX_RESPONSE      (1024 * 1024) /* bytes in one response */
#define JSONRPC_MAX_CONNS      64           /* RPC clients connected at once; more
						 * wait in the listen backlog */
#define JSONRPC_BACKLOG        1024         /* clients waiting to be accepted (the
						 * kernel caps it at somaxconn) */
#define JSONRPC_STALL_LIMIT_DEFAULT 10      /* seconds a client may take to send
						 * the rest of a request, or to read
						 * its last reply (-H; always) */
#define JSONRPC_EVICT_IDLE_S   5            /* seconds a connection may wait on its
						 * client (nothing sent, part of a
						 * request, or between requests)
						 * before it gives its place to a
						 * client waiting on a full table */
#define JSONRPC_MAX_ID_LEN     128          /* bytes of a request's "id" */
#define JSONRPC_MAX_METHOD_LEN 63           /* bytes of a method name */
#define JSONRPC_MAX_ERROR_MSG  256          /* bytes of an error message */

enum json_type {
	JSON_NULL,
	JSON_FALSE,
	JSON_TRUE,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

struct json_val {
	enum json_type type;
	uint32_t skip;          /* 1 + the number of values nested in it */
	uint32_t count;         /* array: elements; object: key/value pairs */
	uint32_t len;           /* string: decoded bytes; number: raw bytes */
	const char *raw;        /* where the value starts in the input */
	uint32_t raw_len;       /* its length in the input */
	const char *str;        /* string: decoded, NUL-terminated (scratch) */
};

enum json_status {
	JSON_INCOMPLETE = -1,   /* the input ends inside a value: read more */
	JSON_SYNTAX = -2,       /* not JSON */
	JSON_TOO_MANY = -3,     /* more values than the array holds */
	JSON_TOO_DEEP = -4,     /* nested deeper than JSON_MAX_DEPTH */
	JSON_BAD_UTF8 = -5,     /* a string's raw bytes are not UTF-8 (RFC 3629:
				 * no overlong form, surrogate or code point
				 * above U+10FFFF) */
	JSON_BAD_SURROGATE = -6,/* \u escapes a surrogate that has no pair */
};

/*
 * Parse the first JSON value of buf[0..len) (leading whitespace skipped).
 * Returns the number of values stored (>= 1) and sets *consumed to the
 * offset just past the value, or a negative enum json_status and sets
 * *consumed to the offset of the offending byte (for a message).  A number
 * that runs to the end of the input counts as incomplete.  Every string
 * stored is valid UTF-8.
 */
int json_parse(const char *buf, size_t len, struct json_val *vals, size_t max_vals,
	       char *scratch, size_t *consumed);
const char *json_status_str(int status);

/* The length of the well-formed UTF-8 sequence at s[0..n): 1..4, 0 when
 * n ends inside one that could still be well-formed, -1 when it is not. */
int json_utf8_seq(const char *s, size_t n);

/* The value after v and everything nested in it: its next sibling. */
static inline const struct json_val *json_next(const struct json_val *v)
{
	return v + v->skip;
}

/* Exact conversions: 0, or -EINVAL (not an integer: fraction, exponent,
 * sign where none is allowed) or -ERANGE. */
int json_to_u64(const struct json_val *v, uint64_t *out);
/* A string value equal to s (same length, no embedded NUL). */
bool json_str_eq(const struct json_val *v, const char *s);

/*
 * The writer builds one document in a growing buffer, at most max bytes;
 * past that (or on ENOMEM) it sets err and ignores further writes.
 */
struct json_writer {
	char *buf;
	size_t len, cap, max;
	int err;                        /* 0 or -ENOMEM/-E2BIG */
	unsigned depth;
	bool first[JSON_MAX_DEPTH + 1]; /* nothing written yet at this depth */
	bool after_key;
};

void jw_init(struct json_writer *w, size_t max);
void jw_free(struct json_writer *w);
/* Hand the buffer over (NUL-terminated); the caller frees it. */
char *jw_take(struct json_writer *w, size_t *len);

void jw_obj_begin(struct json_writer *w);
void jw_obj_end(struct json_writer *w);
void jw_arr_begin(struct json_writer *w);
void jw_arr_end(struct json_writer *w);
void jw_key(struct json_writer *w, const char *key);
/* Strings are quoted with escapes; a byte that is not part of well-formed
 * UTF-8 is written as U+FFFD, so the document stays valid JSON. */
void jw_str(struct json_writer *w, const char *s);
void jw_strn(struct json_writer *w, const char *s, size_t n);
void jw_u64(struct json_writer *w, uint64_t v);
void jw_i64(struct json_writer *w, int64_t v);
void jw_bool(struct json_writer *w, bool v);
/* Already valid JSON text, as one value. */
void jw_raw(struct json_writer *w, const char *text, size_t n);

/* key: value shorthands for objects. */
void jw_kv_str(struct json_writer *w, const char *key, const char *s);
void jw_kv_u64(struct json_writer *w, const char *key, uint64_t v);
void jw_kv_i64(struct json_writer *w, const char *key, int64_t v);

#endif
