// SPDX-License-Identifier: BSD-2-Clause
/*
 * bdev_malloc.c: a bdev in RAM.  The memory comes from mmap, so untouched
 * blocks cost nothing and read as zeroes; trim gives pages back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bdev_malloc.h"

struct malloc_disk {
	unsigned char *mem;
	uint64_t size;
};

static int64_t malloc_execute(struct bdev *b, enum bdev_io_type type, uint64_t offset,
			      uint64_t len, void *buf, bool fua)
{
	struct malloc_disk *d = b->priv;

	switch (type) {
	case BDEV_IO_READ:
		memcpy(buf, d->mem + offset, len);
		break;
	case BDEV_IO_WRITE:
		memcpy(d->mem + offset, buf, len);
		break;
	case BDEV_IO_TRIM:
		memset(d->mem + offset, 0, len);
		break;
	case BDEV_IO_FLUSH:
		break;
	default:
		return -EINVAL;
	}
	return (int64_t)len;
}

static void malloc_destroy(struct bdev *b)
{
	struct malloc_disk *d = b->priv;

	munmap(d->mem, d->size);
	free(d);
}

static const struct bdev_ops malloc_ops = {
	.type = "malloc",
	.execute = malloc_execute,
	.destroy = malloc_destroy,
};

int bdev_malloc_create(const char *name, uint64_t size_mb, uint32_t block_size, struct bdev **out)
{
	struct malloc_disk *d;
	int rc = bdev_check_params(name, block_size);

	if (rc)
		return rc;
	if (size_mb == 0 || size_mb > BDEV_MALLOC_MAX_SIZE_MB)
		return -EINVAL;
	if (bdev_lookup(name))
		return -EEXIST;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->size = size_mb << 20;
	d->mem = mmap(NULL, d->size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (d->mem == MAP_FAILED) {
		free(d);
		return -ENOMEM;
	}
	rc = bdev_register(name, &malloc_ops, d->size / block_size, block_size, d, out);
	if (rc) {
		munmap(d->mem, d->size);
		free(d);
	}
	return rc;
}
