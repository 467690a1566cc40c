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

import contextlib
import fcntl
import json
import os
import re
import resource
import shlex
import signal
import socket
import subprocess

import pytest

import probekit
from test_nbd import CMD_READ, CMD_WRITE, RawNbd, stats, wait_until

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("gdb")

GDB = "/usr/bin/gdb"
SCRIPT = os.path.join(probekit.ROOT, "gdb", "blktgt.py")
TRACE_TOOL = os.path.join(probekit.BUILD, "bin", "blktgt-trace")
CORE_PATTERN = "/proc/sys/kernel/core_pattern"
PATTERN_LOCK = "/run/lock/probekit-core_pattern.lock"
COMMANDS = ("blktgt-threads", "blktgt-bdevs", "blktgt-exports", "blktgt-conns",
            "blktgt-ios")
READS = [(4096 * i, 4096) for i in range(3)]    # client A, handles 10..12
WRITES = [(512 * i, 512) for i in range(2)]     # client B, handles 20..21
QD = 4                                          # the n0 workload's depth


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


@contextlib.contextmanager
def core_pattern(pattern):
    with open(PATTERN_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(CORE_PATTERN) as f:
            old = f.read().rstrip("\n")
        try:
            with open(CORE_PATTERN, "w") as f:
                f.write(pattern)
            yield
        finally:
            with open(CORE_PATTERN, "w") as f:
                f.write(old)


def abort_for_core(t, tmp):
    """SIGABRT t and return its core, written into tmp."""
    with core_pattern(str(tmp / "core.%p")):
        t.proc.send_signal(signal.SIGABRT)
        rc = t.proc.wait(timeout=probekit.TIMEOUT)
    assert rc == -signal.SIGABRT
    core = tmp / f"core.{t.pid}"
    assert core.is_file(), os.listdir(tmp)
    return core


def start_target(binary, tmp, *args):
    """A blktgt allowed to dump core (RLIMIT_CORE is inherited at fork)."""
    t = probekit.Target(binary, tmp, threads=2)
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    try:
        t.start(args)
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
    return t


def start_workload(t):
    """workload_run on n0, which answers only when the job ends: send it
    and leave the reply unread."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(t.rpc_sock)
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "workload_run",
                          "params": {"bdev": "n0", "pattern": "randread",
                                     "io_size": 4096, "queue_depth": QD,
                                     "seconds": 600}}).encode())
    base = stats(t)["io_submitted"]
    wait_until("the workload's I/O", lambda: stats(t)["io_submitted"] > base + 1000)
    return s


def known_state(t):
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    t.rpc("bdev_null_create", name="n0", size_mb=64, block_size=4096)
    t.rpc("export_create", name="ex0", bdev="m0")
    a, b = RawNbd(t), RawNbd(t)
    a.go("ex0")
    b.go("ex0")
    wait_until("2 connections", lambda: stats(t)["nbd_connections"] == 2)
    t.rpc("export_pause", name="ex0")
    for i, (off, n) in enumerate(READS):
        a.request(CMD_READ, offset=off, length=n, handle=10 + i)
    for i, (off, n) in enumerate(WRITES):
        b.request(CMD_WRITE, offset=off, length=n, handle=20 + i, payload=b"w" * n)
    wait_until("5 requests", lambda: stats(t)["nbd_requests"] == 5)
    # The counter rises before a request is held; an export change walks
    # every reactor by message, so once it is done each reactor has left
    # the callback that was holding them.
    t.rpc("export_create", name="barrier", bdev="n0")
    t.rpc("export_delete", name="barrier")
    return a, b, start_workload(t)


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


def check_rows(rows, r, live):
    reactors = rows["reactor"]
    assert [(x["index"], x["name"]) for x in reactors] == \
        [("0", "reactor_0"), ("1", "reactor_1")]
    assert reactors[0]["lwp"] == str(r["pid"])
    assert int(reactors[1]["lwp"]) in r["tids"] - {r["pid"]}
    assert all(x["queued"] == "0" and x["state"] in ("sleeping", "running")
               for x in reactors)

    bdevs = {x["name"]: x for x in rows["bdev"]}
    assert sorted(bdevs) == ["m0", "n0"]
    m0, n0 = bdevs["m0"], bdevs["n0"]
    assert (m0["kind"], m0["size"], m0["block_size"]) == ("malloc", str(4 << 20), "512")
    assert (m0["exports"], m0["users"], m0["clients"], m0["inflight"]) == \
        ("1", "0", "2", "5")
    assert (n0["kind"], n0["size"], n0["block_size"]) == ("null", str(64 << 20), "4096")
    assert (n0["exports"], n0["users"], n0["clients"]) == ("0", "1", "0")
    assert int(n0["inflight"]) <= QD

    (ex,) = rows["export"]
    assert (ex["name"], ex["bdev"], ex["state"], ex["clients"]) == \
        ("ex0", "m0", "PAUSED", "2")
    assert sorted(ex["conns"].split(",")) == ["1", "2"]
    # Hand-off is round robin from reactor 1: A (conn 1) went to reactor 1.
    assert (ex["r0"], ex["r1"]) == ("PAUSED/inflight:0/held:2",
                                    "PAUSED/inflight:0/held:3")

    conns = {x["id"]: x for x in rows["conn"]}
    assert sorted(conns) == ["1", "2"]
    for cid, who, reactor, n in (("1", "A", "1", len(READS)), ("2", "B", "0", len(WRITES))):
        c = conns[cid]
        assert (c["peer"], c["reactor"], c["state"], c["export"]) == \
            (r["peers"][who], reactor, "TRANSMITTING", "ex0")
        assert (c["requests"], c["inflight"], c["io_inflight"]) == (str(n),) * 3

    (clock,) = rows["clock"]
    assert clock["source"] == ("live" if live else "core-newest-recorded")
    ios = rows["io"]
    held = sorted((x["type"], int(x["offset"]), int(x["len"]), x["conn"], x["handle"],
                   x["reactor"]) for x in ios if x["bdev"] == "m0")
    assert held == sorted(
        [("read", off, n, "1", str(10 + i), "1") for i, (off, n) in enumerate(READS)] +
        [("write", off, n, "2", str(20 + i), "0") for i, (off, n) in enumerate(WRITES)])
    assert all(x["state"] == "held" and x["age_us"] == "-" and x["owner"] == "req_io_done"
               for x in ios if x["bdev"] == "m0")
    work = [x for x in ios if x["bdev"] == "n0"]
    assert len(work) == int(n0["inflight"])
    for x in work:
        assert (x["type"], x["len"], x["owner"]) == ("read", "4096", "job_io_done")
        assert x["state"] in ("executing", "completing") and int(x["age_us"]) >= 0


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
