// SPDX-License-Identifier: BSD-2-Clause
/*
 * bdev_file.c: a bdev on a regular file (or a block device node) with
 * pread/pwrite on one fd that every reactor shares (positional I/O needs
 * no lock).  Flush is fdatasync(); a FUA write is written with RWF_DSYNC.
 * The file must exist; its size, rounded down to whole blocks, is the
 * bdev's size.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bdev_file.h"
#include "log.h"

struct file_disk {
	int fd;
	bool punch;             /* fallocate(PUNCH_HOLE) still worth trying */
	char path[BDEV_PATH_MAX + 1];
};

static int64_t file_rw(struct file_disk *d, bool write, uint64_t offset, uint64_t len,
		       void *buf, bool fua)
{
	uint64_t done = 0;

	while (done < len) {
		struct iovec iov = { (char *)buf + done, len - done };
		ssize_t n;

		if (write)
			n = pwritev2(d->fd, &iov, 1, offset + done, fua ? RWF_DSYNC : 0);
		else
			n = preadv2(d->fd, &iov, 1, offset + done, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0) {
			if (write)
				return -EIO;
			/* The file shrank under us: what is not there reads as zero. */
			memset((char *)buf + done, 0, len - done);
			break;
		}
		done += n;
	}
	return (int64_t)len;
}

static int64_t file_execute(struct bdev *b, enum bdev_io_type type, uint64_t offset,
			    uint64_t len, void *buf, bool fua)
{
	struct file_disk *d = b->priv;

	switch (type) {
	case BDEV_IO_READ:
		return file_rw(d, false, offset, len, buf, false);
	case BDEV_IO_WRITE:
		return file_rw(d, true, offset, len, buf, fua);
	case BDEV_IO_FLUSH:
		if (fdatasync(d->fd) < 0)
			return -errno;
		return (int64_t)len;
	case BDEV_IO_TRIM:
		/* Trim is advisory: where holes cannot be punched, keep the data. */
		if (d->punch && fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					  (off_t)offset, (off_t)len) < 0) {
			if (errno != EOPNOTSUPP && errno != ENOSYS)
				return -errno;
			d->punch = false;
		}
		return (int64_t)len;
	default:
		return -EINVAL;
	}
}

static void file_destroy(struct bdev *b)
{
	struct file_disk *d = b->priv;

	close(d->fd);
	free(d);
}

static const struct bdev_ops file_ops = {
	.type = "file",
	.execute = file_execute,
	.destroy = file_destroy,
};

int bdev_file_create(const char *name, const char *path, uint32_t block_size, struct bdev **out)
{
	struct file_disk *d;
	struct stat st;
	uint64_t size;
	int rc = bdev_check_params(name, block_size);

	if (rc)
		return rc;
	if (path[0] == '\0' || strlen(path) > BDEV_PATH_MAX)
		return -EINVAL;
	if (bdev_lookup(name))
		return -EEXIST;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	strcpy(d->path, path);
	d->punch = true;
	d->fd = open(path, O_RDWR | O_CLOEXEC);
	if (d->fd < 0) {
		rc = -errno;
		free(d);
		return rc;
	}
	if (fstat(d->fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	if (S_ISREG(st.st_mode)) {
		size = (uint64_t)st.st_size;
	} else if (S_ISBLK(st.st_mode)) {
		if (ioctl(d->fd, BLKGETSIZE64, &size) < 0) {
			rc = -errno;
			goto fail;
		}
		d->punch = false;
	} else {
		rc = -EINVAL;
		goto fail;
	}
	if (size < block_size) {
		rc = -EINVAL;   /* not even one block */
		goto fail;
	}
	rc = bdev_register(name, &file_ops, size / block_size, block_size, d, out);
	if (rc == 0)
		return 0;
fail:
	close(d->fd);
	free(d);
	return rc;
}
