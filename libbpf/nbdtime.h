// SPDX-License-Identifier: BSD-2-Clause
/* nbdtime.h: what nbdtime.bpf.c and nbdtime.c share. */
#ifndef PROBEKIT_NBDTIME_H
#define PROBEKIT_NBDTIME_H

#include "histogram.h"
#include "blktgt_io.h"

#define NBDTIME_MAX_CONNS   1024	/* NBD connections remembered */
#define NBDTIME_MAX_THREADS 4096	/* threads inside a socket syscall */
#define NBDTIME_RX_RING     64	/* recv batches remembered per connection */

/* NBD wire facts the share estimate needs (the NBD protocol's). */
#define NBDTIME_CMD_READ  0
#define NBDTIME_CMD_DISC  2
#define NBDTIME_REPLY_LEN 16	/* a simple reply's header */

/* The stages, in the order they are printed (bcc/nbdtime's STAGES). */
enum nbdtime_stage {
	STAGE_REQUEST,		/* nbd__request to nbd__reply */
	STAGE_BDEV,		/* io__submit to io__done */
	STAGE_SHARE,		/* a request's estimated syscall share */
	STAGE_SYS_NBD,		/* a syscall on an NBD connection's socket */
	STAGE_SYS_OTHER,	/* a syscall on any other socket */
	STAGE_COUNT,
};

/* cmd is set with -C for the first three stages; tid for the syscall
 * stages. */
struct nbdtime_key {
	__u32 stage;
	__u32 tid;
	char cmd[IOTYPE_LEN];
};

#endif
