# SPDX-License-Identifier: BSD-2-Clause
"""The libbpf tools' start-up threads (libbpf/README.md, start-up time):
tool_drain.c's thread that sets a DRAINED_HASH's slot while libbpf loads,
and tool_attach.c's thread that pays the first uprobe's RCU grace period
during load.  Their failure paths, forced with tests/lib/fail_thread.c (an
LD_PRELOAD library that fails one system call made from a thread other
than the main one) against the real kernel:

- the slot setter failing is one line naming the map and the error, exit
  1, no readiness line, and nothing left attached to the target: its next
  1009 I/Os map no [uprobes] area (a breakpoint left behind would), and a
  tool attached after it counts all 1009;
- the warm-up failing costs only the head start: iosize counts every I/O
  of a 1009-I/O workload, rpclat every one of 23 bdev_list calls.

The first fails on 00efe5b, which reported the setter's error as "cannot
load BPF programs"; the second is the warm-up's guard (it cannot fail on
code without a warm-up).
"""

import os
import re
import subprocess

import pytest

from histtools import Tool, parse, total, workload
from probekit import ROOT, TIMEOUT

N = 1009                # I/Os, a prime
RPCS = 23               # bdev_list calls, a prime


@pytest.fixture
def fail_thread(tmp_path):
    lib = str(tmp_path / "fail_thread.so")
    subprocess.run(["cc", "-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-o", lib,
                    os.path.join(ROOT, "tests", "lib", "fail_thread.c"), "-ldl"],
                   check=True, timeout=TIMEOUT)
    return lib


def uprobes_mapped(pid):
    with open(f"/proc/{pid}/maps") as f:
        return "[uprobes]" in f.read()


def counted(target):
    """iosize attached normally counts every one of N I/Os."""
    t = Tool("libbpf", "iosize", target.pid).start()
    workload(target, "Malloc0", "randread", 4096, 1, N)
    hists = parse(t.stop())
    return sum(total(h) for h in hists)


@pytest.mark.parametrize("tool", ["iosize", "qdepth", "rpclat"])
def test_slot_setter_failure_is_one_line(bpf, target, fail_thread, tool):
    target.rpc("bdev_malloc_create", name="Malloc0", size_mb=16, block_size=512)
    cmd = Tool("libbpf", tool, target.pid).cmd
    env = dict(os.environ, LD_PRELOAD=fail_thread,
               FAIL_THREAD_SYSCALL="bpf-update")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "", r.stdout
    assert re.fullmatch(rf"probekit-{tool}: cannot point map hists at its "
                        r"first hash: Cannot allocate memory\n", r.stderr), r.stderr
    workload(target, "Malloc0", "randread", 4096, 1, N)
    assert not uprobes_mapped(target.pid)
    assert counted(target) == N


@pytest.mark.parametrize("tool", ["iosize", "rpclat"])
def test_warm_up_failure_costs_only_time(bpf, target, fail_thread, tool):
    target.rpc("bdev_malloc_create", name="Malloc0", size_mb=16, block_size=512)
    t = Tool("libbpf", tool, target.pid,
             env={"LD_PRELOAD": fail_thread,
                  "FAIL_THREAD_SYSCALL": "perf-open"}).start()
    if tool == "iosize":
        workload(target, "Malloc0", "randread", 4096, 1, N)
    else:
        for _ in range(RPCS):
            target.rpc("bdev_list")
    hists = parse(t.stop())
    if tool == "iosize":
        assert sum(total(h) for h in hists) == N, hists
    else:
        assert {h["key"]["method"]: total(h) for h in hists} == \
            {"bdev_list": RPCS}, hists
