// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_priv.h: why tracing was denied, said in one line (tool_priv.c).
 */
#ifndef PROBEKIT_TOOL_PRIV_H
#define PROBEKIT_TOOL_PRIV_H

#include <stdbool.h>
#include <sys/types.h>

/* When this process lacks a capability that tracing pid needs (the
 * tool's, specs/privileges.toml; pid <= 0: every process running a
 * file; before Linux 5.11, CAP_SYS_RESOURCE too, unless RLIMIT_MEMLOCK is
 * unlimited), print "WHAT: permission denied: tracing ... needs root, or
 * ...; this process lacks ..." and return true; else print nothing and return
 * false, for the caller to report its error as it is. */
bool report_denied(const char *what, pid_t pid);

#endif
