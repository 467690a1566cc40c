// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_workload.c: workload_run.  The reply goes out when the job ends.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "rpc_workload.h"
#include "workload.h"

struct run_params {
	char bdev[BDEV_NAME_MAX + 1];
	char export[BDEV_NAME_MAX + 1];
	char pattern[16];
	uint64_t io_size, queue_depth, count, seconds;
};

enum { P_BDEV, P_EXPORT, P_PATTERN, P_IO_SIZE, P_QD, P_COUNT, P_SECONDS, P_N };

static const struct rpc_param run_spec[P_N] = {
	[P_BDEV] = { "bdev", RPC_PARAM_STRING, false, offsetof(struct run_params, bdev),
		     BDEV_NAME_MAX + 1, 0, 0 },
	[P_EXPORT] = { "export", RPC_PARAM_STRING, false, offsetof(struct run_params, export),
		       BDEV_NAME_MAX + 1, 0, 0 },
	[P_PATTERN] = { "pattern", RPC_PARAM_STRING, true, offsetof(struct run_params, pattern),
			16, 0, 0 },
	[P_IO_SIZE] = { "io_size", RPC_PARAM_U64, true, offsetof(struct run_params, io_size), 0,
			8, BDEV_MAX_IO_SIZE },
	[P_QD] = { "queue_depth", RPC_PARAM_U64, true, offsetof(struct run_params, queue_depth),
		   0, 1, WORKLOAD_MAX_QD },
	[P_COUNT] = { "count", RPC_PARAM_U64, false, offsetof(struct run_params, count), 0,
		      1, WORKLOAD_MAX_COUNT },
	[P_SECONDS] = { "seconds", RPC_PARAM_U64, false, offsetof(struct run_params, seconds), 0,
			1, WORKLOAD_MAX_SECONDS },
};

static void run_done(void *ctx, const struct workload_result *r)
{
	struct rpc_request *req = ctx;
	struct json_writer *w;

	if (r->status == -ECANCELED) {
		rpc_error(req, r->status, "workload stopped early by shutdown after %llu I/Os",
			  (unsigned long long)r->ios);
		return;
	}
	w = rpc_result_begin(req);
	jw_obj_begin(w);
	jw_kv_u64(w, "ios", r->ios);
	jw_kv_u64(w, "reads", r->reads);
	jw_kv_u64(w, "writes", r->writes);
	jw_kv_u64(w, "errors", r->errors);
	jw_kv_u64(w, "bytes", r->bytes);
	jw_kv_u64(w, "elapsed_ns", r->elapsed_ns);
	jw_kv_u64(w, "iops", r->elapsed_ns ? (uint64_t)((double)r->ios * 1e9 / r->elapsed_ns) : 0);
	jw_kv_u64(w, "lat_min_ns", r->lat_min_ns);
	jw_kv_u64(w, "lat_avg_ns", r->ios ? r->lat_sum_ns / r->ios : 0);
	jw_kv_u64(w, "lat_max_ns", r->lat_max_ns);
	if (r->status)
		jw_kv_i64(w, "status", r->status);
	jw_obj_end(w);
	rpc_result_end(req);
}

static void rpc_workload_run(struct rpc_request *req, const struct json_val *params)
{
	struct run_params p = { 0 };
	struct workload_opts o = { 0 };
	uint32_t present;
	int pattern, rc;

	if (rpc_params(req, params, run_spec, P_N, &p, &present))
		return;
	if (!(present & (1u << P_BDEV)) == !(present & (1u << P_EXPORT))) {
		rpc_error(req, JSONRPC_INVALID_PARAMS,
			  "invalid params: give exactly one of 'bdev' and 'export'");
		return;
	}
	if (!(present & (1u << P_COUNT)) == !(present & (1u << P_SECONDS))) {
		rpc_error(req, JSONRPC_INVALID_PARAMS,
			  "invalid params: give exactly one of 'count' and 'seconds'");
		return;
	}
	pattern = workload_pattern_parse(p.pattern);
	if (pattern < 0) {
		rpc_error(req, JSONRPC_INVALID_PARAMS, "invalid params: 'pattern' must be one of "
			  "read, write, randread, randwrite, randrw");
		return;
	}
	strcpy(o.bdev, p.bdev);
	strcpy(o.export, p.export);
	o.pattern = (enum workload_pattern)pattern;
	o.io_size = p.io_size;
	o.queue_depth = (uint32_t)p.queue_depth;
	o.count = p.count;
	o.seconds = p.seconds;
	rc = workload_run(&o, run_done, req);
	switch (rc) {
	case 0:
		break;
	case -ENOENT:
		if (p.export[0])
			rpc_error(req, rc, "no export named '%s'", p.export);
		else
			rpc_error(req, rc, "no bdev named '%s'", p.bdev);
		break;
	case -EINVAL:
		rpc_error(req, JSONRPC_INVALID_PARAMS,
			  "invalid params: 'io_size' must be a multiple of the block size, at "
			  "most the bdev's size, and io_size * queue_depth at most %llu bytes",
			  (unsigned long long)WORKLOAD_MAX_BUFFERS);
		break;
	case -EBUSY:
		rpc_error(req, rc, "too many workloads running (at most %d), or shutting down",
			  WORKLOAD_MAX_JOBS);
		break;
	default:
		rpc_error(req, rc, "workload_run: %s", strerror(-rc));
	}
}

const struct rpc_method rpc_workload_methods[] = {
	{ "workload_run", rpc_workload_run },
	{ NULL, NULL },
};
