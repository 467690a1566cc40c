// SPDX-License-Identifier: BSD-2-Clause
/* usdtlat.h: what usdtlat.bpf.c and usdtlat.c share. */
#ifndef PROBEKIT_USDTLAT_H
#define PROBEKIT_USDTLAT_H

#include "histogram.h"
#include "usdt_site.h"

#define USDTLAT_INFLIGHT_MAX 65536	/* STARTs awaiting their DONE */

/* A pair's key: the thread (-k tid) or an argument's value (-k argN),
 * within one process. */
struct usdtlat_key {
	__u32 tgid;
	__u32 pad;
	__u64 val;
};

#endif
