# SPDX-License-Identifier: BSD-2-Clause
"""probekit-usdtlat and probekit-usdtcount, the libbpf generic tools, on
blktgt and on binaries nobody here wrote: PostgreSQL, python3 and
libstdc++.

Each test drives a known workload and asserts exact counts.  A tool
prints "... Hit Ctrl-C to end." only once every site is attached; the
test waits for that line, runs the workload, waits for the workload's own
end (an RPC reply, a query's result row, a process's exit), then SIGINTs
the tool, which prints what it counted and exits 0.

The comparisons with the bcc/ twins (bcc/README.md, "usdtlat and
usdtcount", is the contract) run the two tools one after the other over
the same deterministic workload, and compare stdout byte for byte, except
usdtlat's latency buckets, which no two runs share: there the JSON is
compared with each histogram's buckets reduced to its total.
"""

import os
import re
import shutil
import subprocess
import textwrap

import pytest

import histtools
import probekit
from histtools import bdevs  # noqa: F401 (a fixture)
from histtools import json_objects, mask_ts, nonzero, parse, total, workload
from probekit import LineReader, TIMEOUT
from thirdparty import PG_BIN, PG_NEEDS, PY_SDT
from thirdparty import pg  # noqa: F401 (a fixture)
from histtools import Gen, after_ready, usdtcount_counts

CATALOG = os.path.join(probekit.ROOT, "probes", "blktgt.d")


def tool_cmd(kind, name, *args):
    return histtools.program(kind, name) + [*map(str, args)]


def run(kind, name, *args):
    """Run a tool to completion (for errors): (rc, output lines)."""
    return histtools.run(tool_cmd(kind, name, *args))


@pytest.fixture(scope="module", autouse=True)
def built():
    for t in ("usdtlat", "usdtcount"):
        if not os.access(histtools.libbpf_path(t), os.X_OK):
            pytest.fail(f"{histtools.libbpf_path(t)} is not built; run the "
                        "suite with 'make test'")


def fixed_workload(target):
    """The same I/Os and RPCs every time, prime counts."""
    workload(target, "Malloc0", "read", 4096, 4, 23)
    workload(target, "Malloc1", "write", 65536, 2, 37)
    for _ in range(7):
        target.rpc("bdev_list")


# --- blktgt: exact counts ----------------------------------------------------

def test_usdtlat_by_argument(bpf, bdevs):
    """-k arg1 pairs each I/O by its id, whichever reactor completes it:
    every I/O is counted, once."""
    t = Gen("libbpf", "usdtlat", "-p", bdevs.pid, "blktgt:io__submit",
            "blktgt:io__done", "-k", "arg1").start()
    js = Gen("libbpf", "usdtlat", "-p", bdevs.pid, "blktgt:io__submit",
             "blktgt:io__done", "-k", "arg1", "-n", "--json").start()
    workload(bdevs, "Malloc0", "randrw", 4096, 8, 97)
    workload(bdevs, "Malloc1", "read", 512, 1, 23)
    (h,) = parse(t.stop())
    assert h["unit"] == "usecs" and h["key"] == {} and total(h) == 97 + 23
    (obj,) = json_objects(js.stop())
    assert obj["tool"] == "usdtlat" and obj["pid"] == bdevs.pid
    (x,) = obj["histograms"]
    assert (x["name"], x["unit"], x["total"]) == ("latency", "nsecs", 120)


def test_usdtlat_by_thread(bpf, bdevs):
    """-k tid (the default): an RPC is requested and answered on the RPC
    thread."""
    t = Gen("libbpf", "usdtlat", "-p", bdevs.pid, "blktgt:rpc__request",
            "blktgt:rpc__done", "-m").start()
    for _ in range(11):
        bdevs.rpc("bdev_list")
    (h,) = parse(t.stop())
    assert h["unit"] == "msecs" and total(h) == 11


def test_usdtcount_counts(bpf, bdevs):
    t = Gen("libbpf", "usdtcount", "-p", bdevs.pid, "blktgt:io__[sd]*",
            "rpc__request").start()
    js = Gen("libbpf", "usdtcount", "-p", bdevs.pid, "blktgt:io__[sd]*",
             "-j").start()
    fixed_workload(bdevs)
    want = {"blktgt:io__submit": 60, "blktgt:io__done": 60,
            "blktgt:rpc__request": 9}
    assert usdtcount_counts(t.stop()) == want
    (obj,) = json_objects(js.stop())
    assert obj == {"tool": "usdtcount", "pid": bdevs.pid, "counts": [
        {"probe": "blktgt:io__done", "count": 60},
        {"probe": "blktgt:io__submit", "count": 60}]}


def test_usdtcount_histogram(bpf, bdevs):
    """-H arg5: io__submit's length, one log2 histogram per probe."""
    t = Gen("libbpf", "usdtcount", "-p", bdevs.pid, "-H", "arg5",
            "blktgt:io__submit", "blktgt:workload__start").start()
    fixed_workload(bdevs)
    hists = {h["key"]["probe"]: h for h in parse(t.stop())}
    assert nonzero(hists["blktgt:io__submit"]) == {
        (4096, 8191): 23, (65536, 131071): 37}
    # workload__start's arg5 is its queue depth.
    assert nonzero(hists["blktgt:workload__start"]) == {(2, 3): 1, (4, 7): 1}
    assert all(h["unit"] == "arg5" for h in hists.values())


def test_usdtcount_histogram_negative(bpf, bdevs):
    """rpc__done's status is a signed int: a failed RPC's negative status
    is counted apart, as "negative: N"."""
    t = Gen("libbpf", "usdtcount", "-p", bdevs.pid, "-H", "arg3",
            "blktgt:rpc__done").start()
    for _ in range(7):
        bdevs.rpc("bdev_list")
    for _ in range(3):
        with pytest.raises(probekit.RpcError):
            bdevs.rpc("no_such_method")
    (h,) = parse(t.stop())
    assert nonzero(h) == {(0, 1): 7} and h["negative"] == 3


def test_usdtcount_strings(bpf, bdevs):
    """-S arg2: the RPC methods, most frequent first."""
    t = Gen("libbpf", "usdtcount", "-p", bdevs.pid, "-S", "arg2",
            "blktgt:rpc__request").start()
    js = Gen("libbpf", "usdtcount", "-p", bdevs.pid, "-S", "arg2",
             "blktgt:rpc__request", "--json").start()
    for _ in range(7):
        bdevs.rpc("bdev_list")
    for _ in range(3):
        bdevs.rpc("target_stats")
    workload(bdevs, "Malloc0", "read", 4096, 1, 2)
    assert after_ready(t.stop()) == [
        "", "probe = blktgt:rpc__request", "     COUNT  arg2",
        '         7  "bdev_list"', '         3  "target_stats"',
        '         1  "workload_run"']
    (obj,) = json_objects(js.stop())
    assert obj["values"] == [
        {"probe": "blktgt:rpc__request", "value": v, "count": c}
        for v, c in (("bdev_list", 7), ("target_stats", 3),
                     ("workload_run", 1))]


@pytest.mark.parametrize("kind", histtools.KINDS)
def test_usdtcount_strings_table_full(bpf, bdevs, kind):
    """-S with --max-strings 1: Malloc0's 23 reads take the one place, so
    Malloc1's 37 writes find the table full.  Their values are dropped,
    and counted, as the pair tools count their STARTs: the last line says
    so, and JSON has "strings"; an interval with no loss says nothing."""
    args = ("-p", bdevs.pid, "-S", "bdev", "--max-strings", "1",
            "blktgt:io__submit")
    t = Gen(kind, "usdtcount", *args).start()
    js = Gen(kind, "usdtcount", *args, "--json").start()
    workload(bdevs, "Malloc0", "read", 4096, 4, 23)
    workload(bdevs, "Malloc1", "write", 4096, 2, 37)
    assert after_ready(t.stop()) == [
        "", "probe = blktgt:io__submit", "     COUNT  bdev",
        '        23  "Malloc0"', "37 strings dropped (table full)"]
    (obj,) = json_objects(js.stop())
    assert obj["values"] == [{"probe": "blktgt:io__submit",
                              "value": "Malloc0", "count": 23}]
    assert obj["strings"] == {"dropped": 37}
    # Room for both: nothing lost, and the text says nothing of it.
    t = Gen(kind, "usdtcount", *args[:5], "2", args[6]).start()
    workload(bdevs, "Malloc1", "write", 4096, 2, 37)
    workload(bdevs, "Malloc0", "read", 4096, 4, 23)
    assert after_ready(t.stop()) == [
        "", "probe = blktgt:io__submit", "     COUNT  bdev",
        '        37  "Malloc1"', '        23  "Malloc0"']


MANY_PROBES = 263      # each with 64 slots filled: 16,832 (probe, slot) pairs


def build_many_probes(tmp_path):
    """A program with MANY_PROBES probes many:pNNN(u64 v).  It prints
    "ready", and on each line read fires every probe with v = 2^k for k
    in 0..63 (one hit in each of 64 log2 slots), then prints "done"."""
    src, exe = tmp_path / "many.c", tmp_path / "many"
    fire = "".join("\t\tDTRACE_PROBE1(many, p%03d, v);\n" % i
                   for i in range(MANY_PROBES))
    src.write_text(textwrap.dedent("""\
        #include <stdint.h>
        #include <stdio.h>
        #include <sys/sdt.h>

        int main(void)
        {
        \tchar line[16];

        \tputs("ready");
        \tfflush(stdout);
        \twhile (fgets(line, sizeof(line), stdin)) {
        \t\tfor (int k = 0; k < 64; k++) {
        \t\tuint64_t v = 1ULL << k;

        \t\t__asm__ volatile("" : "+r"(v));
        @FIRE@\t\t}
        \t\tputs("done");
        \t\tfflush(stdout);
        \t}
        \treturn 0;
        }
        """).replace("@FIRE@", fire))
    r = subprocess.run(["cc", "-O1", "-o", str(exe), str(src)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return str(exe)


@pytest.mark.parametrize("kind", histtools.KINDS)
def test_usdtcount_histogram_of_many_probes(bpf, kind, tmp_path):
    """-H on 263 probes, each hit once in each of 64 slots: all 16,832
    hits are in the histograms.  The BCC form kept (probe, slot) pairs in
    a hash of 16,384, which dropped the rest without a word; the libbpf
    form keeps arrays of every slot of every probe."""
    p = subprocess.Popen([build_many_probes(tmp_path)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        t = Gen(kind, "usdtcount", "-p", p.pid, "-H", "arg1", "-j",
                "many:*").start()
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline() == "done\n"
        (obj,) = json_objects(t.stop())
    finally:
        p.kill()
        p.wait()
    hists = obj["histograms"]
    assert [h["key"]["probe"] for h in hists] == [
        "many:p%03d" % i for i in range(MANY_PROBES)]
    for h in hists:
        assert h["total"] == 64, h
        assert [b["count"] for b in h["buckets"]] == [1] * 64, h
    assert sum(h["total"] for h in hists) == 16832


def test_usdtcount_catalog(bpf, bdevs):
    """--catalog names the catalog's probes, among those the patterns
    name, that never fired; --require-all fails on them."""
    pats = ("blktgt:io__submit", "blktgt:io__done", "blktgt:bdev__*")
    t = Gen("libbpf", "usdtcount", "-p", bdevs.pid, "--catalog", CATALOG,
            "--require-all", *pats, rc=1).start()
    workload(bdevs, "Malloc0", "read", 4096, 1, 5)
    lines = t.stop()
    assert after_ready(lines)[-5:] == [
        "", "never fired (2 of 4 catalog probes):",
        "    blktgt:bdev__create", "    blktgt:bdev__delete",
        "probekit-usdtcount: 2 of 4 catalog probes never fired"]

    t = Gen("libbpf", "usdtcount", "-p", bdevs.pid, "--catalog", CATALOG,
            "--require-all", "-j", *pats).start()
    workload(bdevs, "Malloc0", "read", 4096, 1, 5)
    bdevs.rpc("bdev_malloc_create", name="Malloc2", size_mb=1,
              block_size=512)
    bdevs.rpc("bdev_delete", name="Malloc2")
    (obj,) = json_objects(t.stop())
    assert obj["never_fired"] == [] and {
        c["probe"]: c["count"] for c in obj["counts"]} == {
        "blktgt:io__submit": 5, "blktgt:io__done": 5,
        "blktgt:bdev__create": 1, "blktgt:bdev__delete": 1}


def private_copy(path, tmp_path):
    """A copy of the file at path: -b traces every process running a
    file, so a test traces a copy that no other test runs."""
    copy = tmp_path / os.path.basename(path)
    shutil.copy2(path, copy)
    return str(copy)


def test_binary_traces_later_processes(bpf, blktgt_bin, tmp_path):
    """-b PATH: a blktgt started after the tool is traced, with its
    semaphores raised by the kernel."""
    blktgt_bin = private_copy(blktgt_bin, tmp_path)
    c = Gen("libbpf", "usdtcount", "-b", blktgt_bin, "blktgt:io__submit",
            "-j").start()
    lat = Gen("libbpf", "usdtlat", "-b", blktgt_bin, "blktgt:io__submit",
              "blktgt:io__done", "-k", "arg1").start()
    tgt = probekit.Target(blktgt_bin, tmp_path).start()
    try:
        tgt.rpc("bdev_malloc_create", name="Malloc0", size_mb=16,
                block_size=512)
        workload(tgt, "Malloc0", "randwrite", 4096, 4, 29)
    finally:
        tgt.stop()
    (obj,) = json_objects(c.stop())
    assert obj == {"tool": "usdtcount", "pid": None,
                   "binary": os.path.abspath(blktgt_bin),
                   "counts": [{"probe": "blktgt:io__submit", "count": 29}]}
    (h,) = parse(lat.stop())
    assert total(h) == 29


# --- blktgt: errors ----------------------------------------------------------

def test_misspelt_probe_names_the_nearest(bpf, target):
    rc, lines = run("libbpf", "usdtlat", "-p", target.pid,
                    "blktgt:io__sbumit", "blktgt:io__done")
    histtools.one_error_line(
        rc, lines, "usdtlat", r"no USDT probe blktgt:io__sbumit in PID "
        rf"{target.pid} \(blktgt\) or the files it maps; nearest: "
        r"blktgt:io__submit$", 1)
    rc, lines = run("libbpf", "usdtcount", "-p", target.pid, "blktgt:io__[sd]*",
                    "blktgt:qeury*")
    histtools.one_error_line(rc, lines, "usdtcount",
                             "no USDT probe matches blktgt:qeury", 1)


@pytest.mark.parametrize("args,pattern", [
    (("-H", "arg9", "blktgt:io__submit"),
     r"blktgt:io__submit has no argument 9 \(it has 6\)$"),
    (("-H", "arg4", "blktgt:io__done", "blktgt:rpc__done"),
     r"blktgt:rpc__done has no argument 4 \(it has 3\)$"),
])
def test_missing_argument(bpf, target, args, pattern):
    rc, lines = run("libbpf", "usdtcount", "-p", target.pid, *args)
    histtools.one_error_line(rc, lines, "usdtcount", pattern, 1)


@pytest.mark.parametrize("kind", histtools.KINDS)
def test_strings_of_an_integer_refused(bpf, blktgt_bin, tmp_path, kind):
    """-S on an argument that cannot be a pointer (io__submit's arg3, a
    uint32_t) is refused in one line before anything is attached: by its
    C type where the binary carries probekit's note (test_twins.py), else
    by its operand, in probekit-check's words (here blktgt without the
    note); an 8-byte unsigned one might then be a pointer, as
    probekit-check also allows without a catalog."""
    bare = tmp_path / "blktgt"
    subprocess.run(["objcopy", "--remove-section=.note.probekit", blktgt_bin,
                    bare], check=True)
    rc, lines = run(kind, "usdtcount", "-b", bare, "-S", "arg3",
                    "blktgt:io__submit")
    histtools.one_error_line(
        rc, lines, "usdtcount", r"-S arg3 reads a string, but arg3 of "
        r"blktgt:io__submit is a 4-byte unsigned integer \(4@%\w+\), not a "
        r"pointer$", 1)


@pytest.mark.parametrize("kind", histtools.KINDS)
@pytest.mark.parametrize("tool,args", [
    ("usdtlat", ("p:a\nb", "p:c")),
    ("usdtlat", ("-k", "arg\n1", "p:a", "p:c")),
    ("usdtlat", ("--gate", "x:\ny", "p:a", "p:c")),
    ("usdtcount", ("p:a\nb",)),
    ("usdtcount", ("--gate", "x:\ny", "p:a")),
])
def test_control_characters_escaped(kind, tool, args):
    """A newline in a probe name or an option is echoed as \\n: the
    error stays one line (each form says what it refuses in its own
    words, as for other usage errors)."""
    def run_on(pid):
        return run(kind, tool, "-p", pid, *args)
    rc, lines = histtools.run_on_process_without_probes(run_on)
    assert rc != 0 and len(lines) == 1, lines
    assert "\\n" in lines[0], lines


@pytest.mark.parametrize("tool,args,pattern", [
    ("usdtlat", ("p:a", "p:b"), "no target: give -p PID or -b PATH"),
    ("usdtlat", ("-p", "1", "-b", "/bin/true", "p:a", "p:b"),
     "exclude each other"),
    ("usdtlat", ("-p", "1", "p:a"), "required: DONE"),
    ("usdtlat", ("-p", "1", "p:a", "p:b", "-k", "arg0"),
     "'arg0': arguments count from 1 here, as in BCC: bpftrace's arg0 is "
     "arg1"),
    ("usdtlat", ("-p", "1", "p:a", "p:b", "-k", "9id"), "invalid choice"),
    ("usdtlat", ("-p", "1", "nocolon", "p:b"), "not a probe"),
    ("usdtlat", ("-p", "1", "p:a", "p:b", "1", "x"), "count: not a number"),
    ("usdtlat", ("-p", "1", "p:a", "p:b", "1", "2", "3"), "unrecognized"),
    ("usdtcount", ("-p", "1"), "required: PATTERN"),
    ("usdtcount", ("-p", "1", "p:a;b"), "not a probe pattern"),
    ("usdtcount", ("-p", "1", "-H", "arg1", "-S", "arg1", "p:a"),
     "not allowed with"),
    ("usdtcount", ("-p", "1", "--require-all", "p:a"), "needs --catalog"),
    ("usdtcount", ("-p", "1", "-H", "1x", "p:a"), "invalid choice"),
])
def test_usage_errors(tool, args, pattern):
    rc, lines = run("libbpf", tool, *args)
    histtools.one_error_line(rc, lines, tool, pattern, 2)


@pytest.mark.parametrize("tool", ["usdtlat", "usdtcount"])
def test_version_and_help(tool):
    with open(os.path.join(probekit.ROOT, "VERSION")) as f:
        version = f.read().strip()
    assert run("libbpf", tool, "--version") == (
        0, [f"probekit-{tool} (probekit) {version}"])
    rc, lines = run("libbpf", tool, "--help")
    assert rc == 0 and "examples:" in lines and "-b, --binary PATH" in \
        "".join(lines)
    assert all(len(ln) < 80 for ln in lines), lines


def test_bad_binary(tmp_path):
    rc, lines = run("libbpf", "usdtcount", "-b", tmp_path / "none", "p:a")
    histtools.one_error_line(rc, lines, "usdtcount", "No such file", 1)
    rc, lines = run("libbpf", "usdtcount", "-b", tmp_path, "p:a")
    histtools.one_error_line(rc, lines, "usdtcount", "not a regular file", 1)
    (tmp_path / "text").write_text("not ELF\n")
    rc, lines = run("libbpf", "usdtcount", "-b", tmp_path / "text", "p:a")
    histtools.one_error_line(rc, lines, "usdtcount",
                             "cannot read the USDT probes of", 1)


# --- identical to the bcc/ twins ---------------------------------------------

# The probes fixed_workload() fires a fixed number of times (msg__* is
# not among them: how many messages the reactors exchange varies, nor is
# io__batch, one hit per completion drain: io__[sd]* is submit and done).
STEADY = ("blktgt:io__[sd]*", "blktgt:rpc__*", "blktgt:workload__*")


def sequential(target, tool, *args):
    outs = {}
    for kind in ("bcc", "libbpf"):
        t = Gen(kind, tool, "-p", target.pid, *args).start()
        fixed_workload(target)
        # Byte for byte but each interval's own time ("ts").
        outs[kind] = mask_ts(t.stop())
    return outs["bcc"], outs["libbpf"]


@pytest.mark.needs("py:bcc")
@pytest.mark.parametrize("tool,args", [
    ("usdtcount", ("blktgt:io__[sd]*", "rpc__*")),
    ("usdtcount", (*STEADY, "--json")),
    ("usdtcount", ("-H", "arg5", "blktgt:io__submit",
                   "blktgt:workload__start")),
    # By name: len is io__submit's arg5 and io__done's arg4.
    ("usdtcount", ("-H", "len", "blktgt:io__[sd]*", "-j")),
    # workload__done's arg2 is a uint64_t: refused by -S.
    ("usdtcount", ("-S", "arg2", "blktgt:io__[sd]*", "blktgt:rpc__*",
                   "blktgt:workload__start")),
    ("usdtcount", ("-S", "method", "blktgt:rpc__*", "-j")),
    ("usdtcount", ("--catalog", CATALOG, "blktgt:io__[sd]*", "blktgt:nbd__*")),
    ("usdtcount", ("--catalog", CATALOG, "-j", *STEADY, "blktgt:nbd__*")),
])
def test_usdtcount_matches_bcc(bpf, bdevs, tool, args):
    want, got = sequential(bdevs, tool, *args)
    assert after_ready(got)
    assert got == want


def buckets_to_totals(lines):
    objs = json_objects(lines)
    for o in objs:
        for h in o["histograms"]:
            assert h["total"] == sum(b["count"] for b in h["buckets"])
            del h["buckets"]
    return objs


@pytest.mark.needs("py:bcc")
@pytest.mark.parametrize("args", [
    ("blktgt:io__submit", "blktgt:io__done", "-k", "arg1", "-j"),
    ("blktgt:rpc__request", "blktgt:rpc__done", "-j", "-n"),
])
def test_usdtlat_matches_bcc(bpf, bdevs, args):
    want, got = sequential(bdevs, "usdtlat", *args)
    assert buckets_to_totals(got) == buckets_to_totals(want)
    # 60 I/Os; 9 RPCs: two workload_run, seven bdev_list.
    assert buckets_to_totals(got)[0]["histograms"][0]["total"] in (60, 9)


# --- PostgreSQL --------------------------------------------------------------

@pytest.mark.needs(*PG_NEEDS)
def test_postgres_two_backends_by_path(bpf, pg):
    """N queries over two connections, traced by the server's path: both
    backends' queries are counted, and each transaction is timed."""
    server = pg.postgres
    a, b = pg.connect(), pg.connect()
    try:
        a.run(["select 0;"])    # both backends are up before tracing starts
        b.run(["select 0;"])
        c = Gen("libbpf", "usdtcount", "-b", server,
                "postgresql:query__start", "postgresql:query__done",
                "transaction__commit").start()
        lat = Gen("libbpf", "usdtlat", "-b", server,
                  "postgresql:transaction__start",
                  "postgresql:transaction__commit", "-j").start()
        for i in range(1, 24):
            (a if i % 3 else b).run([f"select {i};"])
        got, hist = usdtcount_counts(c.stop()), json_objects(lat.stop())
    finally:
        a.close()
        b.close()
    assert (a.sent, b.sent) == (1 + 16, 1 + 7)
    assert got == {"postgresql:query__start": 23,
                   "postgresql:query__done": 23,
                   "postgresql:transaction__commit": 23}
    (obj,) = hist
    assert obj["pid"] is None and obj["histograms"][0]["total"] == 23


@pytest.mark.needs(f"{PG_BIN}/postgres")
@pytest.mark.parametrize("probe,arg,operand", [
    ("checkpoint__done", 1, "40+CheckpointStats(%rip)"),
    ("buffer__sync__done", 1, "NBuffers(%rip)"),
])
def test_postgres_unreadable_operand(probe, arg, operand):
    """A %rip-relative operand is refused in one line, naming the reader;
    the readable argument beside it is not."""
    rc, lines = run("libbpf", "usdtcount", "-b", f"{PG_BIN}/postgres",
                    "-H", f"arg{arg}", f"postgresql:{probe}")
    histtools.one_error_line(
        rc, lines, "usdtcount", re.escape(
            f"cannot read arg{arg} of postgresql:{probe}: probekit-usdtcount "
            f"cannot read {operand}: a symbol-relative %rip operand; pass "
            "the value through a register at the probe"), 1)


# --- python3.X ---------------------------------------------------------------

# Between "ready" and "done" it raises no audit event but its own:
# os.read() and os.write() raise none, where open() would.
PY_SCRIPT = textwrap.dedent("""\
    import os
    import sys

    n = int(sys.argv[1])
    os.write(1, b"ready\\n")
    os.read(0, 16)
    for _ in range(n):
        sys.audit("probekit.counted")
    os.write(1, b"done\\n")
    os.read(0, 16)
""")


@pytest.mark.needs(PY_SDT)
def test_python_audit(bpf, tmp_path):
    """python:audit, which every CPython 3 since 3.8 has (3.12 dropped the
    function probes): -S arg1 counts the events by name."""
    script = tmp_path / "calls.py"
    script.write_text(PY_SCRIPT)
    py = subprocess.Popen([PY_SDT, str(script), "41"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True)
    out = LineReader(py.stdout)
    try:
        out.wait_for("^ready$")
        t = Gen("libbpf", "usdtcount", "-p", py.pid, "-S", "arg1",
                "python:audit").start()
        py.stdin.write("go\n")
        py.stdin.flush()
        out.wait_for("^done$")
        lines = after_ready(t.stop())
    finally:
        py.stdin.close()
        py.wait(timeout=TIMEOUT)
    assert py.returncode == 0
    i = lines.index("probe = python:audit")
    assert lines[i + 1:] == ["     COUNT  arg1",
                             '        41  "probekit.counted"'], lines


# --- libstdc++ ---------------------------------------------------------------

THROWER = textwrap.dedent("""\
    #include <cstdio>
    #include <cstdlib>
    #include <stdexcept>

    int main(int argc, char **argv)
    {
        int n = atoi(argv[1]), caught = 0;
        char line[16];

        if (argc > 2) {     /* wait for "go" on stdin */
            puts("ready");
            fflush(stdout);
            if (!fgets(line, sizeof(line), stdin))
                return 1;
        }
        for (int i = 0; i < n; i++) {
            try {
                throw std::runtime_error("x");
            } catch (const std::exception &) {
                caught++;
            }
        }
        printf("caught %d\\n", caught);
        return 0;
    }
""")


def libstdcxx():
    out = subprocess.run(["g++", "-print-file-name=libstdc++.so.6"],
                         capture_output=True, text=True, check=True)
    return os.path.realpath(out.stdout.strip())


@pytest.fixture
def thrower(tmp_path):
    src = tmp_path / "thrower.cc"
    src.write_text(THROWER)
    exe = tmp_path / "thrower"
    subprocess.run(["g++", "-O1", "-o", str(exe), str(src)], check=True)
    return str(exe)


@pytest.mark.needs("g++")
def test_libstdcxx_throws_by_library_path(bpf, thrower, tmp_path):
    """The thrower loads a private copy of libstdc++ (private_copy() says
    why), traced by its path."""
    libdir = tmp_path / "lib"
    libdir.mkdir()
    lib = private_copy(libstdcxx(), libdir)
    os.symlink(os.path.basename(lib), libdir / "libstdc++.so.6")
    t = Gen("libbpf", "usdtcount", "-b", lib, "libstdcxx:*").start()
    r = subprocess.run([thrower, "31"], capture_output=True, text=True,
                       timeout=TIMEOUT,
                       env=dict(os.environ, LD_LIBRARY_PATH=str(libdir)))
    assert r.stdout == "caught 31\n"
    assert usdtcount_counts(t.stop()) == {"libstdcxx:throw": 31, "libstdcxx:catch": 31}


@pytest.mark.needs("g++", "unshare")
def test_library_only_in_mount_namespace(bpf, thrower, tmp_path):
    """-p PID finds a library that exists only in the process's mount
    namespace, through /proc/PID/root."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    lib = libstdcxx()
    shell = (f"mount -t tmpfs none {hidden} && cp {lib} {hidden}/ && "
             f"ln -s {os.path.basename(lib)} {hidden}/libstdc++.so.6 && "
             f"LD_LIBRARY_PATH={hidden} exec {thrower} 19 wait")
    proc = subprocess.Popen(["unshare", "-m", "--propagation", "private",
                             "sh", "-c", shell], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    out = LineReader(proc.stdout)
    try:
        out.wait_for("^ready$")
        assert not os.listdir(hidden)       # not there outside
        t = Gen("libbpf", "usdtcount", "-p", proc.pid, "libstdcxx:throw").start()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out.wait_for("^caught 19$")
        proc.wait(timeout=TIMEOUT)
        lines = t.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert usdtcount_counts(lines) == {"libstdcxx:throw": 19}
