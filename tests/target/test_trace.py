# SPDX-License-Identifier: BSD-2-Clause
"""The trace ring (target/trace.[ch]) and its dump tool, without blktgt.

tests/lib/trace_driver.c records a known sequence on several threads (its
header comment gives the formulas); these tests compile it against
target/trace.c, dump what it recorded with target/blktgt-trace, and compare
event by event."""

import json
import os
import re
import shutil
import signal
import subprocess

import pytest

import probekit

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("strace")

TOOL = os.path.join(probekit.BUILD, "bin", "blktgt-trace")
DRIVER_SRC = os.path.join(probekit.ROOT, "tests", "lib", "trace_driver.c")
TRACE_SRC = os.path.join(probekit.ROOT, "target", "trace.c")
CFLAGS = ["-std=gnu11", "-pthread", "-D_GNU_SOURCE", "-O2", "-g", "-Wall", "-Wextra",
          "-Wshadow", "-Wstrict-prototypes", "-Wmissing-prototypes",
          "-Wno-unused-parameter", "-Wformat=2", "-Werror",
          "-I" + os.path.join(probekit.ROOT, "target")]
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]


def shm_path(pid):
    return f"/dev/shm/blktgt_trace.pid{pid}"


@pytest.fixture(scope="session")
def drivers(tmp_path_factory):
    """trace_driver built plain and with ASan+UBSan, on first use."""
    built = {}
    tmp = tmp_path_factory.mktemp("trace")

    def get(kind):
        if kind not in built:
            out = str(tmp / f"trace_driver-{kind}")
            extra = SAN if kind == "asan" else []
            subprocess.run(["cc", *CFLAGS, *extra, "-o", out, DRIVER_SRC, TRACE_SRC],
                           check=True)
            built[kind] = out
        return built[kind]
    return get


@pytest.fixture(params=["plain", "asan"])
def driver(request, drivers):
    """The recorder tests run on both builds."""
    return drivers(request.param)


@pytest.fixture
def plain_driver(drivers):
    """Format and option tests need only the plain build."""
    return drivers("plain")


class Driver:
    """A trace_driver run; with wait=True it stays alive after recording
    until finish() or kill()."""

    def __init__(self, binary, *args, wait=False):
        self.proc = subprocess.Popen([binary, *args, *(["-w"] if wait else [])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        self.path = shm_path(self.pid)
        self.out = probekit.LineReader(self.proc.stdout)
        self.out.wait_for(r"trace_driver: recorded pid=\d+")

    def finish(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=probekit.TIMEOUT) == 0, self.proc.stderr.read()
        return self.out.wait_for(r"fini kept=(\d+)")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=probekit.TIMEOUT)

    def cleanup(self):
        if self.proc.poll() is None:
            self.kill()
        if os.path.exists(self.path):
            os.unlink(self.path)


@pytest.fixture
def run_driver():
    runs = []

    def start(binary, *args, wait=False):
        d = Driver(binary, *args, wait=wait)
        runs.append(d)
        return d
    yield start
    for d in runs:
        d.cleanup()


def dump(*args, check=True):
    p = subprocess.run([probekit.PYTHON, TOOL, *args], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def dump_json(*args):
    return json.loads(dump(*args, "--json").stdout)


def expected(t, i):
    """What thread t records for pair i (trace_driver.c's formulas)."""
    io, req = (t + 1) * 1000000 + i, (t + 1) * 1000000 + 500000 + i
    length, off, failed = 4096 * (1 + i % 4), 4096 * i, i % 7 == 3
    return [
        ("nbd_request", f"c{t + 1}", f"r{req}", None,
         {"cmd": i % 2, "len": length, "offset": off, "handle": i}),
        ("bdev_io_submit", f"t{t}", f"i{io}", f"r{req}",
         {"bdev": f"bdev{t}", "type": i % 2, "len": length, "offset": off}),
        ("bdev_io_done", f"t{t}", f"i{io}", None,
         {"status": -5 if failed else 0, "len": length}),
        ("nbd_reply", f"c{t + 1}", f"r{req}", None, {"error": 5 if failed else 0}),
    ]


def ring_events(doc, thread):
    return [(e["tracepoint"], e["owner"], e["object"], e["related"], e["args"])
            for e in doc["events"] if e["thread"] == thread]


def expected_events(t, pairs, groups=("bdev", "nbd")):
    out = []
    for i in range(pairs):
        out += [e for e in expected(t, i)
                if e[0].split("_")[0] in groups]
    return out


def test_exact_pairs_by_object_live(driver, run_driver):
    threads, pairs = 3, 23
    d = run_driver(driver, "-t", str(threads), "-n", str(pairs), "-e", "bdev,nbd",
                   wait=True)
    doc = dump_json("-p", str(d.pid))
    assert doc["pid"] == d.pid and doc["lost"] == 0
    assert len(doc["events"]) == threads * pairs * 4
    for t in range(threads):
        assert ring_events(doc, t) == expected_events(t, pairs)
        info = doc["threads"][t]
        assert (info["written"], info["kept"], info["overwritten"]) == (pairs * 4, pairs * 4, 0)
    # Merged in time order across threads.
    ts = [e["ts_ns"] for e in doc["events"]]
    assert ts == sorted(ts)
    # Exactly one submit and one completion per I/O object, and every
    # completion shows the time since its submit.
    submits = [e["object"] for e in doc["events"] if e["tracepoint"] == "bdev_io_submit"]
    dones = [e for e in doc["events"] if e["tracepoint"] == "bdev_io_done"]
    assert len(submits) == len(set(submits)) == threads * pairs
    assert sorted(submits) == sorted(e["object"] for e in dones)
    assert all(e["elapsed_us"] is not None and e["elapsed_us"] >= 0 for e in dones)
    assert all(e["elapsed_us"] is None for e in doc["events"]
               if e["tracepoint"] in ("bdev_io_submit", "nbd_request"))
    assert d.finish().group(1) == str(threads * pairs * 4)
    # Something was recorded, so the file outlives a clean exit.
    assert os.path.exists(d.path)


def test_text_output(plain_driver, run_driver):
    d = run_driver(plain_driver, "-t", "2", "-n", "5", "-e", "bdev,nbd")
    d.finish()
    out = dump("-r", d.path).stdout.splitlines()
    events = [ln for ln in out if not ln.startswith("#")]
    assert len(events) == 2 * 5 * 4
    submit = [ln for ln in events if " bdev_io_submit " in ln and " i1000003 " in ln]
    assert len(submit) == 1
    fields = submit[0].split()
    # thread, time, owner, tracepoint, object (related), args by name
    assert fields[0] == "0" and fields[2] == "t0" and fields[3] == "bdev_io_submit"
    assert fields[4:6] == ["i1000003", "(r1500003)"]
    assert fields[6:] == ["bdev=bdev0", "type=1", "len=16384", "offset=12288"]
    done = [ln.split() for ln in events if " bdev_io_done " in ln and " i1000003 " in ln]
    assert len(done) == 1 and done[0][6:] == ["status=-5", "len=16384"]
    assert float(done[0][5]) >= 0   # time since the object's submit


def test_disabled_group_records_nothing(driver, run_driver):
    d = run_driver(driver, "-t", "2", "-n", "23", "-e", "bdev")
    d.finish()
    doc = dump_json("-r", d.path)
    for t in range(2):
        assert ring_events(doc, t) == expected_events(t, 23, groups=("bdev",))
    assert not [e for e in doc["events"] if e["group"] != "bdev"]


def test_mask_selects_tracepoints(plain_driver, run_driver):
    d = run_driver(plain_driver, "-t", "1", "-n", "7", "-e", "nbd:0x1")
    d.finish()
    doc = dump_json("-r", d.path)
    assert [e["tracepoint"] for e in doc["events"]] == ["nbd_request"] * 7
    assert doc["groups"] == {"bdev": 0, "nbd": 1, "rpc": 0, "thread": 0}


def test_nothing_recorded_removes_file(driver, run_driver):
    d = run_driver(driver, "-t", "2", "-n", "23", wait=True)
    assert os.path.exists(d.path)
    assert d.finish().group(1) == "0"
    assert not os.path.exists(d.path)


def test_wraparound_keeps_newest(driver, run_driver):
    slots, pairs = 16, 23
    d = run_driver(driver, "-t", "2", "-E", str(slots), "-n", str(pairs), "-e", "bdev")
    d.finish()
    doc = dump_json("-r", d.path)
    written = pairs * 2
    # A ring of N slots keeps the newest N - 1 events: the slot being
    # written is never trusted (it may be half rewritten).
    keep = slots - 1
    for t in range(2):
        want = expected_events(t, pairs, groups=("bdev",))
        assert ring_events(doc, t) == want[-keep:]
        info = doc["threads"][t]
        assert (info["written"], info["kept"], info["overwritten"]) == \
            (written, keep, written - keep)
    text = dump("-r", d.path).stdout
    assert f"{written - keep} older events overwritten" in text


def test_kill9_then_dump_matches(driver, run_driver, tmp_path):
    d = run_driver(driver, "-t", "3", "-n", "23", "-e", "all", "-l", "5", wait=True)
    live = dump_json("-p", str(d.pid))
    d.kill()
    assert os.path.exists(d.path), "kill -9 must leave the trace file"
    copy = tmp_path / "copied"
    shutil.copy(d.path, copy)
    dead = dump_json("-p", str(d.pid))
    assert dead["events"] == live["events"]
    assert dump_json("-r", str(copy))["events"] == live["events"]
    for t in range(3):
        assert ring_events(dead, t) == expected_events(t, 23)
    assert dead["lost"] == 5
    assert "not running" in dump("-p", str(d.pid)).stdout.splitlines()[0]


def test_json_parses_and_is_complete(plain_driver, run_driver):
    d = run_driver(plain_driver, "-t", "2", "-n", "3", "-e", "bdev")
    d.finish()
    doc = json.loads(dump("-r", d.path, "--json").stdout)
    assert doc["clock"] == "CLOCK_MONOTONIC"
    assert [t["name"] for t in doc["threads"]] == ["driver_0", "driver_1"]
    e = doc["events"][0]
    assert set(e) == {"source", "thread", "ts", "ts_ns", "time_us", "owner", "tracepoint",
                      "group", "object", "related", "elapsed_us", "args"}
    # "ts" is what was recorded: TSC ticks, converted with the pairs given
    # as "calibration", or CLOCK_MONOTONIC itself, with nothing to convert.
    if doc["clock_source"] == "TSC":
        t0, m0 = doc["calibration"]["start"]
        t1, m1 = doc["calibration"]["last"]
        assert e["ts_ns"] == m0 + ((e["ts"] - t0) * (m1 - m0) * 2 + (t1 - t0)) // (2 * (t1 - t0))
    else:
        assert e["ts"] == e["ts_ns"] and "calibration" not in doc
    assert e["time_us"] == pytest.approx((e["ts_ns"] - doc["start_ns"]) / 1000.0)


def merged_order(ring, bt_ts):
    """The sources in merged order: by time, a bpftrace line after the
    ring events of its nanosecond (events here can be 0 or 1 ns apart)."""
    keyed = [(e["ts_ns"], 0, "ring") for e in ring] + [(t, 1, "bpftrace") for t in bt_ts]
    return [k[2] for k in sorted(keyed)]


def test_merge_bpftrace_lines(plain_driver, run_driver, tmp_path):
    d = run_driver(plain_driver, "-t", "1", "-n", "3", "-e", "bdev")
    d.finish()
    evs = dump_json("-r", d.path)["events"]
    # Lines as a bpftrace script printing nsecs first would write them,
    # placed just after the 1st and 4th ring events.
    bt = tmp_path / "bt.out"
    bt.write_text("Attaching 1 probe...\n"
                  f"{evs[0]['ts_ns'] + 1} io__submit id=1\n"
                  f"{evs[3]['ts_ns'] + 1} io__done id=1\n")
    doc = dump_json("-r", d.path, "--merge", str(bt))
    src = [e["source"] for e in doc["events"]]
    assert src == merged_order(evs, [evs[0]["ts_ns"] + 1, evs[3]["ts_ns"] + 1])
    assert doc["events"][1]["text"] == "io__submit id=1"
    text = dump("-r", d.path, "--merge", str(bt)).stdout
    assert "bpftrace: io__done id=1" in text


def refused(path):
    p = dump("-r", str(path), check=False)
    assert p.returncode == 1 and p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"blktgt-trace: {path}: "), p.stderr
    return lines[0]


def test_refuses_truncated_and_foreign(plain_driver, run_driver, tmp_path):
    d = run_driver(plain_driver, "-t", "2", "-n", "3", "-e", "bdev")
    d.finish()
    data = open(d.path, "rb").read()

    def variant(name, blob):
        p = tmp_path / name
        p.write_bytes(blob)
        return p

    assert "truncated" in refused(variant("half", data[:len(data) // 2]))
    assert "truncated" in refused(variant("tiny", data[:100]))
    assert "truncated" in refused(variant("empty", b""))
    assert "bad magic" in refused(variant("foreign", b"\x7fELF" + data[4:]))
    assert "bad magic" in refused("/etc/passwd")
    ver = bytearray(data)
    ver[8] = 99
    assert "version 99" in refused(variant("version", bytes(ver)))
    rings = bytearray(data)
    rings[28:32] = (100000).to_bytes(4, "little")
    assert "ring count" in refused(variant("rings", bytes(rings)))
    defs = bytearray(data)
    defs[68:72] = (1 << 30).to_bytes(4, "little")
    assert "definition table" in refused(variant("defs", bytes(defs)))
    junk = bytearray(data)
    defs_at = int.from_bytes(data[64:68], "little")
    junk[defs_at:defs_at + 4] = b"@@@@"
    assert "not JSON" in refused(variant("json", bytes(junk)))
    clock = bytearray(data)
    clock[232:236] = (7).to_bytes(4, "little")
    assert "unknown clock 7" in refused(variant("clock", bytes(clock)))
    if data[232] == 1:  # TSC timestamps: the pairs must span some time
        flat = bytearray(data)
        flat[256:288] = data[240:256] * 2
        assert "calibration" in refused(variant("flat", bytes(flat)))
    grown = variant("grown", data + b"\0" * 4096)
    assert "truncated" in refused(grown) or "ring layout" in refused(grown)

    p = dump("-p", "999999999", check=False)
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1
    assert "no trace file" in p.stderr


@pytest.mark.parametrize("spec,why", [
    ("bogus", "no trace group 'bogus'"),
    ("bdev:0x4", "no tracepoint in mask 0x4"),
    ("bdev:abc", "MASK must be"),
    ("bdev:0", "MASK must be"),
    ("bdev,", None),
    ("", "want GROUP"),
])
def test_enable_option_errors(plain_driver, spec, why):
    p = subprocess.run([plain_driver, "-e", spec, "-n", "1"], capture_output=True,
                       text=True, timeout=probekit.TIMEOUT)
    if why is None:     # a trailing comma is harmless
        assert p.returncode == 0, p.stderr
        os.unlink(shm_path(int(p.stdout.split("pid=")[1].split()[0])))
        return
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and why in p.stderr
    assert p.stdout == ""


def test_enable_help_lists_every_tracepoint(plain_driver, run_driver):
    p = subprocess.run([plain_driver, "-e", "help"], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0
    d = run_driver(plain_driver, "-n", "1", "-e", "bdev")
    d.finish()
    # The file's own definition table names the same tracepoints.
    with open(d.path, "rb") as f:
        head = f.read(1024 + 16384)
    at = int.from_bytes(head[64:68], "little")
    size = int.from_bytes(head[68:72], "little")
    defs = json.loads(head[at:at + size])
    for g in defs["groups"]:
        assert f"group {g['name']} " in p.stdout
    for tp in defs["tracepoints"]:
        assert f" {tp['name']} " in p.stdout
    assert len(defs["tracepoints"]) >= 8


def test_recording_makes_no_syscalls(plain_driver, tmp_path):
    """The syscalls of a run do not grow with the number of events."""
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")

    def syscalls(n):
        log = tmp_path / f"strace-{n}"
        # futex: the threads' start barrier, whose count varies by timing.
        p = subprocess.run(["strace", "-f", "-c", "-e", "trace=!futex", "-o", str(log),
                            plain_driver, "-t", "2", "-n", str(n), "-e", "all"],
                           capture_output=True, text=True, timeout=probekit.TIMEOUT)
        assert p.returncode == 0, p.stderr
        os.unlink(shm_path(int(p.stdout.split("pid=")[1].split()[0])))
        total = [ln.split() for ln in log.read_text().splitlines()
                 if ln.endswith(" total")]
        assert len(total) == 1, log.read_text()
        return int(total[0][3])

    # 4 events per pair per thread: 160 events against 1.6 million.
    assert syscalls(200000) == syscalls(20)


# --- filters, --summary, --format chrome, -F -------------------------------

def finished(run_driver, binary, threads=2, pairs=23, groups="bdev,nbd"):
    """A driver run that has exited: its file no longer changes, so every
    dump converts times with the same calibration."""
    d = run_driver(binary, "-t", str(threads), "-n", str(pairs), "-e", groups)
    d.finish()
    return d


def picked(doc):
    return [(e["tracepoint"], e["owner"], e["object"], e["related"], e["args"])
            for e in doc["events"]]


def test_filter_by_object_follows_relations(plain_driver, run_driver):
    d = finished(run_driver, plain_driver)
    # Pair 3 of thread 0: request r1500003 caused I/O i1000003.
    want = expected(0, 3)
    for obj in ("r1500003", "i1000003"):
        assert picked(dump_json("-r", d.path, "--object", obj)) == want
    # Two objects, as a list and as repeated options.
    both = expected(0, 3) + expected(1, 5)
    key = [("r1500003", "r2500005"), ("i1000003", "i2000005")]
    assert sorted(map(str, picked(dump_json("-r", d.path, "--object", ",".join(key[0]))))) \
        == sorted(map(str, both))
    assert sorted(map(str, picked(dump_json("-r", d.path, "--object", key[1][0],
                                            "--object", key[1][1])))) == sorted(map(str, both))
    # Filters of several kinds must all match.
    assert picked(dump_json("-r", d.path, "--object", "r1500003", "--group", "bdev")) \
        == want[1:3]
    assert picked(dump_json("-r", d.path, "--object", "i1000003", "--thread", "1")) == []
    text = dump("-r", d.path, "--object", "r1500003").stdout
    assert len([ln for ln in text.splitlines() if not ln.startswith("#")]) == 4


def test_filter_by_tracepoint_group_thread(plain_driver, run_driver):
    d = finished(run_driver, plain_driver)
    n = 23

    def count(*args):
        return len(dump_json("-r", d.path, *args)["events"])
    assert count() == 2 * 4 * n
    assert count("--tp", "bdev_io_submit") == 2 * n
    assert count("--tp", "bdev_*") == 2 * 2 * n
    assert count("--tp", "nbd_reply,bdev_io_done") == 2 * 2 * n
    assert count("--group", "nbd") == 2 * 2 * n
    assert count("--group", "nbd", "--group", "bdev") == 2 * 4 * n
    assert count("--group", "bdev", "--tp", "nbd_reply") == 0
    for t in range(2):
        for sel in (str(t), f"driver_{t}"):
            doc = dump_json("-r", d.path, "--thread", sel)
            assert ring_events(doc, t) == expected_events(t, n)
            assert len(doc["events"]) == 4 * n


def test_filter_by_time_window(plain_driver, run_driver):
    d = finished(run_driver, plain_driver)
    evs = dump_json("-r", d.path)["events"]
    lo, hi = evs[10]["time_us"], evs[70]["time_us"]
    want = [e for e in evs if lo <= e["time_us"] <= hi]
    assert len(want) >= 61
    assert dump_json("-r", d.path, "--since", repr(lo), "--until", repr(hi))["events"] == want
    assert dump_json("-r", d.path, "--since", repr(lo))["events"] == \
        [e for e in evs if e["time_us"] >= lo]
    # Units: 1 s is after every event of this short run, 0 s before.
    assert dump_json("-r", d.path, "--since", "1s")["events"] == \
        [e for e in evs if e["time_us"] >= 1e6]
    assert dump_json("-r", d.path, "--until", "0ms")["events"] == \
        [e for e in evs if e["time_us"] <= 0]
    # --abs: the window counts the times as shown, CLOCK_MONOTONIC.
    absolute = dump_json("-r", d.path, "--abs")["events"]
    a = absolute[10]["time_us"]
    assert dump_json("-r", d.path, "--abs", "--since", repr(a))["events"] == \
        [e for e in absolute if e["time_us"] >= a]


@pytest.mark.parametrize("args,why", [
    (["--tp", "nosuch"], "--tp nosuch: no such tracepoint"),
    (["--tp", "bdev_io_submit,nbd_*,zz*"], "--tp zz*: no such tracepoint"),
    (["--group", "disk"], "--group disk: no such group"),
    (["--thread", "7"], "--thread 7: no such thread"),
    (["--thread", "reactor_0"], "--thread reactor_0: no such thread"),
    (["--object", "x12"], "--object x12: expected an object id"),
    (["--object", "r"], "--object r: expected an object id"),
    (["--object", "-5"], "--object -5: expected an object id"),
    (["--since", "soon"], "--since soon: expected a time"),
    (["--until", "1h"], "--until 1h: expected a time"),
    (["--since", "5ms", "--until", "1ms"], "--since 5ms is after --until 1ms"),
    (["--summary", "--format", "chrome"], "pick one"),
    (["--json", "--format", "chrome"], "two formats"),
    (["--format", "svg"], "invalid choice"),
    (["-F", "--format", "chrome"], "-F streams events"),
])
def test_bad_filter_values_are_one_line_exit_2(plain_driver, run_driver, args, why):
    d = finished(run_driver, plain_driver, threads=1, pairs=1)
    p = dump("-r", d.path, *args, check=False)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("blktgt-trace: "), p.stderr
    assert why in lines[0]


def test_summary_counts_and_latency(plain_driver, run_driver):
    d = finished(run_driver, plain_driver)
    n = 2 * 23
    full = dump_json("-r", d.path)["events"]
    doc = dump_json("-r", d.path, "--summary")
    s = doc["summary"]
    assert s["tracepoints"] == {"bdev_io_done": n, "bdev_io_submit": n,
                                "nbd_reply": n, "nbd_request": n}
    assert set(s["objects"]) == {"bdev_io", "nbd_req"}
    for kind, last in (("bdev_io", "bdev_io_done"), ("nbd_req", "nbd_reply")):
        o = s["objects"][kind]
        times = sorted(e["elapsed_us"] for e in full if e["tracepoint"] == last)
        assert (o["objects"], o["done"], o["without_done"]) == (n, n, 0)
        assert o["total_us"] == round(sum(times), 3)
        assert (o["min_us"], o["p50_us"], o["max_us"]) == (times[0], times[22], times[-1])
        assert sum(c for _, _, c in o["log2_us"]) == n
        for lo, hi, c in o["log2_us"]:
            assert c == sum(lo <= int(t) <= hi for t in times)
    # Filters apply first: submits only, so no I/O has a later event.
    s = dump_json("-r", d.path, "--summary", "--tp", "bdev_io_submit")["summary"]
    assert s["tracepoints"] == {"bdev_io_submit": n}
    assert s["objects"]["bdev_io"] == {"objects": n, "done": 0, "without_done": n,
                                       "total_us": 0}
    text = dump("-r", d.path, "--summary").stdout
    assert re.search(rf"^bdev_io_submit +{n}$", text, re.M)
    assert f"bdev_io: {n} objects, {n} with a start and a later event" in text


# The phases the Trace Event Format defines.
CHROME_PH = set("BEXibneSTpFstfPNODMVvRc") | {"(", ")", "I", "C"}


def chrome_doc(*args):
    return json.loads(dump(*args, "--format", "chrome").stdout)


def check_chrome(doc, full, pid):
    """What every --format chrome document must satisfy, against the
    --json dump of the same events: returns (spans by object, flows)."""
    assert set(doc) >= {"traceEvents", "displayTimeUnit"}
    ev = doc["traceEvents"]
    assert {e["ph"] for e in ev} <= CHROME_PH
    for e in ev:
        assert isinstance(e["name"], str) and e["pid"] == pid and isinstance(e["tid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float))
    # Each ring event is one thread-scoped instant at its time in us.
    inst = [e for e in ev if e["ph"] == "i" and e["cat"] != "bpftrace"]
    assert [(e["name"], e["ts"], e["tid"]) for e in inst] == \
        [(e["tracepoint"], e["time_us"], e["thread"]) for e in full if e["source"] == "ring"]
    assert all(e["s"] == "t" for e in inst)
    spans = {}
    for e in ev:
        if e["ph"] == "X":
            spans.setdefault(e["args"]["object"], []).append(e)
        elif e["ph"] in "be":
            spans.setdefault(e["id"], []).append(e)
    first, last = {}, {}
    for e in full:
        if e["source"] == "ring" and e["object"]:
            first.setdefault(e["object"], e)
            last[e["object"]] = e
    assert set(spans) == set(first)
    for o, sp in spans.items():
        a, b = first[o], last[o]
        if len(sp) == 1:
            (x,) = sp
            assert x["ph"] == "X" and x["ts"] == a["time_us"] and x["tid"] == a["thread"]
            assert x["dur"] == (b["ts_ns"] - a["ts_ns"]) / 1000.0
        else:
            # An async pair: same id, cat and name; begin at the start.
            bg, en = sp
            assert (bg["ph"], en["ph"]) == ("b", "e")
            assert bg["cat"] == en["cat"] and bg["name"] == en["name"] and bg["id"] == o
            assert (bg["ts"], bg["tid"]) == (a["time_us"], a["thread"])
            assert (en["ts"], en["tid"]) == (b["time_us"], b["thread"])
    flows = {}
    for e in ev:
        if e["ph"] in "sf":
            assert e["cat"] == "relation"
            flows.setdefault(e["id"], []).append(e)
    for fid, (s, f) in flows.items():
        assert (s["ph"], f["ph"], f["bp"]) == ("s", "f", "e") and s["name"] == f["name"]
    # A flow needs both ends shown: the cause's start and the effect's.
    rel = [e for e in full if e["source"] == "ring" and e["related"] in first
           and first[e["object"]] is e]
    assert sorted((first[e["related"]]["time_us"], e["time_us"]) for e in rel) == \
        sorted((s["ts"], f["ts"]) for s, f in flows.values())
    names = {e["tid"]: e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "thread_name"}
    return spans, flows, names


def test_chrome_format_spans_and_flows(plain_driver, run_driver):
    d = finished(run_driver, plain_driver)
    full = dump_json("-r", d.path)["events"]
    doc = chrome_doc("-r", d.path)
    spans, flows, names = check_chrome(doc, full, d.pid)
    # The driver's pairs nest on their thread (request, then its I/O inside
    # it), so every life is a complete event; one flow per caused I/O.
    assert len(spans) == 2 * 2 * 23
    assert all(len(s) == 1 and s[0]["ph"] == "X" for s in spans.values())
    assert len(flows) == 2 * 23
    assert names == {0: "driver_0", 1: "driver_1"}
    # Filters apply: one request and its I/O, one flow between them.
    spans, flows, _ = check_chrome(chrome_doc("-r", d.path, "--object", "r1500003"),
                                   dump_json("-r", d.path, "--object", "r1500003")["events"],
                                   d.pid)
    assert set(spans) == {"r1500003", "i1000003"} and len(flows) == 1


def test_merge_works_with_filters_summary_and_chrome(plain_driver, run_driver, tmp_path):
    d = finished(run_driver, plain_driver, threads=1, pairs=3, groups="bdev")
    evs = dump_json("-r", d.path)["events"]
    bt = tmp_path / "bt.out"
    bt.write_text("Attaching 1 probe...\n"
                  f"{evs[0]['ts_ns'] + 1} io__submit id=1000000\n"
                  f"{evs[2]['ts_ns'] + 1} io__submit id=1000001\n"
                  f"{evs[4]['ts_ns'] + 1} io__submit id=1000002\n")

    def merged(*args):
        return dump_json("-r", d.path, "--merge", str(bt), *args)["events"]
    # An object filter keeps the lines that name a selected object's id.
    bt_ts = [evs[k]["ts_ns"] + 1 for k in (0, 2, 4)]
    got = merged("--object", "i1000001")
    assert [e["source"] for e in got] == merged_order(evs[2:4], bt_ts[1:2])
    assert [e["text"] for e in got if e["source"] == "bpftrace"] == ["io__submit id=1000001"]
    # A time window applies to merged lines too; kind filters leave them.
    got = merged("--since", repr(evs[2]["time_us"]))
    assert [e["source"] for e in got] == merged_order(evs[2:], bt_ts[1:])
    got = merged("--tp", "bdev_io_done")
    assert [e["source"] for e in got] == merged_order(evs[1::2], bt_ts)
    s = dump_json("-r", d.path, "--merge", str(bt), "--summary")["summary"]
    assert s["bpftrace_lines"] == 3 and s["tracepoints"]["bdev_io_submit"] == 3
    doc = chrome_doc("-r", d.path, "--merge", str(bt))
    check_chrome(doc, evs, d.pid)
    bt_ev = [e for e in doc["traceEvents"] if e.get("cat") == "bpftrace"]
    assert [e["args"]["text"] for e in bt_ev] == \
        [f"io__submit id=100000{i}" for i in range(3)]
    assert len({e["tid"] for e in bt_ev}) == 1 and bt_ev[0]["tid"] not in (0,)


class Follower:
    """blktgt-trace -F, its output read as it comes."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([probekit.PYTHON, TOOL, "-F", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out = probekit.LineReader(self.proc.stdout)

    def events(self):
        return [ln for ln in self.out.lines if not ln.startswith("#")]

    def end(self):
        assert self.proc.wait(timeout=probekit.TIMEOUT) == 0, self.proc.stderr.read()
        lines = self.out.drain()
        assert self.proc.stderr.read() == b""
        return lines


def test_follow_stops_when_the_process_exits(plain_driver, run_driver):
    d = run_driver(plain_driver, "-t", "2", "-n", "23", "-e", "bdev", wait=True)
    f = Follower("-p", str(d.pid))
    f.out.wait_for(r"^# following; Ctrl-C to end$")
    f.out.wait_until(lambda lines: len(f.events()) == 2 * 2 * 23)
    d.finish()
    lines = f.end()
    assert lines[-1] == (f"# followed until pid {d.pid} exited; no event was "
                         "overwritten before this reader copied it")
    assert len(f.events()) == 2 * 2 * 23


def test_follow_stops_on_sigint_and_sigterm(plain_driver, run_driver):
    d = run_driver(plain_driver, "-t", "1", "-n", "5", "-e", "nbd", wait=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        f = Follower("-p", str(d.pid), "--json")
        f.out.wait_until(lambda lines: len(lines) == 10)
        f.proc.send_signal(sig)
        lines = f.end()
        assert [json.loads(ln)["tracepoint"] for ln in lines[:-1]] == \
            ["nbd_request", "nbd_reply"] * 5
        assert json.loads(lines[-1]) == {
            "source": "end", "why": sig.name, "overwritten_while_following": 0,
            "overwritten_per_thread": {"0": 0}}
    # -F on a file whose writer is gone reads it once and stops.
    d.finish()
    f = Follower("-r", d.path, "--summary", "--json")
    doc = json.loads(f.end()[0])
    assert doc["summary"]["tracepoints"] == {"nbd_reply": 5, "nbd_request": 5}
    assert doc["follow"]["why"] == f"pid {d.pid} is not running"


def test_follow_refuses_a_core(tmp_path):
    p = dump("--core", str(tmp_path / "core"), "-F", check=False)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1
    assert "-F follows a live ring" in p.stderr
