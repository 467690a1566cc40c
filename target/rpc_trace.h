// SPDX-License-Identifier: BSD-2-Clause
/*
 * rpc_trace.h: rpc_trace.c's method table, ending with { NULL, NULL },
 * which jsonrpc.c dispatches by name.
 */
#ifndef BLKTGT_RPC_TRACE_H
#define BLKTGT_RPC_TRACE_H

#include "jsonrpc.h"

extern const struct rpc_method rpc_trace_methods[];

#endif
