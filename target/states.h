// SPDX-License-Identifier: BSD-2-Clause
/*
 * states.h: the name tables of blktgt's state enums (states.c).  The enums
 * and their X-macro lists are include/blktgt_states.h's, which the tools
 * share.
 *
 * The name strings are passed to probes, so bpftrace's str() must be able
 * to read them: states_init() copies the tables into writable memory the
 * program touches at start-up (a string literal alone on a page the
 * process never touched reads back empty).
 */
#ifndef BLKTGT_STATES_H
#define BLKTGT_STATES_H

#include "blktgt_states.h"

/* Copy the name tables into memory the program touches.  Call once, first
 * thing in main(), before any thread starts. */
void states_init(void);

/* Names for probes and RPC replies; "?" when out of range. */
const char *target_state_name(enum target_state s);
const char *export_state_name(enum export_state s);
const char *bdev_io_type_name(enum bdev_io_type t);

#endif
