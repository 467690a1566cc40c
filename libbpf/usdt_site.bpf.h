// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * usdt_site.bpf.h: the site a uprobe stopped at (its BPF cookie indexes
 * the sites map, which user space fills before attaching), and the
 * argument it describes, read from the registers and user memory as the
 * operand says.  Each tool defines the sites map; usdt_site.h says why.
 */
#ifndef PROBEKIT_USDT_SITE_BPF_H
#define PROBEKIT_USDT_SITE_BPF_H

#include "usdt_site.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, USDT_SITES_MAX);
	__type(key, __u32);
	__type(value, struct usdt_site);
} sites SEC(".maps");

/* The site of this hit, NULL when the cookie is out of range. */
static __always_inline const struct usdt_site *usdt_site_this(void *ctx)
{
	__u32 i = (__u32)bpf_get_attach_cookie(ctx);

	return bpf_map_lookup_elem(&sites, &i);
}

/*
 * The argument a describes, widened to 64 bits by its size and sign as
 * the compiler wrote the operand ("-4@..." is a signed int).  0 when
 * reading fails: a pointer into memory the process never touched.
 */
static __always_inline __u64 usdt_site_arg(struct pt_regs *ctx,
					   const struct usdt_site_arg *a)
{
	__u64 v = 0, reg = 0;
	__u32 shift;

	if (a->kind == USDT_SITE_CONST)
		v = a->val;
	if (a->kind == USDT_SITE_REG || a->kind == USDT_SITE_DEREF) {
		if (a->reg_off > sizeof(struct pt_regs) - sizeof(reg))
			return 0;
		bpf_probe_read_kernel(&reg, sizeof(reg),
				      (void *)ctx + a->reg_off);
		v = reg;
	}
	if (a->kind == USDT_SITE_DEREF) {
		v = 0;
		/* Little-endian: the low size bytes of v are the operand. */
		switch (a->size) {
		case 1: bpf_probe_read_user(&v, 1, (void *)(reg + a->val)); break;
		case 2: bpf_probe_read_user(&v, 2, (void *)(reg + a->val)); break;
		case 4: bpf_probe_read_user(&v, 4, (void *)(reg + a->val)); break;
		default: bpf_probe_read_user(&v, 8, (void *)(reg + a->val)); break;
		}
	}
	if (a->size >= 8 || !a->size)
		return v;
	shift = 64 - a->size * 8;
	v <<= shift;
	return a->is_signed ? (__u64)((__s64)v >> shift) : v >> shift;
}

#endif
