"""bcc/ tools against a live blktgt.

Every test drives blktgt's built-in workload (workload_run with count=N, N
prime) or a known number of RPCs, so each histogram's counts are exact.  A
tool is started and the test waits for its "Hit Ctrl-C to end." line, which
the tools print only after their BPF program is loaded and attached; then
the workload runs, and SIGINT makes the tool print its final histograms.
"""

import json
import os
import re
import signal
import subprocess

import pytest

import probekit
from probekit import LineReader, PYTHON, ROOT, TIMEOUT

BCC = os.path.join(ROOT, "bcc")
READY = r"Hit Ctrl-C to end\.$"


class Tool:
    """A bcc/ tool attached to a PID; start() returns once it is tracing."""

    def __init__(self, name, pid, *args, env=None):
        self.cmd = [PYTHON, os.path.join(BCC, name), "-p", str(pid),
                    *map(str, args)]
        self.env = dict(os.environ, **(env or {}))

    def start(self):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        self.out = LineReader(self.proc.stdout)
        self.out.wait_for(READY)
        return self

    def wait(self):
        # Read to EOF first: a tool blocked on a full pipe never exits.
        lines = self.out.drain(TIMEOUT)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"{self.cmd} did not exit in {TIMEOUT}s")
        assert rc == 0, f"{self.cmd} exited {rc}:\n" + "\n".join(lines)
        assert not any("Traceback" in ln for ln in lines), "\n".join(lines)
        for ln in lines:
            assert len(ln) < 80 or self.json, f"line too wide: {ln!r}"
        return lines

    @property
    def json(self):
        return "-j" in self.cmd or "--json" in self.cmd

    def stop(self):
        """Ctrl-C: the tool prints its final histograms and exits 0."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        return self.wait()


def run_tool(name, pid, *args, env=None):
    """Run a tool to completion (for errors); returns (rc, output lines)."""
    p = subprocess.run([PYTHON, os.path.join(BCC, name), "-p", str(pid),
                        *map(str, args)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=TIMEOUT,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout.decode(errors="replace").splitlines()


# --- parsing the text format (bcc/probekit_bcc.py documents it) ----------

SECTION = re.compile(r"^(\w+ = [^,]*)(, \w+ = [^,]*)*$")
HEADER = re.compile(r"^ +(\S+) +: count +distribution$")
LOG2_ROW = re.compile(r"^ *(\d+) -> (\d+) +: (\d+) +\|([*+ ]*)\|$")
LIN_ROW = re.compile(r"^ +(\d+) +: (\d+) +\|([*+ ]*)\|$")
EXTRA = re.compile(r"^(\w+): (\d+)$")


def parse(lines):
    """Histograms in a tool's text output: a list of dicts with key, unit,
    scale and rows [(low, high or None, count)], plus extra fields."""
    hists, key = [], {}
    for ln in lines:
        if SECTION.match(ln):
            key = dict(kv.split(" = ", 1) for kv in ln.split(", "))
            continue
        m = HEADER.match(ln)
        if m:
            hists.append({"key": key, "unit": m.group(1), "rows": [],
                          "scale": None})
            key = {}
            continue
        m = LOG2_ROW.match(ln)
        if m:
            hists[-1]["scale"] = "log2"
            hists[-1]["rows"].append((int(m.group(1)), int(m.group(2)),
                                      int(m.group(3))))
            continue
        m = LIN_ROW.match(ln)
        if m:
            hists[-1]["scale"] = "linear"
            hists[-1]["rows"].append((int(m.group(1)), None,
                                      int(m.group(2))))
            continue
        m = EXTRA.match(ln)
        if m and hists:
            hists[-1][m.group(1)] = int(m.group(2))
    return hists


def total(h):
    return sum(c for _, _, c in h["rows"])


def by_key(hists, *fields):
    return {tuple(h["key"][f] for f in fields): h for h in hists}


def nonzero(h):
    return {(lo, hi): c for lo, hi, c in h["rows"] if c}


def json_objects(lines):
    return [json.loads(ln) for ln in lines if ln.startswith("{")]


def as_text(obj):
    """A --json interval in parse()'s form, to compare with the text."""
    out = []
    for x in obj["histograms"]:
        h = {"key": x["key"], "unit": x["unit"], "scale": x["scale"],
             "rows": [(b["low"], b["high"] if x["scale"] == "log2" else None,
                       b["count"]) for b in x["buckets"]]}
        if "negative" in x:
            h["negative"] = x["negative"]
        out.append(h)
    return out


# --- fixtures ---------------------------------------------------------------

@pytest.fixture
def bdevs(target):
    """Two malloc bdevs on the target: Malloc0 and Malloc1."""
    for name in ("Malloc0", "Malloc1"):
        target.rpc("bdev_malloc_create", name=name, size_mb=16,
                   block_size=512)
    return target


def workload(target, bdev, pattern, io_size, qd, count):
    r = target.rpc("workload_run", bdev=bdev, pattern=pattern,
                   io_size=io_size, queue_depth=qd, count=count)
    assert r["ios"] == count and r["errors"] == 0, r
    return r


# --- iosize -------------------------------------------------------------------

def test_iosize_per_bdev_and_type(bpf, bdevs):
    t = Tool("iosize", bdevs.pid, "-BO").start()
    workload(bdevs, "Malloc0", "randread", 4096, 4, 23)
    workload(bdevs, "Malloc1", "write", 65536, 2, 37)
    hists = by_key(parse(t.stop()), "bdev", "type")
    assert set(hists) == {("Malloc0", "read"), ("Malloc1", "write")}
    assert nonzero(hists["Malloc0", "read"]) == {(4096, 8191): 23}
    assert nonzero(hists["Malloc1", "write"]) == {(65536, 131071): 37}
    assert all(h["unit"] == "bytes" and h["scale"] == "log2"
               for h in hists.values())


def test_iosize_all_and_json(bpf, bdevs):
    text = Tool("iosize", bdevs.pid).start()
    js = Tool("iosize", bdevs.pid, "-B", "--json").start()
    workload(bdevs, "Malloc0", "randread", 4096, 4, 23)
    workload(bdevs, "Malloc1", "randwrite", 512, 8, 97)
    (h,) = parse(text.stop())
    assert h["key"] == {}
    assert nonzero(h) == {(4096, 8191): 23, (512, 1023): 97}
    (obj,) = json_objects(js.stop())
    assert obj["tool"] == "iosize" and obj["pid"] == bdevs.pid
    got = {(x["key"]["bdev"], b["low"], b["high"]): b["count"]
           for x in obj["histograms"] for b in x["buckets"] if b["count"]}
    assert got == {("Malloc0", 4096, 8191): 23, ("Malloc1", 512, 1023): 97}
    for x in obj["histograms"]:
        assert x["name"] == "size" and x["unit"] == "bytes"
        assert x["total"] == sum(b["count"] for b in x["buckets"])


def test_iosize_json_is_the_text(bpf, bdevs):
    text = Tool("iosize", bdevs.pid, "-BO").start()
    js = Tool("iosize", bdevs.pid, "-BO", "-j").start()
    workload(bdevs, "Malloc0", "randrw", 4096, 4, 23)
    workload(bdevs, "Malloc1", "read", 131072, 2, 11)
    hists = parse(text.stop())
    (obj,) = json_objects(js.stop())
    assert as_text(obj) == hists and len(hists) >= 2


def test_with_bpftrace_on_the_same_probes(bpf, bdevs):
    """bcc/ tools and bpftrace trace io__submit and bdev_execute of one
    blktgt at once.  The kernel refuses a second uprobe at one address with
    another semaphore offset, so the tools must register theirs as bpftrace
    does."""
    proc, out = probekit.bpftrace_program(
        bdevs.pid, 'BEGIN { printf("READY\\n"); } '
        'usdt::blktgt:io__submit { @submits = count(); } '
        f'uprobe:{bdevs.binary}:bdev_execute {{ @calls = count(); }}')
    try:
        size = Tool("iosize", bdevs.pid).start()
        func = Tool("funclat", bdevs.pid).start()
        workload(bdevs, "Malloc0", "read", 4096, 2, 23)
        (h,) = parse(size.stop())
        arg, _, _ = parse(func.stop())
    finally:
        lines = probekit.stop_bpftrace(proc, out)
    assert nonzero(h) == {(4096, 8191): 23}
    assert nonzero(arg) == {(4096, 8191): 23}
    assert "@submits: 23" in lines and "@calls: 23" in lines, lines


# --- iolatency ------------------------------------------------------------------

@pytest.mark.parametrize("opts,unit,scale", [
    ((), "usecs", "log2"),
    (("-m",), "msecs", "log2"),
    (("-u",), "usecs", "log2"),
    (("-n",), "nsecs", "log2"),
    (("-L",), "usecs", "linear"),
    (("-L", "-W", "3", "-n"), "nsecs", "linear"),
])
def test_iolatency_sums(bpf, bdevs, opts, unit, scale):
    t = Tool("iolatency", bdevs.pid, "-BO", *opts).start()
    rw = workload(bdevs, "Malloc0", "randrw", 4096, 4, 97)
    workload(bdevs, "Malloc1", "read", 8192, 1, 23)
    hists = parse(t.stop())
    want = {("Malloc0", "read"): rw["reads"], ("Malloc0", "write"): rw["writes"],
            ("Malloc1", "read"): 23}
    want = {k: v for k, v in want.items() if v}
    got = by_key(hists, "bdev", "type")
    assert {k: total(h) for k, h in got.items()} == want
    for h in hists:
        assert h["unit"] == unit and h["scale"] == scale
        if scale == "linear":
            width = int(opts[opts.index("-W") + 1]) if "-W" in opts else 10
            assert all(lo % width == 0 for lo, _, _ in h["rows"])


def test_iolatency_unsplit_and_json(bpf, bdevs):
    text = Tool("iolatency", bdevs.pid).start()
    per_type = Tool("iolatency", bdevs.pid, "-O").start()
    js = Tool("iolatency", bdevs.pid, "-BO", "-j").start()
    rw = workload(bdevs, "Malloc0", "randrw", 4096, 8, 997)
    (h,) = parse(text.stop())
    assert h["key"] == {} and total(h) == 997
    types = by_key(parse(per_type.stop()), "type")
    assert {k: total(v) for k, v in types.items()} == \
        {k: v for k, v in {("read",): rw["reads"],
                           ("write",): rw["writes"]}.items() if v}
    (obj,) = json_objects(js.stop())
    got = {(x["key"]["bdev"], x["key"]["type"]): x["total"]
           for x in obj["histograms"]}
    assert got == {k: v for k, v in {("Malloc0", "read"): rw["reads"],
                                     ("Malloc0", "write"): rw["writes"]}.items()
                   if v}
    for x in obj["histograms"]:
        assert x["unit"] == "usecs" and x["scale"] == "log2"
        assert x["total"] == sum(b["count"] for b in x["buckets"])


# --- qdepth ----------------------------------------------------------------------

def test_qdepth_bounded(bpf, bdevs):
    t = Tool("qdepth", bdevs.pid).start()
    workload(bdevs, "Malloc0", "randread", 4096, 8, 997)
    workload(bdevs, "Malloc1", "randwrite", 4096, 1, 23)
    hists = by_key(parse(t.stop()), "bdev")
    assert set(hists) == {("Malloc0",), ("Malloc1",)}
    m0 = hists["Malloc0",]
    assert total(m0) == 997 and m0["scale"] == "linear"
    assert 1 <= min(lo for lo, _ in nonzero(m0))
    assert max(lo for lo, _ in nonzero(m0)) <= 8
    assert nonzero(hists["Malloc1",]) == {(1, None): 23}


def test_qdepth_json(bpf, bdevs):
    t = Tool("qdepth", bdevs.pid, "--json").start()
    workload(bdevs, "Malloc1", "read", 512, 4, 23)
    (obj,) = json_objects(t.stop())
    (x,) = obj["histograms"]
    assert x["key"] == {"bdev": "Malloc1"} and x["total"] == 23
    assert x["scale"] == "linear" and x["width"] == 1
    assert all(1 <= b["low"] <= 4 for b in x["buckets"])


# --- funclat -----------------------------------------------------------------------

def test_funclat_counts(bpf, bdevs):
    text = Tool("funclat", bdevs.pid).start()
    js = Tool("funclat", bdevs.pid, "-u", "--json").start()
    workload(bdevs, "Malloc0", "randread", 4096, 4, 23)
    arg, ret, lat = parse(text.stop())
    assert arg["unit"] == "arg4" and nonzero(arg) == {(4096, 8191): 23}
    assert ret["unit"] == "retval" and nonzero(ret) == {(4096, 8191): 23}
    assert ret["negative"] == 0
    assert lat["unit"] == "nsecs" and total(lat) == 23
    (obj,) = json_objects(js.stop())
    names = [x["name"] for x in obj["histograms"]]
    assert names == ["arg", "retval", "latency"]
    assert [x["total"] for x in obj["histograms"]] == [23, 23, 23]
    assert obj["histograms"][1]["negative"] == 0
    assert obj["histograms"][2]["unit"] == "usecs"
    # arg and retval do not depend on timing: JSON and text agree exactly.
    assert as_text(obj)[:2] == [arg, ret]


def test_funclat_other_arg(bpf, bdevs):
    # bdev_execute's second argument is uint32_t type: 0 (read) or 1 (write).
    t = Tool("funclat", bdevs.pid, "-a", "2", "--arg-bits", "32").start()
    workload(bdevs, "Malloc1", "write", 1024, 2, 29)
    arg, ret, lat = parse(t.stop())
    assert arg["unit"] == "arg2" and nonzero(arg) == {(0, 1): 29}
    assert nonzero(ret) == {(1024, 2047): 29} and total(lat) == 29


# --- rpclat -------------------------------------------------------------------------

def test_rpclat_counts(bpf, bdevs):
    t = Tool("rpclat", bdevs.pid).start()
    for _ in range(7):
        bdevs.rpc("bdev_list")
    for _ in range(3):
        bdevs.rpc("target_stats")
    workload(bdevs, "Malloc0", "read", 4096, 1, 2)
    hists = by_key(parse(t.stop()), "method")
    assert {k: total(h) for k, h in hists.items()} == {
        ("bdev_list",): 7, ("target_stats",): 3, ("workload_run",): 1}


def test_rpclat_json(bpf, target):
    t = Tool("rpclat", target.pid, "-j", "-m").start()
    for _ in range(5):
        target.rpc("bdev_list")
    (obj,) = json_objects(t.stop())
    (x,) = obj["histograms"]
    assert x["key"] == {"method": "bdev_list"} and x["total"] == 5
    assert x["unit"] == "msecs"


# --- intervals, duration, timestamps -------------------------------------------------

def test_interval_count_timestamps(bpf, target):
    """iosize -T 1 2 prints two timestamped intervals and exits 0."""
    t = Tool("iosize", target.pid, "-T", "1", "2").start()
    lines = t.wait()
    assert len([ln for ln in lines if re.match(r"^\d\d:\d\d:\d\d\s*$", ln)]) == 2


def test_duration(bpf, target):
    t = Tool("rpclat", target.pid, "-d", "1", "-j").start()
    lines = t.wait()
    (obj,) = json_objects(lines)
    assert obj["histograms"] == []


# --- errors -------------------------------------------------------------------------

TOOLS = ["iolatency", "iosize", "qdepth", "funclat", "rpclat"]


def one_error_line(rc, lines, tool, pattern):
    assert rc != 0
    assert len(lines) == 1, lines
    assert re.match(rf"^{tool}: .*{pattern}", lines[0]), lines


@pytest.mark.parametrize("tool", TOOLS)
def test_bad_pid(tool):
    with open("/proc/sys/kernel/pid_max") as f:
        unused = int(f.read()) + 1
    rc, lines = run_tool(tool, unused)
    one_error_line(rc, lines, tool, "no process with PID")
    rc, lines = run_tool(tool, "12abc")
    one_error_line(rc, lines, tool, "invalid PID")
    rc, lines = run_tool(tool, "1", "--no-such-option")
    one_error_line(rc, lines, tool, "unrecognized")


@pytest.mark.parametrize("tool", TOOLS)
def test_pid_without_probes(bpf, tool):
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        rc, lines = run_tool(tool, sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    want = "bdev_execute" if tool == "funclat" else "no USDT probe blktgt:"
    one_error_line(rc, lines, tool, want)


def test_funclat_unknown_function(bpf, target):
    rc, lines = run_tool("funclat", target.pid, "-f", "no_such_function")
    one_error_line(rc, lines, "funclat", "no_such_function")


@pytest.mark.parametrize("tool", ["iolatency", "funclat"])
def test_no_kernel_headers(bpf, target, tmp_path, tool):
    """BCC without kernel headers: one line saying so (BCC_KERNEL_SOURCE
    points BCC at an empty directory instead of /lib/modules/.../build)."""
    empty = tmp_path / "no-headers"
    empty.mkdir()
    rc, lines = run_tool(tool, target.pid,
                         env={"BCC_KERNEL_SOURCE": str(empty)})
    one_error_line(rc, lines, tool, "no kernel headers")


def test_no_privilege(bpf, target):
    p = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         PYTHON, os.path.join(BCC, "iosize"), "-p", str(target.pid)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
    one_error_line(p.returncode, p.stdout.decode().splitlines(), "iosize",
                   "needs root")


@pytest.mark.parametrize("tool", TOOLS)
def test_target_exits(bpf, blktgt_bin, tmp_path, tool):
    """The target going away ends the trace with a clear line, exit 0,
    after the histograms collected so far."""
    tgt = probekit.Target(blktgt_bin, tmp_path).start()
    try:
        t = Tool(tool, tgt.pid).start()
        tgt.rpc("bdev_malloc_create", name="Malloc0", size_mb=8,
                block_size=512)
        workload(tgt, "Malloc0", "read", 4096, 2, 11)
    finally:
        tgt.stop()
    lines = t.wait()
    assert any(re.match(rf"^{tool}: PID {tgt.pid} \(blktgt\) exited", ln)
               for ln in lines), lines
    # rpclat saw bdev_malloc_create and workload_run; funclat has three
    # histograms of the 11 calls.
    want = {"rpclat": 2, "funclat": 33}.get(tool, 11)
    assert sum(total(h) for h in parse(lines)) == want


def test_nousdt_build_has_no_probes(bpf, build, tmp_path):
    binary = os.path.join(build, "nousdt", "bin", "blktgt")
    if not os.access(binary, os.X_OK):
        pytest.skip(f"{binary} not built (make test builds it)")
    tgt = probekit.Target(binary, tmp_path).start()
    try:
        rc, lines = run_tool("iosize", tgt.pid)
    finally:
        tgt.stop()
    one_error_line(rc, lines, "iosize", "no USDT probe blktgt:io__submit")
