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
 */

provider blktgt {
	/* --- target lifecycle ------------------------------------------- */

	/* The target entered a new lifecycle state (NONE .. SHUTDOWN). */
	probe target__state(int32_t state, char *name);

	/* A reactor thread started its event loop. */
	probe thread__start(uint32_t thread, char *name);

	/* A reactor thread left its event loop; msgs is how many messages it ran. */
	probe thread__stop(uint32_t thread, char *name, uint64_t msgs);

	/* --- message passing between reactor threads ------------------- */

	/* A message {fn, ctx} was queued from thread src to thread dst. */
	probe msg__send(uint32_t src, uint32_t dst, void *fn, void *ctx);

	/* A reactor ran a message; fn names the function (usym()). */
	probe msg__exec(uint32_t thread, void *fn, void *ctx);

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

	/* An I/O completed; status is 0 or a negative errno. */
	probe io__done(uint64_t id, char *bdev, uint32_t type, uint64_t len, int32_t status, char *type_name);

	/* Up to 64 I/Os one reactor completed: count struct io_rec (target/io_batch.h) at recs, bdev names at bdev_names + index * 32. */
	probe io__batch(int32_t thread, int32_t count, void *recs, char *bdev_names);

	/* --- NBD server --------------------------------------------------- */

	/* An NBD client connected; peer is its address. */
	probe nbd__connect(uint64_t conn, char *peer);

	/* The client sent a negotiation option; status is 0 or a negative errno. */
	probe nbd__option(uint64_t conn, uint32_t option, char *option_name, int32_t status);

	/* A transmission request arrived: cmd (NBD_CMD_*) and its name; flags (NBD_CMD_FLAG_*) is 7th, past bpftrace 0.17's arg5. */
	probe nbd__request(uint64_t conn, uint64_t handle, uint32_t cmd, uint64_t offset, uint32_t len, char *cmd_name, uint32_t flags);

	/* A reply was sent; error is the NBD error code (0 on success). */
	probe nbd__reply(uint64_t conn, uint64_t handle, uint32_t cmd, uint32_t error);

	/* The client went away; requests is how many it sent. */
	probe nbd__disconnect(uint64_t conn, char *peer, uint64_t requests);

	/* A connection began transmission on its owner reactor; fd is its socket, so syscalls can be told apart. */
	probe nbd__transmit(uint64_t conn, int32_t fd, uint32_t thread);

	/* --- JSON-RPC control plane -------------------------------------- */

	/* A JSON-RPC request was parsed and is about to be dispatched; method is "unknown" for any method blktgt does not have. */
	probe rpc__request(uint64_t id, char *method);

	/* A JSON-RPC request finished; status is 0 or the JSON-RPC error code. */
	probe rpc__done(uint64_t id, char *method, int32_t status);

	/* --- built-in workload generator --------------------------------- */

	/* workload_run started a job of a pattern against a bdev. */
	probe workload__start(uint64_t id, char *bdev, char *pattern, uint64_t io_size, uint32_t queue_depth);

	/* A workload job finished; ios is how many I/Os completed. */
	probe workload__done(uint64_t id, uint64_t ios, int32_t status);
};
