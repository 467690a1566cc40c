# SPDX-License-Identifier: BSD-2-Clause
"""io__batch hits a reader cannot read are counted and said, by reason
(toolspec.LOSSES), for a service of the user's own that fires
blktgt:io__batch with include/io_batch.h's records (batch_driver.c): the
histogram tools, both kinds of twin (histtools.KINDS), and the exporter.

- Records whose address the tool cannot read (a PROT_NONE mapping: as a
  paged-out or unmapped batch) are counted as such, UNREADABLE of them:
  "1009 I/Os dropped (unreadable batch)", JSON "unreadable", not "table
  full" as before, whose map had room.
- A hit whose count is out of range (0, negative, past IO_BATCH_MAX) says
  nothing of how many records it lost: BAD such hits are counted, "7
  batches dropped (count unreadable or out of range)", JSON "batches":
  {"bad_count": 7}; before, nothing at all was said of them.
- The GOOD records of well-formed batches are counted exactly.

A count whose operand cannot be read is not provoked (blktgt's and
sys/sdt.h's are registers); the tools count it with the out-of-range ones.
"""

import os
import subprocess

import pytest

import probekit
from histtools import KINDS, Tool, json_objects, mask_ts, parse, total
from exporter_client import exporter, sample, series_dropped  # noqa: F401
from pairs import Driver

pytestmark = pytest.mark.needs("py:bcc")

GOOD, UNREADABLE = 23, 1009
# (count, hits): out of range past IO_BATCH_MAX (256), negative, and 0.
BAD_COUNTS = ((257, 3), (-1, 2), (0, 2))
BAD = sum(k for _, k in BAD_COUNTS)     # 7
DRIVER_SRC = os.path.join(probekit.ROOT, "tests", "lib", "batch_driver.c")
LINES = [f"{UNREADABLE} I/Os dropped (unreadable batch)",
         f"{BAD} batches dropped (count unreadable or out of range)"]


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """batch_driver, built with DWARF (the BCC tools read its record)."""
    exe = str(tmp_path_factory.mktemp("batch") / "batch_driver")
    r = subprocess.run(["gcc", "-O2", "-g", "-Wall", "-Werror",
                        "-I", os.path.join(probekit.ROOT, "include"),
                        "-I", os.path.join(probekit.BUILD, "gen"),
                        "-o", exe, DRIVER_SRC],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def fire_all(d):
    """The workload: bad, unreadable and good batches, interleaved."""
    d.do(f"count {BAD_COUNTS[0][0]} {BAD_COUNTS[0][1]}")
    d.do(f"unreadable {UNREADABLE}")
    d.do(f"good {GOOD}")
    for c, k in BAD_COUNTS[1:]:
        d.do(f"count {c} {k}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["iolatency", "iosize"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_unreadable_and_bad_count_batches_said(bpf, driver, kind, name, fmt):
    # -B: the driver's io__batch passes five arguments, no merge counts,
    # so a tool that labels by bdev loads all the same and says no merge.
    d = Driver(driver)
    try:
        tool = Tool(kind, name, d.pid, "-B",
                    *(["-j"] if fmt == "json" else []), tidy=True).start()
        fire_all(d)
        lines = tool.stop()
    finally:
        d.close()
    out = "\n".join(lines)
    if fmt == "json":
        (obj,) = json_objects(lines)
        assert sum(h["total"] for h in obj["histograms"]) == GOOD, out
        assert obj["I/Os"] == {"dropped": 0, "busy": 0,
                               "unreadable": UNREADABLE}, out
        assert obj["batches"] == {"bad_count": BAD}, out
        assert "bdevs_merged" not in obj, out
        return
    (h,) = parse(lines)
    assert total(h) == GOOD, out
    assert [ln for ln in lines if "dropped" in ln] == LINES, out
    assert not [ln for ln in lines if " bdevs " in ln], out


@pytest.mark.parametrize("name", ["iolatency", "iosize"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_twins_print_the_same_bytes(bpf, driver, name, fmt):
    """The same batches, traced by the BCC tool and then by the libbpf
    one from one driver process, print the same bytes."""
    outs = {}
    d = Driver(driver)
    try:
        for kind in KINDS:
            tool = Tool(kind, name, d.pid,
                        *(["-j"] if fmt == "json" else [])).start()
            fire_all(d)
            outs[kind] = mask_ts(tool.stop())
    finally:
        d.close()
    said = f'"unreadable": {UNREADABLE}' if fmt == "json" else LINES[0]
    assert any(said in ln for ln in outs["libbpf"]), outs
    assert outs["bcc"] == outs["libbpf"]


IO_FAMILIES = ("probekit_io_latency_seconds", "probekit_io_size_bytes",
               "probekit_io_errors")
BAD_SERIES = 'probekit_exporter_io_batches_dropped_total{reason="bad_count"}'


def test_exporter_counts_unreadable_and_bad_count(bpf, driver, exporter):
    d = Driver(driver)
    try:
        e = exporter("-p", str(d.pid))
        fire_all(d)
        _, body = e.scrape()
    finally:
        d.close()
    assert sample(body, 'probekit_io_latency_seconds_count'
                  '{bdev="Drv0",type="read"}') == GOOD, body
    for fam in IO_FAMILIES:
        assert sample(body, series_dropped(fam)) == UNREADABLE, body
    assert sample(body, BAD_SERIES) == BAD, body
