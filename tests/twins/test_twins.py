# SPDX-License-Identifier: BSD-2-Clause
"""The libbpf tools and their bcc/ twins, held to the same tests: each test
here runs once for each form in histtools.KINDS, with the assertions both
forms' own tests made (the stricter one where they differed).  What
applies to one form only stays in test_bcc.py or test_libbpf.py.

Every test drives blktgt's built-in workload with prime counts, waits for
the tool's "Hit Ctrl-C to end." line before it, and asserts exact counts.
"""

import datetime
import os
import re
import subprocess
import sys

import pytest

import histtools
import probekit
from histtools import bdevs  # noqa: F401 (a fixture)
from histtools import (KINDS, TOOLS, by_key, json_objects, nonzero,
                       one_error_line, parse, run_on_nousdt_target,
                       run_on_process_without_probes, timestamps, total,
                       trace_until_target_exits, workload)

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import toolspec  # noqa: E402

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("py:bcc")


@pytest.fixture(params=KINDS)
def kind(request):
    if request.param == "libbpf":
        for t in TOOLS:
            path = histtools.libbpf_path(t)
            if not os.access(path, os.X_OK):
                pytest.fail(f"{path} is not built; run the suite with "
                            "'make test'")
    return request.param


def Tool(kind, name, pid, *args):
    """A tool of either form; its output must also be tidy (no Traceback,
    text under 80 columns), as the BCC tools' conventions ask of both."""
    return histtools.Tool(kind, name, pid, *args, tidy=True)


def run_tool(kind, name, pid, *args):
    """Run a tool on pid to completion (for errors): (rc, output lines)."""
    return histtools.run_tool(kind, name, "-p", pid, *args)


def command(kind, tool):
    return f"probekit-{tool}" + ("-bcc" if kind == "bcc" else "")


# --- iolatency (test_bcc.py's sums and unsplit, test_libbpf.py's exact) ------

@pytest.mark.parametrize("opts,unit,scale", [
    ((), "usecs", "log2"),
    (("-m",), "msecs", "log2"),
    (("-u",), "usecs", "log2"),
    (("-n",), "nsecs", "log2"),
    (("-L",), "usecs", "linear"),
    (("-L", "-W", "3", "-n"), "nsecs", "linear"),
])
def test_iolatency_sums(bpf, bdevs, kind, opts, unit, scale):
    t = Tool(kind, "iolatency", bdevs.pid, "-BO", *opts).start()
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
            width = int(opts[opts.index("-W") + 1]) if "-W" in opts else \
                toolspec.option_named(toolspec.load("iolatency"),
                                           "width")["default"]
            assert all(lo % width == 0 for lo, _, _ in h["rows"])


def test_iolatency_unsplit_and_json(bpf, bdevs, kind):
    text = Tool(kind, "iolatency", bdevs.pid).start()
    per_type = Tool(kind, "iolatency", bdevs.pid, "-O").start()
    js = Tool(kind, "iolatency", bdevs.pid, "-BO", "--json").start()
    rw = workload(bdevs, "Malloc0", "randrw", 4096, 8, 997)
    (h,) = parse(text.stop())
    assert h["key"] == {} and total(h) == 997
    types = by_key(parse(per_type.stop()), "type")
    assert {k: total(v) for k, v in types.items()} == \
        {k: v for k, v in {("read",): rw["reads"],
                           ("write",): rw["writes"]}.items() if v}
    (obj,) = json_objects(js.stop())
    assert obj["tool"] == "iolatency" and obj["pid"] == bdevs.pid
    got = {(x["key"]["bdev"], x["key"]["type"]): x["total"]
           for x in obj["histograms"]}
    assert got == {k: v for k, v in {("Malloc0", "read"): rw["reads"],
                                     ("Malloc0", "write"): rw["writes"]}.items()
                   if v}
    for x in obj["histograms"]:
        assert x["name"] == "latency"
        assert x["unit"] == "usecs" and x["scale"] == "log2"
        assert x["total"] == sum(b["count"] for b in x["buckets"])


# --- qdepth (test_bcc.py's and test_libbpf.py's, the same counts) ------------

def test_qdepth_exact(bpf, bdevs, kind):
    """997 reads at queue depth 8 on one bdev and 23 writes at depth 1 on
    another: every submit counted once, at a depth from 1 to 8, under
    its own bdev."""
    t = Tool(kind, "qdepth", bdevs.pid).start()
    workload(bdevs, "Malloc0", "randread", 4096, 8, 997)
    workload(bdevs, "Malloc1", "randwrite", 4096, 1, 23)
    hists = by_key(parse(t.stop()), "bdev")
    assert set(hists) == {("Malloc0",), ("Malloc1",)}
    m0 = hists["Malloc0",]
    assert total(m0) == 997 and m0["scale"] == "linear"
    assert m0["unit"] == "depth"
    assert 1 <= min(lo for lo, _ in nonzero(m0))
    assert max(lo for lo, _ in nonzero(m0)) <= 8
    assert nonzero(hists["Malloc1",]) == {(1, None): 23}


def test_qdepth_json(bpf, bdevs, kind):
    """--json: one linear histogram of width 1 under its bdev, 23 reads
    at depths from 1 to 4."""
    t = Tool(kind, "qdepth", bdevs.pid, "--json").start()
    workload(bdevs, "Malloc1", "read", 512, 4, 23)
    (obj,) = json_objects(t.stop())
    (x,) = obj["histograms"]
    assert x["key"] == {"bdev": "Malloc1"} and x["total"] == 23
    assert x["scale"] == "linear" and x["width"] == 1
    assert x["unit"] == "depth"
    assert x["total"] == sum(b["count"] for b in x["buckets"])
    assert all(1 <= b["low"] <= 4 for b in x["buckets"])


# --- funclat -----------------------------------------------------------------

def test_funclat_other_arg(bpf, bdevs, kind):
    # bdev_execute's second argument is uint32_t type: 0 (read) or 1 (write).
    t = Tool(kind, "funclat", bdevs.pid, "-a", "2", "--arg-bits", "32",
             "-u").start()
    workload(bdevs, "Malloc1", "write", 1024, 2, 29)
    arg, ret, lat = parse(t.stop())
    assert arg["unit"] == "arg2" and nonzero(arg) == {(0, 1): 29}
    assert nonzero(ret) == {(1024, 2047): 29}
    assert lat["unit"] == "usecs" and total(lat) == 29


# --- intervals, duration, the target's exit ------------------------------------

def test_interval_count_timestamps(bpf, target, kind):
    """iosize -T 1 2 prints two timestamped intervals and exits 0."""
    lines = Tool(kind, "iosize", target.pid, "-T", "1", "2").start().wait()
    assert len(timestamps(lines)) == 2


def test_usdtlat_keys_of_two_sizes_say_so(bpf, target, kind):
    """-k arg5 pairs export__change__start's to_name (a char *) with
    export__change__done's status (an int32_t): a pause and a resume
    give no pair, and the empty result says why, from the notes."""
    target.rpc("bdev_malloc_create", name="m0", size_mb=8, block_size=512)
    target.rpc("export_create", name="e0", bdev="m0")
    t = histtools.Tool(kind, "usdtlat", target.pid, "-k", "arg5",
                       "blktgt:export__change__start",
                       "blktgt:export__change__done").start()
    assert target.rpc("export_pause", name="e0") is True
    assert target.rpc("export_resume", name="e0") is True
    lines = t.stop()
    assert lines[-1] == ("0 pairs: arg5 is 8 bytes unsigned at START, "
                         "4 bytes signed at DONE"), lines
    assert parse(lines) == [], lines


def test_json_ts_is_dated_and_zoned(bpf, target, kind):
    """Every interval object carries "ts": when it ended, local time in
    RFC 3339 with milliseconds and the zone's offset, with or without -T
    (here under a zone 3 h 15 min west of UTC, so that the offset's sign
    and minutes are seen), between the clock read before the tool started
    and after it ended."""
    tz = datetime.timezone(-datetime.timedelta(hours=3, minutes=15))
    before = datetime.datetime.now(tz).replace(microsecond=0)
    lines = histtools.Tool(kind, "rpclat", target.pid, "-j", "1", "2",
                           env={"TZ": "PKX+3:15"},
                           tidy=True).start().wait()
    after = datetime.datetime.now(tz)
    objs = json_objects(lines, keep_ts=True)
    assert len(objs) == 2
    for o in objs:
        assert o["ts"].endswith("-03:15"), o["ts"]
        assert before <= datetime.datetime.fromisoformat(o["ts"]) <= after
    assert objs[0]["ts"] <= objs[1]["ts"]
    assert [list(o) for o in objs] == [
        ["tool", "pid", "ts", "histograms", "starts", "RPCs"]] * 2


@pytest.mark.parametrize("tool", ["rpclat", "iolatency"])
def test_duration_json(bpf, bdevs, kind, tool):
    """-d 1 -j with nothing to see: one object with no histograms."""
    lines = Tool(kind, tool, bdevs.pid, "-d", "1", "-j").start().wait()
    (obj,) = json_objects(lines)
    want = {"tool": tool, "pid": bdevs.pid, "histograms": []}
    if tool == "rpclat":    # a pair tool: its table's counts, none here
        want["starts"] = {"dropped": 0, "reclaimed": 0}
    # --max-keys: the drops, none here, in the spec's noun
    want[{"rpclat": "RPCs", "iolatency": "I/Os"}[tool]] = {"dropped": 0}
    if tool == "iolatency":     # it reads io__batch: what it lost of it
        want["I/Os"].update(busy=0, unreadable=0)
        want["batches"] = {"bad_count": 0}
    assert obj == want


@pytest.mark.parametrize("tool", TOOLS)
def test_target_exits(bpf, blktgt_bin, tmp_path, kind, tool):
    """The target going away ends the trace: the histograms so far, one
    line saying so, exit 0."""
    pid, lines = trace_until_target_exits(
        blktgt_bin, tmp_path, lambda pid: Tool(kind, tool, pid))
    assert f"{command(kind, tool)}: PID {pid} (blktgt) exited; " \
        "tracing ended" in lines, lines
    # funclat: three histograms of the 11 calls; rpclat: the two RPCs,
    # bdev_malloc_create and workload_run.
    want = {"funclat": 33, "rpclat": 2}.get(tool, 11)
    assert sum(total(h) for h in parse(lines)) == want


# --- a process without the probes ------------------------------------------------

@pytest.mark.parametrize("tool", TOOLS)
def test_pid_without_probes(bpf, kind, tool):
    rc, lines = run_on_process_without_probes(
        lambda pid: run_tool(kind, tool, pid))
    want = {"funclat": "no function bdev_execute in ",
            "rpclat": "has no USDT probe blktgt:rpc__request",
            "qdepth": "has no USDT probe blktgt:io__submit"}.get(
                tool, "has no USDT probe blktgt:io__batch")
    one_error_line(rc, lines, tool, want, 1)
    assert lines[0].startswith(command(kind, tool) + ": ")


@pytest.mark.parametrize("tool", ["iosize", "iolatency"])
def test_nousdt_build_has_no_probes(bpf, build, tmp_path, kind, tool):
    rc, lines = run_on_nousdt_target(
        build, tmp_path, lambda pid: run_tool(kind, tool, pid))
    one_error_line(rc, lines, tool, "no USDT probe blktgt:io__batch", 1)
    assert re.match(rf"{command(kind, tool)}: ", lines[0]), lines


# --- argN, counted as BCC counts -------------------------------------------------

@pytest.mark.parametrize("tool,opt,rest", [
    ("usdtlat", "-k/--key", ("p:a", "p:b")),
    ("usdtcount", "-H/--histogram", ("p:a",)),
    ("usdtcount", "-S/--strings", ("p:a",)),
])
def test_arg_numbering_is_named(kind, tool, opt, rest):
    """arg0, as a bpftrace user writes it, is refused in the same words by
    both forms, which say that arguments count from 1 and what arg0 is
    called here; any other bad argN lists the choices."""
    choose = "(choose %san argument's name, or arg1 to arg12)" % (
        "tid, " if tool == "usdtlat" else "")
    for a, why in [("arg0", "'arg0': arguments count from 1 here, as in BCC: "
                    "bpftrace's arg0 is arg1, its argN argN+1"),
                   ("arg13", "invalid choice: 'arg13'"),
                   ("1len", "invalid choice: '1len'")]:
        rc, lines = histtools.run_tool(kind, tool, "-p", "1", opt[:2], a,
                                       *rest)
        assert (rc, lines) == (2, [f"{command(kind, tool)}: argument {opt}: "
                                   f"{why} {choose} (see --help)"])


def test_usdtcount_no_hits_prints_the_header(bpf, target, kind):
    """A probe that never fires: the header and an empty result, "0
    hits", in the text as in JSON, as BCC's own tools print one."""
    lines = Tool(kind, "usdtcount", target.pid, "-d", "1",
                 "blktgt:bdev__create").start().wait()
    assert lines[1:] == ["%-40s %12s" % ("PROBE", "COUNT"), "0 hits"], lines
    lines = Tool(kind, "usdtcount", target.pid, "-d", "1", "-j",
                 "blktgt:bdev__create").start().wait()
    assert json_objects(lines) == [
        {"tool": "usdtcount", "pid": target.pid, "counts": []}]


# --- arguments by name, resolved per probe ------------------------------------

def strings(lines, probe):
    """usdtcount -S's text for probe: its header line and {value: count}."""
    i = lines.index(f"probe = {probe}")
    rows = {}
    for ln in lines[i + 2:]:
        if not ln.strip() or ln.startswith("probe = "):
            break
        c, v = ln.split(None, 1)
        rows[v] = int(c)
    return lines[i + 1], rows


def test_arguments_by_name(bpf, bdevs, kind):
    """-H len reads io__submit's fifth argument and io__done's fourth,
    -S bdev a char *, -k id pairs each I/O by its id: each names its
    output by the name, over 23 reads and 37 writes."""
    h = Tool(kind, "usdtcount", bdevs.pid, "-H", "len", "blktgt:io__submit",
             "blktgt:io__done").start()
    s = Tool(kind, "usdtcount", bdevs.pid, "-S", "bdev",
             "blktgt:io__submit").start()
    # Not tidy: its readiness line names two probes (bcc/README.md).
    k = histtools.Tool(kind, "usdtlat", bdevs.pid, "-k", "id",
                       "blktgt:io__submit", "blktgt:io__done").start()
    workload(bdevs, "Malloc0", "read", 4096, 4, 23)
    workload(bdevs, "Malloc1", "write", 65536, 2, 37)
    hists = {x["key"]["probe"]: x for x in parse(h.stop())}
    assert sorted(hists) == ["blktgt:io__done", "blktgt:io__submit"], hists
    for x in hists.values():
        assert x["unit"] == "len" and nonzero(x) == {
            (4096, 8191): 23, (65536, 131071): 37}, x
    head, rows = strings(s.stop(), "blktgt:io__submit")
    assert head == "%10s  %s" % ("COUNT", "bdev")
    assert rows == {'"Malloc1"': 37, '"Malloc0"': 23}
    (lat,) = parse(k.stop())
    assert total(lat) == 60


@pytest.mark.parametrize("tool,args,line", [
    ("usdtcount", ("-H", "lne", "blktgt:io__submit"),
     "probe blktgt:io__submit has no argument lne; nearest: len"),
    ("usdtlat", ("-k", "idd", "blktgt:io__submit", "blktgt:io__done"),
     "probe blktgt:io__submit has no argument idd; nearest: id"),
    ("usdtcount", ("-S", "len", "blktgt:io__submit"),
     "-S len reads a string, but len of blktgt:io__submit is uint64_t, not a "
     "char *"),
    ("usdtcount", ("-S", "arg3", "blktgt:io__submit"),
     "-S arg3 reads a string, but arg3 of blktgt:io__submit is uint32_t, not "
     "a char *"),
])
def test_argument_names_refused_in_one_line(bpf, target, kind, tool, args,
                                            line):
    """A misspelt name names the probe and its nearest argument; a string
    read of an integer names its C type, from the binary's notes: one
    line, exit 1, nothing attached."""
    rc, lines = run_tool(kind, tool, target.pid, *args)
    assert (rc, lines) == (1, [f"{command(kind, tool)}: {line}"])


def test_argument_names_need_names_in_the_binary(blktgt_bin, tmp_path, kind):
    """A binary without probekit's note (here blktgt with it removed)
    takes argN only: a name is one line that names the file and the
    probe."""
    bare = tmp_path / "blktgt"
    subprocess.run(["objcopy", "--remove-section=.note.probekit", blktgt_bin,
                    bare], check=True)
    rc, lines = histtools.run_tool(kind, "usdtcount", "-b", bare, "-H", "len",
                                   "blktgt:io__submit")
    assert (rc, lines) == (1, [
        f"{command(kind, 'usdtcount')}: {bare} has no argument names for "
        "probe blktgt:io__submit (it was not built with probekit's header); "
        "give the argument by number, arg1 on"])
