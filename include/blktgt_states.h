// SPDX-License-Identifier: BSD-2-Clause
/*
 * blktgt_states.h: the one home of blktgt's state enums and their names,
 * shared by blktgt (target/states.c makes its name tables from them) and
 * the tools that read its probes (libbpf/blktgt_io.bpf.h, the exporter).
 *
 * Each list is an X-macro, X(ENUM, "NAME"), one entry per line, values
 * counting from 0 in list order.  The C enums below and the name tables
 * in target/states.c are made from them, and so can a bpftrace preamble: a
 * generator only has to read the X(...) lines of this file.
 */
#ifndef BLKTGT_STATE_LISTS_H
#define BLKTGT_STATE_LISTS_H

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

#endif
