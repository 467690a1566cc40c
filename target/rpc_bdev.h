// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_bdev.h: rpc_bdev.c's method table, ending with { NULL, NULL },
 * which jsonrpc.c dispatches by name.
 */
#ifndef BLKTGT_RPC_BDEV_H
#define BLKTGT_RPC_BDEV_H

#include "jsonrpc.h"

extern const struct rpc_method rpc_bdev_methods[];

#endif
