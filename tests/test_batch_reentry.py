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

import json
import os
import subprocess
import sys

import pytest

import probekit
from histtools import KINDS, Tool, json_objects, parse, total, workload

pytestmark = pytest.mark.needs("bpftool", "py:bcc")

TAKEN, FREE = 1009, 23
SCRATCH = "io_batch_scratch"
BUSY = f"{TAKEN} I/Os dropped (batch buffer held by a preempted run)"


def bpftool(*args):
    p = subprocess.run(["bpftool", "-j", *args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stdout.decode(errors="replace")
    return json.loads(p.stdout) if p.stdout.strip() else None


def scratch_map(pid):
    """The io_batch_scratch map process pid holds, a libbpf tool or a bcc/
    one's Python (its fdinfo names the maps' ids; the kernel keeps 15
    characters of a map's name)."""
    found = []
    fds = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fds):
        try:
            with open(os.path.join(fds, fd)) as f:
                info = dict(ln.split(":", 1) for ln in f.read().splitlines()
                            if ":" in ln)
        except FileNotFoundError:
            continue
        if "map_id" not in info:
            continue
        m = bpftool("map", "show", "id", info["map_id"].strip())
        if SCRATCH.startswith(m["name"]) and m["type"] == "percpu_array":
            found.append(m)
    assert len(found) == 1, found
    return found[0]


def set_busy(m, busy):
    """Every CPU's buffer marked taken (busy 1) or free (0): the flag,
    a u64, ends the value; bpftool gives each CPU the same value."""
    value = bytes(m["bytes_value"] - 8) + busy.to_bytes(8, sys.byteorder)
    bpftool("map", "update", "id", str(m["id"]), "key", "hex", "00", "00",
            "00", "00", "value", "hex", *(f"{b:02x}" for b in value))


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
