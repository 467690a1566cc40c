// SPDX-License-Identifier: BSD-2-Clause
/* usdtcount.h: what usdtcount.bpf.c and usdtcount.c share. */
#ifndef PROBEKIT_USDTCOUNT_H
#define PROBEKIT_USDTCOUNT_H

#include "histogram.h"
#include "usdt_site.h"

#define USDTCOUNT_PROBES_MAX 1024	/* distinct probes counted at once */
#define USDTCOUNT_STR_LEN 64		/* -S: bytes of a string, NUL included */
/* -S: the distinct strings kept per interval, by default
 * (USDTCOUNT_STRS_MAX; --max-strings, up to USDTCOUNT_STRS_LIMIT):
 * specs/limits.toml, which bcc/ reads too. */
#include "probekit_limits.h"

enum usdtcount_mode {
	USDTCOUNT_COUNT,	/* hits per probe */
	USDTCOUNT_HIST,		/* -H argN: log2 histogram per probe */
	USDTCOUNT_STR,		/* -S argN: hits per string value per probe */
};

struct usdtcount_str {
	__u32 probe;
	char s[USDTCOUNT_STR_LEN];
};

#endif
