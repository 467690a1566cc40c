// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_export.c: export_* methods.  State changes are asynchronous: the
 * reply goes out when the change has run on every reactor.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "export.h"
#include "rpc_export.h"

struct export_params {
	char name[BDEV_NAME_MAX + 1];
	char bdev[BDEV_NAME_MAX + 1];
};

static const struct rpc_param create_spec[] = {
	{ "name", RPC_PARAM_STRING, true, offsetof(struct export_params, name),
	  BDEV_NAME_MAX + 1, 0, 0 },
	{ "bdev", RPC_PARAM_STRING, true, offsetof(struct export_params, bdev),
	  BDEV_NAME_MAX + 1, 0, 0 },
};

static void change_done(void *ctx, int status)
{
	struct rpc_request *req = ctx;

	if (status)
		rpc_error(req, status, "%s: state change failed: %s", rpc_method_name(req),
			  strerror(-status));
	else
		rpc_result_bool(req, true);
}

static void change_error(struct rpc_request *req, const struct export_params *p, int rc)
{
	switch (rc) {
	case -ENOENT:
		if (p->bdev[0])
			rpc_error(req, rc, "no bdev named '%s'", p->bdev);
		else
			rpc_error(req, rc, "no export named '%s'", p->name);
		break;
	case -EEXIST:
		rpc_error(req, rc, "export '%s' already exists", p->name);
		break;
	case -EBUSY:
		rpc_error(req, rc, "export '%s' is busy (a state change is running or "
			  "clients are connected)", p->name);
		break;
	case -EALREADY:
		rpc_error(req, rc, "export '%s' is not in a state that allows %s", p->name,
			  rpc_method_name(req));
		break;
	case -EINVAL:
		rpc_error(req, JSONRPC_INVALID_PARAMS,
			  "invalid params: 'name' must be 1..%d printable bytes without '/'",
			  BDEV_NAME_MAX);
		break;
	default:
		rpc_error(req, rc, "export '%s': %s", p->name, strerror(-rc));
	}
}

static void rpc_export_create(struct rpc_request *req, const struct json_val *params)
{
	struct export_params p = { 0 };
	int rc;

	if (rpc_params(req, params, create_spec, 2, &p, NULL))
		return;
	rc = export_create(p.name, p.bdev, change_done, req);
	if (rc)
		change_error(req, &p, rc);
}

typedef int (*change_fn)(const char *name, export_done_fn done, void *ctx);

static void do_change(struct rpc_request *req, const struct json_val *params, change_fn fn)
{
	struct export_params p = { 0 };
	int rc;

	if (rpc_params(req, params, create_spec, 1, &p, NULL))
		return;
	rc = fn(p.name, change_done, req);
	if (rc)
		change_error(req, &p, rc);
}

static void rpc_export_delete(struct rpc_request *req, const struct json_val *params)
{
	do_change(req, params, export_delete);
}

static void rpc_export_pause(struct rpc_request *req, const struct json_val *params)
{
	do_change(req, params, export_pause);
}

static void rpc_export_resume(struct rpc_request *req, const struct json_val *params)
{
	do_change(req, params, export_resume);
}

static void rpc_export_list(struct rpc_request *req, const struct json_val *params)
{
	struct json_writer *w;

	if (rpc_params(req, params, NULL, 0, NULL, NULL))
		return;
	w = rpc_result_begin(req);
	jw_arr_begin(w);
	for (struct export *e = export_first(); e; e = export_next(e)) {
		jw_obj_begin(w);
		jw_kv_str(w, "name", export_name(e));
		jw_kv_str(w, "bdev", export_bdev(e)->name);
		jw_kv_str(w, "state", export_state_name(export_state(e)));
		jw_kv_u64(w, "clients", export_clients(e));
		jw_obj_end(w);
	}
	jw_arr_end(w);
	rpc_result_end(req);
}

const struct rpc_method rpc_export_methods[] = {
	{ "export_create", rpc_export_create },
	{ "export_delete", rpc_export_delete },
	{ "export_pause", rpc_export_pause },
	{ "export_resume", rpc_export_resume },
	{ "export_list", rpc_export_list },
	{ NULL, NULL },
};
