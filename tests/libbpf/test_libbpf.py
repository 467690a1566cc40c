# SPDX-License-Identifier: BSD-2-Clause
"""libbpf/ tools against a live blktgt, and against their bcc/ twins.

Every test drives blktgt's built-in workload (workload_run with count=N, N
prime), so each histogram's counts are exact.  A tool prints "... Hit
Ctrl-C to end." only once its programs are loaded and attached; the test
waits for that line, runs the workload, then SIGINTs the tool, which prints
its final histograms and exits 0.

The comparisons with bcc/ run the two tools one after the other on the
same target, each over the same deterministic workload (fixed types and
sizes, prime counts).  Both at once would work too: the kernel refuses a
second uprobe on one address with another ref_ctr_offset, and bcc/
attaches each note location with the semaphore's offset as libbpf does
(see doc/output.md).  Latencies are compared in buckets far wider
than any latency here (linear buckets of 1000 ms); funclat has no linear
mode, so its latency histogram is compared by unit and count, its other
two byte for byte.
"""

import functools
import os
import resource
import subprocess

import pytest

import histtools
import probekit
from histtools import bdevs, nobody_target, usdt_multi  # noqa: F401 (fixtures)
from histtools import NOBODY, as_nobody
from histtools import (HEADER, KINDS, TOOLS, Tool, by_key, command, json_objects,
                       libbpf_path, mask_ts, nonzero, one_error_line, parse,
                       run_as_nobody, total, unused_pid, workload)
from histtools import fixed_workload

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("setpriv", "unshare", "py:bcc")


@pytest.fixture(scope="module", autouse=True)
def built():
    for t in TOOLS:
        if not os.access(libbpf_path(t), os.X_OK):
            pytest.fail(f"{libbpf_path(t)} is not built; run the suite "
                        "with 'make test'")


def run_tool(name, *args, kind="libbpf"):
    """Run a tool to completion (for errors): (rc, output lines)."""
    return histtools.run_tool(kind, name, *args)


# --- exact counts, libbpf alone ----------------------------------------------

def test_iosize_exact(bpf, bdevs):
    t = Tool("libbpf", "iosize", bdevs.pid, "-BO").start()
    fixed_workload(bdevs)
    hists = by_key(parse(t.stop()), "bdev", "type")
    assert {k: nonzero(h) for k, h in hists.items()} == {
        ("Malloc0", "read"): {(4096, 8191): 23},
        ("Malloc0", "write"): {(512, 1023): 97},
        ("Malloc1", "write"): {(65536, 131071): 37}}
    assert all(h["unit"] == "bytes" and h["scale"] == "log2"
               for h in hists.values())


def test_funclat_exact(bpf, bdevs):
    t = Tool("libbpf", "funclat", bdevs.pid).start()
    fixed_workload(bdevs)
    arg, ret, lat = parse(t.stop())
    want = {(4096, 8191): 23, (65536, 131071): 37, (512, 1023): 97}
    assert arg["unit"] == "arg4" and nonzero(arg) == want
    assert ret["unit"] == "retval" and nonzero(ret) == want
    assert ret["negative"] == 0
    assert lat["unit"] == "nsecs" and total(lat) == 23 + 37 + 97


# funclat keeps an entry per thread in a call; tests/lib/funcs_driver.c has
# threads that die or wait inside a bdev_execute() of blktgt's signature.
# Both twins: these tests are the same for each.
FUNCS_TABLE = 61


def funcs_run(kind, d, steps):
    t = Tool(kind, "funclat", d.pid, "--max-inflight", FUNCS_TABLE).start()
    steps()
    return t.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_funclat_reclaims_dead_threads_entries(bpf, funcs_driver, kind):
    """61 threads die inside the call: their exits reclaim their 61
    entries (a full table otherwise), counted, and 23 later calls are timed
    23 of 23."""
    d, n = funcs_driver, 23

    def steps():
        d.do(f"die {FUNCS_TABLE}", f"died {FUNCS_TABLE}")
        d.wait_threads(1)
        d.do(f"call {n}", f"called {n}")
    lines = funcs_run(kind, d, steps)
    arg, ret, lat = parse(lines)
    assert total(arg) == FUNCS_TABLE + n and total(lat) == n, lines
    assert nonzero(ret) == {(4096, 8191): n}, lines
    assert lines[-1] == f"{FUNCS_TABLE} starts reclaimed (thread or process exited)", lines
    assert not any("dropped" in ln for ln in lines), lines


@pytest.mark.parametrize("kind", KINDS)
def test_funclat_counts_the_starts_a_full_table_drops(bpf, funcs_driver, kind):
    """61 threads wait inside the call, filling a 61-entry table: each of
    23 calls beside them is dropped and counted; the 61 are timed."""
    d, n = funcs_driver, 23

    def steps():
        d.do(f"block {FUNCS_TABLE}", f"blocked {FUNCS_TABLE}")
        d.do(f"call {n}", f"called {n}")
        d.do("release", f"released {FUNCS_TABLE}")
    lines = funcs_run(kind, d, steps)
    arg, ret, lat = parse(lines)
    assert total(arg) == FUNCS_TABLE + n and total(lat) == FUNCS_TABLE, lines
    assert lines[-1] == f"{n} starts dropped (table full)", lines
    assert not any("reclaimed" in ln for ln in lines), lines


def test_rpclat_exact(bpf, bdevs):
    t = Tool("libbpf", "rpclat", bdevs.pid).start()
    js = Tool("libbpf", "rpclat", bdevs.pid, "-j", "-m").start()
    for _ in range(7):
        bdevs.rpc("bdev_list")
    for _ in range(3):
        bdevs.rpc("target_stats")
    workload(bdevs, "Malloc0", "read", 4096, 1, 2)
    want = {("bdev_list",): 7, ("target_stats",): 3, ("workload_run",): 1}
    hists = by_key(parse(t.stop()), "method")
    assert {k: total(h) for k, h in hists.items()} == want
    assert all(h["unit"] == "usecs" for h in hists.values())
    (obj,) = json_objects(js.stop())
    assert {(x["key"]["method"],): x["total"]
            for x in obj["histograms"]} == want
    assert all(x["unit"] == "msecs" for x in obj["histograms"])


# --- identical to the bcc/ tools ---------------------------------------------

def sequential(tool, target, *opts):
    """Output of the bcc/ tool, then of the libbpf one, over the same
    workload."""
    outs = {}
    for kind in ("bcc", "libbpf"):
        t = Tool(kind, tool, target.pid, *opts).start()
        fixed_workload(target)
        outs[kind] = mask_ts(t.stop())     # each interval's own time
    return outs["bcc"], outs["libbpf"]


@pytest.mark.parametrize("tool,opts", [
    ("iosize", ()),
    ("iosize", ("-BO",)),
    ("iosize", ("-B", "--json")),
    ("iolatency", ("-BO", "-m", "-L", "-W", "1000")),
    ("iolatency", ("-O", "-m", "-L", "-W", "1000", "-j")),
])
def test_usdt_tools_match_bcc(bpf, bdevs, tool, opts):
    """The same workload, traced by the bcc/ tool and then by the libbpf
    one, prints the same bytes."""
    want, got = sequential(tool, bdevs, *opts)
    assert parse(got) or json_objects(got)
    assert got == want


@pytest.mark.parametrize("opts", [
    ("-m",),
    ("-a", "2", "--arg-bits", "32", "-u"),
])
def test_funclat_matches_bcc(bpf, bdevs, opts):
    want, got = sequential("funclat", bdevs, *opts)
    # Up to the latency histogram's header, byte for byte.
    head = [i for i, ln in enumerate(want) if HEADER.match(ln)][-1]
    assert got[:head + 1] == want[:head + 1]
    lat_want, lat_got = parse(want)[-1], parse(got)[-1]
    assert lat_got["unit"] == lat_want["unit"]
    assert total(lat_got) == total(lat_want) == 23 + 37 + 97


def test_funclat_json_matches_bcc(bpf, bdevs):
    want, got = sequential("funclat", bdevs, "-j")
    (w,), (g,) = json_objects(want), json_objects(got)
    assert len(g["histograms"]) == 3
    for h in (w["histograms"][2], g["histograms"][2]):
        assert h.pop("total") == 23 + 37 + 97
        h.pop("buckets")
    assert g == w
    # Byte for byte up to the latency histogram.
    def head(lines):
        return [ln[:ln.index('{"name": "latency"')] for ln in lines
                if ln.startswith("{")]
    assert head(got) == head(want)


@pytest.mark.parametrize("opts", [(), ("-j",)])
def test_qdepth_matches_bcc(bpf, bdevs, opts):
    """At queue depth 1 every depth is 1 by construction, so the two runs
    see the same values; deeper queues depend on scheduling."""
    outs = {}
    for kind in ("bcc", "libbpf"):
        t = Tool(kind, "qdepth", bdevs.pid, *opts).start()
        workload(bdevs, "Malloc0", "randread", 4096, 1, 23)
        workload(bdevs, "Malloc1", "write", 512, 1, 37)
        outs[kind] = mask_ts(t.stop())
    assert parse(outs["libbpf"]) or json_objects(outs["libbpf"])
    assert outs["libbpf"] == outs["bcc"]


def test_rpclat_matches_bcc(bpf, bdevs):
    """RPC latencies vary from run to run, so the two tools are compared
    by method, unit and count; the layout is the one checked above."""
    outs = {}
    for kind in ("bcc", "libbpf"):
        t = Tool(kind, "rpclat", bdevs.pid, "-m").start()
        for _ in range(7):
            bdevs.rpc("bdev_list")
        for _ in range(3):
            bdevs.rpc("target_stats")
        outs[kind] = t.stop()
    summary = {kind: [(h["key"], h["unit"], h["scale"], total(h))
                      for h in parse(lines)]
               for kind, lines in outs.items()}
    assert summary["libbpf"] == summary["bcc"] == [
        ({"method": "bdev_list"}, "msecs", "log2", 7),
        ({"method": "target_stats"}, "msecs", "log2", 3)]
    assert outs["libbpf"][0] == outs["bcc"][0]     # the readiness line


# --- no kernel headers -------------------------------------------------------

def without_kernel_headers(cmd, empty):
    """cmd run in a private mount namespace where an empty directory hides
    /lib/modules/$(uname -r), so build/ and source/ are gone for it alone;
    the script checks that before it execs cmd (same PID)."""
    mods = f"/lib/modules/{os.uname().release}"
    script = ('if [ -d "$1" ]; then mount --bind "$2" "$1" || exit 99; fi; '
              'if [ -e "$1/build" ]; then echo "headers still visible"; '
              'exit 99; fi; shift 2; exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            script, "sh", mods, str(empty), *cmd]


def test_no_kernel_headers(bpf, bdevs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    wrap = without_kernel_headers([], empty)
    for tool, want in (("iosize", {(2048, 4095): 31}),
                       ("iolatency", None), ("funclat", None)):
        opt = "-m" if tool == "funclat" else "-B"
        t = Tool("libbpf", tool, bdevs.pid, opt, wrap=wrap).start()
        workload(bdevs, "Malloc1", "read", 2048, 2, 31)
        hists = parse(t.stop())
        n = 3 if tool == "funclat" else 1
        assert [total(h) for h in hists] == [31] * n
        if want:
            assert hists[0]["key"] == {"bdev": "Malloc1"}
            assert nonzero(hists[0]) == want
    # The contrast: BCC, which compiles at run time, cannot work there.
    rc, lines = histtools.run(wrap + command("bcc", "iosize", bdevs.pid))
    out = "\n".join(lines)
    assert rc not in (0, 99) and "kernel headers" in out, out


# --- errors: one line, non-zero ----------------------------------------------

BAD_ARGS = [
    ("-p", "abc"), ("-p", "12x"), ("-p", ""), ("-p", "0"), ("-p", "-3"),
    ("-p",), ("--pid",), (), ("-p", "1", "--no-such-option"),
    ("-p", "1", "-Z"),
    ("-p", "1", "abc"), ("-p", "1", "0"), ("-p", "1", "1", "2x"),
    ("-p", "1", "1", "2", "3"), ("-p", "1", "-d", "abc"),
    ("-p", "1", "-d", "0"),
]
TOOL_BAD_ARGS = {
    "iolatency": [("-W", "5"), ("-L", "-W", "abc"), ("-L", "-W", "0"),
                  ("-m", "-u")],
    "iosize": [("-L",)],
    "qdepth": [("-B",), ("-m",)],
    "rpclat": [("-m", "-n"), ("-B",)],
    "funclat": [("-a", "7"), ("-a", "x"), ("--arg-bits", "16"),
                ("--arg-bits",),
                ("--function", "a;b"), ("--function", ""), ("-n", "-m")],
}


@pytest.mark.parametrize("tool", TOOLS)
def test_bad_args(tool):
    for args in BAD_ARGS + [("-p", "1") + a for a in TOOL_BAD_ARGS[tool]]:
        rc, lines = run_tool(tool, *args)
        assert rc == 2, (args, rc, lines)
        one_error_line(rc, lines, tool, r".*\(see --help\)$")


@pytest.mark.parametrize("tool", TOOLS)
def test_help(tool):
    rc, lines = run_tool(tool, "--help")
    assert rc == 0 and lines[0].startswith(f"usage: probekit-{tool} -p PID")
    assert "examples:" in lines
    assert all(len(ln) < 80 for ln in lines)


@pytest.mark.parametrize("tool", TOOLS)
def test_no_such_process(tool):
    unused = unused_pid()
    rc, lines = run_tool(tool, "-p", unused)
    one_error_line(rc, lines, tool,
                   f"no process with PID {unused}$", 1)


def test_funclat_unknown_function(bpf, target):
    rc, lines = run_tool("funclat", "-p", target.pid, "--function",
                         "no_such_function")
    one_error_line(rc, lines, "funclat",
                   "no function no_such_function in ", 1)


# --- privilege -----------------------------------------------------------------
#
# What each reader needs is measured and tabled in doc/privileges.md, and
# declared once in specs/privileges.toml, which the tools' lines come
# from.  On this kernel (6.18) a uprobe perf event needs CAP_SYS_ADMIN:
# the fix for CVE-2025-38466 took it back from CAP_PERFMON, in every
# stable series.  The blktgt tools attach their USDT probes through
# libbpf, which makes one per site with libbpf 1.1, so CAP_BPF and
# CAP_PERFMON load their programs but cannot attach them; libbpf 1.5 and
# 1.7 make multi-uprobe links instead (the usdt_multi fixture sees which),
# which need only CAP_BPF and CAP_PERFMON, as for usdtcount and usdtlat.
# funclat's uprobes are perf events with every libbpf.
# A process of another user also needs CAP_SYS_PTRACE, for /proc/PID/exe.
# The expected lines are written out here, not read from the
# declaration, so that a wrong declaration fails too.

@functools.lru_cache(maxsize=None)
def memlock_kib():
    """The RLIMIT_MEMLOCK, in KiB, that a kernel which charges BPF memory
    to it holds the tools to, or 0 (another kernel, or no limit): Linux
    before 5.11, whose BTF, as bpftool dumps it, still has struct
    bpf_map_memory.  The tools run as user 65534 inherit this process's
    limit.  0 on any kernel of the host suite; Debian 11's 5.10 in
    tests/machines/kernel_smoke.py."""
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    if soft == resource.RLIM_INFINITY:
        return 0
    p = subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux"],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stderr
    return soft // 1024 if " STRUCT 'bpf_map_memory' " in p.stdout else 0


def needs(tool, multi, whom=None, kib=0):
    """What a blktgt tool needs: CAP_BPF and CAP_PERFMON where libbpf
    attaches its USDT probes with multi-uprobe links (multi), else
    CAP_SYS_ADMIN alone; another user's process adds CAP_SYS_PTRACE, and
    a kernel that charges BPF memory to a limit of kib KiB
    CAP_SYS_RESOURCE (memlock_kib)."""
    need = (["CAP_BPF", "CAP_PERFMON"] if multi and tool != "funclat"
            else ["CAP_SYS_ADMIN"])
    return need + (["CAP_SYS_PTRACE"] if whom else []) + \
        (["CAP_SYS_RESOURCE"] if kib else [])


def lacks(what, tool, pid, *missing, whom=None, multi=False, kib=0):
    """The one error line for a lack of privilege of a blktgt tool."""
    def and_list(names):
        return ", ".join(names[:-1]) + " and " + names[-1] \
            if len(names) > 1 else names[0]
    need = and_list(needs(tool, multi, whom, kib))
    memlock = (f" (this kernel charges BPF memory to RLIMIT_MEMLOCK, {kib} KiB "
               "here, which CAP_SYS_RESOURCE lifts)") if kib else ""
    return (f"probekit-{tool}: {what}: permission denied: tracing "
            f"{whom or f'PID {pid}'} needs root, or {need}; this process "
            f"lacks {and_list(list(missing))}{memlock}")


def first_attach(tool, pid):
    if tool == "funclat":
        return f"cannot attach a uprobe to bdev_execute of PID {pid}"
    probe = {"rpclat": "rpc__request", "iolatency": "io__batch",
             "iosize": "io__batch"}.get(tool, "io__submit")
    return f"cannot attach to USDT probe blktgt:{probe} of PID {pid}"


@pytest.mark.parametrize("tool", TOOLS)
def test_no_privilege_own_process(bpf, nobody_target, usdt_multi, tool):
    """An unprivileged user tracing its own process: the programs do not
    load, and the line says what is missing: CAP_SYS_ADMIN, or CAP_BPF
    and CAP_PERFMON where libbpf makes multi-uprobe links."""
    pid, kib = nobody_target.pid, memlock_kib()
    rc, lines = run_as_nobody(command("libbpf", tool, pid))
    assert (rc, lines) == (1, [lacks("cannot load BPF programs", tool, pid,
                                     *needs(tool, usdt_multi, kib=kib),
                                     multi=usdt_multi, kib=kib)])


# What the fixed workload makes each tool count, over all its
# histograms: one per I/O; one per workload_run request for rpclat; for
# funclat one per bdev_execute call in each of its three histograms
# (argument, return value, latency).
FIXED_COUNTS = {"iolatency": 157, "iosize": 157, "qdepth": 157,
                "funclat": 3 * 157, "rpclat": 3}


@pytest.mark.parametrize("tool", TOOLS)
def test_bpf_perfmon_are_not_enough(bpf, nobody_target, usdt_multi, tool):
    """CAP_BPF plus CAP_PERFMON load the programs of the blktgt tools,
    but the uprobe perf events that libbpf 1.1 (Debian 12) attaches, one
    per site, need CAP_SYS_ADMIN since the fix for CVE-2025-38466: the
    first attach is refused, and its one line says CAP_SYS_ADMIN is
    missing (doc/privileges.md's measured cell).  A libbpf that attaches
    USDT probes through multi-uprobe links (1.5, Debian 13's stack) needs
    only these two for them, as usdtcount does below: there the tool
    traces and counts exactly; funclat's plain uprobe is refused on
    both."""
    refused = tool == "funclat" or not usdt_multi
    pid, kib = nobody_target.pid, memlock_kib()
    t = Tool("libbpf", tool, pid, wrap=as_nobody("bpf", "perfmon"))
    t.proc = subprocess.Popen(t.cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT,
                              start_new_session=True)
    t.out = probekit.LineReader(t.proc.stdout)
    first = t.out.wait_for(f"{histtools.READY}|^probekit-{tool}: ").group(0)
    assert first.startswith(f"probekit-{tool}: ") == refused, first
    if kib:
        # Where BPF memory is charged to RLIMIT_MEMLOCK, the load is
        # refused first (5.10's 64 KiB hold none of the tools' maps).
        lines = t.out.drain(probekit.TIMEOUT)
        missing = ["CAP_SYS_RESOURCE"] if not refused else \
            ["CAP_SYS_ADMIN", "CAP_SYS_RESOURCE"]
        assert (t.proc.wait(timeout=probekit.TIMEOUT), lines) == (
            1, histtools.batch_fallback(tool) + [
                lacks("cannot load BPF programs", tool, pid, *missing,
                      multi=usdt_multi, kib=kib)])
        return
    if refused:
        lines = t.out.drain(probekit.TIMEOUT)
        assert (t.proc.wait(timeout=probekit.TIMEOUT), lines) == (
            1, [lacks(first_attach(tool, pid), tool, pid, "CAP_SYS_ADMIN")])
        return
    fixed_workload(nobody_target)
    hists = parse(t.stop())
    assert sum(total(h) for h in hists) == FIXED_COUNTS[tool], hists


@pytest.mark.parametrize("tool", TOOLS)
def test_sys_admin_is_enough(bpf, nobody_target, tool):
    """The table's cell for the blktgt tools on a process of their own
    user, CAP_SYS_ADMIN alone: exact counts as user 65534.  A kernel that
    charges BPF memory to RLIMIT_MEMLOCK (memlock_kib) refuses that in one
    line saying so, and takes CAP_SYS_RESOURCE beside it."""
    pid, kib, caps = nobody_target.pid, memlock_kib(), ["sys_admin"]
    if kib:
        rc, lines = histtools.run(as_nobody(*caps) + command("libbpf", tool, pid))
        assert (rc, lines) == (1, histtools.batch_fallback(tool) + [
            lacks("cannot load BPF programs", tool, pid, "CAP_SYS_RESOURCE", kib=kib)])
        caps.append("sys_resource")
    t = Tool("libbpf", tool, pid, wrap=as_nobody(*caps)).start()
    fixed_workload(nobody_target)
    hists = parse(t.stop())
    assert sum(total(h) for h in hists) == FIXED_COUNTS[tool], hists


@pytest.mark.parametrize("owner,caps", [
    ("nobody", ("bpf", "perfmon")),
    ("root", ("bpf", "perfmon", "sys_ptrace")),
])
def test_bpf_perfmon_are_enough_for_multi_uprobes(bpf, request, owner, caps):
    """The same two capabilities do allow a multi-uprobe link, which
    usdtcount attaches with: as user 65534 it counts every I/O of the
    fixed workload, 23 + 37 + 97, on its own process and (with
    CAP_SYS_PTRACE) on root's."""
    tgt = request.getfixturevalue(
        "nobody_target" if owner == "nobody" else "bdevs")
    t = Tool("libbpf", "usdtcount", tgt.pid, "blktgt:io__submit",
             wrap=as_nobody(*caps)).start()
    with open(f"/proc/{t.proc.pid}/status") as f:
        assert f"Uid:\t{NOBODY}\t" in f.read()
    fixed_workload(tgt)
    assert histtools.usdtcount_counts(t.stop()) == {"blktgt:io__submit": 157}


@pytest.mark.parametrize("caps", [(), ("bpf", "perfmon"), ("sys_admin",)])
def test_no_privilege_other_user(bpf, target, usdt_multi, caps):
    """Another user's process (root's): /proc/PID/exe is refused, and the
    line names every capability missing."""
    whom = "another user's process"
    held = {"bpf": ["CAP_BPF"], "perfmon": ["CAP_PERFMON"],
            "sys_admin": ["CAP_SYS_ADMIN", "CAP_BPF", "CAP_PERFMON"]}
    missing = [c for c in needs("iosize", usdt_multi, whom)
               if c not in [h for c in caps for h in held[c]]]
    rc, lines = histtools.run(as_nobody(*caps)
                              + command("libbpf", "iosize", target.pid))
    assert (rc, lines) == (1, [lacks(
        f"cannot read /proc/{target.pid}/exe", "iosize", target.pid,
        *missing, whom=whom, multi=usdt_multi)])


@pytest.mark.parametrize("owner,caps", [
    ("nobody", ("sys_admin",)),
    ("root", ("sys_admin", "sys_ptrace")),
])
def test_what_the_message_asks_is_enough(bpf, request, owner, caps):
    """Without root, the capabilities the lines name are enough: exact
    counts as user 65534, on its own process and on root's."""
    tgt = request.getfixturevalue(
        "nobody_target" if owner == "nobody" else "bdevs")
    t = Tool("libbpf", "iosize", tgt.pid, "-BO",
             wrap=as_nobody(*caps)).start()
    with open(f"/proc/{t.proc.pid}/status") as f:
        assert f"Uid:\t{NOBODY}\t" in f.read()
    fixed_workload(tgt)
    hists = by_key(parse(t.stop()), "bdev", "type")
    assert {k: nonzero(h) for k, h in hists.items()} == {
        ("Malloc0", "read"): {(4096, 8191): 23},
        ("Malloc0", "write"): {(512, 1023): 97},
        ("Malloc1", "write"): {(65536, 131071): 37}}

