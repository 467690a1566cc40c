// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_trace.c: trace_enable_group, trace_disable_group and trace_get_info,
 * the run-time side of the trace ring (trace.h); -e is the start-up side.
 *
 * Each returns the same object, so a caller sees at once what is being
 * recorded and how to read it:
 *   {"groups": {"bdev": MASK, ...}, "file": PATH, "dump": COMMAND,
 *    "clock": "tsc" | "monotonic"}
 */
#include <errno.h>
#include <stddef.h>

#include "rpc_trace.h"
#include "trace.h"

#define TRACE_GROUP_NAME_MAX 31

struct trace_params {
	char name[TRACE_GROUP_NAME_MAX + 1];
	uint64_t mask;
};

static const struct rpc_param enable_spec[] = {
	{ "name", RPC_PARAM_STRING, true, offsetof(struct trace_params, name),
	  sizeof(((struct trace_params *)0)->name), 0, 0 },
	{ "mask", RPC_PARAM_U64, false, offsetof(struct trace_params, mask), 0,
	  1, UINT64_MAX },
};

static void trace_result(struct rpc_request *req)
{
	static const char *const names[] = {
#define TRACE_G_NAME(name, index, doc) #name,
		TRACE_GROUPS(TRACE_G_NAME)
#undef TRACE_G_NAME
	};
	struct json_writer *w = rpc_result_begin(req);

	jw_obj_begin(w);
	jw_key(w, "groups");
	jw_obj_begin(w);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		uint64_t mask = 0;

		trace_group_mask(names[i], &mask);
		jw_kv_u64(w, names[i], mask);
	}
	jw_obj_end(w);
	jw_kv_str(w, "file", trace_file_path());
	jw_kv_str(w, "dump", trace_dump_command());
	jw_kv_str(w, "clock", trace_clock_name());
	jw_obj_end(w);
	rpc_result_end(req);
}

static void rpc_trace_enable_group(struct rpc_request *req, const struct json_val *params)
{
	struct trace_params p = { 0 };
	int rc;

	if (rpc_params(req, params, enable_spec, 2, &p, NULL))
		return;
	rc = trace_enable_group(p.name, p.mask);
	if (rc == -ENOENT)
		rpc_error(req, rc, "no trace group '%s' (blktgt -e help lists them)", p.name);
	else if (rc == -EINVAL)
		rpc_error(req, JSONRPC_INVALID_PARAMS,
			  "mask: 0x%llx names no tracepoint of '%s' (blktgt -e help)",
			  (unsigned long long)p.mask, p.name);
	else if (rc)
		rpc_error(req, rc, "trace group '%s': error %d", p.name, rc);
	else
		trace_result(req);
}

static void rpc_trace_disable_group(struct rpc_request *req, const struct json_val *params)
{
	struct trace_params p = { 0 };
	int rc;

	if (rpc_params(req, params, enable_spec, 1, &p, NULL))
		return;
	rc = trace_disable_group(p.name);
	if (rc == -ENOENT)
		rpc_error(req, rc, "no trace group '%s' (blktgt -e help lists them)", p.name);
	else if (rc)
		rpc_error(req, rc, "trace group '%s': error %d", p.name, rc);
	else
		trace_result(req);
}

static void rpc_trace_get_info(struct rpc_request *req, const struct json_val *params)
{
	if (rpc_params(req, params, NULL, 0, NULL, NULL))
		return;
	trace_result(req);
}

const struct rpc_method rpc_trace_methods[] = {
	{ "trace_enable_group", rpc_trace_enable_group },
	{ "trace_disable_group", rpc_trace_disable_group },
	{ "trace_get_info", rpc_trace_get_info },
	{ NULL, NULL },
};
