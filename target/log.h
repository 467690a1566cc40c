// SPDX-License-Identifier: BSD-2-Clause
/*
 * log.h: the one function every module reports through.
 *
 * Messages go to stderr as one line, "blktgt: LEVEL: text".  stdout is
 * kept for the single "running" line that tells a caller the target is up.
 */
#ifndef BLKTGT_LOG_H
#define BLKTGT_LOG_H

#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* From here on a writer thread writes the lines, so a reader of stderr
 * that stops reading cannot stall a reactor: lines that do not fit its
 * bounded queue are dropped and counted, except errors, which wait until
 * they are written.  Call it with the signal mask every thread should
 * have.  0 or -errno (then lines keep being written directly). */
int log_start(void);
/* Write everything queued, then stop the writer; later lines are written
 * directly.  Idempotent. */
void log_stop(void);
/* Text that is already whole lines, "blktgt: ..." included. */
void log_raw(const char *text, size_t len);

__attribute__((format(printf, 2, 3)))
void log_msg(enum log_level level, const char *fmt, ...);

/* A condition that can recur thousands of times a second (an accept that
 * fails) is logged at most once per interval: the first time at once,
 * later times counted, and the count added to the next line it logs.
 * One per condition, used from one thread. */
struct log_limit {
	uint64_t interval_ns;
	uint64_t next_ns;               /* nothing is logged before this */
	uint64_t suppressed;            /* since the last line */
};
#define LOG_LIMIT_INIT(interval_ns) { (interval_ns), 0, 0 }

__attribute__((format(printf, 3, 4)))
void log_limited(struct log_limit *ll, enum log_level level, const char *fmt, ...);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
