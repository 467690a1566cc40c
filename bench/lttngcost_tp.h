// SPDX-License-Identifier: BSD-2-Clause
/*
 * lttngcost_tp.h: an LTTng-UST tracepoint provider whose one event carries
 * the payload of the trace ring's bdev_io_submit (target/trace_defs.h):
 * owner, object and related ids, a 16-byte bdev name, type, length and
 * offset.  The same fields at the same widths, so bench/lttngcost.c and
 * bench/tracecost.c time the same record in each tracer.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER probekit_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "lttngcost_tp.h"

#if !defined(PROBEKIT_LTTNGCOST_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define PROBEKIT_LTTNGCOST_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(probekit_bench, bdev_io_submit,
	LTTNG_UST_TP_ARGS(uint32_t, owner, uint64_t, object, uint64_t, related,
			  const char *, bdev, int32_t, type, int32_t, len, int64_t, offset),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint32_t, owner, owner)
		lttng_ust_field_integer(uint64_t, object, object)
		lttng_ust_field_integer(uint64_t, related, related)
		lttng_ust_field_array_text(char, bdev, bdev, 16)
		lttng_ust_field_integer(int32_t, type, type)
		lttng_ust_field_integer(int32_t, len, len)
		lttng_ust_field_integer(int64_t, offset, offset)
	)
)

#endif

#include <lttng/tracepoint-event.h>
