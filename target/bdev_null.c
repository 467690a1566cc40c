// SPDX-License-Identifier: BSD-2-Clause
/*
 * bdev_null.c: a bdev that discards writes and reads zeroes.  It measures
 * the cost of everything around the backend (NBD, the I/O path, probes).
 */
#include <errno.h>
#include <string.h>

#include "bdev_null.h"

static int64_t null_execute(struct bdev *b, enum bdev_io_type type, uint64_t offset,
			    uint64_t len, void *buf, bool fua)
{
	if (type == BDEV_IO_READ)
		memset(buf, 0, len);
	return (int64_t)len;
}

static void null_destroy(struct bdev *b)
{
}

static const struct bdev_ops null_ops = {
	.type = "null",
	.execute = null_execute,
	.destroy = null_destroy,
};

int bdev_null_create(const char *name, uint64_t size_mb, uint32_t block_size, struct bdev **out)
{
	int rc = bdev_check_params(name, block_size);

	if (rc)
		return rc;
	if (size_mb == 0 || size_mb > BDEV_MAX_SIZE_MB)
		return -EINVAL;
	return bdev_register(name, &null_ops, (size_mb << 20) / block_size, block_size,
			     NULL, out);
}
