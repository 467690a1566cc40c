# SPDX-License-Identifier: BSD-2-Clause
"""gdb's helpers on a blktgt of a test: a target started for them, a core
from it, and the rows gdb/blktgt.py prints checked against what the
target knows."""

import contextlib
import fcntl
import json
import os
import resource
import signal
import socket

import probekit
from nbd_wire import CMD_READ, CMD_WRITE
from probekit import wait_until
from nbd_client import RawNbd, stats


CORE_PATTERN = "/proc/sys/kernel/core_pattern"
PATTERN_LOCK = "/run/lock/probekit-core_pattern.lock"

READS = [(4096 * i, 4096) for i in range(3)]    # client A, handles 10..12
WRITES = [(512 * i, 512) for i in range(2)]     # client B, handles 20..21
QD = 4                                          # the n0 workload's depth


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
