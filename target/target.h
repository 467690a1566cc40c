// SPDX-License-Identifier: BSD-2-Clause
/*
 * target.h: the target's own lifecycle, as target.c runs it (states.h has
 * the states).  Reactor 0 only.
 */
#ifndef BLKTGT_TARGET_H
#define BLKTGT_TARGET_H

#include <stdint.h>

#include "states.h"

enum target_state target_state(void);
uint64_t target_uptime_ns(void);
/* Begin a clean shutdown (idempotent); the process then exits 0. */
void target_shutdown(void);

#endif
