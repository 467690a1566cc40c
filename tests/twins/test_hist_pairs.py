# SPDX-License-Identifier: BSD-2-Clause
"""The blktgt tools that keep state between two probes, both forms
(histtools.KINDS): iolatency --per-io, qdepth and rpclat keep a START by
its id until its DONE; nbdtime keeps requests, bdev I/Os, connections and
syscalls in progress.  Each bounds what it keeps (--max-inflight), counts
every START its full table refuses, and reclaims what a dead process left
(libbpf/pair_state.h, bcc/probekit_bcc_pairs.py).

These tools trace one process (-p), so its death ends tracing: what its
SIGKILL left in flight is reclaimed and counted before the final output,
whose last line says how many.  Each case fails on the code before the
shared mechanism, which had no --max-inflight and printed no such line.

Readiness is a state, never a time: the tool's "Hit Ctrl-C to end." line,
blktgt's counts of I/Os in flight and of workloads running (target_stats),
an RPC's reply.
"""

import json
import signal
import socket
import subprocess

import pytest

import probekit
from histtools import KINDS, Tool, as_nobody, by_key, nobody_blktgt, parse, total
from probekit import TIMEOUT

pytestmark = pytest.mark.needs("py:bcc")

# The tools that time bdev I/O, and the options that make them pair.
PER_IO = {"iolatency": ("--per-io",), "qdepth": (), "nbdtime": ()}


def starts(lines):
    """The "N starts ..." lines of a text output."""
    return [ln for ln in lines if " starts " in ln]


def in_flight(target):
    s = target.rpc("target_stats")
    return s["io_submitted"] - s["io_completed"]


def rpc_send(target, method, **params):
    """Send one JSON-RPC call on a new connection without waiting for its
    reply: the socket (a call made after this one returns is read after
    it: blktgt's RPC server runs on one reactor, in event order)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(target.rpc_sock)
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                          "params": params}).encode())
    return s


def rpc_reply(s):
    """The reply to rpc_send's call, once it comes."""
    s.settimeout(TIMEOUT)
    buf = b""
    while True:
        try:
            return json.loads(buf)
        except ValueError:
            chunk = s.recv(65536)
            assert chunk, buf
            buf += chunk


def delay_bdev(target, write_us):
    """D0: writes to RAM disk M0 held write_us each; M1: a plain RAM disk."""
    target.rpc("bdev_malloc_create", name="M0", size_mb=8, block_size=512)
    target.rpc("bdev_malloc_create", name="M1", size_mb=8, block_size=512)
    target.rpc("bdev_delay_create", name="D0", base="M0", read_us=1000,
               write_us=write_us)


def timed(name, hists):
    """What a tool timed: iolatency's and qdepth's histograms, nbdtime's
    bdev stage (the workloads here are bdev I/O, no NBD request)."""
    if name == "nbdtime":
        hists = [h for h in hists if h["key"]["stage"] == "bdev"]
    return sum(total(h) for h in hists)


# --- a full table ------------------------------------------------------------

TABLE = 5               # --max-inflight
HELD = 13               # I/Os submitted at once, each held 200 ms


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(PER_IO))
def test_full_table_counts_its_drops(bpf, target, name, kind):
    """13 writes at queue depth 13 are submitted in one reactor callback,
    before any can complete: a table of 5 takes 5, and the 8 it refuses
    are counted and printed."""
    delay_bdev(target, 200000)
    t = Tool(kind, name, target.pid, *PER_IO[name], "--max-inflight",
             TABLE).start()
    r = target.rpc("workload_run", bdev="D0", pattern="write", io_size=4096,
                   queue_depth=HELD, count=HELD)
    assert r["ios"] == HELD and r["errors"] == 0, r
    lines = t.stop()
    assert starts(lines) == [f"{HELD - TABLE} starts dropped (table full)"], \
        lines
    assert timed(name, parse(lines)) == TABLE, lines


RPCS = 3                # held RPCs filling rpclat's table
FAST = 23               # RPCs while it is full


def paused_export(target):
    """disk0, paused: a workload_run through it waits, with its I/O held,
    until the export resumes (a hold that takes no time into account)."""
    target.rpc("bdev_malloc_create", name="M0", size_mb=8, block_size=512)
    target.rpc("export_create", name="disk0", bdev="M0")
    assert target.rpc("export_pause", name="disk0") is True


def held_run(target):
    """A workload_run of one write held by paused_export's disk0: sent,
    its reply not awaited; the socket."""
    return rpc_send(target, "workload_run", export="disk0", pattern="write",
                    io_size=4096, queue_depth=1, count=1)


@pytest.mark.parametrize("kind", KINDS)
def test_rpclat_full_table_counts_its_drops(bpf, target, kind):
    """3 workload_run calls held by a paused export fill a table of 3: the
    23 target_stats calls made then, the one that checks the 3 still run
    and the export_resume that lets them end are dropped, 25, counted; the
    3 are timed."""
    paused_export(target)
    t = Tool(kind, "rpclat", target.pid, "--max-inflight", RPCS).start()
    held = [held_run(target) for _ in range(RPCS)]
    for _ in range(FAST):
        target.rpc("target_stats")
    assert target.rpc("target_stats")["workloads"] == RPCS
    assert target.rpc("export_resume", name="disk0") is True
    for s in held:
        assert rpc_reply(s)["result"]["ios"] == 1
        s.close()
    lines = t.stop()
    assert starts(lines) == [f"{FAST + 2} starts dropped (table full)"], lines
    hists = by_key(parse(lines), "method")
    assert {k: total(h) for k, h in hists.items()} == \
        {("workload_run",): RPCS}, lines


# --- a killed target ---------------------------------------------------------

Q = 7                   # I/Os (or RPCs) the killed target held
N = 1009                # I/Os (or RPCs) done beside them, all timed


@pytest.fixture
def victim(blktgt_bin, tmp_path):
    """A blktgt that a test SIGKILLs (conftest's target wants exit 0)."""
    t = probekit.Target(blktgt_bin, tmp_path).start()
    yield t
    t.stop(sig=signal.SIGKILL, expect_rc=None)


def kill(target, tool):
    """SIGKILL the target; the tool's output, once it has seen the exit."""
    target.stop(sig=signal.SIGKILL, expect_rc=None)
    lines = tool.wait()
    assert any(f"PID {target.pid} " in ln and "exited" in ln
               for ln in lines), lines
    return lines


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(PER_IO))
def test_killed_targets_starts_reclaimed(bpf, victim, name, kind):
    """7 writes held 10 s when the target is SIGKILLed: its exit reclaims
    the 7, counted; 1009 reads beside them, in a table of 7 + 2 that the
    held ones would fill but for 2 places, are timed 1009 of 1009."""
    delay_bdev(victim, 10000000)
    t = Tool(kind, name, victim.pid, *PER_IO[name], "--max-inflight",
             Q + 2).start()
    held = rpc_send(victim, "workload_run", bdev="D0", pattern="write",
                    io_size=4096, queue_depth=Q, count=Q)
    probekit.wait_until("the writes to be held",
                        lambda: in_flight(victim) == Q)
    r = victim.rpc("workload_run", bdev="M1", pattern="randread",
                   io_size=4096, queue_depth=2, count=N)
    assert r["ios"] == N and r["errors"] == 0, r
    lines = kill(victim, t)
    held.close()
    assert starts(lines) == [
        f"{Q} starts reclaimed (thread or process exited)"], lines
    hists = parse(lines)
    if name == "qdepth":
        # Depths are counted at submit: the held 7, then the reads.
        assert by_key(hists, "bdev").keys() == {("D0",), ("M1",)}, lines
        assert total(by_key(hists, "bdev")[("M1",)]) == N, lines
    else:
        assert timed(name, hists) == N, lines


@pytest.mark.parametrize("kind", KINDS)
def test_rpclat_killed_targets_starts_reclaimed(bpf, victim, kind):
    """7 workload_run calls held by a paused export when the target is
    SIGKILLed: its exit reclaims the 7, counted; the target_stats calls
    beside them (the readiness polls, then 1009) are timed, every one."""
    paused_export(victim)
    t = Tool(kind, "rpclat", victim.pid, "--max-inflight", Q + 1).start()
    polls, held = 0, []
    for i in range(Q):
        held.append(held_run(victim))
        while True:
            polls += 1
            if victim.rpc("target_stats")["workloads"] == i + 1:
                break
            assert polls < 100000
    for _ in range(N):
        victim.rpc("target_stats")
    lines = kill(victim, t)
    for s in held:
        s.close()
    assert starts(lines) == [
        f"{Q} starts reclaimed (thread or process exited)"], lines
    hists = by_key(parse(lines), "method")
    assert {k: total(h) for k, h in hists.items()} == \
        {("target_stats",): polls + N}, lines


@pytest.mark.parametrize("kind", KINDS)
def test_reclaims_without_tracefs(bpf, blktgt_bin, tmp_path, kind):
    """A user with CAP_SYS_ADMIN alone cannot read tracefs (mode 0700): the
    tool learns from the kernel's BTF how a process's death is told, and
    reclaims the 7 writes its SIGKILLed blktgt held.  (Before, it could not
    start: "cannot read the sched_process_exit tracepoint's format",
    or BCC could not attach its classic tracepoint.)  BCC itself needs
    CAP_DAC_READ_SEARCH too (doc/privileges.md: it clears its uprobes from
    tracefs's uprobe_events at exit, and is refused without it), so only
    the libbpf form runs with CAP_SYS_ADMIN alone."""
    caps = ("sys_admin",) + (("dac_read_search",) if kind == "bcc" else ())
    with nobody_blktgt(blktgt_bin, tmp_path) as victim:
        delay_bdev(victim, 10000000)
        t = Tool(kind, "qdepth", victim.pid, wrap=as_nobody(*caps))
        t.start()
        held = rpc_send(victim, "workload_run", bdev="D0", pattern="write",
                        io_size=4096, queue_depth=Q, count=Q)
        probekit.wait_until("the writes to be held",
                        lambda: in_flight(victim) == Q)
        lines = kill(victim, t)
        held.close()
    assert starts(lines) == [
        f"{Q} starts reclaimed (thread or process exited)"], lines
    assert total(by_key(parse(lines), "bdev")[("D0",)]) == Q, lines


@pytest.mark.needs("qemu-io")
@pytest.mark.parametrize("kind", KINDS)
def test_nbdtime_killed_targets_requests_reclaimed(bpf, victim, kind):
    """An NBD client's 7 writes held by a slow bdev when the target is
    SIGKILLed: its exit reclaims the 7 requests, their 7 bdev I/Os and the
    connection (its state and its socket's), 16 in all."""
    delay_bdev(victim, 10000000)
    victim.rpc("export_create", name="disk0", bdev="D0")
    t = Tool(kind, "nbdtime", victim.pid).start()
    cmds = sum((["-c", f"aio_write {i * 4}k 4k"] for i in range(Q)), [])
    client = subprocess.Popen(["qemu-io", "-f", "raw", *cmds,
                               victim.nbd_uri("disk0")],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        probekit.wait_until("the writes to be held",
                        lambda: in_flight(victim) == Q)
        lines = kill(victim, t)
    finally:
        client.kill()
        client.wait()
    assert starts(lines) == [
        f"{2 * Q + 2} starts reclaimed (thread or process exited)"], lines
