# SPDX-License-Identifier: BSD-2-Clause
"""What test_bcc.py and test_libbpf.py share: the histogram tools.

The bcc/ tools and their libbpf/ twins take the same options and print the
same output.  Here: where each kind of tool lives and how it is run
(start it on a PID, wait for its "Hit Ctrl-C to end." line, SIGINT it,
check it exits 0), the reader of the text format that doc/output.md
documents, the two-bdev target with its workload, and the shapes of the
error and target-exit cases both suites run.
"""

import contextlib
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

import allowed_skips
import probekit
from probekit import LineReader, PYTHON, ROOT, TIMEOUT

sys.path.insert(0, os.path.join(ROOT, "probes"))
from probelib import toolspec  # noqa: E402

TOOLS = ["iolatency", "iosize", "funclat", "qdepth", "rpclat"]
READY = r"Hit Ctrl-C to end\.$"
KINDS = ("bcc", "libbpf")


# --- running a tool ----------------------------------------------------------

def libbpf_path(name):
    return os.path.join(probekit.BUILD, "bin", f"probekit-{name}")


def program(kind, name):
    """The argv prefix that runs tool name of kind "bcc" or "libbpf"."""
    assert kind in KINDS, kind
    if kind == "bcc":
        return [PYTHON, os.path.join(probekit.BUILD, "bin", f"probekit-{name}-bcc")]
    return [libbpf_path(name)]


def command(kind, name, pid, *args):
    return program(kind, name) + ["-p", str(pid), *map(str, args)]


class Tool:
    """A tool attached to a PID; start() returns once it is tracing.

    wrap is an argv prefix (the tool keeps its PID: the prefix execs it);
    env is added to the environment.  With tidy, its output must also have
    no Traceback and, unless it is --json, no line 80 columns or wider."""

    def __init__(self, kind, name, pid, *args, wrap=(), env=None,
                 tidy=False):
        self.cmd = [*wrap, *command(kind, name, pid, *args)]
        self.env = dict(os.environ, **(env or {}))
        self.tidy = tidy

    def start(self):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        self.out = LineReader(self.proc.stdout)
        self.out.wait_for(READY)
        return self

    @property
    def json(self):
        return "-j" in self.cmd or "--json" in self.cmd

    def wait(self):
        # Read to EOF first: a tool blocked on a full pipe never exits.
        lines = self.out.drain(TIMEOUT)
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"{self.cmd} did not exit in {TIMEOUT}s")
        assert rc == 0, f"{self.cmd} exited {rc}:\n" + "\n".join(lines)
        if self.tidy:
            assert not any("Traceback" in ln for ln in lines), \
                "\n".join(lines)
            for ln in lines:
                assert len(ln) < 80 or self.json, f"line too wide: {ln!r}"
        return lines

    def stop(self):
        """Ctrl-C: the tool prints its final histograms and exits 0."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        return self.wait()


def run(cmd, env=None, errors="replace"):
    """Run cmd to completion (for errors): (rc, output lines)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=TIMEOUT, env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout.decode(errors=errors).splitlines()


def run_tool(kind, name, *args, env=None):
    """Run a tool with args (no -p added) to completion: (rc, lines)."""
    return run(program(kind, name) + [*map(str, args)], env=env)


_HELPERS = {}


def kernel_helpers(prog_type):
    """The BPF helpers this kernel lets a program of prog_type (bpftool's
    name: a uprobe's is kprobe) call, as bpftool feature probe finds out:
    a program load of each.  Probed once a run."""
    if not _HELPERS:
        p = subprocess.run(["bpftool", "-j", "feature", "probe", "kernel"],
                           capture_output=True, text=True, timeout=probekit.TIMEOUT)
        assert p.returncode == 0, p.stderr
        _HELPERS.update(json.loads(p.stdout)["helpers"])
    return set(_HELPERS[f"{prog_type}_available_helpers"])


def batch_fallback(tool):
    """The line libbpf iolatency and iosize say first, where this kernel
    lacks bpf_loop() and they may load a program to find out (CAP_BPF or
    CAP_SYS_ADMIN): [] where they read batches."""
    if tool not in ("iolatency", "iosize") or "bpf_loop" in kernel_helpers("kprobe"):
        return []
    return [f"probekit-{tool}: kernel lacks bpf_loop() (5.17): reading as --per-io does"]


def run_as_nobody(cmd):
    """cmd run as user and group 65534: (rc, output lines), which must be
    valid UTF-8."""
    return run(["setpriv", "--reuid=65534", "--regid=65534",
                "--clear-groups", *cmd], errors="strict")


# --- another user (test_libbpf.py's privilege cases, test_hist_pairs.py) --

NOBODY = 65534


def as_nobody(*caps):
    """argv prefix: run as user and group 65534 with exactly these
    capabilities (names as setpriv spells them), as a service account
    given them by systemd's AmbientCapabilities= would."""
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
            "--clear-groups"]
    if caps:
        c = ",".join("+" + x for x in caps)
        argv += [f"--inh-caps={c}", f"--ambient-caps={c}"]
    return argv


@contextlib.contextmanager
def nobody_blktgt(blktgt_bin, tmp_path):
    """A started blktgt running as user 65534, its sockets in a directory
    that user owns; SIGKILLed at the end unless stopped already."""
    home = tempfile.mkdtemp(prefix="probekit-nobody-")
    os.chown(home, NOBODY, NOBODY)
    launcher = tmp_path / "blktgt-as-nobody"
    launcher.write_text("#!/bin/sh\nexec " + " ".join(as_nobody())
                        + f" {shlex.quote(blktgt_bin)} \"$@\"\n")
    launcher.chmod(0o700)
    t = probekit.Target(str(launcher), pathlib.Path(home))
    try:
        t.start()
        with open(f"/proc/{t.pid}/status") as f:
            assert f"Uid:\t{NOBODY}\t" in f.read()
        yield t
    finally:
        t.stop(sig=signal.SIGKILL, expect_rc=None)
        shutil.rmtree(home)


def link_types(pid):
    """The kinds of BPF link process pid holds, as their fdinfo names
    them (uprobe_multi, perf_event, ...)."""
    kinds = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for ln in f:
                    if ln.startswith("link_type:"):
                        kinds.add(ln.split()[1])
        except OSError:
            pass
    return kinds


@pytest.fixture(scope="module")
def usdt_multi(blktgt_bin, tmp_path_factory):
    """Whether libbpf's USDT attach makes multi-uprobe links here, seen
    in what probekit-iosize holds once tracing, as root: the fact each
    tool's privilege line must follow (libbpf 1.1: uprobe perf events;
    1.5 and 1.7 on this kernel: multi-uprobe links)."""
    t = probekit.Target(blktgt_bin, tmp_path_factory.mktemp("links"))
    t.start()
    try:
        tool = Tool("libbpf", "iosize", t.pid).start()
        kinds = link_types(tool.proc.pid)
        tool.stop()
    finally:
        t.stop()
    # Before Linux 5.15 a perf event takes its program by ioctl, with no
    # link to show: none at all is perf events too.
    assert kinds in ({"uprobe_multi"}, {"perf"}, set()), kinds
    return kinds == {"uprobe_multi"}


@pytest.fixture
def nobody_target(blktgt_bin, tmp_path):
    """nobody_blktgt with the two malloc bdevs of the bdevs fixture,
    stopped at the end, and checked for a clean exit."""
    with nobody_blktgt(blktgt_bin, tmp_path) as t:
        for name in ("Malloc0", "Malloc1"):
            t.rpc("bdev_malloc_create", name=name, size_mb=16,
                  block_size=512)
        yield t
        t.stop()


# --- reading the text format (doc/output.md documents it) ----------
#
# Both printers draw bars of '*' only (bcc/probekit_bcc_hist.py's _stars,
# libbpf/histogram.c's print_stars), so a row with anything else is not a
# row.

SECTION = re.compile(r"^(\w+ = [^,]*)(, \w+ = [^,]*)*$")
HEADER = re.compile(r"^ +(\S+) +: count +distribution$")
LOG2_ROW = re.compile(r"^ *(\d+) -> (\d+) +: (\d+) +\|([* ]*)\|$")
LIN_ROW = re.compile(r"^ +(\d+) +: (\d+) +\|([* ]*)\|$")
EXTRA = re.compile(r"^(\w+): (\d+)$")
# Zero hits: a header, then "0 " and the spec's counts (toolspec.EMPTY),
# and after a colon its likely cause when the tool can tell one.
EMPTY = re.compile(r"^0 [A-Za-z/ ]+(: .*)?$")
TIMESTAMP = re.compile(r"^\d\d:\d\d:\d\d\s*$")


def parse(lines):
    """Histograms in a tool's text output: a list of dicts with key, unit,
    scale and rows [(low, high or None, count)], plus extra fields.  An
    empty result (a header, then "0 I/Os") is no histogram, as in JSON."""
    hists, key = [], {}
    for ln in lines:
        if EMPTY.match(ln) and hists and not hists[-1]["rows"]:
            hists.pop()
            continue
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


def timestamps(lines):
    """The "HH:MM:SS" lines -T puts before each interval."""
    return [ln for ln in lines if TIMESTAMP.match(ln)]


def total(h):
    return sum(c for _, _, c in h["rows"])


def by_key(hists, *fields):
    return {tuple(h["key"][f] for f in fields): h for h in hists}


def nonzero(h):
    return {(lo, hi): c for lo, hi, c in h["rows"] if c}


# An interval object's "ts": local time, RFC 3339, milliseconds, offset.
ISO_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d")


def mask_ts(lines):
    """lines with each JSON object's "ts" value, which must be of the
    form ISO_TS, replaced by "TS": for comparing two runs' bytes."""
    out = []
    for ln in lines:
        if ln.startswith("{"):
            m = re.search(r'"ts": "([^"]*)"', ln)
            assert m and ISO_TS.fullmatch(m.group(1)), ln
            ln = ln[:m.start(1)] + "TS" + ln[m.end(1):]
        out.append(ln)
    return out


def json_objects(lines, keep_ts=False):
    """The JSON objects of a tool's output.  Each must carry "ts" in
    the form ISO_TS, right after "pid" (and "binary"); it is taken out
    (unless keep_ts), so that callers compare the rest exactly."""
    objs = [json.loads(ln) for ln in lines if ln.startswith("{")]
    for o in objs:
        keys = list(o)
        at = keys.index("binary" if o.get("pid") is None else "pid") + 1
        assert keys[at:at + 1] == ["ts"], o
        # (or "TS": checked, then masked by mask_ts())
        assert o["ts"] == "TS" or ISO_TS.fullmatch(o["ts"]), o["ts"]
        if not keep_ts:
            del o["ts"]
    return objs


# --- the target and its workload ---------------------------------------------

@pytest.fixture
def bdevs(target):
    """Two malloc bdevs on the target: Malloc0 and Malloc1."""
    for name in ("Malloc0", "Malloc1"):
        target.rpc("bdev_malloc_create", name=name, size_mb=16,
                   block_size=512)
    return target


# io__batch's name table (include/io_batch.h, specs/limits.toml): a name
# is cut to BDEV_NAME_LEN - 1 characters, and the live bdevs past
# BDEV_INDEX_MAX - 1 share the last slot, "(other)".
CUT = toolspec.limits()["BDEV_NAME_LEN"] - 1
SLOTS = toolspec.limits()["BDEV_INDEX_MAX"] - 1
# Two names that share their first CUT characters.
MERGED_PAIR = tuple("nb_with_a_rather_long_name_0000"[:CUT] + tail
                    for tail in ("1", "2_and_more"))


def merged_bdevs(target, past=0):
    """Null bdevs on the target: MERGED_PAIR's two, which share one cut
    name, then, with past, short-named ones up to SLOTS + past live bdevs
    (the last past of them beyond the table, under "(other)").  Returns
    the short names, in order."""
    live = len(target.rpc("bdev_list"))
    for name in MERGED_PAIR:
        target.rpc("bdev_null_create", name=name, size_mb=1, block_size=512)
    more = [f"x{i}" for i in range(SLOTS + past - live - len(MERGED_PAIR))] \
        if past else []
    for name in more:
        target.rpc("bdev_null_create", name=name, size_mb=1, block_size=512)
    return more


def workload(target, bdev, pattern, io_size, qd, count):
    r = target.rpc("workload_run", bdev=bdev, pattern=pattern,
                   io_size=io_size, queue_depth=qd, count=count)
    assert r["ios"] == count and r["errors"] == 0, r
    return r


def trace_until_target_exits(blktgt_bin, tmp_path, tool):
    """A blktgt of its own, traced by tool(pid) (a Tool, not started)
    through 11 reads of 4096 bytes on a new Malloc0, then stopped: the
    target's PID and the tool's output once it has exited."""
    tgt = probekit.Target(blktgt_bin, tmp_path).start()
    try:
        t = tool(tgt.pid).start()
        tgt.rpc("bdev_malloc_create", name="Malloc0", size_mb=8,
                block_size=512)
        workload(tgt, "Malloc0", "read", 4096, 2, 11)
    finally:
        tgt.stop()
    return tgt.pid, t.wait()


# --- error cases -------------------------------------------------------------

def one_error_line(rc, lines, tool, pattern, want_rc=None):
    assert rc != 0 and (want_rc is None or rc == want_rc), (rc, lines)
    assert len(lines) == 1, lines
    assert re.match(rf"^probekit-{tool}(-bcc)?: .*{pattern}", lines[0]), lines


def unused_pid():
    """A PID no process has: one above pid_max."""
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read()) + 1


def run_on_process_without_probes(run_on):
    """run_on(pid) for a live process that has no blktgt probes."""
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        return run_on(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()


def run_on_nousdt_target(build, tmp_path, run_on):
    """run_on(pid) for a blktgt built with USDT=0 (make check builds it:
    fails there when it is missing, skips in a plain pytest run)."""
    binary = os.path.join(build, "nousdt", "bin", "blktgt")
    if not os.access(binary, os.X_OK):
        allowed_skips.require(f"{binary} is not built (make check builds it: "
                              "make O=build/nousdt USDT=0)")
    tgt = probekit.Target(binary, tmp_path).start()
    try:
        return run_on(tgt.pid)
    finally:
        tgt.stop()


def fixed_workload(target):
    """The same I/Os every time: fixed types and sizes, prime counts."""
    workload(target, "Malloc0", "read", 4096, 4, 23)
    workload(target, "Malloc1", "write", 65536, 2, 37)
    workload(target, "Malloc0", "randwrite", 512, 8, 97)


def after_ready(lines):
    """A tool's output after its readiness line."""
    i = next(i for i, ln in enumerate(lines) if ln.endswith("to end."))
    return lines[i + 1:]


def usdtcount_counts(lines):
    """usdtcount's text: {probe: count}."""
    rows = after_ready(lines)
    if not rows:
        return {}
    assert rows[0].split() == ["PROBE", "COUNT"], rows
    out = {}
    for ln in rows[1:]:
        f = ln.split()
        if len(f) != 2 or not f[1].isdigit():
            break
        out[f[0]] = int(f[1])
    return out


class Gen(Tool):
    """A generic tool (usdtlat, usdtcount) of either kind, given -p PID or
    -b PATH among its arguments; rc, the exit status it must end with.
    Not tidy: its readiness line names probes and a path, and
    bcc/README.md fixes it, so it may reach 80 columns."""

    def __init__(self, kind, name, *args, rc=0):
        self.cmd = program(kind, name) + [*map(str, args)]
        self.env = dict(os.environ)
        self.tidy = False
        self.rc = rc

    def wait(self):
        if not self.rc:
            return super().wait()
        lines = self.out.drain(TIMEOUT)
        assert self.proc.wait(timeout=TIMEOUT) == self.rc, lines
        return lines
