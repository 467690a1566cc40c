// SPDX-License-Identifier: BSD-2-Clause
/*
 * log.c: one line per message on stderr.
 *
 * A line is formatted into a local buffer first, so lines from several
 * reactors never interleave.  Once log_start() has run, lines do not go
 * to stderr from the caller's thread: they are queued and a writer thread
 * writes them.  Whoever reads blktgt's stderr (a terminal, a pipe, a
 * pager) may stop reading, and a reactor blocked in write(2) would stop
 * serving I/O with it.  So the queue is bounded; a line that does not fit
 * is dropped and counted, and the writer says how many were dropped when
 * it can write again.  Errors are the exception: an error line is never
 * dropped, and log_error() returns once it is written (it may come right
 * before an abort()), so errors block as they always did.
 *
 * Before log_start() and after log_stop() every line is written directly.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX  1024
#define LOG_QUEUE_MAX (256 * 1024)      /* bytes waiting for the writer */

static const enum log_level max_level = LOG_INFO;  /* above it: dropped */
static const char *const level_names[] = { "error", "warning", "info", "debug" };

static struct {
	pthread_mutex_t lock;
	pthread_cond_t more;            /* the writer waits for lines or stop */
	pthread_cond_t done;            /* error callers wait for their line */
	pthread_t thread;
	bool running;                   /* the writer exists */
	bool stop;
	char *buf;                      /* LOG_QUEUE_MAX bytes, len used */
	size_t len;
	uint64_t queued;                /* lines ever queued */
	uint64_t written;               /* of those, lines the writer wrote */
	uint64_t dropped;               /* since the writer last said so */
} lg = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.more = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
};

static void write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(STDERR_FILENO, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return;         /* nowhere left to report it */
		}
		p += w;
		n -= (size_t)w;
	}
}

static void *log_writer(void *arg)
{
	char *out = arg;                /* the other half of the double buffer */

	pthread_mutex_lock(&lg.lock);
	for (;;) {
		char *full;
		size_t n;
		uint64_t upto, dropped;

		while (!lg.len && !lg.dropped && !lg.stop)
			pthread_cond_wait(&lg.more, &lg.lock);
		if (!lg.len && !lg.dropped)
			break;          /* stop, and nothing left */
		full = lg.buf;
		n = lg.len;
		lg.buf = out;
		lg.len = 0;
		upto = lg.queued;
		dropped = lg.dropped;
		lg.dropped = 0;
		pthread_mutex_unlock(&lg.lock);

		write_all(full, n);
		if (dropped) {
			char note[160];
			int m = snprintf(note, sizeof(note),
					 "blktgt: warning: %llu log lines dropped: stderr was "
					 "not being read\n", (unsigned long long)dropped);

			write_all(note, (size_t)m);
		}
		out = full;

		pthread_mutex_lock(&lg.lock);
		lg.written = upto;
		pthread_cond_broadcast(&lg.done);
	}
	pthread_mutex_unlock(&lg.lock);
	free(out);
	return NULL;
}

int log_start(void)
{
	char *a = malloc(LOG_QUEUE_MAX), *b = malloc(LOG_QUEUE_MAX);
	int err;

	if (!a || !b) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	pthread_mutex_lock(&lg.lock);
	if (lg.running) {
		pthread_mutex_unlock(&lg.lock);
		free(a);
		free(b);
		return 0;
	}
	lg.buf = a;
	lg.len = 0;
	lg.stop = false;
	err = pthread_create(&lg.thread, NULL, log_writer, b);
	if (err) {
		lg.buf = NULL;
		pthread_mutex_unlock(&lg.lock);
		free(a);
		free(b);
		return -err;
	}
	lg.running = true;
	pthread_mutex_unlock(&lg.lock);
	pthread_setname_np(lg.thread, "blktgt_log");
	return 0;
}

void log_stop(void)
{
	pthread_mutex_lock(&lg.lock);
	if (!lg.running || lg.stop) {
		pthread_mutex_unlock(&lg.lock);
		return;
	}
	lg.stop = true;
	pthread_cond_signal(&lg.more);
	pthread_mutex_unlock(&lg.lock);
	pthread_join(lg.thread, NULL);      /* it writes what is queued first */
	pthread_mutex_lock(&lg.lock);
	lg.running = false;
	free(lg.buf);
	lg.buf = NULL;
	lg.len = 0;
	pthread_cond_broadcast(&lg.done);
	pthread_mutex_unlock(&lg.lock);
}

/* Queue (or write) one whole line; an error returns once it is written. */
static void log_emit(enum log_level level, const char *line, size_t n)
{
	uint64_t seq;

	pthread_mutex_lock(&lg.lock);
	if (!lg.running || lg.stop) {
		pthread_mutex_unlock(&lg.lock);
		write_all(line, n);
		return;
	}
	if (lg.len + n > LOG_QUEUE_MAX) {
		if (level != LOG_ERROR) {
			lg.dropped++;
			pthread_mutex_unlock(&lg.lock);
			return;
		}
		/* The queue is full and an error must not be lost: write it
		 * now, ahead of what is queued. */
		pthread_mutex_unlock(&lg.lock);
		write_all(line, n);
		return;
	}
	memcpy(lg.buf + lg.len, line, n);
	lg.len += n;
	seq = ++lg.queued;
	pthread_cond_signal(&lg.more);
	if (level == LOG_ERROR)
		while (lg.running && lg.written < seq)
			pthread_cond_wait(&lg.done, &lg.lock);
	pthread_mutex_unlock(&lg.lock);
}

void log_raw(const char *text, size_t len)
{
	if (len)
		log_emit(LOG_INFO, text, len);
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
	log_emit(level, line, (size_t)n);
}

void log_limited(struct log_limit *ll, enum log_level level, const char *fmt, ...)
{
	char text[LOG_LINE_MAX];
	struct timespec ts;
	uint64_t now;
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (now < ll->next_ns) {
		ll->suppressed++;
		return;
	}
	ll->next_ns = now + ll->interval_ns;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (ll->suppressed)
		log_msg(level, "%s (%llu more since the last such line)", text,
			(unsigned long long)ll->suppressed);
	else
		log_msg(level, "%s", text);
	ll->suppressed = 0;
}
