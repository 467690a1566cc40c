# SPDX-License-Identifier: BSD-2-Clause
"""The tools, the exporter and the rest of bt/ at full rate (issue 40's
two scenarios; test_window.py holds the wrapper to them).

Full rate is blktgt's own workload through export e0, unthrottled, queue
depth QD.  Every tool of both kinds (histtools.KINDS) and the exporter
run at once on one target, so that the BCC tools' compiles overlap and
the file pays for two starts (one a scenario), not one a tool:

  - whole workload: the tools span a workload of N I/Os (a prime); each
    total, the sum of each tool's interval outputs (-T 1), the exporter's
    series and, for bt/ scripts, the wrapper's --hits equal N, as do
    blktgt's own target_stats counters over the same span;
  - mid-workload: the tools start and end while the workload runs; a
    tool's probe pair agrees within QD, and each total lies between what
    blktgt completed while the tool surely traced and what it completed
    while the tool ran at all, widened by QD for a per-I/O pair and by
    the records each reactor may hold (IO_BATCH_MAX) for io__batch.
"""

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

import probekit
from histtools import KINDS, Tool, parse, timestamps, total
from exporter_client import Exporter, sample
from window_load import BT_DIR, QD, Load, hits
from window_load import full  # noqa: F401 (a fixture)
from probekit import Trace

pytestmark = pytest.mark.needs("py:bcc")

N = 100003              # prime: the I/Os of the whole workload
MID = 30000             # I/Os completed in a mid-workload trace, at least
IO_BATCH_MAX = 256      # records one reactor may hold (include/io_batch.h)
REACTORS = 2            # probekit.Target's default -R

IO = "blktgt:io__submit", "blktgt:io__done"

# Each tool as run here, by a name of the test's own.  The -T 1 ones print
# an interval a second; every one prints its final output at Ctrl-C.
TOOLS = {
    "iolatency": ("iolatency", "-T", "1"),
    "iolatency --per-io": ("iolatency", "--per-io", "-T", "1"),
    "iosize": ("iosize", "-T", "1"),
    "iosize --per-io": ("iosize", "--per-io", "-T", "1"),
    "qdepth": ("qdepth", "-T", "1"),
    "usdtcount": ("usdtcount", *IO, "-T", "1"),
    "usdtlat": ("usdtlat", "-k", "arg1", "-T", *IO, "1"),
    "funclat": ("funclat", "-T", "1"),
    "rpclat": ("rpclat",),
}
# The tools that count I/Os from io__batch records (the others count
# io__submit hits or completed pairs; rpclat RPCs).
BATCH = {"iolatency", "iosize"}


def start_all(pid, names=TOOLS):
    """Every tool of names in both kinds on pid, started at once (a BCC
    tool compiles for seconds; twins share probes, as test_libbpf.py
    says); returns {(kind, name): Tool} once every one is tracing."""
    tools = {(k, n): Tool(k, TOOLS[n][0], pid, *TOOLS[n][1:])
             for k in KINDS for n in names}
    with ThreadPoolExecutor(len(tools)) as ex:
        list(ex.map(lambda t: t.start(), tools.values()))
    return tools


def stop_all(tools):
    """SIGINT every tool at once; {name: output lines}."""
    with ThreadPoolExecutor(len(tools)) as ex:
        return dict(zip(tools, ex.map(lambda t: t.stop(), tools.values())))


def usdtcounts(lines):
    """usdtcount's counts summed over its intervals, {probe: hits}."""
    c = {}
    for ln in lines:
        m = re.match(r"^(blktgt:\w+) +(\d+)$", ln)
        if m:
            c[m.group(1)] = c.get(m.group(1), 0) + int(m.group(2))
    return c


def io_total(lines):
    """The I/Os of a histogram tool's output: every histogram of every
    interval (funclat prints three a call: its latency's is counted)."""
    hs = parse(lines)
    if any(h["unit"] == "arg4" for h in hs):
        hs = [h for h in hs if h["unit"] not in ("arg4", "retval")]
    return sum(total(h) for h in hs)


def no_loss(lines):
    assert not any("dropped" in ln or "reclaimed" in ln for ln in lines), lines


def stats(t):
    s = t.rpc("target_stats")
    return s["io_submitted"], s["io_completed"]


def exporter_ios(body):
    """The exporter's I/O counts over e0's bdev m0: (latency's, size's)."""
    return tuple(sum(sample(body, f'probekit_io_{m}_count{{bdev="m0",type="{t}"}}') or 0
                     for t in ("read", "write"))
                 for m in ("latency_seconds", "size_bytes"))


# --- whole workload ----------------------------------------------------------

def test_tools_whole_workload(bpf, build, full):
    """Every tool of both kinds and the exporter over a workload of N:
    every I/O total is N, the interval outputs sum to it, usdtcount counts
    N of each probe, rpclat the three RPCs, blktgt N."""
    tools = start_all(full.pid)
    e = Exporter(build, ["-p", str(full.pid)])
    try:
        s0, c0 = stats(full)
        r = full.rpc("workload_run", export="e0", pattern="randrw", io_size=4096,
                     queue_depth=QD, count=N)
        s1, c1 = stats(full)
        # The exporter counts each io__batch hit as it comes: the last
        # batch's may follow the RPC's reply.  Past the timeout, the
        # assertion below shows the scrape.
        try:
            probekit.wait_until("the exporter's N I/Os", lambda:
                                exporter_ios(e.scrape()[1]) == (N, N))
        except AssertionError:
            pass
        body = e.scrape()[1]
    finally:
        outs = stop_all(tools)
        e.stop()
    assert r["ios"] == N and r["errors"] == 0, r
    assert (s1 - s0, c1 - c0) == (N, N)
    for (kind, name), lines in outs.items():
        no_loss(lines)
        if name == "rpclat":
            calls = {h["key"].get("method"): total(h) for h in parse(lines)}
            assert calls == {"target_stats": 2, "workload_run": 1}, lines
            continue
        # The intervals began with the tool and each printed at least once.
        assert len(timestamps(lines)) >= 2, (kind, name, lines)
        if name == "usdtcount":
            assert usdtcounts(lines) == {IO[0]: N, IO[1]: N}, lines
        else:
            assert io_total(lines) == N, (kind, name, lines)
    assert exporter_ios(body) == (N, N), body


# --- mid-workload ------------------------------------------------------------

def test_tools_mid_workload(bpf, build, full):
    """Every tool of both kinds and the exporter (scraped mid-workload)
    started and stopped while the workload runs: usdtcount's pair within
    QD, every I/O total within blktgt's counts over the tool's life."""
    Load(full).start()
    names = [n for n in TOOLS if n != "rpclat"]
    _, before = stats(full)
    tools = start_all(full.pid, names)
    e = Exporter(build, ["-p", str(full.pid)])
    _, ready = stats(full)
    probekit.wait_until("MID I/Os in the trace", lambda:
                        stats(full)[1] > ready + MID)
    body = e.scrape()[1]
    _, stopping = stats(full)
    outs = stop_all(tools)
    e.stop()
    _, after = stats(full)
    slack = {n: REACTORS * IO_BATCH_MAX if n in BATCH else QD for n in names}
    apart = {}
    for (kind, name), lines in outs.items():
        no_loss(lines)
        if name == "usdtcount":
            c = usdtcounts(lines)
            apart[kind] = c[IO[0]] - c[IO[1]]
            n = c[IO[1]]
        else:
            n = io_total(lines)
        lo = stopping - ready - slack[name]
        hi = after - before + slack[name]
        assert lo <= n <= hi, (kind, name, lo, n, hi, lines)
    lat, size = exporter_ios(body)
    assert abs(lat - size) <= REACTORS * IO_BATCH_MAX, body
    assert 0 < lat <= stopping - before + REACTORS * IO_BATCH_MAX, body
    # Each usdtcount ends every probe's count at one instant (its counts
    # are double-buffered): the pair is within what was in flight.  Read
    # one counter after the other, they were 437 apart in 1 of 5 runs
    # under load (a reader preempted between the two reads).
    assert all(abs(d) <= QD for d in apart.values()), apart


# --- bt/ scripts ----------------------------------------------------------------

# Whole workload: the two batch scripts at once (their map names differ;
# iosize.bt's and iosize_batch.bt's do not).  Mid-workload: a per-I/O
# script and a batch one.  A PATH run attaches each probe in every process
# (bpftrace 0.17 took over 60 s for the batch scripts' 8 blocks here):
# iosize.bt alone, over a whole workload (test_window.py has one
# mid-workload).
WHOLE_SCRIPTS = ["iosize_batch.bt", "iolat_batch.bt"]
MID_SCRIPTS = ["iosize.bt", "iolat_batch.bt"]
PATH_SCRIPTS = ["iosize.bt"]
SYS_ENTER = "raw_syscalls:sys_enter"
EDGES = 2               # the window's opening and its close: a thread's one
                        # event under way at each may be counted by one
                        # block of two (check_syscalls)


def hist_totals(lines):
    """{map name: sum of its histograms' rows} of bpftrace's output."""
    sums, name = {}, None
    for ln in lines:
        m = re.match(r"^@(\w+)\[.*\]: *$", ln)
        if m:
            name = m.group(1)
            continue
        m = re.match(r"^\[[^\]]*[\])]\s+(\d+) \|", ln)
        if m and name:
            sums[name] = sums.get(name, 0) + int(m.group(1))
    return sums


def map_sum(lines, name):
    return sum(int(m.group(1)) for m in
               (re.match(rf"^@{name}\[.*\]: (\d+)$", ln) for ln in lines) if m)


def syscall_numbers():
    """{name: number} of this machine's system calls, from the C
    library's headers (<sys/syscall.h>, the numbers the raw_syscalls
    tracepoint's args->id gives)."""
    out = subprocess.run(["cc", "-dM", "-E", "-x", "c", "-"], input="#include <sys/syscall.h>\n",
                         capture_output=True, text=True, check=True).stdout
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"^#define __NR_(\w+) (\d+)$", out, re.M)}


def check_syscalls(lines, h):
    """syscalls.bt's two blocks, raw_syscalls:sys_enter and the syscalls:
    sys_enter_NAME tracepoints, count over one window: each (thread, name)
    of the second is the (thread, number) of the first, to a call an edge.  Without
    the window the probes detach one at a time and each counts over its
    own interval.  --hits counts every process (its tracepoints are not
    filtered by PID), the script blktgt's: at least as many.

    The window's edges are instants, and one system call fires the two
    tracepoints one after the other: a call under way on a thread when the
    gate moves is counted by one block and not the other.  A thread makes
    one call at a time, so each thread's counts differ by at most one call
    an edge (bt/README.md, "One window"); CI's run of 6.18 saw a thread's
    epoll_wait 4,598 by name and 4,597 by number.  Without the window they
    differ by hundreds."""
    by_nr = {(m.group(1), int(m.group(2))): int(m.group(3)) for m in
             (re.match(r"^@sys_by_nr\[(\w+), (\d+)\]: (\d+)$", ln) for ln in lines) if m}
    by_name = {(m.group(1), m.group(2)): int(m.group(3)) for m in
               (re.match(r"^@sys_by_name\[(\w+), tracepoint:syscalls:sys_enter_(\w+)\]: (\d+)$", ln)
                for ln in lines) if m}
    nr = syscall_numbers()
    assert by_name and sum(by_name.values()) > 1000, lines
    apart = {}
    for (thread, name), c in by_name.items():
        apart[thread] = apart.get(thread, 0) + abs(c - by_nr.get((thread, nr[name]), 0))
    assert all(d <= EDGES for d in apart.values()), (apart, lines)
    assert map_sum(lines, "sys_by_thread") == sum(by_nr.values()), lines
    threads = len({t for t, _ in by_nr})
    assert h[SYS_ENTER] >= sum(by_nr.values()) - EDGES * threads, lines
    for (thread, name), c in by_name.items():
        assert h["syscalls:sys_enter_" + name] >= c - EDGES, (name, lines)


def bt_run(t, what, scripts, during):
    """scripts through the wrapper with --hits on what (t's PID or its
    file) while during() runs, then Ctrl-C; (I/Os of @iosize_bytes, of
    @iolat_us, --hits, lines).  syscalls.bt's counts, when it ran, agree
    over one window (check_syscalls)."""
    tr = Trace(what, [os.path.join(BT_DIR, s) for s in scripts],
               wrapper_opts=["--hits"]).start()
    try:
        during()
    finally:
        lines = tr.stop()
    h = hits(lines)
    if "syscalls.bt" in scripts:
        check_syscalls(lines, h)
    sums = hist_totals(lines)
    return sums.get("iosize_bytes", 0), sums.get("iolat_us", 0), h, lines


def whole_workload(t):
    s0, c0 = stats(t)
    r = t.rpc("workload_run", export="e0", pattern="randrw", io_size=4096,
              queue_depth=QD, count=N)
    s1, c1 = stats(t)
    assert r["ios"] == N and r["errors"] == 0, r
    assert (s1 - s0, c1 - c0) == (N, N)


def mid_workload(t):
    """Waits, while the workload runs, for MID I/Os in the trace;
    blktgt's completed I/Os (when the trace was ready, when it is ended)."""
    _, ready = stats(t)
    probekit.wait_until("MID I/Os in the trace", lambda:
                        stats(t)[1] > ready + MID)
    return ready, stats(t)[1]


@pytest.fixture
def path_target(blktgt_bin, tmp_path):
    """A blktgt of the test's own copy, so that a PATH run counts no other
    blktgt, with e0 as in full."""
    exe = tmp_path / "blktgt"
    shutil.copy2(blktgt_bin, exe)
    t = probekit.Target(str(exe), tmp_path)
    t.start()
    t.rpc("bdev_malloc_create", name="m0", size_mb=64, block_size=4096)
    t.rpc("export_create", name="e0", bdev="m0")
    yield t
    t.stop()


def test_bt_whole_workload(bpf, full):
    size, lat, h, lines = bt_run(full, full.pid, WHOLE_SCRIPTS,
                                 lambda: whole_workload(full))
    assert (size, lat) == (N, N), lines
    assert set(h) == {"blktgt:io__batch"} and 0 < h["blktgt:io__batch"] <= N, lines


def test_bt_whole_workload_path(bpf, path_target):
    size, _, h, lines = bt_run(path_target, path_target.binary, PATH_SCRIPTS,
                               lambda: whole_workload(path_target))
    assert size == N and h == {IO[0]: N}, lines


def test_bt_mid_workload(bpf, full):
    """iosize.bt's io__submit within a hit a CPU of --hits; the I/Os it
    saw submitted in the window within the I/Os in flight and the records
    the reactors held of those iolat_batch.bt saw completed in it, and
    each at least what blktgt completed while the trace surely ran."""
    Load(full).start()
    span = {}
    size, lat, h, lines = bt_run(full, full.pid, MID_SCRIPTS,
                                 lambda: span.update(w=mid_workload(full)))
    ready, stopping = span["w"]
    assert abs(h[IO[0]] - size) <= (os.cpu_count() or 1), lines
    assert abs(size - lat) <= QD + REACTORS * IO_BATCH_MAX, lines
    assert stopping - ready - REACTORS * IO_BATCH_MAX <= min(size, lat), lines


@pytest.mark.parametrize("scenario", ["whole", "mid"])
def test_bt_tracepoint_script(bpf, full, scenario):
    """syscalls.bt, over a workload of N or ended while the workload runs:
    its two tracepoint blocks count over one window (check_syscalls)."""
    if scenario == "mid":
        Load(full).start()
        bt_run(full, full.pid, ["syscalls.bt"], lambda: mid_workload(full))
    else:
        bt_run(full, full.pid, ["syscalls.bt"], lambda: whole_workload(full))