# SPDX-License-Identifier: BSD-2-Clause
"""io__batch: every tool that reads it, and its per-I/O twin, counts a known
workload exactly.

Each reader (a libbpf or bcc/ tool, or a bt/ script through the wrapper) is
attached to one blktgt with four reactors and four bdevs, then sees:
  - two workload_run jobs at once, each on its own reactor (so batches of
    two reactors interleave): Malloc0 and Malloc1;
  - fio over NBD on Malloc2's export, counted against blktgt's own
    completion counter;
  - last, one lone I/O on Malloc3, after which its reactor sleeps: its
    record must still reach the tool, which is stopped right after.
Counts are per bdev, exact, in both modes.  On a delay bdev both modes,
attached at once to the same I/Os, put the median latency in one bucket.
"""

import json
import re
import subprocess
import threading

import pytest

import histtools
import probekit
from batch_readers import READERS, BtScript, HistTool
from histtools import Tool, parse, total
from semaphores import Semaphores
from histtools import toolspec

pytestmark = pytest.mark.needs("fio", "py:bcc")

N0, N1, LONE = 997, 499, 1
FIO_IOS = 211


# --- the target and its workload ------------------------------------------------

@pytest.fixture
def four(blktgt_bin, tmp_path):
    """blktgt with four reactors, Malloc0..3, Malloc2 exported as e2."""
    t = probekit.Target(blktgt_bin, tmp_path, threads=4).start()
    try:
        for i in range(4):
            t.rpc("bdev_malloc_create", name=f"Malloc{i}", size_mb=16,
                  block_size=512)
        t.rpc("export_create", name="e2", bdev="Malloc2")
        yield t
    finally:
        t.stop()


def workloads_at_once(target, jobs):
    """Run workload_run jobs [(bdev, pattern, qd, count)] at the same time
    (blktgt gives each its own reactor, in turn); wait for them all."""
    results, errors = {}, []

    def run(bdev, pattern, qd, count):
        try:
            results[bdev] = histtools.workload(target, bdev, pattern, 4096, qd,
                                               count)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=run, args=j) for j in jobs]
    for th in threads:
        th.start()
    for th in threads:
        th.join(probekit.TIMEOUT)
    assert not errors and len(results) == len(jobs), errors
    return results


def fio_writes(target, tmp_path, count):
    """fio writes count 4 KiB blocks over NBD to e2; the I/Os blktgt
    completed meanwhile (from its own counter)."""
    before = target.rpc("target_stats")["io_completed"]
    out = tmp_path / "fio.json"
    p = subprocess.run(
        ["fio", "--name=batch", "--ioengine=nbd", f"--uri={target.nbd_uri('e2')}",
         "--rw=write", "--bs=4k", f"--size={count * 4096}", "--iodepth=8",
         "--output-format=json", f"--output={out}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stdout.decode(errors="replace")
    text = out.read_text()
    job = json.loads(text[text.index("{"):])["jobs"][0]
    assert job["error"] == 0 and job["write"]["total_ios"] == count, job
    return target.rpc("target_stats")["io_completed"] - before


IO_SEMS = ("io__batch", "io__submit", "io__done")


@pytest.mark.parametrize("reader", sorted(READERS))
def test_exact_counts(bpf, four, tmp_path, reader):
    # Also bdevs the name table merges, so that batch mode (which labels a
    # record from the table) says each merge in one line with its cause
    # and count: the two of MERGED_PAIR, and the 2 of 257 live bdevs
    # beyond the table's slots; per I/O, names are whole.
    more = histtools.merged_bdevs(four, past=2)
    merged = ((histtools.MERGED_PAIR[0], 7), (histtools.MERGED_PAIR[1], 11),
              (more[-1], 13))
    r = READERS[reader]().start(four.pid)
    # A reader in batch mode raises io__batch's semaphore and no other I/O
    # probe's; one in per-I/O mode, the other way round.
    up = {n for n, v in Semaphores(four.pid, IO_SEMS).read().items() if v}
    batch = "batch" in reader
    assert ("io__batch" in up) == batch and (up - {"io__batch"} == set()) == batch, up
    workloads_at_once(four, [("Malloc0", "randrw", 8, N0),
                             ("Malloc1", "randwrite", 32, N1)])
    nbd = fio_writes(four, tmp_path, FIO_IOS)
    for bdev, n in merged:
        histtools.workload(four, bdev, "read", 4096, 2, n)
    workloads_at_once(four, [("Malloc3", "read", 1, LONE)])
    got = r.stop()
    want = {"Malloc0": N0, "Malloc1": N1, "Malloc2": nbd, "Malloc3": LONE}
    msgs = toolspec.messages()
    if batch:
        want[histtools.MERGED_PAIR[0][:histtools.CUT]] = 7 + 11
        want["(other)"] = 13
        said = [msgs["BDEVS_NAME_CUT"] % (2, histtools.CUT),
                msgs["BDEVS_OTHER"] % (2, histtools.SLOTS)]
    else:
        want.update(merged)
        said = []
    assert got == want, "\n".join(r.lines)
    assert [ln for ln in r.lines if " bdevs " in ln] == said, r.lines
    assert nbd >= FIO_IOS


# --- the median on a delay bdev ---------------------------------------------------

# Reads complete no sooner than this after submission (the delay bdev's
# lower bound; how much later is the scheduler's to say, test_bdev_delay.py),
# and the bucket it falls in, [512, 1023] ms (bpftrace's [512K, 1M) us,
# from 524.288 ms), leaves over 490 ms above it.  150 ms in [128, 255] left 105 ms, less than
# the 172 ms a reactor woken on time has waited for a CPU under load; here
# the median moves out only if 16 of the 31 reads each wait three times
# that.  A median in a wrong bucket (a unit or a timestamp taken from the
# wrong record) still fails: the per-I/O mode measures its own, and the
# bucket is asserted too.
DELAY_US = 530000
SCALE = {"": 1, "K": 1024, "M": 1024 * 1024}


def median_bucket(h):
    """The (low, high) bucket that holds the median of histogram h."""
    half, seen = (total(h) + 1) // 2, 0
    for low, high, count in h["rows"]:
        seen += count
        if seen >= half:
            return low, high
    raise AssertionError(h)


def bt_median_bucket(lines):
    rows = []
    for line in lines:
        m = re.match(r"^\[(\d+)([KM]?), (\d+)([KM]?)\)\s+(\d+) \|", line)
        if m:
            rows.append((int(m.group(1)) * SCALE[m.group(2)],
                         int(m.group(3)) * SCALE[m.group(4)], int(m.group(5))))
    return median_bucket({"rows": rows})


@pytest.mark.parametrize("kind", ["libbpf", "bcc", "bt"])
def test_delay_median_same_bucket(bpf, target, kind):
    """Both modes at once on the same 31 reads of a delay bdev."""
    target.rpc("bdev_malloc_create", name="M0", size_mb=16, block_size=512)
    target.rpc("bdev_delay_create", name="D0", base="M0", read_us=DELAY_US,
               write_us=DELAY_US)
    if kind == "bt":
        batch = BtScript("iolat_batch.bt").start(target.pid)
        per_io = BtScript("iolat.bt").start(target.pid)
    else:
        batch = HistTool(kind, "iolatency", False, "-m").start(target.pid)
        per_io = HistTool(kind, "iolatency", True, "-m").start(target.pid)
    # qd 8: four rounds of the delay, about 2 s.
    histtools.workload(target, "D0", "randread", 4096, 8, 31)
    assert per_io.stop() == {"D0": 31}
    assert batch.stop() == {"D0": 31}
    if kind == "bt":
        got = bt_median_bucket(batch.lines), bt_median_bucket(per_io.lines)
        assert got[0] == (512 * 1024, 1024 * 1024), batch.lines
    else:
        got = (median_bucket(parse(batch.lines)[0]),
               median_bucket(parse(per_io.lines)[0]))
        assert got[0] == (512, 1023), batch.lines
    assert got[0] == got[1], (batch.lines, per_io.lines)


@pytest.mark.parametrize("tool,opts", [
    ("iolatency", ("-n",)),
    ("iolatency", ("-BO", "-u")),
    ("iolatency", ("-n", "-L", "-W", "700")),
    ("iosize", ("-BO",)),
])
def test_batch_binning_matches_bcc(bpf, four, tool, opts):
    """The libbpf and bcc/ tools, attached at once in batch mode, read the
    same records (blktgt's own timestamps), so they print the same
    histograms bucket for bucket.  The libbpf program bins a run of records
    that share a slot with one add (histogram.bpf.h), the bcc/ one bins
    record by record.  In nanoseconds the latencies of Malloc bdevs spread
    over many buckets, so runs end at every boundary; a batch of a Malloc
    bdev holds its I/Os in the order they were submitted, so latencies only
    fall along it.  On a delay bdev with reads faster than writes, a batch
    mixes both in the order they fell due, so they also rise, from one
    bucket to the next (100 and 180 us)."""
    four.rpc("bdev_malloc_create", name="M9", size_mb=16, block_size=512)
    four.rpc("bdev_delay_create", name="D9", base="M9", read_us=100, write_us=180)
    tools = [Tool(kind, tool, four.pid, *opts).start() for kind in ("libbpf", "bcc")]
    workloads_at_once(four, [("Malloc0", "randread", 8, N0),
                             ("Malloc1", "randwrite", 32, N1)])
    histtools.workload(four, "Malloc3", "read", 512, 3, 101)
    histtools.workload(four, "D9", "randrw", 4096, 32, 307)
    libbpf, bcc = (parse(t.stop()) for t in tools)
    assert sum(total(h) for h in libbpf) == N0 + N1 + 101 + 307, libbpf
    if tool == "iolatency" and "-L" not in opts:
        assert len([r for h in libbpf for r in h["rows"] if r[2]]) >= 3, libbpf
    assert libbpf == bcc


# --- bdev names ----------------------------------------------------------------------

def test_names_after_delete_and_reuse(bpf, target):
    """A tool attached after the bdevs were made names them all; a deleted
    bdev's index, once reused, names the new bdev; a long name is cut to
    31 characters in batch mode."""
    long = "L" * 40
    for name in ("a0", "a1", long):
        target.rpc("bdev_malloc_create", name=name, size_mb=16, block_size=512)
    histtools.workload(target, "a0", "read", 4096, 2, 3)   # batches made
    assert target.rpc("bdev_delete", name="a0") is not None
    target.rpc("bdev_malloc_create", name="b0", size_mb=16, block_size=512)
    t = HistTool("libbpf", "iolatency", False).start(target.pid)
    histtools.workload(target, "b0", "read", 4096, 2, 7)
    histtools.workload(target, "a1", "read", 4096, 2, 11)
    histtools.workload(target, long, "read", 4096, 2, 13)
    assert t.stop() == {"b0": 7, "a1": 11, "L" * 31: 13}

