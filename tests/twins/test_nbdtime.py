# SPDX-License-Identifier: BSD-2-Clause
"""nbdtime (bcc/ and libbpf/) against a live blktgt serving a real NBD
client over a delay bdev.

The workload is one qemu-io run of a fixed list of commands: 23 reads, 11
writes and 5 discards of 4 KiB, one at a time, and the FLUSH qemu-io sends
before it disconnects because it wrote.  So each histogram's count is
exact: per command, the request, bdev and syscall-share histograms each
count those numbers.  The socket syscall histograms are checked against
strace -c of the same run.

Readiness is always a state, never a time: the tool's "Hit Ctrl-C to end."
line, strace's "attached" line for every thread, and the end of a run is
the moment the target has closed every socket but its listeners (read in
/proc/PID/fd, which costs the target no syscall, so it cannot disturb the
syscall counts).
"""

import os
import re
import signal
import subprocess

import pytest

import histtools
import probekit
from probekit import wait_until
from histtools import (KINDS, Tool, by_key, json_objects, mask_ts, one_error_line,
                       parse, run_on_nousdt_target,
                       run_on_process_without_probes, run_tool, total,
                       unused_pid)

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("qemu-io", "strace", "py:bcc")

COMMANDS = ([f"read {i * 4}k 4k" for i in range(23)] +
            [f"write {i * 4}k 4k" for i in range(11)] +
            [f"discard {i * 8}k 4k" for i in range(5)])
PER_CMD = {"read": 23, "write": 11, "trim": 5, "flush": 1}
N = sum(PER_CMD.values())
SYSCALLS = ("recvfrom", "recvmsg", "sendto", "sendmsg")
STAGES = ("request", "bdev", "syscalls per request")


@pytest.fixture(scope="module", autouse=True)
def built():
    if not os.access(histtools.libbpf_path("nbdtime"), os.X_OK):
        pytest.fail(f"{histtools.libbpf_path('nbdtime')} is not built; run "
                    "the suite with 'make test'")


def sockets(pid):
    """The target's open sockets, by fd."""
    out = set()
    d = f"/proc/{pid}/fd"
    for fd in os.listdir(d):
        try:
            if os.readlink(os.path.join(d, fd)).startswith("socket:"):
                out.add(int(fd))
        except FileNotFoundError:
            pass
    return out


def slow_target(blktgt_bin, tmp_path, threads=2):
    """A target exporting disk0, a delay bdev (2 ms reads, 5 ms writes)
    over a RAM disk, quiet: its listeners are its only sockets."""
    t = probekit.Target(blktgt_bin, tmp_path, threads=threads).start()
    listeners = sockets(t.pid)
    t.rpc("bdev_malloc_create", name="M0", size_mb=16, block_size=512)
    t.rpc("bdev_delay_create", name="D0", base="M0", read_us=2000,
          write_us=5000)
    t.rpc("export_create", name="disk0", bdev="D0")
    t.listeners = listeners
    wait_until("the RPC sockets to close", lambda: sockets(t.pid) == listeners)
    return t


@pytest.fixture
def slow(blktgt_bin, tmp_path):
    t = slow_target(blktgt_bin, tmp_path)
    yield t
    t.stop()


def qemu_io(target):
    """The fixed workload; returns once the target has closed the
    connection (its last socket syscall is the recv that saw EOF)."""
    args = sum((["-c", c] for c in COMMANDS), [])
    p = subprocess.run(["qemu-io", "-f", "raw", *args,
                        target.nbd_uri("disk0")],
                       capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p
    wait_until("the target to close the NBD connection",
               lambda: sockets(target.pid) == target.listeners)


def syscall_hists(hists):
    return [h for h in hists if h["key"]["stage"].startswith("syscalls on")]


@pytest.mark.parametrize("kind", KINDS)
def test_exact_counts_per_command(bpf, slow, kind):
    t = Tool(kind, "nbdtime", slow.pid, "-C", tidy=True).start()
    qemu_io(slow)
    hists = parse(t.stop())
    split = by_key([h for h in hists if h["key"]["stage"] in STAGES],
                   "stage", "cmd")
    got = {k: total(h) for k, h in split.items()}
    assert got == {(s, c): n for s in STAGES for c, n in PER_CMD.items()}
    # The delay shows in the bdev and request time of every read and
    # write: no value below 1024 usecs.
    for stage in ("request", "bdev"):
        for cmd in ("read", "write"):
            h = split[(stage, cmd)]
            assert all(lo >= 1024 for lo, _, c in h["rows"] if c), h
    # The connection's syscalls ran on one reactor, named by its tid;
    # the handshake ran on reactor 0, whose tid is the PID.
    nbd = [h for h in hists if h["key"]["stage"] == "syscalls on nbd sockets"]
    assert len(nbd) == 1 and total(nbd[0]) >= N, hists
    other = [h for h in hists
             if h["key"]["stage"] == "syscalls on other sockets"]
    assert [h["key"]["tid"] for h in other] == [str(slow.pid)], hists


@pytest.mark.parametrize("kind", KINDS)
def test_unsplit_counts_and_json(bpf, slow, kind):
    t = Tool(kind, "nbdtime", slow.pid, "-j").start()
    qemu_io(slow)
    (obj,) = json_objects(t.stop())
    assert obj["tool"] == "nbdtime" and obj["pid"] == slow.pid
    got = {x["key"]["stage"]: x["total"] for x in obj["histograms"]
           if x["key"]["stage"] in STAGES}
    assert got == {s: N for s in STAGES}
    assert all(x["name"] == "latency" and x["unit"] == "usecs"
               for x in obj["histograms"])


# --max-keys 3 with -C: the first three histograms are the handshake's
# syscalls (other sockets, tid = PID), the connection's first recv (nbd
# sockets) and the first read's bdev time, which comes before its reply.
# Every later key finds the map full: the first read's request and share
# times (23 each) and all three of each other command's (3 * 17), so 97
# values are dropped and the 23 reads' bdev times are counted.  Before,
# libbpf counted them as "starts dropped" and BCC's table of (key, slot)
# entries did not fill at all, so nothing was dropped or said.
MAX_KEYS = 3
KEPT = {("bdev", "read"): PER_CMD["read"]}
DROPPED = 2 * PER_CMD["read"] + 3 * (N - PER_CMD["read"])


@pytest.mark.parametrize("kind", KINDS)
def test_full_key_table_counts_drops(bpf, slow, kind):
    t = Tool(kind, "nbdtime", slow.pid, "-C", "--max-keys", MAX_KEYS,
             tidy=True).start()
    qemu_io(slow)
    lines = t.stop()
    hists = parse(lines)
    split = by_key([h for h in hists if h["key"]["stage"] in STAGES],
                   "stage", "cmd")
    assert {k: total(h) for k, h in split.items()} == KEPT, "\n".join(lines)
    assert [h["key"]["stage"] for h in syscall_hists(hists)] == [
        "syscalls on nbd sockets", "syscalls on other sockets"], lines
    assert f"{DROPPED} values dropped (table full)" in lines, "\n".join(lines)
    assert not any("starts" in ln for ln in lines), "\n".join(lines)


@pytest.mark.parametrize("kind", KINDS)
def test_full_key_table_json(bpf, slow, kind):
    t = Tool(kind, "nbdtime", slow.pid, "-C", "-j", "--max-keys",
             MAX_KEYS).start()
    qemu_io(slow)
    (obj,) = json_objects(t.stop())
    assert obj["values"] == {"dropped": DROPPED}, obj
    assert obj["starts"] == {"dropped": 0, "reclaimed": 0}, obj
    assert len(obj["histograms"]) == MAX_KEYS, obj
    assert {(x["key"]["stage"], x["key"].get("cmd")): x["total"]
            for x in obj["histograms"] if x["key"]["stage"] in STAGES} == \
        KEPT, obj


def strace_attach(pid, out):
    """strace -c of the socket syscalls, attached to every thread."""
    tids = {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    p = subprocess.Popen(["strace", "-f", "-c", "-o", out, "-e",
                          "trace=" + ",".join(SYSCALLS), "-p", str(pid)],
                         stderr=subprocess.PIPE, start_new_session=True)
    r = probekit.LineReader(p.stderr)
    # strace says "Process PID attached with N threads" once, or one
    # "Process TID attached" a thread: wait for every thread's, not for
    # as many matches of the first line.
    attached = re.compile(r"^strace: Process (\d+) attached(?: with (\d+) threads)?$")

    def all_attached(lines):
        seen = set()
        for m in filter(None, map(attached.match, lines)):
            if m.group(2) and (int(m.group(1)), int(m.group(2))) == (pid, len(tids)):
                return True
            seen.add(int(m.group(1)))
        return tids <= seen
    r.wait_until(all_attached)
    return p


def strace_calls(p, out):
    os.killpg(p.pid, signal.SIGINT)
    # strace detaches, writes its summary, then dies of the signal.
    assert p.wait(timeout=probekit.TIMEOUT) in (0, -signal.SIGINT)
    calls = {}
    with open(out) as f:
        for ln in f:
            m = re.match(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$",
                         ln)
            if m and m.group(2) != "total":
                calls[m.group(2)] = int(m.group(1))
    return calls


@pytest.mark.parametrize("kind", KINDS)
def test_syscalls_match_strace(bpf, slow, kind, tmp_path):
    """Every recv and send of the run, as strace -c counts them, is one
    count in the syscall histograms (NBD connection and other sockets)."""
    out = str(tmp_path / "strace.out")
    st = strace_attach(slow.pid, out)
    try:
        t = Tool(kind, "nbdtime", slow.pid).start()
        qemu_io(slow)
        hists = parse(t.stop())
    finally:
        calls = strace_calls(st, out)
    assert set(calls) <= set(SYSCALLS) and calls.get("recvfrom", 0) > N
    assert sum(total(h) for h in syscall_hists(hists)) == sum(calls.values())


@pytest.mark.parametrize("opts", [
    ("-C", "-m", "-L", "-W", "1000"),
    ("-C", "-m", "-L", "-W", "1000", "--max-keys", str(MAX_KEYS)),
    ("-m", "-L", "-W", "1000", "-j"),
    ("-C", "-n"),
])
def test_matches_bcc(bpf, slow, opts):
    """The bcc/ tool and the libbpf one, attached together to one run,
    print the same bytes.  Together, because how many recvs a run takes
    depends on how the client's bytes arrive; probekit_bcc_loop registers its
    uprobes with the semaphore offset libbpf uses, so the two can share
    the probes.  Times are compared in one 1000 ms bucket, except with
    -n, where each side's histogram must merely have the same rows and
    counts (no two clocks read the same nanosecond)."""
    tools = {kind: Tool(kind, "nbdtime", slow.pid, *opts).start()
             for kind in KINDS}
    qemu_io(slow)
    outs = {kind: mask_ts(t.stop()) for kind, t in tools.items()}
    assert parse(outs["libbpf"]) or json_objects(outs["libbpf"])
    if "-n" not in opts:
        assert outs["libbpf"] == outs["bcc"]
        return
    summary = {kind: [(h["key"], h["unit"], total(h)) for h in parse(lines)]
               for kind, lines in outs.items()}
    assert summary["libbpf"] == summary["bcc"]
    assert outs["libbpf"][0] == outs["bcc"][0]     # the readiness line


def test_bt_script(bpf, slow, tmp_path):
    """bt/nbdtime.bt, the one-off join: exact request and bdev counts, and
    its syscall counts (nbd and other sockets) match strace -c."""
    out = str(tmp_path / "strace.out")
    st = strace_attach(slow.pid, out)
    try:
        t = probekit.Trace(slow.pid, [os.path.join(probekit.ROOT, "bt",
                                                   "nbdtime.bt")]).start()
        qemu_io(slow)
        lines = t.stop()
    finally:
        calls = strace_calls(st, out)
    assert t.proc.returncode == 0, lines
    counts = {m.group(1): int(m.group(2)) for m in
              (re.match(r"^@count\[(.*)\]: (\d+)$", ln) for ln in lines) if m}
    assert counts.pop("request") == N and counts.pop("bdev") == N, lines
    assert set(counts) <= {"syscall nbd", "syscall other"}, counts
    assert counts["syscall nbd"] > N
    assert sum(counts.values()) == sum(calls.values()), (counts, calls)
    assert not any(ln.startswith(("@req_start", "@io_start", "@sys_", "@nbd_fd"))
                   for ln in lines), "END must clear the temporary maps"


R = 23                  # reads of the connection that reuses an fd


def test_bt_script_fd_reused_before_disconnect(bpf, target):
    """blktgt closes a connection's socket at once, but fires its
    nbd__disconnect only when its last I/O is done.  Connection A hangs up
    with a read held (its export paused); B gets A's fd, then A's read
    completes and A's disconnect fires: B's fd must stay an NBD socket.
    The script before this change deleted it there, so B's R reads
    (at least one recv and one send each) counted as "syscall other" and
    "syscall nbd" held only A's few."""
    from nbd_wire import CMD_READ
    from nbd_client import RawNbd, make_export
    listeners = sockets(target.pid)     # before any RPC, as slow_target
    make_export(target, "e0", size_mb=16)
    t = probekit.Trace(target.pid, [os.path.join(probekit.ROOT, "bt",
                                                 "nbdtime.bt")]).start()
    base = target.rpc("target_stats")
    wait_until("the RPC socket to close",
               lambda: sockets(target.pid) == listeners)
    a = RawNbd(target)
    a.go("e0")
    (fd,) = sockets(target.pid) - listeners
    target.rpc("export_pause", name="e0")
    a.request(CMD_READ, 0, 4096, handle=1)
    wait_until("A's read to arrive", lambda: target.rpc("target_stats")[
        "nbd_requests"] - base["nbd_requests"] == 1)
    a.close()
    wait_until("A's socket to close and the RPC's",
               lambda: sockets(target.pid) == listeners)
    assert target.rpc("target_stats")["nbd_connections"] == 1  # A, held
    wait_until("the RPC socket to close",
               lambda: sockets(target.pid) == listeners)
    b = RawNbd(target)
    b.go("e0")
    assert sockets(target.pid) - listeners == {fd}, "B must reuse A's fd"
    target.rpc("export_resume", name="e0")
    wait_until("A's disconnect (its read done)", lambda: target.rpc(
        "target_stats")["nbd_total_connections"] - base[
        "nbd_total_connections"] == 2 and target.rpc("target_stats")[
        "nbd_connections"] == 1)
    for i in range(R):
        b.request(CMD_READ, i * 4096, 4096, handle=i)
        assert b.simple_reply(4096)[:2] == (0, i)
    b.close()
    wait_until("B's socket to close", lambda: sockets(target.pid) == listeners)
    lines = t.stop()
    assert t.proc.returncode == 0, lines
    counts = {m.group(1): int(m.group(2)) for m in
              (re.match(r"^@count\[(.*)\]: (\d+)$", ln) for ln in lines) if m}
    assert counts["request"] == R, lines     # A's read got no reply
    assert counts["syscall nbd"] >= 2 * R, counts


# --- errors: one line, non-zero ----------------------------------------------

BAD_ARGS = [("-p", "abc"), ("-p", "0"), (), ("-p", "1", "-Z"),
            ("-p", "1", "0"), ("-p", "1", "1", "2", "3"),
            ("-p", "1", "-W", "5"), ("-p", "1", "-L", "-W", "0"),
            ("-p", "1", "-m", "-u"), ("-p", "1", "-d", "abc")]


@pytest.mark.parametrize("kind", KINDS)
def test_bad_args(kind):
    for args in BAD_ARGS:
        rc, lines = run_tool(kind, "nbdtime", *args)
        assert rc == 2, (args, rc, lines)
        one_error_line(rc, lines, "nbdtime", r".*\(see --help\)$")


@pytest.mark.parametrize("kind", KINDS)
def test_help(kind):
    rc, lines = run_tool(kind, "nbdtime", "--help")
    cmd = {"bcc": "probekit-nbdtime-bcc", "libbpf": "probekit-nbdtime"}[kind]
    assert rc == 0 and lines[0].startswith(f"usage: {cmd} ")
    assert "-p PID" in lines[0]
    assert "examples:" in lines
    assert all(len(ln) < 80 for ln in lines)


@pytest.mark.parametrize("kind", KINDS)
def test_no_such_process(kind):
    unused = unused_pid()
    rc, lines = run_tool(kind, "nbdtime", "-p", unused)
    one_error_line(rc, lines, "nbdtime", f"no process with PID {unused}$", 1)


@pytest.mark.parametrize("kind", KINDS)
def test_pid_without_probes(bpf, kind):
    rc, lines = run_on_process_without_probes(
        lambda pid: run_tool(kind, "nbdtime", "-p", pid))
    one_error_line(rc, lines, "nbdtime", "has no USDT probe blktgt:io__submit",
                   1)


@pytest.mark.parametrize("kind", KINDS)
def test_nousdt_build_has_no_probes(bpf, build, tmp_path, kind):
    rc, lines = run_on_nousdt_target(
        build, tmp_path, lambda pid: run_tool(kind, "nbdtime", "-p", pid))
    one_error_line(rc, lines, "nbdtime", "no USDT probe blktgt:io__submit", 1)
