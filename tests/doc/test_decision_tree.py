# SPDX-License-Identifier: BSD-2-Clause
"""doc/blktgt.md's decision tree ("From a symptom to the commands"), each
branch walked once with the commands exactly as the guide gives them.

The commands are read out of the guide's marked blocks
(`<!-- decision-tree: NAME, run -->` or `..., until Ctrl-C -->` before a
fenced sh block), so the document and this test cannot drift apart.  Only
the placeholders change: PID, CORE, ID, the RPC socket, the perf file and
the build directory.  A "run" block's commands run to completion, in
order, and must exit 0; an "until Ctrl-C" block's commands are started
together, each waited for until it says it is tracing, and stopped with
one SIGINT after the workload.

Each branch has a known state and checks exact objects or counts:
- crashed: test_gdb.py's known state (2 bdevs, a paused export with 5 held
  NBD I/Os, a workload), SIGABRT, the ring file deleted, then the core;
- hung: one workload_run I/O on a delay bdev that takes 10 s, so the RPC
  is held while the commands look at it;
- often: workload_run -n 2311, counted by all three histogram tools;
- cpu: perf on a running workload names blktgt's own functions.
"""

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time

import pytest

import histtools
import probekit
from probekit import LineReader, ROOT, TIMEOUT
from gdbtools import abort_for_core, check_rows, known_state, start_target
from probekit import wait_until
from nbd_client import stats

GUIDE = os.path.join(ROOT, "doc", "blktgt.md")
BLOCK = re.compile(r"^<!-- decision-tree: ([\w-]+), (run|until Ctrl-C) -->\n"
                   r"```sh\n(.*?)^```$", re.M | re.S)
BRANCHES = ["crashed-before", "crashed", "hung", "slow-rpc", "often", "cpu"]
READY = r"Hit Ctrl-C to end\.|^probekit: tracing "
# The delay bdev's read latency, its maximum (BDEV_DELAY_MAX_US): what
# holds the call while the hung branch's commands look at it (0.7 to 1.9 s
# of them beside two busy loops).  Nothing the test controls can hold a
# delayed I/O longer: a paused export holds I/O before it reaches the bdev,
# where neither the ring nor gdb would see it as this branch shows it.
DELAY_US = 10000000
COUNT = 2311                        # a prime number of I/Os, as BCC's guide asks
GDB_KINDS = ("reactor", "bdev", "export", "conn", "io", "clock")


def branches():
    """{name: (mode, [command])} from the guide's marked blocks."""
    with open(GUIDE) as f:
        text = f.read()
    out = {}
    for name, mode, body in BLOCK.findall(text):
        assert name not in out, f"doc/blktgt.md: decision-tree block {name} twice"
        cmds = [ln for ln in body.replace("\\\n", " ").splitlines() if ln.strip()]
        out[name] = (mode, cmds)
    assert list(out) == BRANCHES, list(out)
    return out


def expand(cmd, **subs):
    """cmd with this run's build directory and the placeholders filled in."""
    bindir = os.path.join(probekit.BUILD, "bin") + "/"
    cmd = cmd.replace("$PWD/build/bin/", bindir)
    cmd = re.sub(r"(?<![\w/])build/bin/", bindir, cmd)
    for k, v in subs.items():
        if k.startswith("/"):
            cmd = cmd.replace(k, shlex.quote(str(v)))
        else:
            cmd = re.sub(rf"\b{k}\b", lambda m: shlex.quote(str(v)), cmd)
    return cmd


def run(cmd, **subs):
    """A "run" command to completion: its stdout lines (exit status 0)."""
    p = subprocess.run(["bash", "-c", expand(cmd, **subs)], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=TIMEOUT)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, f"{cmd}: exit {p.returncode}\n{err}"
    assert "Traceback" not in err, err
    return p.stdout.decode(errors="replace").splitlines()


class Watch:
    """An "until Ctrl-C" command, started and waited for until it traces."""

    def __init__(self, cmd, **subs):
        self.cmd = cmd
        self.proc = subprocess.Popen(["bash", "-c", "exec " + expand(cmd, **subs)],
                                     cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.out = LineReader(self.proc.stdout)

    def ready(self):
        self.out.wait_for(READY)
        return self

    def stop(self):
        rc = probekit.interrupt(self.proc, self.cmd)
        lines = self.out.drain(TIMEOUT)
        assert rc == 0, f"{self.cmd}: exit {rc}\n" + "\n".join(lines)
        return lines

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def watch_all(cmds, **subs):
    """Start every command at once (BCC compiles while bpftrace attaches),
    then wait for each to be tracing."""
    ws = [Watch(c, **subs) for c in cmds]
    try:
        for w in ws:
            w.ready()
    except BaseException:
        for w in ws:
            w.kill()
        raise
    return ws


def gdb_rows(lines):
    rows = {}
    for line in lines:
        if line.split(" ", 1)[0] in GDB_KINDS:
            words = shlex.split(line)
            rows.setdefault(words[0], []).append(dict(w.split("=", 1) for w in words[1:]))
    return rows


def ring_events(lines):
    """(tracepoint, object, args) of each event line of a text dump."""
    evs = []
    for ln in lines:
        m = re.match(r"^ +\d+ +[\d.]+ +\S+ +(\w+) +(\S+)(?: \(\S+\))? +(?:[\d.]+ +)?(.*)$", ln)
        if m and not ln.startswith("#"):
            evs.append((m.group(1), m.group(2),
                        dict(kv.split("=", 1) for kv in m.group(3).split())))
    return evs


def bt_hist_total(lines, name):
    """The sum of the rows of bpftrace map name's histogram."""
    total, inside = 0, False
    for ln in lines:
        if ln.startswith("@"):
            inside = ln.startswith(name)
            continue
        m = re.match(r"^\[[^\]]*[\])] +(\d+) \|", ln)
        if inside and m:
            total += int(m.group(1))
    return total


def send_rpc(sock_path, method, params):
    """Send one call and leave its reply unread: the socket, to read it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    s.connect(sock_path)
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                          "params": params}).encode())
    return s


def read_reply(s):
    buf = b""
    while True:
        chunk = s.recv(65536)
        assert chunk, f"connection closed before the reply; got {buf!r}"
        buf += chunk
        try:
            return json.loads(buf)
        except ValueError:
            continue


def test_readme_blocks():
    """The guide has the four symptoms, in order, with their commands."""
    b = branches()
    assert [m for m, _ in b.values()] == ["run", "run", "run", "until Ctrl-C",
                                          "until Ctrl-C", "run"]
    assert all(b[n][1] for n in BRANCHES)


@pytest.mark.needs("gdb")
def test_crashed(blktgt_bin, tmp_path):
    """The core alone lists the known objects, and the ring from the core
    holds the I/O that gdb says was in flight, at the same offset."""
    b = branches()
    t = start_target(blktgt_bin, tmp_path, "-e", "all")
    socks = []
    try:
        socks = list(known_state(t))
        r = {"pid": t.pid, "tids": {int(x) for x in os.listdir(f"/proc/{t.pid}/task")},
             "peers": {"A": "%s:%d" % socks[0].sock.getsockname(),
                       "B": "%s:%d" % socks[1].sock.getsockname()}}
        limits, pattern, cfilter = (run(c, PID=t.pid) for c in b["crashed-before"][1])
        assert re.match(r"Max core file size +unlimited +unlimited", limits[0]), limits
        assert len(pattern) == 1
        assert cfilter == ["0000003b"]
        core = abort_for_core(t, tmp_path)
    finally:
        for s in socks:
            getattr(s, "sock", s).close()
        if t.proc.poll() is None:
            t.proc.kill()
            t.proc.wait()
        t.remove_trace_file()           # nothing below may read the live ring

    gdb, summary, obj = b["crashed"][1]
    rows = gdb_rows(run(gdb, CORE=core))
    check_rows(rows, r, live=False)
    work = [x for x in rows["io"] if x["bdev"] == "n0" and x["id"] != "-"]
    assert work, rows["io"]
    # The oldest one: the newest may be caught between taking its id and
    # recording its submission.
    oldest = min(work, key=lambda x: int(x["id"], 16))

    lines = run(summary, CORE=core)
    assert lines[0] == f"# blktgt trace {core}: pid {t.pid}: summary of the events shown"
    counts = dict(re.findall(r"^(\w+) +(\d+)$", "\n".join(lines), re.M))
    # Every RPC answered but workload_run, which was running at the crash.
    assert int(counts["rpc_request"]) == int(counts["rpc_done"]) + 1
    assert int(counts["bdev_io_submit"]) > 1000

    evs = ring_events(run(obj, CORE=core, ID=oldest["id"]))
    subs = [e for e in evs if e[0] == "bdev_io_submit"]
    assert [(o, a["bdev"], a["type"], a["offset"], a["len"]) for _, o, a in subs] == \
        [(f"i{int(oldest['id'], 16)}", "n0", "0", oldest["offset"], oldest["len"])], evs


@pytest.mark.needs("gdb", "bpftrace")
def test_hung_and_slow_rpc(bpf, blktgt_bin, tmp_path):
    """A workload_run held 10 s by a delay bdev: the ring shows the request
    and its I/O unfinished, gdb the I/O itself; rpc.bt and rpclat, attached
    before, count that one call once it ends."""
    b = branches()
    t = probekit.Target(blktgt_bin, tmp_path, extra=("-e", "rpc,bdev")).start()
    watches, s = [], None
    try:
        t.rpc("bdev_malloc_create", name="M0", size_mb=16, block_size=512)
        t.rpc("bdev_delay_create", name="D0", base="M0", read_us=DELAY_US,
              write_us=DELAY_US)
        watches = watch_all(b["slow-rpc"][1], PID=t.pid)
        follow = Watch(f"build/bin/blktgt-trace -p {t.pid} -F --group bdev")
        try:
            s = send_rpc(t.rpc_sock, "workload_run",
                         {"bdev": "D0", "pattern": "randread", "io_size": 4096,
                          "queue_depth": 1, "count": 1})
            sent = time.monotonic()

            def late():
                # Past the delay, the I/O and the call have ended: say so.
                return (f"{time.monotonic() - sent:.1f} s after the call, "
                        f"delay {DELAY_US / 1e6:g} s")
            follow.out.wait_for(r" bdev_io_submit .* bdev=D0 ")
        finally:
            follow.kill()

        rpcs, bdev, gdb = b["hung"][1]
        evs = ring_events(run(rpcs, PID=t.pid))
        assert [(tp, a["method"]) for tp, _, a in evs] == [
            ("rpc_request", "bdev_malloc_create"), ("rpc_done", "bdev_malloc_create"),
            ("rpc_request", "bdev_delay_create"), ("rpc_done", "bdev_delay_create"),
            ("rpc_request", "workload_run")], (late(), evs)

        evs = ring_events(run(bdev, PID=t.pid))
        assert [(tp, a.get("bdev"), a.get("type")) for tp, _, a in evs] == \
            [("bdev_io_submit", "D0", "0")], (late(), evs)

        rows = gdb_rows(run(gdb, PID=t.pid))
        assert len(rows.get("io", [])) == 1, (late(), rows)
        (io,) = rows["io"]
        assert (io["bdev"], io["type"], io["len"], io["owner"], int(io["id"], 16)) == \
            ("D0", "read", "4096", "job_io_done", int(evs[0][1][1:])), io

        reply = read_reply(s)
        assert reply["result"]["ios"] == 1 and reply["result"]["errors"] == 0, reply
        # bpftrace 0.17 drops the events it reads after a SIGINT: wait for
        # the call's line before the Ctrl-C.
        watches[0].out.wait_for(r"^ *\d+\.\d+ +\d+ +workload_run ")
        bt, rpclat = (w.stop() for w in watches)
        watches = []
    finally:
        for w in watches:
            w.kill()
        if s:
            s.close()
        t.stop()

    calls = [ln for ln in bt if ln.startswith("@rpc_calls[")]
    assert calls == ["@rpc_calls[workload_run, 0]: 1"], bt
    (line,) = [ln for ln in bt if re.match(r"^ *\d+\.\d+ +\d+ +workload_run ", ln)]
    assert int(line.split()[3]) == 0 and int(line.split()[4]) >= DELAY_US, line

    hists = histtools.parse(rpclat)
    assert [(h["key"], histtools.total(h)) for h in hists] == \
        [({"method": "workload_run"}, 1)], rpclat
    (lo, hi), = histtools.nonzero(hists[0])
    assert hi >= DELAY_US, rpclat


@pytest.mark.needs("bpftrace", "py:bcc")
def test_often(bpf, target):
    """workload_run -n 2311: each of the three tools counts 2311 I/Os."""
    b = branches()
    target.rpc("bdev_malloc_create", name="Malloc0", size_mb=16, block_size=512)
    watches = watch_all(b["often"][1], PID=target.pid)
    try:
        histtools.workload(target, "Malloc0", "randread", 4096, 8, COUNT)
        libbpf, bcc, bt = (w.stop() for w in watches)
    finally:
        for w in watches:
            w.kill()
    for out in (libbpf, bcc):
        hists = histtools.parse(out)
        assert [histtools.total(h) for h in hists] == [COUNT], out
    assert bt_hist_total(bt, "@iolat_us[Malloc0, read]:") == COUNT, bt
    assert len([ln for ln in bt if ln.startswith("@iolat_us[")]) == 1, bt


@pytest.mark.needs("perf")
def test_cpu(target, tmp_path):
    """perf on a running workload names blktgt's own I/O functions."""
    b = branches()
    target.rpc("bdev_null_create", name="n0", size_mb=64, block_size=4096)
    s = send_rpc(target.rpc_sock, "workload_run",
                 {"bdev": "n0", "pattern": "randread", "io_size": 4096,
                  "queue_depth": 4, "seconds": 600})
    try:
        base = stats(target)["io_submitted"]
        wait_until("the workload's I/O", lambda: stats(target)["io_submitted"] > base + 1000)
        record, report = b["cpu"][1]
        data = tmp_path / "blktgt.perf"
        run(record, PID=target.pid, **{"/tmp/blktgt.perf": data})
        lines = run(report, **{"/tmp/blktgt.perf": data})
    finally:
        s.close()
    ours = {m.group(1) for m in (re.match(r"^ +[\d.]+% +\S+ +blktgt +\[\.\] (\w+)", ln)
                                  for ln in lines) if m}
    assert ours & {"bdev_submit", "bdev_io_complete", "job_io_done", "drain_completions",
                   "null_submit", "slot_submit.isra.0"}, lines
