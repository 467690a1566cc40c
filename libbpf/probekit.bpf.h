// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * probekit.bpf.h: what every probekit BPF program includes first.
 *
 * The kernel's types come from vmlinux.h, generated at build time from the
 * kernel's BTF, as in libbpf-tools.  The one kernel type these programs
 * touch is struct pt_regs, the user registers at a uprobe or USDT probe:
 * its layout is the architecture's ABI (the ptrace and signal-frame
 * layout), which no kernel changes.  So vmlinux.h is included without
 * preserve_access_index: field accesses compile to plain offsets, the
 * objects carry no CO-RE relocation, and libbpf never reads the running
 * kernel's BTF (/sys/kernel/btf/vmlinux, megabytes) at start-up.  That
 * parse and the relocation search cost 35-45 ms of a 60-80 ms start here;
 * without them a tool is tracing in about 25-35 ms.  A program that needs
 * a kernel structure whose layout does change must use BPF_CORE_READ(),
 * which still records a relocation.
 */
#ifndef PROBEKIT_BPF_H
#define PROBEKIT_BPF_H

#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* The sixth integer argument register of the C calling convention;
 * libbpf before 1.2 names only the first five. */
#if defined(__TARGET_ARCH_x86)
#define PK_PARM6_REG r9
#elif defined(__TARGET_ARCH_arm64)
#define PK_PARM6_REG regs[5]
#else
#error "probekit: the sixth argument register is unknown for this architecture"
#endif

/* Argument n (1..6) of the function a uprobe stopped at.  One helper read
 * at an offset picked by n: clang would fold direct ctx loads of a switch
 * into one load at a computed offset, which the verifier refuses. */
static __always_inline __u64 pk_regs_arg(struct pt_regs *ctx, __u32 n)
{
	typedef typeof(*__PT_REGS_CAST(ctx)) regs_t;
	__u64 off, v = 0;

	switch (n) {
	case 1: off = __builtin_offsetof(regs_t, __PT_PARM1_REG); break;
	case 2: off = __builtin_offsetof(regs_t, __PT_PARM2_REG); break;
	case 3: off = __builtin_offsetof(regs_t, __PT_PARM3_REG); break;
	case 4: off = __builtin_offsetof(regs_t, __PT_PARM4_REG); break;
	case 5: off = __builtin_offsetof(regs_t, __PT_PARM5_REG); break;
	default: off = __builtin_offsetof(regs_t, PK_PARM6_REG); break;
	}
	bpf_probe_read_kernel(&v, sizeof(v), (void *)ctx + off);
	return v;
}

/* pk_bit_length(): plain C, which host tests compile too. */
#include "pk_bits.h"

#endif
