// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_target.c: target_stats and target_shutdown.
 */
#include <stddef.h>

#include "bdev.h"
#include "export.h"
#include "rpc_target.h"
#include "nbd.h"
#include "reactor.h"
#include "target.h"
#include "workload.h"

static void rpc_target_stats(struct rpc_request *req, const struct json_val *params)
{
	struct json_writer *w;
	struct bdev_stats bs;
	struct nbd_stats ns = { 0 };
	unsigned nbdevs = 0, nexports = 0;

	if (rpc_params(req, params, NULL, 0, NULL, NULL))
		return;
	for (struct bdev *b = bdev_first(); b; b = b->next)
		nbdevs++;
	for (struct export *e = export_first(); e; e = export_next(e))
		nexports++;
	bdev_get_stats(&bs);
	nbd_get_stats(&ns);
	w = rpc_result_begin(req);
	jw_obj_begin(w);
	jw_kv_str(w, "state", target_state_name(target_state()));
	jw_kv_u64(w, "threads", reactor_count());
	jw_kv_u64(w, "uptime_ns", target_uptime_ns());
	jw_kv_u64(w, "bdevs", nbdevs);
	jw_kv_u64(w, "exports", nexports);
	jw_kv_u64(w, "workloads", workload_running());
	jw_kv_u64(w, "rpc_requests", jsonrpc_request_count());
	jw_kv_u64(w, "io_submitted", bs.submitted);
	jw_kv_u64(w, "io_completed", bs.completed);
	jw_kv_u64(w, "io_errors", bs.errors);
	jw_kv_u64(w, "io_bytes", bs.bytes);
	jw_kv_u64(w, "io_batch_held", bs.batch_held);
	jw_kv_u64(w, "nbd_connections", ns.connections);
	jw_kv_u64(w, "nbd_total_connections", ns.total_connections);
	jw_kv_u64(w, "nbd_requests", ns.requests);
	jw_obj_end(w);
	rpc_result_end(req);
}

static void rpc_target_shutdown(struct rpc_request *req, const struct json_val *params)
{
	if (rpc_params(req, params, NULL, 0, NULL, NULL))
		return;
	/* Reply first: shutdown closes this connection. */
	rpc_result_bool(req, true);
	target_shutdown();
}

const struct rpc_method rpc_target_methods[] = {
	{ "target_stats", rpc_target_stats },
	{ "target_shutdown", rpc_target_shutdown },
	{ NULL, NULL },
};
