// SPDX-License-Identifier: BSD-2-Clause
/*
 * bdev_malloc.h: the RAM backend (bdev_malloc.c).
 *
 * Reactor 0 only.  0 or -EEXIST/-EINVAL/-ENOMEM/-errno; *out (when not
 * NULL) gets the new bdev.
 */
#ifndef BLKTGT_BDEV_MALLOC_H
#define BLKTGT_BDEV_MALLOC_H

#include <stdint.h>

#include "bdev.h"

int bdev_malloc_create(const char *name, uint64_t size_mb, uint32_t block_size, struct bdev **out);

#endif
