# SPDX-License-Identifier: BSD-2-Clause
"""bt/*.bt: every script compiles against the built blktgt, and each one,
run live through wrapper/bpftrace.sh, reports exactly what a known workload
did (a prime number of I/Os, a known set of RPC calls, a known qemu-io
command list, one export pause and resume)."""

import functools
import glob
import os
import re
import resource
import subprocess
import sys
import threading
import time

import pytest

import probekit
from probekit import ROOT, WRAPPER, Trace

sys.path.insert(0, os.path.join(ROOT, "probes"))
from probelib import bpftrace as btparse  # noqa: E402
from probelib.catalog import parse_catalog  # noqa: E402

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("qemu-io")

BT_DIR = os.path.join(ROOT, "bt")
SCRIPTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(BT_DIR, "*.bt")))
N = 997
IO_SIZE = 4096


def bt(name):
    return os.path.join(BT_DIR, name)


@pytest.fixture
def tgt(target):
    """The running blktgt with a 64 MiB RAM bdev m0 exported as e0."""
    target.rpc("bdev_malloc_create", name="m0", size_mb=64, block_size=4096)
    target.rpc("export_create", name="e0", bdev="m0")
    return target


def workload(t, n=N, pattern="randrw"):
    r = t.rpc("workload_run", bdev="m0", pattern=pattern, io_size=IO_SIZE,
              queue_depth=4, count=n)
    assert r["ios"] == n and r["errors"] == 0, r
    return r


def keyed(lines, name):
    """{key: value} of a map printed as @name[key]: value (key as text)."""
    rx = re.compile(rf"^@{name}\[(.*)\]: (-?\d+)$")
    return {m.group(1): int(m.group(2)) for m in map(rx.match, lines) if m}


def hists(lines, name):
    """{key: total count} of the histograms printed as @name[key]: then
    bucket lines."""
    out, key = {}, None
    head = re.compile(rf"^@{name}(?:\[(.*)\])?:\s*$")
    bucket = re.compile(r"^\[[^\]]*[\])]\s+(\d+) \|")
    for line in lines:
        m = head.match(line)
        if m:
            key = m.group(1) or ""
            out[key] = 0
            continue
        b = bucket.match(line)
        if b and key is not None:
            out[key] += int(b.group(1))
        elif not b:
            key = None
    return out


# --- a full map: the variable that bounds it, and what bpftrace says ----------

MAP_FULL = "Map full; can't update element"


@functools.lru_cache(maxsize=None)
def map_keys_name():
    """The variable that bounds this bpftrace's maps, found by filling a
    one-key map in BEGIN: BPFTRACE_MAX_MAP_KEYS where it holds (0.23
    reads it, and warns that the old name is deprecated; 0.27 reads only
    it, and its --help names neither), else BPFTRACE_MAP_KEYS_MAX
    (0.17, which ignores the new name)."""
    p = subprocess.run(["bpftrace", "-e", FILL_ONE_KEY], capture_output=True,
                       text=True, timeout=probekit.TIMEOUT,
                       env=dict(os.environ, BPFTRACE_MAX_MAP_KEYS="1"))
    assert p.returncode == 0, p.stdout + p.stderr
    kept = re.findall(r"^@m\[\d+\]: \d+$", p.stdout, re.M)
    assert len(kept) in (1, 3), p.stdout + p.stderr
    return "BPFTRACE_MAX_MAP_KEYS" if len(kept) == 1 else "BPFTRACE_MAP_KEYS_MAX"


# Three keys into a map, then exit: the map's keys are printed at exit.
FILL_ONE_KEY = "BEGIN { @m[1] = 1; @m[2] = 2; @m[3] = 3; exit(); }"


def map_keys_env(keys):
    """The environment that bounds every map to keys keys."""
    return {map_keys_name(): str(keys)}


def full_map_warnings(refused):
    """How many warnings this bpftrace prints for refused updates of a
    full map: one each where it reports them itself (0.23 does), none
    where it is silent (0.17).  Found by filling a one-key map in BEGIN."""
    p = subprocess.run(["bpftrace", "-e", FILL_ONE_KEY],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT,
                       env=dict(os.environ, **map_keys_env(1)))
    assert p.returncode == 0, p.stdout + p.stderr
    seen = (p.stdout + p.stderr).count(MAP_FULL)
    assert seen in (0, 2), p.stdout + p.stderr
    return refused if seen else 0


def check_warnings(lines, map_full=0):
    """No error and no warning, but for bpftrace's own map_full warnings
    about a full map (any number of them when map_full is None)."""
    text = "\n".join(lines)
    assert map_full is None or text.count(MAP_FULL) == map_full, text
    assert not any(("ERROR" in l or "WARNING" in l) and MAP_FULL not in l
                   for l in lines), text


def run_trace(pid, script, action, map_full=0, **kw):
    t = Trace(pid, [bt(script)], **kw).start()
    try:
        action()
    finally:
        lines = t.stop()
    assert t.proc.returncode == 0, "\n".join(lines)
    check_warnings(lines, map_full)
    return lines


# --- compile checks -----------------------------------------------------------

_emit_only = []


def emit_only():
    """bpftrace's options that write the program's ELF and end.  0.17's
    --emit-elf is a dry run; a newer one's (0.27) writes the ELF and then
    runs the program, unless --dry-run, which it lists in --help, ends it
    once the probes are attached."""
    if not _emit_only:
        h = subprocess.run(["bpftrace", "--help"], capture_output=True, text=True,
                           timeout=probekit.TIMEOUT)
        dry = ["--dry-run"] if re.search(r"^\s*--dry-run\b", h.stdout + h.stderr, re.M) else []
        _emit_only.append(dry + ["--emit-elf"])
    return _emit_only[0]


# A compile's CPU-time bound, six times the most seen (compile_check).
COMPILE_CPU_S = 120


def compile_check(pid, scripts, tmp_path):
    """The wrapper resolves every probe (-n), then bpftrace compiles the
    final program to an ELF (emit_only)."""
    r = subprocess.run([WRAPPER, "--dry-run", str(pid), *scripts], capture_output=True,
                       text=True, timeout=probekit.TIMEOUT)
    if r.returncode != 0:
        return r
    # Hang bounds: bpftrace 0.17 compiles the 15 scripts joined in 17-20
    # s of CPU (the batch scripts' unrolled loops, most of it), which a
    # machine at load 20 stretched past 60 s of wall time and one at load
    # 11 past 180 s.  So the bound on a compile that spins is its CPU time
    # (RLIMIT_CPU, six times the most seen), which load does not stretch;
    # the wall-time bound is only for one that blocks.
    def cpu_bound():
        resource.setrlimit(resource.RLIMIT_CPU, (COMPILE_CPU_S, COMPILE_CPU_S))
    return subprocess.run(["bpftrace", "-p", str(pid), *emit_only(),
                           str(tmp_path / "prog.elf"), "-e", r.stdout],
                          capture_output=True, text=True, preexec_fn=cpu_bound,
                          timeout=10 * probekit.TIMEOUT)


def test_collection_is_complete():
    assert SCRIPTS == sorted(["exports.bt", "funcs.bt", "iolat.bt", "iolat_batch.bt", "iops.bt",
                              "iops_batch.bt", "iosize.bt", "iosize_batch.bt", "lifecycle.bt",
                              "msgs.bt", "nbd.bt", "nbdtime.bt", "rpc.bt", "states.bt",
                              "syscalls.bt"])


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_compiles(bpf, target, script, tmp_path):
    r = compile_check(target.pid, [bt(script)], tmp_path)
    assert r.returncode == 0, r.stderr
    with open(bt(script)) as f:
        head = f.read(4000)
    # bpftrace-tools style header: name and purpose, usage, example output.
    assert re.search(rf"^ \* {re.escape(script)}\t\S", head, re.M), script
    assert "USAGE: probekit-bpftrace " in head and f"bt/{script}" in head
    assert "Example output" in head


QUICKSTART_BT = os.path.join(ROOT, "examples", "quickstart", "bt")


@pytest.mark.parametrize("catalog,scripts", [
    (os.path.join(ROOT, "probes", "blktgt.d"), [bt(s) for s in SCRIPTS]),
    (os.path.join(ROOT, "examples", "quickstart", "quickstart.d"),
     sorted(glob.glob(os.path.join(QUICKSTART_BT, "*.bt")))),
])
def test_shipped_scripts_read_usdt_arguments_by_name(catalog, scripts):
    """A shipped script reads a USDT probe's arguments by name
    (args.len, not arg4): every probe its catalog declares names all its
    arguments, so no usdt block of a shipped script reads argN.  (A
    uprobe's argN, funcs.bt's, has no name to read.)"""
    cat = parse_catalog(catalog)
    assert all(a["name"] for p in cat["probes"] for a in p["args"]), catalog
    by_number = []
    for path in scripts:
        with open(path) as f:
            script = btparse.parse(f.read())
        for block in script.blocks:
            if any(ap.kind == "usdt" for ap in block.points):
                by_number += [f"{os.path.relpath(path, ROOT)}:{script.line(r.off)}: {r.form}"
                              for r in block.reads]
    assert scripts and not by_number, by_number


def test_all_scripts_compile_as_one_program(bpf, target, tmp_path):
    """Every script joins with every other: all of them in one program,
    but iops_batch.bt, which compiles joined with the other batch
    scripts.  All 15 in one program, bpftrace 0.27's LLVM stops with
    'Branch target out of insn range' (checked on Debian unstable: any 14
    of them compile, and the three batch scripts together), since
    iops_batch.bt counts each record into one of two maps, so that no map
    is cleared while it counts (bt/iops.bt says why)."""
    r = compile_check(target.pid, [bt(s) for s in SCRIPTS if s != "iops_batch.bt"], tmp_path)
    assert r.returncode == 0, r.stderr
    r = compile_check(target.pid, [bt(s) for s in SCRIPTS if s.endswith("_batch.bt")], tmp_path)
    assert r.returncode == 0, r.stderr


def test_compile_check_fails_on_bad_probe(bpf, target, tmp_path):
    bad = tmp_path / "bad.bt"
    bad.write_text("usdt:__EXE__:blktgt:io__sumbit { @ = count(); }\n")
    r = compile_check(target.pid, [str(bad)], tmp_path)
    assert r.returncode != 0 and re.fullmatch(
        r"probekit-bpftrace: no USDT probe blktgt:io__sumbit in \S+/blktgt; "
        r"nearest: blktgt:io__submit\n", r.stderr), r.stderr
    # An argument the probe does not have: bpftrace 0.17 refuses it, 0.27
    # reads past the probe's; the wrapper checks it against the notes.
    bad.write_text("usdt:__EXE__:blktgt:target__state {\n\t@[arg1] = count();\n}\n"
                   "usdt:__EXE__:blktgt:target__state { @[arg4] = count(); }\n")
    r = compile_check(target.pid, [str(bad)], tmp_path)
    assert r.returncode != 0 and r.stderr == (
        f"probekit-bpftrace: {bad}:4: probe blktgt:target__state has 2 arguments, "
        "arg0 to arg1; its block reads arg4\n"), r.stderr


# --- live, with exact counts ----------------------------------------------------

def test_iops_counts_every_io(bpf, tgt):
    """Per-second lines, then the exact total, and the per-second lines
    add up to it exactly: the seconds alternate between two maps, so no
    map is cleared while its probe counts into it (one map cleared under
    its probe was seen 45 short and 156,270 over).  -d's timer runs from
    its attach, before the readiness line, so the line's trip to the test
    and the whole workload must fit in it: 4 s, not 2, leaves room for a
    loaded machine's wakeups (each held up to 172 ms,
    test_bdev_delay.py)."""
    t = Trace(tgt.pid, [bt("iops.bt")], wrapper_opts=["-d", "4"]).start()
    try:
        res = workload(tgt)
        rc = t.proc.wait(timeout=probekit.TIMEOUT)
    finally:
        lines = t.stop()
    assert rc == 0, lines
    assert keyed(lines, "iops_total") == {"m0, read": res["reads"], "m0, write": res["writes"]}, lines
    assert any(re.match(r"^\d\d:\d\d:\d\d I/O per second:$", l) for l in lines), lines
    per_second = sum(int(m.group(1)) for m in
                     (re.match(r"^@iops_[ab]\[m0, \w+\]: (\d+)$", l) for l in lines) if m)
    assert per_second == N, lines
    assert any(re.match(r"^\d\d:\d\d:\d\d last \d+\.\d s \(partial\):$", l) for l in lines)


def test_iolat_histogram_counts_every_io(bpf, tgt):
    res = {}
    lines = run_trace(tgt.pid, "iolat.bt", lambda: res.update(workload(tgt)))
    assert hists(lines, "iolat_us") == {"m0, read": res["reads"], "m0, write": res["writes"]}, lines
    assert not any(l.startswith("@iolat_start") for l in lines), "END must clear @iolat_start"


def slow_bdev(t, read_us):
    """D0: reads of RAM bdev M0 held for read_us on the submitting reactor."""
    t.rpc("bdev_malloc_create", name="M0", size_mb=16, block_size=512)
    assert t.rpc("bdev_delay_create", name="D0", base="M0", read_us=read_us,
                 write_us=read_us) == "D0"


def in_flight(t):
    s = t.rpc("target_stats")
    return s["io_submitted"] - s["io_completed"]


def test_iolat_counts_the_starts_a_full_table_drops(bpf, target):
    """31 reads on D0 at queue depth 31 are all submitted in one reactor
    callback, before any can complete: a 29-key start table takes 29, and
    the 2 it refuses are counted, exactly.  (Before: 29 timed, nothing
    said about the other 2.)"""
    slow_bdev(target, 100000)
    lines = run_trace(target.pid, "iolat.bt", lambda: target.rpc(
        "workload_run", bdev="D0", pattern="read", io_size=512, queue_depth=31, count=31),
        env=map_keys_env(29), map_full=full_map_warnings(2))
    assert hists(lines, "iolat_us") == {"D0, read": 29}, lines
    assert keyed(lines, "starts_dropped") == {"iolat_start": 2}, lines


def test_iolat_path_form_keeps_processes_apart(bpf, blktgt_bin, tmp_path):
    """Given the PATH, every blktgt is traced, and each numbers its I/Os
    from 1.  7 reads wait 1 s in process A while process B runs 997 I/Os
    with the same ids: each process's I/Os are timed, 7 and 997.  (Keyed by
    id alone, B's starts overwrote A's and A's 7 were lost.)"""
    procs = []
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir()
        procs.append(probekit.Target(blktgt_bin, d).start())
    a, b = procs
    try:
        slow_bdev(a, 1000000)
        b.rpc("bdev_malloc_create", name="m0", size_mb=64, block_size=4096)
        res, done = {}, threading.Event()

        def act():
            def slow_run():
                a.rpc("workload_run", bdev="D0", pattern="read", io_size=512,
                      queue_depth=7, count=7)
                done.set()
            threading.Thread(target=slow_run, daemon=True).start()
            deadline = time.monotonic() + probekit.TIMEOUT
            while in_flight(a) != 7:
                assert time.monotonic() < deadline and not done.is_set()
                time.sleep(0.01)
            res.update(workload(b))
            assert done.wait(probekit.TIMEOUT)
        lines = run_trace(blktgt_bin, "iolat.bt", act)
    finally:
        for t in procs:
            t.stop()
    assert hists(lines, "iolat_us") == {"D0, read": 7, "m0, read": res["reads"],
                                        "m0, write": res["writes"]}, lines


def test_iosize_histogram(bpf, tgt):
    res = {}
    lines = run_trace(tgt.pid, "iosize.bt", lambda: res.update(workload(tgt)))
    assert hists(lines, "iosize_bytes") == {"m0, read": res["reads"], "m0, write": res["writes"]}, lines
    # Every I/O is 4 KiB: one bucket per key.
    assert [l for l in lines if re.match(r"^\[4K, 8K\)\s+\d+ \|", l)] and \
        not [l for l in lines if re.match(r"^\[(?!4K, 8K\))[^\]]*[\])]\s+[1-9]\d* \|", l)], lines


def test_funcs_counts_bdev_execute(bpf, tgt):
    res = {}
    lines = run_trace(tgt.pid, "funcs.bt", lambda: res.update(workload(tgt)))
    calls = keyed(lines, "fn_calls")
    assert sum(calls.values()) == N, lines
    assert sorted(calls.values()) == sorted([res["reads"], res["writes"]]), lines
    assert keyed(lines, "fn_returns") == {str(IO_SIZE): N}, lines
    assert hists(lines, "fn_len_bytes") == {"": N}
    assert hists(lines, "fn_ns") == {"": N}
    assert not any(l.startswith("@fn_entry") for l in lines)


# --- per-thread entries: reclaimed when a thread dies, drops counted ---------

# A table this small is filled by a few threads, yet holds every key of
# funcs.bt's other maps (2 types, 1 return value, a few histogram buckets).
FUNCS_TABLE = 61


def funcs_trace(driver, steps, map_full=0):
    t = Trace(driver.pid, [bt("funcs.bt")], env=map_keys_env(FUNCS_TABLE)).start()
    try:
        steps()
    finally:
        lines = t.stop()
    assert t.proc.returncode == 0, "\n".join(lines)
    check_warnings(lines, map_full)
    return lines


def test_funcs_reclaims_dead_threads_entries(bpf, funcs_driver):
    """61 threads die inside bdev_execute(), which leaves 61 entries (a full
    table) unless their exit reclaims them; then 23 calls are timed, 23 of
    23.  (Without the sched_process_exit probe: 0 of 23, and nothing said.)"""
    d, n = funcs_driver, 23

    def steps():
        d.do(f"die {FUNCS_TABLE}", f"died {FUNCS_TABLE}")
        d.wait_threads(1)
        d.do(f"call {n}", f"called {n}")
    lines = funcs_trace(d, steps)
    assert keyed(lines, "fn_calls") == {"0": FUNCS_TABLE, "1": n}, lines
    assert keyed(lines, "fn_returns") == {"4096": n}, lines
    assert hists(lines, "fn_ns") == {"": n}, lines
    assert keyed(lines, "starts_dropped") == {}, lines


def test_funcs_counts_starts_a_full_table_drops(bpf, funcs_driver):
    """61 threads wait inside bdev_execute(): the table is full, so each of
    23 calls beside them is dropped and counted, exactly; the 61 are timed
    when they return.  (Before the count: 61 timed, 23 lost, nothing said.)"""
    d, n, warm = funcs_driver, 23, 6

    def steps():
        # Six calls first make @fn_returns[4096] exist: bpftrace 0.23's
        # count() loses a count when two CPUs insert a new key at once
        # (it warns "File exists", retcode -17, and counts 60 of the 61
        # returns released together), a race of the tracer, not of this
        # script (doc/supported-systems.md).
        d.do(f"call {warm}", f"called {warm}")
        d.do(f"block {FUNCS_TABLE}", f"blocked {FUNCS_TABLE}")
        d.do(f"call {n}", f"called {n}")
        d.do("release", f"released {FUNCS_TABLE}")
    # bpftrace 0.23 printed no map-full warning here, though it printed one
    # for each of iolat.bt's refused starts: the script's count is the
    # exact one.
    lines = funcs_trace(d, steps, map_full=None)
    assert keyed(lines, "fn_calls") == {"0": FUNCS_TABLE, "1": warm + n}, lines
    # A return is counted with its entry's time (the uretprobe's predicate).
    assert keyed(lines, "fn_returns") == {"4096": warm + FUNCS_TABLE}, lines
    assert hists(lines, "fn_ns") == {"": warm + FUNCS_TABLE}, lines
    assert keyed(lines, "starts_dropped") == {"fn_entry": n}, lines


def pin_reactors(pid):
    """Each reactor thread of pid on a CPU of its own, as far as there
    are CPUs: the number pinned to distinct CPUs (with one CPU, none is
    marked; unpinned, some may be)."""
    cpus = sorted(os.sched_getaffinity(0))
    tids = {0: pid}     # reactor 0 is the main thread (target/reactor.c)
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            comm = f.read().strip()
        if comm.startswith("reactor_"):
            tids[int(comm[len("reactor_"):])] = int(tid)
    for r, tid in tids.items():
        os.sched_setaffinity(tid, {cpus[r % len(cpus)]})
    return min(len(tids), len(cpus))


def test_states_pause_resume_shutdown_in_order(bpf, tgt):
    # Reactor 1's step follows reactor 0's: on two CPUs, a marked line.
    pinned = pin_reactors(tgt.pid)
    t = Trace(tgt.pid, [bt("states.bt")]).start()
    try:
        assert tgt.rpc("export_pause", name="e0") is True
        assert tgt.rpc("export_resume", name="e0") is True
        tgt.rpc("target_shutdown")
        # bpftrace ends by itself when the traced process exits: 0.17 at
        # its exit, 0.27 once it is reaped (by its parent, here the test,
        # as a service manager would).
        assert tgt.proc.wait(timeout=probekit.TIMEOUT) == 0
        rc = t.proc.wait(timeout=probekit.TIMEOUT)
    finally:
        lines = t.stop()
    assert rc == 0, lines
    # bpftrace prints each CPU's buffer in turn: the output says so, and
    # which column to sort on, before that column's header.
    at = lines.index("Lines are in time order per CPU only: sort -n on "
                     "TIME(ms) to order all.")
    assert lines[at + 1] == ("'*': ran on another CPU than its object's previous event: "
                             "may print before it."), lines
    assert lines[at + 2].startswith("TIME(ms) "), lines
    rx = re.compile(r"^([* ])\s*(\d+)\.(\d{6}) (\S+)\s+(\S+)\s+(.*)$")
    printed = [(int(m.group(2)) * 10**6 + int(m.group(3)), m.group(4), m.group(5), m.group(6),
                m.group(1) == "*") for m in map(rx.match, lines) if m]
    # The mark: a line without it ran on the CPU of its object's previous
    # event, so it is printed after that one; each object's first is
    # unmarked.  (A marked line may or may not be printed early: no probe
    # sees the order of printing.)
    for obj in {o for _, _, o, _, _ in printed}:
        mine = [(ts, i, marked) for i, (ts, _, o, _, marked) in enumerate(printed) if o == obj]
        by_time = sorted(mine)
        assert not by_time[0][2], (obj, lines)
        for (_, before, _), (_, i, marked) in zip(by_time, by_time[1:]):
            assert marked or i > before, (obj, lines)
    steps = [marked for _, e, _, s, marked in printed if e == "thread" and
             s.startswith("reactor 1 ")]
    assert len(steps) == 3 and (all(steps) or pinned < 2), (pinned, lines)
    events = sorted(e[:4] for e in printed)
    changes = [(e, o, re.sub(r" \(status 0, \d+ us\)$", "", s)) for _, e, o, s in events
               if e in ("change", "change-done", "target")]
    assert changes == [("change", "e0", "ACTIVE -> PAUSED"), ("change-done", "e0", "PAUSED"),
                       ("change", "e0", "PAUSED -> ACTIVE"), ("change-done", "e0", "ACTIVE"),
                       ("target", "blktgt", "SHUTDOWN"),
                       # shutting down deactivates the export
                       ("change", "e0", "ACTIVE -> INACTIVE"), ("change-done", "e0", "INACTIVE")], lines
    # Each change runs on every reactor: a start and a done per thread,
    # all between the change's start and done.
    threads = tgt.threads
    for i, want in enumerate(("PAUSED", "ACTIVE", "INACTIVE")):
        start = [ts for ts, e, o, s in events if e == "change"][i]
        done = [ts for ts, e, o, s in events if e == "change-done"][i]
        steps = [(e, s) for ts, e, o, s in events
                 if e in ("thread", "thread-done") and start <= ts <= done]
        assert sorted(steps) == sorted(
            [("thread", f"reactor {r} -> {want}") for r in range(threads)] +
            [("thread-done", f"reactor {r} {want}") for r in range(threads)]), lines


def test_msgs_sent_equal_executed(bpf, tgt):
    def act():
        workload(tgt, 23)
        tgt.rpc("export_pause", name="e0")
        tgt.rpc("export_resume", name="e0")
    lines = run_trace(tgt.pid, "msgs.bt", act)
    sent, executed = keyed(lines, "msg_sent"), keyed(lines, "msg_executed")
    assert sent and sent == executed, lines
    # One reactor_for_each_thread() per export state change; its steps run on
    # every reactor.
    foreach = keyed(lines, "msg_foreach")
    assert sum(foreach.values()) == 2, lines
    by_thread = keyed(lines, "msg_by_thread")
    assert sorted(by_thread) == [str(r) for r in range(tgt.threads)], lines
    assert sum(by_thread.values()) == sum(executed.values())
    # usym() names real functions, not raw addresses.
    assert not any(k.startswith("0x") for k in executed), executed


def test_lifecycle_bdevs_workloads_threads(bpf, target):
    t = Trace(target.pid, [bt("lifecycle.bt")]).start()
    try:
        target.rpc("bdev_malloc_create", name="lc0", size_mb=8, block_size=512)
        r = target.rpc("workload_run", bdev="lc0", pattern="write", io_size=IO_SIZE,
                       queue_depth=4, count=23)
        assert r["ios"] == 23
        # usym() is resolved when bpftrace prints the line, which must be
        # while the process still lives: wait for each round's line.
        round_rx = re.compile(r"^\s*\d+\.\d{6} foreach-done ")
        for n, (method, params) in enumerate(
                (("export_create", dict(name="lce", bdev="lc0")),
                 ("export_pause", dict(name="lce")),
                 ("export_resume", dict(name="lce")),
                 ("export_delete", dict(name="lce"))), 1):
            target.rpc(method, **params)
            wait_lines(t, round_rx, n)
        target.rpc("bdev_delete", name="lc0")
        t.out.wait_for(r" bdev-delete ")
        target.rpc("target_shutdown")
        # Reaped, as a service manager would: bpftrace 0.27 ends only then.
        assert target.proc.wait(timeout=probekit.TIMEOUT) == 0
        rc = t.proc.wait(timeout=probekit.TIMEOUT)  # ends with the target
    finally:
        lines = t.stop()
    assert rc == 0, lines
    rx = re.compile(r"^\s*(\d+)\.(\d{6}) (\S+)\s+(.*)$")
    events = sorted((int(m.group(1)) * 10**6 + int(m.group(2)), m.group(3), m.group(4))
                    for m in map(rx.match, lines) if m)
    kinds = [e for _, e, _ in events]
    details = [d for _, _, d in events]
    assert kinds.count("bdev-create") == 1 and "lc0 malloc 16384 x 512" in details, lines
    assert kinds.count("bdev-delete") == 1 and "lc0 malloc" in details, lines
    job = [d for _, e, d in events if e == "workload"]
    assert len(job) == 1 and re.match(r"\d+ on lc0: write 4096 B qd 4$", job[0]), lines
    done = [d for _, e, d in events if e == "workload-done"]
    assert len(done) == 1 and re.match(r"\d+: 23 I/Os, status 0, \d+ us$", done[0]), lines
    # create (INACTIVE -> ACTIVE), pause, resume, delete: four export
    # rounds, then whatever shutdown runs (named or not: it may print after
    # the process is gone).
    rounds = [d for _, e, d in events if e == "foreach-done"]
    assert len(rounds) >= 4, lines
    assert all(re.match(r"change_step, \d+ us$", d) for d in rounds[:4]), lines
    stops = sorted(d.split(" (")[0] for _, e, d in events if e == "thread-stop")
    assert stops == [f"reactor {i}" for i in range(target.threads)], lines
    assert kinds.index("bdev-create") < kinds.index("workload") < kinds.index("workload-done") \
        < kinds.index("bdev-delete") < kinds.index("thread-stop"), lines
    target.proc.wait(timeout=probekit.TIMEOUT)


PER_CALL = re.compile(r"^\s*\d+\.\d{6} \d+\s+\w+\s+-?\d+\s+\d+$")


def wait_lines(trace, rx, n):
    """Wait until n lines match rx: bpftrace 0.17 drops the printf events
    it has not read yet when Ctrl-C arrives, so a test stops a trace only
    once every line it expects has been printed."""
    trace.out.wait_until(lambda lines: sum(1 for l in lines if rx.match(l)) >= n)


def test_rpc_counts_calls_and_statuses(bpf, tgt):
    def act():
        for _ in range(7):
            tgt.rpc("bdev_list")
        for _ in range(3):
            tgt.rpc("export_list")
        with pytest.raises(probekit.RpcError):
            tgt.rpc("bdev_delete", name="no-such-bdev")
    t = Trace(tgt.pid, [bt("rpc.bt")]).start()
    try:
        act()
        wait_lines(t, PER_CALL, 11)
    finally:
        lines = t.stop()
    assert t.proc.returncode == 0, lines
    calls = keyed(lines, "rpc_calls")
    assert calls.pop("bdev_list, 0") == 7
    assert calls.pop("export_list, 0") == 3
    (key, n), = calls.items()
    assert key.startswith("bdev_delete, -") and n == 1, calls
    per_call = [l for l in lines if PER_CALL.match(l)]
    assert len(per_call) == 11, lines
    assert len([l for l in per_call if re.search(r" bdev_delete\s+-\d+\s", l)]) == 1, per_call
    assert sum(hists(lines, "rpc_us").values()) == 11


def test_nbd_counts_qemu_io_commands(bpf, tgt):
    def act():
        subprocess.run(["qemu-io", "-f", "raw", "-c", "write -P 0x5a 0 64k",
                        "-c", "read -P 0x5a 0 64k", "-c", "write -P 0x3c 64k 4k",
                        tgt.nbd_uri("e0")], check=True, capture_output=True,
                       timeout=probekit.TIMEOUT)
    t = Trace(tgt.pid, [bt("nbd.bt")]).start()
    try:
        act()
        # The disconnect line is the last thing the connection does.
        t.out.wait_for(r"^\s*\d+\.\d{6} \d+\s+disconnect ")
    finally:
        lines = t.stop()
    assert t.proc.returncode == 0, lines
    commands = keyed(lines, "nbd_commands")
    # qemu-io flushes what it wrote before it disconnects.
    assert commands == {"READ": 1, "WRITE": 2, "DISC": 1, "FLUSH": 1}, lines
    replies = keyed(lines, "nbd_reply_errors")
    assert replies == {"0": 4}, lines
    assert len([l for l in lines if re.search(r" connect 127\.0\.0\.1:\d+$", l)]) == 1
    assert any(re.search(r" option \w+ status 0$", l) for l in lines), lines
    m = [re.search(r" disconnect 127\.0\.0\.1:\d+ after (\d+) requests$", l) for l in lines]
    assert [int(x.group(1)) for x in m if x] == [sum(commands.values())], lines


def test_syscalls_filtered_to_the_target(bpf, tgt):
    def act():
        for _ in range(5):
            tgt.rpc("bdev_list")
    lines = run_trace(tgt.pid, "syscalls.bt", act)
    by_name = keyed(lines, "sys_by_name")
    # Each RPC call is one accepted connection on the main thread.
    accepts = {k: v for k, v in by_name.items()
               if k.endswith("tracepoint:syscalls:sys_enter_accept4")}
    assert accepts and sum(accepts.values()) >= 5, lines
    by_thread = keyed(lines, "sys_by_thread")
    # Only the target's threads: its main thread and reactor threads.
    comms = set(open(f"/proc/{tgt.pid}/task/{t}/comm").read().strip()
                for t in os.listdir(f"/proc/{tgt.pid}/task"))
    assert by_thread and set(by_thread) <= comms, (by_thread, comms)
    assert sum(keyed(lines, "sys_by_nr").values()) == sum(by_thread.values())
