# SPDX-License-Identifier: BSD-2-Clause
"""The trace ring inside blktgt: -e, the trace_* RPCs, exact event counts
from a known workload, NBD requests related to the bdev I/O they cause,
post-mortem after kill -9, and lining a bpftrace trace up with the ring."""

import json
import os
import platform
import re
import shlex
import signal
import struct
import subprocess
import time

import pytest

import probekit

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("qemu-io")

N = 23              # a prime number of I/Os
CLOCKS = [pytest.param("tsc", marks=pytest.mark.skipif(
              platform.machine() != "x86_64", reason="the TSC is x86-64's")),
          "monotonic"]


def shm(pid):
    return f"/dev/shm/blktgt_trace.pid{pid}"


@pytest.fixture
def start(blktgt_bin, tmp_path):
    """start(*args) -> a running blktgt; stopped and its trace file
    removed at the end."""
    targets = []

    def go(*args, threads=2):
        t = probekit.Target(blktgt_bin, tmp_path, threads=threads, extra=list(args))
        t.start()
        targets.append(t)
        return t
    yield go
    for t in targets:
        if t.proc.poll() is None:
            t.stop()
        if os.path.exists(shm(t.pid)):
            os.unlink(shm(t.pid))


def dump(pid, *args):
    tool = os.path.join(probekit.BUILD, "bin", "blktgt-trace")
    p = subprocess.run([tool, "-p", str(pid), *args], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stderr
    return p.stdout


def events(pid, *args):
    return json.loads(dump(pid, "--json", *args))["events"]


def workload(t, count=N, bdev="m0"):
    r = t.rpc("workload_run", bdev=bdev, pattern="randrw", io_size=4096,
              queue_depth=4, count=count)
    assert r["ios"] == count


def check_io_pairs(evs, count):
    """Exactly count submits and count completions, one of each per
    object, each completion after its submit on the same object."""
    sub = [e for e in evs if e["tracepoint"] == "bdev_io_submit"]
    done = [e for e in evs if e["tracepoint"] == "bdev_io_done"]
    assert len(sub) == len(done) == count
    assert len({e["object"] for e in sub}) == count
    assert sorted(e["object"] for e in sub) == sorted(e["object"] for e in done)
    first = {e["object"]: e["ts_ns"] for e in sub}
    for e in done:
        assert e["ts_ns"] >= first[e["object"]] and e["elapsed_us"] is not None
        assert e["args"]["status"] == 0
    return sub, done


def test_start_line_gives_the_dump_command(start):
    t = start("-e", "bdev:0x1,rpc")
    m = t.out.wait_for(r"^blktgt: trace ring (\S+) \((\d+) threads x (\d+) slots\), "
                       r"groups (\S+); dump: (.+)$")
    assert m.group(1) == shm(t.pid) and m.group(2) == "2"
    assert m.group(4) == "bdev:0x1,rpc"
    cmd = shlex.split(m.group(5))
    assert cmd[-2:] == ["-p", str(t.pid)]
    # The command runs as printed.
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode == 0 and "enabled now: bdev:0x1,rpc:0x3" in p.stdout


def test_workload_gives_exact_submit_and_done_pairs(start):
    t = start("-e", "bdev")
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    workload(t)
    evs = events(t.pid)
    sub, _ = check_io_pairs(evs, N)
    assert {e["args"]["bdev"] for e in sub} == {"m0"}
    assert {e["args"]["len"] for e in sub} == {4096}
    # The workload runs on one reactor; no other group was enabled.
    assert len({e["thread"] for e in evs}) == 1
    assert {e["group"] for e in evs} == {"bdev"}


def test_disable_group_rpc_stops_recording(start):
    t = start("-e", "bdev")
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    workload(t)
    r = t.rpc("trace_disable_group", name="bdev")
    assert r["groups"]["bdev"] == 0 and r["file"] == shm(t.pid)
    workload(t)
    check_io_pairs(events(t.pid), N)
    r = t.rpc("trace_enable_group", name="bdev", mask=2)      # completions only
    assert r["groups"]["bdev"] == 2
    workload(t)
    evs = events(t.pid)
    assert sum(e["tracepoint"] == "bdev_io_submit" for e in evs) == N
    assert sum(e["tracepoint"] == "bdev_io_done" for e in evs) == 2 * N


def test_enable_group_rpc_at_run_time(start):
    t = start()
    t.out.wait_for(r"groups none")
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    workload(t)
    assert events(t.pid) == []
    r = t.rpc("trace_enable_group", name="all")
    assert all(r["groups"].values())
    assert r["dump"].endswith(f"blktgt-trace -p {t.pid}")
    workload(t)
    check_io_pairs(events(t.pid), N)
    info = t.rpc("trace_get_info")
    assert info == r


def test_trace_rpc_errors(start):
    t = start()
    with pytest.raises(probekit.RpcError) as e:
        t.rpc("trace_enable_group", name="nosuch")
    assert e.value.code == -2 and "no trace group 'nosuch'" in str(e.value)
    with pytest.raises(probekit.RpcError) as e:
        t.rpc("trace_enable_group", name="bdev", mask=4)
    assert e.value.code == -32602 and "mask" in str(e.value)
    with pytest.raises(probekit.RpcError) as e:
        t.rpc("trace_disable_group", name="bdev", mask=1)
    assert e.value.code == -32602
    with pytest.raises(probekit.RpcError) as e:
        t.rpc("trace_disable_group")
    assert e.value.code == -32602


def test_enable_option_errors(blktgt_bin):
    for spec, why in (("nosuch", "no trace group"), ("bdev:0x8", "no tracepoint"),
                      ("bdev:x", "MASK")):
        p = subprocess.run([blktgt_bin, "-e", spec], capture_output=True, text=True,
                           timeout=probekit.TIMEOUT)
        assert p.returncode == 2 and p.stdout == ""
        assert len(p.stderr.splitlines()) == 1 and why in p.stderr
    p = subprocess.run([blktgt_bin, "-e", "help"], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0
    for name in ("bdev_io_submit", "nbd_request", "rpc_request", "msg_exec"):
        assert name in p.stdout


def test_clean_exit_removes_an_empty_file_and_keeps_a_full_one(start):
    t = start()
    assert os.path.exists(shm(t.pid))
    t.stop()
    assert not os.path.exists(shm(t.pid))
    t = start("-e", "bdev")
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    workload(t)
    t.stop()
    assert os.path.exists(shm(t.pid))
    check_io_pairs(events(t.pid), N)


CONVERTED = ("ts_ns", "time_us", "elapsed_us")


def same_events(a, b, start_ns):
    """a and b are the same events: equal in what was recorded (the raw
    "ts" included), and in converted times equal within the calibration's
    error, which blktgt-trace documents as about 1e-5 of the time since
    start (1e-4 here, the rate agreement test_tsc_calibration_is_refreshed
    asserts, with a 1 us floor): a calibration pair written between two
    dumps may move a TSC event's converted time, never its record."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert {k: v for k, v in x.items() if k not in CONVERTED} == \
            {k: v for k, v in y.items() if k not in CONVERTED}
        err = 1e-4 * (x["ts_ns"] - start_ns) + 1000
        assert abs(x["ts_ns"] - y["ts_ns"]) <= err, (x, y)
        assert (x["elapsed_us"] is None) == (y["elapsed_us"] is None)
        if x["elapsed_us"] is not None:
            assert abs(x["elapsed_us"] - y["elapsed_us"]) * 1000 <= 2 * err, (x, y)


@pytest.mark.parametrize("clock", CLOCKS)
def test_kill9_then_dump(start, monkeypatch, clock):
    monkeypatch.setenv("BLKTGT_TRACE_CLOCK", clock)
    t = start("-e", "bdev,rpc")
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    workload(t)
    live = json.loads(dump(t.pid, "--json"))
    t.proc.send_signal(signal.SIGKILL)
    t.proc.wait(timeout=probekit.TIMEOUT)
    assert os.path.exists(shm(t.pid))
    info = json.loads(dump(t.pid, "--json"))
    dead = info["events"]
    if clock == "monotonic":
        # Recorded as CLOCK_MONOTONIC: nothing to convert, so exact.
        assert dead == live["events"] and all(e["ts"] == e["ts_ns"] for e in dead)
    else:
        assert info["clock_source"] == "TSC"
        same_events(dead, live["events"], info["start_ns"])
    check_io_pairs(dead, N)
    rpcs = [(e["tracepoint"], e["args"]["method"]) for e in dead if e["group"] == "rpc"]
    assert rpcs == [("rpc_request", "bdev_malloc_create"), ("rpc_done", "bdev_malloc_create"),
                    ("rpc_request", "workload_run"), ("rpc_done", "workload_run")]
    assert "not running" in dump(t.pid).splitlines()[0]


def test_nbd_requests_relate_to_bdev_io(start):
    t = start("-e", "bdev,nbd")
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    t.rpc("export_create", name="e0", bdev="m0")
    cmds = []
    for i in range(N):
        cmds += ["-c", f"write -P {i % 250} {i * 4096} 4k"]
    p = subprocess.run(["qemu-io", "-f", "raw", *cmds, t.nbd_uri("e0")],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr
    evs = events(t.pid)
    req = {e["object"]: e for e in evs if e["tracepoint"] == "nbd_request"}
    rep = [e for e in evs if e["tracepoint"] == "nbd_reply"]
    writes = [o for o, e in req.items() if e["args"]["cmd"] == 1]
    assert len(writes) == N
    # Every request is recorded, as nbd__request fires for it: qemu-io's
    # closing NBD_CMD_DISC (2) too, the one request without a reply.
    disc = [o for o, e in req.items() if e["args"]["cmd"] == 2]
    assert len(disc) == 1
    assert sorted(e["object"] for e in rep) == sorted(set(req) - set(disc))
    sub = [e for e in evs if e["tracepoint"] == "bdev_io_submit"]
    # Every bdev I/O was caused by an NBD request recorded before it, and
    # every write request caused exactly one.
    for e in sub:
        assert e["related"] in req and req[e["related"]]["ts_ns"] <= e["ts_ns"]
    caused = [e["related"] for e in sub]
    for w in writes:
        assert caused.count(w) == 1
    text = dump(t.pid)
    assert re.search(r" bdev_io_submit +i\d+ \(r\d+\) ", text)


def header_clock(pid):
    """The file header's clock fields: (clock, cal_last, start pair, [pair 0,
    pair 1]), each pair (tsc, CLOCK_MONOTONIC ns); see target/trace.h."""
    with open(shm(pid), "rb") as f:
        v = struct.unpack_from("<IIQQQQQQ", f.read(320), 232)
    return v[0], v[1], v[2:4], [v[4:6], v[6:8]]


@pytest.mark.parametrize("clock", CLOCKS)
def test_bpftrace_lines_merge_with_the_ring(start, bpf, tmp_path, monkeypatch, clock):
    """The same clock on both tiers: a bpftrace io__submit or io__done
    line (nsecs) sorts just before the ring's bdev_io_submit or
    bdev_io_done of the same I/O, whether the ring recorded
    CLOCK_MONOTONIC or TSC ticks the dump converted.  The probe and its
    event fire at one call site: N I/Os are N hits of each probe and N of
    each event, one hit and one event per I/O."""
    monkeypatch.setenv("BLKTGT_TRACE_CLOCK", clock)
    t = start("-e", "bdev")
    assert t.rpc("trace_get_info")["clock"] == clock
    assert header_clock(t.pid)[0] == {"monotonic": 0, "tsc": 1}[clock]
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    # The tick wakes bpftrace's output loop: bpftrace 0.17 can miss a
    # Ctrl-C that arrives while it waits for events and none follow (seen
    # here in 4 of 12 runs).  Its lines do not start with a number, so
    # --merge skips them.
    prog = ('BEGIN { printf("READY\\n"); } '
            'usdt::blktgt:io__submit { printf("%lld io__submit id=%lld\\n", nsecs, arg0); } '
            'usdt::blktgt:io__done { printf("%lld io__done id=%lld\\n", nsecs, arg0); } '
            'interval:ms:100 { printf("tick\\n"); }')
    proc, out = probekit.bpftrace_program(t.pid, prog)
    workload(t)
    # printf output travels through a perf buffer that bpftrace 0.17 may
    # not drain on Ctrl-C: wait for every line before stopping it.
    out.wait_until(lambda lines: sum(" io__done id=" in ln for ln in lines) >= N)
    lines = probekit.stop_bpftrace(proc, out)
    bt = tmp_path / "bt.out"
    bt.write_text("\n".join(lines) + "\n")
    merged = events(t.pid, "--merge", str(bt))
    ring = [e for e in merged if e["source"] == "ring"]
    check_io_pairs(ring, N)
    bts = [i for i, e in enumerate(merged) if e["source"] == "bpftrace"]
    hits = [merged[i]["text"].split()[0] for i in bts]
    assert (hits.count("io__submit"), hits.count("io__done")) == (N, N)
    for i in bts:
        probe, ident = merged[i]["text"].split()[:2]
        nxt = next(e for e in merged[i + 1:] if e["source"] == "ring")
        assert (nxt["tracepoint"], nxt["object"]) == (
            {"io__submit": "bdev_io_submit", "io__done": "bdev_io_done"}[probe],
            f"i{ident[len('id='):]}")


def test_ring_works_in_a_usdt0_build(build, tmp_path):
    """The trace ring does not depend on USDT: a USDT=0 blktgt records the
    same exact pairs."""
    binary = os.path.join(build, "nousdt", "bin", "blktgt")
    assert os.access(binary, os.X_OK), f"{binary} missing; 'make test' builds it"
    t = probekit.Target(binary, tmp_path, extra=["-e", "bdev"])
    t.start()
    try:
        t.rpc("bdev_null_create", name="m0", size_mb=4, block_size=512)
        workload(t)
        check_io_pairs(events(t.pid), N)
    finally:
        t.stop()
        if os.path.exists(shm(t.pid)):
            os.unlink(shm(t.pid))


def test_rpc_py_forms(start):
    t = start()

    def rpc_py(*args):
        p = subprocess.run([probekit.PYTHON, probekit.RPC_PY, "-s", t.rpc_sock, *args],
                           capture_output=True, text=True, timeout=probekit.TIMEOUT)
        return p.returncode, p.stdout, p.stderr

    rc, out, _ = rpc_py("trace_enable_group", "bdev", "0x1")
    assert rc == 0 and json.loads(out)["groups"]["bdev"] == 1
    rc, out, _ = rpc_py("trace_enable_group", "nbd")
    assert rc == 0 and json.loads(out)["groups"]["nbd"] == 3
    rc, out, _ = rpc_py("trace_disable_group", "bdev")
    assert rc == 0 and json.loads(out)["groups"] == {"bdev": 0, "nbd": 3, "rpc": 0, "thread": 0}
    rc, out, _ = rpc_py("trace_get_info")
    assert rc == 0 and json.loads(out)["file"] == shm(t.pid)
    rc, out, err = rpc_py("trace_enable_group", "nosuch")
    assert rc == 1 and out == "" and "no trace group 'nosuch'" in err
    rc, out, err = rpc_py("trace_enable_group", "bdev", "0xz")
    assert rc == 2 and "expected a mask" in err


def test_tsc_calibration_is_refreshed(start, monkeypatch):
    """With the TSC, blktgt writes (TSC, CLOCK_MONOTONIC) pairs at 4 ms,
    8 ms, ... after start, then every second, each into the slot the header
    does not name, then names it; every pair agrees on the TSC's rate."""
    if platform.machine() != "x86_64":
        pytest.skip("the TSC is x86-64's")
    monkeypatch.setenv("BLKTGT_TRACE_CLOCK", "tsc")
    t = start()
    clock, last, first, pairs = header_clock(t.pid)
    assert clock == 1
    # The start-up slope spans at least 2 ms.
    assert pairs[last][1] - first[1] >= 2_000_000 and pairs[last][0] > first[0]
    seen = [pairs[last]]
    deadline = time.monotonic() + probekit.TIMEOUT
    # A pair past 0.6 s, and at least 4 seen: a poller the scheduler held
    # through the pairs at 16 .. 512 ms sees the ones every second after.
    while seen[-1][1] - first[1] < 600_000_000 or len(seen) < 4:
        assert time.monotonic() < deadline, f"calibration pairs stopped: {seen}"
        _, last2, first2, pairs2 = header_clock(t.pid)
        assert first2 == first
        if pairs2[last2] != seen[-1]:
            assert pairs2[last2][0] > seen[-1][0] and pairs2[last2][1] > seen[-1][1]
            seen.append(pairs2[last2])
        time.sleep(0.01)
    rates = [(tsc - first[0]) / (ns - first[1]) for tsc, ns in seen]
    for r in rates:
        assert r == pytest.approx(rates[-1], rel=1e-4)


def test_bad_clock_choice_is_refused(blktgt_bin, tmp_path, monkeypatch):
    monkeypatch.setenv("BLKTGT_TRACE_CLOCK", "hpet")
    p = subprocess.run([blktgt_bin, "-l", "none", "-s", str(tmp_path / "s")],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == "blktgt: BLKTGT_TRACE_CLOCK=hpet: expected 'tsc' or 'monotonic'\n"
    assert not os.path.exists(tmp_path / "s")


def nbd_writes(t, count=N):
    """count 4 KiB NBD writes from qemu-io, one request each."""
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    t.rpc("export_create", name="e0", bdev="m0")
    cmds = []
    for i in range(count):
        cmds += ["-c", f"write -P {i % 250} {i * 4096} 4k"]
    p = subprocess.run(["qemu-io", "-f", "raw", *cmds, t.nbd_uri("e0")],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr


def test_object_filter_gives_one_nbd_request_with_its_bdev_io(start):
    t = start("-e", "bdev,nbd")
    nbd_writes(t)
    t.stop()            # the file no longer changes: dumps agree exactly
    evs = events(t.pid)
    writes = [e["object"] for e in evs
              if e["tracepoint"] == "nbd_request" and e["args"]["cmd"] == 1]
    assert len(writes) == N
    r = writes[N // 2]
    (io,) = [e["object"] for e in evs if e["tracepoint"] == "bdev_io_submit"
             and e["related"] == r]
    want = [e for e in evs if e["object"] in (r, io)]
    assert [e["tracepoint"] for e in want] == \
        ["nbd_request", "bdev_io_submit", "bdev_io_done", "nbd_reply"]
    assert events(t.pid, "--object", r) == want
    assert events(t.pid, "--object", io) == want
    s = json.loads(dump(t.pid, "--json", "--summary", "--object", r))["summary"]
    assert s["tracepoints"] == {"nbd_request": 1, "bdev_io_submit": 1,
                                "bdev_io_done": 1, "nbd_reply": 1}
    assert s["objects"]["nbd_req"]["total_us"] == round(want[-1]["elapsed_us"], 3)


def test_summary_counts_a_known_workload(start):
    t = start("-e", "bdev,rpc")
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    workload(t)
    s = json.loads(dump(t.pid, "--json", "--summary"))["summary"]
    assert s["tracepoints"] == {"bdev_io_submit": N, "bdev_io_done": N,
                                "rpc_request": 2, "rpc_done": 2}
    io = s["objects"]["bdev_io"]
    assert (io["objects"], io["done"], io["without_done"]) == (N, N, 0)
    assert sum(c for _, _, c in io["log2_us"]) == N
    rpc = s["objects"]["rpc_req"]
    assert (rpc["objects"], rpc["done"]) == (2, 2)
    text = dump(t.pid, "--summary")
    assert re.search(rf"^bdev_io_done +{N}$", text, re.M)


def test_chrome_trace_of_nbd_writes(start):
    """One span per object, matching begin/end where I/Os overlap on a
    reactor (queue depth 4), and one flow per NBD request that caused a
    bdev I/O; times are the dump's microseconds."""
    t = start("-e", "bdev,nbd")
    nbd_writes(t)
    t.rpc("workload_run", bdev="m0", pattern="randrw", io_size=4096,
          queue_depth=4, count=N)
    t.stop()
    doc = json.loads(dump(t.pid, "--format", "chrome"))
    ev = doc["traceEvents"]
    full = events(t.pid)
    assert {e["ph"] for e in ev} <= set("MiXbesf")
    # A life spans an object's first event to its last: every object but
    # qemu-io's closing NBD_CMD_DISC, a request with no reply.
    seen = [e["object"] for e in full if e["object"]]
    objs = {o for o in seen if seen.count(o) > 1}
    assert [e["args"]["cmd"] for e in full if e["object"] in set(seen) - objs] == [2]
    spans = {}
    for e in ev:
        if e["ph"] in "be":
            spans.setdefault(e["id"], []).append(e["ph"])
        elif e["ph"] == "X":
            spans.setdefault(e["args"]["object"], []).append("X")
    assert set(spans) == objs
    assert all(v in (["X"], ["b", "e"]) for v in spans.values())
    # qd 4: the workload's I/Os overlap, so some lives are async pairs.
    assert sum(v == ["b", "e"] for v in spans.values()) >= 2
    caused = [e for e in full if e["tracepoint"] == "bdev_io_submit" and e["related"]]
    assert len(caused) >= N
    s = [e for e in ev if e["ph"] == "s"]
    f = [e for e in ev if e["ph"] == "f"]
    assert len(s) == len(f) == len(caused)
    assert sorted(e["id"] for e in s) == sorted(e["id"] for e in f)
    assert all(e["bp"] == "e" for e in f)
    assert sorted(e["ts"] for e in f) == sorted(e["time_us"] for e in caused)


def test_follow_counts_what_the_writer_overwrote(start):
    """-F prints events as they are recorded; a reader that falls more
    than a ring behind says exactly how many it never saw."""
    t = start("-e", "bdev")
    t.rpc("bdev_malloc_create", name="m0", size_mb=4, block_size=512)
    tool = os.path.join(probekit.BUILD, "bin", "blktgt-trace")
    f = subprocess.Popen([tool, "-F", "-p", str(t.pid)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        out = probekit.LineReader(f.stdout)
        out.wait_for(r"^# following; Ctrl-C to end$")
        slots = int(re.search(r"x (\d+) slots", out.lines[0]).group(1))

        def shown(lines):
            return sum(not ln.startswith("#") for ln in lines)
        workload(t)
        out.wait_until(lambda lines: shown(lines) == 2 * N)
        # Stopped, the reader cannot keep up: the writer laps it.
        big = slots // 2 + 1000
        f.send_signal(signal.SIGSTOP)
        try:
            workload(t, count=big)
        finally:
            f.send_signal(signal.SIGCONT)
        lapped = 2 * big - (slots - 1)
        out.wait_until(lambda lines: shown(lines) == 2 * N + slots - 1)
        t.stop()
        assert f.wait(timeout=probekit.TIMEOUT) == 0, f.stderr.read()
        lines = out.drain()
        assert lines[-1] == (f"# followed until pid {t.pid} exited; {lapped} events "
                             "overwritten while following, before this reader copied "
                             f"them: the writer lapped it (thread 1: {lapped})")
        assert shown(lines) == 2 * N + slots - 1
    finally:
        if f.poll() is None:
            f.kill()
            f.wait()
