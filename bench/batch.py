# SPDX-License-Identifier: BSD-2-Clause
"""bench/batch.py: section 7 of bench/run, the cost of looking at every I/O
through io__batch against the per-I/O probes.

blktgt's own workload_run (in process, null bdev, 4 KiB random reads) at
queue depths 1, 8 and 32, untraced and under each latency tool in both
modes: libbpf iolatency, bcc/iolatency (each default, then --per-io), and
bt/iolat_batch.bt against bt/iolat.bt.  One server per configuration, each
on its own copy of the binary (a uprobe is set on a file, and would trap
every process mapping it), all started first; every repetition runs every
configuration at every queue depth, in rotated order, and each traced
figure is divided by the untraced one of the same repetition.

A batch carries about a queue depth of completions, so a batch tool's
added time per I/O is  per_record + per_batch / records_per_batch.  The
records per batch at each depth are counted (a bpftrace sum over
io__batch's count, on a server of its own), and the two costs are fitted
by least squares over the three depths.

render() turns the raw samples into the RESULTS.md section; bench/run
--only batch runs this alone and replaces just that section.
"""

import contextlib
import os
import re
import shutil
import statistics
import tempfile

from report import fmt, summary, verdict  # bench/report.py: one median/range summary

QDS = (1, 8, 32)
IOS = 200_000
BEGIN = "<!-- section 7: bench/batch.py; bench/run --only batch rewrites it -->"
END = "<!-- end of section 7 -->"


def configs(root, build, python):
    """name: (description, argv factory taking a pid, readiness regex);
    "untraced" has no tool."""
    lib = os.path.join(build, "bin", "probekit-iolatency")
    bcc = os.path.join(root, "bcc", "iolatency")
    # The built wrapper: it finds the build's struct definitions.
    wrapper = os.path.join(build, "bin", "probekit-bpftrace")
    bt = os.path.join(root, "bt")
    ready_bt = r"^probekit: tracing PID="
    return {
        "untraced": ("untraced", None, None),
        "libbpf-batch": ("libbpf iolatency (io__batch)",
                         lambda pid: [lib, "-p", str(pid)], r"^Tracing "),
        "libbpf-per-io": ("libbpf iolatency --per-io",
                          lambda pid: [lib, "-p", str(pid), "--per-io"], r"^Tracing "),
        "bcc-batch": ("bcc/iolatency (io__batch)",
                      lambda pid: [python, bcc, "-p", str(pid)], r"^Tracing "),
        "bcc-per-io": ("bcc/iolatency --per-io",
                       lambda pid: [python, bcc, "-p", str(pid), "--per-io"], r"^Tracing "),
        "bt-batch": ("bt/iolat_batch.bt",
                     lambda pid: [wrapper, str(pid), os.path.join(bt, "iolat_batch.bt")],
                     ready_bt),
        "bt-per-io": ("bt/iolat.bt",
                      lambda pid: [wrapper, str(pid), os.path.join(bt, "iolat.bt")],
                      ready_bt),
    }


def records_per_batch(run, build, tmp):
    """{qd: records per io__batch hit} for the workload at each depth."""
    usdt1 = os.path.join(build, "bin", "blktgt")
    out = {}
    # A server and tracer per depth: each depth's totals stand alone.
    for qd in QDS:
        with run.Blktgt(usdt1, tmp) as t:
            tr = run.Tracer(["bpftrace", "-p", str(t.pid), "-e",
                             f"usdt:{usdt1}:blktgt:io__batch {{ @hits = count(); "
                             "@recs = sum(arg1); } "
                             'BEGIN { printf("READY\\n"); }'], r"^READY").start()
            t.t.rpc("workload_run", bdev="null0", pattern="randread", io_size=4096,
                    queue_depth=qd, count=IOS)
            text = "\n".join(tr.stop())
        hits = re.findall(r"^@hits: (\d+)$", text, re.M)
        recs = re.findall(r"^@recs: (\d+)$", text, re.M)
        if len(hits) != 1 or len(recs) != 1:
            run.die(f"records per batch, qd {qd}: no @hits/@recs:\n{text[-2000:]}")
        if int(recs[0]) != IOS:
            run.die(f"records per batch, qd {qd}: {recs[0]} records for {IOS} I/Os")
        out[str(qd)] = int(recs[0]) / int(hits[0])
    return out


def measure(run, root, build, runs, tmp):
    """Raw samples: {"samples": {name: {qd: [{ns_per_io, cpu_ns_per_io}]}},
    "records_per_batch": {qd: r}, "configs": {name: description}}, with
    qd as a string key (as JSON keeps it)."""
    usdt1 = os.path.join(build, "bin", "blktgt")
    cf = configs(root, build, run.PYTHON)
    samples = {n: {str(qd): [] for qd in QDS} for n in cf}
    with contextlib.ExitStack() as stack:
        insts = {}
        for n, (desc, argv, ready) in cf.items():
            copy = os.path.join(tempfile.mkdtemp(dir=tmp), "blktgt")
            shutil.copy2(usdt1, copy)
            t = stack.enter_context(run.Blktgt(copy, tmp))
            if argv:
                tr = run.Tracer(argv(t.pid), ready).start()
                stack.callback(tr.stop)
            insts[n] = t
            run.log(f"batch: ready: {desc} (pid {t.pid})")
        keys = [(n, qd) for qd in QDS for n in cf]
        for n, qd in run.rotated(keys, runs, "batch",
                                 lambda k: f"{cf[k[0]][0]}, qd {k[1]}"):
            t = insts[n]
            c0 = run.task_cpu_ns(t.pid)
            res = t.t.rpc("workload_run", bdev="null0", pattern="randread",
                          io_size=4096, queue_depth=qd, count=IOS)
            c1 = run.task_cpu_ns(t.pid)
            if res["ios"] != IOS or res["errors"]:
                run.die(f"workload_run: {res}")
            samples[n][str(qd)].append({"ns_per_io": res["elapsed_ns"] / IOS,
                                   "cpu_ns_per_io": (c1 - c0) / IOS})
    return {"job": f"workload_run randread 4096 B, {IOS} I/Os, null bdev, "
                   f"queue depths {', '.join(map(str, QDS))}",
            "configs": {n: cf[n][0] for n in cf}, "samples": samples,
            "records_per_batch": records_per_batch(run, build, tmp)}


# --- the report ------------------------------------------------------------------

def _paired(raw, name, qd, field, fn):
    """fn(traced, untraced) of field, per repetition.  JSON keys are
    strings: qd is looked up as one."""
    base = raw["samples"]["untraced"][str(qd)]
    mine = raw["samples"][name][str(qd)]
    return [fn(m[field], b[field]) for m, b in zip(mine, base)]


def derive(raw):
    """{name: {qd: {"ratio", "added_ns", "added_cpu_ns"}}} and the fits."""
    d = {}
    for n in raw["samples"]:
        if n == "untraced":
            continue
        d[n] = {}
        for qd in QDS:
            d[n][qd] = {
                # Throughput traced / untraced = time untraced / traced.
                "ratio": summary(_paired(raw, n, qd, "ns_per_io", lambda m, b: b / m)),
                # The same from the target's CPU time: what the tool costs
                # the target, without the waits for a CPU a loaded machine
                # adds to the wall time.
                "cpu_ratio": summary(_paired(raw, n, qd, "cpu_ns_per_io",
                                              lambda m, b: b / m)),
                "added_ns": summary(_paired(raw, n, qd, "ns_per_io", lambda m, b: m - b)),
                "added_cpu_ns": summary(_paired(raw, n, qd, "cpu_ns_per_io",
                                                 lambda m, b: m - b)),
            }
    rpb = {int(k): v for k, v in raw["records_per_batch"].items()}
    fits = {}
    for n in d:
        if not n.endswith("-batch"):
            continue
        fits[n] = {}
        for key in ("added_ns", "added_cpu_ns"):
            # added = per_record + per_batch * (1 / records_per_batch)
            xs = [1 / rpb[qd] for qd in QDS]
            ys = [d[n][qd][key]["median"] for qd in QDS]
            mx, my = statistics.mean(xs), statistics.mean(ys)
            sxx = sum((x - mx) ** 2 for x in xs)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
            fits[n][key] = (my - slope * mx, slope)
    return d, rpb, fits


def render(raw):
    d, rpb, fits = derive(raw)
    names = [n for n in raw["configs"] if n != "untraced"]
    L = [BEGIN, "## 7. Batch probes: every I/O, at full rate", "",
         f"{raw['job']}; blktgt with 2 reactor threads (the job runs on reactor 1). "
         "Each tool is attached to its own server for the whole run; every "
         "repetition runs every configuration at every depth, in rotated order, and "
         "each ratio is paired with the untraced run of the same repetition. "
         f"{raw['runs']} repetitions.", "",
         "Records per io__batch hit (a bpftrace sum of its count): " +
         ", ".join(f"qd {qd}: {rpb[qd]:.1f}" for qd in QDS) + ".", ""]

    def ratios(title, field):
        """A table of one ratio per tool and queue depth, under title."""
        return [title, "", "| tool | " + " | ".join(f"qd {qd}" for qd in QDS) + " |",
                "|---|" + "---|" * len(QDS)] + [
            f"| {raw['configs'][n]} | " + " | ".join(fmt(d[n][qd][field]) for qd in QDS)
            + " |" for n in names]
    L += ratios("Throughput traced / untraced (workload_run's own time per I/O):", "ratio")
    L += [""] + ratios("The same from the CPU time of the target's threads per I/O "
                       "(untraced / traced), which waits for a CPU on a loaded machine "
                       "do not inflate:", "cpu_ratio")
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
    L += ["", "Cost per record and per batch (hit), fitted by least squares to the "
          "medians above as `added = per_record + per_batch / records_per_batch`, "
          "from the target's CPU time and from the wall time:", "",
          "| tool | per record, CPU ns | per batch (hit), CPU ns | per record, ns | "
          "per batch (hit), ns |", "|---|---|---|---|---|"]
    for n, f in fits.items():
        (rc, bc), (rt, bt_) = f["added_cpu_ns"], f["added_ns"]
        L.append(f"| {raw['configs'][n]} | {rc:.0f} | {bc:.0f} | {rt:.0f} | {bt_:.0f} |")
    L += ["", "| goal, at qd 32 | by | this run | verdict |", "|---|---|---|---|"]
    for n, goal, what in (("libbpf-batch", 0.85, "libbpf iolatency (io__batch) >= 0.85x"),
                          ("bt-batch", 0.5, "bt/iolat_batch.bt >= 0.5x")):
        for key, by in (("ratio", "time"), ("cpu_ratio", "CPU")):
            s = d.get(n, {}).get(32, {}).get(key)
            L.append(f"| {what} | {by} | {fmt(s)} | {verdict(s, goal)} |")
    L += ["", "What bounds the libbpf tool at qd 32, step by step (the hit, the "
          "copy, the binning), measured by hand: [BATCH_BOUND.md](BATCH_BOUND.md)."]
    L += ["", f"Load average (1/5/15 min) at the start: "
          f"{'/'.join(map(str, raw.get('loadavg_start', [])))}, at the end: "
          f"{'/'.join(map(str, raw.get('loadavg_end', [])))} (2 vCPUs).", "", END]
    return "\n".join(L) + "\n"


def replace_section(text, section):
    """text (RESULTS.md) with section 7 replaced, or appended."""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        return head + section.rstrip("\n") + rest.split(END, 1)[1]
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
