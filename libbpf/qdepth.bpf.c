// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * qdepth.bpf.c: at each blktgt:io__submit, how many I/Os the bdev then
 * has in flight, this one included, as a linear histogram per bdev.
 *
 * An I/O in flight is remembered by its id (io__submit's and io__done's
 * first argument), never by thread: it may complete on another reactor.
 * io__done of a remembered id deletes it and lowers the bdev's count;
 * I/Os already in flight at attach are not seen, so the first depths
 * after attach may read low.  A submit that finds either table full (the
 * ids, --max-inflight; the bdevs, MAX_BDEVS) is left out and counted, and
 * the process's exit reclaims the ids it left in flight
 * (pair_state.bpf.h); its bdevs' counts die with it, as -p's tracing does.
 */
#include "probekit.bpf.h"
#include <bpf/usdt.bpf.h>

#include "qdepth.h"
#include "histogram.bpf.h"
#include "pair_state.bpf.h"

/* An I/O in flight: its process (tid 0: any thread may end it), its id. */
struct qd_id_key {
	struct pair_key_head head;
	__u64 id;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PAIR_INFLIGHT_DEFAULT);	/* --max-inflight */
	__type(key, struct qd_id_key);
	__type(value, __u8);
} inflight_ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_BDEVS);
	__type(key, struct bdev_key);
	__type(value, __s64);		/* I/Os in flight */
} inflight SEC(".maps");

DRAINED_HASH(hists, struct bdev_key, struct hist, MAX_HISTS, BPF_F_NO_PREALLOC);

static __always_inline int handle_submit(__u64 id, const char *bdev)
{
	struct qd_id_key ikey = { .head.tgid = bpf_get_current_pid_tgid() >> 32,
				  .id = id };
	struct bdev_key key = {};
	__s64 zero = 0, *n, depth;
	__u8 one = 1;

	bpf_probe_read_user_str(key.bdev, sizeof(key.bdev), bdev);
	/* The bdev's count first: an id kept without one would lower
	 * another count at its done. */
	n = bpf_map_lookup_elem(&inflight, &key);
	if (!n) {
		bpf_map_update_elem(&inflight, &key, &zero, BPF_NOEXIST);
		n = bpf_map_lookup_elem(&inflight, &key);
		if (!n) {
			pair_count(PAIR_DROPPED);	/* MAX_BDEVS reached */
			return 0;
		}
	}
	if (pair_start(&inflight_ids, &ikey, &one))
		return 0;	/* table full (counted): leave this I/O out */
	depth = __sync_fetch_and_add(n, 1) + 1;
	hist_increment(&hists, &key, hist_slot(depth < 0 ? 0 : depth, true, 1));
	return 0;
}

/* blktgt:io__submit(u64 id, char *bdev, u32 type, u64 offset, u64 len,
 *                   char *type_name) */
SEC("usdt")
int BPF_USDT(io_submit, __u64 id, const char *bdev)
{
	hit_count();
	return handle_submit(id, bdev);
}

static __always_inline int handle_done(__u64 id, const char *bdev)
{
	struct qd_id_key ikey = { .head.tgid = bpf_get_current_pid_tgid() >> 32,
				  .id = id };
	struct bdev_key key = {};
	__s64 *n;

	if (bpf_map_delete_elem(&inflight_ids, &ikey))
		return 0;	/* submitted before tracing started */
	bpf_probe_read_user_str(key.bdev, sizeof(key.bdev), bdev);
	n = bpf_map_lookup_elem(&inflight, &key);
	if (n)
		__sync_fetch_and_add(n, -1);
	return 0;
}

/* blktgt:io__done(u64 id, char *bdev, u32 type, u64 len, s32 status,
 *                 char *type_name) */
SEC("usdt")
int BPF_USDT(io_done, __u64 id, const char *bdev)
{
	hit_count();
	return handle_done(id, bdev);
}

/* A process's exit reclaims the ids it left in flight. */
SEC("raw_tp/sched_process_exit")
int qd_exit(void *ctx)
{
	return pair_on_exit(ctx, &inflight_ids, NULL);
}

/* bpf_probe_read_user_str() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
