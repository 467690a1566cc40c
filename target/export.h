// SPDX-License-Identifier: BSD-2-Clause
/*
 * export.h: named exports of bdevs, with a state machine
 *
 *     INACTIVE --start--> ACTIVE <--pause/resume--> PAUSED
 *        ^                  |                          |
 *        +------stop--------+--------------------------+
 *
 * A state change runs on every reactor (reactor_for_each_thread), each reactor
 * flipping its own view of the export, then completes with a callback.
 * Pausing waits, on each reactor, for that reactor's in-flight I/O to
 * finish; I/O submitted while paused is queued on its reactor and goes out
 * at resume, so nothing is lost.  Exports are created, changed and deleted
 * on reactor 0 only.
 */
#ifndef BLKTGT_EXPORT_H
#define BLKTGT_EXPORT_H

#include "bdev.h"
#include "reactor.h"

/* enum export_state (EXPORT_INACTIVE 0, EXPORT_ACTIVE 1, EXPORT_PAUSED 2)
 * lives in states.h with its names. */
#include "states.h"

#define EXPORT_MAX_COUNT 1024   /* exports in the registry */

struct export;

typedef void (*export_done_fn)(void *ctx, int status);

/* Create (ACTIVE once the change completes) / delete (stops it first,
 * fails with -EBUSY while clients are connected). Reactor 0 only. */
int export_create(const char *name, const char *bdev_name, export_done_fn done, void *ctx);
int export_delete(const char *name, export_done_fn done, void *ctx);
int export_pause(const char *name, export_done_fn done, void *ctx);
int export_resume(const char *name, export_done_fn done, void *ctx);

struct export *export_lookup(const char *name);   /* reactor 0 only */
struct export *export_first(void);
struct export *export_next(struct export *e);
const char *export_name(const struct export *e);
struct bdev *export_bdev(const struct export *e);
enum export_state export_state(const struct export *e);

/* Shutdown has begun (reactor 0): refuse pauses from now on and resume
 * every paused export, so that the I/O it holds completes. */
void export_shutdown_begin(void);

/* True when e is still registered, not being deleted and not INACTIVE:
 * the only state in which a new client may take a reference.  e may be a
 * stale pointer (it is compared by address before it is read).  Reactor 0
 * only, like export_delete(), so the answer holds until the caller's next
 * return to the event loop. */
bool export_accepting(const struct export *e);

/* A client (an NBD connection) holds a reference while connected, so the
 * export and its bdev outlive it.  Get on reactor 0; put from any reactor. */
void export_get(struct export *e);
void export_put(struct export *e);

/* Submit io through the export on the calling reactor: queued while the
 * export is paused on this reactor, failed with -ENODEV when it is
 * inactive, otherwise passed to bdev_submit().  Same completion contract
 * as bdev_submit(). */
int export_submit(struct export *e, struct bdev_io *io);

/* Number of client references (export_get) held now. */
unsigned export_clients(const struct export *e);
/* Stop and delete every export (shutdown; clients must be gone first);
 * done(ctx, status) runs on reactor 0.  Reactor 0 only. */
void export_delete_all(export_done_fn done, void *ctx);

#endif
