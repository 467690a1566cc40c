# SPDX-License-Identifier: BSD-2-Clause
"""Interval boundaries lose nothing: the tools that print every interval
take their counts from BPF maps while the probes keep adding to them, and
the sum of every interval's output is exactly what the workload did, both
forms (histtools.KINDS).

The BCC forms used to read a table, then clear() it: every count a probe
added in between was deleted unread.  Events paced evenly at about
250,000 a second (tests/lib/pace.h), in rounds of CHUNK over CHUNK_MS, go on
until each tool has printed BOUNDARIES intervals since they began (its
own output, not a span of wall time: the tools print on absolute times,
and a 4 s run left a tool printing late under load about 1 s to print its
third), so the drains race them however fast the machine; the old code
lost 128 to 650 of
funclat's 1,000,003 in each of three runs, and usdtlat and usdtcount
likewise (bcc/probekit_bcc_drain.py's Delta, for arrays and usdtcount -H's
hash, now; draining -H's hash instead still lost 1 of 1,000,003 in
one of 5 runs under load: a probe adds into an entry just deleted).
The histogram tools that key their histograms in a hash (iosize and the
rest) now swap two hashes and drain the one no probe writes any more
(histogram.bpf.h's DRAINED_HASH, probekit_bcc_drain.py's DrainedHash).
"""

import re
import time

import pytest

from histtools import KINDS, Tool, bdevs, parse, timestamps, total, workload
from probekit import TIMEOUT
from pairs import Driver, driver  # noqa: F401 (fixture)
from histtools import Gen

pytestmark = pytest.mark.needs("py:bcc")

CHUNK = 250007          # events of one round, a prime
CHUNK_MS = 1000         # over which they are spread
BOUNDARIES = 4          # intervals each tool prints while the rounds go on


def intervals(lines):
    """Interval outputs (-T), the final one included."""
    return len(timestamps(lines))


def rounds(tools, one_round, least=1):
    """Call one_round(k) for k = 1, 2, ... until every tool has printed
    BOUNDARIES intervals since the first round began, least times at
    least; the number of rounds."""
    before = [intervals(t.out.lines) for t in tools]
    deadline = time.monotonic() + TIMEOUT
    k = 0
    while k < least or any(intervals(t.out.lines) < b + BOUNDARIES
                       for t, b in zip(tools, before)):
        assert time.monotonic() < deadline, [t.out.lines for t in tools]
        k += 1
        one_round(k)
    return k


def check_intervals(lines, before):
    """BOUNDARIES intervals while the rounds went on, and the final one."""
    assert intervals(lines) >= before + BOUNDARIES + 1, lines


@pytest.mark.parametrize("kind", KINDS)
def test_funclat_intervals_sum_to_every_call(bpf, funcs_driver, kind):
    d = funcs_driver
    t = Tool(kind, "funclat", d.pid, "-T", "1").start()
    before = intervals(t.out.lines)

    n = rounds([t], lambda k: d.do(f"call {CHUNK} {CHUNK_MS}", f"called {CHUNK}")) * CHUNK
    lines = t.stop()
    check_intervals(lines, before)
    sums = {}
    for h in parse(lines):
        sums[h["unit"]] = sums.get(h["unit"], 0) + total(h)
    assert sums == {"arg4": n, "retval": n, "nsecs": n}, lines


def paced(driver, kind, *tools):
    """The number of pairs:start/pairs:done pairs paced under the tools
    (rounds()), and each tool's output lines; a tool is (name, args...),
    -p and -T added."""
    d = Driver(driver)
    try:
        started = [Gen(kind, name, "-p", d.pid, "-T", *args).start()
                   for name, *args in tools]
        before = [intervals(t.out.lines) for t in started]
        n = rounds(started, lambda k: d.do(f"paced {CHUNK} {CHUNK_MS}")) * CHUNK
        outs = [t.stop() for t in started]
    finally:
        d.close()
    for lines, b in zip(outs, before):
        check_intervals(lines, b)
    return n, outs


@pytest.mark.parametrize("kind", KINDS)
def test_usdtlat_intervals_sum_to_every_pair(bpf, driver, kind):
    """usdtlat's histogram is an array."""
    n, (lines,) = paced(driver, kind,
                        ("usdtlat", "pairs:start", "pairs:done", "1"))
    assert sum(total(h) for h in parse(lines)) == n, lines


@pytest.mark.parametrize("kind", KINDS)
def test_usdtcount_intervals_sum_to_every_hit(bpf, driver, kind):
    """usdtcount's counts (an array) and -H (a hash and an array) at
    once; arg1 is i % 1021, so ten of -H's slots fill at once."""
    n, (cnt, hist) = paced(driver, kind, ("usdtcount", "pairs:*", "1"),
                           ("usdtcount", "pairs:start", "-H", "arg1", "1"))
    counts = {}
    for ln in cnt:
        m = re.match(r"^(pairs:\w+) +(\d+)$", ln)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + int(m.group(2))
    assert counts == {"pairs:start": n, "pairs:done": n}, cnt
    hs = parse(hist)
    assert {h["key"]["probe"] for h in hs} == {"pairs:start"}, hist
    assert sum(total(h) for h in hs) == n, hist


IOS = 10007             # I/Os per workload_run, a prime


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
    before = intervals(t.out.lines)
    runs = rounds([t], lambda k: workload(target, "Malloc0", "randrw", 4096, 8, IOS),
                  least=2)
    lines = t.stop()
    check_intervals(lines, before)
    sums = {}
    for h in parse(lines):
        sums[h["key"]["bdev"]] = sums.get(h["key"]["bdev"], 0) + total(h)
    assert sums == {"Malloc0": runs * IOS}, lines
