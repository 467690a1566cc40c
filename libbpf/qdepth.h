// SPDX-License-Identifier: BSD-2-Clause
/* qdepth.h: what qdepth.bpf.c and qdepth.c share. */
#ifndef PROBEKIT_QDEPTH_H
#define PROBEKIT_QDEPTH_H

#include "histogram.h"
#include "blktgt_io.h"

#define MAX_BDEVS 1024		/* bdevs whose in-flight count is kept */

struct bdev_key {
	char bdev[BDEV_LEN];
};

#endif
