// SPDX-License-Identifier: BSD-2-Clause
/*
 * bdev_delay.h: the delay backend (bdev_delay.c), stacked over another
 * bdev.  Reactor 0 only.
 */
#ifndef BLKTGT_BDEV_DELAY_H
#define BLKTGT_BDEV_DELAY_H

#include <stdint.h>

#include "bdev.h"

/* A bdev over base whose reads and writes complete read_us / write_us
 * after submission (flush and trim are not delayed); base cannot be
 * deleted while it exists (base->stacked).  0 or -EEXIST, -EINVAL,
 * -ENODEV (no base), -ENOSPC, -ENOMEM. */
#define BDEV_DELAY_MAX_US 10000000ull   /* 10 s */
int bdev_delay_create(const char *name, const char *base, uint64_t read_us, uint64_t write_us,
		      struct bdev **out);

#endif
