// SPDX-License-Identifier: BSD-2-Clause
/*
 * trace_helpers.h: what the tool specs' generated headers include
 * (tools/gentool writes '#include "trace_helpers.h"' into each
 * TOOL.spec.h): the option types of tool_options.h.  Nothing else
 * includes it; each file includes the header of each room it uses
 * (tool_options.h, tool_priv.h, tool_target.h, tool_attach.h,
 * tool_drain.h, tool_loop.h).
 */
#ifndef PROBEKIT_TRACE_HELPERS_H
#define PROBEKIT_TRACE_HELPERS_H

#include "tool_options.h"

#endif
