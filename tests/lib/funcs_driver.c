// SPDX-License-Identifier: BSD-2-Clause
/*
 * funcs_driver: a process with a bdev_execute() of blktgt's signature whose
 * threads can die inside the call or wait inside it, so that tests can
 * leave bt/funcs.bt's per-thread entry table with the entries of dead
 * threads, or fill it with live ones.  Driven by lines on stdin; each
 * command's reply line says it is complete:
 *
 *   die K     K threads enter bdev_execute() and exit there   -> "died K"
 *   block K   K threads enter bdev_execute() and wait there   -> "blocked K"
 *   call N    this thread calls bdev_execute() N times        -> "called N"
 *   call N MS the same, spread evenly over MS milliseconds (pace.h)
 *   release   the waiting threads return, and are joined      -> "released K"
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pace.h"

enum { ACT_RETURN, ACT_DIE, ACT_WAIT };
enum { MAX_THREADS = 1024 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int inside, released;

/* The traced function: blktgt's signature, so bt/funcs.bt reads the same
 * arguments; fua selects what the calling thread does inside. */
__attribute__((noinline, used)) int64_t bdev_execute(void *b, uint32_t type, uint64_t offset,
						     uint64_t len, void *buf, int fua)
{
	__asm__ volatile("" : : "r"(b), "r"(type), "r"(offset), "r"(buf) : "memory");
	if (fua == ACT_DIE)
		pthread_exit(NULL);
	if (fua == ACT_WAIT) {
		pthread_mutex_lock(&lock);
		inside++;
		pthread_cond_broadcast(&cond);
		while (!released)
			pthread_cond_wait(&cond, &lock);
		pthread_mutex_unlock(&lock);
	}
	return (int64_t)len;
}

static void *worker(void *arg)
{
	bdev_execute(NULL, 0, 0, 4096, NULL, (int)(intptr_t)arg);
	return NULL;
}

static void start(pthread_t *t, int k, int act)
{
	for (int i = 0; i < k; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)act)) {
			fprintf(stderr, "funcs_driver: pthread_create failed\n");
			exit(1);
		}
}

int main(void)
{
	static pthread_t t[MAX_THREADS];
	char line[64];
	int n, waiting = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("funcs_driver: ready pid=%d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "die %d", &n) == 1 && n > 0 && n <= MAX_THREADS) {
			start(t, n, ACT_DIE);
			for (int i = 0; i < n; i++)
				pthread_join(t[i], NULL);
			printf("died %d\n", n);
		} else if (sscanf(line, "block %d", &n) == 1 && n > 0 && n <= MAX_THREADS && !waiting) {
			released = 0;
			inside = 0;
			start(t, n, ACT_WAIT);
			pthread_mutex_lock(&lock);
			while (inside < n)
				pthread_cond_wait(&cond, &lock);
			pthread_mutex_unlock(&lock);
			waiting = n;
			printf("blocked %d\n", n);
		} else if (sscanf(line, "call %d", &n) == 1 && n > 0) {
			struct pace p;
			long ms = 0;

			sscanf(line, "call %*d %ld", &ms);
			pace_start(&p, n, ms);
			for (int i = 0; i < n; i++) {
				pace_wait(&p, i);
				bdev_execute(NULL, 1, 0, 4096, NULL, ACT_RETURN);
			}
			printf("called %d\n", n);
		} else if (strcmp(line, "release\n") == 0 && waiting) {
			pthread_mutex_lock(&lock);
			released = 1;
			pthread_cond_broadcast(&cond);
			pthread_mutex_unlock(&lock);
			for (int i = 0; i < waiting; i++)
				pthread_join(t[i], NULL);
			printf("released %d\n", waiting);
			waiting = 0;
		} else {
			fprintf(stderr, "funcs_driver: bad command: %s", line);
			return 2;
		}
	}
	return 0;
}
