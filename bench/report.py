#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
"""report.py: bench/RESULTS.md and bench/results.svg from bench/raw/results.json.

usage: bench/report.py [BENCH_DIR]      (bench/run calls write() itself)

Ratios are paired: taken within one repetition, where the configurations
ran back to back, then summarized as median (min..max, n) over
repetitions.  Nothing here measures; it only derives and lays out.
"""

import json
import os
import statistics
import subprocess
import sys


def summary(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def fmt(s, digits=3):
    if s is None:
        return "not available"
    f = f"{{:.{digits}f}}"
    return (f"**{f.format(s['median'])}** ({f.format(s['min'])}..{f.format(s['max'])}, "
            f"n={s['n']})")


def verdict(s, goal=0.99):
    """Met, not met, or not resolved by this run's spread."""
    if s is None:
        return "not measured"
    if s["median"] >= goal:
        return "met (median)" if s["min"] < goal else "met (every repetition)"
    if s["max"] >= goal:
        return "not resolved (median below, spread reaches it)"
    return "NOT met (every repetition below)"


def verdict_max(s, goal):
    """The same for a goal that is a ceiling (at most goal)."""
    if s is None:
        return "not measured"
    if s["median"] <= goal:
        return "met (median)" if s["max"] > goal else "met (every repetition)"
    if s["min"] <= goal:
        return "not resolved (median above, spread reaches it)"
    return "NOT met (every repetition above)"


def paired(a, b, fn):
    return [fn(x, y) for x, y in zip(a, b)]


def nbd_bound_section(w, raw):
    """What bounds the fio rows, from the same runs: fio's CPU, the
    server's CPU and how often it slept, per configuration."""
    fs = raw["fio"]["samples"]
    measured = all("fio_cpu_pct" in s and "sleeps_per_io" in s
                   for v in fs.values() for s in v)
    w("**What the IOPS ratios above can and cannot say.** In these runs neither side "
      "is busy: fio uses a fraction of one CPU and blktgt less, and the server sleeps "
      "between bursts (a reactor's voluntary context switches, per I/O). So the IOPS is "
      "set by how fast each side is woken on a loaded 2-vCPU VM, not by either one's CPU "
      "time, and a tool that adds CPU to the server need not lower it: a slower server "
      "finds more requests waiting at each wake-up, sleeps less often per I/O, and fio "
      "waits less for it, which is how a traced server can show a ratio above 1. The "
      "IOPS ratio is therefore not a cost; read the server's extra CPU per I/O (above) and "
      "section 2's in-process rows and section 7 for what a tool costs.")
    w("")
    if not measured:
        w("This run's raw data predates those figures; measured by hand on 2026-11-25 "
          "(load average 11-12): fio used 21-29% of one CPU and blktgt about 10%, and "
          "blktgt slept 0.11-0.23 times per I/O. bench/run records them for every "
          "configuration from now on.")
        w("")
        return
    w("| configuration | fio CPU, % of one CPU | blktgt CPU, % of one CPU | "
      "blktgt sleeps per I/O |")
    w("|---|---|---|---|")
    for n, v in fs.items():
        w(f"| {raw['fio']['configs'][n]} | {fmt(summary([s['fio_cpu_pct'] for s in v]), 0)} | "
          f"{fmt(summary([s.get('server_cpu_pct') for s in v]), 0)} | "
          f"{fmt(summary([s.get('sleeps_per_io') for s in v]), 3)} |")
    w("")


def derive(raw):
    """Every figure the report shows, as summaries, from raw samples."""
    d = {}
    fs = raw["fio"]["samples"]
    hits = raw["fio"].get("hits", {})
    iops = {n: summary([s["iops"] for s in v]) for n, v in fs.items()}
    d["iops"] = iops
    d["cpu_per_io"] = {n: summary([s.get("cpu_ns_per_io") for s in v]) for n, v in fs.items()}
    d["usdt_ratio"] = summary(paired(fs["usdt1"], fs["usdt0"],
                                     lambda x, y: x["iops"] / y["iops"]))
    d["cpu_ratio"] = summary(paired(fs["usdt0"], fs["usdt1"],
                                    lambda x, y: x["cpu_ns_per_io"] / y["cpu_ns_per_io"]))
    d["nbdkit_ratio"] = summary(paired(fs["usdt1"], fs["nbdkit"],
                                       lambda x, y: x["iops"] / y["iops"]))
    d["nbdkit_ratio_usdt0"] = summary(paired(fs["usdt0"], fs["nbdkit"],
                                             lambda x, y: x["iops"] / y["iops"]))
    d["nop5_untraced_ratio"] = summary(paired(fs["nop5"], fs["usdt1"],
                                              lambda x, y: x["iops"] / y["iops"]))
    d["traced"] = {}
    # (traced config, its untraced base, whose probes/hits)
    for n, base, h in (("bt", "usdt1", "bt"), ("nop5_bt", "nop5", "bt"),
                       ("bcc", "usdt1", "bcc"), ("libbpf", "usdt1", "libbpf"),
                       ("exporter", "usdt1", "exporter")):
        if n not in fs:
            d["traced"][n] = None
            continue
        hpi = hits[h]["hits_per_io"]
        d["traced"][n] = {
            "probes": hits[h]["probes"], "hits_per_io": hpi,
            "ratio": summary(paired(fs[n], fs[base], lambda x, y: x["iops"] / y["iops"])),
            "extra_cpu": summary(paired(fs[n], fs[base],
                                        lambda x, y: x["cpu_ns_per_io"] - y["cpu_ns_per_io"])),
            "per_hit": summary(paired(fs[n], fs[base],
                                      lambda x, y: (x["cpu_ns_per_io"] - y["cpu_ns_per_io"]) / hpi))
            if hpi > 0 else None,
        }
    if d["traced"]["bt"] and d["traced"]["nop5_bt"] and hits["bt"]["hits_per_io"] > 0:
        hpi = hits["bt"]["hits_per_io"]
        d["nop5_bt_hit_ratio"] = summary(paired(
            paired(fs["nop5_bt"], fs["nop5"], lambda x, y: x["cpu_ns_per_io"] - y["cpu_ns_per_io"]),
            paired(fs["bt"], fs["usdt1"], lambda x, y: x["cpu_ns_per_io"] - y["cpu_ns_per_io"]),
            lambda x, y: x / y if y > 0 else None))
    else:
        d["nop5_bt_hit_ratio"] = None
    wl = raw.get("workload")
    d["wl"] = None
    if wl:
        ws = wl["samples"]
        hpi = wl["hits_per_io"]
        w = {"hits_per_io": hpi,
             "ns_per_io": {n: summary([x["ns_per_io"] for x in v]) for n, v in ws.items()},
             "usdt_ratio": summary(paired(ws["usdt1"], ws["usdt0"],
                                          lambda x, y: y["ns_per_io"] / x["ns_per_io"])),
             "nop5_ratio": summary(paired(ws["nop5"], ws["usdt1"],
                                          lambda x, y: y["ns_per_io"] / x["ns_per_io"])),
             "traced": {}}
        for n, base in (("bt", "usdt1"), ("nop5_bt", "nop5"), ("bcc", "usdt1"),
                        ("libbpf", "usdt1"), ("exporter", "usdt1")):
            if n not in ws:
                w["traced"][n] = None
                continue
            w["traced"][n] = {
                "ratio": summary(paired(ws[n], ws[base],
                                        lambda x, y: y["ns_per_io"] / x["ns_per_io"])),
                # hpi counts io__submit and io__done; the exporter reads
                # io__batch, whose hits per I/O this run does not count.
                "per_hit": summary(paired(ws[n], ws[base],
                                          lambda x, y: (x["ns_per_io"] - y["ns_per_io"]) / hpi))
                if n != "exporter" else None,
            }
        if w["traced"]["bt"] and w["traced"]["nop5_bt"]:
            w["nop5_bt_hit_ratio"] = summary(paired(
                paired(ws["nop5_bt"], ws["nop5"], lambda x, y: x["ns_per_io"] - y["ns_per_io"]),
                paired(ws["bt"], ws["usdt1"], lambda x, y: x["ns_per_io"] - y["ns_per_io"]),
                lambda x, y: x / y if y > 0 else None))
        else:
            w["nop5_bt_hit_ratio"] = None
        d["wl"] = w
    hc = raw["hitcost"]["samples"]
    d["hitcost"] = {}
    for v in ("stock", "nop5"):
        u, t = hc[f"{v}-untraced"], hc[f"{v}-traced"]
        d["hitcost"][v] = {
            "untraced": summary([s["ns_per_pass"] for s in u]),
            "traced": summary([s["ns_per_pass"] for s in t]),
            "per_hit": summary(paired(t, u, lambda x, y: x["ns_per_pass"] - y["ns_per_pass"])),
            "trampoline": sorted({s["trampoline"] for s in t}),
        }
    d["nop5_ratio"] = summary(paired(
        paired(hc["nop5-traced"], hc["nop5-untraced"], lambda x, y: x["ns_per_pass"] - y["ns_per_pass"]),
        paired(hc["stock-traced"], hc["stock-untraced"], lambda x, y: x["ns_per_pass"] - y["ns_per_pass"]),
        lambda x, y: x / y))
    d["ring"] = derive_ring(raw, d)
    fe = raw["first_event"]["samples_ms"]
    d["first"] = {n: summary(v) for n, v in fe.items()}
    if "wrapper" in fe and "bpftrace" in fe:
        d["wrapper_cost"] = summary(paired(fe["wrapper"], fe["bpftrace"], lambda x, y: x - y))
        pairs = raw["first_event"].get("pairs_ms")
        d["wrapper_ratio"] = summary(paired(pairs["wrapper"], pairs["bpftrace"],
                                            lambda x, y: x / y)) if pairs else None
    else:
        d["wrapper_cost"] = d["wrapper_ratio"] = None
    return d


def derive_ring(raw, d):
    """The trace ring (second tier): bench/tracecost.c's ns per event, the
    attached USDT hit of the same repetition, and blktgt -e all against
    the same build with tracing off."""
    tc = raw.get("tracecost")
    if not tc:
        return None
    ts = tc["samples"]
    hc = raw["hitcost"]["samples"]
    r = {k: summary([x[k] for x in ts])
         for k in ("enabled_ns_per_event", "disabled_ns_per_event", "clock_ns",
                   "enabled_cpu_ns", "disabled_cpu_ns", "clock_cpu_ns")}
    r["events"] = tc["events"]
    r["clock"] = tc.get("clock", "monotonic")
    tm = tc.get("samples_monotonic") or []
    r["mono"] = {k: summary([x[k] for x in tm])
                 for k in ("enabled_ns_per_event", "clock_ns", "enabled_cpu_ns",
                           "clock_cpu_ns")} if tm else None
    for v in ("stock", "nop5"):
        hit = paired(hc[f"{v}-traced"], hc[f"{v}-untraced"],
                     lambda x, y: x["ns_per_pass"] - y["ns_per_pass"])
        r[f"vs_{v}"] = summary(paired(ts, hit, lambda x, y: x["enabled_ns_per_event"] / y
                                      if y > 0 else None))
    fs = raw["fio"]["samples"]
    r["fio"] = None
    if "trace_all" in fs:
        a, b = fs["trace_all"], fs["usdt1"]
        epi = summary([x.get("trace_events_per_io") for x in a])
        r["fio"] = {
            "ratio": summary(paired(a, b, lambda x, y: x["iops"] / y["iops"])),
            "events_per_io": epi,
            "extra_cpu": summary(paired(a, b, lambda x, y: x["cpu_ns_per_io"] - y["cpu_ns_per_io"])),
            "per_event": summary(paired(a, b, lambda x, y:
                                        (x["cpu_ns_per_io"] - y["cpu_ns_per_io"])
                                        / x["trace_events_per_io"]
                                        if x.get("trace_events_per_io") else None)),
        }
    lc = raw.get("lttngcost")
    r["lttng"] = None
    if lc and lc.get("samples"):
        ls, ld = lc["samples"], lc["samples_disabled"]
        r["lttng"] = {
            "events": lc["events"],
            "ns": summary([x["ns_per_event"] for x in ls]),
            "cpu_ns": summary([x["cpu_ns_per_event"] for x in ls]),
            "disabled_ns": summary([x["ns_per_event"] for x in ld]),
            "disabled_cpu_ns": summary([x["cpu_ns_per_event"] for x in ld]),
            "vs_ring": summary(paired(ls, ts, lambda x, y: x["ns_per_event"]
                                      / y["enabled_ns_per_event"])),
            "vs_ring_cpu": summary(paired(ls, ts, lambda x, y: x["cpu_ns_per_event"]
                                          / y["enabled_cpu_ns"])),
        }
    wl = raw.get("workload")
    r["wl"] = None
    if wl and "trace_all" in wl["samples"]:
        a, b = wl["samples"]["trace_all"], wl["samples"]["usdt1"]
        r["wl"] = {
            "ns_per_io": summary([x["ns_per_io"] for x in a]),
            "events_per_io": summary([x.get("trace_events_per_io") for x in a]),
            "ratio": summary(paired(a, b, lambda x, y: y["ns_per_io"] / x["ns_per_io"])),
            "per_event": summary(paired(a, b, lambda x, y:
                                        (x["ns_per_io"] - y["ns_per_io"])
                                        / x["trace_events_per_io"]
                                        if x.get("trace_events_per_io") else None)),
        }
    return r


def plot(out, raw, d):
    """results.svg: IOPS ratios, cost per hit, time to first event."""
    rows = [[], [], []]

    def add(i, label, s):
        if s is not None:
            rows[i].append(f'"{label}" {s["median"]:.6g} {s["min"]:.6g} {s["max"]:.6g}')

    add(0, "USDT=1\\n/USDT=0", d["usdt_ratio"])
    add(0, "NOP5\\n/USDT=1", d["nop5_untraced_ratio"])
    for n, label in (("bt", "iolat.bt"), ("nop5_bt", "iolat.bt\\nNOP5"), ("bcc", "bcc\\niolatency"),
                     ("libbpf", "libbpf\\niolatency"), ("exporter", "exporter")):
        if d["traced"][n]:
            add(0, f"+{label}", d["traced"][n]["ratio"])
            if d["wl"] and d["wl"]["traced"][n]:
                add(1, label, d["wl"]["traced"][n]["per_hit"])
            else:
                add(1, label, d["traced"][n]["per_hit"])
    ring = d.get("ring")
    if ring and ring["fio"]:
        add(0, "-e all\\n/off", ring["fio"]["ratio"])
    add(0, "blktgt\\n/nbdkit", d["nbdkit_ratio"])
    add(1, "loop, stock\\n1-byte nop", d["hitcost"]["stock"]["per_hit"])
    add(1, "loop,\\n5-byte nop", d["hitcost"]["nop5"]["per_hit"])
    if ring:
        add(1, "trace ring\\nevent", ring["enabled_ns_per_event"])
    labels = {"bpftrace": "bpftrace", "wrapper": "wrapper\\n+bpftrace",
              "bcc_first": "BCC\\npython", "bt_ready": "iolat.bt\\nready",
              "bcc_ready": "bcc iolat.\\nready", "libbpf_ready": "libbpf\\nready",
              "exporter_ready": "exporter\\nready"}
    for n, s in d["first"].items():
        add(2, labels.get(n, n), s)
    dat = os.path.join(out, "raw", "plot.dat")
    with open(dat, "w") as f:
        f.write("\n\n\n".join("\n".join(r) if r else '"none" 0 0 0' for r in rows) + "\n")
    script = f"""
set terminal svg size 1500,520 dynamic font "sans,11" background rgb "white"
set output "{os.path.join(out, 'results.svg')}"
set multiplot layout 1,3 title "probekit benchmarks, {raw['date']}, {raw['machine']['cpus']} vCPU, kernel {raw['machine']['kernel']} (median, bars: min..max of {raw['runs']} runs)"
set style fill solid 0.5 border -1
set boxwidth 0.6
set xtics nomirror font ",10"
set bmargin 5
set offsets 0.5, 0.5, 0, 0
set grid ytics
unset key
set title "IOPS ratio (fio nbd 4KiB randread qd32)"
set yrange [0:*]
plot "{dat}" index 0 using 0:2:xtic(1) with boxes lc rgb "#4477aa", \\
     "" index 0 using 0:2:3:4 with yerrorbars lc rgb "black" pt 0, \\
     "" index 0 using 0:4:(sprintf("%.3f", $2)) with labels offset 0,0.8 font ",10", \\
     1.0 with lines dt 2 lc rgb "gray"
set title "cost per probe hit / ring event, ns"
plot "{dat}" index 1 using 0:2:xtic(1) with boxes lc rgb "#cc6677", \\
     "" index 1 using 0:2:3:4 with yerrorbars lc rgb "black" pt 0, \\
     "" index 1 using 0:4:(sprintf("%.0f", $2)) with labels offset 0,0.8 font ",10"
set title "time to first event / ready, ms"
plot "{dat}" index 2 using 0:2:xtic(1) with boxes lc rgb "#228833", \\
     "" index 2 using 0:2:3:4 with yerrorbars lc rgb "black" pt 0, \\
     "" index 2 using 0:4:(sprintf("%.0f", $2)) with labels offset 0,0.8 font ",10"
unset multiplot
"""
    r = subprocess.run(["gnuplot"], input=script.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("gnuplot failed: " + r.stdout.decode(errors="replace"))


def markdown(raw, d):
    m = raw["machine"]
    av = raw["available"]
    L = []
    w = L.append
    w("# probekit benchmarks")
    w("")
    w(f"Generated by `make bench` (bench/run, bench/report.py) on {raw['date']}.")
    w(f"Machine: {m['cpus']} vCPU {m['cpu']}, Linux {m['kernel']}; {m['bpftrace']}, "
      f"{m['fio']}, {m['nbdkit']}, {m['cc']}.")
    w(f"{raw['runs']} repetitions; each fio run lasts {raw['seconds']} s. Every repetition "
      "runs every configuration, in an order rotated from one repetition to the next. "
      "Each figure is **median** (min..max, n) over repetitions; ratios are paired "
      "within a repetition. This is a shared 2-vCPU VM: read the ratios, not absolute times.")
    if "loadavg_start" in raw:
        w(f"Load average (1/5/15 min) at the start: {'/'.join(map(str, raw['loadavg_start']))}, "
          f"at the end: {'/'.join(map(str, raw['loadavg_end']))} (other work on the "
          f"machine; with {m['cpus']} vCPUs, a load above {m['cpus']} means every "
          "measurement here shared its CPUs).")
    w("Raw samples: [raw/results.json](raw/results.json).")
    w("")
    w("![overhead ratios, cost per hit, time to first event](results.svg)")
    w("")
    w("## Headlines")
    w("")
    w("Medians of this run; the last column is DESIGN.md's \"numbers to beat\", "
      "measured earlier on this machine type.")
    w("")
    w("| what | this run | DESIGN.md |")
    w("|---|---|---|")
    med = lambda x, digits=0: "n/a" if x is None else f"{x['median']:.{digits}f}"
    hs, h5 = d["hitcost"]["stock"], d["hitcost"]["nop5"]
    w(f"| untraced site in a tight loop, ns per pass (stock / 5-byte) | "
      f"{med(hs['untraced'], 2)} / {med(h5['untraced'], 2)} | ~0.3 |")
    w(f"| traced count(), ns per hit: stock 1-byte nop (int3) | {med(hs['per_hit'])} | ~547 |")
    w(f"| traced count(), ns per hit: 5-byte nop, optimized | {med(h5['per_hit'])} | ~408 |")
    w(f"| 5-byte / 1-byte cost per hit | {med(d['nop5_ratio'], 2)} | ~0.75 |")
    if d["wl"] and d["wl"]["nop5_bt_hit_ratio"]:
        w(f"| same, blktgt under bt/iolat.bt (workload_run) | "
          f"{med(d['wl']['nop5_bt_hit_ratio'], 2)} | |")
    f = d["first"]
    w(f"| time to first event / ready, ms: libbpf / bpftrace / wrapper+bpftrace / BCC | "
      f"{med(f.get('libbpf_ready'))} / {med(f.get('bpftrace'))} / {med(f.get('wrapper'))} / "
      f"{med(f.get('bcc_first'))} | ~29 / ~50-66 / - / ~330 |")
    w(f"| time to first event, wrapper+bpftrace / plain bpftrace, back-to-back pairs | "
      f"{med(d['wrapper_ratio'], 2)} | goal <= 1.2 |")
    ring = d.get("ring")
    if ring:
        w(f"| trace ring event, ns: enabled / disabled / one {ring['clock']} read | "
          f"{med(ring['enabled_ns_per_event'], 1)} / {med(ring['disabled_ns_per_event'], 1)} / "
          f"{med(ring['clock_ns'], 1)} | goal <= 50 enabled |")
        w(f"| trace ring event / attached USDT hit (stock), same run | "
          f"{med(ring['vs_stock'], 3)} | |")
        lt = ring["lttng"]
        if lt:
            w(f"| LTTng-UST event (same payload, snapshot session), ns: enabled / disabled | "
              f"{med(lt['ns'], 1)} / {med(lt['disabled_ns'], 1)} | ~160-190 enabled |")
            w(f"| LTTng-UST event / trace ring event, same run | {med(lt['vs_ring'], 2)} | |")
        if ring["fio"]:
            w(f"| IOPS, blktgt -e all / tracing off | {med(ring['fio']['ratio'], 3)} | "
              "goal >= 0.97 |")
    w(f"| nbdkit null, fio nbd 4 KiB randread qd32, IOPS | {med(d['iops']['nbdkit'])} | ~80k |")
    w(f"| blktgt USDT=1 / nbdkit null, IOPS | {med(d['nbdkit_ratio'], 2)} | |")
    w("")
    w("## 1. Probes compiled in, nobody attached")
    w("")
    w("fio `--ioengine=nbd` over the target's unix socket, 4 KiB random reads, "
      "queue depth 32, a 1 GiB null bdev; blktgt with 2 reactor threads.")
    w("")
    w("| what | value | goal |")
    w("|---|---|---|")
    w(f"| IOPS ratio USDT=1 / USDT=0 | {fmt(d['usdt_ratio'])} | >= 0.99: "
      f"{verdict(d['usdt_ratio'])} |")
    w(f"| CPU per I/O ratio USDT=0 / USDT=1 (1.0 = same cost) | {fmt(d['cpu_ratio'])} | "
      f">= 0.99: {verdict(d['cpu_ratio'])} |")
    w(f"| IOPS ratio USDT_NOP5=1 / USDT=1 (5-byte nops, -mno-red-zone) | "
      f"{fmt(d['nop5_untraced_ratio'])} | |")
    for n, label in (("usdt0", "USDT=0"), ("usdt1", "USDT=1"), ("nop5", "USDT_NOP5=1")):
        w(f"| IOPS, {label} | {fmt(d['iops'][n], 0)} | |")
    for n, label in (("usdt0", "USDT=0"), ("usdt1", "USDT=1"), ("nop5", "USDT_NOP5=1")):
        w(f"| blktgt CPU ns per I/O, {label} | {fmt(d['cpu_per_io'][n], 0)} | |")
    w("")
    w("## 2. While tracing")
    w("")
    w("The same job with a latency-histogram tool attached to the USDT=1 target "
      "(and bt/iolat.bt to the USDT_NOP5=1 target, compared with that build untraced). "
      "Hits per I/O is measured, not assumed: one extra fio run with a bpftrace "
      "`count()` on exactly the probes the tool's source names, divided by fio's I/O "
      "count. Cost per hit = (blktgt CPU ns per I/O traced - untraced, same "
      "repetition) / hits per I/O; CPU time is the sum of the target's threads' "
      "`schedstat` run time, which includes the uprobe and BPF program time "
      "(they run in the traced thread).")
    w("")
    w("| tool | probes | hits per I/O | IOPS ratio traced / untraced | extra CPU ns per I/O | cost per hit, ns |")
    w("|---|---|---|---|---|---|")
    for n in ("bt", "nop5_bt", "bcc", "libbpf", "exporter"):
        t = d["traced"][n]
        name = {"bt": "bt/iolat.bt via wrapper", "nop5_bt": "bt/iolat.bt via wrapper, USDT_NOP5=1 build",
                "bcc": "build/bin/probekit-iolatency-bcc", "libbpf": "libbpf iolatency",
                "exporter": "build/bin/probekit-exporter (blktgt metrics)"}[n]
        if t is None:
            w(f"| {name} | not available | | | | |")
            continue
        w(f"| {name} | {', '.join(t['probes'])} | {t['hits_per_io']:.3f} | {fmt(t['ratio'])} "
          f"| {fmt(t['extra_cpu'], 0)} | {fmt(t['per_hit'], 0)} |")
    w(f"| **USDT_NOP5=1 / USDT=1 extra CPU per I/O under iolat.bt** | | | | "
      f"{fmt(d['nop5_bt_hit_ratio'])} | |")
    w("")
    nbd_bound_section(w, raw)
    crosses = [n for n, t in d["traced"].items()
               if t and t["per_hit"] and t["per_hit"]["min"] < 0]
    if crosses:
        w("")
        w("In this run the fio-derived CPU deltas are dominated by noise: the range of "
          "cost per hit crosses zero for " + ", ".join(crosses) + ". Read the in-process "
          "table below for the cost per hit, and this one for the IOPS ratios only.")
    if d["wl"]:
        wlr = d["wl"]
        w("")
        w("### The same servers, driven in process")
        w("")
        w(f"The fio figures above carry a lot of scheduling noise (a client process, "
          "socket wakeups, two reactors, other work on 2 vCPUs). Each server above also "
          f"ran blktgt's own `workload_run` ({raw['workload']['job']}), alternating "
          "the same way: one reactor, no sockets, so its time per I/O is mostly CPU. "
          f"Hits per I/O: {wlr['hits_per_io']:.3f} (a bpftrace count of io__submit and "
          "io__done over one such run, divided by its I/Os). Cost per hit = (traced - "
          "untraced ns per I/O, same repetition) / hits per I/O.")
        w("")
        w("| configuration | ns per I/O | throughput ratio | cost per hit, ns |")
        w("|---|---|---|---|")
        npi = wlr["ns_per_io"]
        w(f"| USDT=0 | {fmt(npi['usdt0'], 0)} | | |")
        w(f"| USDT=1 | {fmt(npi['usdt1'], 0)} | {fmt(wlr['usdt_ratio'])} vs USDT=0 "
          f"(>= 0.99: {verdict(wlr['usdt_ratio'])}) | |")
        w(f"| USDT_NOP5=1 | {fmt(npi['nop5'], 0)} | {fmt(wlr['nop5_ratio'])} vs USDT=1 | |")
        for n, label, base in (("bt", "USDT=1 + bt/iolat.bt via wrapper", "USDT=1"),
                               ("nop5_bt", "USDT_NOP5=1 + bt/iolat.bt via wrapper", "USDT_NOP5=1"),
                               ("bcc", "USDT=1 + build/bin/probekit-iolatency-bcc", "USDT=1"),
                               ("libbpf", "USDT=1 + libbpf iolatency", "USDT=1"),
                               ("exporter", "USDT=1 + build/bin/probekit-exporter", "USDT=1")):
            t = wlr["traced"][n]
            if t is None:
                w(f"| {label} | not available | | |")
                continue
            w(f"| {label} | {fmt(npi[n], 0)} | {fmt(t['ratio'])} vs {base} | {fmt(t['per_hit'], 0)} |")
        w(f"| **5-byte / 1-byte cost per hit under iolat.bt** | | | {fmt(wlr['nop5_bt_hit_ratio'])} |")
    w("")
    w("## 3. Cost per hit of one probe site (bench/hitcost.c)")
    w("")
    w(f"A probe in a tight loop: {raw['hitcost']['passes_untraced']:,} passes untraced, "
      f"{raw['hitcost']['passes_traced']:,} traced with "
      "`bpftrace -e 'usdt:BIN:hitcost:hit { @hits = count(); }'` (the timed loop starts "
      "after bpftrace's BEGIN line; the count is checked to equal the passes). Cost per "
      "hit = traced - untraced ns per pass, same repetition. The 5-byte nop variant is "
      "built exactly as `make USDT_NOP5=1` builds blktgt (probes/nop5, `-mno-red-zone`).")
    w("")
    w("| site | untraced ns/pass | traced ns/pass | cost per hit, ns | optimized into a call |")
    w("|---|---|---|---|---|")
    for v, label in (("stock", "stock sys/sdt.h, 1-byte nop (int3)"),
                     ("nop5", "5-byte nop, -mno-red-zone")):
        h = d["hitcost"][v]
        tr = "yes" if h["trampoline"] == [1] else "no" if h["trampoline"] == [0] else str(h["trampoline"])
        w(f"| {label} | {fmt(h['untraced'])} | {fmt(h['traced'], 1)} | {fmt(h['per_hit'], 1)} | {tr} |")
    w(f"| **5-byte / 1-byte cost per hit** | | | {fmt(d['nop5_ratio'])} | |")
    rej = raw["hitcost"].get("rejected", [])
    if rej:
        w("")
        w(f"{len(rej)} traced sample(s) were rejected and repeated because bpftrace "
          "counted fewer hits than passes (counts: "
          + ", ".join(f"{r['binary']} {r['hits']}" for r in rej) + ").")
    w("")
    w("## 4. Time to first event")
    w("")
    w("blktgt (USDT=1) serves a steady fio load (iodepth 1, 2000 IOPS) so events flow. "
      "Timed from the tool's process start to the line that shows the event or "
      "readiness, read from a pipe. \"first event\" rows print on the first "
      "`io__submit` they receive (bench/first.bt through the wrapper, the same program "
      "with plain `bpftrace -e`, and bench/first_bcc.py, a minimal BCC perf-buffer "
      "program). The histogram tools deliver events into in-kernel maps and print "
      "only at intervals, so their row is the time to their readiness line "
      "(\"Tracing ...\", printed once every probe is attached, so the next I/O is "
      "counted); that is their time to first event up to one I/O at 2000 IOPS (0.5 ms). "
      "One untimed bpftrace run first waits for the load to flow (and warms the page "
      "cache for every tool alike). The wrapper's ratio to plain bpftrace comes from "
      "three times as many pairs run back to back, in alternating order, after the "
      "rotation.")
    w("")
    w("| tool | ms |")
    w("|---|---|")
    names = raw["first_event"]["tools"]
    missing = {"wrapper": "build/bin/probekit-bpftrace + bpftrace (first event)",
               "bt_ready": "bt/iolat.bt via wrapper (attached: readiness line)",
               "bcc_ready": "build/bin/probekit-iolatency-bcc (attached: readiness line)",
               "libbpf_ready": "libbpf iolatency (attached: readiness line)",
               "exporter_ready": "build/bin/probekit-exporter (attached: readiness line)"}
    for n, desc in names.items():
        w(f"| {desc or missing.get(n, n)} | "
          f"{fmt(d['first'].get(n), 1) if desc else 'not available'} |")
    libbpf = {n: d["first"].get(n) for n, desc in names.items()
              if desc and (n == "libbpf_ready" or desc.startswith("probekit-"))
              and d["first"].get(n)}
    if libbpf:
        slow = max(libbpf, key=lambda n: libbpf[n]["median"])
        w(f"| **slowest libbpf tool's median** ({names[slow].split(' (')[0]}; "
          f"goal <= 30 ms for each) | {fmt(libbpf[slow], 1)} |")
    w(f"| **wrapper's own cost** (wrapper - plain bpftrace, paired) | {fmt(d['wrapper_cost'], 1)} |")
    w(f"| **wrapper + bpftrace / plain bpftrace** (back-to-back pairs; goal <= 1.2) | {fmt(d['wrapper_ratio'], 2)} |")
    w("")
    w("## 5. blktgt against nbdkit's null plugin")
    w("")
    w("Same fio job; `nbdkit -U - null size=1024M --run 'fio ...'` (fio starts once "
      "nbdkit listens).")
    w("")
    w("| what | value |")
    w("|---|---|")
    w(f"| IOPS ratio blktgt USDT=1 / nbdkit null | {fmt(d['nbdkit_ratio'])} |")
    w(f"| IOPS ratio blktgt USDT=0 / nbdkit null | {fmt(d['nbdkit_ratio_usdt0'])} |")
    w(f"| IOPS, nbdkit null | {fmt(d['iops']['nbdkit'], 0)} |")
    w("")
    ring_section(w, raw, d)
    text = NOP5_TEXT.strip()
    cut = text.index("So the 5-byte nop is safe only")
    w(text[:cut].rstrip())
    w(redzone_table(raw))
    w(text[cut:])
    w("")
    return "\n".join(L)


def ring_section(w, raw, d):
    r = d.get("ring")
    w("## 6. Trace ring (second tier)")
    w("")
    if r is None:
        w("Not measured in this run.")
        w("")
        return
    hs = d["hitcost"]["stock"]
    w("bench/tracecost.c records "
      f"{r['events']:,} `bdev_io_submit` events (a string and three integers, as "
      "blktgt's I/O path records them) on one thread into a ring of the default size, "
      "so the ring wraps many times; then the same loop with the group disabled (one "
      "branch), then the bare timestamp read that every event pays: the TSC, "
      "which blktgt uses where the kernel's own clocksource is the TSC, and, in a "
      "second run per repetition, `CLOCK_MONOTONIC` through the vDSO (the fallback, "
      "`BLKTGT_TRACE_CLOCK=monotonic`). It runs "
      "in section 3's rotation, one run per repetition, so the attached USDT hit "
      "(section 3's stock site under a bpftrace count()) and the ring event are "
      "measured side by side and their ratio is paired within a repetition. Wall-clock "
      "and thread-CPU figures are both given; CPU time is not inflated by other "
      "processes taking the CPU.")
    w("")
    w("| what | value | goal |")
    w("|---|---|---|")
    w(f"| ns per event, enabled (wall clock) | {fmt(r['enabled_ns_per_event'], 1)} | "
      f"<= 50: {verdict_max(r['enabled_ns_per_event'], 50)} |")
    w(f"| ns per event, enabled (thread CPU time) | {fmt(r['enabled_cpu_ns'], 1)} | "
      f"<= 50: {verdict_max(r['enabled_cpu_ns'], 50)} |")
    w(f"| ns per event, group disabled (wall / CPU) | {fmt(r['disabled_ns_per_event'], 2)} / "
      f"{fmt(r['disabled_cpu_ns'], 2)} | |")
    w(f"| ns per timestamp read, {r['clock']} (wall / CPU) | {fmt(r['clock_ns'], 1)} / "
      f"{fmt(r['clock_cpu_ns'], 1)} | |")
    m = r.get("mono")
    if m:
        w(f"| ns per event, enabled, CLOCK_MONOTONIC timestamps (wall / CPU) | "
          f"{fmt(m['enabled_ns_per_event'], 1)} / {fmt(m['enabled_cpu_ns'], 1)} | |")
        w(f"| ns per timestamp read, CLOCK_MONOTONIC (wall / CPU) | "
          f"{fmt(m['clock_ns'], 1)} / {fmt(m['clock_cpu_ns'], 1)} | |")
    w(f"| attached USDT hit, stock 1-byte nop, ns (section 3, same run) | "
      f"{fmt(hs['per_hit'], 1)} | |")
    w(f"| **ring event / attached USDT hit, stock** (paired) | {fmt(r['vs_stock'])} | |")
    w(f"| ring event / attached USDT hit, 5-byte nop (paired) | {fmt(r['vs_nop5'])} | |")
    w("")
    f = r["fio"]
    if f:
        w("blktgt USDT=1 started with `-e all` (every tracepoint of every group "
          "recording into its ring, nothing attached) against the same build with "
          "tracing off, each its own server in section 1's rotation, under the same "
          "fio job. Events per I/O are counted from the ring file's counters (every "
          "ring's `written` plus the file's `lost`) around each run. Cost per event "
          "= (blktgt CPU ns per I/O with -e all - off, same repetition) / events per "
          "I/O; like section 2's CPU figures it carries the fio run's scheduling noise.")
        w("")
        w("| what | value | goal |")
        w("|---|---|---|")
        w(f"| **IOPS ratio -e all / tracing off** | {fmt(f['ratio'])} | >= 0.97: "
          f"{verdict(f['ratio'], 0.97)} |")
        w(f"| IOPS, -e all | {fmt(d['iops']['trace_all'], 0)} | |")
        w(f"| ring events per fio I/O | {fmt(f['events_per_io'], 3)} | |")
        w(f"| extra blktgt CPU ns per I/O | {fmt(f['extra_cpu'], 0)} | |")
        w(f"| extra CPU ns per ring event | {fmt(f['per_event'], 0)} | |")
    wl = r["wl"]
    if wl:
        if not f:
            w("| what | value | goal |")
            w("|---|---|---|")
        w(f"| workload_run (in process, section 2's table): throughput ratio -e all / off "
          f"| {fmt(wl['ratio'])} | |")
        w(f"| workload_run: ring events per I/O | {fmt(wl['events_per_io'], 3)} | |")
        w(f"| workload_run: extra ns per ring event | {fmt(wl['per_event'], 0)} | |")
    w("")
    lt = r["lttng"]
    if lt:
        w("### Its peer: LTTng-UST")
        w("")
        w(f"bench/lttngcost.c fires {lt['events']:,} LTTng-UST events on one thread, "
          "each with the payload of the ring's `bdev_io_submit` (owner, object and "
          "related ids, a 16-byte bdev name, type, length, offset: "
          "bench/lttngcost_tp.h), into a snapshot-mode session (a per-CPU buffer in "
          "overwrite mode, which wraps like the ring). The bench starts its own "
          "lttng-sessiond, as an ordinary user with LTTNG_HOME in a temporary "
          "directory, before the first run (so no registration waits out "
          "liblttng-ust's 3 s timeout), and stops it and its consumer daemon after "
          "(bench/lttngsession.py). One run with the event enabled and one with it "
          "disabled in the session, both in the ring's rotation above, so "
          "LTTng-UST / ring is paired within a repetition. "
          "tests/bench/test_bench_lttng.py checks that every event fired is in the "
          "snapshot and that nothing is left running.")
        w("")
        w("| what | value |")
        w("|---|---|")
        w(f"| ns per event, enabled (wall clock) | {fmt(lt['ns'], 1)} |")
        w(f"| ns per event, enabled (thread CPU time) | {fmt(lt['cpu_ns'], 1)} |")
        w(f"| ns per event, disabled in the session (wall / CPU) | "
          f"{fmt(lt['disabled_ns'], 2)} / {fmt(lt['disabled_cpu_ns'], 2)} |")
        w(f"| trace ring event, enabled (wall clock, above) | "
          f"{fmt(r['enabled_ns_per_event'], 1)} |")
        w(f"| **LTTng-UST event / ring event** (wall clock, paired) | {fmt(lt['vs_ring'], 2)} |")
        w(f"| LTTng-UST event / ring event (thread CPU time, paired) | "
          f"{fmt(lt['vs_ring_cpu'], 2)} |")
        w("")


NOP5_TEXT = """
## The 5-byte nop site (`make USDT_NOP5=1`) and the red zone

sys/sdt.h puts a 1-byte `nop` at each probe site; a uprobe there is an int3
trap. Linux 6.18 can instead rewrite a uprobe on a 5-byte nop
(`0f 1f 44 00 00`) into a `call` to a per-process trampoline
(`[uprobes-trampoline]` in /proc/PID/maps) after its first hit, which
avoids the trap. The table in section 3 gives the gain on this machine.

The hazard: that `call` pushes a return address below the user stack
pointer, and the trampoline saves registers there too. On x86-64 a leaf
function may keep locals in the 128 bytes below the stack pointer (the red
zone) without moving it. bench/redzone.c is such a leaf (`redzone_leaf`
stores four locals at negative offsets with no `sub %rsp`, checked by the
test from its disassembly), with a probe between writing and checking them.
With bpftrace counting the probe, its 5-byte nop build with the red zone
corrupts the locals on every call after the first (the first hit is the
int3 that optimizes the site); the stock 1-byte nop never does (int3 saves
state on the kernel stack); and the same 5-byte nop source compiled with
`-mno-red-zone` never does, while its site is optimized (the trampoline
mapping is present). tests/probes/test_nop5.py runs all three with a prime number
of calls and checks the bpftrace count, the corruption counts, and that
the trampoline really was used.

So the 5-byte nop is safe only when **every** file that can hold a probe
site, including a file that inlines a function holding one, is compiled
without a red zone. `make USDT_NOP5=1` does this for blktgt: probes/nop5/
sys/sdt.h shadows `<sys/sdt.h>` and redefines `_SDT_NOP` to `.nops 5`
(sys/sdt.h defines it unconditionally, so it cannot be set before the
include; `.nops 5` has neither commas nor `%`, which the header's
stringified asm template cannot take), and mk/nop5.mk adds it and
`-mno-red-zone` to the one compile rule every target/*.c goes through.
The test checks the built binary: 5-byte nops at every `.note.stapsdt`
site, and `-mno-red-zone` in the DWARF producer string of every
target/*.c compile unit. The cost of `-mno-red-zone` itself (a
`sub`/`add` of the stack pointer in leaf functions with stack locals) and
of the longer nop is in section 1's USDT_NOP5=1 / USDT=1 row; the gain
while tracing blktgt is in section 2's USDT_NOP5=1 rows.

Not covered, so not offered: code outside the build's compile rule (a
static library or a header-only user compiled elsewhere) that includes
the generated probe header. Such code must add `-Iprobes/nop5
-mno-red-zone` itself, or keep the stock 1-byte nop.
"""


def redzone_table(raw):
    rz = raw.get("redzone")
    if not rz:
        return ""
    L = ["", "Measured in this run (bench/redzone.c, traced by a bpftrace count()):", "",
         "| build of the leaf function | calls | bpftrace hits | corrupted calls | site optimized |",
         "|---|---|---|---|---|"]
    for v, label in (("stock", "stock 1-byte nop"),
                     ("nop5", "5-byte nop, -mno-red-zone (USDT_NOP5=1)"),
                     ("nop5-redzone", "5-byte nop, red zone allowed (unsafe)")):
        r = rz.get(v)
        if r:
            L.append(f"| {label} | {r['calls']:,} | {r['hits']:,} | **{r['corrupted']:,}** | "
                     f"{'yes' if r['trampoline'] == 1 else 'no'} |")
    return "\n".join(L) + "\n"


def write(out, raw):
    d = derive(raw)
    plot(out, raw, d)
    with open(os.path.join(out, "RESULTS.md"), "w") as f:
        f.write(markdown(raw, d))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(out, "raw", "results.json")
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        print(f"report.py: cannot read {path}: {e}", file=sys.stderr)
        return 1
    write(out, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
