// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * iosize.bpf.c: the len argument (bytes) of every blktgt:io__submit, as a
 * log2 histogram per (bdev, type) key.
 */
#include "probekit.bpf.h"
#include <bpf/usdt.bpf.h>

#include "iosize.h"
#include "histogram.bpf.h"

/* Options, set by user space before load. */
const volatile bool per_bdev = false;	/* -B */
const volatile bool per_type = false;	/* -O */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_HISTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct io_key);
	__type(value, struct hist);
} hists SEC(".maps");

static __always_inline int handle_submit(const char *bdev, __u64 len,
					 const char *type_name)
{
	struct io_key key = {};

	/* _str stops at the NUL of a zeroed key: equal names, equal keys. */
	if (per_bdev)
		bpf_probe_read_user_str(key.bdev, sizeof(key.bdev), bdev);
	if (per_type)
		bpf_probe_read_user_str(key.type, sizeof(key.type), type_name);
	hist_increment(&hists, &key, hist_slot(len, false, 1));
	return 0;
}

/* blktgt:io__submit(u64 id, char *bdev, u32 type, u64 offset, u64 len,
 *                   char *type_name) */
SEC("usdt")
int BPF_USDT(io_submit, __u64 id, const char *bdev, __u32 type,
	     __u64 offset, __u64 len, const char *type_name)
{
	hit_count();
	return handle_submit(bdev, len, type_name);
}

/* bpf_probe_read_user_str() needs a GPL-compatible program. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
