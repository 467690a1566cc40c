/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * blktgt.d: the probe catalog of blktgt.
 *
 * This file is the one place a probe is declared.  The build turns it into
 * the C header the target includes (dtrace -h), the object that defines the
 * USDT semaphores (dtrace -G), the no-op header of a USDT=0 build, and the
 * probe table in probes/README.md (probes/gencatalog).  probecheck reads it
 * to check that the binary, the bt/ scripts and the bcc/ tools agree.
 *
 * Conventions:
 *  - names are noun__verb; tools show io__submit (bpftrace) or io-submit;
 *  - the first argument of every start/done pair is the key that ties the
 *    two together (an I/O id, a connection id, an RPC id), so a latency can
 *    be measured even when the pair fires on two different threads;
 *  - fixed-width types only, so every reader agrees on argument sizes:
 *    64-bit for ids, offsets, lengths and pointers, 32-bit for small enums
 *    and statuses (negative errno, 0 on success);
 *  - bpftrace 0.17 reads only arg0..arg5 on x86-64, so whatever a script
 *    needs sits in the first six arguments;
 *  - "char *" arguments are NUL-terminated strings that live in memory the
 *    target uses (struct fields, tables touched at start-up), so bpftrace's
 *    str() can always read them.
 *
 * The comment line above each probe is its documentation (gencatalog uses
 * it); keep it to one sentence.
 *
 * The trace ring's events (target/trace.h: always on, recorded into a
 * shared-memory ring) are declared here too, in "@ring" comments that
 * dtrace skips: its groups, owners and objects below, and each event right
 * after the probe it mirrors, recording some of that probe's arguments by
 * name.  "make probes-doc" writes target/trace_defs.h from them
 * (probes/gencatalog --trace-defs; probelib/catalog.py has the syntax).
 * Conventions of the ring:
 *  - a group holds at most 64 events; an event's id is group * 64 + bit,
 *    and `-e GROUP:MASK` selects events by bit;
 *  - every record carries an owner (who recorded it: a reactor thread, an
 *    NBD connection, shown by its letter and id, "t1", "c3") and, when the
 *    event names an object type, the object it is about (a bdev I/O, an
 *    NBD request); "TYPE(ARG)" says the probe's argument ARG is that id.  An event marked "new" starts that object's life: later
 *    events on the same object show the time since then.  An event may
 *    name a related object type: the record then carries the id of the
 *    object that caused this one (the NBD request behind a bdev I/O),
 *    shown as "i429 (r520)";
 *  - arguments are typed and fit in TRACE_ARG_BYTES (checked at compile
 *    time): INT signed 64-bit, INT32 signed 32-bit, PTR a pointer, STR8 ..
 *    STR32 a string truncated to N bytes, copied into the record so that
 *    the dump never dereferences a pointer of the traced process;
 *  - the target fires a probe and its event at one call site,
 *    BLKTGT_<PROBE>_EV(ids..., probe arguments...) from trace_defs.h,
 *    where ids are the owner, object and related ids that no TYPE(ARG)
 *    binds, in that order.
 */

provider blktgt {
	/* @ring group bdev 0 "block device I/O: submit and completion" */
	/* @ring group nbd 1 "NBD transmission: requests and replies" */
	/* @ring group rpc 2 "JSON-RPC control plane: requests and their completion" */
	/* @ring group thread 3 "reactor threads: start, stop, message execution" */
	/* @ring owner thread 0 t */
	/* @ring owner nbd_conn 1 c */
	/* @ring object none 0 - */
	/* @ring object bdev_io 1 i */
	/* @ring object nbd_req 2 r */
	/* @ring object rpc_req 3 p */

	/* --- target lifecycle ------------------------------------------- */

	/* The target entered a new lifecycle state (NONE .. SHUTDOWN). */
	probe target__state(int32_t state, char *name);

	/* A reactor thread started its event loop. */
	probe thread__start(uint32_t thread, char *name);
	/* @ring event thread_start thread 0 thread(thread) none
	 * "a reactor thread started its event loop" STR16 name */

	/* A reactor thread left its event loop; msgs is how many messages it ran. */
	probe thread__stop(uint32_t thread, char *name, uint64_t msgs);
	/* @ring event thread_stop thread 1 thread(thread) none
	 * "a reactor thread left its event loop; msgs is how many messages it ran"
	 * INT msgs */

	/* --- message passing between reactor threads ------------------- */

	/* A message {fn, ctx} was queued from thread src to thread dst. */
	probe msg__send(uint32_t src, uint32_t dst, void *fn, void *ctx);

	/* A reactor ran a message; fn names the function (usym()). */
	probe msg__exec(uint32_t thread, void *fn, void *ctx);
	/* @ring event msg_exec thread 2 thread(thread) none
	 * "a reactor ran a message fn(ctx)" PTR fn, PTR ctx */

	/* reactor_for_each_thread() started: fn runs on every reactor, then done. */
	probe foreach__start(uint64_t id, void *fn, void *ctx, void *done);

	/* reactor_for_each_thread() finished on every reactor and called done. */
	probe foreach__done(uint64_t id, void *fn, void *ctx, void *done);

	/* --- export state machine --------------------------------------- */

	/* An export began a state change (INACTIVE, ACTIVE, PAUSED). */
	probe export__change__start(char *export, int32_t from, int32_t to, char *from_name, char *to_name);

	/* One reactor began applying an export's state change. */
	probe export__thread__start(char *export, uint32_t thread, int32_t to, char *to_name);

	/* One reactor finished applying an export's state change. */
	probe export__thread__done(char *export, uint32_t thread, int32_t to, char *to_name);

	/* An export's state change completed on every reactor. */
	probe export__change__done(char *export, int32_t from, int32_t to, char *to_name, int32_t status);

	/* An export's state change completed: export is its struct export (read it with probekit-structs), whose state is the new one. */
	probe export__state(void *export, int32_t from);

	/* --- block devices ---------------------------------------------- */

	/* A bdev was created; type is null, malloc or file. */
	probe bdev__create(char *bdev, char *type, uint64_t num_blocks, uint32_t block_size);

	/* A bdev was deleted. */
	probe bdev__delete(char *bdev, char *type);

	/* An I/O was submitted to a bdev; type is read, write, flush or trim. */
	probe io__submit(uint64_t id, char *bdev, uint32_t type, uint64_t offset, uint64_t len, char *type_name);
	/* @ring event bdev_io_submit bdev 0 thread bdev_io(id) new related nbd_req
	 * "an I/O was submitted to a bdev (type 0 read, 1 write, 2 flush, 3 trim)"
	 * STR16 bdev, INT32 type, INT32 len, INT offset */

	/* An I/O completed; status is 0 or a negative errno. */
	probe io__done(uint64_t id, char *bdev, uint32_t type, uint64_t len, int32_t status, char *type_name);
	/* @ring event bdev_io_done bdev 1 thread bdev_io(id)
	 * "an I/O completed; status is 0 or a negative errno" INT32 status, INT32 len */

	/* Up to 256 I/Os one reactor completed, oldest first: count struct io_rec (include/io_batch.h) at recs, bdev names at bdev_names + index * 32; fired at flush_ns when full, 1 ms after its oldest record's done_ns (checked once per loop pass), and before the reactor sleeps; bdevs_merged is bdevs_cut | bdevs_other << 32: bdevs_cut live bdevs share their label with another (names cut to 31 characters), bdevs_other are labelled (other) (past 255 live bdevs). */
	probe io__batch(int32_t thread, int32_t count, void *recs, char *bdev_names, uint64_t flush_ns, uint64_t bdevs_merged);

	/* --- NBD server --------------------------------------------------- */

	/* An NBD client connected; peer is its address. */
	probe nbd__connect(uint64_t conn, char *peer);

	/* The client sent a negotiation option; status is 0 or a negative errno. */
	probe nbd__option(uint64_t conn, uint32_t option, char *option_name, int32_t status);

	/* A transmission request arrived: cmd (NBD_CMD_*) and its name; flags (NBD_CMD_FLAG_*) is 7th, past bpftrace 0.17's arg5. */
	probe nbd__request(uint64_t conn, uint64_t handle, uint32_t cmd, uint64_t offset, uint32_t len, char *cmd_name, uint32_t flags);
	/* @ring event nbd_request nbd 0 nbd_conn(conn) nbd_req new
	 * "an NBD transmission request arrived (cmd is NBD_CMD_*)"
	 * INT32 cmd, INT32 len, INT offset, INT handle */

	/* A reply was sent; error is the NBD error code (0 on success). */
	probe nbd__reply(uint64_t conn, uint64_t handle, uint32_t cmd, uint32_t error);
	/* @ring event nbd_reply nbd 1 nbd_conn(conn) nbd_req
	 * "an NBD reply was sent; error is the NBD error code" INT32 error */

	/* The client went away; requests is how many it sent. */
	probe nbd__disconnect(uint64_t conn, char *peer, uint64_t requests);

	/* A connection began transmission on its owner reactor; fd is its socket, so syscalls can be told apart. */
	probe nbd__transmit(uint64_t conn, int32_t fd, uint32_t thread);

	/* --- JSON-RPC control plane -------------------------------------- */

	/* A JSON-RPC request was parsed and is about to be dispatched; method is "unknown" for any method blktgt does not have. */
	probe rpc__request(uint64_t id, char *method);
	/* @ring event rpc_request rpc 0 thread rpc_req(id) new
	 * "a JSON-RPC request was parsed and is about to be dispatched" STR32 method */

	/* A JSON-RPC request finished; status is 0 or the JSON-RPC error code. */
	probe rpc__done(uint64_t id, char *method, int32_t status);
	/* @ring event rpc_done rpc 1 thread rpc_req(id)
	 * "a JSON-RPC request finished; status is 0 or the JSON-RPC error code"
	 * INT32 status, STR24 method */

	/* --- built-in workload generator --------------------------------- */

	/* workload_run started a job of a pattern against a bdev. */
	probe workload__start(uint64_t id, char *bdev, char *pattern, uint64_t io_size, uint32_t queue_depth);

	/* A workload job finished; ios is how many I/Os completed. */
	probe workload__done(uint64_t id, uint64_t ios, int32_t status);
};
