# SPDX-License-Identifier: BSD-2-Clause
"""bench/stacks.py: section 8 of bench/run, the bpftrace headline rows for
each Debian stack's bpftrace side by side (bench/run --only stacks, make
bench-stacks).

The rows: the cost per hit of a bpftrace count() on bench/hitcost.c's
site (section 3) and what the wrapper's one window adds to it (section
9: the same count() in bench/window.bt through the stack's wrapper),
bt/iolat.bt's cost per hit on blktgt's own workload_run
(section 2), the time to first event of plain bpftrace and of the wrapper
(section 4), and bt/iolat_batch.bt's and bt/iolat.bt's throughput traced /
untraced at queue depths 1, 8 and 32 (section 7).  Each is measured by the
same code as there, given the bpftrace to run (bench/run's Bpftrace).

What differs between the columns is only the bpftrace (with the wrapper
built beside it).  The workload is the host's: one build of blktgt and
hitcost, run on the host, traced by every stack's bpftrace.  A chroot
stack's bpftrace runs in its userland: scripts/stack.sh holds the chroot
open (its mounts in a private namespace, the tree copied in, the wrapper
built there by its compiler, then a sleep), and each bpftrace or wrapper
run enters that namespace and root with nsenter, naming the traced
binary through /proc/PID/root, as the wrapper does for a container's
process.  The host's bpftrace is started through the same nsenter (into
the bench's own namespace), so every column pays the same launch.

Every configuration of every stack is in one rotation per repetition, as
in bench/run, so the stacks are interleaved and each cross-stack ratio
is paired within a repetition.
"""

import contextlib
import os
import signal
import subprocess

import batch  # bench/batch.py: section 7's configurations and measure()
from report import fmt, summary  # bench/report.py: one median/range summary

BEGIN = "<!-- section 8: bench/stacks.py; bench/run --only stacks rewrites it -->"
END = "<!-- end of section 8 -->"
HOST = "host"
# How a chroot stack says it is ready: its sleeper's PID follows.
READY = "probekit-bench: stack ready pid="
# Copying the tree in and building the wrapper there, on a loaded machine;
# waiting for another run's hold of the stack's lock (--wait) too.
STACK_TIMEOUT = 1800
# The wrapper and its helper, built in the chroot by its own compiler.
STACK_BUILD = "build/bin/probekit-bpftrace build/libexec/probekit/probekit-scan"
# Where stack.sh copies the tree in the chroot (scripts/stack.sh's WORK).
STACK_TREE = "/srv/probekit"
HITCOST = ("stock", "nop5")
# Why bpftrace 0.27's first event takes about ten times 0.17's: measured by
# hand (scratch scripts under strace and bash's time), not by this module,
# so it is dated; bpftrace's source (v0.24.0..v0.26.x) for what each step is.
STARTUP_NOTE = (
    "Why bpftrace 0.27's time to first event is about ten times 0.17's (measured by "
    "hand on 2026-11-26 at load average 1.5-2.8, the same three bpftraces, 7 runs each, "
    "median): the time is CPU, not waiting. `bpftrace -p PID -e 'usdt:...{ printf(...); "
    "exit(); }'` on a program that hits its probe every millisecond used 0.439 s of CPU "
    "(user + sys) with 0.27.1, 0.073 s with 0.23.2 and 0.055 s with 0.17 (0.737 / 0.396 "
    "/ 0.423 s to its exit, each with bpftrace's 100 ms poll before it ends); "
    "`BEGIN { exit(); }` alone used 0.288 / 0.074 / 0.054 s. On this machine under "
    "the bench's load that CPU waits for a core, which multiplies it into the times above. An `strace -f "
    "-tt` of one 0.27.1 run (0.83 s to the first event, strace included) shows where it "
    "goes: 0.07 s loading the binary and its libraries; 0.07 s running `clang-21 -Wp,-v "
    "-x c -fsyntax-only /dev/null` to learn the system include directories (bpftrace "
    "built with SYSTEM_INCLUDE_PATHS=auto); 0.18 s in six in-process libclang parses of "
    "the program's (empty) C definitions with the kernel headers; 0.11 s turning the "
    "kernel's whole BTF into a 2.8 MB vmlinux.h; 0.02 s compiling the standard "
    "library's stdlib/base.bpf.c, then 0.31 s compiling stdlib/usdt/usdt.bpf.c, which "
    "includes that whole vmlinux.h (clang -O2 -g of the same header alone: 0.25-0.29 s "
    "of CPU); 0.04 s linking and optimizing; 0.03 s loading 12 programs and attaching. "
    "bpftrace compiles its standard library's C sources at every start since 0.24 (0.25 "
    "added usdt.bpf.c and the vmlinux.h) and opened no cache of it (strace). No documented "
    "option or environment variable skips that without changing what a script sees: "
    "BPFTRACE_KERNEL_SOURCE and BPFTRACE_KERNEL_BUILD pointed at nothing changed no "
    "time measurably (`BEGIN { exit(); }` 0.41-0.44 s against 0.41-0.50 s), "
    "BPFTRACE_BTF would change the kernel types scripts see, and SYSTEM_INCLUDE_PATHS "
    "is fixed when bpftrace is built. So the wrapper passes bpftrace 0.27 nothing "
    "new; its own share is the wrapper's ratio row above.")


def nsenter(pid):
    """argv prefix entering pid's mount namespace, root and directory."""
    return ["nsenter", "-t", str(pid), "-m", "-r", "-w"]


class StackSession:
    """scripts/stack.sh NAME holding the chroot open: the tree copied in,
    the wrapper built, then a sleep in the chroot whose namespace and root
    each bpftrace enters.  Stopping it ends the sleep, and the namespace
    with its mounts ends with its last process (stack.sh's own cleanup)."""

    def __init__(self, run, root, name):
        self.run, self.root, self.name = run, root, name

    def start(self):
        cmd = (f"make -s -j2 O=build {STACK_BUILD} && "
               f"echo {READY}$$ && exec sleep 86400")
        self.proc = subprocess.Popen(
            [os.path.join(self.root, "scripts", "stack.sh"), "--wait", self.name, cmd],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.out = self.run.probekit.LineReader(self.proc.stdout)
        return self

    def stop(self):
        # stack.sh's unshare takes SIGTERM; its child, the inner script,
        # then kills what it started (scripts/stack.sh).
        self.run.stop(self.proc, signal.SIGTERM)

    def ready(self, build):
        """Wait for the chroot; its Bpftrace.  The traced blktgt's struct
        definitions are the host build's, read through this process's
        /proc/PID/root (the wrapper checks they were made from it)."""
        try:
            m = self.out.wait_for(READY + r"(\d+)$", timeout=STACK_TIMEOUT)
        except AssertionError:
            last = [x for x in self.out.lines if x.strip()][-1:] or ["no output"]
            self.run.die(f"stack {self.name}: scripts/stack.sh was not ready "
                         f"(exit status {self.proc.poll()}): {last[0]}")
        return stack_bpftrace(self.run, m.group(1), build)


def stack_bpftrace(run, pid, build, tree=STACK_TREE, wrapper=None):
    """The Bpftrace of the userland where process pid lives, with the tree
    copied to tree there and its wrapper built in tree/build (or wrapper).  The traced
    blktgt's struct definitions are the host build's, read through the
    bench's /proc/PID/root (the wrapper checks they were made from it)."""
    structs = os.path.join(build, "share", "probekit", "structs", "blktgt.bt")
    return run.Bpftrace(
        launcher=nsenter(pid) + ["env", f"PROBEKIT_STRUCTS=/proc/{os.getpid()}/root{structs}"],
        wrapper=wrapper or os.path.join(tree, "build", "bin", "probekit-bpftrace"),
        root=tree)


def first_line(run, argv):
    """The first line argv prints (on bt's side: argv from bt.launcher)."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=run.TIMEOUT)
    text = r.stdout.decode(errors="replace").strip()
    if r.returncode != 0 or not text:
        run.die(f"{' '.join(argv)} exited {r.returncode}: {text[-2000:]}")
    return text.splitlines()[0]


def bpftraces(run, root, build, stacks, stack):
    """{name: Bpftrace}: the host's first, then each stack's, entered on
    stack (an ExitStack).  Every chroot is started at once, so their
    copies and builds overlap; nothing is measured until all are ready."""
    sessions = []
    for name in stacks:
        s = StackSession(run, root, name).start()
        stack.callback(s.stop)
        sessions.append(s)
    bts = {HOST: run.Bpftrace(launcher=nsenter(os.getpid()))}
    for s in sessions:
        run.log(f"stacks: waiting for {s.name} (scripts/stack.sh: copy, build the wrapper)")
        bts[s.name] = s.ready(build)
    return bts


def measure(run, root, build, runs, tmp, stacks):
    """Raw samples of every row, for the host and each stack in stacks."""
    raw = {"stacks": [HOST, *stacks], "runs": runs}
    with contextlib.ExitStack() as es:
        bts = bpftraces(run, root, build, stacks, es)
        names = list(bts)
        raw["versions"] = {n: first_line(run, bts[n].argv("--version")).replace("bpftrace ", "")
                           for n in names}
        raw["debian"] = {n: first_line(run, [*bts[n].launcher, "cat", "/etc/debian_version"])
                         for n in names}
        run.log(f"stacks: bpftrace {raw['versions']} on Debian {raw['debian']}; the "
                "workload (blktgt, bench/hitcost.c) is the host's build, run on the host")

        # Section 3's cost per hit: the untraced loops once per repetition
        # (no bpftrace in them), each stack's traced ones beside them, and
        # section 9's: the same count() through each stack's wrapper.
        order = [f"{v}-untraced" for v in HITCOST] + [
            f"{v}-{how}:{n}" for n in names for v in HITCOST for how in ("traced", "window")]
        hc = {k: [] for k in order}
        rejected = []
        for k in run.rotated(order, runs, "stacks hitcost"):
            v, rest = k.split("-", 1)
            n = rest.split(":")[1] if ":" in rest else None
            binary = os.path.join(build, "bench", f"hitcost-{v}")
            hc[k].append(run.hitcost_sample(binary, n is not None, tmp, rejected,
                                            bts[n] if n else run.HOST_BPFTRACE,
                                            build if rest.startswith("window") else None))
        raw["hitcost"] = {"passes_untraced": run.HITCOST_UNTRACED,
                          "passes_traced": run.HITCOST_TRACED,
                          "samples": hc, "rejected": rejected}

        # Section 4's first event: plain bpftrace and the wrapper of every
        # stack in one rotation, then back-to-back pairs, every stack's
        # pair in each round.
        usdt1 = os.path.join(build, "bin", "blktgt")
        fe = {n: run.first_event_bt(build, usdt1, bts[n]) for n in names}
        keys = [(n, k) for n in names for k in ("bpftrace", "wrapper")]
        first = {f"{k}:{n}": [] for n, k in keys}
        pairs = {f"{k}:{n}": [] for n, k in keys}
        with run.first_event_target(usdt1, tmp, fe[HOST]["bpftrace"][1]) as t:
            for n in names:
                # A stack's first start reads its libraries from disk.
                run.time_to_first(*fe[n]["bpftrace"][1](t.pid))
            for n, k in run.rotated(keys, runs, "stacks first event",
                                    lambda x: f"{x[1]}, {x[0]}"):
                t.check_alive()
                first[f"{k}:{n}"].append(run.time_to_first(*fe[n][k][1](t.pid)))
            for r in range(3 * runs):
                for n in names[r % len(names):] + names[:r % len(names)]:
                    for k, ms in run.first_event_pair(
                            t, fe[n], r, f"{r + 1}/{3 * runs}, {n}").items():
                        pairs[f"{k}:{n}"].append(ms)
        raw["first_event"] = {"samples_ms": first, "pairs_ms": pairs}

        # Section 7's throughput: one server per stack and script, with
        # section 7's untraced one, all in its rotation.
        cf = {"untraced": batch.configs(root, build, run.PYTHON, run.HOST_BPFTRACE)["untraced"]}
        for n in names:
            c = batch.configs(root, build, run.PYTHON, bts[n])
            for k in ("bt-batch", "bt-per-io"):
                cf[f"{k}:{n}"] = (f"{c[k][0]}, bpftrace {raw['versions'][n]}",) + c[k][1:]
        raw["batch"] = batch.measure(run, root, build, runs, tmp, cf=cf, caps=(),
                                     records=False)
    raw["hits_per_io"] = run.workload_hits_per_io(build, tmp)
    return raw


# --- the report ------------------------------------------------------------------

def derive(raw):
    """{row: (digits, {stack: summary})} of every row of the table, in its
    order; a ratio to the host is None in the host's column."""
    names = raw["stacks"]
    hc = raw["hitcost"]["samples"]
    fs, ps = raw["first_event"]["samples_ms"], raw["first_event"]["pairs_ms"]
    b = raw["batch"]

    def cost(v, n, key="ns_per_pass"):
        return [t[key] - u[key] for t, u in zip(hc[f"{v}-traced:{n}"], hc[f"{v}-untraced"])]

    def window_cost(v, n):
        return [w["cpu_ns_per_pass"] - t["cpu_ns_per_pass"]
                for w, t in zip(hc[f"{v}-window:{n}"], hc[f"{v}-traced:{n}"])]

    def to_host(xs_of, n):
        """Paired ratio of stack n to the host, per repetition."""
        return None if n == HOST else summary(
            [x / h for x, h in zip(xs_of(n), xs_of(HOST))])
    rows = {}
    for v, what in (("stock", "stock 1-byte nop (int3)"), ("nop5", "5-byte nop, optimized")):
        rows[f"cost per hit of a count(), ns: {what}"] = (1, {
            n: summary(cost(v, n)) for n in names})
        rows[f"the same / bpftrace 0.17's (paired), {v}"] = (3, {
            n: to_host(lambda m, v=v: cost(v, m), n) for n in names})
        if f"{v}-window:{names[0]}" not in hc:
            continue            # raw data from before section 9
        rows[f"the wrapper's one window (section 9), ns a hit, CPU time: {what}"] = (1, {
            n: summary(window_cost(v, n)) for n in names})
        rows[f"the same, % of a plain hit (CPU time), {v}"] = (1, {
            n: summary([100 * x / y if y > 0 else None
                        for x, y in zip(window_cost(v, n), cost(v, n, "cpu_ns_per_pass"))])
            for n in names})
    rows["cost per hit under bt/iolat.bt via the wrapper, ns (workload_run qd 32, "
         f"{raw['hits_per_io']:.3f} hits per I/O)"] = (1, {
        n: summary(batch._paired(b, f"bt-per-io:{n}", 32, "ns_per_io",
                                 lambda m, u: (m - u) / raw["hits_per_io"]))
        for n in names})
    rows["time to first event, plain bpftrace -e, ms"] = (1, {
        n: summary(fs[f"bpftrace:{n}"]) for n in names})
    rows["the same / bpftrace 0.17's (paired)"] = (3, {
        n: to_host(lambda m: fs[f"bpftrace:{m}"], n) for n in names})
    rows["time to first event, wrapper + bpftrace, ms"] = (1, {
        n: summary(fs[f"wrapper:{n}"]) for n in names})
    rows["wrapper + bpftrace / plain bpftrace (back-to-back pairs)"] = (3, {
        n: summary([w / p for w, p in zip(ps[f"wrapper:{n}"], ps[f"bpftrace:{n}"])])
        for n in names})
    for script, key in (("bt/iolat_batch.bt", "bt-batch"), ("bt/iolat.bt", "bt-per-io")):
        for qd in batch.QDS:
            rows[f"{script} throughput traced / untraced, qd {qd}"] = (3, {
                n: summary(batch._paired(b, f"{key}:{n}", qd, "ns_per_io",
                                         lambda m, u: u / m)) for n in names})
    return rows


def render(raw):
    names = raw["stacks"]
    L = [BEGIN, "## 8. The bpftrace rows on each Debian stack", "",
         f"Generated by `make bench-stacks` (bench/run --only stacks, bench/stacks.py) on "
         f"{raw['date']}. The headline bpftrace rows of sections 2, 3, 4 and 7, "
         "measured by the same code with each stack's bpftrace: Debian 12's on the host, "
         "and Debian 13's and unstable's in their chroots (scripts/stack.sh), which also "
         "build the wrapper with their own compiler. The workload is the host's in every "
         "column: one build of blktgt and bench/hitcost.c, run on the host; a chroot's "
         "bpftrace enters the chroot's namespace and root with nsenter and names the "
         "traced binary through /proc/PID/root (the host's through the same nsenter, "
         "into its own namespace, so every column pays the same launch). Every "
         "configuration of every stack is in one rotation per repetition, so the stacks "
         "are interleaved and a ratio to bpftrace 0.17 is paired within a repetition. "
         f"{raw['runs']} repetition(s); each figure is **median** (min..max, n).", "",
         "What each row is: *cost per hit of a count()*: section 3, traced minus "
         "untraced ns per pass of bench/hitcost.c's probe site under `bpftrace -e "
         "'usdt:...:hitcost:hit { @hits = count(); }'` (the count checked to equal "
         "the passes). *The wrapper's one window*: section 9, the same count() in "
         "bench/window.bt through that stack's probekit-bpftrace, minus the plain one, "
         "by the loop's thread CPU time. *Cost per hit under bt/iolat.bt*: section 2's "
         "in-process row, workload_run's added ns per I/O with bt/iolat.bt attached through the "
         "wrapper, over the hits per I/O (a host bpftrace count). *Time to first "
         "event*: section 4, from the tool's start to its line for the first "
         "`io__submit` of a blktgt under a steady 2000 IOPS fio load; the wrapper "
         "ratio from three times as many back-to-back pairs in alternating order. "
         "*Throughput traced / untraced*: section 7, workload_run's time per I/O "
         "untraced / traced, paired.", "",
         "| row | " + " | ".join(
             f"bpftrace {raw['versions'][n]} (Debian {raw['debian'][n]}, "
             f"{'the host' if n == HOST else n + ' chroot'})"
             for n in names) + " |",
         "|---|" + "---|" * len(names)]
    for row, (digits, by) in derive(raw).items():
        L.append(f"| {row} | " + " | ".join(
            "-" if by[n] is None and n == HOST else fmt(by[n], digits)
            for n in names) + " |")
    rej = raw["hitcost"]["rejected"]
    if rej:
        L += ["", f"{len(rej)} hitcost sample(s) rejected and repeated: bpftrace counted "
              "fewer hits than passes (raw/stacks.json has them)."]
    L += ["", STARTUP_NOTE]
    L += ["", f"Load average (1/5/15 min) at the start: "
          f"{'/'.join(map(str, raw['loadavg_start']))}, at the end: "
          f"{'/'.join(map(str, raw['loadavg_end']))} (2 vCPUs; other work shared "
          "them, which the paired ratios see less than the absolute times). "
          "Raw samples: [raw/stacks.json](raw/stacks.json).", "", END]
    return "\n".join(L) + "\n"
