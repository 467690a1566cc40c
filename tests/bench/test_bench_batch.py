# SPDX-License-Identifier: BSD-2-Clause
"""bench/batch.py (section 7 of make bench): the interleaved pairing and
what it records.  Each traced figure is paired with untraced slices run at
the same moments, and every side records the reactor's CPU time, its waits
for a CPU, its sleeps and the stolen time.  These tests run a real, small
measure() (untraced and libbpf iolatency) and check what timing cannot:
every slice's I/Os are counted exactly, the slices alternate as designed,
and the new fields are there and sane.  Nothing here is timed."""

import json
import os
import sys

import pytest

import probekit

BENCH = os.path.join(probekit.ROOT, "bench")
sys.path.insert(0, BENCH)

IOS = 20011             # workload_run I/Os per side per block (prime: uneven slices)
RUNS = 2


def bench_run():
    """bench/run (no .py) as a module, with the modules it imports."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("bench_run_b", os.path.join(BENCH, "run"))
    spec = importlib.util.spec_from_loader("bench_run_b", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    import batch
    mod.batch = batch
    return mod


def test_slice_sizes_exact():
    import batch
    for total, k in ((IOS, 8), (200_000, 8), (7, 8), (1009, 3)):
        xs = batch.slice_sizes(total, k)
        assert len(xs) == k and sum(xs) == total and max(xs) - min(xs) <= 1


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A real measure(): untraced and libbpf iolatency, RUNS repetitions,
    IOS I/Os per side, no fit and no record count; and every slice run,
    in order, as (server pid, queue depth, I/Os)."""
    import batch
    run = bench_run()
    tmp = str(tmp_path_factory.mktemp("batch"))
    cf = batch.configs(probekit.ROOT, probekit.BUILD, run.PYTHON, run.HOST_BPFTRACE)
    cf = {n: cf[n] for n in ("untraced", "libbpf-batch")}
    slices = []
    real = batch.run_slice

    def spy(run_, srv, qd, count, acc):
        slices.append((srv[0].pid, qd, count))
        real(run_, srv, qd, count, acc)
    mp = pytest.MonkeyPatch()
    mp.setattr(batch, "IOS", IOS)
    mp.setattr(batch, "run_slice", spy)
    try:
        raw = batch.measure(run, probekit.ROOT, probekit.BUILD, RUNS, tmp, cf=cf,
                            caps=(), records=False)
    finally:
        mp.undo()
    return raw, slices


@pytest.mark.usefixtures("bpf")
def test_every_slice_counted_exactly(measured):
    import batch
    raw, slices = measured
    assert raw["slices"] == batch.SLICES and raw["cpus"] == os.cpu_count()
    s = raw["samples"]
    assert {n: {q: len(v) for q, v in by.items()} for n, by in s.items()} == \
        {n: {"1": RUNS, "8": RUNS, "32": RUNS} for n in ("untraced", "libbpf-batch")}
    for qd in ("1", "8", "32"):
        for m in s["libbpf-batch"][qd]:
            for side in (m, m["base"]):
                assert side["ios"] == IOS and side["slices"] == batch.SLICES
                assert set(batch.SIDE) <= set(side)
        # The untraced server's pooled figures: one block per repetition here.
        assert [u["ios"] for u in s["untraced"][qd]] == [IOS] * RUNS
    # 3 depths x RUNS blocks, each SLICES slices a side, every slice's
    # size one of the even split's.
    assert len(slices) == 3 * RUNS * 2 * batch.SLICES
    assert sum(c for _, _, c in slices) == 3 * RUNS * 2 * IOS


@pytest.mark.usefixtures("bpf")
def test_slices_alternate_abba(measured):
    """Within a block, ABBAABBA...; the side that starts alternates from
    one block to the next, as "first" records."""
    import batch
    raw, slices = measured
    per_block = 2 * batch.SLICES
    blocks = [slices[i:i + per_block] for i in range(0, len(slices), per_block)]
    firsts = []
    for b in blocks:
        pids = [p for p, _, _ in b]
        a, c = pids[0], pids[1]
        assert a != c and len({qd for _, qd, _ in b}) == 1
        assert pids == ([a, c, c, a] * batch.SLICES)[:per_block]
        # Each pair of slices (one a side) has the same size, the even split's.
        sizes = [n for _, _, n in b]
        assert sizes[0::2] == sizes[1::2] == batch.slice_sizes(IOS, batch.SLICES)
        firsts.append(a)
    assert len(set(firsts)) == 2      # each side starts some blocks
    recorded = [m["first"] for by in raw["samples"]["libbpf-batch"].values() for m in by]
    assert sorted(set(recorded)) == ["traced", "untraced"]


@pytest.mark.usefixtures("bpf")
def test_contention_fields_sane(measured):
    """The reactor's CPU time, run-queue wait, sleeps and the stolen time
    are recorded for every side, within what the wall time allows."""
    import batch
    raw, _ = measured
    for by in raw["samples"]["libbpf-batch"].values():
        for m in by:
            for x in (m, m["base"]):
                assert 0 < x["elapsed_ns"] <= x["rpc_ns"]
                # The reactor's CPU: at most its job's time plus what it
                # does outside the job (start and end messages), within one
                # slice's RPC round trips.
                assert 0 < x["run_ns"] <= x["rpc_ns"]
                assert x["wait_ns"] >= 0 and x["steal_ns"] >= 0
                # /proc/stat counts in clock ticks: a tick a CPU each read.
                assert x["steal_ns"] <= raw["cpus"] * (x["rpc_ns"] + batch._TICK_NS
                                                       * x["slices"])
                # The reactor sleeps once per slice to wait for the job,
                # not per I/O: it polls while a job runs.
                assert 0 <= x["sleeps"] < x["ios"] / 100
                # The reactor's CPU is its own thread's, one of the target's
                # (run_slice reads them in an order that makes this exact).
                # How far it exceeds the job's wall time is not bounded
                # here: interrupts and softirqs that land on the reactor
                # around a job are charged to it (5.8 ms beyond 6.8 ms of
                # jobs in one CI run of unstable), and that is load.
                assert x["run_ns"] <= x["cpu_ns"]
                assert batch.off_cpu(x) < 1
                assert x["oncpu_ns_per_io"] == x["run_ns"] / x["ios"]
                assert x["ns_per_io"] == x["elapsed_ns"] / x["ios"]


@pytest.mark.usefixtures("bpf")
def test_report_names_each_basis(measured):
    """render(): the wall-time, reactor-CPU and CPU tables, the waits, and
    a basis on every verdict."""
    import batch
    raw, _ = measured
    raw = json.loads(json.dumps(dict(raw, runs=RUNS, date="test", loadavg_start=[1, 1, 1],
                                     loadavg_end=[1, 1, 1], records_per_batch={},
                                     bpf_prog={})))
    text = batch.render(raw)
    assert "**by the wall time**, interleaved slices" in text
    assert "**by the reactor's CPU time**" in text
    assert "**by the CPU time of every thread of the target**" in text
    assert "How much of each run the reactor spent waiting for a CPU" in text
    assert "stolen from the VM by its host" in text
    assert "The wall-time ratio of the quiet blocks alone" in text
    # Quiet blocks: the wall ratios of exactly the blocks the waits select.
    d = batch.derive(raw)[0]
    for qd in (1, 8, 32):
        quiet = [m for m in raw["samples"]["libbpf-batch"][str(qd)]
                 if batch.off_cpu(m) <= batch.QUIET and batch.off_cpu(m["base"]) <= batch.QUIET]
        s = d["libbpf-batch"][qd]["quiet_ratio"]
        assert (s["n"] if s else 0) == len(quiet)
    rows = [x for x in text.splitlines() if x.startswith("| libbpf iolatency (io__batch), qd")]
    bases = {x.split(" | ")[1] for x in rows}
    assert bases == {"wall time, interleaved slices",
                     "reactor CPU time (wall less its waits for a CPU)",
                     "CPU time, every thread"}
    assert len(rows) == 3 * 3 * 2


def test_report_of_a_raw_file_before_interleaving():
    """A raw/batch.json from before the interleaving (bench/raw/batch.json
    of 97d50fc, kept as a fixture) still renders, its wall rows labelled as
    single runs, every depth of every tool in it."""
    import batch
    with open(os.path.join(probekit.ROOT, "tests", "fixtures", "bench",
                           "batch-single-runs.json")) as f:
        raw = json.load(f)
    assert "slices" not in raw
    text = batch.render(raw)
    assert "wall time, one run each" in text and "reactor CPU time" not in text
    rows = [x for x in text.splitlines() if x.startswith("| libbpf iolatency (io__batch), qd")]
    # Per depth: the median and the lower quartile, by the wall and by the
    # CPU of every thread; each median over the file's 9 repetitions.
    assert [x.split(" | ")[1] for x in rows] == \
        ["wall time, one run each"] * 2 + ["CPU time, every thread"] * 2 \
        + ["wall time, one run each"] * 2 + ["CPU time, every thread"] * 2 \
        + ["wall time, one run each"] * 2 + ["CPU time, every thread"] * 2
    assert raw["runs"] == 9
    assert all(f"n={raw['runs']})" in x for x in rows if ": median" in x)
