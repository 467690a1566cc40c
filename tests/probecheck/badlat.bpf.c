// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* badlat.bpf.c: a libbpf program with the mistakes probecheck must catch
 * (tests/test_probecheck.py); badlat.c attaches it. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

SEC("usdt")
int BPF_USDT(on_submit, __u64 id, const char *bdev, __u32 type)
{
	long v;

	bpf_usdt_arg(ctx, 5, &v);
	bpf_usdt_arg(ctx, 6, &v);
	return 0;
}

SEC("usdt")
int BPF_USDT(on_done, __u64 id, const char *bdev, __u32 type, __u64 len,
	     __s32 status, const char *type_name, __u64 extra)
{
	return 0;
}

SEC("usdt")
int BPF_USDT(on_request, __u64 id, __u32 method)
{
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(on_bdev_execute)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
