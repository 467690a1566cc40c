// SPDX-License-Identifier: BSD-2-Clause
/*
 * states.h: the one home of blktgt's state enums and their names.
 *
 * Each list is an X-macro, X(ENUM, "NAME"), one entry per line, values
 * counting from 0 in list order.  The C enums below and the name tables
 * in states.c are made from them, and so can a bpftrace preamble: a
 * generator only has to read the X(...) lines of this file.
 *
 * The name strings are passed to probes, so bpftrace's str() must be able
 * to read them: states_init() copies the tables into writable memory the
 * program touches at start-up (a string literal alone on a page the
 * process never touched reads back empty).
 */
#ifndef BLKTGT_STATES_H
#define BLKTGT_STATES_H

/* The target's lifecycle, announced by the target__state probe. */
#define TARGET_STATE_LIST(X) \
	X(TARGET_NONE, "NONE") \
	X(TARGET_INIT, "INIT") \
	X(TARGET_THREADS, "THREADS") \
	X(TARGET_RPC, "RPC") \
	X(TARGET_LISTEN, "LISTEN") \
	X(TARGET_CONFIG, "CONFIG") \
	X(TARGET_RUNNING, "RUNNING") \
	X(TARGET_SHUTDOWN, "SHUTDOWN")

/* An export's state (export.h), carried by the export__* probes. */
#define EXPORT_STATE_LIST(X) \
	X(EXPORT_INACTIVE, "INACTIVE") \
	X(EXPORT_ACTIVE, "ACTIVE") \
	X(EXPORT_PAUSED, "PAUSED")

/* The type of a bdev I/O (bdev.h), carried by io__submit and io__done. */
#define IO_TYPE_LIST(X) \
	X(BDEV_IO_READ, "read") \
	X(BDEV_IO_WRITE, "write") \
	X(BDEV_IO_FLUSH, "flush") \
	X(BDEV_IO_TRIM, "trim")

#define STATES_ENUM_ENTRY(e, name) e,

enum target_state { TARGET_STATE_LIST(STATES_ENUM_ENTRY) TARGET_STATE_COUNT };
enum export_state { EXPORT_STATE_LIST(STATES_ENUM_ENTRY) EXPORT_STATE_COUNT };
enum bdev_io_type { IO_TYPE_LIST(STATES_ENUM_ENTRY) BDEV_IO_TYPE_COUNT };

/* Copy the name tables into memory the program touches.  Call once, first
 * thing in main(), before any thread starts. */
void states_init(void);

/* Names for probes and RPC replies; "?" when out of range. */
const char *target_state_name(enum target_state s);
const char *export_state_name(enum export_state s);
const char *bdev_io_type_name(enum bdev_io_type t);

#endif
