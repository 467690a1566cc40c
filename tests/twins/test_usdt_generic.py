# SPDX-License-Identifier: BSD-2-Clause
"""The generic tools (usdtlat, usdtcount) on binaries nobody here wrote:
PostgreSQL, python3 and libstdc++, each through a known workload,
with exact counts.  bcc/README.md ("usdtlat and usdtcount") is the
contract; the libbpf twins print the same bytes, so KINDS may grow.

Every tool is started and the test waits for its "Hit Ctrl-C to end."
line, printed once every site is attached; the workload then runs to a
mark its own process prints, and SIGINT makes the tool print its totals.
"""

import os
import re
import signal
import subprocess
import sys

import pytest

import histtools
import probekit
import thirdparty
from histtools import json_objects, one_error_line, parse, total
from probekit import LineReader, TIMEOUT

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
# The installed bpftrace and libbpf, as probekit-list names them.
from probelib.argspec import BPFTRACE, LIBBPF, reader_name  # noqa: E402
from thirdparty import pg  # noqa: F401 (a fixture)
from thirdparty import K

pytestmark = pytest.mark.needs("setpriv", "py:bcc", "py:elftools")

KINDS = ["bcc"]
N = 23                  # queries, over two connections: 12 + 11


_started = []


@pytest.fixture(autouse=True)
def no_tool_left():
    """A tool traced with -b never sees its target exit: when a test
    fails before it stops one, the tool is killed here, not left
    running."""
    yield
    while _started:
        t = _started.pop()
        if getattr(t, "proc", None) is not None and t.proc.poll() is None:
            os.killpg(t.proc.pid, signal.SIGKILL)
            t.proc.wait()


class Tool(histtools.Tool):
    """A generic tool started with its own target options (-p or -b).
    Its output must be tidy as the other tools' is, except that the lines
    that name a path the user gave (readiness, the target's exit) are as
    wide as the path makes them."""

    def __init__(self, kind, name, *args):
        super().__init__(kind, name, 0)
        self.cmd = histtools.program(kind, name) + [*map(str, args)]

    def start(self):
        try:
            return super().start()
        finally:
            _started.append(self)

    def wait(self):
        lines = super().wait()
        assert not any("Traceback" in ln for ln in lines), "\n".join(lines)
        for ln in lines:
            assert len(ln) < 80 or self.json or ln.startswith("Tracing ") \
                or ln.endswith("exited; tracing ended"), f"too wide: {ln!r}"
        return lines


def counts(lines):
    """{probe: count} of usdtcount's text."""
    out = {}
    for ln in lines:
        m = re.match(r"^(\S+:\S+) +(\d+)$", ln)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def values(lines):
    """{(probe, value): count} of usdtcount -S's text."""
    out, probe = {}, None
    for ln in lines:
        m = re.match(r"^probe = (\S+)$", ln)
        if m:
            probe = m.group(1)
            continue
        m = re.match(r'^ {0,9}(\d+)  "(.*)"$', ln)
        if m and probe:
            out[probe, m.group(2)] = int(m.group(1))
    return out


# --- PostgreSQL ----------------------------------------------------------------

PG = pytest.mark.needs(*thirdparty.PG_NEEDS)


def two_sessions_run(a, b, tag_a="a", tag_b="b"):
    """N queries: 12 on a, 11 on b, each its own transaction; then both
    sessions are closed (whether or not the queries ran)."""
    try:
        a.run(["select '%s';" % tag_a] * 12)
        b.run(["select '%s';" % tag_b] * (N - 12))
    finally:
        a.close()
        b.close()


@PG
@pytest.mark.parametrize("kind", KINDS)
def test_postgres_count_by_path(bpf, pg, kind):
    """-b PATH counts the queries of a backend that existed before the
    tool and of one forked after it, with the semaphores the kernel
    raised in both; -S arg1 tells the two backends' queries apart."""
    a = pg.connect()
    t = Tool(kind, "usdtcount", "-b", pg.postgres, "postgresql:query__start",
             "query__done").start()
    s = Tool(kind, "usdtcount", "-b", pg.postgres, "postgresql:query__start",
             "-S", "arg1").start()
    b = pg.connect()
    two_sessions_run(a, b)
    got = counts(t.stop())
    assert got == {"postgresql:query__start": N,
                   "postgresql:query__done": N}, got
    got = values(s.stop())
    assert got == {("postgresql:query__start", "select 'a';"): 12,
                   ("postgresql:query__start", "select 'b';"): N - 12}, got


@PG
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("key", ["tid", "arg1"])
def test_postgres_transaction_latency(bpf, pg, kind, key):
    """usdtlat on transaction__start/commit over two backends: N pairs,
    by thread or by the transaction's local id (argument 1)."""
    a, b = pg.connect(), pg.connect()
    t = Tool(kind, "usdtlat", "-b", pg.postgres, "-k", key, "-n",
             "postgresql:transaction__start",
             "postgresql:transaction__commit").start()
    j = Tool(kind, "usdtlat", "-b", pg.postgres, "-j",
             "postgresql:transaction__start",
             "postgresql:transaction__commit").start()
    h = Tool(kind, "usdtcount", "-b", pg.postgres, "-H", "arg1",
             "postgresql:transaction__start").start()
    two_sessions_run(a, b)
    # -H arg1: the N local transaction ids (unsigned, so none negative).
    hists = parse(h.stop())
    assert [(x["key"], total(x)) for x in hists] == [
        ({"probe": "postgresql:transaction__start"}, N)], hists
    assert "negative" not in hists[0], hists
    hists = parse(t.stop())
    assert len(hists) == 1 and hists[0]["unit"] == "nsecs", hists
    assert total(hists[0]) == N, hists
    objs = json_objects(j.stop())
    assert len(objs) == 1, objs
    o = objs[0]
    assert o["tool"] == "usdtlat" and o["pid"] is None, o
    assert o["binary"] == pg.postgres, o
    assert [h["total"] for h in o["histograms"]] == [N], o


@PG
@pytest.mark.parametrize("kind", KINDS)
def test_postgres_by_pid_one_backend(bpf, pg, kind):
    """-p PID of one backend counts that backend's queries alone: the
    uprobes are for that process only, not for its sibling backend."""
    a, b = pg.connect(), pg.connect()
    pid = a.backend_pid()
    t = Tool(kind, "usdtcount", "-p", pid, "postgresql:query__start").start()
    two_sessions_run(a, b)
    assert counts(t.stop()) == {"postgresql:query__start": 12}


@PG
@pytest.mark.parametrize("kind", KINDS)
def test_postgres_unreadable_argument(pg, kind):
    """An argument the tool cannot read is named, with the reader and
    the operand, in one line, before anything is loaded."""
    rc, lines = histtools.run_tool(kind, "usdtcount", "-b", pg.postgres,
                                   "postgresql:checkpoint__done", "-H",
                                   "arg1")
    one_error_line(rc, lines, "usdtcount", re.escape(
        "cannot read arg1 of postgresql:checkpoint__done: "
        "probekit-usdtcount-bcc cannot read 40+CheckpointStats(%rip): a "
        "symbol-relative %rip operand; pass the value through a register at "
        "the probe: __asm__ volatile(\"\" : \"+r\"(x))"), want_rc=1)
    rc, lines = histtools.run_tool(kind, "usdtlat", "-b", pg.postgres,
                                   "-k", "arg3",
                                   "postgresql:transaction__start",
                                   "postgresql:transaction__commit")
    one_error_line(rc, lines, "usdtlat", re.escape(
        "postgresql:transaction__start has no argument 3 (it has 1)"),
        want_rc=1)
    # PostgreSQL's notes carry operands only: a name is refused, argN told.
    rc, lines = histtools.run_tool(kind, "usdtlat", "-b", pg.postgres,
                                   "-k", "xid",
                                   "postgresql:transaction__start",
                                   "postgresql:transaction__commit")
    one_error_line(rc, lines, "usdtlat", re.escape(
        "%s has no argument names for probe postgresql:transaction__start "
        "(it was not built with probekit's header); give the argument by "
        "number, arg1 on" % pg.postgres) + "$", want_rc=1)


@PG
@pytest.mark.parametrize("kind", KINDS)
def test_postgres_misspelt_probe(pg, kind):
    rc, lines = histtools.run_tool(kind, "usdtlat", "-b", pg.postgres,
                                   "postgresql:query__begin",
                                   "postgresql:query__done")
    one_error_line(rc, lines, "usdtlat", re.escape(
        "no USDT probe postgresql:query__begin in %s; nearest: "
        "postgresql:query__start" % pg.postgres) + "$", want_rc=1)
    rc, lines = histtools.run_tool(kind, "usdtcount", "-b", pg.postgres,
                                   "postgresql:query__begin*")
    one_error_line(rc, lines, "usdtcount", re.escape(
        "no USDT probe matches postgresql:query__begin* in %s; nearest: "
        "postgresql:query__done" % pg.postgres) + "$", want_rc=1)


@PG
@pytest.mark.parametrize("kind", KINDS)
def test_postgres_catalog_never_fired(bpf, pg, kind, tmp_path):
    """--catalog lists the catalog's probes that match and never fired;
    --require-all then exits 1 with one line saying how many."""
    cat = tmp_path / "pg.d"
    cat.write_text("provider postgresql {\n"
                   "\tprobe query__start(const char *);\n"
                   "\tprobe query__done(const char *);\n"
                   "\tprobe sort__done(int, long);\n"
                   "\tprobe transaction__start(unsigned int);\n"
                   "};\n")
    a = pg.connect()
    t = Tool(kind, "usdtcount", "-b", pg.postgres, "postgresql:query__*",
             "postgresql:sort__*", "--catalog", str(cat),
             "--require-all").start()
    try:
        a.run(["select 1;"] * 3)
    finally:
        a.close()
    os.killpg(t.proc.pid, signal.SIGINT)
    lines = t.out.drain(TIMEOUT)
    rc = t.proc.wait(timeout=TIMEOUT)
    assert rc == 1, lines
    i = lines.index("never fired (1 of 3 catalog probes):")
    assert lines[i:] == ["never fired (1 of 3 catalog probes):",
                         "    postgresql:sort__done",
                         "probekit-usdtcount-bcc: 1 of 3 catalog probes "
                         "never fired"], lines
    # Each of the 10 query__* probes (start, parse, rewrite, plan,
    # execute, each with its done) fired once per query.
    got = counts(lines[:i])
    assert len(got) == 10 and set(got.values()) == {3}, got
    assert got["postgresql:query__start"] == 3, got


# --- python3.X -------------------------------------------------------------------

PY_SCRIPT = r"""
import os, sys
def probekit_spin():
    pass
print("spinning", flush=True)
while not os.path.exists(sys.argv[2]):
    probekit_spin()
for i in range(int(sys.argv[1])):
    sys.audit("probekit.fn", i)
print("done", flush=True)
"""


@pytest.mark.needs(thirdparty.PY_SDT)
@pytest.mark.parametrize("kind", KINDS)
def test_python_audit(bpf, kind, tmp_path):
    """python:audit, which every CPython 3 since 3.8 has (3.12 dropped
    function__entry, function__return and line): the K events the script
    raises are counted by name (-S arg1).  The probe is enabled while the
    interpreter runs a hot loop, and the script still runs to its end."""
    with thirdparty.spinning_python(thirdparty.PY_SDT, PY_SCRIPT, K,
                                    tmp_path) as (py, go):
        t = Tool(kind, "usdtcount", "-p", py.pid, "python:audit", "-S",
                 "arg1").start()
        go()
    got = values(t.wait())
    assert got.get(("python:audit", "probekit.fn")) == K, got


# --- libstdc++ -----------------------------------------------------------------

def start_throws(cmd):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    out = LineReader(p.stdout)
    out.wait_for("^ready$")
    return p, out


def finish_throws(p, out):
    p.stdin.write(b"go\n")
    p.stdin.flush()
    out.wait_for("^caught %d$" % K)
    assert p.wait(timeout=TIMEOUT) == 0, out.lines


@pytest.mark.needs("g++")
@pytest.mark.parametrize("kind", KINDS)
def test_cxx_throws_in_libstdcxx(bpf, kind, tmp_path):
    """The throws of a C++ program, counted at libstdc++'s probes: with
    -p the probes resolve in the library the process maps."""
    exe = thirdparty.build_throws(str(tmp_path))
    p, out = start_throws([exe, str(K)])
    try:
        t = Tool(kind, "usdtcount", "-p", p.pid, "libstdcxx:*").start()
        finish_throws(p, out)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    got = counts(t.wait())
    assert got == {"libstdcxx:throw": K, "libstdcxx:catch": K}, got


@pytest.mark.needs("g++", "unshare")
@pytest.mark.parametrize("kind", KINDS)
def test_library_only_in_mount_namespace(bpf, kind, tmp_path):
    """A process whose libstdc++ exists only in its own mount namespace
    (a tmpfs mounted there, over a directory empty outside): the library
    is read and attached through /proc/PID/root."""
    exe = thirdparty.build_throws(str(tmp_path))
    lib = subprocess.run(["g++", "-print-file-name=libstdc++.so.6"],
                         capture_output=True, text=True).stdout.strip()
    libdir = tmp_path / "nslib"
    libdir.mkdir()
    sh = ('mount -t tmpfs probekit "$1" && cp "$2" "$1"/libstdc++.so.6 && '
          'LD_LIBRARY_PATH="$1" exec "$3" %d' % K)
    p, out = start_throws(["unshare", "-m", "--propagation", "private",
                           "sh", "-c", sh, "sh", str(libdir),
                           os.path.realpath(lib), exe])
    try:
        with open("/proc/%d/maps" % p.pid) as f:
            maps = f.read()
        assert str(libdir) + "/libstdc++.so.6" in maps, maps
        assert os.listdir(libdir) == []
        t = Tool(kind, "usdtcount", "-p", p.pid, "libstdcxx:throw").start()
        finish_throws(p, out)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert counts(t.wait()) == {"libstdcxx:throw": K}


# --- probekit-list -------------------------------------------------------------

def probekit_list(*args):
    return histtools.run([os.path.join(probekit.BUILD, "bin",
                                       "probekit-list"), *map(str, args)])


@PG
def test_list_traced_now(bpf, pg):
    """The semaphore a tracer raised through the kernel's reference
    counter shows as "traced now" in a backend, and falls back to 0 once
    the tracer is gone.  The backend's executable is listed under the
    path it sees, Debian's, where its namespace mounts the copy the tool
    traces."""
    a = pg.connect()
    try:
        pid = a.backend_pid()
        probe = ["  postgresql:transaction__start  1 site  semaphore: %s",
                 "      arg0/arg1  4@%ebx  bpftrace: yes  libbpf: yes"]

        def listed(sem):
            rc, lines = probekit_list("-p", pid,
                                      "postgresql:transaction__start")
            assert rc == 0, lines
            assert lines == [f"{thirdparty.PG_BIN}/postgres",
                             probe[0] % sem, probe[1]], lines
        listed("0 (not traced)")
        t = Tool("bcc", "usdtcount", "-b", pg.postgres,
                 "postgresql:transaction__start").start()
        listed("1 (traced now)")
        t.stop()
        listed("0 (not traced)")
    finally:
        a.close()


def test_list_path_with_catalog(tmp_path):
    """A file by its path, a third-party catalog's names, types and docs,
    and each reader's verdict with its reason."""
    cat = tmp_path / "pg.d"
    cat.write_text("provider postgresql {\n"
                   "\t/* A checkpoint finished. */\n"
                   "\tprobe checkpoint__done(int, int, int, int, int);\n"
                   "\tprobe transaction__start(LocalTransactionId);\n"
                   "};\n")
    rc, lines = probekit_list(f"{thirdparty.PG_BIN}/postgres",
                              "postgresql:checkpoint__done",
                              "--catalog", cat)
    assert rc == 0, lines
    why = "{} cannot read {}: a symbol-relative %rip operand"
    assert lines[:7] == [
        f"{thirdparty.PG_BIN}/postgres",
        "  postgresql:checkpoint__done  1 site  semaphore: yes",
        "      doc: A checkpoint finished.",
        "      arg0/arg1  -4@40+CheckpointStats(%rip)  bpftrace: no  "
        "libbpf: no  int",
        "        " + why.format(reader_name(BPFTRACE), "40+CheckpointStats(%rip)"),
        "        " + why.format(reader_name(LIBBPF), "40+CheckpointStats(%rip)"),
        "      arg1/arg2  -4@NBuffers(%rip)  bpftrace: no  libbpf: no  int",
    ], lines
    assert len(lines) == 1 + 1 + 1 + 5 * 3, lines


def test_list_errors(tmp_path):
    rc, lines = probekit_list(f"{thirdparty.PG_BIN}/postgres",
                              "postgresql:query__begin")
    assert (rc, lines) == (1, [
        "probekit-list: no USDT probe matches postgresql:query__begin in "
        f"{thirdparty.PG_BIN}/postgres; nearest: postgresql:query__start"]), \
        lines
    rc, lines = probekit_list("-p", histtools.unused_pid())
    assert rc == 1 and len(lines) == 1 and \
        lines[0].startswith("probekit-list: no process with PID"), lines
    notelf = tmp_path / "x"
    notelf.write_text("not an ELF file\n")
    rc, lines = probekit_list(notelf)
    assert (rc, lines) == (1, [f"probekit-list: {notelf} is not an ELF "
                               "file (or cannot be read)"]), lines
    rc, lines = probekit_list()
    assert rc == 2 and len(lines) == 1, lines
