// SPDX-License-Identifier: BSD-2-Clause
/*
 * blktgt_io.h: what the libbpf tools know about blktgt's I/O probes,
 * shared by BPF and user space.
 *
 *   io__submit(u64 id, char *bdev, u32 type, u64 offset, u64 len,
 *              char *type_name)
 *   io__done(u64 id, char *bdev, u32 type, u64 len, s32 status,
 *            char *type_name)
 *
 * Name lengths and the in-flight table come from specs/limits.toml
 * (NAME_LEN, TYPE_LEN, MAX_INFLIGHT), as the bcc/ tools' do, so both
 * families of tools truncate names alike.  The histogram maps are sized
 * by --max-keys (HIST_KEYS_MAX unless given) before load; the bcc/ tools
 * bound their keys the same, so both drop (and count) the same values.
 */
#ifndef PROBEKIT_BLKTGT_IO_H
#define PROBEKIT_BLKTGT_IO_H

/* NAME_LEN, TYPE_LEN, MAX_INFLIGHT: specs/limits.toml, which the bcc/
 * tools read too. */
#include "probekit_limits.h"
#define BDEV_LEN     NAME_LEN	/* bdev names */
#define IOTYPE_LEN   TYPE_LEN	/* I/O type names */
#define MAX_HISTS    HIST_KEYS_MAX	/* distinct histogram keys, before --max-keys */

/* A histogram per key.  A field the user did not split by (-B, -O) stays
 * empty, so without options there is a single histogram. */
struct io_key {
	char bdev[BDEV_LEN];
	char type[IOTYPE_LEN];
};

#ifndef __bpf__
#include <stdbool.h>
#include "histogram.h"

struct bpf_map;

/*
 * Read and clear a hash map of struct io_key -> struct hist into sorted
 * entries, each a copy of proto named by the fields split by (-B: bdev,
 * -O: type), or proto alone when the map is empty (output_emit()).
 * Returns how many (*out to be freed) or -errno.
 */
int io_collect(const struct bpf_map *map, bool per_bdev, bool per_type,
	       const struct hist_entry *proto, struct hist_entry **out);
#endif

#endif
