// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_workload.h: rpc_workload.c's method table, ending with { NULL, NULL },
 * which jsonrpc.c dispatches by name.
 */
#ifndef BLKTGT_RPC_WORKLOAD_H
#define BLKTGT_RPC_WORKLOAD_H

#include "jsonrpc.h"

extern const struct rpc_method rpc_workload_methods[];

#endif
