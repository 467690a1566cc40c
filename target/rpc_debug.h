// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_debug.h: rpc_debug.c's method table, ending with { NULL, NULL },
 * which jsonrpc.c dispatches by name.
 * Test-only methods, found only with BLKTGT_DEBUG_RPC=1.
 */
#ifndef BLKTGT_RPC_DEBUG_H
#define BLKTGT_RPC_DEBUG_H

#include "jsonrpc.h"

extern const struct rpc_method rpc_debug_methods[];

#endif
