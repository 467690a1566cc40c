// SPDX-License-Identifier: BSD-2-Clause
/*
 * trace_defs.h: the one place the trace ring's groups, owners, objects and
 * tracepoints are declared.
 *
 * This is the trace ring's catalog, as probes/blktgt.d is the USDT
 * catalog.  From these lists trace.h makes a typed record function per
 * tracepoint (trace_bdev_io_submit(...)), trace.c makes the `-e help` text
 * and the definition table it writes into the header of the shared-memory
 * file, and the dump tool (target/blktgt-trace) reads that table back, so a
 * trace file describes itself and the dumper keeps no copy of this list.
 *
 * Conventions:
 *  - a group holds at most 64 tracepoints; a tracepoint's id is
 *    group * 64 + bit, and `-e GROUP:MASK` selects tracepoints by bit;
 *  - every record carries an owner (who recorded it: a reactor thread, an
 *    NBD connection) and, when the tracepoint names an object type, the
 *    object it is about (a bdev I/O, an NBD request).  A tracepoint flagged
 *    TRACE_NEW_OBJECT starts that object's life: later events on the same
 *    object show the time since then.  A tracepoint may name a related
 *    object type: the record then carries the id of the object that caused
 *    this one (the NBD request behind a bdev I/O), shown as "i429 (r520)";
 *  - arguments are typed and named, (TYPE, name) pairs, and fit in
 *    TRACE_ARG_BYTES (checked at compile time):
 *      INT    signed 64-bit    INT32  signed 32-bit
 *      PTR    a pointer        STR8 .. STR32  a string, truncated to N bytes
 *    Strings are copied into the record, so the dump never dereferences a
 *    pointer of the traced process.
 *
 * Names are lower-case C identifiers; they are what `-e`, the RPCs and the
 * dump tool show.  Add a tracepoint here, then call trace_NAME() where it
 * happens; nothing else needs to change.
 */
#ifndef BLKTGT_TRACE_DEFS_H
#define BLKTGT_TRACE_DEFS_H

/* G(name, index, description): index is the group's bit position. */
#define TRACE_GROUPS(G) \
	G(bdev,   0, "block device I/O: submit and completion") \
	G(nbd,    1, "NBD transmission: requests and replies") \
	G(rpc,    2, "JSON-RPC control plane: requests and their completion") \
	G(thread, 3, "reactor threads: start, stop, message execution")

/* O(name, index, letter): who recorded an event; the dump shows the
 * letter and the owner id ("t1" is reactor 1, "c3" NBD connection 3). */
#define TRACE_OWNERS(O) \
	O(thread,   0, 't') \
	O(nbd_conn, 1, 'c')

/* J(name, index, letter): what an event is about; "none" for events about
 * no object in particular. */
#define TRACE_OBJECTS(J) \
	J(none,    0, '-') \
	J(bdev_io, 1, 'i') \
	J(nbd_req, 2, 'r') \
	J(rpc_req, 3, 'p')

/*
 * T(name, group, bit, owner, object, flags, related, description, ARGS)
 * where ARGS is a sequence of (TYPE, name) pairs, possibly empty.
 */
#define TRACE_POINTS(T) \
	T(bdev_io_submit, bdev, 0, thread, bdev_io, TRACE_NEW_OBJECT, nbd_req, \
	  "an I/O was submitted to a bdev (type 0 read, 1 write, 2 flush, 3 trim)", \
	  (STR16, bdev)(INT32, type)(INT32, len)(INT, offset)) \
	T(bdev_io_done, bdev, 1, thread, bdev_io, 0, none, \
	  "an I/O completed; status is 0 or a negative errno", \
	  (INT32, status)(INT32, len)) \
	T(nbd_request, nbd, 0, nbd_conn, nbd_req, TRACE_NEW_OBJECT, none, \
	  "an NBD transmission request arrived (cmd is NBD_CMD_*)", \
	  (INT32, cmd)(INT32, len)(INT, offset)(INT, handle)) \
	T(nbd_reply, nbd, 1, nbd_conn, nbd_req, 0, none, \
	  "an NBD reply was sent; error is the NBD error code", \
	  (INT32, error)) \
	T(rpc_request, rpc, 0, thread, rpc_req, TRACE_NEW_OBJECT, none, \
	  "a JSON-RPC request was parsed and is about to be dispatched", \
	  (STR32, method)) \
	T(rpc_done, rpc, 1, thread, rpc_req, 0, none, \
	  "a JSON-RPC request finished; status is 0 or the JSON-RPC error code", \
	  (INT32, status)(STR24, method)) \
	T(thread_start, thread, 0, thread, none, 0, none, \
	  "a reactor thread started its event loop", \
	  (STR16, name)) \
	T(thread_stop, thread, 1, thread, none, 0, none, \
	  "a reactor thread left its event loop; msgs is how many messages it ran", \
	  (INT, msgs)) \
	T(msg_exec, thread, 2, thread, none, 0, none, \
	  "a reactor ran a message fn(ctx)", \
	  (PTR, fn)(PTR, ctx))

#endif
