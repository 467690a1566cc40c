// SPDX-License-Identifier: BSD-2-Clause
/* Generated from probes/blktgt.d by probes/gencatalog --trace-defs (make probes-doc); do not edit.
 * The trace ring's groups, owners, objects and events, each event beside the
 * probe it mirrors in the catalog: target/trace.h makes a typed record
 * function per event (trace_bdev_io_submit(...)), trace.c the -e help text
 * and the definition table the dump tool reads back. */
#ifndef BLKTGT_TRACE_DEFS_H
#define BLKTGT_TRACE_DEFS_H

/* G(name, index, description) */
#define TRACE_GROUPS(G) \
	G(bdev, 0, "block device I/O: submit and completion") \
	G(nbd, 1, "NBD transmission: requests and replies") \
	G(rpc, 2, "JSON-RPC control plane: requests and their completion") \
	G(thread, 3, "reactor threads: start, stop, message execution")

/* O(name, index, letter): who recorded an event */
#define TRACE_OWNERS(O) \
	O(thread, 0, 't') \
	O(nbd_conn, 1, 'c')

/* J(name, index, letter): what an event is about */
#define TRACE_OBJECTS(J) \
	J(none, 0, '-') \
	J(bdev_io, 1, 'i') \
	J(nbd_req, 2, 'r') \
	J(rpc_req, 3, 'p')

/* T(name, group, bit, owner, object, flags, related, description, ARGS),
 * ARGS a sequence of (TYPE, name) pairs; the probe each mirrors is named. */
#define TRACE_POINTS(T) \
	T(bdev_io_submit, bdev, 0, thread, bdev_io, TRACE_NEW_OBJECT, nbd_req, /* blktgt:io__submit */ \
	  "an I/O was submitted to a bdev (type 0 read, 1 write, 2 flush, 3 trim)", \
	  (STR16, bdev)(INT32, type)(INT32, len)(INT, offset)) \
	T(bdev_io_done, bdev, 1, thread, bdev_io, 0, none, /* blktgt:io__done */ \
	  "an I/O completed; status is 0 or a negative errno", \
	  (INT32, status)(INT32, len)) \
	T(nbd_request, nbd, 0, nbd_conn, nbd_req, TRACE_NEW_OBJECT, none, /* blktgt:nbd__request */ \
	  "an NBD transmission request arrived (cmd is NBD_CMD_*)", \
	  (INT32, cmd)(INT32, len)(INT, offset)(INT, handle)) \
	T(nbd_reply, nbd, 1, nbd_conn, nbd_req, 0, none, /* blktgt:nbd__reply */ \
	  "an NBD reply was sent; error is the NBD error code", \
	  (INT32, error)) \
	T(rpc_request, rpc, 0, thread, rpc_req, TRACE_NEW_OBJECT, none, /* blktgt:rpc__request */ \
	  "a JSON-RPC request was parsed and is about to be dispatched", \
	  (STR32, method)) \
	T(rpc_done, rpc, 1, thread, rpc_req, 0, none, /* blktgt:rpc__done */ \
	  "a JSON-RPC request finished; status is 0 or the JSON-RPC error code", \
	  (INT32, status)(STR24, method)) \
	T(thread_start, thread, 0, thread, none, 0, none, /* blktgt:thread__start */ \
	  "a reactor thread started its event loop", \
	  (STR16, name)) \
	T(thread_stop, thread, 1, thread, none, 0, none, /* blktgt:thread__stop */ \
	  "a reactor thread left its event loop; msgs is how many messages it ran", \
	  (INT, msgs)) \
	T(msg_exec, thread, 2, thread, none, 0, none, /* blktgt:msg__exec */ \
	  "a reactor ran a message fn(ctx)", \
	  (PTR, fn)(PTR, ctx))

#endif
