# SPDX-License-Identifier: BSD-2-Clause
"""One window: every probe of a trace through the wrapper counts over the
same interval, at full rate, however the trace ends (bt/README.md, "One
window"), and --hits says how often each probe fired in it.

Full rate is blktgt's own workload through an export, unthrottled (about
450,000 I/Os a second on this 2-core machine), queue depth QD.  Two
scenarios:

  - mid-workload: the trace starts and ends while the workload runs.  A
    probe pair of the I/O path then agrees within the I/Os in flight (QD);
    without the window, bpftrace's one-at-a-time detach left io__submit
    50,000 to 80,000 above io__done;
  - whole workload: the trace spans a workload of a prime count N, and
    every total, the sum of the interval lines and --hits equal N and
    blktgt's own counters."""

import json
import os
import re

import pytest

import probekit
from probekit import Trace
from window_load import BT_DIR, Load, QD, hits
from window_load import full  # noqa: F401 (a fixture)

N = 300007              # prime: the I/Os of one workload (whole() repeats it
                        # until an interval line shows, on a fast machine)
N_PER_IO = 100003       # prime: the same for per-I/O probes, which run the

PAIR_BT = ("usdt:__EXE__:blktgt:io__submit { @s = count(); }\n"
           "usdt:__EXE__:blktgt:io__done { @d = count(); }\n")


def cpus():
    """How many hits can be between their two programs at one moment: one
    a CPU (a probe's block and --hits' block read the gate apart)."""
    return os.cpu_count() or 1


def counts(lines):
    """{name: value} of the plain maps printed as @name: value."""
    return {m.group(1): int(m.group(2)) for m in
            (re.match(r"^@(\w+): (\d+)$", l) for l in lines) if m}


def run_pair(t, what, tmp_path, end, opts=()):
    """The two-probe count through the wrapper with --hits on what (t's
    PID or its file), ended by end ("sigint", "duration", "max_rate" or
    "exit") while the load runs; returns (@s, @d, hits, lines)."""
    script = tmp_path / "pair.bt"
    text = PAIR_BT
    wopts = ["--hits", *opts]
    if end == "duration":
        wopts += ["-d", "2"]
    elif end == "max_rate":
        wopts += ["--max-rate", "1000"]
    elif end == "exit":
        # A script's own exit(), from a traced block while both probes fire.
        text += ("usdt:__EXE__:blktgt:io__done { @n[cpu] = count(); }\n"
                 "interval:ms:500 { @t = @t + 1; if (@t == 3) { exit(); } }\n"
                 "END { clear(@n); delete(@t); }\n")
    script.write_text(text)
    tr = Trace(what, [str(script)], wrapper_opts=wopts).start()
    if end == "sigint":
        # Ended from outside, as Ctrl-C does, once the target has
        # completed 100,000 I/Os since the trace was ready.
        ready = t.rpc("target_stats")["io_completed"]
        probekit.wait_until("100,000 I/Os in the trace", lambda:
                            t.rpc("target_stats")["io_completed"] > ready + 100000)
        lines = tr.stop()
    else:
        rc = tr.proc.wait(timeout=probekit.TIMEOUT)
        lines = tr.out.drain(10)
        assert rc == 0, lines
    c, h = counts(lines), hits(lines)
    assert "s" in c and "d" in c, lines
    assert set(h) == {"blktgt:io__submit", "blktgt:io__done"}, lines
    return c["s"], c["d"], h, lines


@pytest.mark.parametrize("end", ["sigint", "duration", "max_rate", "exit"])
def test_pair_agrees_mid_workload(bpf, full, tmp_path, end):
    """io__submit and io__done count within the I/Os in flight of each
    other, however the trace ends, and --hits agrees with each block."""
    Load(full).start()
    s, d, h, lines = run_pair(full, full.pid, tmp_path, end)
    assert s > 1000 and d > 1000, lines
    assert abs(s - d) <= QD, lines
    assert abs(h["blktgt:io__submit"] - s) <= cpus(), lines
    assert abs(h["blktgt:io__done"] - d) <= cpus(), lines
    if end == "max_rate":
        assert any("is over --max-rate 1000; detaching" in l for l in lines), lines


def test_pair_agrees_mid_workload_path(bpf, blktgt_bin, tmp_path):
    """The same for a PATH (every process that runs the file), on a copy
    of blktgt of the test's own, so that no other blktgt is counted."""
    with probekit.exported_copy(blktgt_bin, tmp_path) as (t, exe):
        Load(t).start()
        s, d, h, lines = run_pair(t, exe, tmp_path, "sigint")
    assert s > 1000 and d > 1000, lines
    assert abs(s - d) <= QD, lines
    assert abs(h["blktgt:io__submit"] - s) <= cpus(), lines


def whole(target, scripts, n, opts=(), until=None):
    """Trace scripts with --hits over workloads of n I/Os each that the
    trace spans whole: one, or as many as it takes for until(lines) to
    hold after one of them (the speed of a machine is not known: a fast
    one runs n I/Os within one interval).  Returns the output lines and
    the I/O count.  A workload's call waits as long as it runs, which
    tracing and a loaded machine stretch: its bound is a hang bound,
    three times the tests' own."""
    t = Trace(target.pid, scripts, wrapper_opts=["--hits", *opts]).start()
    runs = 0
    try:
        before = target.rpc("target_stats")["io_completed"]
        while True:
            r = probekit.rpc_call(target.rpc_sock, "workload_run", {
                "export": "e0", "pattern": "randrw", "io_size": 4096,
                "queue_depth": QD, "count": n}, timeout=3 * probekit.TIMEOUT)
            assert r["ios"] == n and r["errors"] == 0, r
            runs += 1
            if until is None or until(list(t.out.lines)):
                break
            assert runs < 60, "until() never held:\n" + "\n".join(t.out.lines[-40:])
        done = target.rpc("target_stats")["io_completed"] - before
    finally:
        lines = t.stop()
    assert done == runs * n, (done, runs, n)
    return lines, runs * n


def full_interval(lines):
    """bt/iops*.bt printed an interval line that is not the partial last."""
    return any(l.endswith(" I/O per second:") for l in lines)


@pytest.mark.parametrize("script,n", [("iops.bt", N_PER_IO), ("iops_batch.bt", N)])
def test_iops_intervals_add_up(bpf, full, script, n):
    """The interval lines sum exactly to the total, the total is the
    workload's count, and (iops.bt) io__done's hits are too."""
    lines, n = whole(full, [os.path.join(BT_DIR, script)], n, until=full_interval)
    per_interval = [int(m.group(1)) for m in
                    (re.match(r"^@iops_[ab]\[m0, \w+\]: (\d+)$", l) for l in lines) if m]
    total = [int(m.group(1)) for m in
             (re.match(r"^@iops_total\[m0, \w+\]: (\d+)$", l) for l in lines) if m]
    assert sum(total) == n, lines
    assert sum(per_interval) == n, lines
    assert full_interval(lines), lines
    h = hits(lines)
    if script == "iops.bt":
        assert h == {"blktgt:io__done": n}, lines
    else:
        assert set(h) == {"blktgt:io__batch"} and 0 < h["blktgt:io__batch"] <= n, lines


def test_iolat_no_dropped_starts_mid_workload(bpf, full):
    """bt/iolat.bt ended by -d while 8 I/Os are in flight: no start is
    "dropped" (without the window, 40,000 to 95,000 were: the starts whose
    io__done had gone), and the histogram holds every io__done of the
    window but those whose start came before it (at most QD)."""
    Load(full).start()
    t = Trace(full.pid, [os.path.join(BT_DIR, "iolat.bt")],
              wrapper_opts=["--hits", "-d", "2"]).start()
    assert t.proc.wait(timeout=probekit.TIMEOUT) == 0
    lines = t.out.drain(10)
    assert not any("starts_dropped" in l for l in lines), lines
    total = sum(int(m.group(1)) for m in
                (re.match(r"^\[[^\]]*[\])]\s+(\d+) \|", l) for l in lines) if m)
    h = hits(lines)
    assert set(h) == {"blktgt:io__submit", "blktgt:io__done"}, lines
    assert h["blktgt:io__done"] - QD - cpus() <= total <= h["blktgt:io__done"] + cpus(), lines
    assert total > 1000, lines


def test_hits_json_is_one_map(bpf, full, tmp_path):
    """Under -f json, --hits is one JSON object, the map @probekit_hits,
    and the output is JSON lines only."""
    script = tmp_path / "pair.bt"
    script.write_text(PAIR_BT)
    lines, _ = whole(full, [str(script)], N_PER_IO, opts=["-f", "json"])
    # Every line is one JSON object: no blank line (bpftrace writes two
    # before its maps even under -f json; the wrapper drops them).
    assert all(isinstance(json.loads(l), dict) for l in lines), lines
    maps = [json.loads(l) for l in lines if '"@probekit_hits"' in l]
    assert len(maps) == 1, lines
    assert maps[0]["type"] == "map", maps
    assert maps[0]["data"]["@probekit_hits"] == {"blktgt:io__submit": N_PER_IO,
                                                 "blktgt:io__done": N_PER_IO}, maps
