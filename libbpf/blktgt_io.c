// SPDX-License-Identifier: BSD-2-Clause
/*
 * blktgt_io.c: turn the per-(bdev, type) histograms of iolatency and
 * iosize into what output_emit() prints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/types.h>

#include "blktgt_io.h"
#include "tool_drain.h"

int io_collect(const struct bpf_map *map, bool per_bdev, bool per_type,
	       const struct hist_entry *proto, struct hist_entry **out)
{
	struct io_key *keys;
	struct hist *hists;
	struct hist_entry *e;
	int n = hist_entries_drain(map, (void **)&keys, &hists, &e);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		e[i] = *proto;
		e[i].nkeys = 0;
		if (per_bdev) {
			e[i].key_names[e[i].nkeys] = "bdev";
			snprintf(e[i].key_vals[e[i].nkeys++],
				 sizeof(e[i].key_vals[0]), "%.*s", BDEV_LEN,
				 keys[i].bdev);
		}
		if (per_type) {
			e[i].key_names[e[i].nkeys] = "type";
			snprintf(e[i].key_vals[e[i].nkeys++],
				 sizeof(e[i].key_vals[0]), "%.*s", IOTYPE_LEN,
				 keys[i].type);
		}
		e[i].hist = hists[i];
	}
	return hist_entries_done(e, n, keys, hists, proto, out);
}
