# SPDX-License-Identifier: BSD-2-Clause
"""What a runner that makes a chroot must leave behind: no process, no
mount; and a program copied into a root with the libraries it needs."""

import os
import select
import shutil
import signal
import subprocess

from probekit import TIMEOUT


def copy_with_libs(root, prog):
    """Copy prog, and every library ldd says it loads, to the same paths
    under root."""
    path = shutil.which(prog)
    out = subprocess.run(["ldd", path], capture_output=True, text=True,
                         check=True).stdout
    files = [path] + [w for w in out.split() if w.startswith("/")]
    for f in files:
        dest = root / f.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(f), dest)


def mounts(pid=None):
    """The mount points seen by process pid (this process's by default)."""
    cmd = ["findmnt", "-l", "-n", "-o", "TARGET"]
    if pid:
        cmd += ["-N", str(pid)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return r.stdout.splitlines()


def sigkill_leaves_nothing(runner, out, pids, cache):
    """SIGKILL a chroot runner: its mounts under cache, seen only in its
    own namespace before, are nowhere after, and everything it started
    (pids) ends with it, the namespace with them."""
    assert not [m for m in mounts() if m.startswith(str(cache))]
    pidfds = [os.pidfd_open(p) for p in pids]
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=TIMEOUT)
    for fd in pidfds:
        ready, _, _ = select.select([fd], [], [], TIMEOUT)
        assert ready, "a process of the killed runner is still running"
        os.close(fd)
    assert not [m for m in mounts() if m.startswith(str(cache))]
    out.drain(TIMEOUT)
    runner.stdout.close()


def children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]
