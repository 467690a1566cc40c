// SPDX-License-Identifier: BSD-2-Clause
/*
 * bdev_file.h: the file backend (bdev_file.c), on a regular file or a
 * block device.
 *
 * Reactor 0 only.  0 or -EEXIST/-EINVAL/-ENOMEM/-errno; *out (when not
 * NULL) gets the new bdev.
 */
#ifndef BLKTGT_BDEV_FILE_H
#define BLKTGT_BDEV_FILE_H

#include <stdint.h>

#include "bdev.h"

int bdev_file_create(const char *name, const char *path, uint32_t block_size, struct bdev **out);

#endif
