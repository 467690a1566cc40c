// SPDX-License-Identifier: BSD-2-Clause
/* iosize.h: what iosize.bpf.c and iosize.c share. */
#ifndef PROBEKIT_IOSIZE_H
#define PROBEKIT_IOSIZE_H

#include "histogram.h"
#include "blktgt_io.h"

#endif
