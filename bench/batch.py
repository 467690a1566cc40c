# SPDX-License-Identifier: BSD-2-Clause
"""bench/batch.py: section 7 of bench/run, the cost of looking at every I/O
through io__batch against the per-I/O probes.

blktgt's own workload_run (in process, null bdev, 4 KiB random reads) at
queue depths 1, 8 and 32, untraced and under each latency tool in both
modes: libbpf iolatency, bcc/iolatency (each default, then --per-io), and
bt/iolat_batch.bt against bt/iolat.bt.  One server per configuration, each
on its own copy of the binary (a uprobe is set on a file, and would trap
every process mapping it), all started first; every repetition runs every
configuration at every queue depth, in rotated order.

Pairing at fine grain.  On a shared 2-vCPU VM the reactor waits for a CPU
for much of a run (schedstat: 60% of a 200 ms run at load average 3),
and the waits come in bursts of tens of milliseconds to seconds, so two
200 ms runs a few seconds apart see different machines and their ratio
spread 0.37..1.37 around a 10% effect.  So each traced figure is paired
with untraced work done at the same moments: in a repetition, a traced
configuration and the untraced server run SLICES short workloads each
(IOS split as evenly as it goes, the same sizes on both sides),
alternating ABBAABBA... (a linear drift in the machine's load cancels),
the side that goes first alternating from one block to the next, and a
side's throughput is its I/Os over the sum of its slices' times.  Every
slice's I/O count is checked exactly.

Every slice also records what the machine did to it: the CPU time of the
job's reactor thread (REACTOR, /proc/PID/task/TID/schedstat), its wait in
the run queue and its sleeps (voluntary context switches), and the
machine's stolen time (/proc/stat).  The reactor does not sleep while a
job runs (the recorded sleeps say so), so its time on a CPU or runnable
is the whole wall time, and its CPU time is the wall time less its waits
for a CPU (in the run queue, and stolen by the host where the kernel
accounts steal apart).  Three bases are reported, each
labelled: the wall time (what a service sees), the reactor's CPU time
(the wall time with the waits removed; the uprobe and the BPF program run
in the reactor's context, so the tool's cost is in it), and the CPU time
of every thread of the target.

Also attached: the exporter (io__batch), and the count-only bound, a
bpftrace program that only counts io__batch hits: what the trap and the
filling of the records cost before any tool reads a record.

A batch spans loop passes (up to 256 records, 1 ms), so at full rate it
holds about 256 records at every depth, and a batch tool's added time per
I/O is  per_record + per_batch / records_per_batch.  To tell the two apart
the batch tools also run at qd 32 on servers whose batches are cut at 16
and 64 records (BLKTGT_IO_BATCH_CAP), the records per batch of each are
counted (a bpftrace sum over io__batch's count, on a server of its own),
and the two costs are fitted by least squares over the three sizes.

render() turns the raw samples into the RESULTS.md section; bench/run
--only batch runs this alone and replaces just that section.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from report import fmt, summary, verdict, verdict_max  # bench/report.py: one median/range summary

QDS = (1, 8, 32)
IOS = 200_000
BEGIN = "<!-- section 7: bench/batch.py; bench/run --only batch rewrites it -->"
END = "<!-- end of section 7 -->"


def configs(root, build, python, bt):
    """name: (description, argv factory taking a pid and the server's
    binary, readiness regex); "untraced" has no tool.  bt: the bpftrace
    (bench/run's Bpftrace) of the bt- and count- rows."""
    lib = os.path.join(build, "bin", "probekit-iolatency")
    exporter = os.path.join(build, "bin", "probekit-exporter")
    bcc = os.path.join(root, "bcc", "iolatency")
    ready_bt = r"^probekit: tracing PID="
    return {
        "untraced": ("untraced", None, None),
        "libbpf-batch": ("libbpf iolatency (io__batch)",
                         lambda pid, exe: [lib, "-p", str(pid)], r"^Tracing "),
        "libbpf-per-io": ("libbpf iolatency --per-io",
                          lambda pid, exe: [lib, "-p", str(pid), "--per-io"], r"^Tracing "),
        "bcc-batch": ("bcc/iolatency (io__batch)",
                      lambda pid, exe: [python, bcc, "-p", str(pid)], r"^Tracing "),
        "bcc-per-io": ("bcc/iolatency --per-io",
                       lambda pid, exe: [python, bcc, "-p", str(pid), "--per-io"], r"^Tracing "),
        "bt-batch": ("bt/iolat_batch.bt",
                     lambda pid, exe: bt.wrap(build, str(pid), bt.script("bt/iolat_batch.bt")),
                     ready_bt),
        "bt-per-io": ("bt/iolat.bt",
                      lambda pid, exe: bt.wrap(build, str(pid), bt.script("bt/iolat.bt")),
                      ready_bt),
        "exporter-batch": ("probekit-exporter (io__batch)",
                           lambda pid, exe: [exporter, "-p", str(pid), "--listen",
                                             "127.0.0.1:0"], r"^Serving metrics "),
        "count-batch": ("count-only bound: bpftrace counting io__batch hits",
                        lambda pid, exe: bt.argv("-p", str(pid), "-e",
                                                 f"usdt:{bt.path(pid, exe)}:blktgt:io__batch "
                                                 "{ @hits = count(); } "
                                                 'BEGIN { printf("READY\\n"); }'), r"^READY"),
    }


# Batch sizes for the fit, besides the default 256, at qd 32: a server of
# each batch tool per size (BLKTGT_IO_BATCH_CAP, target/bdev.h).
CAPS = (16, 64)
CAP_ENV = "BLKTGT_IO_BATCH_CAP"
FIT_QD = 32


@contextlib.contextmanager
def cap_env(cap):
    """BLKTGT_IO_BATCH_CAP=cap for the blktgt started inside (none: unset)."""
    old = os.environ.pop(CAP_ENV, None)
    if cap:
        os.environ[CAP_ENV] = str(cap)
    try:
        yield
    finally:
        os.environ.pop(CAP_ENV, None)
        if old is not None:
            os.environ[CAP_ENV] = old


def records_per_batch(run, build, tmp):
    """{"qd" or "qd@cap": records per io__batch hit} for the workload at
    each depth, and at FIT_QD for each of CAPS."""
    usdt1 = os.path.join(build, "bin", "blktgt")
    out = {}
    # A server and tracer per point: each one's totals stand alone.
    for qd, cap in [(qd, None) for qd in QDS] + [(FIT_QD, c) for c in CAPS]:
        key = f"{qd}@{cap}" if cap else str(qd)
        for attempt in range(1, RECORD_TRIES + 1):
            with cap_env(cap), run.Blktgt(usdt1, tmp) as t:
                tr = run.Tracer(run.HOST_BPFTRACE.argv("-p", str(t.pid), "-e",
                                 f"usdt:{run.HOST_BPFTRACE.path(t.pid, usdt1)}:blktgt:io__batch {{ @hits = count(); "
                                 "@recs = sum(arg1); } "
                                 'BEGIN { printf("READY\\n"); }'), r"^READY").start()
                t.t.rpc("workload_run", bdev="null0", pattern="randread", io_size=4096,
                        queue_depth=qd, count=IOS)
                stopped = _detach(run, tr, f"records per batch, {key}")
            if stopped:
                break
            if attempt == RECORD_TRIES:
                run.die(f"records per batch, {key}: bpftrace did not stop within "
                        f"{DETACH_TIMEOUT}s of SIGINT, {RECORD_TRIES} times")
        text = "\n".join(tr.out.drain(30))
        hits = re.findall(r"^@hits: (\d+)$", text, re.M)
        recs = re.findall(r"^@recs: (\d+)$", text, re.M)
        if len(hits) != 1 or len(recs) != 1:
            run.die(f"records per batch, {key}: no @hits/@recs:\n{text[-2000:]}")
        if int(recs[0]) != IOS:
            run.die(f"records per batch, {key}: {recs[0]} records for {IOS} I/Os")
        out[key] = int(recs[0]) / int(hits[0])
    return out


# The batch tools whose BPF programs are timed by the kernel's run-time
# statistics (kernel.bpf_stats_enabled): what the program itself costs per
# hit and per record, which neither the machine's load nor the trap moves.
BPF_STATS_OF = ("libbpf-batch", "bcc-batch", "exporter-batch")
BPF_STATS = "/proc/sys/kernel/bpf_stats_enabled"
BPF_STATS_RUNS = 3


def _prog_ids(pid):
    """The ids of the BPF programs process pid holds (its fdinfo)."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                ids.update(int(line.split()[1]) for line in f
                           if line.startswith("prog_id:"))
        except (OSError, ValueError, IndexError):
            pass
    return ids


def _prog_runs(ids):
    """(run_cnt, run_time_ns) summed over the programs ids."""
    cnt = ns = 0
    for i in ids:
        r = subprocess.run(["bpftool", "prog", "show", "id", str(i), "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            p = json.loads(r.stdout)
            cnt += p.get("run_cnt", 0)
            ns += p.get("run_time_ns", 0)
    return cnt, ns


def bpf_prog_cost(run, servers):
    """{name: {qd: {"ns_per_hit", "ns_per_record", "records_per_hit"}}}:
    the medians over BPF_STATS_RUNS workloads of the run time of the
    tool's programs, by the kernel's statistics, switched on only here
    and restored after.  servers: {name: (Blktgt, Tracer)}.  Empty when
    the statistics cannot be switched on."""
    try:
        with open(BPF_STATS) as f:
            old = f.read().strip()
        with open(BPF_STATS, "w") as f:
            f.write("1")
    except OSError:
        return {}
    out = {}
    try:
        for n, (t, tr) in servers.items():
            ids = _prog_ids(tr.proc.pid)
            out[n] = {}
            for qd in QDS:
                xs = []
                for _ in range(BPF_STATS_RUNS):
                    c0, t0 = _prog_runs(ids)
                    t.t.rpc("workload_run", bdev="null0", pattern="randread",
                            io_size=4096, queue_depth=qd, count=IOS)
                    c1, t1 = _prog_runs(ids)
                    if c1 > c0:
                        xs.append(((t1 - t0) / (c1 - c0), (t1 - t0) / IOS, IOS / (c1 - c0)))
                if xs:
                    out[n][str(qd)] = {k: statistics.median(x[i] for x in xs) for i, k in
                                       enumerate(("ns_per_hit", "ns_per_record",
                                                  "records_per_hit"))}
    finally:
        with open(BPF_STATS, "w") as f:
            f.write(old)
    return out


def _detach(run, tr, name):
    """Stop a tracer; whether it stopped on SIGINT (its output is whole).
    On a loaded machine bpftrace 0.17 has taken more than run.TIMEOUT to
    stop after SIGINT, which must not throw away every sample taken: it
    is killed, and said."""
    if tr.proc.poll() is not None:
        return True
    with contextlib.suppress(ProcessLookupError):
        os.killpg(tr.proc.pid, signal.SIGINT)
    try:
        tr.proc.wait(timeout=DETACH_TIMEOUT)
        return True
    except subprocess.TimeoutExpired:
        run.log(f"batch: {name}: {tr.cmd[0]} did not stop within {DETACH_TIMEOUT}s "
                "of SIGINT; killed")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(tr.proc.pid, signal.SIGKILL)
        tr.proc.wait()
        return False


DETACH_TIMEOUT = 30
# Records per batch: a bpftrace killed before it printed its totals is run
# again on a fresh server (its first such hang lost a whole run's samples).
RECORD_TRIES = 3


# Fine-grained pairing (module docstring): slices per side per block, and
# the thread a workload_run job runs on (target/reactor.c names them).
# 16 slices held libbpf iolatency's wall quartiles no tighter than 8 did,
# and their RPC round trips cost 28 s of a run at load 15 (8: 4 s at load
# 4): a long wait lands in one slice whatever the slice's length.
SLICES = 8
REACTOR = "reactor_1"
# What one side of a block sums over its slices (raw/batch.json).
SIDE = ("ios", "slices", "elapsed_ns", "rpc_ns", "cpu_ns", "run_ns", "wait_ns",
        "sleeps", "steal_ns")


def reactor_tid(run, pid):
    """The task id of pid's REACTOR thread."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == REACTOR:
                return tid
    run.die(f"blktgt (pid {pid}) has no {REACTOR} thread")


def thread_sched(run, pid, tid):
    """(CPU ns, run-queue wait ns, voluntary context switches) of one
    thread (bench/run's readers)."""
    return (*run.thread_schedstat(pid, tid), run.thread_sleeps(pid, tid))


_TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")


def machine_steal_ns():
    """Time the host took from this VM's CPUs, summed over them (/proc/stat
    "cpu" line, eighth value, in clock ticks)."""
    with open("/proc/stat") as f:
        return int(f.readline().split()[8]) * _TICK_NS


def slice_sizes(total, k):
    """total I/Os in k slices as even as they go (exactly total)."""
    q, r = divmod(total, k)
    return [q + 1] * r + [q] * (k - r)


def run_slice(run, srv, qd, count, acc):
    """One workload_run of count I/Os at qd on srv (Blktgt, reactor tid),
    its figures added to acc (SIDE)."""
    t, tid = srv
    # Every thread's CPU is read before the reactor's at the start and after
    # it at the end, so the reactor's share never exceeds the whole's.
    c0, s0, w0 = run.task_cpu_ns(t.pid), thread_sched(run, t.pid, tid), machine_steal_ns()
    r0 = time.monotonic_ns()
    res = t.t.rpc("workload_run", bdev="null0", pattern="randread",
                  io_size=4096, queue_depth=qd, count=count)
    r1 = time.monotonic_ns()
    s1, c1, w1 = thread_sched(run, t.pid, tid), run.task_cpu_ns(t.pid), machine_steal_ns()
    if res["ios"] != count or res["errors"]:
        run.die(f"workload_run of {count} I/Os: {res}")
    for k, v in (("ios", res["ios"]), ("slices", 1), ("elapsed_ns", res["elapsed_ns"]),
                 ("rpc_ns", r1 - r0), ("cpu_ns", c1 - c0), ("run_ns", s1[0] - s0[0]),
                 ("wait_ns", s1[1] - s0[1]), ("sleeps", s1[2] - s0[2]),
                 ("steal_ns", w1 - w0)):
        acc[k] += v


def side_sample(acc):
    """A side's sums (SIDE) and its figures per I/O: wall, CPU of every
    thread, and the reactor's own CPU ("oncpu")."""
    ios = acc["ios"]
    return dict(acc, ns_per_io=acc["elapsed_ns"] / ios, cpu_ns_per_io=acc["cpu_ns"] / ios,
                oncpu_ns_per_io=acc["run_ns"] / ios)


def interleaved(run, traced, untraced, qd, traced_first):
    """One block (module docstring): SLICES slices of each side, ABBA...;
    ({SIDE} traced, {SIDE} untraced)."""
    acc = {"traced": dict.fromkeys(SIDE, 0), "untraced": dict.fromkeys(SIDE, 0)}
    srv = {"traced": traced, "untraced": untraced}
    ab = ("traced", "untraced") if traced_first else ("untraced", "traced")
    for i, count in enumerate(slice_sizes(IOS, SLICES)):
        for side in (ab if i % 2 == 0 else ab[::-1]):
            run_slice(run, srv[side], qd, count, acc[side])
    return acc["traced"], acc["untraced"]


def measure(run, root, build, runs, tmp, cf=None, caps=CAPS, records=True):
    """Raw samples: {"samples": {name: {qd: [sample]}}, "records_per_batch":
    {qd: r}, "configs": {name: description}}, with qd as a string key (as
    JSON keeps it); a sample is side_sample() of a repetition's block, the
    traced one with its untraced slices as "base" and "first" the side that
    began it (untraced: its slices of every block of the repetition at that
    depth, pooled); a batch tool at cap c is
    "name@c", measured at FIT_QD only.  cf: configs() to measure (default:
    every one, with the host's bpftrace), with "untraced"; caps: the batch
    sizes of the fit; records: count the records per batch."""
    usdt1 = os.path.join(build, "bin", "blktgt")
    cf = cf or configs(root, build, run.PYTHON, run.HOST_BPFTRACE)
    servers = [(n, None) for n in cf] + [
        (n, c) for c in caps for n in cf if n.endswith("-batch")]
    samples = {}
    with contextlib.ExitStack() as stack:
        insts, tracers = {}, {}
        for n, cap in servers:
            desc, argv, ready = cf[n]
            name = f"{n}@{cap}" if cap else n
            copy = os.path.join(tempfile.mkdtemp(dir=tmp), "blktgt")
            shutil.copy2(usdt1, copy)
            with cap_env(cap):
                t = stack.enter_context(run.Blktgt(copy, tmp))
            if argv:
                tr = run.Tracer(argv(t.pid, copy), ready).start()
                stack.callback(_detach, run, tr, name)
                tracers[name] = tr
            insts[name] = t
            samples[name] = {str(qd): [] for qd in (QDS if not cap else (FIT_QD,))}
            run.log(f"batch: ready: {desc}{f', batches of {cap}' if cap else ''} "
                    f"(pid {t.pid})")
        tids = {n: reactor_tid(run, t.pid) for n, t in insts.items()}
        srv = {n: (t, tids[n]) for n, t in insts.items()}
        # Every traced configuration at each depth is one block per
        # repetition, paired with untraced slices at the same moments.
        keys = [(n, int(qd)) for qd in map(str, QDS) for n in samples
                if qd in samples[n] and n != "untraced"]
        pooled = {}
        for i, (n, qd) in enumerate(run.rotated(keys, runs, "batch",
                                                lambda k: f"{k[0]}, qd {k[1]}")):
            rep = i // len(keys)
            first = (rep + keys.index((n, qd))) % 2 == 0
            tr, un = interleaved(run, srv[n], srv["untraced"], qd, first)
            samples[n][str(qd)].append(dict(side_sample(tr), base=side_sample(un),
                                            first="traced" if first else "untraced"))
            acc = pooled.setdefault((rep, qd), dict.fromkeys(SIDE, 0))
            for k in SIDE:
                acc[k] += un[k]
        # The untraced server's own figures, per repetition and depth: every
        # block's untraced slices of that repetition together.
        for (rep, qd), acc in sorted(pooled.items()):
            samples["untraced"][str(qd)].append(side_sample(acc))
        # After the paired runs: the statistics cost every BPF program on
        # the machine two clock reads per run.
        bpf = bpf_prog_cost(run, {n: (insts[n], tracers[n]) for n in BPF_STATS_OF
                                  if n in tracers})
    descs = {n: cf[n][0] for n in cf}
    descs.update({f"{n}@{c}": f"{cf[n][0]}, batches of {c}" for c in caps
                  for n in cf if n.endswith("-batch")})
    return {"job": f"workload_run randread 4096 B, {IOS} I/Os, null bdev, "
                   f"queue depths {', '.join(map(str, QDS))}",
            "slices": SLICES, "cpus": os.cpu_count(),
            "configs": descs, "samples": samples,
            "records_per_batch": records_per_batch(run, build, tmp) if records else None,
            "bpf_prog": bpf}


# --- the report ------------------------------------------------------------------

def _paired(raw, name, qd, field, fn):
    """fn(traced, untraced) of field, per repetition: the traced sample's
    own interleaved untraced slices ("base"), or, in a raw file from before
    the interleaving, the untraced run of the same repetition.  JSON keys
    are strings: qd is looked up as one."""
    mine = raw["samples"][name][str(qd)]
    base = [m["base"] if "base" in m else b for m, b in
            zip(mine, raw["samples"]["untraced"][str(qd)] + [{}] * len(mine))]
    return [fn(m[field], b[field]) for m, b in zip(mine, base)
            if field in m and field in b]


def _side_share(raw, name, qd, fn):
    """fn(sample) of name's traced side and of its untraced base, per
    repetition: ([traced], [untraced]); empty before the interleaving."""
    mine = [m for m in raw["samples"][name][str(qd)] if "base" in m]
    return [fn(m) for m in mine], [fn(m["base"]) for m in mine]


def off_cpu(x):
    """The share of a side's wall time its reactor was not on a CPU: its
    waits in the run queue, and stolen time where the kernel accounts it
    apart (the reactor does not sleep in a job: see "sleeps").  A little
    below 0 on a quiet machine: the reactor's CPU time also holds the job's
    start and end (the last batch's flush), outside workload_run's time."""
    return 1 - x["run_ns"] / x["elapsed_ns"]


def summary_q(xs):
    """summary() and the lower quartile ("q1"), for the goals on both."""
    s = summary(xs)
    if s:
        xs = sorted(x for x in xs if x is not None)
        s["q1"] = (statistics.quantiles(xs, n=4, method="inclusive")[0]
                   if len(xs) > 1 else xs[0])
    return s


def _fit(points):
    """(per_record, per_batch) by least squares over [(1 / records per
    batch, added ns per I/O)]; None when the points cannot tell them apart."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if len(points) < 2 or sxx < 1e-9:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def derive(raw):
    """{name: {qd: {"ratio", "cpu_ratio", "added_ns", "added_cpu_ns"}}},
    records per batch, and the fits {name: {key: (per_record, per_batch)}}."""
    d = {}
    for n, by_qd in raw["samples"].items():
        if n == "untraced":
            continue
        d[n] = {}
        for qd in map(int, by_qd):
            d[n][qd] = {
                # Throughput traced / untraced = time untraced / traced.
                "ratio": summary_q(_paired(raw, n, qd, "ns_per_io", lambda m, b: b / m)),
                # The same from the target's CPU time: what the tool costs
                # the target, without the waits for a CPU a loaded machine
                # adds to the wall time.
                "cpu_ratio": summary_q(_paired(raw, n, qd, "cpu_ns_per_io",
                                                lambda m, b: b / m)),
                # From the CPU time of the job's reactor alone: the wall time
                # less its waits for a CPU (module docstring).
                "oncpu_ratio": summary_q(_paired(raw, n, qd, "oncpu_ns_per_io",
                                                  lambda m, b: b / m)),
                # The wall time of the blocks whose reactors, on both sides,
                # hardly waited for a CPU: chosen by the recorded waits alone.
                "quiet_ratio": summary([m["base"]["ns_per_io"] / m["ns_per_io"]
                                        for m in raw["samples"][n][str(qd)] if "base" in m
                                        and max(off_cpu(m), off_cpu(m["base"])) <= QUIET]),
                "added_ns": summary(_paired(raw, n, qd, "ns_per_io", lambda m, b: m - b)),
                "added_cpu_ns": summary(_paired(raw, n, qd, "cpu_ns_per_io",
                                                 lambda m, b: m - b)),
            }
    rpb = dict(raw["records_per_batch"] or {})
    fits = {}
    for n in d:
        # No fit without the records per batch (measure(records=False)).
        if not n.endswith("-batch") or any(str(qd) not in rpb for qd in QDS):
            continue
        fits[n] = {}
        for key in ("added_ns", "added_cpu_ns"):
            # added = per_record + per_batch * (1 / records_per_batch), over
            # the batch sizes at FIT_QD (or, without them, over the depths).
            caps = [(f"{FIT_QD}@{c}", f"{n}@{c}") for c in CAPS
                    if f"{n}@{c}" in d and f"{FIT_QD}@{c}" in rpb]
            pts = [(1 / rpb[str(FIT_QD)], d[n][FIT_QD][key]["median"])] + [
                (1 / rpb[k], d[m][FIT_QD][key]["median"]) for k, m in caps]
            if not caps:
                pts = [(1 / rpb[str(qd)], d[n][qd][key]["median"]) for qd in QDS]
            fits[n][key] = _fit(pts)
    return d, rpb, fits


def _fmt_q(s):
    return fmt(s) if not s else f"{fmt(s)}; q1 {s['q1']:.3f}"


# A block is quiet when neither side's reactor was off a CPU for more than
# this share of its wall time.
QUIET = 0.05


# The label of the wall-time basis, interleaved (True) or one run each.
WALL_OF = {True: ", interleaved slices", False: ", one run each"}


def contention(raw, names):
    """The section's lines on what the machine did to the runs: how much of
    each side's wall time the reactor was off a CPU, its waits in the run
    queue and its sleeps, and the stolen time."""
    L = ["How much of each run the reactor spent waiting for a CPU: 1 - (the "
         "reactor's CPU time / the wall time), median and range over the "
         "repetitions, traced side / its interleaved untraced side. The reactor "
         "does not sleep while a job runs, so this is its wait in the run queue "
         "(and stolen time, where the kernel accounts it apart); the machine's "
         "load moves it, and the closer the two sides, the better the pairing "
         "held:", "",
         "| tool | " + " | ".join(f"qd {qd}" for qd in QDS) + " |",
         "|---|" + "---|" * len(QDS)]

    def pct(xs):
        s = summary(xs)
        return f"{100 * s['median']:.0f}% ({100 * s['min']:.0f}..{100 * s['max']:.0f})"
    for n in names:
        L.append(f"| {raw['configs'][n]} | " + " | ".join(
            " / ".join(pct(x) for x in _side_share(raw, n, qd, off_cpu))
            for qd in QDS) + " |")
    sides = [x for by in raw["samples"].values() for xs in by.values() for m in xs
             if "base" in m for x in (m, m["base"])]
    per_slice = [x["sleeps"] / x["slices"] for x in sides]
    waits = [x["wait_ns"] / x["slices"] / 1e6 for x in sides]
    rpc = sum(x["rpc_ns"] for x in sides)
    steal = sum(x["steal_ns"] for x in sides)
    L += ["", f"The reactor's sleeps per slice (voluntary context switches): median "
          f"{statistics.median(per_slice):.1f}, at most {max(per_slice):.1f} (one is "
          "the wake-up that starts the job). Its wait in the run queue per slice "
          "(schedstat, the wake-up for the job included): median "
          f"{statistics.median(waits):.2f} ms, range {min(waits):.2f}..{max(waits):.2f} "
          f"ms. Time stolen from the VM by its host (/proc/stat) during the slices: "
          f"{100 * steal / (raw['cpus'] * rpc):.2f}% of the {raw['cpus']} CPUs' time.",
          "", "Which row to read: interleaving puts both sides of a ratio under the "
          "same load on average, but one wait of tens of milliseconds (above) still "
          "lands in one slice of one side, and the wall-time ratio carries it; the "
          "reactor's CPU time is the same run with those waits taken out, and is what "
          "the tool costs the service when it has a CPU to itself. The reactor's time "
          "on a CPU or runnable is not a basis of its own: it does not sleep in a job, "
          "so that is the wall time. In every block, the wall-time ratio is the "
          "reactor-CPU ratio times (1 - traced side's share above) / (1 - untraced "
          "side's): the spread of the wall rows is the waits, not the tool.",
          "", f"The wall-time ratio of the quiet blocks alone: those in which neither "
          f"side's reactor was off a CPU for more than {100 * QUIET:.0f}% of its wall "
          "time, chosen by the recorded waits before any ratio is looked at (n says "
          "how many of the repetitions were quiet; no verdict uses this table):", "",
          "| tool | " + " | ".join(f"qd {qd}" for qd in QDS) + " |",
          "|---|" + "---|" * len(QDS)]
    d = derive(raw)[0]
    for n in names:
        L.append(f"| {raw['configs'][n]} | " + " | ".join(
            fmt(d[n][qd]["quiet_ratio"]) if d[n][qd]["quiet_ratio"] else "no quiet block"
            for qd in QDS) + " |")
    return L


def render(raw):
    d, rpb, fits = derive(raw)
    names = [n for n in raw["configs"] if n != "untraced" and "@" not in n]
    inter = bool(raw.get("slices"))
    pairing = (f"each ratio is paired within a repetition at fine grain: the traced "
               f"server and the untraced one run {raw['slices']} workloads each of "
               f"1/{raw['slices']} of the I/Os, alternating ABBAABBA..., the side that "
               "starts alternating from block to block, and a side's time is the sum "
               "of its slices' (every slice's I/O count checked exactly), so both "
               "sides see the machine at the same moments" if inter else
               "each ratio is paired with the untraced run of the same repetition")
    L = [BEGIN, "## 7. Batch probes: every I/O, at full rate", "",
         f"{raw['job']}; blktgt with 2 reactor threads (the job runs on reactor 1). "
         "Each tool is attached to its own server for the whole run; every "
         "repetition runs every configuration at every depth, in rotated order, and "
         f"{pairing}. "
         f"{raw['runs']} repetitions, run on {raw.get('date', '(date not recorded)')}.", "",
         "Records per io__batch hit (a bpftrace sum of its count): " +
         ", ".join(f"{k.replace('@', ', batches of ')}: {v:.1f}"
                   for k, v in rpb.items()) + ".", ""]

    def ratios(title, field):
        """A table of one ratio per tool and queue depth, under title."""
        return [title, "", "| tool | " + " | ".join(f"qd {qd}" for qd in QDS) + " |",
                "|---|" + "---|" * len(QDS)] + [
            f"| {raw['configs'][n]} | " + " | ".join(_fmt_q(d[n][qd][field]) for qd in QDS)
            + " |" for n in names]
    L += ratios(f"Throughput traced / untraced **by the wall time**{WALL_OF[inter]} "
                "(workload_run's own time per I/O; median, range, and q1 the lower "
                "quartile of the paired ratios):", "ratio")
    if inter:
        L += [""] + ratios("The same **by the reactor's CPU time**: the wall time less "
                           "the reactor's waits for a CPU (the job's reactor thread's "
                           "schedstat CPU time per I/O; the uprobe and the BPF program "
                           "run in its context, so the tool's cost is in it, while the "
                           "tool's own process and the other work on the machine are "
                           "not):", "oncpu_ratio")
    L += [""] + ratios("The same **by the CPU time of every thread of the target** per "
                       "I/O (untraced / traced), which waits for a CPU on a loaded "
                       "machine do not inflate:", "cpu_ratio")
    if inter:
        L += [""] + contention(raw, names)
    base = {qd: summary([x["cpu_ns_per_io"] for x in raw["samples"]["untraced"][str(qd)]])
            for qd in QDS}
    L += ["", "Untraced, CPU ns per I/O: " +
          ", ".join(f"qd {qd}: {base[qd]['median']:.0f}" for qd in QDS) + "."]
    L += ["", "Time added per I/O, ns (traced minus untraced, paired); CPU time of "
          "the target's threads added per I/O in brackets:", "",
          "| tool | " + " | ".join(f"qd {qd}" for qd in QDS) + " |",
          "|---|" + "---|" * len(QDS)]
    for n in names:
        L.append(f"| {raw['configs'][n]} | " + " | ".join(
            f"{d[n][qd]['added_ns']['median']:.0f} "
            f"({d[n][qd]['added_cpu_ns']['median']:.0f})" for qd in QDS) + " |")
    L += ["", "Cost per record and per batch (hit), fitted by least squares as "
          "`added = per_record + per_batch / records_per_batch` to the medians at "
          f"qd {FIT_QD} with batches of " + ", ".join(map(str, CAPS)) + " and 256 "
          "records, from the target's CPU time and from the wall time (the "
          "count-only row is the trap and the filling of the records):", "",
          "| tool | per record, CPU ns | per batch (hit), CPU ns | per record, ns | "
          "per batch (hit), ns |", "|---|---|---|---|---|"]

    def cell(f, i):
        return f"{f[i]:.1f}" if f else "not separable"
    for n, f in fits.items():
        c, t = f["added_cpu_ns"], f["added_ns"]
        L.append(f"| {raw['configs'][n]} | {cell(c, 0)} | {cell(c, 1)} | "
                 f"{cell(t, 0)} | {cell(t, 1)} |")
    bpf = raw.get("bpf_prog") or {}
    if bpf:
        L += ["", "The BPF program alone, by the kernel's run-time statistics "
              "(kernel.bpf_stats_enabled: run_time_ns / run_cnt of the tool's programs, "
              f"median of {BPF_STATS_RUNS} workloads per depth, each tool on its own server, "
              "with no other run going on it); neither the load of the machine nor the "
              "trap is in it:", "",
              "| tool | " + " | ".join(f"qd {qd}: ns per hit / per record" for qd in QDS)
              + " |", "|---|" + "---|" * len(QDS)]
        for n, by_qd in bpf.items():
            L.append(f"| {raw['configs'][n]} | " + " | ".join(
                (f"{by_qd[str(qd)]['ns_per_hit']:.0f} / {by_qd[str(qd)]['ns_per_record']:.2f}"
                 if str(qd) in by_qd else "-") for qd in QDS) + " |")
    wall = f"wall time{WALL_OF[inter]}"
    bases = [("ratio", wall)] + ([("oncpu_ratio", "reactor CPU time (wall less its "
                                   "waits for a CPU)")] if inter else []) + [
        ("cpu_ratio", "CPU time, every thread")]
    L += ["", "Each goal's verdict and the basis it uses (the tables above); the "
          "issue's goals are on throughput, which a service sees as the wall time:",
          "", "| goal | basis | this run | verdict |", "|---|---|---|---|"]

    def q1_verdict(s, goal):
        if not s:
            return "not measured"
        return "met" if s["q1"] >= goal else "NOT met"
    for qd in QDS:
        for key, by in bases:
            s = d.get("libbpf-batch", {}).get(qd, {}).get(key)
            L.append(f"| libbpf iolatency (io__batch), qd {qd}: median >= 0.90x | {by} | "
                     f"{fmt(s)} | {verdict(s, 0.90)} |")
            L.append(f"| libbpf iolatency (io__batch), qd {qd}: lower quartile >= 0.88x | "
                     f"{by} | {s['q1']:.3f} | {q1_verdict(s, 0.88)} |" if s else
                     f"| libbpf iolatency, qd {qd}: lower quartile >= 0.88x | {by} | - | "
                     "not measured |")
    for key, by in bases[:-1]:
        s = d.get("bcc-batch", {}).get(1, {}).get(key)
        L.append(f"| bcc/iolatency (io__batch), qd 1: >= 0.70x | {by} | {fmt(s)} | "
                 f"{verdict(s, 0.70)} |")
    f = fits.get("bcc-batch", {}).get("added_cpu_ns")
    L.append(f"| bcc/iolatency (io__batch): per record < 40 ns | CPU time, every thread "
             f"(fit) | {cell(f, 0)} | "
             + ((verdict_max({"median": f[0], "min": f[0], "max": f[0]}, 40)) if f
                else "not measured") + " |")
    for qd in QDS:
        for key, by in bases[:-1]:
            s = d.get("exporter-batch", {}).get(qd, {}).get(key)
            L.append(f"| probekit-exporter, qd {qd}: >= 0.85x | {by} | {fmt(s)} | "
                     f"{verdict(s, 0.85)} |")
    L += ["", "bt/iolat_batch.bt (bpftrace 0.17) is reported, with no goal: its cost "
          "per record caps it whatever the batch size. What bounds the libbpf tool, "
          "step by step (the hit, the copy, the binning), measured by hand: "
          "[BATCH_BOUND.md](BATCH_BOUND.md)."]
    L += ["", f"Load average (1/5/15 min) at the start: "
          f"{'/'.join(map(str, raw.get('loadavg_start', [])))}, at the end: "
          f"{'/'.join(map(str, raw.get('loadavg_end', [])))} (2 vCPUs).", "", END]
    return "\n".join(L) + "\n"


def section_of(text, begin, end):
    """The section of text (RESULTS.md) between the markers begin and end,
    markers included; "" when it has none."""
    if begin in text and end in text:
        return begin + text.split(begin, 1)[1].split(end, 1)[0] + end + "\n"
    return ""


def replace_section(text, section, begin=BEGIN, end=END):
    """text (RESULTS.md) with the section between the markers begin and
    end (section 7's by default) replaced, or appended."""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        return head + section.rstrip("\n") + rest.split(end, 1)[1]
    return text.rstrip("\n") + "\n\n" + section


def main():
    """Rewrite section 7 of OUT/RESULTS.md from OUT/raw/batch.json (OUT:
    bench/ by default), as report.py does for the rest."""
    import json
    import sys
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(out, "raw", "batch.json")) as f:
            raw = json.load(f)
        with open(os.path.join(out, "RESULTS.md")) as f:
            text = f.read()
    except (OSError, ValueError) as e:
        print(f"bench/batch.py: {e}", file=sys.stderr)
        return 1
    with open(os.path.join(out, "RESULTS.md"), "w") as f:
        f.write(replace_section(text, render(raw)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
