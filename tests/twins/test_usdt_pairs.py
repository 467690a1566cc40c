# SPDX-License-Identifier: BSD-2-Clause
"""usdtlat's in-flight table, both forms (histtools.KINDS): STARTs of
threads and processes that died are reclaimed, a full table's drops are
counted and printed, and the table's bound is --max-inflight
(libbpf/pair_state.h, bcc/probekit_bcc_pairs.py).

Each case is built so that the code before the reclaim fails it: the
dead STARTs alone would fill the table (--max-inflight is set just
above what the live workload needs), so without the reclaim every later
START would be dropped and the histogram would miss the healthy pairs.

A tool prints "... Hit Ctrl-C to end." once attached; the workloads end
on their own replies (an RPC's, pairs_driver's "ok"); a tool's
per-interval JSON (interval 1) says when the reclaim has happened.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

import attach_hold
import histtools
import probekit
import thirdparty
from histtools import json_objects, parse, total
from probekit import TIMEOUT
from thirdparty import K
from pairs import Driver, driver  # noqa: F401 (a fixture)
from histtools import Gen

KINDS = histtools.KINDS

pytestmark = pytest.mark.needs("py:bcc")


def starts(lines):
    """The "N starts ..." lines of a text output."""
    return [ln for ln in lines if " starts " in ln]


# --- blktgt processes killed with I/O in flight ---------------------------

P, Q = 3, 7             # processes killed, I/Os each had in flight
N = 20011               # I/Os of the healthy process after them


def in_flight(target):
    s = target.rpc("target_stats")
    return s["io_submitted"] - s["io_completed"]


def rpc_send(sock_path, method, params):
    """Send one JSON-RPC call whose reply would come only when its work
    ends; the open socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                          "params": params}).encode())
    return s


def starts_total(objs):
    return {k: sum(o["starts"][k] for o in objs)
            for k in ("dropped", "reclaimed")}


def kill_with_io_in_flight(blktgt, tmp_path, i):
    """A blktgt with Q writes waiting on a slow delay bdev, SIGKILLed."""
    d = tmp_path / ("k%d" % i)
    d.mkdir()
    tgt = probekit.Target(blktgt, d).start()
    try:
        tgt.rpc("bdev_malloc_create", name="M0", size_mb=8, block_size=512)
        tgt.rpc("bdev_delay_create", name="D0", base="M0", read_us=1000,
                write_us=10000000)
        # The reply would come when the writes do: send, do not wait.
        sock = rpc_send(tgt.rpc_sock, "workload_run", dict(
            bdev="D0", pattern="write", io_size=4096, queue_depth=Q,
            count=Q))
        probekit.wait_until(f"{Q} I/Os in flight",
                            lambda: in_flight(tgt) == Q)
    finally:
        tgt.stop(sig=signal.SIGKILL, expect_rc=None)
    sock.close()


@pytest.mark.parametrize("kind", KINDS)
def test_dead_processes_starts_reclaimed(bpf, blktgt_bin, tmp_path, kind):
    """-b PATH -k arg1: P blktgt processes killed with Q I/Os in flight
    each leave nothing behind; the P * Q STARTs are reclaimed, and then a
    healthy process's N I/Os are all timed, in a table that the dead
    STARTs alone would have filled."""
    blktgt = str(tmp_path / "blktgt")
    shutil.copy2(blktgt_bin, blktgt)
    t = Gen(kind, "usdtlat", "-b", blktgt, "-k", "arg1", "-j",
            "--max-inflight", P * Q + 2, "blktgt:io__submit",
            "blktgt:io__done", 1).start()
    try:
        for i in range(P):
            kill_with_io_in_flight(blktgt, tmp_path, i)
        # Each interval's JSON says what it reclaimed: wait for all of it.
        t.out.wait_until(lambda lines: starts_total(
            json_objects(lines))["reclaimed"] >= P * Q)
        d = tmp_path / "healthy"
        d.mkdir()
        tgt = probekit.Target(blktgt, d).start()
        try:
            tgt.rpc("bdev_malloc_create", name="M0", size_mb=8,
                    block_size=512)
            histtools.workload(tgt, "M0", "randread", 4096, 2, N)
        finally:
            tgt.stop()
    finally:
        objs = json_objects(t.stop())
    assert starts_total(objs) == {"dropped": 0, "reclaimed": P * Q}, objs
    assert sum(h["total"] for o in objs for h in o["histograms"]) == N, objs


@pytest.mark.parametrize("kind", KINDS)
def test_full_table_counts_its_drops(bpf, target, kind):
    """--max-inflight 5 with 13 I/Os in flight at once: 5 are timed, and
    the 8 STARTs that found the table full are counted and printed."""
    target.rpc("bdev_malloc_create", name="M0", size_mb=8, block_size=512)
    target.rpc("bdev_delay_create", name="D0", base="M0", read_us=1000,
               write_us=200000)
    t = Gen(kind, "usdtlat", "-p", target.pid, "-k", "arg1",
            "--max-inflight", 5, "blktgt:io__submit",
            "blktgt:io__done").start()
    histtools.workload(target, "D0", "write", 4096, 13, 13)
    lines = t.stop()
    assert starts(lines) == ["8 starts dropped (table full)"], lines
    (h,) = parse(lines)
    assert total(h) == 5, lines


@pytest.mark.parametrize("kind", KINDS)
def test_dead_threads_starts_reclaimed(bpf, driver, kind):
    """-p PID -k tid: 1009 threads that each fire a START and exit leave
    nothing behind, in a table of 101; then 1013 pairs of the main
    thread are all timed."""
    d = Driver(driver)
    try:
        t = Gen(kind, "usdtlat", "-p", d.pid, "--max-inflight", 101,
                "pairs:start", "pairs:done").start()
        d.do("dead 1009")
        d.do("pairs 1013")
        lines = t.stop()
    finally:
        d.close()
    assert starts(lines) == [
        "1009 starts reclaimed (thread or process exited)"], lines
    (h,) = parse(lines)
    assert total(h) == 1013, lines


# --- --gate ------------------------------------------------------------------

G = 1019


@pytest.mark.parametrize("kind", KINDS)
def test_gate_raises_a_semaphore_without_counting(bpf, driver, kind):
    """pairs:gstart and pairs:gdone fire only while pairs:gate's
    semaphore is raised (tests/lib/pairs_driver.c's "gated", a program of the
    tests' own, so on every stack): without --gate nothing is timed or
    counted; with it, G pairs and G hits of each, and pairs:gate itself
    is not counted (a PATTERN that matches it counts it, as asked)."""
    d = Driver(driver)
    try:
        lat = Gen(kind, "usdtlat", "-p", d.pid, "pairs:gstart",
                  "pairs:gdone").start()
        # (A PATTERN that matched pairs:gate would raise its semaphore.)
        cnt = Gen(kind, "usdtcount", "-p", d.pid, "pairs:g[sd]*").start()
        d.do("gated %d" % G)
        lat_lines, cnt_lines = lat.stop(), cnt.stop()
        assert parse(lat_lines) == [], lat_lines
        # (an empty count says so: "0 hits", tools' EMPTY line)
        assert [ln.split() for ln in cnt_lines[1:]] == [
            ["PROBE", "COUNT"], ["0", "hits"]], cnt_lines
        lat = Gen(kind, "usdtlat", "-p", d.pid, "--gate", "pairs:gate",
                  "pairs:gstart", "pairs:gdone").start()
        cnt = Gen(kind, "usdtcount", "-p", d.pid, "--gate", "pairs:gate",
                  "pairs:g[sd]*").start()
        d.do("gated %d" % G)
        lat_lines, cnt_lines = lat.stop(), cnt.stop()
    finally:
        d.close()
    (h,) = parse(lat_lines)
    assert total(h) == G, lat_lines
    assert [ln.split() for ln in cnt_lines[1:]] == [
        ["PROBE", "COUNT"], ["pairs:gdone", str(G)],
        ["pairs:gstart", str(G)]], cnt_lines


PY_GATED = thirdparty.python_with_probes("line", "function__entry")

# K calls of probekit_fn once the flag file exists.
PY_CALLS = r"""
import os, sys
def probekit_spin():
    pass
def probekit_fn(i):
    return i + 1
print("spinning", flush=True)
while not os.path.exists(sys.argv[2]):
    probekit_spin()
for i in range(int(sys.argv[1])):
    probekit_fn(i)
print("done", flush=True)
"""


@pytest.mark.skipif(PY_GATED is None, reason="no python3.X here has both "
                    "python:line and python:function__entry (CPython 3.12 "
                    "dropped them); test_gate_raises_a_semaphore_without_counting "
                    "covers --gate")
@pytest.mark.parametrize("kind", KINDS)
def test_gate_python_function_entry(bpf, kind, tmp_path):
    """CPython 3.11 fires function__entry only while python:line is
    enabled (gh-98894): --gate python:line raises it without counting
    it, and the K calls of probekit_fn are counted, each by name."""
    with thirdparty.spinning_python(PY_GATED, PY_CALLS, K,
                                    tmp_path) as (py, go):
        t = Gen(kind, "usdtcount", "-p", py.pid, "--gate", "python:line",
                "python:function__entry", "-S", "arg2").start()
        go()
    lines = t.wait()
    assert "probe = python:line" not in lines, lines
    i = lines.index("probe = python:function__entry")
    rows = [ln.split() for ln in lines[i + 2:]]
    assert ["%d" % K, '"probekit_fn"'] in rows, lines


@pytest.mark.skipif(PY_GATED is None, reason="no python3.X here has both "
                    "python:line and python:function__entry (CPython 3.12 "
                    "dropped them)")
@pytest.mark.parametrize("kind", KINDS)
def test_gated_probe_without_its_gate_says_so(bpf, kind, tmp_path):
    """Without --gate python:line, CPython 3.11's function__entry does
    not fire through the K calls: usdtcount and usdtlat each say that
    nothing was seen and why, in one line, the same from both forms."""
    with thirdparty.spinning_python(PY_GATED, PY_CALLS, K,
                                    tmp_path) as (py, go):
        cnt = Gen(kind, "usdtcount", "-p", py.pid,
                  "python:function__entry").start()
        lat = Gen(kind, "usdtlat", "-p", py.pid, "python:function__entry",
                  "python:function__return").start()
        go()
    cause = "python:function__entry fires only with --gate python:line"
    lines = cnt.wait()
    assert lines[-3:] == ["%-40s %12s" % ("PROBE", "COUNT"),
                          "0 hits: " + cause, lines[-1]], lines
    assert lines[-1].endswith(" exited; tracing ended"), lines
    lines = lat.wait()
    assert "0 pairs: " + cause in lines, lines
    assert parse(lines) == [], lines


# --- a target that exits while the tool attaches -----------------------------

EXITED = (r"^probekit-usdtlat(-bcc)?: PID (\d+) (has exited|\(pairs_driver\) "
          r"exited while its probes were being attached)$")


def zombie(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


def usdtlat(kind, pid, **popen):
    return subprocess.Popen(
        histtools.program(kind, "usdtlat") + [
            "-p", str(pid), "pairs:start", "pairs:done"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **popen)


@pytest.mark.parametrize("kind", KINDS)
def test_target_exits_during_attach(bpf, driver, attach_pause, kind):
    """The target is SIGKILLed while the tool attaches: held at its first
    attach to the target (attach_hold) until the target is a zombie, the
    tool exits 1 with the one line that says the process exited while its
    probes were being attached.
    Then at 7 moments spread over the tool's start (and left a zombie, so
    its PID names no other process): every run either traces and ends on
    the target's exit, or exits 1 with one line saying the process
    exited, never ENOENT or "no process"."""
    import re
    cmd = "probekit-usdtlat" + ("-bcc" if kind == "bcc" else "")
    d = Driver(driver)
    try:
        hold = attach_hold.Hold(attach_pause, d.pid)
        tool = usdtlat(kind, d.pid, env=dict(os.environ, **hold.env),
                       pass_fds=hold.pass_fds)
        hold.wait()
        # Left a zombie until the tool ends, so its PID names no other
        # process.
        os.kill(d.pid, signal.SIGKILL)
        probekit.wait_until("the target a zombie", lambda: zombie(d.pid))
        hold.release()
        out = tool.communicate(timeout=TIMEOUT)[0].decode().splitlines()
    finally:
        d.proc.kill()
        d.proc.wait()
    assert (tool.returncode, out) == (1, [
        f"{cmd}: PID {d.pid} (pairs_driver) exited while its probes were "
        "being attached"]), out
    for i in range(7):
        d = Driver(driver)
        try:
            tool = usdtlat(kind, d.pid)
            # The kill's moment is what varies: 0 to 360 ms (the libbpf
            # tool attaches in tens of ms, the BCC one in about a second).
            time.sleep(i * (0.05 if kind == "libbpf" else 0.15))
            os.kill(d.pid, signal.SIGKILL)
            out = tool.communicate(timeout=TIMEOUT)[0].decode().splitlines()
        finally:
            d.proc.kill()
            d.proc.wait()
        if tool.returncode == 0:
            assert out[0].endswith("Hit Ctrl-C to end.") and out[-1] == (
                "%s: PID %d (pairs_driver) exited; tracing ended"
                % (cmd, d.pid)), out
            continue
        assert tool.returncode == 1 and len(out) == 1, out
        m = re.match(EXITED, out[0])
        assert m and int(m.group(2)) == d.pid, out
