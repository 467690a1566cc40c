# SPDX-License-Identifier: BSD-2-Clause
"""io__batch batches that span loop passes (issue 32): every batch reader
counts exactly at queue depths 1, 8 and 32, in process and over NBD, no
record waits past the bound plus one loop pass, and a drain whose
callback resubmits stamps its records with that submission's clock read.

A batch is fired when full (256), when its oldest record has waited 1 ms
(checked once per pass), before its reactor sleeps, at a job's end and at
stop (include/probekit_batch.h, include/io_batch.h).  A workload job's end
flushes its reactor, so workload_run's answer follows its records; after
fio over NBD the test waits for blktgt's own count of records held
(target_stats io_batch_held) to reach 0, a signal, not a sleep.
"""

import json
import subprocess

import pytest

import histtools
import probekit
from probekit import Trace
from batch_readers import READERS
from exporter_client import Exporter

pytestmark = pytest.mark.needs("fio", "py:bcc")

DEPTHS = (1, 8, 32)
N = 2003                # I/Os per depth, in process
FIO_N = 1009            # per depth, over NBD
BOUND_NS = 1000000      # PK_BATCH_BOUND_NS (include/probekit_batch.h)


class ExporterReader:
    """probekit-exporter: io latency counts per bdev, summed over types."""

    def __init__(self, build):
        self.build = build

    def start(self, pid):
        self.e = Exporter(self.build, ["-p", str(pid)])
        self.bdevs = []
        return self

    def stop(self):
        _, body = self.e.scrape()
        self.e.stop()
        self.lines = body.splitlines()
        out = {}
        for line in self.lines:
            if not line.startswith("probekit_io_latency_seconds_count{"):
                continue
            labels = dict(kv.split("=", 1) for kv in
                          line[line.index("{") + 1:line.index("}")].split(","))
            bdev = labels["bdev"].strip('"')
            out[bdev] = out.get(bdev, 0) + int(float(line.split()[-1]))
        return out


BATCH_READERS = sorted(r for r in READERS if "per-io" not in r and
                       r not in ("iolat.bt", "iosize.bt", "iops.bt"))


def held_drained(target):
    """Wait until no reactor holds an io__batch record."""
    probekit.wait_until("no io__batch record held",
                        lambda: target.rpc("target_stats")["io_batch_held"] == 0)


def fio_reads(target, export, qd, count):
    """fio reads count 4 KiB blocks, each once, over NBD at depth qd; the
    I/Os blktgt completed meanwhile."""
    before = target.rpc("target_stats")["io_completed"]
    p = subprocess.run(
        ["fio", "--name=span", "--ioengine=nbd", f"--uri={target.nbd_uri(export)}",
         "--rw=randread", "--bs=4k", f"--size={count * 4096}",
         f"--iodepth={qd}", "--output-format=json"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=probekit.TIMEOUT)
    text = p.stdout.decode(errors="replace")
    assert p.returncode == 0, text
    job = json.loads(text[text.index("{"):])["jobs"][0]
    assert job["error"] == 0 and job["read"]["total_ios"] == count, job
    held_drained(target)
    return target.rpc("target_stats")["io_completed"] - before


@pytest.fixture
def six(blktgt_bin, tmp_path):
    """blktgt with two reactors: q1, q8, q32 for workload_run, and f1, f8,
    f32 exported under the same names for fio."""
    t = probekit.Target(blktgt_bin, tmp_path, threads=2).start()
    try:
        for qd in DEPTHS:
            t.rpc("bdev_malloc_create", name=f"q{qd}", size_mb=16, block_size=512)
            t.rpc("bdev_null_create", name=f"f{qd}", size_mb=16, block_size=512)
            t.rpc("export_create", name=f"f{qd}", bdev=f"f{qd}")
        yield t
    finally:
        t.stop()


@pytest.mark.parametrize("reader", BATCH_READERS + ["exporter"])
def test_exact_at_each_depth(bpf, build, six, reader):
    r = (ExporterReader(build) if reader == "exporter"
         else READERS[reader]()).start(six.pid)
    want = {}
    for qd in DEPTHS:
        res = histtools.workload(six, f"q{qd}", "randread", 4096, qd, N)
        assert res["ios"] == N, res
        want[f"q{qd}"] = N
    for qd in DEPTHS:
        assert fio_reads(six, f"f{qd}", qd, FIO_N) == FIO_N
        want[f"f{qd}"] = FIO_N
    got = r.stop()
    assert got == want, "\n".join(r.lines)


# --- the bound -------------------------------------------------------------------

# Per batch, in BPF (a printf per batch can be lost at exit): counts, the
# largest, and the batches whose timestamps break the rules: out of order
# (first <= next to last <= last <= flush_ns), or whose next to last record
# was already past the bound (the check of its pass should have fired the
# batch); and those the bound ended (short of full, flushed >= 1 ms after
# their oldest).  Records' done_ns and flush_ns are blktgt's own.
BOUND_BT = r"""// probekit: structs io_rec
BEGIN { printf("Tracing batches. Hit Ctrl-C to end.\n"); }
usdt:__EXE__:blktgt:io__batch
{
	$r = (struct pk_io_rec *)arg2;
	$n = (int64)arg1;
	$first = $r->done_ns;
	$prev = $n > 1 ? ($r + ($n - 2))->done_ns : $first;
	$last = ($r + ($n - 1))->done_ns;
	@batches = count();
	@records = sum($n);
	@largest = max($n);
	if ($first > $prev || $prev > $last || $last > arg4) { @disorder = count(); }
	if ($prev - $first >= %(bound)d) { @late = count(); }
	if ($n < 256 && arg4 - $first >= %(bound)d) { @aged = count(); }
}
""" % {"bound": BOUND_NS}


def batches(lines):
    """The maps the script printed; a count never incremented is 0."""
    out = dict.fromkeys(("batches", "records", "largest", "disorder", "late",
                         "aged"), 0)
    for line in lines:
        name, _, value = line.partition(": ")
        if name.startswith("@") and name[1:] in out:
            out[name[1:]] = int(value)
    return out


def bound_trace(target, tmp_path):
    script = tmp_path / "bound.bt"
    script.write_text(BOUND_BT)
    return Trace(target.pid, [str(script)]).start()


def test_trickle_never_waits_for_the_next_io(bpf, target, tmp_path):
    """One read every 10 ms (a delay bdev at qd 1): the reactor sleeps
    between them, so each record is fired alone, in the pass that recorded
    it, after it completed: a record that waited for the next I/O (10 ms
    later) would share its batch."""
    target.rpc("bdev_malloc_create", name="M0", size_mb=16, block_size=512)
    target.rpc("bdev_delay_create", name="D0", base="M0", read_us=10000,
               write_us=10000)
    tr = bound_trace(target, tmp_path)
    histtools.workload(target, "D0", "randread", 4096, 1, 23)
    lines = tr.stop()
    got = batches(lines)
    assert got["records"] == got["batches"] == 23 and got["largest"] == 1, lines
    assert got["disorder"] == got["late"] == 0, lines


def test_busy_reactor_flushes_at_the_bound(bpf, target, tmp_path):
    """1 MiB reads of a RAM bdev at qd 1: the reactor never sleeps and
    completes one I/O per pass, tens of microseconds apart, so batches end
    on the age bound, well short of 256 records.  In each batch, the next
    to last record was younger than the bound (the check of its pass let
    the batch go on), so flush_ns - the oldest's done_ns is at most the
    bound plus the last pass; all from blktgt's own timestamps."""
    target.rpc("bdev_malloc_create", name="M1", size_mb=64, block_size=512)
    tr = bound_trace(target, tmp_path)
    res = histtools.workload(target, "M1", "randread", 1 << 20, 1, 601)
    lines = tr.stop()
    got = batches(lines)
    assert got["records"] == res["ios"] == 601, lines
    assert got["disorder"] == got["late"] == 0, lines
    # The bound, not fullness or the job's end, ended most of them.
    assert 1 < got["largest"] < 256 and got["aged"] >= got["batches"] // 2, lines


# --- the drain's timestamp -----------------------------------------------------

# Per record: done_ns against its own submit_ns, and against the submit_ns
# of the record before it on the same reactor (across batches too).
CHAIN_BT = r"""// probekit: structs io_rec
BEGIN { printf("Tracing records. Hit Ctrl-C to end.\n"); }
usdt:__EXE__:blktgt:io__batch
{
	$r = (struct pk_io_rec *)arg2;
	$n = (int64)arg1;
	$i = 0;
	$prev = @last[arg0];
	while ($i < $n && $i < 256) {
		$p = $r + $i;
		@records = count();
		if ($p->done_ns < $p->submit_ns || $p->done_ns > arg4) { @disorder = count(); }
		if ($p->submit_ns == $prev) { @chained = count(); }
		$prev = $p->done_ns;
		$i++;
	}
	@last[arg0] = $prev;
}
END { clear(@last); }
"""


def test_drain_stamps_with_the_resubmission_clock(bpf, target, tmp_path):
    """A drain reads no clock of its own for its records when a callback
    resubmits: at qd 1 each workload I/O after the first is submitted by
    its predecessor's completion, and that submission's clock read is the
    predecessor's done_ns, exactly (a clock read of the drain's own, as
    before, made 0 of them equal).  At every depth, no record is done
    before it was submitted or after its batch was fired."""
    target.rpc("bdev_malloc_create", name="M2", size_mb=16, block_size=512)
    script = tmp_path / "chain.bt"
    script.write_text(CHAIN_BT)
    tr = Trace(target.pid, [str(script)]).start()
    res = histtools.workload(target, "M2", "randread", 4096, 1, 1009)
    assert res["ios"] == 1009, res
    lines = tr.stop()
    got = counts(lines, ("records", "disorder", "chained"))
    assert got == {"records": 1009, "disorder": 0, "chained": 1008}, lines
    tr = Trace(target.pid, [str(script)]).start()
    for qd in (8, 32):
        assert histtools.workload(target, "M2", "randread", 4096, qd, 2003)["ios"] == 2003
    lines = tr.stop()
    got = counts(lines, ("records", "disorder"))
    assert got == {"records": 4006, "disorder": 0}, lines


def counts(lines, names):
    """The maps names the script printed; a count never incremented is 0."""
    out = dict.fromkeys(names, 0)
    for line in lines:
        name, _, value = line.partition(": ")
        if name.startswith("@") and name[1:] in out:
            out[name[1:]] = int(value)
    return out
