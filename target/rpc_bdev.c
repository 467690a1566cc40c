// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_bdev.c: bdev_* methods.  They run on reactor 0, which owns the bdev
 * registry.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bdev.h"
#include "bdev_delay.h"
#include "bdev_file.h"
#include "bdev_malloc.h"
#include "bdev_null.h"
#include "rpc_bdev.h"
#include "reactor.h"

#define NAME_PARAM(req_, st) \
	{ "name", RPC_PARAM_STRING, req_, offsetof(st, name), sizeof(((st *)0)->name), 0, 0 }

struct create_params {
	char name[BDEV_NAME_MAX + 1];
	char path[BDEV_PATH_MAX + 1];
	uint64_t size_mb;
	uint64_t block_size;
};

static const struct rpc_param mem_create_spec[] = {
	NAME_PARAM(true, struct create_params),
	{ "size_mb", RPC_PARAM_U64, true, offsetof(struct create_params, size_mb), 0,
	  1, BDEV_MAX_SIZE_MB },
	{ "block_size", RPC_PARAM_U64, true, offsetof(struct create_params, block_size), 0,
	  BDEV_MIN_BLOCK_SIZE, BDEV_MAX_BLOCK_SIZE },
};

static const struct rpc_param file_create_spec[] = {
	NAME_PARAM(true, struct create_params),
	{ "path", RPC_PARAM_STRING, true, offsetof(struct create_params, path),
	  sizeof(((struct create_params *)0)->path), 0, 0 },
	{ "block_size", RPC_PARAM_U64, true, offsetof(struct create_params, block_size), 0,
	  BDEV_MIN_BLOCK_SIZE, BDEV_MAX_BLOCK_SIZE },
};

/* The error of a failed create, naming what was wrong. */
static void create_error(struct rpc_request *req, const struct create_params *p, int rc)
{
	switch (rc) {
	case -EEXIST:
		rpc_error(req, rc, "bdev '%s' already exists", p->name);
		break;
	case -ENOSPC:
		rpc_error(req, rc, "too many bdevs (at most %d)", BDEV_MAX_COUNT);
		break;
	case -EINVAL:
		if (bdev_check_params(p->name, (uint32_t)p->block_size) != 0)
			rpc_error(req, JSONRPC_INVALID_PARAMS,
				  "invalid params: 'name' must be 1..%d of [A-Za-z0-9_.:-] and "
				  "'block_size' a power of two in %u..%u", BDEV_NAME_MAX,
				  BDEV_MIN_BLOCK_SIZE, BDEV_MAX_BLOCK_SIZE);
		else if (p->path[0])
			rpc_error(req, rc, "%s: not a regular file or block device of at least "
				  "one block", p->path);
		else
			rpc_error(req, JSONRPC_INVALID_PARAMS,
				  "invalid params: 'size_mb' out of range for this bdev type");
		break;
	default:
		if (p->path[0])
			rpc_error(req, rc, "%s: %s", p->path, strerror(-rc));
		else
			rpc_error(req, rc, "cannot create bdev '%s': %s", p->name, strerror(-rc));
	}
}

static void do_mem_create(struct rpc_request *req, const struct json_val *params, bool mem)
{
	struct create_params p = { 0 };
	int rc;

	if (rpc_params(req, params, mem_create_spec, 3, &p, NULL))
		return;
	rc = mem ? bdev_malloc_create(p.name, p.size_mb, (uint32_t)p.block_size, NULL)
		 : bdev_null_create(p.name, p.size_mb, (uint32_t)p.block_size, NULL);
	if (rc)
		create_error(req, &p, rc);
	else
		rpc_result_str(req, p.name);
}

static void rpc_bdev_malloc_create(struct rpc_request *req, const struct json_val *params)
{
	do_mem_create(req, params, true);
}

static void rpc_bdev_null_create(struct rpc_request *req, const struct json_val *params)
{
	do_mem_create(req, params, false);
}

static void rpc_bdev_file_create(struct rpc_request *req, const struct json_val *params)
{
	struct create_params p = { 0 };
	int rc;

	if (rpc_params(req, params, file_create_spec, 3, &p, NULL))
		return;
	rc = bdev_file_create(p.name, p.path, (uint32_t)p.block_size, NULL);
	if (rc)
		create_error(req, &p, rc);
	else
		rpc_result_str(req, p.name);
}

struct delay_params {
	char name[BDEV_NAME_MAX + 1];
	char base[BDEV_NAME_MAX + 1];
	uint64_t read_us;
	uint64_t write_us;
};

static const struct rpc_param delay_create_spec[] = {
	NAME_PARAM(true, struct delay_params),
	{ "base", RPC_PARAM_STRING, true, offsetof(struct delay_params, base),
	  sizeof(((struct delay_params *)0)->base), 0, 0 },
	{ "read_us", RPC_PARAM_U64, true, offsetof(struct delay_params, read_us), 0,
	  0, BDEV_DELAY_MAX_US },
	{ "write_us", RPC_PARAM_U64, true, offsetof(struct delay_params, write_us), 0,
	  0, BDEV_DELAY_MAX_US },
};

/* bdev_delay_create {name, base, read_us, write_us} */
static void rpc_bdev_delay_create(struct rpc_request *req, const struct json_val *params)
{
	struct delay_params p = { 0 };
	int rc;

	if (rpc_params(req, params, delay_create_spec, 4, &p, NULL))
		return;
	rc = bdev_delay_create(p.name, p.base, p.read_us, p.write_us, NULL);
	if (rc == -EEXIST)
		rpc_error(req, rc, "bdev '%s' already exists", p.name);
	else if (rc == -ENODEV)
		rpc_error(req, rc, "no base bdev named '%s'", p.base);
	else if (rc == -EINVAL)
		rpc_error(req, JSONRPC_INVALID_PARAMS,
			  "invalid params: 'name' must be 1..%d of [A-Za-z0-9_.:-]",
			  BDEV_NAME_MAX);
	else if (rc == -ENOSPC)
		rpc_error(req, rc, "too many bdevs (at most %d)", BDEV_MAX_COUNT);
	else if (rc)
		rpc_error(req, rc, "cannot create bdev '%s': %s", p.name, strerror(-rc));
	else
		rpc_result_str(req, p.name);
}

struct name_params {
	char name[BDEV_NAME_MAX + 1];
};

static const struct rpc_param name_spec[] = { NAME_PARAM(true, struct name_params) };

static void rpc_bdev_delete(struct rpc_request *req, const struct json_val *params)
{
	struct name_params p = { 0 };
	struct bdev *b;
	int rc;

	if (rpc_params(req, params, name_spec, 1, &p, NULL))
		return;
	b = bdev_lookup(p.name);
	rc = bdev_delete(p.name);
	if (rc == -ENOENT)
		rpc_error(req, rc, "no bdev named '%s'", p.name);
	else if (rc == -EBUSY && b->stacked)
		rpc_error(req, rc, "bdev '%s' is the base of %u delay bdev(s); delete them first",
			  p.name, b->stacked);
	else if (rc == -EBUSY)
		rpc_error(req, rc, "bdev '%s' is in use by %u export(s) and %u workload(s)",
			  p.name, b->exports, b->users);
	else if (rc)
		rpc_error(req, rc, "bdev '%s': %s", p.name, strerror(-rc));
	else
		rpc_result_bool(req, true);
}

static void rpc_bdev_list(struct rpc_request *req, const struct json_val *params)
{
	struct json_writer *w;

	if (rpc_params(req, params, NULL, 0, NULL, NULL))
		return;
	w = rpc_result_begin(req);
	jw_arr_begin(w);
	for (struct bdev *b = bdev_first(); b; b = b->next) {
		jw_obj_begin(w);
		jw_kv_str(w, "name", b->name);
		jw_kv_str(w, "type", b->type);
		jw_kv_u64(w, "num_blocks", b->num_blocks);
		jw_kv_u64(w, "block_size", b->block_size);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	rpc_result_end(req);
}

/* bdev_flush {name}: one FLUSH of the whole bdev through bdev_submit() on
 * reactor 0; replies when it has completed (for a file bdev: fdatasync). */
struct flush_ctx {
	struct rpc_request *req;
	struct bdev_io io;
};

static void flush_done(struct bdev_io *io, void *ctx)
{
	struct flush_ctx *f = ctx;

	io->bdev->users--;
	if (io->status)
		rpc_error(f->req, io->status, "flush of bdev '%s' failed: %s", io->bdev->name,
			  strerror(-io->status));
	else
		rpc_result_bool(f->req, true);
	free(f);
}

static void rpc_bdev_flush(struct rpc_request *req, const struct json_val *params)
{
	struct name_params p = { 0 };
	struct flush_ctx *f;
	struct bdev *b;
	int rc;

	if (rpc_params(req, params, name_spec, 1, &p, NULL))
		return;
	b = bdev_lookup(p.name);
	if (!b) {
		rpc_error(req, -ENOENT, "no bdev named '%s'", p.name);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		rpc_error(req, -ENOMEM, "out of memory");
		return;
	}
	f->req = req;
	f->io.bdev = b;
	f->io.type = BDEV_IO_FLUSH;
	f->io.cb = flush_done;
	f->io.cb_ctx = f;
	b->users++;
	rc = bdev_submit(&f->io);
	if (rc) {
		b->users--;
		free(f);
		rpc_error(req, rc, "flush of bdev '%s' refused: %s", p.name, strerror(-rc));
	}
}

const struct rpc_method rpc_bdev_methods[] = {
	{ "bdev_malloc_create", rpc_bdev_malloc_create },
	{ "bdev_null_create", rpc_bdev_null_create },
	{ "bdev_file_create", rpc_bdev_file_create },
	{ "bdev_delay_create", rpc_bdev_delay_create },
	{ "bdev_delete", rpc_bdev_delete },
	{ "bdev_list", rpc_bdev_list },
	{ "bdev_flush", rpc_bdev_flush },
	{ NULL, NULL },
};
