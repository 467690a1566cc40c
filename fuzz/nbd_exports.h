// SPDX-License-Identifier: BSD-2-Clause
/*
 * nbd_exports.h: a table of exports behind the NBD engine's lookup and
 * list callbacks, for the harnesses that drive it (nbd_fuzz.c, the
 * fuzzer; nbd_proto_unit.c, its unit test), each with its own table.
 */
#ifndef PROBEKIT_FUZZ_NBD_EXPORTS_H
#define PROBEKIT_FUZZ_NBD_EXPORTS_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "nbd_proto.h"

/* name's export of the n in v into *out, the first for "" (the default
 * export); -ENOENT when none has that name. */
static inline int nbd_exports_lookup(const struct nbd_export_info *v, size_t n,
				     const char *name, struct nbd_export_info *out)
{
	if (!*name)
		name = v[0].name;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(name, v[i].name)) {
			*out = v[i];
			return 0;
		}
	}
	return -ENOENT;
}

/* fn for each of the n exports in v, in order, until one returns non-zero. */
static inline int nbd_exports_list(const struct nbd_export_info *v, size_t n,
				   nbd_list_fn fn, void *fctx)
{
	for (size_t i = 0; i < n; i++) {
		int rc = fn(fctx, &v[i]);

		if (rc)
			return rc;
	}
	return 0;
}

#endif
