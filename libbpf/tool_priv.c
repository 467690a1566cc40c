// SPDX-License-Identifier: BSD-2-Clause
/*
 * tool_priv.c: whether this process may trace, and the one line that says
 * which capabilities it lacks when it may not.
 * (declared in tool_priv.h; libbpf/README.md lists the rooms and
 * which may call which).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

#include <bpf/btf.h>

#include "tool_options.h"
#include "tool_priv.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

/* Whether this process has cap in its effective set. */
static bool has_cap(int cap)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[CAP_TO_INDEX(cap)].effective & CAP_TO_MASK(cap);
}

/* Whether this process has cap, or a capability the kernel grants it
 * through (CAP_SYS_ADMIN for CAP_BPF and CAP_PERFMON). */
static bool holds(int cap)
{
	return has_cap(cap) || ((cap == CAP_BPF || cap == CAP_PERFMON) &&
				has_cap(CAP_SYS_ADMIN));
}

/*
 * Whether libbpf's bpf_program__attach_usdt() attaches with multi-uprobe
 * links here, which CAP_BPF and CAP_PERFMON allow, rather than with
 * uprobe perf events, which need CAP_SYS_ADMIN: it does where the libbpf
 * this process runs has multi-uprobe links (its
 * bpf_program__attach_uprobe_multi, looked up in the loaded libbpf.so,
 * not the headers this was built with) and the kernel has them too (its
 * BTF has struct bpf_uprobe_multi_link).  Both are read without
 * privilege, as a tool that was refused must; tests/twins/test_privileges.py
 * holds the answer to the kind of link libbpf really made.
 */
/* Whether the kernel's BTF has struct name: read without privilege. */
static bool kernel_has_struct(const char *name)
{
	struct btf *btf = btf__load_vmlinux_btf();
	bool has;

	if (!btf)
		return false;
	has = btf__find_by_name_kind(btf, name, BTF_KIND_STRUCT) > 0;
	btf__free(btf);
	return has;
}

static bool usdt_multi(void)
{
	static int known = -1;

	if (known < 0)
		known = dlsym(RTLD_DEFAULT, "bpf_program__attach_uprobe_multi") &&
			kernel_has_struct("bpf_uprobe_multi_link");
	return known;
}

/*
 * Whether this kernel charges BPF memory to RLIMIT_MEMLOCK, as Linux did
 * before 5.11 (which charges the memory cgroup instead), so that a
 * process needs CAP_SYS_RESOURCE, or a limit of its own large enough,
 * to load the tools' maps: libbpf raises the limit to infinity first,
 * which only CAP_SYS_RESOURCE may.  Its BTF then still has struct
 * bpf_map_memory, where each map kept what it charged (5.11 took it
 * out).  Read without privilege, as usdt_multi(); measured on Debian
 * 11's 5.10, where CAP_SYS_ADMIN alone was refused
 * (doc/supported-systems.md).  Its limit in KiB, or 0 when it does not
 * apply (another kernel, or no limit).
 */
static unsigned long long memlock_limit_kib(void)
{
	static int charged = -1;
	struct rlimit rl;

	if (charged < 0)
		charged = kernel_has_struct("bpf_map_memory");
	if (!charged || getrlimit(RLIMIT_MEMLOCK, &rl) ||
	    rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return rl.rlim_cur / 1024;
}

/* names joined as "A", "A and B", "A, B and C" (probes/probelib/toolspec.py's
 * and_list()). */
static void and_list(char *out, size_t len, const char **names, int n)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < n && used < len; i++)
		used += snprintf(out + used, len - used, "%s%s",
				 !i ? "" : i == n - 1 ? " and " : ", ",
				 names[i]);
}

/*
 * What tracing needs is specs/privileges.toml's, measured on Linux 6.18
 * (doc/privileges.md): a uprobe perf event needs CAP_SYS_ADMIN again
 * since the fix for CVE-2025-38466, a multi-uprobe link CAP_BPF and
 * CAP_PERFMON (libbpf's USDT attach makes one or the other: usdt_multi()), a tracepoint found through tracefs (mode 0700)
 * CAP_DAC_READ_SEARCH too, and another user's process CAP_SYS_PTRACE.
 * A kernel that charges BPF memory to RLIMIT_MEMLOCK adds CAP_SYS_RESOURCE,
 * and the line ends saying why (memlock_limit_kib()).
 *
 * Print "TOOL: WHAT: permission denied: tracing WHOM needs root, or ...;
 * this process lacks ..." (probes/probelib/toolspec.py's privilege_line()) and
 * return true when a capability is missing; return false, printing
 * nothing, when none is, so that the caller reports the error as it is.
 */
static bool privilege_error(const char *what, pid_t pid)
{
	const char *need[8], *lack[8];
	const struct tool_cap *c;
	char whom[64], path[32], needs[160], lacks[160], memlock[160] = "";
	unsigned long long kib = memlock_limit_kib();
	int nneed = 0, nlack = 0;
	bool other = false;
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (pid > 0 && !stat(path, &st) && st.st_uid != geteuid())
		other = true;
	if (tool_needs_multi_own && usdt_multi())
		c = other ? tool_needs_multi_other : tool_needs_multi_own;
	else
		c = other ? tool_needs_other : tool_needs_own;
	for (; c->name && nneed < 7; c++) {
		need[nneed++] = c->name;
		if (!holds(c->cap))
			lack[nlack++] = c->name;
	}
	if (kib) {
		need[nneed++] = "CAP_SYS_RESOURCE";
		if (!has_cap(CAP_SYS_RESOURCE))
			lack[nlack++] = "CAP_SYS_RESOURCE";
		snprintf(memlock, sizeof(memlock), " (this kernel charges BPF "
			 "memory to RLIMIT_MEMLOCK, %llu KiB here, which "
			 "CAP_SYS_RESOURCE lifts)", kib);
	}
	if (!nlack)
		return false;
	if (pid <= 0)
		snprintf(whom, sizeof(whom), "every process running a file");
	else if (other)
		snprintf(whom, sizeof(whom), "another user's process");
	else
		snprintf(whom, sizeof(whom), "PID %d", (int)pid);
	and_list(needs, sizeof(needs), need, nneed);
	and_list(lacks, sizeof(lacks), lack, nlack);
	tool_err("%s: permission denied: tracing %s needs root, or %s; "
		 "this process lacks %s%s", what, whom, needs, lacks, memlock);
	return true;
}

bool report_denied(const char *what, pid_t pid)
{
	return privilege_error(what, pid);
}
