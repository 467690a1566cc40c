// SPDX-License-Identifier: BSD-2-Clause
/* rpclat.h: what rpclat.bpf.c and rpclat.c share. */
#ifndef PROBEKIT_RPCLAT_H
#define PROBEKIT_RPCLAT_H

#include "histogram.h"
/* NAME_LEN (RPC method names, as bcc/rpclat truncates them) and
 * HIST_KEYS_MAX: specs/limits.toml. */
#include "probekit_limits.h"

struct method_key {
	char method[NAME_LEN];
};

#endif
