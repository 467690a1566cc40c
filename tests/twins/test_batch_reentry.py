# SPDX-License-Identifier: BSD-2-Clause
"""io__batch's scratch buffer is owned by one run at a time (libbpf's
io_batch.bpf.h, bcc/'s IO_BATCH_BUF_C): a hit that finds its CPU's buffer
taken reads nothing, and its records are counted as dropped, none of them
in a histogram.  Both kinds of twin, histtools.KINDS.

A uprobe's program can be preempted only on a kernel preempted "full" or
"lazy"; this machine's kernel is "none" and locked down (its debugfs
sched/preempt cannot be written), so a real second run on one CPU cannot
be provoked here.  The state it would find is made instead: the tool's own
buffer, marked taken on every CPU through the map (bpftool), while blktgt
completes TAKEN I/Os; then marked free again for FREE more.  The tool must
count exactly FREE and say TAKEN dropped, for their reason: the buffer was
busy, not the table full (toolspec.LOSSES; before, both forms said
"1009 I/Os dropped (table full)").
"""


import pytest

import probekit
from histtools import KINDS, Tool, json_objects, parse, total, workload
from batch_readers import scratch_map, set_busy

pytestmark = pytest.mark.needs("bpftool", "py:bcc")

TAKEN, FREE = 1009, 23
BUSY = f"{TAKEN} I/Os dropped (batch buffer held by a preempted run)"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["iolatency", "iosize"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_taken_scratch_drops_and_counts(bpf, blktgt_bin, tmp_path, kind, name,
                                        fmt):
    t = probekit.Target(blktgt_bin, tmp_path).start()
    try:
        t.rpc("bdev_malloc_create", name="Malloc0", size_mb=16,
              block_size=512)
        tool = Tool(kind, name, t.pid, *(["-j"] if fmt == "json" else []))
        tool.start()
        m = scratch_map(tool.proc.pid)
        set_busy(m, 1)
        workload(t, "Malloc0", "randrw", 4096, 8, TAKEN)
        set_busy(m, 0)
        workload(t, "Malloc0", "randrw", 4096, 8, FREE)
        lines = tool.stop()
    finally:
        t.stop()
    out = "\n".join(lines)
    if fmt == "json":
        (obj,) = json_objects(lines)
        assert sum(h["total"] for h in obj["histograms"]) == FREE, out
        assert obj["I/Os"] == {"dropped": 0, "busy": TAKEN,
                               "unreadable": 0}, out
        assert obj["batches"] == {"bad_count": 0}, out
        return
    assert sum(total(h) for h in parse(lines)) == FREE, out
    # The busy line only: no "table full", whose map had room.
    assert [ln for ln in lines if "dropped" in ln] == [BUSY], out
