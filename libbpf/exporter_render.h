// SPDX-License-Identifier: BSD-2-Clause
/*
 * exporter_render.h: the exporter's scrape text (exporter_render.c).
 */
#ifndef PROBEKIT_EXPORTER_RENDER_H
#define PROBEKIT_EXPORTER_RENDER_H

#include <stdbool.h>

#include "exporter.h"

/*
 * Render every metric, in the Prometheus text format 0.0.4, or
 * OpenMetrics 1.0.0 when openmetrics is set, into a malloc'd buffer.
 * Returns its length, or -errno (nothing allocated).
 */
long exp_render(const struct exp_state *s, bool openmetrics, char **out);

#endif
