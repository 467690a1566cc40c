# SPDX-License-Identifier: BSD-2-Clause
"""The gdb helpers (gdb/blktgt.py) on a live blktgt and on its core, and the
trace ring inside that core (blktgt-trace --core).

One known state serves every test: 2 bdevs (m0 malloc 4 MiB/512, n0 null
64 MiB/4096), 1 export ex0 of m0 with 2 NBD clients, ex0 paused while the
clients have sent 3 reads and 2 writes (so exactly those 5 I/Os are held),
and a workload running on n0.  gdb reads it live, then blktgt gets SIGABRT
mid-workload and gdb reads the core; the /dev/shm ring file is dumped and
deleted before the core is read, so nothing can come from the live file.

A core needs /proc/sys/kernel/core_pattern, which is global: it points into
this test's tmp dir only from the SIGABRT until blktgt has been reaped (the
kernel writes the core before that), under a lock that serialises the
suite's own users, and the old pattern is put back in a finally.
"""

import json
import os
import re
import shlex
import subprocess

import pytest

import probekit
from gdbtools import abort_for_core, check_rows, known_state, start_target

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("gdb")

GDB = "/usr/bin/gdb"
SCRIPT = os.path.join(probekit.ROOT, "gdb", "blktgt.py")
TRACE_TOOL = os.path.join(probekit.BUILD, "bin", "blktgt-trace")
COMMANDS = ("blktgt-threads", "blktgt-bdevs", "blktgt-exports", "blktgt-conns",
            "blktgt-ios")


def gdb_run(*args, source=True):
    """gdb in batch mode; (exit code, stdout lines, stderr)."""
    cmd = [GDB, "-nx", "-batch", "-iex", "set debuginfod enabled off"]
    if source:
        cmd += ["-iex", f"source {SCRIPT}"]
    p = subprocess.run(cmd + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=probekit.TIMEOUT, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout.decode(errors="replace").splitlines(), \
        p.stderr.decode(errors="replace")


def run_commands(*target):
    """Every command on target (-p PID, or BINARY CORE): {kind: [fields]}."""
    ex = []
    for c in COMMANDS:
        ex += ["-ex", c]
    rc, out, err = gdb_run(*target, *ex)
    assert "Traceback" not in err, err
    assert not re.search(r"^blktgt-\w+: ", err, re.M), err
    rows = {}
    for line in out:
        if line.split(" ", 1)[0] in ("reactor", "bdev", "export", "conn", "io", "clock"):
            words = shlex.split(line)
            rows.setdefault(words[0], []).append(
                dict(w.split("=", 1) for w in words[1:]))
    return rows, out


@pytest.fixture(scope="module")
def seen(blktgt_bin, tmp_path_factory):
    """What gdb and blktgt-trace see of the known state, live and in the
    core; the target is gone when the tests look."""
    tmp = tmp_path_factory.mktemp("gdb")
    t = start_target(blktgt_bin, tmp, "-e", "all")
    r = {"pid": t.pid, "binary": blktgt_bin}
    try:
        a, b, w = known_state(t)
        r["peers"] = {"A": "%s:%d" % a.sock.getsockname(),
                      "B": "%s:%d" % b.sock.getsockname()}
        r["tids"] = {int(x) for x in os.listdir(f"/proc/{t.pid}/task")}
        with open(f"/proc/{t.pid}/coredump_filter") as f:
            r["filter"] = int(f.read(), 16)
        r["live"], r["live_out"] = run_commands("-p", str(t.pid))
        r["core"] = abort_for_core(t, tmp)
        shm = f"/dev/shm/blktgt_trace.pid{t.pid}"
        r["shm_dump"] = json.loads(subprocess.run(
            [TRACE_TOOL, "-r", shm, "--json"], check=True, stdout=subprocess.PIPE,
            timeout=probekit.TIMEOUT).stdout)
        os.unlink(shm)
        r["core_rows"], r["core_out"] = run_commands(blktgt_bin, str(r["core"]))
        for s in (a, b):
            s.close()
        w.close()
    finally:
        if t.proc.poll() is None:
            t.proc.kill()
            t.proc.wait()
        t.remove_trace_file()
    return r


def test_commands_on_live_target(seen):
    check_rows(seen["live"], seen, live=True)


def test_commands_on_core(seen):
    check_rows(seen["core_rows"], seen, live=False)


def test_core_holds_the_ring(seen):
    """blktgt set bit 3 of its coredump_filter, so the core holds the ring:
    the same events as the /dev/shm file (deleted before the core was read),
    every recorded field equal."""
    assert seen["filter"] & 0x08 and seen["filter"] & 0x33 == 0x33
    p = subprocess.run([TRACE_TOOL, "--core", str(seen["core"]), "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stderr
    core = json.loads(p.stdout)
    shm = seen["shm_dump"]
    assert core["file"] == str(seen["core"])
    assert {k: v for k, v in core.items() if k != "file"} == \
        {k: v for k, v in shm.items() if k != "file"}
    evs = core["events"]
    assert core["pid"] == seen["pid"] and len(evs) > 1000
    # Mid-workload: the workload's I/O on n0 is there.
    assert sum(1 for e in evs if e["tracepoint"] == "bdev_io_submit") > 1000


def test_pretty_printers(seen):
    rc, out, err = gdb_run(seen["binary"], str(seen["core"]),
                           "-ex", "p *reactors[1]", "-ex", "p *bdevs", "-ex", "p *exports",
                           "-ex", "p *exports->per[1].held_head")
    assert rc == 0, err
    text = "\n".join(out)
    assert re.search(r"= reactor 1 reactor_1 \(msgs run \d+\)", text), text
    assert re.search(r"= bdev (m0 malloc 4194304|n0 null 67108864) bytes", text), text
    assert "= export ex0 of m0 PAUSED clients 2" in text, text
    assert re.search(r"= bdev_io read 4096@\d+ on m0", text), text


def one_error(err, what):
    lines = [x for x in err.splitlines() if x.startswith("blktgt-")]
    assert lines and all(what in x for x in lines), err
    assert "Traceback" not in err, err


def test_stripped_binary(seen, tmp_path):
    stripped = tmp_path / "blktgt"
    subprocess.run(["strip", "-o", str(stripped), seen["binary"]], check=True)
    rc, out, err = gdb_run(str(stripped), str(seen["core"]), "-ex", "blktgt-bdevs")
    assert rc != 0 and not [x for x in out if x.startswith("bdev ")]
    one_error(err, "no type 'struct reactor' in the debug info")


def test_core_from_another_build(seen, build):
    other = os.path.join(build, "nousdt", "bin", "blktgt")
    if not os.access(other, os.X_OK):
        pytest.fail(f"{other} is not built; run the suite with 'make test'")
    rc, out, err = gdb_run(other, str(seen["core"]), "-ex", "blktgt-threads")
    assert rc != 0
    one_error(err, "was made by another build")


def test_no_process(seen):
    rc, out, err = gdb_run(seen["binary"], "-ex", "blktgt-conns")
    assert rc != 0
    one_error(err, "no process or core")


def test_auto_load_from_the_binary(seen):
    """The binary carries the helpers; auto-load safe-path gates them, and
    the line doc/gdb.md documents opens the gate."""
    binary, core = seen["binary"], str(seen["core"])
    rc, out, err = gdb_run(binary, core, "-ex", "blktgt-exports", source=False)
    assert "auto-loading has been declined" in err and \
        'Undefined command: "blktgt-exports"' in err, err
    rc, out, err = gdb_run("-iex", f"add-auto-load-safe-path {binary}", binary, core,
                           "-ex", "blktgt-exports", source=False)
    assert rc == 0, err
    assert [x.split()[:2] for x in out if x.startswith("export ")] == \
        [["export", "name=ex0"]], out


def test_core_without_the_ring(blktgt_bin, tmp_path):
    """A core dumped without bit 3 lacks the ring's pages: --core says so
    (the /dev/shm file, still there, is not read instead)."""
    t = start_target(blktgt_bin, tmp_path, "-e", "all")
    try:
        with open(f"/proc/{t.pid}/coredump_filter", "w") as f:
            f.write("0x33")
        core = abort_for_core(t, tmp_path)
        assert os.path.exists(f"/dev/shm/blktgt_trace.pid{t.pid}")
        p = subprocess.run([TRACE_TOOL, "--core", str(core)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=probekit.TIMEOUT)
        assert p.returncode == 1 and p.stdout == b""
        err = p.stderr.decode()
        assert len(err.splitlines()) == 1 and \
            "does not hold the trace ring's pages" in err, err
    finally:
        if t.proc.poll() is None:
            t.proc.kill()
            t.proc.wait()
        t.remove_trace_file()


@pytest.mark.parametrize("kind, want", [
    ("missing", "cannot open"),
    ("text", "not a readable core"),
    ("binary", "not a core file"),
])
def test_core_bad_input(blktgt_bin, tmp_path, kind, want):
    path = {"missing": tmp_path / "nope", "text": tmp_path / "text",
            "binary": blktgt_bin}[kind]
    if kind == "text":
        path.write_text("not an ELF file\n")
    p = subprocess.run([TRACE_TOOL, "--core", str(path)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=probekit.TIMEOUT)
    err = p.stderr.decode()
    assert p.returncode == 1 and len(err.splitlines()) == 1 and want in err, err


def test_core_truncated(seen, tmp_path):
    """A core cut short (a full disk, a copy stopped half way) gets one line,
    not a ring read from whatever the missing pages would have been."""
    cut = tmp_path / "core.cut"
    with open(seen["core"], "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(os.path.getsize(seen["core"]) // 2))
    p = subprocess.run([TRACE_TOOL, "--core", str(cut)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=probekit.TIMEOUT)
    err = p.stderr.decode()
    assert p.returncode == 1 and len(err.splitlines()) == 1 and \
        "the core is truncated" in err, err
