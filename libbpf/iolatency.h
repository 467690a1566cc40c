// SPDX-License-Identifier: BSD-2-Clause
/* iolatency.h: what iolatency.bpf.c and iolatency.c share. */
#ifndef PROBEKIT_IOLATENCY_H
#define PROBEKIT_IOLATENCY_H

#include "histogram.h"
#include "blktgt_io.h"

#endif
