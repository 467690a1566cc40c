// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * rpclat.bpf.c: JSON-RPC latency, blktgt:rpc__request to rpc__done of the
 * same RPC id, as a log2 histogram per method.
 *
 * Keyed by the process and the RPC id, so the latency is right whichever
 * thread finishes the request; the key is deleted at rpc__done.  A request
 * the full map refuses is counted, and the process's exit reclaims what
 * it left in progress (pair_state.bpf.h).  At most --max-keys methods
 * keep a histogram per interval; a latency whose method finds the map
 * full is dropped, and hist_get() counts it (histogram.bpf.h).
 */
#include "probekit.bpf.h"
#include <bpf/usdt.bpf.h>

#include "rpclat.h"
#include "histogram.bpf.h"
#include "pair_state.bpf.h"

/* Options, set by user space before load. */
const volatile __u64 unit_ns = 1000;	/* -n 1, -u 1000, -m 1000000 */

/* A request in progress: its process (tid 0), its RPC id. */
struct rpc_start_key {
	struct pair_key_head head;
	__u64 id;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PAIR_INFLIGHT_DEFAULT);	/* --max-inflight */
	__type(key, struct rpc_start_key);
	__type(value, __u64);		/* request time, ns */
} start SEC(".maps");

DRAINED_HASH(hists, struct method_key, struct hist, HIST_KEYS_MAX, BPF_F_NO_PREALLOC);	/* --max-keys */

/* blktgt:rpc__request(u64 id, char *method) */
SEC("usdt")
int BPF_USDT(rpc_request, __u64 id)
{
	hit_count();
	struct rpc_start_key key = { .head.tgid = bpf_get_current_pid_tgid() >> 32,
				     .id = id };
	__u64 ts = bpf_ktime_get_ns();

	pair_start(&start, &key, &ts);
	return 0;
}

static __always_inline int handle_done(__u64 id, const char *method)
{
	struct rpc_start_key skey = { .head.tgid = bpf_get_current_pid_tgid() >> 32,
				      .id = id };
	struct method_key key = {};
	__u64 *tsp, delta;

	tsp = bpf_map_lookup_elem(&start, &skey);
	if (!tsp)
		return 0;	/* requested before tracing started */
	delta = (bpf_ktime_get_ns() - *tsp) / unit_ns;
	bpf_map_delete_elem(&start, &skey);

	bpf_probe_read_user_str(key.method, sizeof(key.method), method);
	hist_increment(&hists, &key, hist_slot(delta, false, 1));
	return 0;
}

/* blktgt:rpc__done(u64 id, char *method, s32 status) */
SEC("usdt")
int BPF_USDT(rpc_done, __u64 id, const char *method, __s32 status)
{
	hit_count();
	return handle_done(id, method);
}

/* A process's exit reclaims the requests it left in progress. */
SEC("raw_tp/sched_process_exit")
int rpc_exit(void *ctx)
{
	return pair_on_exit(ctx, &start, NULL);
}

/* bpf_probe_read_user_str() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
