# SPDX-License-Identifier: BSD-2-Clause
"""The arm64 smoke suite: run INSIDE the emulated arm64 machine
(scripts/arm64.sh smoke boots it; tests/machines/arm64_init.sh runs this), on an
arm64 build (BUILD), with Debian's arm64 bpftrace, BCC and kernel.

Not a test_*.py file, so the host's suite never collects it.  Every item
drives a known workload on blktgt or the quickstart and asserts exact
counts; the notes are held to what binutils' readelf, on the host, read
from the same binaries ($PROBEKIT_ARM64_EXPECT, written by arm64.sh).
Software emulation is slow (a BCC tool takes tens of seconds to start),
so the set is small and every wait is for a readiness line, bounded by
PROBEKIT_TEST_TIMEOUT.
"""

import json
import os
import re
import signal
import subprocess
import time

import pytest

import histtools
import probekit
from histtools import bdevs  # noqa: F401 (a fixture)
from histtools import Gen, json_objects, usdtcount_counts, workload

BIN = os.path.join(probekit.BUILD, "bin")
QUICKSTART = os.path.join(probekit.BUILD, "quickstart", "quickstart")
QUICKSTART_DIR = os.path.join(probekit.ROOT, "examples", "quickstart")
OUT = os.environ.get("PROBEKIT_VM_OUT", "/srv/out")
N = 23          # reads of the blktgt workload
R = 11          # RPCs besides the workload's own
Q = 29          # quickstart requests


def expect():
    with open(os.environ["PROBEKIT_ARM64_EXPECT"]) as f:
        return json.load(f)


def listed(path):
    """probekit-list's view of path: {probe: {"sites", "semaphore",
    "args": [operand...], "readable": [(bpftrace, libbpf)...]}}."""
    p = subprocess.run([os.path.join(BIN, "probekit-list"), path],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr
    out, cur = {}, None
    for ln in p.stdout.splitlines():
        m = re.match(r"^  (\S+:\S+)  (\d+) sites?  semaphore: (\w+)$", ln)
        if m:
            cur = out[m.group(1)] = {"sites": int(m.group(2)),
                                     "semaphore": m.group(3) == "yes",
                                     "args": [], "readable": []}
            continue
        m = re.match(r"^      arg\d+/arg\d+  (.*?)  bpftrace: (\w+)  libbpf: (\w+)", ln)
        if m and cur is not None:
            cur["args"].append(m.group(1))
            cur["readable"].append((m.group(2), m.group(3)))
    return out


# --- probekit-list: probes, operands, semaphores, against readelf ------------

@pytest.mark.parametrize("what", ["blktgt", "quickstart"])
def test_list(what):
    path = os.path.join(BIN, "blktgt") if what == "blktgt" else QUICKSTART
    want = expect()[what]
    got = listed(path)
    assert sorted(got) == sorted(want), (sorted(got), sorted(want))
    for probe, w in want.items():
        g = got[probe]
        # probekit-list shows one line per argument: the first site's
        # operand, and how many other operands the other sites have.
        args = []
        for ops in zip(*w["args"]):
            distinct = list(dict.fromkeys(ops))
            more = len(distinct) - 1
            args.append(distinct[0] + (f" (+{more} other operand"
                                       f"{'s' if more > 1 else ''})" if more else ""))
        assert (g["sites"], g["semaphore"], g["args"]) == \
            (w["sites"], w["semaphore"], args), (probe, g, w)
        # Every operand GCC gave these sites is a register or a register
        # plus an offset: both readers take it.
        assert set(g["readable"]) <= {("yes", "yes")}, (probe, g)


# --- the generic tools, libbpf and BCC ---------------------------------------

@pytest.mark.parametrize("kind", histtools.KINDS)
def test_usdtcount_blktgt(bdevs, kind):
    t0 = time.monotonic()
    t = Gen(kind, "usdtcount", "-p", bdevs.pid, "blktgt:io__[sd]*",
            "rpc__request").start()
    # Recorded: how long one tool of each kind takes to start tracing
    # here (to its "Hit Ctrl-C to end." line), what the suite's time is
    # made of.
    with open(os.path.join(OUT, "timings"), "a") as f:
        f.write(f"{kind}-start {time.monotonic() - t0:.1f}\n")
    workload(bdevs, "Malloc0", "read", 4096, 4, N)
    for _ in range(R):
        bdevs.rpc("bdev_list")
    assert usdtcount_counts(t.stop()) == {"blktgt:io__submit": N, "blktgt:io__done": N,
                                "blktgt:rpc__request": R + 1}


@pytest.mark.parametrize("kind", histtools.KINDS)
def test_usdtlat_blktgt(bdevs, kind):
    t = Gen(kind, "usdtlat", "-p", bdevs.pid, "blktgt:io__submit",
            "blktgt:io__done", "-k", "arg1", "-j").start()
    workload(bdevs, "Malloc0", "randrw", 4096, 4, N)
    (obj,) = json_objects(t.stop())
    assert [h["total"] for h in obj["histograms"]] == [N], obj


class Quickstart:
    def __init__(self):
        self.proc = subprocess.Popen([QUICKSTART], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.out = probekit.LineReader(self.proc.stdout)
        self.pid = int(self.out.wait_for(r"quickstart: pid (\d+)").group(1))

    def run(self, n):
        """n requests; return on this call's own "done n" (a line read
        after the command was sent, not an earlier call's)."""
        seen = len(self.out.lines)
        self.proc.stdin.write(b"%d\n" % n)
        self.proc.stdin.flush()
        self.out.wait_until(lambda ls: f"done {n}" in ls[seen:])

    def stop(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=probekit.TIMEOUT) == 0


@pytest.mark.parametrize("kind", histtools.KINDS)
def test_usdtcount_quickstart(kind):
    q = Quickstart()
    try:
        # Not quickstart:*: how many request__batch hits Q requests
        # make depends on the batch's flush policy, not on Q.
        t = Gen(kind, "usdtcount", "-p", q.pid, "quickstart:request__start",
                "quickstart:request__done").start()
        q.run(Q)
        assert usdtcount_counts(t.stop()) == {"quickstart:request__start": Q,
                                    "quickstart:request__done": Q}
    finally:
        q.stop()


# --- the wrapper ---------------------------------------------------------------

def bt_hist(lines, name):
    """The total count of one bpftrace histogram, @name: (its buckets)."""
    n, inside = 0, False
    for ln in lines:
        if ln.startswith("@"):
            # bpftrace 0.17 ends a histogram's name line with ": ".
            inside = ln.rstrip().rstrip(":") == name
            continue
        m = re.match(r"^[\[(].*?[\])]\s+(\d+) \|", ln)
        if inside and m:
            n += int(m.group(1))
    return n


def test_wrapper_iolat(bdevs):
    t = probekit.Trace(bdevs.pid, [os.path.join(probekit.ROOT, "bt", "iolat.bt")])
    t.start(ready=r"Hit Ctrl-C to end\.")
    workload(bdevs, "Malloc0", "read", 4096, 4, N)
    lines = t.stop()
    assert bt_hist(lines, "@iolat_us[Malloc0, read]") == N, "\n".join(lines)


def test_wrapper_pid_script(target, tmp_path):
    script = tmp_path / "pid.bt"
    script.write_text('BEGIN { printf("traced __PID__ ready\\n"); }\n'
                      "usdt:__EXE__:blktgt:rpc__request /pid == __PID__/ "
                      "{ @rpcs = count(); }\n")
    t = probekit.Trace(target.pid, [str(script)])
    t.start(ready=rf"traced {target.pid} ready")
    for _ in range(R):
        target.rpc("bdev_list")
    lines = t.stop()
    assert f"@rpcs: {R}" in lines, lines


# --- iolatency, batch and per-I/O; the exporter -------------------------------

@pytest.mark.parametrize("mode", [(), ("--per-io",)], ids=["batch", "per-io"])
def test_iolatency(bdevs, mode):
    t = histtools.Tool("libbpf", "iolatency", bdevs.pid, "-j", *mode).start()
    workload(bdevs, "Malloc0", "read", 4096, 4, N)
    workload(bdevs, "Malloc1", "write", 512, 2, Q)
    (obj,) = json_objects(t.stop())
    assert sum(h["total"] for h in obj["histograms"]) == N + Q, obj


def test_exporter(bdevs):
    import http.client
    p = subprocess.Popen([os.path.join(BIN, "probekit-exporter"), "-p",
                          str(bdevs.pid), "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = probekit.LineReader(p.stdout)
    try:
        port = int(out.wait_for(r"at http://127\.0\.0\.1:(\d+)/metrics\.\.\. "
                                r"Hit Ctrl-C to end\.").group(1))
        workload(bdevs, "Malloc0", "read", 4096, 4, N)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=probekit.TIMEOUT)
        c.request("GET", "/metrics")
        r = c.getresponse()
        text = r.read().decode()
        assert r.status == 200, text
    finally:
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=probekit.TIMEOUT) == 0, out.drain(5)
    n = sum(float(ln.split()[-1]) for ln in text.splitlines()
            if ln.startswith("probekit_io_latency_seconds_count"))
    assert n == N, text


# --- probekit-check on the arm64 binaries ---------------------------------------

def test_check():
    lint = os.environ["PROBEKIT_ARM64_LINT"].split()
    for cmd in ([os.path.join(BIN, "probekit-check"), "--binary",
                 os.path.join(BIN, "blktgt"), "--catalog",
                 os.path.join(probekit.ROOT, "probes", "blktgt.d"),
                 *[os.path.join(probekit.ROOT, f) for f in lint]],
                [os.path.join(BIN, "probekit-check"), "--binary", QUICKSTART,
                 "--catalog", os.path.join(QUICKSTART_DIR, "quickstart.d"),
                 os.path.join(QUICKSTART_DIR, "bt", "requests.bt")]):
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=probekit.TIMEOUT)
        assert p.returncode == 0, p.stdout + p.stderr


# --- a core for the gdb helpers (read on the host, by gdb-multiarch) ------------

def test_core_for_gdb(bdevs):
    """blktgt with two malloc bdevs, aborted: its core goes to OUT, where
    scripts/arm64.sh reads it with the gdb helpers after the machine
    stops."""
    bdevs.rpc("bdev_null_create", name="Null0", size_mb=8, block_size=512)
    bdevs.proc.send_signal(signal.SIGABRT)
    assert bdevs.proc.wait(timeout=probekit.TIMEOUT) == -signal.SIGABRT
    bdevs.remove_trace_file()
    cores = [f for f in os.listdir(OUT) if f.startswith("core.")]
    assert cores == [f"core.{bdevs.pid}"], cores
    bdevs.proc = None
