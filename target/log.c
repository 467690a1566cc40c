/*
 * log.c: one line per message on stderr.  The line is formatted into a
 * local buffer and written with one write(2), so lines from several
 * reactors never interleave.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX 1024

static enum log_level max_level = LOG_INFO;
static const char *const level_names[] = { "error", "warning", "info", "debug" };

void log_set_level(enum log_level level)
{
	max_level = level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	va_list ap;
	int n, m;

	if (level > max_level)
		return;
	n = snprintf(line, sizeof(line), "blktgt: %s: ", level_names[level]);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0) {
		/* Nowhere left to report it. */
	}
}
