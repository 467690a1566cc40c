// SPDX-License-Identifier: BSD-2-Clause
/*
 * jsonrpc_parse.c: the JSON-RPC 2.0 envelope and the table-driven params
 * decoder.  Pure functions over json.h's values, kept apart from the
 * server so that the fuzz harness can drive them without sockets.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jsonrpc_parse.h"

__attribute__((format(printf, 3, 4)))
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* A member name as it can be quoted in a message: bounded, printable. */
static void quote_name(const struct json_val *k, char *out, size_t outlen)
{
	size_t n = 0;

	for (uint32_t i = 0; i < k->len && n + 4 < outlen; i++) {
		unsigned char c = (unsigned char)k->str[i];

		out[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	if (k->len > 0 && n + 4 >= outlen && n >= 3) {
		out[n - 3] = out[n - 2] = out[n - 1] = '.';
	}
	out[n] = '\0';
}

int jsonrpc_parse_request(const char *buf, size_t len, struct json_val *vals, size_t max_vals,
			  char *scratch, struct jsonrpc_msg *msg, size_t *consumed,
			  char *err, size_t errlen)
{
	const struct json_val *top, *k, *version = NULL, *id = NULL;
	char name[40];
	uint32_t i;
	int n;

	memset(msg, 0, sizeof(*msg));
	strcpy(msg->id, "null");
	msg->id_len = 4;
	n = json_parse(buf, len, vals, max_vals, scratch, consumed);
	if (n == JSON_INCOMPLETE)
		return JSONRPC_MORE;
	if (n < 0) {
		set_err(err, errlen, "parse error: %s at byte %zu", json_status_str(n), *consumed);
		return JSONRPC_PARSE_ERROR;
	}
	top = &vals[0];
	if (top->type == JSON_ARRAY) {
		set_err(err, errlen, "invalid request: batch requests are not supported");
		return JSONRPC_INVALID_REQUEST;
	}
	if (top->type != JSON_OBJECT) {
		set_err(err, errlen, "invalid request: a request is a JSON object");
		return JSONRPC_INVALID_REQUEST;
	}
	/* The id first, so that every later error can carry it. */
	k = top + 1;
	for (i = 0; i < top->count; i++, k = json_next(k + 1)) {
		if (json_str_eq(k, "id")) {
			const struct json_val *v = k + 1;

			if (v->type != JSON_STRING && v->type != JSON_NUMBER && v->type != JSON_NULL) {
				set_err(err, errlen, "invalid request: id must be a string, number or null");
				return JSONRPC_INVALID_REQUEST;
			}
			if (v->raw_len > JSONRPC_MAX_ID_LEN) {
				set_err(err, errlen, "invalid request: id longer than %d bytes",
					JSONRPC_MAX_ID_LEN);
				return JSONRPC_INVALID_REQUEST;
			}
			if (!id) {
				memcpy(msg->id, v->raw, v->raw_len);
				msg->id[v->raw_len] = '\0';
				msg->id_len = v->raw_len;
			}
			id = v;
			msg->has_id = true;
		}
	}
	k = top + 1;
	for (i = 0; i < top->count; i++, k = json_next(k + 1)) {
		const struct json_val *v = k + 1;
		const struct json_val **slot;

		if (json_str_eq(k, "jsonrpc"))
			slot = &version;
		else if (json_str_eq(k, "method"))
			slot = &msg->method;
		else if (json_str_eq(k, "params"))
			slot = &msg->params;
		else if (json_str_eq(k, "id"))
			slot = NULL;
		else {
			quote_name(k, name, sizeof(name));
			set_err(err, errlen, "invalid request: unknown member '%s'", name);
			return JSONRPC_INVALID_REQUEST;
		}
		if (!slot) {
			if (v != id) {
				set_err(err, errlen, "invalid request: duplicate member 'id'");
				return JSONRPC_INVALID_REQUEST;
			}
			continue;
		}
		if (*slot) {
			quote_name(k, name, sizeof(name));
			set_err(err, errlen, "invalid request: duplicate member '%s'", name);
			return JSONRPC_INVALID_REQUEST;
		}
		*slot = v;
	}
	if (!version || !json_str_eq(version, "2.0")) {
		set_err(err, errlen, "invalid request: \"jsonrpc\" must be \"2.0\"");
		return JSONRPC_INVALID_REQUEST;
	}
	if (!msg->method || msg->method->type != JSON_STRING) {
		set_err(err, errlen, "invalid request: \"method\" must be a string");
		return JSONRPC_INVALID_REQUEST;
	}
	if (msg->method->len == 0 || msg->method->len > JSONRPC_MAX_METHOD_LEN ||
	    strlen(msg->method->str) != msg->method->len) {
		set_err(err, errlen, "invalid request: \"method\" must be 1..%d bytes",
			JSONRPC_MAX_METHOD_LEN);
		return JSONRPC_INVALID_REQUEST;
	}
	if (msg->params && msg->params->type != JSON_OBJECT && msg->params->type != JSON_ARRAY) {
		set_err(err, errlen, "invalid request: \"params\" must be an object or array");
		return JSONRPC_INVALID_REQUEST;
	}
	return 0;
}

static const char *type_word(enum rpc_param_type t)
{
	switch (t) {
	case RPC_PARAM_STRING: return "a string";
	case RPC_PARAM_U64: return "an integer";
	default: return "a boolean";
	}
}

int jsonrpc_decode_params(const struct json_val *params, const struct rpc_param *spec,
			  size_t n, void *out, uint32_t *present, char *err, size_t errlen)
{
	char name[40];
	uint32_t seen = 0;

	*present = 0;
	if (n > RPC_PARAMS_MAX) {
		set_err(err, errlen, "invalid params: internal: spec too long");
		return JSONRPC_INVALID_PARAMS;
	}
	if (params && params->type != JSON_OBJECT) {
		set_err(err, errlen, "invalid params: params must be an object of named params");
		return JSONRPC_INVALID_PARAMS;
	}
	if (params) {
		const struct json_val *k = params + 1;

		for (uint32_t m = 0; m < params->count; m++, k = json_next(k + 1)) {
			const struct json_val *v = k + 1;
			size_t j;

			for (j = 0; j < n; j++)
				if (json_str_eq(k, spec[j].name))
					break;
			quote_name(k, name, sizeof(name));
			if (j == n) {
				set_err(err, errlen, "invalid params: unknown param '%s'", name);
				return JSONRPC_INVALID_PARAMS;
			}
			if (seen & (1u << j)) {
				set_err(err, errlen, "invalid params: duplicate param '%s'", name);
				return JSONRPC_INVALID_PARAMS;
			}
			seen |= 1u << j;
			switch (spec[j].type) {
			case RPC_PARAM_STRING: {
				char *dst = (char *)out + spec[j].offset;

				if (v->type != JSON_STRING) {
					set_err(err, errlen, "invalid params: '%s' must be a string", name);
					return JSONRPC_INVALID_PARAMS;
				}
				if (v->len == 0 || v->len >= spec[j].size ||
				    strlen(v->str) != v->len) {
					set_err(err, errlen,
						"invalid params: '%s' must be 1..%zu bytes without NUL",
						name, spec[j].size - 1);
					return JSONRPC_INVALID_PARAMS;
				}
				memcpy(dst, v->str, v->len + 1);
				break;
			}
			case RPC_PARAM_U64: {
				uint64_t x;

				if (v->type != JSON_NUMBER || json_to_u64(v, &x) != 0 ||
				    x < spec[j].min || x > spec[j].max) {
					set_err(err, errlen,
						"invalid params: '%s' must be an integer in %llu..%llu",
						name, (unsigned long long)spec[j].min,
						(unsigned long long)spec[j].max);
					return JSONRPC_INVALID_PARAMS;
				}
				*(uint64_t *)(void *)((char *)out + spec[j].offset) = x;
				break;
			}
			case RPC_PARAM_BOOL:
				if (v->type != JSON_TRUE && v->type != JSON_FALSE) {
					set_err(err, errlen, "invalid params: '%s' must be %s", name,
						type_word(spec[j].type));
					return JSONRPC_INVALID_PARAMS;
				}
				*(bool *)((char *)out + spec[j].offset) = v->type == JSON_TRUE;
				break;
			}
		}
	}
	for (size_t j = 0; j < n; j++) {
		if (spec[j].required && !(seen & (1u << j))) {
			set_err(err, errlen, "invalid params: missing param '%s'", spec[j].name);
			return JSONRPC_INVALID_PARAMS;
		}
	}
	*present = seen;
	return 0;
}
