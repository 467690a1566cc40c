# SPDX-License-Identifier: BSD-2-Clause
"""The trace ring (target/trace.[ch]) and its dump tool, without blktgt.

tests/trace_driver.c records a known sequence on several threads (its
header comment gives the formulas); these tests compile it against
target/trace.c, dump what it recorded with target/blktgt_trace, and compare
event by event."""

import json
import os
import shutil
import signal
import subprocess

import pytest

import probekit

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("strace")

TOOL = os.path.join(probekit.BUILD, "bin", "blktgt-trace")
DRIVER_SRC = os.path.join(probekit.ROOT, "tests", "trace_driver.c")
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
    out = dump("-f", d.path).stdout.splitlines()
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
    doc = dump_json("-f", d.path)
    for t in range(2):
        assert ring_events(doc, t) == expected_events(t, 23, groups=("bdev",))
    assert not [e for e in doc["events"] if e["group"] != "bdev"]


def test_mask_selects_tracepoints(plain_driver, run_driver):
    d = run_driver(plain_driver, "-t", "1", "-n", "7", "-e", "nbd:0x1")
    d.finish()
    doc = dump_json("-f", d.path)
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
    doc = dump_json("-f", d.path)
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
    text = dump("-f", d.path).stdout
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
    assert dump_json("-f", str(copy))["events"] == live["events"]
    for t in range(3):
        assert ring_events(dead, t) == expected_events(t, 23)
    assert dead["lost"] == 5
    assert "not running" in dump("-p", str(d.pid)).stdout.splitlines()[0]


def test_json_parses_and_is_complete(plain_driver, run_driver):
    d = run_driver(plain_driver, "-t", "2", "-n", "3", "-e", "bdev")
    d.finish()
    doc = json.loads(dump("-f", d.path, "--json").stdout)
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


def test_merge_bpftrace_lines(plain_driver, run_driver, tmp_path):
    d = run_driver(plain_driver, "-t", "1", "-n", "3", "-e", "bdev")
    d.finish()
    evs = dump_json("-f", d.path)["events"]
    # Lines as a bpftrace script printing nsecs first would write them,
    # placed just after the 1st and 4th ring events.
    bt = tmp_path / "bt.out"
    bt.write_text("Attaching 1 probe...\n"
                  f"{evs[0]['ts_ns'] + 1} io__submit id=1\n"
                  f"{evs[3]['ts_ns'] + 1} io__done id=1\n")
    doc = dump_json("-f", d.path, "--merge", str(bt))
    src = [e["source"] for e in doc["events"]]
    assert src == ["ring", "bpftrace", "ring", "ring", "ring", "bpftrace", "ring", "ring"]
    assert doc["events"][1]["text"] == "io__submit id=1"
    text = dump("-f", d.path, "--merge", str(bt)).stdout
    assert "bpftrace: io__done id=1" in text


def refused(path):
    p = dump("-f", str(path), check=False)
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
