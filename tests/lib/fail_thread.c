// SPDX-License-Identifier: BSD-2-Clause
/*
 * fail_thread.c: an LD_PRELOAD library that makes one kind of system call
 * fail when a thread other than the main one makes it, so that
 * tests/libbpf/test_ready.py can drive the libbpf tools' start-up threads
 * (libbpf/tool_drain.c's slot setter, libbpf/tool_attach.c's uprobe
 * warm-up) down their failure paths against the real kernel.
 * FAIL_THREAD_SYSCALL: "bpf-update" (BPF_MAP_UPDATE_ELEM: ENOMEM) or
 * "perf-open" (perf_event_open: EACCES).  libbpf and the tools make both
 * through libc's syscall(), which this one interposes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/bpf.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	const char *what = getenv("FAIL_THREAD_SYSCALL");
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (what && gettid() != getpid()) {
		if (nr == __NR_bpf && a[0] == BPF_MAP_UPDATE_ELEM &&
		    !strcmp(what, "bpf-update")) {
			errno = ENOMEM;
			return -1;
		}
		if (nr == __NR_perf_event_open && !strcmp(what, "perf-open")) {
			errno = EACCES;
			return -1;
		}
	}
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
