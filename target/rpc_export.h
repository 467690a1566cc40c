// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_export.h: rpc_export.c's method table, ending with { NULL, NULL },
 * which jsonrpc.c dispatches by name.
 */
#ifndef BLKTGT_RPC_EXPORT_H
#define BLKTGT_RPC_EXPORT_H

#include "jsonrpc.h"

extern const struct rpc_method rpc_export_methods[];

#endif
