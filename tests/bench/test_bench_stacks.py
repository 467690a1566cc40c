# SPDX-License-Identifier: BSD-2-Clause
"""make bench-stacks (bench/run --only stacks, bench/stacks.py): the
bpftrace headline rows for each Debian stack's bpftrace beside the host's.

A chroot stack's bpftrace is run through nsenter into the chroot's mount
namespace and root, names the traced binary through /proc/PID/root, and
reads the host build's struct definitions through the bench's own
/proc/PID/root.  These tests drive that same launcher on the host (nsenter
into the test's own namespace: a chroot's paths and the host's are then
the same files) and check what timing cannot: every hit is counted and
every I/O is in the histograms.  Then the whole run with the host alone
(no chroot is needed), and an unknown stack.  Nothing here is timed.
"""

import json
import os
import re
import subprocess
import time

import pytest

import probekit
from bench_runs import BENCH, OLD, bench_run, run_path

pytestmark = pytest.mark.needs("bpftrace", "nsenter", "fio")

HITS = 20011            # passes of bench/hitcost.c's loop under count()
IOS = 1009              # workload_run I/Os under each script


@pytest.fixture(scope="module")
def run():
    return bench_run()


@pytest.fixture(scope="module")
def hitcost(tmp_path_factory):
    from bench_runs import make
    out = tmp_path_factory.mktemp("stacks")
    make(f"O={out}", f"{out}/bench/hitcost-stock")
    return str(out / "bench" / "hitcost-stock")


def foreign(run):
    """The Bpftrace a stack gets, for the host's own userland."""
    import stacks
    return stacks.stack_bpftrace(run, os.getpid(), probekit.BUILD, tree=probekit.ROOT,
                                 wrapper=run.wrapper_of(probekit.BUILD))


def hist_total(lines):
    """The sum of every bucket of bpftrace's hist() output."""
    return sum(int(m.group(1)) for m in
               (re.match(r"^\[[^\]]*[)\]]\s+(\d+)\s+\|", x) for x in lines) if m)


def test_stack_launcher_counts_every_hit(bpf, run, hitcost, tmp_path, monkeypatch):
    monkeypatch.setattr(run, "HITCOST_TRACED", HITS)
    bt = foreign(run)
    assert bt.launcher[:2] == ["nsenter", "-t"]
    assert bt.path(7, "/x") == "/proc/7/root/x"
    rejected = []
    res = run.hitcost_sample(hitcost, True, str(tmp_path), rejected, bt)
    assert res["hits"] == HITS and rejected == []


@pytest.mark.parametrize("config", ["bt-batch", "bt-per-io"])
def test_stack_wrapper_sees_every_io(bpf, blktgt_bin, run, tmp_path, config):
    import batch
    bt = foreign(run)
    desc, argv, ready = batch.configs(probekit.ROOT, probekit.BUILD, run.PYTHON, bt)[config]
    with run.Blktgt(blktgt_bin, str(tmp_path)) as t:
        tr = run.Tracer(argv(t.pid, blktgt_bin), ready).start()
        res = t.t.rpc("workload_run", bdev="null0", pattern="randread",
                      io_size=4096, queue_depth=8, count=IOS)
        lines = tr.stop()
    assert res["ios"] == IOS and res["errors"] == 0
    assert hist_total(lines) == IOS, lines


def test_stack_first_event(bpf, blktgt_bin, run, tmp_path):
    # As the bench names it: bpftrace 0.17 finds nothing to attach in a
    # path with "..", which /proc/PID/maps does not show.
    blktgt_bin = os.path.realpath(blktgt_bin)
    bt = foreign(run)
    fe = run.first_event_bt(probekit.BUILD, blktgt_bin, bt)
    with run.first_event_target(blktgt_bin, str(tmp_path), fe["bpftrace"][1]) as t:
        cmd, line = fe["bpftrace"][1](t.pid)
        assert f"usdt:/proc/{t.pid}/root{blktgt_bin}:" in cmd[-1]
        pair = run.first_event_pair(t, fe, 1, "test")
    assert sorted(pair) == ["bpftrace", "wrapper"]


def test_host_alone_whole_run(bpf, tmp_path):
    """bench/run --only stacks with no chroot stack: every row's samples,
    written to raw/stacks.json, and section 8 of RESULTS.md replaced in
    place (the rest kept)."""
    build = probekit.BUILD
    for need in ("bench/hitcost-stock", "bench/hitcost-nop5"):
        if not os.access(os.path.join(build, need), os.X_OK):
            from bench_runs import make
            make(f"O={build}", os.path.join(build, need))
    (tmp_path / "RESULTS.md").write_text(f"# head\n\n{OLD}\n\n## tail\n")
    r = subprocess.run([run_path(), "--build", build, "--only", "stacks", "--stacks", "",
                        "--runs", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    raw = json.loads((tmp_path / "raw" / "stacks.json").read_text())
    assert raw["stacks"] == ["host"] and raw["runs"] == 1
    with open("/etc/debian_version") as f:
        assert raw["debian"] == {"host": f.read().strip()}
    hc = raw["hitcost"]["samples"]
    assert sorted(hc) == ["nop5-traced:host", "nop5-untraced", "nop5-window:host",
                          "stock-traced:host", "stock-untraced", "stock-window:host"]
    assert all(len(v) == 1 for v in hc.values())
    assert [s["hits"] for k in ("stock-traced:host", "nop5-traced:host",
                                "stock-window:host", "nop5-window:host")
            for s in hc[k]] == [raw["hitcost"]["passes_traced"]] * 4
    fe = raw["first_event"]
    assert {k: len(v) for k, v in fe["samples_ms"].items()} == \
        {"bpftrace:host": 1, "wrapper:host": 1}
    assert {k: len(v) for k, v in fe["pairs_ms"].items()} == \
        {"bpftrace:host": 3, "wrapper:host": 3}
    assert {n: {q: len(v) for q, v in by.items()}
            for n, by in raw["batch"]["samples"].items()} == \
        {n: {"1": 1, "8": 1, "32": 1} for n in ("untraced", "bt-batch:host", "bt-per-io:host")}
    assert raw["hits_per_io"] == 2.0
    text = (tmp_path / "RESULTS.md").read_text()
    assert text.startswith("# head\n\n<!-- section 8") and text.endswith("\n\n## tail\n")
    assert text.count("## 8. ") == 1 and "\nold\n" not in text
    assert "| bt/iolat_batch.bt throughput traced / untraced, qd 32 | **" in text
    assert "| the same, % of a plain hit (CPU time), nop5 | **" in text


def test_unknown_stack_is_one_line(tmp_path):
    r = subprocess.run([run_path(), "--build", probekit.BUILD, "--only", "stacks",
                        "--stacks", "nosuchrelease", "--runs", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PROBEKIT_STACK_CACHE=str(tmp_path)))
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("bench/run: stack nosuchrelease: scripts/stack.sh was not ready") \
        and "unknown stack 'nosuchrelease'" in r.stderr, r.stderr
    assert not (tmp_path / "raw").exists()


@pytest.mark.needs("gnuplot")
def test_make_bench_keeps_section_8(run, tmp_path):
    """make bench rewrites RESULTS.md from its own raw results: section 8,
    from another run, stays, once, after section 7."""
    with open(os.path.join(BENCH, "raw", "results.json")) as f:
        raw = json.load(f)
    (tmp_path / "RESULTS.md").write_text(f"# an older run\n\n{OLD}\n")
    run.write_outputs(str(tmp_path), raw)
    text = (tmp_path / "RESULTS.md").read_text()
    assert "# an older run" not in text
    assert text.count(OLD) == 1 and text.endswith(OLD + "\n")
    assert text.index("## 7. ") < text.index(OLD)


def test_every_first_event_command_starts(bpf, blktgt_bin, run, tmp_path):
    """Each command section 4 of make bench times, once, against a live
    blktgt: a tool's renamed option (funclat's -f, now --function) stopped
    a whole make bench at its first-event rows, which no test ran.  Real paths, as bpftrace 0.17 finds nothing to
    attach in a path with "..", which /proc/PID/maps does not show."""
    blktgt_bin = os.path.realpath(blktgt_bin)
    build = os.path.realpath(probekit.BUILD)
    fe = run.first_event_tools(build, run.tools(build), blktgt_bin)
    live = sorted(k for k in fe if fe[k])
    assert {"bpftrace", "libbpf_ready", "funclat_ready", "usdtlat_ready"} <= set(live)
    with run.first_event_target(blktgt_bin, str(tmp_path), fe["bpftrace"][1]) as t:
        for n in live:
            t.check_alive()
            assert run.time_to_first(*fe[n][1](t.pid)) > 0, n


def test_bcc_first_event_beside_another_tracer(bpf, blktgt_bin, run, tmp_path):
    """bench's BCC first-event program attaches to io__submit while libbpf
    iolatency --per-io holds the same site of the same blktgt, and both
    see the I/O: it registers the site with the semaphore's offset, as
    the others do.  Through BCC 0.26's USDT context it passed stack
    garbage instead, and the kernel refused it (EINVAL, "ref_ctr_offset
    mismatch"): test_every_first_event_command_starts failed so while
    another test traced the same build's blktgt."""
    from histtools import Tool, parse, total
    t = probekit.Target(blktgt_bin, tmp_path).start()
    try:
        t.rpc("bdev_malloc_create", name="M0", size_mb=8, block_size=512)
        tool = Tool("libbpf", "iolatency", t.pid, "--per-io").start()
        first = subprocess.Popen([run.PYTHON, run.FIRST_BCC, str(t.pid)],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, start_new_session=True)
        # I/O until it has seen some: it says nothing before its first
        # event (BCC's compile takes seconds under load), so the
        # workloads go on until it exits, or for the tests' timeout.
        runs, deadline = 0, time.monotonic() + probekit.TIMEOUT
        while first.poll() is None and time.monotonic() < deadline:
            t.rpc("workload_run", bdev="M0", pattern="randrw", io_size=4096,
                  queue_depth=2, count=23)
            runs += 1
        out, _ = first.communicate(timeout=probekit.TIMEOUT)
        assert (first.returncode, out) == (0, "probekit-bench: first event\n"), out
        hists = parse(tool.stop())
        assert sum(total(h) for h in hists) == 23 * runs, hists
    finally:
        t.stop()
