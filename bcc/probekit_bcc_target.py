# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_target: the process a bcc/ tool traces.  A PID is checked
to be a live process this one may trace (the capabilities it lacks are
named in one line), and remembered with its start time, so that a recycled
PID is not mistaken for the process the tool attached to."""

import errno
import os
import select

from probekit_bcc_args import die
from probelib import toolspec as spec

MAX_MAPS = 1 << 16      # lines of /proc/PID/maps read, at most


# The capabilities that say "root" to the attach paths below (the rest
# come from specs/privileges.toml, through toolspec.needs()).
CAPS = spec.privileges()["capability"]
CAP_SYS_ADMIN = CAPS["CAP_SYS_ADMIN"]
INCLUDES = spec.privileges().get("includes", {})


def _status_fields(pid, names):
    """{name: [values]} of the given lines of /proc/PID/status."""
    out = {}
    with open("/proc/%s/status" % pid) as f:
        for ln in f.read(1 << 16).splitlines():
            name, _, value = ln.partition(":")
            if name in names:
                out[name] = value.split()
    return out


def has_capability(cap):
    """Whether this process holds capability cap (effective set)."""
    eff = _status_fields("self", ("CapEff",)).get("CapEff", ["0"])[0]
    return int(eff, 16) >> cap & 1 == 1


def _same_user(pid):
    """Whether process pid runs with only our real uid and gid, so the
    kernel lets us read it without CAP_SYS_PTRACE."""
    try:
        ids = _status_fields(pid, ("Uid", "Gid"))
    except OSError:
        return False
    return (set(ids.get("Uid", ["-1"])[:3]) == {str(os.getuid())}
            and set(ids.get("Gid", ["-1"])[:3]) == {str(os.getgid())})


def holds(name):
    """Whether this process holds the capability called name, or one the
    kernel grants it through (CAP_SYS_ADMIN for CAP_BPF and
    CAP_PERFMON)."""
    return has_capability(CAPS[name]) or any(
        name in inc and has_capability(CAPS[key])
        for key, inc in INCLUDES.items())


def privilege_error(pid, what=""):
    """The line for a lack of privilege to trace pid (-1: every process
    running a file) with a BCC tool, as specs/privileges.toml states it
    (what needs it, what this process lacks), or None when nothing is
    missing."""
    other = pid > 0 and pid != os.getpid() and not _same_user(pid)
    need = [name for _, name in spec.needs("bcc", other)]
    lack = [name for name in need if not holds(name)]
    if not lack:
        return None
    whom = ("every process running a file" if pid <= 0
            else "another user's process" if other else "PID %d" % pid)
    return spec.privilege_line(what, "tracing " + whom, need, lack)


def check_privilege(tool, pid):
    """Die in one line naming the capabilities that tracing pid needs and
    this process lacks (specs/privileges.toml).  BCC attaches USDT probes
    and uprobes as uprobe perf events (CAP_SYS_ADMIN on this kernel), and
    at exit clears what it added to tracefs's uprobe_events (mode 0700:
    CAP_DAC_READ_SEARCH), so it is refused before it attaches anything
    it could not cleanly detach."""
    line = privilege_error(pid)
    if line:
        die(tool, line)


# How long a failure waits to learn whether its target is exiting
# (specs/limits.toml).
EXIT_WAIT_S = spec.limits()["TARGET_EXIT_WAIT_MS"] / 1000


class Target:
    """The traced process: its PID, executable and start time, so that a
    recycled PID is not mistaken for the process we attached to."""

    def __init__(self, tool, pid):
        self.tool = tool
        self.pid = pid
        try:
            self.start = self._starttime()
        except FileNotFoundError:
            die(tool, spec.messages()["NO_PROCESS"] % pid)
        except OSError as e:
            die(tool, "cannot read /proc/%d: %s" % (pid, e.strerror))
        if self.start is None:
            die(tool, "PID %d has exited" % pid)
        check_privilege(tool, pid)
        try:
            self.exe = os.readlink("/proc/%d/exe" % pid)
        except PermissionError:
            die(tool, "cannot read /proc/%d/exe: permission denied "
                "(a process of another container?)" % pid)
        except OSError as e:
            # An exiting process loses its executable's link before its
            # last thread has exited.
            if e.errno == errno.ENOENT and self.exiting(EXIT_WAIT_S):
                die(tool, "PID %d has exited" % pid)
            die(tool, "cannot read /proc/%d/exe: %s" % (pid, e.strerror))
        if self.exe.endswith(" (deleted)"):
            die(tool, "PID %d runs a deleted executable (%s); restart it"
                % (pid, self.exe))
        self.comm = os.path.basename(self.exe)

    def _starttime(self):
        """Field 22 of /proc/PID/stat, or None for a zombie."""
        with open("/proc/%d/stat" % self.pid) as f:
            stat = f.read(4096)
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] in ("Z", "X"):
            return None
        return fields[19]

    def exiting(self, wait):
        """Whether the process has exited, or does within wait seconds.
        Asked after a failure: a killed process loses its mappings (which
        fails an attach) before its last thread has exited, so a failure
        its exit caused is followed by the pidfd turning readable."""
        if not self.alive():
            return True
        try:
            fd = os.pidfd_open(self.pid)
        except OSError:
            return not self.alive()
        try:
            p = select.poll()
            p.register(fd, select.POLLIN)
            return bool(p.poll(wait * 1000)) or not self.alive()
        finally:
            os.close(fd)

    def alive(self):
        try:
            return self._starttime() == self.start
        except (OSError, ValueError, IndexError):
            return False

    def address(self, offset):
        """The address at which file offset offset of the executable is
        mapped in the process (what PT_REGS_IP() reads at a site there), or
        None when no mapping of the executable holds it."""
        try:
            with open("/proc/%d/maps" % self.pid) as f:
                for n, line in enumerate(f):
                    if n >= MAX_MAPS:
                        break
                    fields = line.split(None, 5)
                    if len(fields) < 6 or fields[5].rstrip("\n") != self.exe:
                        continue
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    moff = int(fields[2], 16)
                    if moff <= offset < moff + (end - start):
                        return start + offset - moff
        except (OSError, ValueError):
            pass
        return None
