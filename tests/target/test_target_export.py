# SPDX-License-Identifier: BSD-2-Clause
"""Exports: the INACTIVE -> ACTIVE <-> PAUSED -> INACTIVE state machine,
run on every reactor, and pause/resume under a running workload: in-flight
I/O drains before PAUSED, nothing is submitted while paused, held I/O goes
out at resume, and the workload's count is exact with no error."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

import probekit

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import elf as _elf, notes as _notes  # noqa: E402

N = 100003      # prime
# A workload the tests pause or delete under runs this long: 100003 I/Os of
# RAM took 130 to 215 ms, which a test thread held up by a loaded machine
# (172 ms, test_bdev_delay.py) could miss; a paused export holds the job's
# next I/Os, so once paused it cannot end before the resume.
RUN_S = 3


def start_workload(target, count=N, **kw):
    result = {}
    params = dict(export="e0", pattern="randrw", io_size=4096, queue_depth=16, count=count)
    params.update(kw)
    if params["count"] is None:
        del params["count"]

    def run():
        try:
            result["r"] = target.rpc("workload_run", **params)
        except Exception as e:   # reported by the caller's assertions
            result["e"] = e
    th = threading.Thread(target=run)
    th.start()
    # Running once the target says so: a readiness check, not a sleep.
    while target.rpc("target_stats")["workloads"] == 0:
        assert th.is_alive(), result
    return th, result


@pytest.fixture
def export(target):
    target.rpc("bdev_malloc_create", name="m0", size_mb=16, block_size=4096)
    assert target.rpc("export_create", name="e0", bdev="m0") is True
    return target


def state(target, name="e0"):
    return {e["name"]: e["state"] for e in target.rpc("export_list")}[name]


def settled(target):
    """Return once every reactor has run the messages sent to it before
    this call (a new job's start among them): an export's creation walks
    every reactor in turn, and each runs its messages in order.  The
    scratch export and its bdev are gone again at the return."""
    target.rpc("bdev_malloc_create", name="settle", size_mb=1, block_size=4096)
    assert target.rpc("export_create", name="settle", bdev="settle") is True
    assert target.rpc("export_delete", name="settle") is True
    assert target.rpc("bdev_delete", name="settle") is True


def shutdown_lines(lines):
    """blktgt's lines from its SIGTERM on, a command's directory left out."""
    lines = [re.sub(r"/\S*/(blktgt-trace )", r"\1", ln) for ln in lines]
    return lines[lines.index("blktgt: info: Terminated: shutting down"):]


def bdev_io_of_exited(pid):
    """(submitted, completed with status 0, completed otherwise) of the
    bdev group in the trace ring an exited blktgt kept, which is then
    removed."""
    path = f"/dev/shm/blktgt_trace.pid{pid}"
    try:
        p = subprocess.run([os.path.join(probekit.BUILD, "bin", "blktgt-trace"),
                            "-p", str(pid), "--json"], capture_output=True,
                           text=True, timeout=probekit.TIMEOUT)
        assert p.returncode == 0, p.stderr
        evs = json.loads(p.stdout)["events"]
    finally:
        if os.path.exists(path):
            os.unlink(path)
    done = [e["args"]["status"] for e in evs if e["tracepoint"] == "bdev_io_done"]
    return (sum(e["tracepoint"] == "bdev_io_submit" for e in evs),
            done.count(0), len(done) - done.count(0))


def test_state_machine(export):
    t = export
    assert state(t) == "ACTIVE"
    assert t.rpc("export_pause", name="e0") is True
    assert state(t) == "PAUSED"
    with pytest.raises(probekit.RpcError) as ei:
        t.rpc("export_pause", name="e0")
    assert ei.value.code == -114        # EALREADY
    assert t.rpc("export_resume", name="e0") is True
    assert state(t) == "ACTIVE"
    with pytest.raises(probekit.RpcError) as ei:
        t.rpc("export_resume", name="e0")
    assert ei.value.code == -114
    # A paused export can be deleted; the bdev is free again afterwards.
    assert t.rpc("export_pause", name="e0") is True
    assert t.rpc("export_delete", name="e0") is True
    assert t.rpc("export_list") == []
    assert t.rpc("bdev_delete", name="m0") is True


def test_workload_through_export(export):
    """A workload on an export goes through it: while the export is
    paused the job's first I/Os are held there and none reaches the bdev;
    at the resume all 1009 writes go out, each once, with no error."""
    assert export.rpc("export_pause", name="e0") is True
    th, res = start_workload(export, pattern="randwrite", queue_depth=8,
                             count=1009)
    try:
        settled(export)
        s = export.rpc("target_stats")
        assert (s["io_submitted"], s["workloads"]) == (0, 1), s
        assert th.is_alive(), res
    finally:
        assert export.rpc("export_resume", name="e0") is True
        th.join(probekit.TIMEOUT)
    r = res["r"]
    assert (r["ios"], r["writes"], r["errors"]) == (1009, 1009, 0), r
    s = export.rpc("target_stats")
    assert s["io_submitted"] == s["io_completed"] == 1009, s


def test_export_in_use_cannot_be_deleted(export):
    th, res = start_workload(export, count=None, seconds=RUN_S)
    try:
        with pytest.raises(probekit.RpcError) as ei:
            export.rpc("export_delete", name="e0")
        assert ei.value.code == -16
        assert [e["clients"] for e in export.rpc("export_list")] == [1]
    finally:
        th.join(probekit.TIMEOUT)
    assert res["r"]["errors"] == 0
    assert export.rpc("export_list")[0]["clients"] == 0
    assert export.rpc("export_delete", name="e0") is True


def test_pause_resume_under_load(export):
    t = export
    th, res = start_workload(t, count=None, seconds=RUN_S)
    try:
        assert t.rpc("export_pause", name="e0") is True
        assert state(t) == "PAUSED"
        # Quiesced: nothing is in flight and nothing new is submitted
        # while paused, so the counters stand still between two reads.
        s1 = t.rpc("target_stats")
        assert s1["io_submitted"] == s1["io_completed"]
        s2 = t.rpc("target_stats")
        assert s2["io_submitted"] == s1["io_submitted"]
        assert th.is_alive(), "the workload ended before the pause"
        assert t.rpc("export_resume", name="e0") is True
    finally:
        th.join(probekit.TIMEOUT)
    assert "e" not in res, res
    r = res["r"]
    assert r["ios"] > s1["io_submitted"] > 0, (r, s1)
    assert (r["errors"], r["reads"] + r["writes"]) == (0, r["ios"])
    s = t.rpc("target_stats")
    assert s["io_submitted"] == s["io_completed"] == r["ios"]


def test_pause_resume_seen_by_probes(export, bpf):
    """Every step of both changes, in order, on every reactor; in-flight I/O
    is zero when PAUSED completes; no I/O is submitted while paused; every
    held I/O is submitted after resume, once."""
    t = export
    prog = r'''
usdt::blktgt:export__change__start /str(arg0) == "e0"/ {
    printf("%llu change_start %s %s\n", nsecs, str(arg3), str(arg4));
    if (arg2 == 1) { @paused = 0; } }
usdt::blktgt:export__thread__start /str(arg0) == "e0"/ {
    printf("%llu thread_start %d %s\n", nsecs, arg1, str(arg3)); }
usdt::blktgt:export__thread__done /str(arg0) == "e0"/ {
    printf("%llu thread_done %d %s\n", nsecs, arg1, str(arg3)); }
usdt::blktgt:export__change__done /str(arg0) == "e0"/ {
    printf("%llu change_done %s %d inflight=%d\n", nsecs, str(arg3), arg4, @inflight);
    if (arg2 == 2) { @paused = 1; } }
usdt::blktgt:io__submit /str(arg1) == "m0"/ {
    @inflight = @inflight + 1; @submit = count();
    if (@paused) { @submit_while_paused = count(); } }
usdt::blktgt:io__done /str(arg1) == "m0"/ { @inflight = @inflight - 1; @done = count(); }
BEGIN { @inflight = 0; @paused = 0; printf("READY\n"); }
'''
    proc, out = probekit.bpftrace_program(t.pid, prog)
    th, res = start_workload(t, count=None, seconds=RUN_S)
    try:
        assert t.rpc("export_pause", name="e0") is True
        assert th.is_alive(), "the workload ended before the pause"
        assert t.rpc("export_resume", name="e0") is True
    finally:
        th.join(probekit.TIMEOUT)
    lines = probekit.stop_bpftrace(proc, out)
    text = "\n".join(lines)
    n = res["r"]["ios"]
    assert n > 0 and res["r"]["errors"] == 0
    steps = sorted((int(ln.split()[0]), ln.split(None, 1)[1]) for ln in lines
                   if ln[:1].isdigit() and " " in ln)
    got = [s for _, s in steps]
    expect = ["change_start ACTIVE PAUSED",
              "thread_start 0 PAUSED", "thread_done 0 PAUSED",
              "thread_start 1 PAUSED", "thread_done 1 PAUSED",
              "change_done PAUSED 0 inflight=0",
              "change_start PAUSED ACTIVE",
              "thread_start 0 ACTIVE", "thread_done 0 ACTIVE",
              "thread_start 1 ACTIVE", "thread_done 1 ACTIVE"]
    assert got[:len(expect)] == expect, text
    assert len(got) == len(expect) + 1 and got[-1].startswith("change_done ACTIVE 0 "), text
    assert f"@submit: {n}" in lines, text
    assert f"@done: {n}" in lines, text
    assert "@inflight: 0" in lines, text
    assert not [ln for ln in lines if ln.startswith("@submit_while_paused")
                and ln != "@submit_while_paused: 0"], text


def function_names(pid, binary):
    """{runtime address: name} of the functions of a running PIE binary."""
    real = os.path.realpath(binary)
    base = None
    with open(f"/proc/{pid}/maps") as f:
        for ln in f:
            parts = ln.split()
            if len(parts) >= 6 and parts[5] == real and int(parts[2], 16) == 0:
                base = int(parts[0].split("-")[0], 16)
                break
    assert base is not None, f"{real} is not mapped in {pid}"
    return {base + v: name for name, (v, size, t) in _elf.read_symbols(real).items()
            if t == "STT_FUNC"}


def test_state_change_runs_on_every_reactor(blktgt_bin, tmp_path, bpf):
    t = probekit.Target(blktgt_bin, tmp_path, threads=4).start()
    try:
        t.rpc("bdev_null_create", name="n", size_mb=1, block_size=512)
        prog = r'''
usdt::blktgt:foreach__start { @fe[arg0] = 1; @fstart = count(); }
usdt::blktgt:foreach__done /@fe[arg0]/ { delete(@fe[arg0]); @fdone = count(); }
usdt::blktgt:export__thread__start { @tstart[arg1] = count(); }
usdt::blktgt:export__thread__done { @tdone[arg1] = count(); }
usdt::blktgt:msg__exec { @exec[arg1] = count(); }
BEGIN { printf("READY\n"); }
'''
        # Function pointers are named from the ELF symbols here rather than
        # with usym(): bpftrace 0.17 takes close to a minute to symbolise
        # an ASan build's address space.
        names = function_names(t.pid, blktgt_bin)
        proc, out = probekit.bpftrace_program(t.pid, prog)
        t.rpc("export_create", name="x", bdev="n")
        t.rpc("export_pause", name="x")
        t.rpc("export_resume", name="x")
        t.rpc("export_delete", name="x")
        lines = probekit.stop_bpftrace(proc, out)
        for ln in list(lines):
            m = re.match(r"@exec\[(\d+)\]: (\d+)$", ln)
            if m:
                lines.append(f"@exec[{names.get(int(m.group(1)), '?')}]: {m.group(2)}")
        text = "\n".join(lines)
        for i in range(4):
            assert f"@tstart[{i}]: 4" in lines, text
            assert f"@tdone[{i}]: 4" in lines, text
        assert "@fstart: 4" in lines and "@fdone: 4" in lines, text
        # One step per reactor per change, each a named message.
        assert "@exec[foreach_step]: 16" in lines, text
        assert "@exec[foreach_finish]: 4" in lines, text
    finally:
        t.stop()


def test_shutdown_with_io_held_by_a_paused_export(export):
    """SIGTERM while a paused export holds a workload's I/O: shutdown
    resumes the export, the held I/O completes (none lost, none failed),
    the workload ends early, and the target exits 0 instead of waiting
    forever for I/O that a pause would never let finish."""
    t = export
    t.rpc("trace_enable_group", name="bdev")
    assert t.rpc("export_pause", name="e0") is True
    th, res = start_workload(t, pattern="write", queue_depth=16)
    # The workload submitted its first batch (its reactor has run the
    # job's start), and the pause holds all of it: nothing reaches the bdev.
    settled(t)
    s = t.rpc("target_stats")
    assert s["io_submitted"] == s["io_completed"] == 0, s
    t.stop()                    # SIGTERM; asserts exit status 0
    th.join(probekit.TIMEOUT)
    assert not th.is_alive()
    # The 16 held writes ran after the resume, and the job then ended:
    # its reply, and the log, in this order.
    e = res.get("e")
    assert isinstance(e, probekit.RpcError) and (e.code, e.error["message"]) == (
        -125, "workload stopped early by shutdown after 16 I/Os"), res
    assert shutdown_lines(t.out.lines) == [
        "blktgt: info: Terminated: shutting down",
        "blktgt: info: shutdown: resuming export e0 to let its held I/O finish",
        "blktgt: info: rpc workload_run: error -125: workload stopped early "
        "by shutdown after 16 I/Os",
        "blktgt: info: export e0 deleted",
        "blktgt: info: bdev m0 deleted",
        f"blktgt: info: trace ring kept: blktgt-trace -p {t.pid}",
        "blktgt: info: exiting cleanly"], t.out.lines[-12:]
    # They reached the bdev, and none failed.
    assert bdev_io_of_exited(t.pid) == (16, 16, 0)


class ThreadStop:
    """Stop one thread of a process (and only it) with ptrace, as a reactor
    stuck in a long callback would be, and let it go again."""
    SEIZE, INTERRUPT, DETACH = 0x4206, 0x4207, 17
    WALL = 0x40000000

    def __init__(self, tid):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long,
                                     ctypes.c_void_p, ctypes.c_void_p]
        self.tid = tid
        self.stopped = False

    def _ptrace(self, req):
        import ctypes
        if self.libc.ptrace(req, self.tid, None, None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"ptrace({req:#x}, {self.tid}): {os.strerror(err)}")

    def stop(self):
        self._ptrace(self.SEIZE)
        self._ptrace(self.INTERRUPT)
        os.waitpid(self.tid, self.WALL)     # returns once it is stopped
        self.stopped = True

    def resume(self):
        if self.stopped:
            self._ptrace(self.DETACH)
            self.stopped = False


def thread_of(pid, name):
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == name:
                return int(tid)
    raise AssertionError(f"no thread {name} in {pid}")


def cpu_ticks(pid, tid):
    """utime + stime of one thread, in clock ticks."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])     # fields 14 and 15 of stat


def test_shutdown_waits_for_a_change_without_spinning(blktgt_bin, tmp_path):
    """Shutdown begins while a pause is under way (its walk held up by a
    stopped reactor) and another export holds a workload's I/O.  Shutdown
    must wait for the pause to end before it can resume that export, and
    it waits asleep: reactor 0 uses almost no CPU meanwhile (it used to
    send itself a message on every loop pass, a busy loop).  Once the
    reactor runs again, both exports are resumed, the held I/O completes
    and the target exits 0."""
    t = probekit.Target(blktgt_bin, tmp_path, threads=3).start()
    stopper = None
    try:
        t.rpc("trace_enable_group", name="bdev")
        for n in ("0", "1"):
            t.rpc("bdev_malloc_create", name="m" + n, size_mb=16, block_size=4096)
            assert t.rpc("export_create", name="e" + n, bdev="m" + n) is True
        assert t.rpc("export_pause", name="e1") is True
        wl, wres = start_workload(t, export="e1", pattern="write", queue_depth=16)
        settled(t)                              # the job has started
        s = t.rpc("target_stats")
        assert s["io_submitted"] == 0, s        # all of it held by the pause

        stopper = ThreadStop(thread_of(t.pid, "reactor_2"))
        stopper.stop()
        pres = {}

        def pause():
            try:
                pres["r"] = t.rpc("export_pause", name="e0")
            except Exception as e:   # reported by the assertions below
                pres["e"] = e
        pth = threading.Thread(target=pause)
        pth.start()
        # The pause is under way (its walk waits for reactor_2) once a
        # resume is refused as busy.
        deadline = time.monotonic() + probekit.TIMEOUT
        while True:
            assert time.monotonic() < deadline, "the pause of e0 never started"
            try:
                t.rpc("export_resume", name="e0")
            except probekit.RpcError as e:
                if e.code == -16:
                    break
                assert e.code == -114, e     # EALREADY: not started yet

        t.proc.send_signal(signal.SIGTERM)
        t.out.wait_for(r"shutdown: resuming export e1 ")
        # Shutdown now waits for e0's pause.  Measure reactor 0's CPU time
        # over a second of that wait (a measurement window, not a wait for
        # readiness: nothing signals "still not spinning").
        before, t0 = cpu_ticks(t.pid, t.pid), time.monotonic()
        time.sleep(1.0)
        used = (cpu_ticks(t.pid, t.pid) - before) / os.sysconf("SC_CLK_TCK")
        wall = time.monotonic() - t0
        assert t.proc.poll() is None
        assert used < 0.1 * wall, f"reactor 0 used {used:.2f} s of CPU in {wall:.2f} s"

        stopper.resume()
        assert t.proc.wait(timeout=probekit.TIMEOUT) == 0
        wl.join(probekit.TIMEOUT)
        pth.join(probekit.TIMEOUT)
        assert not wl.is_alive() and not pth.is_alive()
        # The pause ended (shutdown waited for it), then e0 was resumed;
        # e1's 16 held writes ran after its resume, and its job ended.
        assert pres == {"r": True}, pres
        e = wres.get("e")
        assert isinstance(e, probekit.RpcError) and (e.code, e.error["message"]) == (
            -125, "workload stopped early by shutdown after 16 I/Os"), wres
        lines = shutdown_lines(t.out.drain(5))
        assert lines[:4] == [
            "blktgt: info: Terminated: shutting down",
            "blktgt: info: shutdown: resuming export e1 to let its held I/O finish",
            "blktgt: info: rpc workload_run: error -125: workload stopped early "
            "by shutdown after 16 I/Os",
            "blktgt: info: shutdown: resuming export e0 to let its held I/O finish",
        ], lines
        assert lines[-1] == "blktgt: info: exiting cleanly", lines
        assert bdev_io_of_exited(t.pid) == (16, 16, 0)
    finally:
        if stopper:
            stopper.resume()
        t.stop()
