// SPDX-License-Identifier: BSD-2-Clause
/* usdtlat.h: what usdtlat.bpf.c and usdtlat.c share. */
#ifndef PROBEKIT_USDTLAT_H
#define PROBEKIT_USDTLAT_H

#include "histogram.h"
#include "pair_state.h"
#include "usdt_site.h"

/* A pair's key, within one process: the thread (-k tid: val 0) or an
 * argument's value (-k argN: tid 0).  It starts with struct
 * pair_key_head, so pair_state.bpf.h reclaims it. */
struct usdtlat_key {
	__u32 tgid;
	__u32 tid;
	__u64 val;
};

#endif
