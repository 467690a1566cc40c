// SPDX-License-Identifier: BSD-2-Clause
/* funclat.h: what funclat.bpf.c and funclat.c share. */
#ifndef PROBEKIT_FUNCLAT_H
#define PROBEKIT_FUNCLAT_H

#include "histogram.h"
#include "pair_state.h"

/* The three histograms, in the order they are printed. */
enum funclat_hist {
	FUNCLAT_ARG,		/* the argument at entry */
	FUNCLAT_RETVAL,		/* non-negative return values */
	FUNCLAT_LATENCY,	/* entry to return */
	FUNCLAT_NHISTS,
};

#endif
