// SPDX-License-Identifier: BSD-2-Clause
/* rpclat.h: what rpclat.bpf.c and rpclat.c share. */
#ifndef PROBEKIT_RPCLAT_H
#define PROBEKIT_RPCLAT_H

#include "histogram.h"

#define METHOD_LEN   64		/* RPC method names (bcc/'s NAME_LEN) */
#define MAX_METHODS  1024	/* distinct methods */

struct method_key {
	char method[METHOD_LEN];
};

#endif
