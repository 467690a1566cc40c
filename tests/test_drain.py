# SPDX-License-Identifier: BSD-2-Clause
"""Interval boundaries lose nothing: the tools that print every interval
take their counts from BPF maps while the probes keep adding to them, and
the sum of every interval's output is exactly what the workload did, both
forms (histtools.KINDS).

The BCC forms used to read a table, then clear() it: every count a probe
added in between was deleted unread.  N events paced evenly over PACE_MS
(tests/pace.h) at about 250,000 a second cross at least three 1 s
boundaries whatever the machine's speed; the old code lost 128 to 650 of
funclat's 1,000,003 in each of three runs, and usdtlat and usdtcount
likewise (bcc/probekit_bcc.py's Delta, for arrays and usdtcount -H's
hash, now; draining -H's hash instead still lost 1 of 1,000,003 in
one of 5 runs under load: a probe adds into an entry just deleted).
The histogram tools that key their histograms in a hash (iosize and the
rest) now swap two hashes and drain the one no probe writes any more
(histogram.bpf.h's DRAINED_HASH, probekit_bcc.py's DrainedHash).
"""

import re
import time

import pytest

from histtools import KINDS, Tool, bdevs, parse, timestamps, total, workload
from probekit import TIMEOUT
from test_usdt_pairs import Driver, Gen, driver  # noqa: F401 (fixture)

pytestmark = pytest.mark.needs("py:bcc")

N = 1000003             # events, a prime
PACE_MS = 4000          # over which they are spread: 3 boundaries at least


def intervals(lines):
    """Interval outputs (-T), the final one included: at least 4 means the
    workload crossed at least 3 boundaries."""
    return len(timestamps(lines))


@pytest.mark.parametrize("kind", KINDS)
def test_funclat_intervals_sum_to_every_call(bpf, funcs_driver, kind):
    d = funcs_driver
    t = Tool(kind, "funclat", d.pid, "-T", "1").start()
    d.do(f"call {N} {PACE_MS}", f"called {N}")
    lines = t.stop()
    assert intervals(lines) >= 4, lines
    sums = {}
    for h in parse(lines):
        sums[h["unit"]] = sums.get(h["unit"], 0) + total(h)
    assert sums == {"arg4": N, "retval": N, "nsecs": N}, lines


def paced(driver, kind, *tools):
    """Each tool's output lines, after N pairs:start/pairs:done pairs
    paced under them all; a tool is (name, args...), -p and -T added."""
    d = Driver(driver)
    try:
        started = [Gen(kind, name, "-p", d.pid, "-T", *args).start()
                   for name, *args in tools]
        d.do(f"paced {N} {PACE_MS}")
        outs = [t.stop() for t in started]
    finally:
        d.close()
    for lines in outs:
        assert intervals(lines) >= 4, lines
    return outs


@pytest.mark.parametrize("kind", KINDS)
def test_usdtlat_intervals_sum_to_every_pair(bpf, driver, kind):
    """usdtlat's histogram is an array."""
    (lines,) = paced(driver, kind,
                     ("usdtlat", "pairs:start", "pairs:done", "1"))
    assert sum(total(h) for h in parse(lines)) == N, lines


@pytest.mark.parametrize("kind", KINDS)
def test_usdtcount_intervals_sum_to_every_hit(bpf, driver, kind):
    """usdtcount's counts (an array) and -H (a hash and an array) at
    once; arg1 is i % 1021, so ten of -H's slots fill at once."""
    cnt, hist = paced(driver, kind, ("usdtcount", "pairs:*", "1"),
                      ("usdtcount", "pairs:start", "-H", "arg1", "1"))
    counts = {}
    for ln in cnt:
        m = re.match(r"^(pairs:\w+) +(\d+)$", ln)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + int(m.group(2))
    assert counts == {"pairs:start": N, "pairs:done": N}, cnt
    hs = parse(hist)
    assert {h["key"]["probe"] for h in hs} == {"pairs:start"}, hist
    assert sum(total(h) for h in hs) == N, hist


IOS = 10007             # I/Os per workload_run, a prime
BOUNDARIES = 4          # interval outputs the runs go on through


@pytest.mark.parametrize("kind", KINDS)
def test_iosize_intervals_sum_to_every_io(bpf, bdevs, kind):
    """A histogram keyed in a hash (-B: per bdev), drained each second
    while runs of IOS I/Os go on: the intervals' sum is every I/O of every
    run, none lost to a drain and none counted twice.  The runs go on until
    the tool has printed BOUNDARIES intervals since the first began: its
    own output, not a span of wall time, which holds fewer boundaries
    than counted on when the tool prints late under load (4.5 s left it
    half a second to print its fourth)."""
    target = bdevs
    t = Tool(kind, "iosize", target.pid, "-B", "-T", "1").start()
    before, runs = intervals(t.out.lines), 0
    deadline = time.monotonic() + TIMEOUT
    while runs < 2 or intervals(t.out.lines) < before + BOUNDARIES:
        assert time.monotonic() < deadline, t.out.lines
        workload(target, "Malloc0", "randrw", 4096, 8, IOS)
        runs += 1
    lines = t.stop()
    assert intervals(lines) >= before + BOUNDARIES + 1, lines
    sums = {}
    for h in parse(lines):
        sums[h["key"]["bdev"]] = sums.get(h["key"]["bdev"], 0) + total(h)
    assert sums == {"Malloc0": runs * IOS}, lines
