// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_target.h: rpc_target.c's method table, ending with { NULL, NULL },
 * which jsonrpc.c dispatches by name.
 */
#ifndef BLKTGT_RPC_TARGET_H
#define BLKTGT_RPC_TARGET_H

#include "jsonrpc.h"

extern const struct rpc_method rpc_target_methods[];

#endif
