/*
 * funclat.bpf.c: a function's argument, return value and latency, by
 * uprobe and uretprobe.
 *
 * Entry and return of one call run on the same thread, so the entry time
 * is keyed by thread id (unlike an I/O, which may finish elsewhere); the
 * key is deleted at return.  The histograms are global variables that
 * user space reads through the skeleton's mmap and clears slot by slot
 * with an atomic exchange, so no count is lost between intervals.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "funclat.h"
#include "histogram.bpf.h"

/* libbpf before 1.2 stops at PT_REGS_PARM5: the sixth integer argument
 * register of the C calling convention. */
#ifndef PT_REGS_PARM6_CORE
#if defined(__TARGET_ARCH_x86)
#define PT_REGS_PARM6_CORE(x) BPF_CORE_READ((struct pt_regs *)(x), r9)
#elif defined(__TARGET_ARCH_arm64)
#define PT_REGS_PARM6_CORE(x) BPF_CORE_READ((struct user_pt_regs *)(x), regs[5])
#else
#error "funclat: the sixth argument register is unknown for this architecture"
#endif
#endif

/* Options, set by user space before load. */
const volatile __u32 arg_index = 4;	/* -a: 1..6 */
const volatile __u64 arg_mask = ~0ULL;	/* --arg-bits 32: 0xffffffff */
const volatile __u64 unit_ns = 1;	/* -n 1, -u 1000, -m 1000000 */

struct hist hists[FUNCLAT_NHISTS];
__u64 negative;				/* returns < 0: errors */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);		/* thread id */
	__type(value, __u64);		/* entry time, ns */
} start SEC(".maps");

/* The _CORE reads go through a helper: clang folds a switch of direct
 * ctx loads into one load at a computed offset, which the verifier
 * refuses. */
static __always_inline __u64 nth_arg(struct pt_regs *ctx)
{
	switch (arg_index) {
	case 1: return PT_REGS_PARM1_CORE(ctx);
	case 2: return PT_REGS_PARM2_CORE(ctx);
	case 3: return PT_REGS_PARM3_CORE(ctx);
	case 4: return PT_REGS_PARM4_CORE(ctx);
	case 5: return PT_REGS_PARM5_CORE(ctx);
	default: return PT_REGS_PARM6_CORE(ctx);
	}
}

SEC("uprobe")
int func_entry(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 ts = bpf_ktime_get_ns();
	__u64 arg = nth_arg(ctx) & arg_mask;

	__sync_fetch_and_add(&hists[FUNCLAT_ARG].slots[hist_slot(arg, false, 1)],
			     1);
	bpf_map_update_elem(&start, &tid, &ts, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int func_return(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__s64 ret = PT_REGS_RC(ctx);
	__u64 *tsp, delta;

	tsp = bpf_map_lookup_elem(&start, &tid);
	if (!tsp)
		return 0;	/* entered before tracing started */
	delta = (bpf_ktime_get_ns() - *tsp) / unit_ns;
	bpf_map_delete_elem(&start, &tid);

	__sync_fetch_and_add(
		&hists[FUNCLAT_LATENCY].slots[hist_slot(delta, false, 1)], 1);
	if (ret < 0)
		__sync_fetch_and_add(&negative, 1);
	else
		__sync_fetch_and_add(
			&hists[FUNCLAT_RETVAL].slots[hist_slot(ret, false, 1)], 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
