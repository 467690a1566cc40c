// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_debug.c: methods for tests, answered only when the target was
 * started with BLKTGT_DEBUG_RPC=1 in its environment (otherwise they are
 * unknown methods).  They exercise real code paths that no ordinary
 * request reaches: the reactor pass hook, and the thread-rule checks,
 * which they break on purpose.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "export.h"
#include "rpc_debug.h"
#include "reactor.h"

/* --- debug_pass_hook ------------------------------------------------------ */

/* A counting hook per reactor, touched only by that reactor. */
struct pass_count {
	struct reactor_pass_hook *hook;
	uint64_t added_at;              /* reactor_passes() when it was added */
	uint64_t runs;
};

struct pass_query {
	struct rpc_request *req;
	unsigned reactor;
	bool add;
	int err;
	uint64_t passes, runs;          /* passes since the hook was added */
};

static struct pass_count pass_counts[REACTOR_MAX];

static void pass_counted(void *ctx)
{
	struct pass_count *pc = ctx;

	pc->runs++;
}

static void pass_query_reply(void *ctx)
{
	struct pass_query *q = ctx;
	struct json_writer *w;

	if (q->err) {
		rpc_error(q->req, q->err, "cannot add a pass hook: %s", strerror(-q->err));
	} else {
		w = rpc_result_begin(q->req);
		jw_obj_begin(w);
		jw_kv_u64(w, "reactor", q->reactor);
		jw_kv_u64(w, "passes", q->passes);
		jw_kv_u64(w, "hook_runs", q->runs);
		jw_obj_end(w);
		rpc_result_end(q->req);
	}
	free(q);
}

/* On the queried reactor: read its figures in one go, mid-pass, so that
 * hook_runs and passes describe the same moment. */
static void pass_query_run(void *ctx)
{
	struct pass_query *q = ctx;
	struct pass_count *pc = &pass_counts[q->reactor];

	if (q->add && !pc->hook) {
		pc->added_at = reactor_passes();
		pc->hook = reactor_pass_hook_add(pass_counted, pc);
		if (!pc->hook)
			q->err = -ENOMEM;
	}
	if (pc->hook) {
		q->passes = reactor_passes() - pc->added_at;
		q->runs = pc->runs;
	}
	if (reactor_send_msg(reactor_get(0), pass_query_reply, q) != 0)
		abort();        /* the request would never be answered */
}

struct pass_params {
	uint64_t reactor;
	bool add;
};

static const struct rpc_param pass_spec[] = {
	{ "reactor", RPC_PARAM_U64, true, offsetof(struct pass_params, reactor), 0,
	  0, REACTOR_MAX - 1 },
	{ "add", RPC_PARAM_BOOL, false, offsetof(struct pass_params, add), 0, 0, 0 },
};

/* {reactor, add}: on that reactor, add a hook that counts its runs (add,
 * once), and report the loop passes since it was added and its runs; both
 * 0 where none was added. */
static void rpc_debug_pass_hook(struct rpc_request *req, const struct json_val *params)
{
	struct pass_params p = { .add = true };
	struct pass_query *q;

	if (rpc_params(req, params, pass_spec, 2, &p, NULL))
		return;
	if (p.reactor >= reactor_count()) {
		rpc_error(req, JSONRPC_INVALID_PARAMS,
			  "invalid params: 'reactor' must be below %u", reactor_count());
		return;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		rpc_error(req, -ENOMEM, "out of memory");
		return;
	}
	q->req = req;
	q->reactor = (unsigned)p.reactor;
	q->add = p.add;
	if (reactor_send_msg(reactor_get(q->reactor), pass_query_run, q) != 0) {
		free(q);
		rpc_error(req, -ENOMEM, "out of memory");
	}
}

/* --- debug_break_rule ---------------------------------------------------- */

static void noop_step(struct reactor_foreach *it, void *ctx) { reactor_foreach_continue(it, 0); }
static void noop_done(void *ctx, int status) { }
static void noop_event(void *ctx, uint32_t events) { }

static void *call_foreach_off_reactor(void *arg)
{
	reactor_for_each_thread(noop_step, NULL, noop_done);
	return NULL;
}

static void call_export_lookup(void *ctx)
{
	export_lookup("debug");
}

static void modify_foreign_fd(void *ctx)
{
	reactor_fd_modify(ctx, EPOLLIN);
}

struct rule_params {
	char rule[32];
};

static const struct rpc_param rule_spec[] = {
	{ "rule", RPC_PARAM_STRING, true, offsetof(struct rule_params, rule), 32, 0, 0 },
};

/* {rule}: break a thread rule; the target aborts (no reply).
 *   off_reactor     reactor_for_each_thread from a thread that is not a reactor
 *   not_reactor_0   export_lookup on the last reactor
 *   foreign_fd      reactor_fd_modify, on the last reactor, of a watcher
 *                   reactor 0 added */
static void rpc_debug_break_rule(struct rpc_request *req, const struct json_val *params)
{
	struct rule_params p = { "" };
	struct reactor *last = reactor_get(reactor_count() - 1);
	int rc = 0;

	if (rpc_params(req, params, rule_spec, 1, &p, NULL))
		return;
	if (strcmp(p.rule, "off_reactor") == 0) {
		pthread_t t;

		rc = -pthread_create(&t, NULL, call_foreach_off_reactor, NULL);
		if (!rc)
			pthread_detach(t);
	} else if (strcmp(p.rule, "not_reactor_0") == 0) {
		rc = reactor_send_msg(last, call_export_lookup, NULL);
	} else if (strcmp(p.rule, "foreign_fd") == 0) {
		int fd = eventfd(0, EFD_CLOEXEC);
		struct reactor_fd *w = fd < 0 ? NULL : reactor_fd_add(fd, 0, noop_event, NULL);

		rc = w ? reactor_send_msg(last, modify_foreign_fd, w) : -errno;
	} else {
		rpc_error(req, JSONRPC_INVALID_PARAMS, "invalid params: unknown 'rule' %s; "
			  "use off_reactor, not_reactor_0 or foreign_fd", p.rule);
		return;
	}
	if (rc)
		rpc_error(req, rc, "cannot break the rule: %s", strerror(-rc));
}

const struct rpc_method rpc_debug_methods[] = {
	{ "debug_pass_hook", rpc_debug_pass_hook },
	{ "debug_break_rule", rpc_debug_break_rule },
	{ NULL, NULL },
};
