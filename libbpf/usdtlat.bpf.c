// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * usdtlat.bpf.c: latency from one USDT probe to another, in any binary.
 *
 * lat_start runs at every site of START and lat_done at every site of
 * DONE, as plain uprobes (usdt_sites.h says why).  A pair is keyed by the
 * process and either the thread or an argument's value, read as the
 * site's operand says: a request may start on one thread and end on
 * another.  A second START of a key in flight restarts its clock; a DONE
 * with no START is ignored; when the in-flight map is full, further
 * STARTs are dropped and counted; the STARTs of a thread (-k tid) or a
 * process (-k argN) that exits are reclaimed and counted
 * (pair_state.bpf.h).
 */
#include "probekit.bpf.h"

#include "usdtlat.h"
#include "histogram.bpf.h"
#include "pair_state.bpf.h"
#include "usdt_site.bpf.h"

/* Options, set by user space before load. */
const volatile bool by_arg = false;	/* -k argN: else -k tid */
const volatile __u64 unit_ns = 1000;	/* -n 1, -u 1000, -m 1000000 */

/* Read and cleared by user space through the skeleton's mmap. */
struct hist hist;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PAIR_INFLIGHT_DEFAULT);	/* --max-inflight */
	__type(key, struct usdtlat_key);
	__type(value, __u64);		/* START's time, ns */
} start SEC(".maps");

static __always_inline int pair_key(struct pt_regs *ctx,
				    struct usdtlat_key *key)
{
	__u64 id = bpf_get_current_pid_tgid();
	const struct usdt_site *site;

	key->tgid = id >> 32;
	key->tid = 0;
	key->val = 0;
	if (!by_arg) {
		key->tid = (__u32)id;
		return 0;
	}
	site = usdt_site_this(ctx);
	if (!site)
		return -1;
	key->val = usdt_site_arg(ctx, &site->arg);
	return 0;
}

SEC("uprobe")
int lat_start(struct pt_regs *ctx)
{
	struct usdtlat_key key;
	__u64 ts = bpf_ktime_get_ns();

	hit_count();
	if (pair_key(ctx, &key))
		return 0;
	pair_start(&start, &key, &ts);
	return 0;
}

SEC("uprobe")
int lat_done(struct pt_regs *ctx)
{
	struct usdtlat_key key;
	__u64 *tsp, delta;

	hit_count();
	if (pair_key(ctx, &key))
		return 0;
	tsp = bpf_map_lookup_elem(&start, &key);
	if (!tsp)
		return 0;	/* started before tracing did */
	delta = (bpf_ktime_get_ns() - *tsp) / unit_ns;
	bpf_map_delete_elem(&start, &key);
	__sync_fetch_and_add(&hist.slots[hist_slot(delta, false, 1)], 1);
	return 0;
}

/* --gate: attached only for the semaphore it raises. */
SEC("uprobe")
int gate(struct pt_regs *ctx)
{
	return 0;
}

SEC("raw_tp/sched_process_exit")
int lat_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct usdtlat_key key = { .tgid = id >> 32, .tid = (__u32)id };

	return pair_on_exit(ctx, &start, by_arg ? NULL : &key);
}

/* bpf_probe_read_user() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
