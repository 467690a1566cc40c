// SPDX-License-Identifier: BSD-2-Clause
/*
 * usdt_site.h: one USDT probe site as the generic tools' BPF programs see
 * it, shared by user space (usdt_sites.c fills it) and BPF (usdt_site.bpf.h
 * reads an argument with it).
 *
 * The generic tools attach a plain uprobe at each site (libbpf 1.1's
 * USDT attach refuses a probe any of whose operands it cannot parse), with
 * the site's index in the sites map as the BPF cookie.  So the argument a
 * tool reads is described here, operand by operand, not by libbpf.
 */
#ifndef PROBEKIT_USDT_SITE_H
#define PROBEKIT_USDT_SITE_H

#define USDT_SITES_MAX 4096	/* sites attached by one tool */

/* How to read one argument operand at a site. */
enum usdt_site_kind {
	USDT_SITE_NONE,		/* no argument is read */
	USDT_SITE_CONST,	/* $imm: the value is val */
	USDT_SITE_REG,		/* %reg: the register at reg_off */
	USDT_SITE_DEREF,	/* val(%reg): size bytes at register + val */
};

struct usdt_site_arg {
	__u32 kind;		/* enum usdt_site_kind */
	__u32 reg_off;		/* offset of the register in struct pt_regs */
	__u32 size;		/* bytes: 1, 2, 4 or 8 */
	__u32 is_signed;
	__s64 val;		/* the constant, or the displacement */
};

struct usdt_site {
	__u32 probe;		/* the tool's index of the site's probe */
	__u32 pad;
	struct usdt_site_arg arg;
};

#endif
