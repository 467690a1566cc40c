# SPDX-License-Identifier: BSD-2-Clause
"""bcc/ tools against a live blktgt.

Every test drives blktgt's built-in workload (workload_run with count=N, N
prime) or a known number of RPCs, so each histogram's counts are exact.  A
tool is started and the test waits for its "Hit Ctrl-C to end." line, which
the tools print only after their BPF program is loaded and attached; then
the workload runs, and SIGINT makes the tool print its final histograms.
"""

import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import histtools
import probekit
from histtools import bdevs  # noqa: F401 (a fixture)
from histtools import (TOOLS, by_key, json_objects, nonzero, one_error_line,
                       parse, run_as_nobody, total, unused_pid, workload)
from semaphores import Semaphores

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("setpriv", "py:bcc", "py:elftools")


class Tool(histtools.Tool):
    """A bcc/ tool attached to a PID; its output must also be tidy (no
    Traceback, text under 80 columns: the BCC tool conventions)."""

    def __init__(self, name, pid, *args, env=None):
        super().__init__("bcc", name, pid, *args, env=env, tidy=True)


def run_tool(name, pid, *args, env=None):
    """Run a tool to completion (for errors); returns (rc, output lines)."""
    return histtools.run_tool("bcc", name, "-p", pid, *args, env=env)


# --- --json beside the text --------------------------------------------------

def as_text(obj):
    """A --json interval in parse()'s form, to compare with the text."""
    out = []
    for x in obj["histograms"]:
        h = {"key": x["key"], "unit": x["unit"], "scale": x["scale"],
             "rows": [(b["low"], b["high"] if x["scale"] == "log2" else None,
                       b["count"]) for b in x["buckets"]]}
        if "negative" in x:
            h["negative"] = x["negative"]
        out.append(h)
    return out


# --- iosize -------------------------------------------------------------------

def test_iosize_per_bdev_and_type(bpf, bdevs):
    t = Tool("iosize", bdevs.pid, "-BO").start()
    workload(bdevs, "Malloc0", "randread", 4096, 4, 23)
    workload(bdevs, "Malloc1", "write", 65536, 2, 37)
    hists = by_key(parse(t.stop()), "bdev", "type")
    assert set(hists) == {("Malloc0", "read"), ("Malloc1", "write")}
    assert nonzero(hists["Malloc0", "read"]) == {(4096, 8191): 23}
    assert nonzero(hists["Malloc1", "write"]) == {(65536, 131071): 37}
    assert all(h["unit"] == "bytes" and h["scale"] == "log2"
               for h in hists.values())


def test_iosize_all_and_json(bpf, bdevs):
    text = Tool("iosize", bdevs.pid).start()
    js = Tool("iosize", bdevs.pid, "-B", "--json").start()
    workload(bdevs, "Malloc0", "randread", 4096, 4, 23)
    workload(bdevs, "Malloc1", "randwrite", 512, 8, 97)
    (h,) = parse(text.stop())
    assert h["key"] == {}
    assert nonzero(h) == {(4096, 8191): 23, (512, 1023): 97}
    (obj,) = json_objects(js.stop())
    assert obj["tool"] == "iosize" and obj["pid"] == bdevs.pid
    got = {(x["key"]["bdev"], b["low"], b["high"]): b["count"]
           for x in obj["histograms"] for b in x["buckets"] if b["count"]}
    assert got == {("Malloc0", 4096, 8191): 23, ("Malloc1", 512, 1023): 97}
    for x in obj["histograms"]:
        assert x["name"] == "size" and x["unit"] == "bytes"
        assert x["total"] == sum(b["count"] for b in x["buckets"])


def test_iosize_json_is_the_text(bpf, bdevs):
    text = Tool("iosize", bdevs.pid, "-BO").start()
    js = Tool("iosize", bdevs.pid, "-BO", "-j").start()
    workload(bdevs, "Malloc0", "randrw", 4096, 4, 23)
    workload(bdevs, "Malloc1", "read", 131072, 2, 11)
    hists = parse(text.stop())
    (obj,) = json_objects(js.stop())
    assert as_text(obj) == hists and len(hists) >= 2


def test_with_bpftrace_on_the_same_probes(bpf, bdevs):
    """bcc/ tools and bpftrace trace io__submit and bdev_execute of one
    blktgt at once.  The kernel refuses a second uprobe at one address with
    another semaphore offset, so the tools must register theirs as bpftrace
    does."""
    proc, out = probekit.bpftrace_program(
        bdevs.pid, 'BEGIN { printf("READY\\n"); } '
        'usdt::blktgt:io__submit { @submits = count(); } '
        f'uprobe:{bdevs.binary}:bdev_execute {{ @calls = count(); }}')
    try:
        size = Tool("iosize", bdevs.pid, "--per-io").start()   # io__submit
        func = Tool("funclat", bdevs.pid).start()
        workload(bdevs, "Malloc0", "read", 4096, 2, 23)
        (h,) = parse(size.stop())
        arg, _, _ = parse(func.stop())
    finally:
        lines = probekit.stop_bpftrace(proc, out)
    assert nonzero(h) == {(4096, 8191): 23}
    assert nonzero(arg) == {(4096, 8191): 23}
    assert "@submits: 23" in lines and "@calls: 23" in lines, lines


# --- funclat -----------------------------------------------------------------------

def test_funclat_counts(bpf, bdevs):
    text = Tool("funclat", bdevs.pid).start()
    js = Tool("funclat", bdevs.pid, "-u", "--json").start()
    workload(bdevs, "Malloc0", "randread", 4096, 4, 23)
    arg, ret, lat = parse(text.stop())
    assert arg["unit"] == "arg4" and nonzero(arg) == {(4096, 8191): 23}
    assert ret["unit"] == "retval" and nonzero(ret) == {(4096, 8191): 23}
    assert ret["negative"] == 0
    assert lat["unit"] == "nsecs" and total(lat) == 23
    (obj,) = json_objects(js.stop())
    names = [x["name"] for x in obj["histograms"]]
    assert names == ["arg", "retval", "latency"]
    assert [x["total"] for x in obj["histograms"]] == [23, 23, 23]
    assert obj["histograms"][1]["negative"] == 0
    assert obj["histograms"][2]["unit"] == "usecs"
    # arg and retval do not depend on timing: JSON and text agree exactly.
    assert as_text(obj)[:2] == [arg, ret]


# --- rpclat -------------------------------------------------------------------------

def test_rpclat_counts(bpf, bdevs):
    t = Tool("rpclat", bdevs.pid).start()
    for _ in range(7):
        bdevs.rpc("bdev_list")
    for _ in range(3):
        bdevs.rpc("target_stats")
    workload(bdevs, "Malloc0", "read", 4096, 1, 2)
    hists = by_key(parse(t.stop()), "method")
    assert {k: total(h) for k, h in hists.items()} == {
        ("bdev_list",): 7, ("target_stats",): 3, ("workload_run",): 1}


def test_rpclat_json(bpf, target):
    t = Tool("rpclat", target.pid, "-j", "-m").start()
    for _ in range(5):
        target.rpc("bdev_list")
    (obj,) = json_objects(t.stop())
    (x,) = obj["histograms"]
    assert x["key"] == {"method": "bdev_list"} and x["total"] == 5
    assert x["unit"] == "msecs"


# --- errors -------------------------------------------------------------------------

@pytest.mark.parametrize("tool", TOOLS)
def test_bad_pid(tool):
    rc, lines = run_tool(tool, unused_pid())
    one_error_line(rc, lines, tool, "no process with PID")
    rc, lines = run_tool(tool, "12abc")
    one_error_line(rc, lines, tool, "invalid PID")
    rc, lines = run_tool(tool, "1", "--no-such-option")
    one_error_line(rc, lines, tool, "unrecognized")


def test_funclat_unknown_function(bpf, target):
    rc, lines = run_tool("funclat", target.pid, "--function", "no_such_function")
    one_error_line(rc, lines, "funclat", "no_such_function")


@pytest.mark.parametrize("tool", ["iolatency", "funclat"])
def test_no_kernel_headers(bpf, target, tmp_path, tool):
    """BCC without kernel headers: one line saying so (BCC_KERNEL_SOURCE
    points BCC at an empty directory instead of /lib/modules/.../build)."""
    empty = tmp_path / "no-headers"
    empty.mkdir()
    rc, lines = run_tool(tool, target.pid,
                         env={"BCC_KERNEL_SOURCE": str(empty)})
    one_error_line(rc, lines, tool, "no kernel headers")


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def nobodys_target(blktgt_bin):
    """A blktgt run by user 65534, in a directory of its own."""
    d = tempfile.mkdtemp(prefix="bcc-nobody-")
    os.chown(d, 65534, 65534)
    proc = subprocess.Popen(
        NOBODY + [blktgt_bin, "-s", f"{d}/rpc.sock", "-l", "127.0.0.1:0",
                  "-U", f"{d}/nbd.sock"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out = probekit.LineReader(proc.stdout)
        out.wait_for(rf"blktgt: running pid={proc.pid} ")
        yield proc.pid
    finally:
        proc.terminate()
        assert proc.wait(timeout=probekit.TIMEOUT) == 0
        shutil.rmtree(d)


# What a BCC tool needs (doc/privileges.md, specs/privileges.toml):
# CAP_SYS_ADMIN for its uprobe perf events, and CAP_DAC_READ_SEARCH for
# tracefs's uprobe_events, which BCC clears at exit; another user's
# process adds CAP_SYS_PTRACE.  test_privileges.py holds the cells where
# they are enough.
BCC_NEEDS = "CAP_SYS_ADMIN and CAP_DAC_READ_SEARCH"


def denied(tool, whom, need, lack):
    return (f"probekit-{tool}-bcc: permission denied: tracing {whom} "
            f"needs root, or {need}; this process lacks {lack}")


@pytest.mark.parametrize("tool", TOOLS)
def test_no_privilege_own_target(bpf, nobodys_target, tool):
    """A user without privileges tracing their own blktgt is told which
    capabilities are missing, not that BCC cannot compile."""
    rc, lines = run_as_nobody(
        histtools.command("bcc", tool, nobodys_target, "-d", "1"))
    assert (rc, lines) == (1, [denied(tool, f"PID {nobodys_target}",
                                      BCC_NEEDS, BCC_NEEDS)])


@pytest.mark.parametrize("tool", ["iosize", "funclat"])
def test_bpf_and_perfmon_own_target(bpf, nobodys_target, tool):
    """CAP_BPF and CAP_PERFMON are not enough for a uprobe perf event on
    this kernel (6.18): the tool is refused before it attaches, and its
    line named 'at least CAP_BPF and CAP_PERFMON' before."""
    caps = ["--inh-caps=+bpf,+perfmon", "--ambient-caps=+bpf,+perfmon"]
    rc, lines = histtools.run(
        NOBODY + caps + histtools.command("bcc", tool, nobodys_target,
                                          "-d", "1"), errors="strict")
    assert (rc, lines) == (1, [denied(tool, f"PID {nobodys_target}",
                                      BCC_NEEDS, BCC_NEEDS)])


def test_no_privilege(bpf, target):
    rc, lines = run_as_nobody(histtools.command("bcc", "iosize", target.pid))
    want = "CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE"
    assert (rc, lines) == (1, [denied("iosize", "another user's process",
                                      want, want)])


# --- semaphores ---------------------------------------------------------------

IO_SEMS = ("io__batch",)       # iolatency's probe by default


def wait_raised(sems, proc):
    """Wait until the tool has raised a semaphore (its first attach) or
    exited."""
    deadline = time.monotonic() + probekit.TIMEOUT
    while not any(sems.read().values()) and proc.poll() is None:
        assert time.monotonic() < deadline, \
            f"no semaphore raised; the tool is in {where(proc.pid)}"
        time.sleep(0.001)


def where(pid):
    """What process pid is doing, for a failure message."""
    out = []
    for name in ("wchan", "stack", "syscall"):
        try:
            with open(f"/proc/{pid}/{name}") as f:
                out.append(f"{name}: {f.read(4096).strip()}")
        except OSError as e:
            out.append(f"{name}: {e.strerror}")
    return "; ".join(out)


@pytest.mark.parametrize("sig,when", [
    (signal.SIGKILL, "attaching"), (signal.SIGKILL, "tracing"),
    (signal.SIGINT, "attaching"), (signal.SIGINT, "tracing")])
def test_semaphores_back_to_zero(bpf, target, sig, when):
    """However iolatency ends, io__batch's semaphore returns to 0: only the
    kernel counts (ref_ctr_offset), one per attached tool, and undoes its
    count when the tool's fds close.  "attaching" signals the tool once it
    has raised a semaphore, before its "Tracing" line; "tracing" right
    after that line."""
    sems = Semaphores(target.pid, IO_SEMS)
    zero = dict.fromkeys(IO_SEMS, 0)
    assert sems.read() == zero
    for _ in range(3):  # ten took 100 s a stack in CI; make soak repeats it
        t = Tool("iolatency", target.pid)
        if when == "tracing":
            t.start()
            assert sems.read() == dict.fromkeys(IO_SEMS, 1)
        else:
            t.proc = subprocess.Popen(t.cmd, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL,
                                      start_new_session=True)
            wait_raised(sems, t.proc)
        os.killpg(t.proc.pid, sig)
        rc = t.proc.wait(timeout=probekit.TIMEOUT)
        # Ctrl-C: 0 once tracing, 130 before; SIGKILL kills.
        assert rc in ((-sig,) if sig == signal.SIGKILL else (0, 130)), rc
        if when == "tracing":
            t.out.drain()
        assert sems.read() == zero


# --- --version ----------------------------------------------------------------

def checkout_version():
    with open(os.path.join(probekit.ROOT, "VERSION")) as f:
        v = f.read()
    assert re.fullmatch(r"\d+\.\d+\.\d+\n", v), repr(v)
    return v.strip()


@pytest.mark.parametrize("tool", TOOLS)
def test_version(tool):
    """--version needs no -p and prints probekit's version, from VERSION at
    the root of the checkout."""
    rc, lines = histtools.run_tool("bcc", tool, "--version")
    assert (rc, lines) == (0, [f"probekit-{tool}-bcc (probekit) {checkout_version()}"])


def test_version_of_an_installed_copy(tmp_path):
    """An installed copy (PREFIX/share/probekit/bcc/) reads the VERSION of
    the tree it is in, PREFIX/share/probekit/VERSION, and no other; without
    it it says so in one line, exit 1."""
    data = tmp_path / "share" / "probekit"
    inst = data / "bcc"
    inst.mkdir(parents=True)
    for name in ["iosize"] + glob.glob(os.path.join(probekit.ROOT, "bcc",
                                                    "probekit_*.py")):
        shutil.copy(os.path.join(probekit.ROOT, "bcc", name), inst)
    # What else make install lays out beside bcc/: the specs the tools'
    # options and limits come from, and probelib (its argparse base).
    shutil.copytree(os.path.join(probekit.ROOT, "specs"), data / "specs",
                    ignore=shutil.ignore_patterns("gentool", "*.md"))
    shutil.copytree(os.path.join(probekit.ROOT, "probes", "probelib"),
                    data / "probes" / "probelib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    cmd = [probekit.PYTHON, str(inst / "iosize"), "--version"]
    (inst / "VERSION").write_text("4.5.6\n")
    rc, lines = histtools.run(cmd)
    one_error_line(rc, lines, "iosize", f"no VERSION file at {data}/VERSION", want_rc=1)
    (data / "VERSION").write_text("1.2.3\n")
    assert histtools.run(cmd) == (0, ["probekit-iosize-bcc (probekit) 1.2.3"])
    (data / "VERSION").write_text("4.5.6 but\nmore\n")
    rc, lines = histtools.run(cmd)
    one_error_line(rc, lines, "iosize", "does not hold a version", want_rc=1)
