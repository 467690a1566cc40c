// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_target.c: the traced process (-p PID) or file (-b PATH): opened,
 * checked, watched for its exit through a pidfd, and named.
 * (declared in tool_target.h; libbpf/README.md lists the rooms and
 * which may call which).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tool_options.h"
#include "tool_priv.h"
#include "tool_target.h"


/* True when /proc/PID/stat says the process is a zombie or dead. */
static bool is_zombie(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

int target_open(struct target *t, pid_t pid)
{
	char link[64], what[96];
	const char *base;
	ssize_t n;
	int err;

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->pidfd = -1;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	if (kill(pid, 0) < 0 && errno == ESRCH) {
		char id[16];

		snprintf(id, sizeof(id), "%d", (int)pid);
		tool_err(MSG_NO_PROCESS, id);
		return -ESRCH;
	}
	/* The pidfd tells us when the target exits, and cannot be fooled
	 * by a recycled PID. */
	t->pidfd = syscall(SYS_pidfd_open, pid, 0);
	if ((t->pidfd < 0 && errno == ESRCH) || is_zombie(pid))
		goto exited;
	n = readlink(link, t->exe, sizeof(t->exe) - 1);
	if (n < 0) {
		err = -errno;
		/* A killed process loses its executable's link before its
		 * last thread has exited (and it is a zombie): wait for that,
		 * as target_exited_during_attach() does, to say what
		 * happened, not ENOENT (1 run in 26 under load). */
		if (err == -ENOENT && t->pidfd >= 0) {
			struct pollfd pfd = { .fd = t->pidfd, .events = POLLIN };

			if (poll(&pfd, 1, TARGET_EXIT_WAIT_MS) > 0)
				goto exited;
		}
		snprintf(what, sizeof(what), "cannot read %s", link);
		if (err != -EACCES && err != -EPERM)
			tool_err("%s: %s", what, strerror(-err));
		else if (!report_denied(what, pid))
			tool_err("%s: permission denied though this process has "
				 "CAP_SYS_ADMIN and CAP_SYS_PTRACE (a process of "
				 "another container?)", what);
		target_close(t);
		return err;
	}
	t->exe[n] = '\0';
	if (n > 10 && !strcmp(t->exe + n - 10, " (deleted)")) {
		tool_err("PID %d runs a deleted executable (%s); restart it",
			 (int)pid, t->exe);
		target_close(t);
		return -ENOENT;
	}
	base = strrchr(t->exe, '/');
	snprintf(t->comm, sizeof(t->comm), "%.255s", base ? base + 1 : t->exe);
	return 0;
exited:
	tool_err("PID %d has exited", (int)pid);
	target_close(t);
	return -ESRCH;
}

/*
 * path made absolute and normal as Python's os.path.abspath() makes it
 * (no "." or ".." components, no repeated '/'), but with its symbolic
 * links kept: the name the user gave is the name the output shows.  -1
 * when it does not fit in len bytes.
 */
static int abs_path(const char *path, char *out, size_t len)
{
	char *buf = malloc(2 * PATH_MAX + 2), *save, *c;
	size_t n = 0;
	int err = 0;

	if (!buf)
		return -1;
	if (path[0] == '/' || !getcwd(buf, PATH_MAX))
		buf[0] = '\0';
	if (path[0] != '/' && !buf[0]) {
		free(buf);
		return -1;
	}
	strcat(buf, "/");
	strncat(buf, path, PATH_MAX);
	out[0] = '\0';
	for (c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		size_t cl = strlen(c);

		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			while (n && out[n - 1] != '/')
				n--;
			if (n)
				n--;
			out[n] = '\0';
			continue;
		}
		if (n + 1 + cl + 1 > len) {
			err = -1;
			break;
		}
		out[n++] = '/';
		memcpy(out + n, c, cl + 1);
		n += cl;
	}
	if (!n && len > 1)
		strcpy(out, "/");
	free(buf);
	return err;
}

int target_open_path(struct target *t, const char *path)
{
	struct stat st;
	const char *base;

	memset(t, 0, sizeof(*t));
	t->pid = -1;
	t->pidfd = -1;
	if (strlen(path) >= PATH_MAX || abs_path(path, t->exe, sizeof(t->exe))) {
		tool_err("cannot trace %.64s...: the path is too long", path);
		return -ENAMETOOLONG;
	}
	if (stat(t->exe, &st)) {
		tool_err("cannot trace %s: %s", t->exe, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		tool_err("cannot trace %s: not a regular file (give the path of "
			 "an executable or a shared library)", path);
		return -EINVAL;
	}
	if (access(t->exe, R_OK)) {
		tool_err("cannot trace %s: %s", path, strerror(errno));
		return -errno;
	}
	base = strrchr(t->exe, '/');
	snprintf(t->comm, sizeof(t->comm), "%.255s", base ? base + 1 : t->exe);
	return 0;
}

bool target_exited_during_attach(const struct target *t)
{
	struct pollfd pfd = { .fd = t->pidfd, .events = POLLIN };
	bool gone;

	if (t->pid <= 0)
		return false;
	/* The pidfd cannot be fooled by a recycled PID; /proc can only
	 * tell a zombie, or no process.  Only a failure asks, and a killed
	 * process loses its mappings (which fails an attach) before its
	 * last thread has exited and its pidfd turns readable: so wait for
	 * that, a moment when the exit caused the failure, at most
	 * TARGET_EXIT_WAIT_MS (on an error path) when it did not. */
	if (t->pidfd >= 0)
		gone = poll(&pfd, 1, TARGET_EXIT_WAIT_MS) > 0;
	else
		gone = is_zombie(t->pid);
	if (gone)
		tool_err("PID %d (%s) exited while its probes were being "
			 "attached", (int)t->pid, t->comm);
	return gone;
}

void target_close(struct target *t)
{
	if (t->pidfd >= 0)
		close(t->pidfd);
	t->pidfd = -1;
}

void target_where(const struct target *t, char *out, size_t len)
{
	if (t->pid > 0)
		snprintf(out, len, "PID %d (%s)", (int)t->pid, t->comm);
	else
		snprintf(out, len, "%s (every process)", t->exe);
}
