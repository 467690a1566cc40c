// SPDX-License-Identifier: BSD-2-Clause
// attach_pause: an LD_PRELOAD library that holds a tracer at a known
// moment of its attach, so that a test can make the traced process exit
// exactly then (test_usdt_pairs.py, test_exporter.py).  It changes no
// result: the tracer's own perf_event_open() runs, only later.
//
// Environment:
//   PROBEKIT_PAUSE_PID  the traced process's PID
//   PROBEKIT_PAUSE_AT   which attach to that PID to hold (from 1): a
//                       uprobe perf_event_open() on it, or a bpf()
//                       BPF_LINK_CREATE of a uprobe_multi link for it
//   PROBEKIT_PAUSE_FD   a socket: the library writes "p" to it when that
//                       call is reached, then waits for a byte back before
//                       it makes the call
//
// libbpf and libbcc make these calls through libc's syscall(), which this
// library's definition comes before.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef long (*syscall_fn)(long, ...);

// union bpf_attr's BPF_LINK_CREATE fields this reads (Linux 6.6's uapi
// linux/bpf.h; Debian 12's headers predate uprobe_multi).
#define LINK_CREATE 28                  // enum bpf_cmd
#define TRACE_UPROBE_MULTI 48           // enum bpf_attach_type
#define ATTACH_TYPE_AT 8                // link_create.attach_type
#define MULTI_PID_AT 56                 // link_create.uprobe_multi.pid

static atomic_long calls;

/* The PID call n with arguments a attaches a uprobe to, or -1. */
static long attach_pid(long n, const long *a)
{
	const unsigned char *attr = (const unsigned char *)a[1];
	unsigned int type, pid;

	if (n == SYS_perf_event_open)
		return a[1];
	if (n != SYS_bpf || a[0] != LINK_CREATE)
		return -1;
	__builtin_memcpy(&type, attr + ATTACH_TYPE_AT, sizeof(type));
	if (type != TRACE_UPROBE_MULTI || (unsigned long)a[2] < MULTI_PID_AT + 4)
		return -1;
	__builtin_memcpy(&pid, attr + MULTI_PID_AT, sizeof(pid));
	return pid;
}

static long env_long(const char *name)
{
	const char *v = getenv(name);

	return v ? strtol(v, NULL, 10) : -1;
}

long syscall(long n, ...)
{
	static syscall_fn real;
	long a[6];
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!real)
		real = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
	if (attach_pid(n, a) == env_long("PROBEKIT_PAUSE_PID") &&
	    atomic_fetch_add(&calls, 1) + 1 == env_long("PROBEKIT_PAUSE_AT")) {
		int fd = (int)env_long("PROBEKIT_PAUSE_FD");
		char c = 'p';

		if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1)
			abort();
	}
	return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
