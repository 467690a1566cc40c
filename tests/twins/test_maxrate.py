# SPDX-License-Identifier: BSD-2-Clause
"""--max-rate HITS_PER_S, the cost guard of every histogram tool.

A libbpf tool, its bcc/ twin and a .bt script through the wrapper, each
in both modes (the batch probe and the per-I/O one), given a budget of 1000 probe hits per second (100 for the batch probe,
whose hits carry up to 256 I/Os), watch a workload_run of
200,003 I/Os that exceeds it many times over.  Each must stop by itself,
exit 0 with its histogram printed and one line saying why, leave no
process behind and the probe's semaphore at 0.  libbpf and bcc read the
hit counter after detaching, so per I/O the histogram holds exactly the
hits the line names (a batch hit carries 1..IO_BATCH_MAX records).  Under a budget the workload never reaches, the same tools
count a known workload exactly and run until Ctrl-C.
"""

import os
import re
import subprocess

import pytest

import probekit
from histtools import Tool, parse, run_tool, total, workload, one_error_line
from semaphores import Semaphores

pytestmark = pytest.mark.needs("py:elftools")

IOS = 200003            # far above the budget in any one second
SMALL = 23              # a prime, far below a large budget
# Hits per second: per I/O, the workload far exceeds 1000; in batch mode a
# hit carries up to IO_BATCH_MAX records, so IOS are about 800 hits, which
# a budget of 100 still leaves far behind.
BUDGET = {"per-io": 1000, "batch": 100}


def stop_line(kind, budget):
    if kind == "bt":
        return re.compile(r"^probekit-bpftrace: (\d+) probe hits/s is over "
                          rf"--max-rate {budget}; detaching$")
    return re.compile(r"^probekit-iosize(-bcc)?: (\d+) probe hits/s is over "
                      rf"--max-rate {budget}; detached after (\d+) hits$")
BT_ROW = re.compile(r"^\[[^\]]+[\])] +(\d+) \|@*\s*\|$")


@pytest.fixture
def malloc0(target):
    target.rpc("bdev_malloc_create", name="Malloc0", size_mb=16, block_size=512)
    return target


class BtTool(Tool):
    """bt/iosize.bt through the wrapper, run like a histogram tool."""

    def __init__(self, pid, mode, *opts):
        script = "iosize.bt" if mode == "per-io" else "iosize_batch.bt"
        self.cmd = [probekit.WRAPPER, *map(str, opts),
                    str(pid), os.path.join(probekit.ROOT, "bt", script)]
        self.env = dict(os.environ)
        self.tidy = False


# Each tool in both modes: the batch probe (the default; a hit carries up
# to IO_BATCH_MAX records) and the per-I/O probe (--per-io, iosize.bt).
MODES = [("libbpf", "batch"), ("libbpf", "per-io"), ("bcc", "batch"),
         ("bcc", "per-io"), ("bt", "batch"), ("bt", "per-io")]
SEMAPHORE = {"batch": "io__batch", "per-io": "io__submit"}
IO_BATCH_MAX = 256


def start(kind, mode, pid, *opts):
    if kind == "bt":
        return BtTool(pid, mode, *opts).start()
    if mode == "per-io":
        opts = ("--per-io",) + opts
    return Tool(kind, "iosize", pid, *opts).start()


def bt_total(lines):
    return sum(int(m.group(1)) for m in map(BT_ROW.match, lines) if m)


@pytest.mark.parametrize("kind,mode", MODES)
def test_over_budget_stops_prints_and_detaches(bpf, malloc0, kind, mode):
    sem = SEMAPHORE[mode]
    sems = Semaphores(malloc0.pid, (sem,))
    assert sems.read() == {sem: 0}
    budget = BUDGET[mode]
    t = start(kind, mode, malloc0.pid, "--max-rate", budget)
    assert sems.read() == {sem: 1}
    workload(malloc0, "Malloc0", "read", 4096, 8, IOS)
    lines = t.wait()            # exit 0, by itself: no signal was sent
    assert t.proc.poll() == 0
    assert sems.read() == {sem: 0}
    if kind == "bt":
        stops = [m for m in map(stop_line(kind, budget).match, lines) if m]
        assert len(stops) == 1, lines
        assert int(stops[0].group(1)) > budget
        # exit() is asynchronous: hits go on until bpftrace detaches.
        assert 0 < bt_total(lines) <= IOS, lines
        return
    stops = [m for m in map(stop_line(kind, budget).match, lines) if m]
    assert len(stops) == 1, lines
    rate, hits = int(stops[0].group(2)), int(stops[0].group(3))
    assert rate > budget and 0 < hits <= IOS
    (h,) = parse(lines)
    if mode == "per-io":
        assert total(h) == hits, lines
    else:
        # A hit is one batch: the budget bounds traps, each carrying
        # 1..IO_BATCH_MAX records, and every record of them is binned.
        assert hits <= total(h) <= min(IOS, hits * IO_BATCH_MAX), lines


@pytest.mark.parametrize("kind,mode", MODES)
def test_under_budget_counts_exactly(bpf, malloc0, kind, mode):
    t = start(kind, mode, malloc0.pid, "--max-rate", 1000000000)
    workload(malloc0, "Malloc0", "read", 4096, 2, SMALL)
    lines = t.stop()
    assert not any("max-rate" in ln for ln in lines), lines
    if kind == "bt":
        assert bt_total(lines) == SMALL, lines
    else:
        (h,) = parse(lines)
        assert total(h) == SMALL, lines


@pytest.mark.parametrize("kind", ["libbpf", "bcc"])
@pytest.mark.parametrize("value", ["0", "12x", "1000000001"])
def test_bad_budget_is_one_line(kind, value):
    rc, lines = run_tool(kind, "iosize", "-p", "1", "--max-rate", value)
    one_error_line(rc, lines, "iosize", "--max-rate", want_rc=2)


@pytest.mark.parametrize("value", ["0", "12x", "1000000001"])
def test_bad_budget_is_one_line_bt(value):
    r = subprocess.run([probekit.WRAPPER,
                        "--max-rate", value, "1", os.path.join(probekit.ROOT, "bt", "iosize.bt")],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    # A usage error: 2, as the tools' (want_rc above).
    assert r.returncode == 2 and r.stdout == ""
    assert re.fullmatch(r"probekit-bpftrace: --max-rate '[^']*' is (out of range|not a whole)"
                        r"[^\n]*\n", r.stderr), r.stderr


COUNT_BUDGET = BUDGET["per-io"]    # usdtcount: one hit per probe fired
COUNT_STOP = re.compile(r"^probekit-usdtcount(-bcc)?: (\d+) probe hits/s is over "
                        rf"--max-rate {COUNT_BUDGET}; detached after (\d+) hits$")
COUNT_ROW = re.compile(r"^blktgt:io__submit +(\d+)$")


@pytest.mark.parametrize("kind", ["libbpf", "bcc"])
def test_usdtcount_over_budget(bpf, malloc0, kind):
    """The generic counter takes the same budget: its count is the hits
    the line names, exactly (it detaches its own uprobe links first)."""
    sems = Semaphores(malloc0.pid, ("io__submit",))
    t = Tool(kind, "usdtcount", malloc0.pid, "blktgt:io__submit",
             "--max-rate", COUNT_BUDGET).start()
    assert sems.read() == {"io__submit": 1}
    workload(malloc0, "Malloc0", "read", 4096, 8, IOS)
    lines = t.wait()
    assert sems.read() == {"io__submit": 0}
    stops = [m for m in map(COUNT_STOP.match, lines) if m]
    rows = [int(m.group(1)) for m in map(COUNT_ROW.match, lines) if m]
    assert len(stops) == 1 and len(rows) == 1, lines
    assert int(stops[0].group(2)) > COUNT_BUDGET
    assert rows[0] == int(stops[0].group(3)) and 0 < rows[0] <= IOS, lines
