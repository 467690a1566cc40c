# SPDX-License-Identifier: BSD-2-Clause
"""scripts/demo.sh (make demo): runs end to end without a terminal, shows
the export's state changes in order, I/O per second and a latency
histogram, and leaves nothing running, also when interrupted."""

import os
import re
import signal
import subprocess

import pytest

import probekit
from probekit import ROOT, LineReader

DEMO = os.path.join(ROOT, "scripts", "demo.sh")
# Short traces keep the run near 10 s (defaults: 3 and 2).
ENV = dict(os.environ, DEMO_IOPS_SECONDS="2", DEMO_IOLAT_SECONDS="1")


def start_demo(blktgt_bin):
    proc = subprocess.Popen([DEMO, blktgt_bin], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=ENV, start_new_session=True)
    return proc, LineReader(proc.stdout)


def running_line(lines):
    for line in lines:
        m = re.match(r"^blktgt: running pid=(\d+) rpc=(\S+)", line)
        if m:
            return int(m.group(1)), m.group(2)
    raise AssertionError("no 'blktgt: running' line:\n" + "\n".join(lines))


def leftovers(pid, rpc_sock):
    """PIDs of processes the demo started that still run: blktgt, a
    bpftrace on it, an rpc.py talking to it."""
    left = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        text = b" ".join(argv).decode(errors="replace")
        if ("bpftrace" in text and f"-p {pid} " in text + " ") or rpc_sock in text:
            left.append((int(p), text))
    return left


def assert_nothing_left(pid, rpc_sock):
    """blktgt is gone, no bpftrace traces it, no rpc.py talks to it, and
    the demo's private directory is removed.  Whatever is left is killed
    (so that one failure does not leak processes into later tests), then
    reported."""
    left = leftovers(pid, rpc_sock)
    for p, _ in left:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, "left running:\n" + "\n".join(f"{p}: {t}" for p, t in left)
    assert not os.path.exists(os.path.dirname(rpc_sock)), "demo directory left behind"


def test_demo_end_to_end(bpf, blktgt_bin):
    proc, out = start_demo(blktgt_bin)
    try:
        # Only a hang reaches this.  demo.sh waits up to READY_TIMEOUT
        # (60 s) for each of three readiness lines and says which one
        # failed; 120 s here could cut a slow but healthy run short of
        # that, on a loaded machine where tracers start in tens of seconds.
        rc = proc.wait(timeout=5 * probekit.TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = out.drain(10)
    text = "\n".join(lines)
    pid, sock = running_line(lines)
    assert_nothing_left(pid, sock)
    assert rc == 0, text

    # The export's state changes, in time order: states.bt prints each
    # CPU's lines in turn and marks with '*' a line that ran on another CPU
    # than its object's previous event (it may print before that one).
    rx = re.compile(r"^[* ]?\s*(\d+)\.(\d{6}) (change|change-done)\s+e0\s+(.*)$")
    changes = [(e, s) for _, e, s in sorted(
        (int(m.group(1)) * 10**6 + int(m.group(2)), m.group(3), m.group(4))
        for m in map(rx.match, lines) if m)]
    assert [(e, re.sub(r" \(status 0, \d+ us\)$", "", s)) for e, s in changes] == [
        ("change", "ACTIVE -> PAUSED"), ("change-done", "PAUSED"),
        ("change", "PAUSED -> ACTIVE"), ("change-done", "ACTIVE")], text

    # Steps in order: states, then IOPS, then the latency histogram.
    order = [text.index(s) for s in ("bt/states.bt", "bt/iops.bt", "bt/iolat_batch.bt",
                                     "== Stopping")]
    assert order == sorted(order), text
    iops = text[order[1]:order[2]]
    assert re.search(r"^\d\d:\d\d:\d\d I/O per second:\n@iops_[ab]\[m0, (read|write)\]: [1-9]\d*$",
                     iops, re.M), iops
    assert re.search(r"^\d\d:\d\d:\d\d last \d+\.\d s \(partial\):$", iops, re.M), iops
    lat = text[order[2]:order[3]]
    assert re.search(r"^@iolat_us\[m0, BDEV_IO_(READ|WRITE)\]:\s*$", lat, re.M), lat
    assert re.search(r"^\[\d+K?, \d+K?\)\s+[1-9]\d* \|@", lat, re.M), lat

    # The workload's own summary, and a clean shutdown.
    assert re.search(r"^   workload stopped early by shutdown after [1-9]\d* I/Os$", text, re.M), text
    assert "blktgt shut down cleanly (exit 0)" in text
    assert not any("RLIMIT_MEMLOCK" in l for l in lines)
    # Nothing a newcomer cannot explain: no drop, loss or warning line.
    assert not re.search(r"dropped|lost|WARNING|ERROR", text, re.I), text


@pytest.mark.parametrize("where", ["probekit: tracing", "I/O per second:"])
def test_demo_interrupted_stops_everything(bpf, blktgt_bin, where):
    """Ctrl-C (SIGINT to the demo's process group) while a trace runs."""
    proc, out = start_demo(blktgt_bin)
    try:
        out.wait_for(re.escape(where))
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=probekit.TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = out.drain(10)
    pid, sock = running_line(lines)
    assert_nothing_left(pid, sock)
    assert rc == 130, "\n".join(lines)
    assert "   interrupted; stopping everything" in lines


def test_demo_bad_usage(tmp_path):
    r = subprocess.run([DEMO], capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert r.returncode == 1 and r.stderr.startswith("demo: usage:"), r.stderr
    r = subprocess.run([DEMO, str(tmp_path / "nope")], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert r.returncode == 1 and "is not an executable" in r.stderr, r.stderr
    r = subprocess.run([DEMO, "/bin/true"], capture_output=True, text=True,
                       env=dict(os.environ, DEMO_IOPS_SECONDS="2s"), timeout=probekit.TIMEOUT)
    assert r.returncode == 1 and "not a whole number" in r.stderr, r.stderr
