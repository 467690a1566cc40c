# SPDX-License-Identifier: BSD-2-Clause
"""probekit-bpftrace on a whole service: a PATH traces every process that
runs it (PostgreSQL's backends), a PID whose children run its executable
is warned about, a library seen only in the process's mount namespace is
traced through /proc/PID/root, bpftrace's -f json passes through, and a
misspelt probe is named with the nearest real one.

Each trace waits for the wrapper's readiness line, runs a known workload,
waits for the workload's own answer (psql's mark after the queries, a
"done N" line), then SIGINTs the trace and reads the counts bpftrace
prints at its end.
"""

import json
import re
import subprocess

import pytest

import probekit
from probekit import LineReader, TIMEOUT, Trace, WRAPPER
from thirdparty import PG_BIN, PG_NEEDS
from thirdparty import pg  # noqa: F401 (a fixture)

N_QUERIES = 23


def write(path, text):
    path.write_text(text)
    return str(path)


def dry_run(*args):
    """The wrapper's -n: (rc, stdout, stderr lines)."""
    r = subprocess.run([WRAPPER, "--dry-run", *map(str, args)], capture_output=True,
                       text=True, timeout=TIMEOUT)
    return r.returncode, r.stdout, r.stderr.splitlines()


def counts(lines, name):
    """bpftrace's text map @name[KEY]: N as {KEY: N}."""
    got = {}
    for ln in lines:
        m = re.match(rf"^@{name}\[(\d+)\]: (\d+)$", ln)
        if m:
            got[int(m.group(1))] = int(m.group(2))
    return got


# --- PostgreSQL --------------------------------------------------------------

QUERY_BT = """\
usdt:__EXE__:postgresql:query__start
{
	@q[pid] = count();
}
"""


@pytest.mark.needs(*PG_NEEDS)
def test_postgres_by_path_counts_both_backends(bpf, pg, tmp_path):
    """N queries over two connections, traced by the server's path (the
    cluster's private copy): each backend's queries are counted exactly,
    under its own PID."""
    server = pg.postgres
    script = write(tmp_path / "q.bt", QUERY_BT)
    a, b = pg.connect(), pg.connect()
    try:
        pids = a.backend_pid(), b.backend_pid()
        t = Trace(server, [script]).start(
            re.escape(f"probekit: tracing PATH={server} (Ctrl-C to end)"))
        for i in range(N_QUERIES):
            (a if i % 3 else b).run([f"select {i};"])
        lines = t.stop()
    finally:
        a.close()
        b.close()
    assert t.proc.returncode == 0, lines
    assert counts(lines, "q") == {pids[0]: 15, pids[1]: 8}, lines


@pytest.mark.needs(*PG_NEEDS)
def test_postmaster_pid_warns_of_its_children(bpf, pg, tmp_path):
    """Given the postmaster's PID, the wrapper says, once, that its
    children run the same executable, and names the PATH form; the trace
    still starts.  The path it names traces the backends."""
    postmaster = pg.pid
    # The executable is the copy, seen under its namespace's path.
    exe = f"/proc/{postmaster}/root{PG_BIN}/postgres"
    script = write(tmp_path / "q.bt", QUERY_BT)
    a = pg.connect()
    try:
        backend = a.backend_pid()
        lines = Trace(postmaster, [script]).start().stop()
        warn = [ln for ln in lines if "child process" in ln]
        assert len(warn) == 1, lines
        assert re.fullmatch(
            rf"probekit-bpftrace: PID {postmaster} has \d+ child "
            rf"process\(es\) running {re.escape(exe)}, which tracing PID "
            rf"{postmaster} does not see; to trace every process that runs "
            r"it, later ones too, give its path instead of the PID: "
            rf"probekit-bpftrace \[options\] {re.escape(exe)} SCRIPT\.\.\.",
            warn[0]), warn
        assert lines.index(warn[0]) < next(
            i for i, ln in enumerate(lines)
            if ln.startswith("probekit: tracing"))
        by_path = Trace(exe, [script]).start()
        for i in range(5):
            a.run([f"select {i};"])
        counted = counts(by_path.stop(), "q")
    finally:
        a.close()
    assert counted == {backend: 5}, counted


@pytest.mark.needs(f"{PG_BIN}/postgres")
def test_misspelt_probe_names_the_nearest(tmp_path):
    """A misspelt probe beside a good one: one line naming the nearest."""
    script = write(tmp_path / "s.bt", QUERY_BT + """\
usdt:__EXE__:postgresql:transaction__comit
{
	@c = count();
}
""")
    rc, out, err = dry_run(f"{PG_BIN}/postgres", script)
    assert (rc, out, err) == (1, "", [
        f"probekit-bpftrace: no USDT probe postgresql:transaction__comit in "
        f"{PG_BIN}/postgres; nearest: postgresql:transaction__commit"])


@pytest.mark.needs(f"{PG_BIN}/postgres")
def test_pid_with_a_path_is_refused(tmp_path):
    script = write(tmp_path / "s.bt", QUERY_BT.replace(
        "query__start", "query__start /pid == __PID__/"))
    rc, out, err = dry_run(f"{PG_BIN}/postgres", script)
    assert (rc, out, err) == (1, "", [
        "probekit-bpftrace: the script uses __PID__, but a PATH traces every "
        "process that runs it, so there is no one PID; give the PID instead "
        "of the path, or take __PID__ out of the script"])


# --- a library only in a mount namespace ------------------------------------

LIB_C = r"""
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
unsigned short nslib_hit_semaphore __attribute__((section(".probes")));
static volatile unsigned long total;

/* The probe fires only while a tracer holds its semaphore. */
void nslib_hit(unsigned long i)
{
	total += i;
	if (nslib_hit_semaphore)
		DTRACE_PROBE1(nslib, hit, i);
}
"""

MAIN_C = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

/* dlopen argv[1]; then for each line N on stdin call nslib_hit N times
 * and answer "done N". */
int main(int argc, char **argv)
{
	void *h = argc == 2 ? dlopen(argv[1], RTLD_NOW) : NULL;
	void (*hit)(unsigned long);
	char line[64];
	unsigned long n, i;

	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	hit = (void (*)(unsigned long))dlsym(h, "nslib_hit");
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		n = strtoul(line, NULL, 10);
		for (i = 0; i < n; i++)
			hit(i);
		printf("done %lu\n", n);
		fflush(stdout);
	}
	return 0;
}
"""

HIT_BT = """\
usdt:__EXE__:nslib:hit
{
	@hits = count();
}
"""


def build_probe_program(tmp_path):
    """The library and the program that dlopens it: (lib, main)."""
    for name, src in (("lib.c", LIB_C), ("main.c", MAIN_C)):
        (tmp_path / name).write_text(src)
    lib, main = tmp_path / "libnsprobe.so", tmp_path / "nsmain"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", lib,
                    tmp_path / "lib.c"], check=True)
    subprocess.run(["gcc", "-O2", "-o", main, tmp_path / "main.c", "-ldl"],
                   check=True)
    return lib, main


class Hidden:
    """A process that dlopens a probe'd library from a tmpfs mounted, in a
    mount namespace of its own, over an empty directory: the library's
    path does not exist outside that namespace."""

    def __init__(self, tmp_path):
        lib, main = build_probe_program(tmp_path)
        hidden = tmp_path / "hidden"
        hidden.mkdir()
        self.lib = hidden / "libhidden.so"
        shell = (f"mount -t tmpfs probekit-ns {hidden} && cp {lib} "
                 f"{self.lib} && exec {main} {self.lib}")
        self.proc = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", shell],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        self.out = LineReader(self.proc.stdout)
        self.out.wait_for("^ready$")
        self.pid = self.proc.pid
        assert not self.lib.exists()

    def run(self, n):
        """n queries; return on this call's own "done n" (a line read
        after the command was sent, not an earlier call's)."""
        seen = len(self.out.lines)
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        self.out.wait_until(lambda ls: f"done {n}" in ls[seen:])

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=TIMEOUT) == 0


@pytest.fixture
def hidden(tmp_path):
    h = Hidden(tmp_path)
    yield h
    h.close()


@pytest.mark.needs("gcc", "unshare")
def test_library_only_in_a_mount_namespace(bpf, hidden, tmp_path):
    script = write(tmp_path / "hit.bt", HIT_BT)
    rc, out, err = dry_run(hidden.pid, script)
    assert rc == 0 and err == [], err
    assert out.startswith(
        f'usdt:"/proc/{hidden.pid}/root{hidden.lib}":nslib:hit\n'), out
    t = Trace(hidden.pid, [script]).start()
    hidden.run(N_QUERIES)
    lines = t.stop()
    assert t.proc.returncode == 0, lines
    assert f"@hits: {N_QUERIES}" in lines, lines
    assert not any("child process" in ln for ln in lines), lines


@pytest.mark.needs("gcc")
def test_library_path_traces_later_processes(bpf, tmp_path):
    """A shared library's PATH: two processes that load it after the
    trace started are both counted, their semaphores raised by the
    kernel (the probe fires only while one is)."""
    lib, main = build_probe_program(tmp_path)
    script = write(tmp_path / "hit.bt", HIT_BT.replace(
        "@hits = count();", "@hits[pid] = count();"))
    t = Trace(lib, [script]).start(
        re.escape(f"probekit: tracing PATH={lib} (Ctrl-C to end)"))
    procs = []
    try:
        for n in (23, 7):
            p = subprocess.Popen([main, lib], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
            procs.append(p)
            out, _ = p.communicate(f"{n}\n", timeout=TIMEOUT)
            assert (p.returncode, out) == (0, f"ready\ndone {n}\n")
    finally:
        lines = t.stop()
    assert t.proc.returncode == 0, lines
    assert counts(lines, "hits") == {procs[0].pid: 23, procs[1].pid: 7}, lines


@pytest.mark.needs("gcc", "unshare")
def test_misspelt_probe_in_a_library(hidden, tmp_path):
    """The nearest probe is named in the library that holds it."""
    script = write(tmp_path / "hit.bt", HIT_BT.replace("nslib:hit", "nslib:hti"))
    rc, out, err = dry_run(hidden.pid, script)
    assert (rc, out, err) == (1, "", [
        f"probekit-bpftrace: no USDT probe nslib:hti in /proc/{hidden.pid}/root"
        f"{hidden.lib}; nearest: nslib:hit"])


@pytest.mark.needs("gcc", "unshare")
def test_json_output(bpf, hidden, tmp_path):
    """-f json: every line bpftrace prints is one JSON object; the
    readiness line is the data of a "printf" object."""
    script = write(tmp_path / "hit.bt", HIT_BT)
    ready = f"probekit: tracing PID={hidden.pid} (Ctrl-C to end)\n"
    t = Trace(hidden.pid, [script], wrapper_opts=["-f", "json"]).start(
        re.escape(json.dumps({"type": "printf", "data": ready})))
    hidden.run(N_QUERIES)
    lines = t.stop()
    assert t.proc.returncode == 0, lines
    objs = [json.loads(ln) for ln in lines if ln.strip()]
    assert {"type": "printf", "data": ready} in objs, lines
    assert {"type": "map", "data": {"@hits": N_QUERIES}} in objs, lines


def test_bad_format_is_refused(tmp_path):
    rc, out, err = dry_run("-f", "xml", "1", write(tmp_path / "s.bt", HIT_BT))
    # A usage error: exit 2, as every probekit command's.
    assert (rc, out, err) == (2, "", [
        "probekit-bpftrace: output format 'xml' is not one bpftrace 0.17 "
        "prints; give text or json"])
