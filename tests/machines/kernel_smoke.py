# SPDX-License-Identifier: BSD-2-Clause
"""The kernel smoke suite: run INSIDE the emulated x86-64 machine
(scripts/kernel.sh smoke boots a Debian release's own kernel;
tests/machines/kernel_init.sh runs this), on this machine's build (BUILD) and
userland (Debian 12's bpftrace, BCC and libbpf), against that kernel.

Not a test_*.py file, so the host's suite never collects it.  It is made
of the host suite's own tests, one or two of each reader family, taken by
name, so that a kernel is held to exactly what this one is: every item
drives a known workload and asserts exact counts.

- the wrapper with a bt script (bt/iolat.bt, and a script of its own on a
  PID), and two probes counted over one window by a trace that ends
  while the workload runs;
- BCC tools (usdtcount; iolatency and iosize, reading batches);
- each libbpf tool: iolatency and iosize (batch and per-I/O), funclat,
  qdepth, rpclat, nbdtime, usdtlat, usdtcount, and the exporter (its
  --blktgt series, --pair and --count);
- what needs bpf_loop() (Linux 5.17), or BCC's batch reader the atomic
  exchange (5.12): said in one line where the kernel lacks it, and read
  per I/O then, exactly;
- usdtlat and usdtcount on a program of their own (the quickstart);
- the libbpf tools' privilege lines (iosize's USDT, funclat's uprobe):
  what a user without privilege, with CAP_BPF and CAP_PERFMON, and with
  CAP_SYS_ADMIN, is told or gets;
- the batch readers (test_batch) of each kind.

Software emulation is slow (a BCC tool takes tens of seconds to start),
so every wait is for a readiness line, bounded by PROBEKIT_TEST_TIMEOUT.
"""

import json
import os
import re
import socket
import sys

import pytest

import histtools
import probekit

# The host suite's modules whose tests run here again, from their folders.
sys.path[:0] = [os.path.join(probekit.ROOT, "tests", d)
                for d in ("twins", "libbpf")]
import test_batch  # noqa: E402
from histtools import bdevs, nobody_target, usdt_multi  # noqa: F401 (fixtures)
from histtools import Gen, json_objects, workload
from test_batch import four  # noqa: F401 (a fixture)

import arm64_smoke
import test_nbdtime
from test_nbdtime import slow  # noqa: F401 (a fixture)

# The host suite's tests, collected here under their own names.
from arm64_smoke import (  # noqa: F401
    Quickstart, test_iolatency, test_usdtcount_blktgt,
    test_wrapper_iolat, test_wrapper_pid_script)
from test_exporter import test_pair_by_argument_and_count  # noqa: F401
from exporter_client import exporter  # noqa: F401
import test_libbpf
from test_libbpf import (test_funclat_exact, test_iosize_exact,
                         test_rpclat_exact)
import test_twins

# A BCC tool takes a minute or more to start here (its compile, emulated):
# BCC reads with usdtcount above and iolatency's batch below; the rest,
# the same tests, with libbpf alone.


def test_qdepth_exact(bpf, bdevs):  # noqa: F811
    """test_twins.py's, with the libbpf form alone."""
    test_twins.test_qdepth_exact(bpf, bdevs, "libbpf")


# The privilege lines of a tool of each attach kind: USDT through libbpf
# (iosize) and a uprobe (funclat).
PRIV_TOOLS = ["iosize", "funclat"]


@pytest.mark.parametrize("tool", PRIV_TOOLS)
def test_no_privilege_own_process(bpf, nobody_target, usdt_multi, tool):  # noqa: F811
    test_libbpf.test_no_privilege_own_process(bpf, nobody_target, usdt_multi, tool)


@pytest.mark.parametrize("tool", PRIV_TOOLS)
def test_bpf_perfmon_are_not_enough(bpf, nobody_target, usdt_multi, tool):  # noqa: F811
    test_libbpf.test_bpf_perfmon_are_not_enough(bpf, nobody_target, usdt_multi, tool)


@pytest.mark.parametrize("tool", PRIV_TOOLS)
def test_sys_admin_is_enough(bpf, nobody_target, tool):  # noqa: F811
    test_libbpf.test_sys_admin_is_enough(bpf, nobody_target, tool)


def test_usdtlat_blktgt(bdevs):  # noqa: F811
    arm64_smoke.test_usdtlat_blktgt(bdevs, "libbpf")


def test_usdtcount_quickstart():
    arm64_smoke.test_usdtcount_quickstart("libbpf")


def test_nbdtime_per_command(bpf, slow):  # noqa: F811
    test_nbdtime.test_exact_counts_per_command(bpf, slow, "libbpf")


Q = 29          # quickstart requests
N = arm64_smoke.N


# --- what the kernel has ----------------------------------------------------------

@pytest.fixture(scope="module")
def bpf_loop(kernel_lacks):
    """Whether the kernel has the bpf_loop() helper (Linux 5.17), as
    bpftool finds out (a load of a program calling it), not as the tools
    do: they are held to it."""
    return "bpf_loop" not in kernel_lacks


def lacking():
    """The helpers, of those Linux added late, that this kernel lacks for
    the program type the tools call each from, as bpftool finds out."""
    return {f for f, (_, t) in RECENT.items()
            if f not in histtools.kernel_helpers(t)}


# The helpers Linux added late, in the order a tool names them: the
# release that brought each, and the program type the tools call it from
# (bpftool's name; a uprobe's is kprobe): the pair tools' reclaim runs in
# their sched_process_exit raw tracepoint, the rest in uprobes.  Asked
# for that type alone: 6.1 has bpf_get_attach_cookie() for uprobes but
# not for raw tracepoints (6.10), and a check of both held usdtcount to a
# refusal there while it traced.  And what each libbpf tool's programs
# call (written out here, not read from the
# tools, so that a tool that claims a wrong need fails).  iolatency and
# iosize read batches with bpf_loop() where the kernel has it, else as
# --per-io does (test_batch_needs_bpf_loop); the exporter's --blktgt
# series need it, and say so (test_exporter).
RECENT = {"bpf_for_each_map_elem": ("5.13", "raw_tracepoint"),
          "bpf_get_attach_cookie": ("5.15", "kprobe"),
          "bpf_loop": ("5.17", "kprobe")}
NEEDS = {"iolatency": {"bpf_for_each_map_elem"}, "iosize": set(),
         "funclat": set(), "qdepth": {"bpf_for_each_map_elem"},
         "rpclat": {"bpf_for_each_map_elem"},
         "nbdtime": {"bpf_for_each_map_elem"},
         "usdtlat": {"bpf_for_each_map_elem", "bpf_get_attach_cookie"},
         "usdtcount": {"bpf_get_attach_cookie"},
         "exporter": {"bpf_for_each_map_elem", "bpf_get_attach_cookie"}}
# How each is run for its refusal: the arguments after -p PID.
REFUSAL_ARGS = {"iolatency": ["--per-io"],
                "usdtlat": ["blktgt:io__submit", "blktgt:io__done"],
                "usdtcount": ["blktgt:io__*"],
                "exporter": ["--listen", "127.0.0.1:0", "--pair",
                             "io=blktgt:io__submit,blktgt:io__done,arg1",
                             "--count", "c=blktgt:io__*"]}
# The libbpf tool each item of this suite runs, by name.
ITEM_TOOL = {"test_iolatency": "iolatency", "test_iosize_exact": "iosize",
             "test_funclat_exact": "funclat", "test_qdepth_exact": "qdepth",
             "test_rpclat_exact": "rpclat",
             "test_nbdtime_per_command": "nbdtime",
             "test_usdtlat_blktgt": "usdtlat",
             "test_usdtlat_quickstart": "usdtlat",
             "test_usdtcount_quickstart": "usdtcount",
             "test_pair_by_argument_and_count": "exporter"}


def tool_of(item):
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    if params.get("kind", "libbpf") != "libbpf":
        return None
    if item.originalname == "test_no_privilege_own_process":
        return None     # refused for its privilege, before any load
    if "tool" in params:
        return params["tool"]
    reader = params.get("reader", "")
    if reader.startswith("libbpf-"):
        return reader.split("-")[1]
    if item.originalname == "test_usdtcount_blktgt":
        return "usdtcount"
    return ITEM_TOOL.get(item.originalname)


@pytest.fixture(scope="module")
def kernel_lacks():
    return lacking()


@pytest.fixture(autouse=True)
def tool_can_load(request, kernel_lacks, blktgt_bin, tmp_path):
    """Where this kernel lacks a helper that the item's libbpf tool needs,
    the tool says so in one line, naming it and its release (held here to
    the exact line, and the helper to bpftool's finding), and exits 1;
    the item is then an expected failure (xfail: a skip fails a CI=true
    run) with that line as its reason: the BCC and bt/ readers above
    count on such a kernel."""
    tool = tool_of(request.node)
    missing = [f for f in RECENT if f in NEEDS.get(tool, ()) and f in kernel_lacks]
    if not missing:
        return
    (tmp_path / "refusal").mkdir()
    t = probekit.Target(blktgt_bin, tmp_path / "refusal").start()
    try:
        rc, lines = histtools.run(
            [os.path.join(arm64_smoke.BIN, f"probekit-{tool}"), "-p",
             str(t.pid), *REFUSAL_ARGS.get(tool, [])])
    finally:
        t.stop()
    lacks = " and ".join(f"{f}() (Linux {RECENT[f][0]})" for f in missing)
    want = (f"probekit-{tool}: cannot load BPF programs: this kernel lacks "
            f"{lacks}; the BCC tools (-bcc) and the bt/ scripts do without")
    assert (rc, lines) == (1, [want])
    pytest.xfail(want)


# What an io__batch reader says where the kernel cannot load its batch
# program: libbpf's need bpf_loop() (5.17); BCC's walk is a bounded loop,
# but both claim a CPU's batch buffer with an atomic exchange (BPF_XCHG,
# 5.12), which 5.10 refused with EINVAL.  No Debian kernel has the
# exchange without bpf_loop(), so bpftool's answer for bpf_loop() is the
# truth each line is held to on these three.
BATCH_FALLBACK = {
    "libbpf": "probekit-{tool}: kernel lacks bpf_loop() (5.17): reading as --per-io does",
    "bcc": "probekit-{tool}-bcc: kernel lacks BPF atomic exchange (Linux 5.12): "
           "reading as --per-io does"}


@pytest.mark.parametrize("kind,tool", [("libbpf", "iolatency"), ("libbpf", "iosize"),
                                       ("bcc", "iosize")])
def test_batch_needs_bpf_loop(bdevs, bpf_loop, kind, tool):
    """Where the kernel cannot load their batch program, iolatency and
    iosize say so in one line and read as --per-io does (the test_batch
    items count them exactly); elsewhere they read io__batch, saying
    nothing."""
    t = histtools.Tool(kind, tool, bdevs.pid, "-j").start()
    workload(bdevs, "Malloc0", "read", 4096, 4, N)
    lines = t.stop()
    said = BATCH_FALLBACK[kind].format(tool=tool)
    assert (said in lines) == (not bpf_loop), lines
    (obj,) = json_objects(lines)
    assert sum(h["total"] for h in obj["histograms"]) == N, obj


def test_exporter(bdevs, bpf_loop):  # noqa: F811
    """--blktgt's series (test_exporter), or, without bpf_loop(), one line
    that says what it needs and what works instead (which
    test_pair_by_argument_and_count runs)."""
    if bpf_loop:
        arm64_smoke.test_exporter(bdevs)
        return
    rc, lines = histtools.run([os.path.join(arm64_smoke.BIN, "probekit-exporter"),
                               "-p", str(bdevs.pid), "--listen", "127.0.0.1:0"])
    assert (rc, lines) == (1, [
        "probekit-exporter: kernel lacks bpf_loop() (5.17), which --blktgt's "
        "I/O series need; --pair and --count do not use it"])


def test_usdtlat_quickstart():
    q = Quickstart()
    try:
        t = Gen("libbpf", "usdtlat", "-p", q.pid, "quickstart:request__start",
                "quickstart:request__done", "-k", "arg1", "-j").start()
        q.run(Q)
        (obj,) = json_objects(t.stop())
        assert [h["total"] for h in obj["histograms"]] == [Q], obj
    finally:
        q.stop()


# One reader of each kind and mode over test_batch's four-reactor
# workload (every reader there is the same test; these are its families).
BATCH_READERS = ["libbpf-iolatency-batch", "libbpf-iosize-batch",
                 "libbpf-iosize-per-io", "bcc-iolatency-batch",
                 "iolat_batch.bt"]


@pytest.mark.parametrize("reader", BATCH_READERS)
def test_batch_exact_counts(bpf, four, tmp_path, bpf_loop, reader):  # noqa: F811
    if reader.endswith("-batch") and reader[:reader.index("-")] in BATCH_FALLBACK \
            and not bpf_loop:
        # Its semaphores are per-I/O ones then: test_exact_counts would
        # hold it to io__batch's.
        pytest.xfail("kernel cannot load the batch program: the reader reads "
                     "as --per-io does (test_batch_needs_bpf_loop)")
    test_batch.test_exact_counts(bpf, four, tmp_path, reader)


# --- two probes, one window ------------------------------------------------------

QD = 4


def start_long_workload(target, bdev):
    """workload_run for an hour: it answers only when the job ends, so the
    request is sent and its reply left unread (the target's shutdown ends
    it)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(target.rpc_sock)
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "workload_run",
                          "params": {"bdev": bdev, "pattern": "randread",
                                     "io_size": 4096, "queue_depth": QD,
                                     "seconds": 3600}}).encode())
    return s


def test_wrapper_two_probes_one_window(bdevs, tmp_path):
    """A trace through the wrapper that counts io__submit and io__done
    and ends while the workload runs: both count over one window, so
    they differ by at most the I/Os in flight at its two ends (QD each
    way).  bpftrace detaching one probe at a time opened and closed the
    two windows hundreds of ms apart (tens of thousands of I/Os here)."""
    script = tmp_path / "window.bt"
    script.write_text("usdt:__EXE__:blktgt:io__submit { @s = count(); }\n"
                      "usdt:__EXE__:blktgt:io__done { @d = count(); }\n")
    t = probekit.Trace(bdevs.pid, [str(script)]).start()
    s = start_long_workload(bdevs, "Malloc0")
    try:
        base = bdevs.rpc("target_stats")["io_submitted"]
        probekit.wait_until(
            "the workload's I/O",
            lambda: bdevs.rpc("target_stats")["io_submitted"] > base + 1009)
        lines = t.stop()
    finally:
        s.close()
    got = {m.group(1): int(m.group(2)) for ln in lines
           for m in [re.match(r"^@([sd]): (\d+)$", ln)] if m}
    assert set(got) == {"s", "d"} and got["s"] > 1009, lines
    assert abs(got["s"] - got["d"]) <= QD, got
