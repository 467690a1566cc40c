// SPDX-License-Identifier: BSD-2-Clause
/*
 * bdev_null.h: the null backend (bdev_null.c): reads return zeroes,
 * writes are dropped.
 *
 * Reactor 0 only.  0 or -EEXIST/-EINVAL/-ENOMEM/-errno; *out (when not
 * NULL) gets the new bdev.
 */
#ifndef BLKTGT_BDEV_NULL_H
#define BLKTGT_BDEV_NULL_H

#include <stdint.h>

#include "bdev.h"

int bdev_null_create(const char *name, uint64_t size_mb, uint32_t block_size, struct bdev **out);

#endif
