// SPDX-License-Identifier: BSD-2-Clause
/* Generated from probes/blktgt.d by probes/gencatalog --trace-defs (make probes-doc); do not edit.
 * The trace ring's groups, owners, objects and events, each event beside the
 * probe it mirrors in the catalog: target/trace.h makes a typed record
 * function per event (trace_bdev_io_submit(...)), trace.c the -e help text
 * and the definition table the dump tool reads back; below, each event's
 * call-site macro (BLKTGT_IO_SUBMIT_EV(...)), which fires the probe too. */
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

/* PROBE_EV(ids..., probe arguments...), one per event: the probe it mirrors
 * (behind its _ENABLED()) and the event (trace_NAME) at one call site;
 * ids are the owner, object and related ids its @ring line binds to no
 * argument, in that order.  A USDT=0 build records the event and fires
 * no probe. */

/* blktgt:thread__start and the ring's thread_start */
#define BLKTGT_THREAD_START_EV(thread_, name_) \
	do { \
		__auto_type ev_thread_ = (thread_); \
		__auto_type ev_name_ = (name_); \
		if (BLKTGT_THREAD_START_ENABLED()) \
			BLKTGT_THREAD_START(ev_thread_, ev_name_); \
		trace_thread_start((uint32_t)(ev_thread_), 0, 0, \
				(TRACE_CTYPE_STR16)(ev_name_)); \
	} while (0)

/* blktgt:thread__stop and the ring's thread_stop */
#define BLKTGT_THREAD_STOP_EV(thread_, name_, msgs_) \
	do { \
		__auto_type ev_thread_ = (thread_); \
		__auto_type ev_msgs_ = (msgs_); \
		if (BLKTGT_THREAD_STOP_ENABLED()) \
			BLKTGT_THREAD_STOP(ev_thread_, (name_), ev_msgs_); \
		trace_thread_stop((uint32_t)(ev_thread_), 0, 0, \
				(TRACE_CTYPE_INT)(ev_msgs_)); \
	} while (0)

/* blktgt:msg__exec and the ring's msg_exec */
#define BLKTGT_MSG_EXEC_EV(thread_, fn_, ctx_) \
	do { \
		__auto_type ev_thread_ = (thread_); \
		__auto_type ev_fn_ = (fn_); \
		__auto_type ev_ctx_ = (ctx_); \
		if (BLKTGT_MSG_EXEC_ENABLED()) \
			BLKTGT_MSG_EXEC(ev_thread_, ev_fn_, ev_ctx_); \
		trace_msg_exec((uint32_t)(ev_thread_), 0, 0, \
				(TRACE_CTYPE_PTR)(uintptr_t)(ev_fn_), \
				(TRACE_CTYPE_PTR)(uintptr_t)(ev_ctx_)); \
	} while (0)

/* blktgt:io__submit and the ring's bdev_io_submit */
#define BLKTGT_IO_SUBMIT_EV(owner_, related_, id_, bdev_, type_, offset_, \
	len_, type_name_) \
	do { \
		__auto_type ev_id_ = (id_); \
		__auto_type ev_bdev_ = (bdev_); \
		__auto_type ev_type_ = (type_); \
		__auto_type ev_offset_ = (offset_); \
		__auto_type ev_len_ = (len_); \
		if (BLKTGT_IO_SUBMIT_ENABLED()) \
			BLKTGT_IO_SUBMIT(ev_id_, ev_bdev_, ev_type_, \
				ev_offset_, ev_len_, (type_name_)); \
		trace_bdev_io_submit((uint32_t)(owner_), (uint64_t)(ev_id_), \
				(uint64_t)(related_), \
				(TRACE_CTYPE_STR16)(ev_bdev_), \
				(TRACE_CTYPE_INT32)(ev_type_), \
				(TRACE_CTYPE_INT32)(ev_len_), \
				(TRACE_CTYPE_INT)(ev_offset_)); \
	} while (0)

/* blktgt:io__done and the ring's bdev_io_done */
#define BLKTGT_IO_DONE_EV(owner_, id_, bdev_, type_, len_, status_, \
	type_name_) \
	do { \
		__auto_type ev_id_ = (id_); \
		__auto_type ev_len_ = (len_); \
		__auto_type ev_status_ = (status_); \
		if (BLKTGT_IO_DONE_ENABLED()) \
			BLKTGT_IO_DONE(ev_id_, (bdev_), (type_), ev_len_, \
				ev_status_, (type_name_)); \
		trace_bdev_io_done((uint32_t)(owner_), (uint64_t)(ev_id_), 0, \
				(TRACE_CTYPE_INT32)(ev_status_), \
				(TRACE_CTYPE_INT32)(ev_len_)); \
	} while (0)

/* blktgt:nbd__request and the ring's nbd_request */
#define BLKTGT_NBD_REQUEST_EV(object_, conn_, handle_, cmd_, offset_, len_, \
	cmd_name_, flags_) \
	do { \
		__auto_type ev_conn_ = (conn_); \
		__auto_type ev_handle_ = (handle_); \
		__auto_type ev_cmd_ = (cmd_); \
		__auto_type ev_offset_ = (offset_); \
		__auto_type ev_len_ = (len_); \
		if (BLKTGT_NBD_REQUEST_ENABLED()) \
			BLKTGT_NBD_REQUEST(ev_conn_, ev_handle_, ev_cmd_, \
				ev_offset_, ev_len_, (cmd_name_), (flags_)); \
		trace_nbd_request((uint32_t)(ev_conn_), (uint64_t)(object_), \
				0, (TRACE_CTYPE_INT32)(ev_cmd_), \
				(TRACE_CTYPE_INT32)(ev_len_), \
				(TRACE_CTYPE_INT)(ev_offset_), \
				(TRACE_CTYPE_INT)(ev_handle_)); \
	} while (0)

/* blktgt:nbd__reply and the ring's nbd_reply */
#define BLKTGT_NBD_REPLY_EV(object_, conn_, handle_, cmd_, error_) \
	do { \
		__auto_type ev_conn_ = (conn_); \
		__auto_type ev_error_ = (error_); \
		if (BLKTGT_NBD_REPLY_ENABLED()) \
			BLKTGT_NBD_REPLY(ev_conn_, (handle_), (cmd_), \
				ev_error_); \
		trace_nbd_reply((uint32_t)(ev_conn_), (uint64_t)(object_), 0, \
				(TRACE_CTYPE_INT32)(ev_error_)); \
	} while (0)

/* blktgt:rpc__request and the ring's rpc_request */
#define BLKTGT_RPC_REQUEST_EV(owner_, id_, method_) \
	do { \
		__auto_type ev_id_ = (id_); \
		__auto_type ev_method_ = (method_); \
		if (BLKTGT_RPC_REQUEST_ENABLED()) \
			BLKTGT_RPC_REQUEST(ev_id_, ev_method_); \
		trace_rpc_request((uint32_t)(owner_), (uint64_t)(ev_id_), 0, \
				(TRACE_CTYPE_STR32)(ev_method_)); \
	} while (0)

/* blktgt:rpc__done and the ring's rpc_done */
#define BLKTGT_RPC_DONE_EV(owner_, id_, method_, status_) \
	do { \
		__auto_type ev_id_ = (id_); \
		__auto_type ev_method_ = (method_); \
		__auto_type ev_status_ = (status_); \
		if (BLKTGT_RPC_DONE_ENABLED()) \
			BLKTGT_RPC_DONE(ev_id_, ev_method_, ev_status_); \
		trace_rpc_done((uint32_t)(owner_), (uint64_t)(ev_id_), 0, \
				(TRACE_CTYPE_INT32)(ev_status_), \
				(TRACE_CTYPE_STR24)(ev_method_)); \
	} while (0)

#endif
