# SPDX-License-Identifier: BSD-2-Clause
"""wrapper/probekit-bpftrace: substitution, joining, options, errors, paths.

The programs traced here are built by the tests themselves: a small C
program with USDT probes in its executable and in a shared library it links
(so that per-probe __EXE__ -> library resolution is exercised), which fires
its probes N times whenever a number N is written to its stdin, so every
count is exact.  Debian's python3.X is traced too, as a USDT
program that is not ours.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import probekit
import thirdparty

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("strace", "setpriv", "readelf")
from probekit import WRAPPER, LineReader, Trace

SCAN = os.path.join(os.path.dirname(os.path.dirname(WRAPPER)), "libexec",
                    "probekit", "probekit-scan")

N = 23
READY_RE = r"^probekit: tracing PID=(\d+) \(Ctrl-C to end\)$"

LIB_C = r"""
#include <sys/sdt.h>
/* A probe and a uprobe-able function that live only in the library. */
__attribute__((noinline)) long pk_lib_fire(long i)
{
	DTRACE_PROBE1(pklib, fire, i);
	return i + 1;
}
"""

PROG_C = r"""
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
long pk_lib_fire(long i);
__attribute__((noinline)) long pk_exe_work(long i)
{
	DTRACE_PROBE1(pkexe, tick, i);
	return i * 2;
}
/* Each line "N" on stdin fires every probe exactly N times. */
int main(void)
{
	char line[64];
	long sum = 0;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		long n = strtol(line, NULL, 10);
		for (long i = 0; i < n; i++)
			sum += pk_exe_work(i) + pk_lib_fire(i);
		printf("done %ld %ld\n", n, sum);
		fflush(stdout);
	}
	return 0;
}
"""

PY_PROG = r"""
import gc, sys

gc.disable()
print("ready", flush=True)
for line in sys.stdin:
    n = int(line)
    for i in range(n):
        sys.audit("probekit.fn", i)
        gc.collect()
    print("done", n, flush=True)
"""

COUNT_BT = """\
#!/usr/bin/env bpftrace
// Counts the test program's probes.
BEGIN { printf("count begin\\n"); }
usdt:__EXE__:pkexe:tick { @tick = count(); }
usdt:__EXE__:pklib:fire { @fire = count(); }
uprobe:__EXE__:pk_lib_fire /pid == __PID__/ { @lib_fn = count(); }
uprobe:__EXE__:pk_exe_work /pid == __PID__/ { @exe_fn = count(); }
END { printf("count end\\n"); }
"""


@pytest.fixture(scope="module")
def sdt_build(tmp_path_factory):
    """The test program and its library, built once for the module."""
    d = tmp_path_factory.mktemp("sdtprog")
    (d / "lib.c").write_text(LIB_C)
    (d / "prog.c").write_text(PROG_C)
    subprocess.run(["cc", "-O1", "-g", "-shared", "-fPIC", "-o",
                    str(d / "libpk.so"), str(d / "lib.c")], check=True)
    subprocess.run(["cc", "-O1", "-g", "-o", str(d / "prog"), str(d / "prog.c"),
                    "-L", str(d), "-lpk", "-Wl,-rpath,$ORIGIN"], check=True)
    return d


class Prog:
    """A running copy of a program that fires its probes on request."""

    def __init__(self, argv, ready=r"^ready"):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.out = LineReader(self.proc.stdout)
        self.out.wait_for(ready)

    def fire(self, n):
        """Fire n rounds; return on this call's own "done n", a line read
        after the command was sent (a repeated call would otherwise match
        the first one's line and return before its rounds ran)."""
        seen = len(self.out.lines)
        self.proc.stdin.write(f"{n}\n".encode())
        self.proc.stdin.flush()
        done = re.compile(rf"^done {n}\b")
        self.out.wait_until(lambda ls: any(done.match(l) for l in ls[seen:]))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=probekit.TIMEOUT)


def install_prog(build_dir, dest):
    """Copy the program and its library into dest (made if missing)."""
    os.makedirs(dest, exist_ok=True)
    for f in ("prog", "libpk.so"):
        shutil.copy2(os.path.join(build_dir, f), os.path.join(dest, f))
    return os.path.join(dest, "prog")


@pytest.fixture
def prog(sdt_build):
    p = Prog([str(sdt_build / "prog")])
    yield p
    p.stop()


@pytest.fixture
def count_bt(tmp_path):
    path = tmp_path / "count.bt"
    path.write_text(COUNT_BT)
    return str(path)


def wrapper(*args, env=None, user=None):
    """Run the wrapper to completion; returns the CompletedProcess."""
    cmd = [WRAPPER, *map(str, args)]
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=env,
                          timeout=probekit.TIMEOUT)


def assert_one_line_error(r, *needles):
    assert r.returncode != 0, r
    assert r.stdout == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("probekit-bpftrace: "), lines[0]
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def counts(lines):
    """{map name: value} of the scalar maps bpftrace printed at exit."""
    return {m.group(1): int(m.group(2)) for m in
            (re.match(r"^@(\w+): (-?\d+)$", l) for l in lines) if m}


# --- dry run: the final program -----------------------------------------------

def test_dry_run_substitutes_per_probe_and_merges(prog, sdt_build, count_bt, tmp_path):
    other = tmp_path / "other.bt"
    other.write_text('struct pk { int x; };\n'
                     'BEGIN { printf("other begin %d\\n", __PID__); }\n'
                     'END { printf("other end\\n"); }\n')
    r = wrapper("--dry-run", prog.pid, count_bt, other)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    # Named as the process sees them: bpftrace -p attaches a plain path
    # twice where it also lists the process's files (0.27).
    root = f"/proc/{prog.pid}/root"
    exe, lib = root + str(sdt_build / "prog"), root + str(sdt_build / "libpk.so")
    assert f'usdt:"{exe}":pkexe:tick' in text
    assert f'usdt:"{lib}":pklib:fire' in text
    assert f'uprobe:"{lib}":pk_lib_fire /pid == {prog.pid}/' in text
    assert f'uprobe:"{exe}":pk_exe_work /pid == {prog.pid}/' in text
    assert "__EXE__" not in text and "__PID__" not in text
    assert f'printf("other begin %d\\n", {prog.pid});' in text
    # One BEGIN and one END, bodies in script order, readiness line last.
    heads = re.findall(r"^(BEGIN|END)$", text, re.M)
    assert heads == ["BEGIN", "END"], text
    begin = text[text.index("BEGIN\n"):text.index("END\n")]
    assert begin.index("count begin") < begin.index("other begin") \
        < begin.index("probekit: tracing PID=%d (Ctrl-C to end)")
    end = text[text.index("END\n"):]
    assert end.index("count end") < end.index("other end")
    # C definitions moved to the top, the shebang line dropped.
    assert text.lstrip().startswith("struct pk { int x; };")
    assert "#!" not in text


def test_dry_run_adds_begin_and_duration(prog, tmp_path):
    s = tmp_path / "plain.bt"
    s.write_text("usdt:__EXE__:pkexe:tick { @n = count(); }\n")
    r = wrapper("--dry-run", "-d", 7, prog.pid, s)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^BEGIN\n\{\n\tprintf\(\"probekit: tracing PID=%d "
                     rf"\(Ctrl-C to end\)\\n\", {prog.pid}\);\n\}}", r.stdout, re.M), r.stdout
    # -d's seconds run from the window's opening, and its exit() closes
    # the window first (see test_window.py).
    assert re.search(r"^interval:ms:10\n\{\n\tif \(@__pk_gate == 1 && \(uint64\)\(\(int64\)nsecs - "
                     r"\(int64\)@__pk_opened\) >= 7000000000\) \{\n\t\t@__pk_gate = 2;\n"
                     r"\t\texit\(\);\n\t\}\n\}", r.stdout, re.M), r.stdout


def test_dry_run_script_without_exe(prog, tmp_path):
    """A script with no __EXE__ probe (kernel tracepoints only) is passed
    through whole, with __PID__ substituted, its body inside the window
    as every traced block's."""
    s = tmp_path / "tp.bt"
    s.write_text("tracepoint:raw_syscalls:sys_enter /pid == __PID__/ { @n = count(); }\n")
    r = wrapper("--dry-run", prog.pid, s)
    assert r.returncode == 0, r.stderr
    assert (f"tracepoint:raw_syscalls:sys_enter /pid == {prog.pid}/ "
            "{ if (@__pk_gate == 1) { @n = count(); }}") in r.stdout, r.stdout
    assert "probekit: tracing PID=%d" in r.stdout


def test_dry_run_strings_and_comments_are_not_blocks(prog, tmp_path):
    """Braces and BEGIN inside strings and comments do not confuse joining,
    and __EXE__ outside an attach point is left alone."""
    s = tmp_path / "tricky.bt"
    s.write_text('/* BEGIN { } */\n'
                 'BEGIN { printf("{ BEGIN } __EXE__ \\" }\\n"); } // END { }\n'
                 'usdt:__EXE__:pkexe:tick { if (arg0 > 1) { @n = count(); } }\n')
    r = wrapper("--dry-run", prog.pid, s)
    assert r.returncode == 0, r.stderr
    # (the one END is the wrapper's, which clears the window's map)
    assert re.findall(r"^(BEGIN|END)$", r.stdout, re.M) == ["BEGIN", "END"]
    assert 'printf("{ BEGIN } __EXE__ \\" }\\n");' in r.stdout
    assert "if (arg0 > 1) { @n = count(); }" in r.stdout


# --- live traces with exact counts --------------------------------------------

def test_counts_exe_and_library_probes(bpf, prog, count_bt):
    t = Trace(prog.pid, [count_bt]).start()
    prog.fire(N)
    lines = t.stop()
    assert t.proc.returncode == 0, lines
    assert counts(lines) == {"tick": N, "fire": N, "lib_fn": N, "exe_fn": N}, lines
    m = [re.match(READY_RE, l) for l in lines]
    ready = [x for x in m if x]
    assert len(ready) == 1 and int(ready[0].group(1)) == prog.pid
    # SIGINT ran END; bpftrace's harmless lines (0.17's RLIMIT_MEMLOCK,
    # a newer one's available_filter_functions warning) are filtered.
    assert "count end" in lines
    assert not any("RLIMIT_MEMLOCK" in l or "available_filter_functions" in l
                   for l in lines), lines
    # Nothing of the wrapper is left behind (the stderr filter exits too).
    assert_no_process_in_group(t.proc.pid)


def assert_no_process_in_group(pgid):
    """The wrapper's process group empties: bpftrace has exited, and the
    stderr filter follows as soon as it reads EOF (bounded wait, no sleep
    that a result depends on)."""
    deadline = time.monotonic() + probekit.TIMEOUT
    while True:
        left = subprocess.run(["ps", "-o", "pid,stat,args", "--no-headers", "-g", str(pgid)],
                              capture_output=True, text=True).stdout.strip()
        alive = [l for l in left.splitlines() if l.split()[1][0] != "Z"]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not alive, f"left running in group {pgid}: {left}"


def test_sigterm_ends_trace_with_end_output(bpf, prog, count_bt):
    t = Trace(prog.pid, [count_bt]).start()
    prog.fire(N)
    os.killpg(t.proc.pid, signal.SIGTERM)
    rc = t.proc.wait(timeout=probekit.TIMEOUT)
    lines = t.out.drain(10)
    assert rc == 0, lines
    assert "count end" in lines
    assert counts(lines)["tick"] == N, lines


def test_bpftrace_errors_and_exit_code_pass_through(bpf, prog, tmp_path):
    """A mistake only bpftrace sees: its own message and exit code, without
    the RLIMIT_MEMLOCK noise."""
    s = tmp_path / "sem.bt"
    s.write_text("usdt:__EXE__:pkexe:tick { @x = count(1); }\n")
    r = wrapper(prog.pid, s)
    assert r.returncode == 1, r
    assert "ERROR: count() requires no arguments" in r.stderr, r.stderr
    assert "RLIMIT_MEMLOCK" not in r.stderr
    assert "available_filter_functions" not in r.stderr


def test_positional_args_reach_the_program(bpf, prog, tmp_path):
    s = tmp_path / "args.bt"
    s.write_text('BEGIN { printf("args n=%d first=%d second=%s\\n", $#, $1, str($2)); }\n'
                 'usdt:__EXE__:pkexe:tick /arg0 < $1/ { @below = count(); }\n')
    t = Trace(prog.pid, [str(s)], args=[7, "two words"]).start()
    prog.fire(N)
    lines = t.stop()
    assert "args n=2 first=7 second=two words" in lines, lines
    assert counts(lines) == {"below": 7}, lines


def test_duration_ends_trace_with_end_output(bpf, prog, count_bt):
    # -d's timer runs from its attach, before BEGIN prints the readiness
    # line, so that line's trip to the test and the N events must fit in
    # it: about five wakeups, each held up to 172 ms by the scheduler under
    # load (test_bdev_delay.py), against 3 s; 1 s left too little.
    t = Trace(prog.pid, [count_bt], wrapper_opts=["-d", "3"]).start()
    prog.fire(N)
    rc = t.proc.wait(timeout=probekit.TIMEOUT)
    lines = t.out.drain(10)
    assert rc == 0, lines
    assert "count end" in lines
    assert counts(lines)["tick"] == N, lines


@pytest.mark.parametrize("how", ["-o", "BPF_OUTFILE"])
def test_output_file(bpf, prog, count_bt, tmp_path, how):
    out = tmp_path / "trace.out"
    opts, env = (["-o", str(out)], None) if how == "-o" else ([], {"BPF_OUTFILE": str(out)})
    t = Trace(prog.pid, [count_bt], wrapper_opts=opts, env=env)
    t.proc = subprocess.Popen(t.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env=t.env, start_new_session=True)
    # The readiness line goes to the file: follow it until the trace ends.
    tail = subprocess.Popen(["tail", "-F", "-n", "+1", "--pid", str(t.proc.pid), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        LineReader(tail.stdout).wait_for(READY_RE)
        prog.fire(N)
    finally:
        os.killpg(t.proc.pid, signal.SIGINT)
        rc = t.proc.wait(timeout=probekit.TIMEOUT)
        tail.wait(timeout=probekit.TIMEOUT)
    console = t.proc.stdout.read().decode().splitlines()
    assert rc == 0, console
    lines = out.read_text().splitlines()
    assert counts(lines) == {"tick": N, "fire": N, "lib_fn": N, "exe_fn": N}, lines
    assert "count end" in lines
    assert not any("tracing PID" in l for l in console), console


@pytest.mark.parametrize("where", ["missing dir", "directory", "read-only dir"])
def test_error_output_file_unwritable(bpf, prog, count_bt, public_dir, where):
    """Only the wrapper's line, not bash's as well."""
    path = {"missing dir": os.path.join(public_dir, "no", "out.txt"),
            "directory": public_dir,
            "read-only dir": "/proc/out.txt"}[where]
    assert_one_line_error(wrapper("-o", path, prog.pid, count_bt),
                          f"cannot write the output file '{path}'")


@pytest.mark.needs(thirdparty.PY_SDT)
def test_python_audit_and_gc(bpf, tmp_path):
    py = thirdparty.PY_SDT
    p = Prog([py, "-c", PY_PROG])
    try:
        s = tmp_path / "py.bt"
        # Probes every CPython 3 since 3.8 has (3.12 dropped the function
        # probes): audit events the program raises, and its collections.
        s.write_text('usdt:__EXE__:python:audit /str(arg0) == "probekit.fn"/ '
                     '{ @audits = count(); }\n'
                     'usdt:__EXE__:python:gc__start /arg0 == 2/ { @gc = count(); }\n')
        t = Trace(p.pid, [str(s)]).start()
        p.fire(N)
        lines = t.stop()
        assert t.proc.returncode == 0, lines
        assert counts(lines) == {"audits": N, "gc": N}, lines
    finally:
        p.stop()


def test_begin_output_precedes_readiness(bpf, prog, tmp_path):
    """A caller that stops the trace as soon as it sees the readiness line
    loses none of what the scripts print in BEGIN: bpftrace 0.17 drops
    every event it reads after a SIGINT, so the readiness line is the last
    thing BEGIN prints.  (With it first, most of these lines were lost.)"""
    n = 97
    s = tmp_path / "chatty.bt"
    s.write_text("BEGIN\n{\n" + "".join(f'\tprintf("begin line {i}\\n");\n' for i in range(n))
                 + "}\nusdt:__EXE__:pkexe:tick { @n = count(); }\n")
    t = Trace(prog.pid, [str(s)]).start()
    lines = t.stop()
    assert t.proc.returncode == 0, lines
    got = [l for l in lines if l.startswith("begin line ")]
    assert got == [f"begin line {i}" for i in range(n)], lines
    assert lines.index(got[-1]) < next(i for i, l in enumerate(lines) if re.match(READY_RE, l))


def test_sigint_to_the_wrapper_alone_ends_trace_with_end_output(bpf, prog, count_bt):
    """A signal to the wrapper's PID (not its group) reaches bpftrace, once:
    the wrapper has exec'd bpftrace, so its PID is bpftrace's and no shell
    is left to pass the signal on (or to send it again); END runs once,
    every map is printed once, the exit code is bpftrace's.  The second
    trace on the same program counts its own N rounds only."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        t = Trace(prog.pid, [count_bt]).start()
        with open(f"/proc/{t.proc.pid}/comm") as f:
            assert f.read().strip() == "bpftrace"
        prog.fire(N)
        os.kill(t.proc.pid, sig)
        rc = t.proc.wait(timeout=probekit.TIMEOUT)
        lines = t.out.drain(10)
        assert rc == 0, lines
        assert lines.count("count end") == 1, lines
        maps = [l.split(":")[0] for l in lines if l.startswith("@")]
        assert sorted(maps) == ["@exe_fn", "@fire", "@lib_fn", "@tick"], lines
        assert counts(lines) == {"tick": N, "fire": N, "lib_fn": N, "exe_fn": N}, lines


def bpftrace_children(token):
    """PIDs of processes whose command line holds token (bpftrace's -e
    program holds the script's text)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    found.append(int(p))
        except OSError:
            pass
    return found


def test_killed_wrapper_leaves_no_bpftrace(bpf, prog, tmp_path):
    """bpftrace runs in a session of its own; a SIGKILLed wrapper cannot
    pass a signal on, so bpftrace's parent-death signal ends it."""
    token = f"pk_token_{os.getpid()}_{time.monotonic_ns()}"
    s = tmp_path / "orphan.bt"
    s.write_text(f"// {token}\nusdt:__EXE__:pkexe:tick {{ @n = count(); }}\n")
    t = Trace(prog.pid, [str(s)]).start()
    (bt_pid,) = bpftrace_children(token)
    os.killpg(t.proc.pid, signal.SIGKILL)
    t.proc.wait(timeout=probekit.TIMEOUT)
    deadline = time.monotonic() + probekit.TIMEOUT
    while os.path.exists(f"/proc/{bt_pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not bpftrace_children(token)


# --- the process exits while the trace starts --------------------------------------

SEM_C = r"""
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdio.h>
#include <unistd.h>
unsigned short pkgone_armed_semaphore __attribute__((section(".probes"), used));
unsigned short pkgone_other_semaphore __attribute__((section(".probes"), used));
/* Each line on stdin: print both semaphores (each raised by the kernel
 * while a tracer has the probe attached), then fire both probes. */
int main(void)
{
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		printf("sem %u %u\n", pkgone_armed_semaphore, pkgone_other_semaphore);
		fflush(stdout);
		STAP_PROBE(pkgone, armed);
		STAP_PROBE(pkgone, other);
	}
	return 0;
}
"""

GONE_BT = """\
// {token}
usdt:__EXE__:pkgone:other {{ @other = count(); }}
uprobe:__EXE__:main {{ @main = count(); }}
usdt:__EXE__:pkgone:armed {{ @armed = count(); }}
"""


@pytest.fixture(scope="module")
def sem_prog(tmp_path_factory):
    d = tmp_path_factory.mktemp("semprog")
    (d / "gone.c").write_text(SEM_C)
    subprocess.run(["cc", "-O1", "-g", "-o", str(d / "gone"), str(d / "gone.c")], check=True)
    return str(d / "gone")


def semaphores(p):
    """The (armed, other) semaphores of a running sem_prog."""
    n = len(p.out.lines)        # before asking: the answer may come at once
    p.proc.stdin.write(b"\n")
    p.proc.stdin.flush()
    p.out.wait_until(lambda lines: any(l.startswith("sem ") for l in lines[n:]))
    line = [l for l in p.out.lines[n:] if l.startswith("sem ")][0]
    return tuple(int(x) for x in line.split()[1:])


def hook(tmp_path, name, body):
    """An executable shell script: a test's hook in place of a program."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def assert_gone_and_clean(r, pid, token, sem_prog):
    assert_one_line_error(r, f"PID {pid} exited while the trace was starting")
    assert r.stderr == f"probekit-bpftrace: PID {pid} exited while the trace was starting\n"
    assert not bpftrace_children(token)
    # No uprobe event is left in tracefs on the file (BCC makes one when
    # the process is gone as bpftrace attaches its uprobe, and leaves it).
    assert not probekit.uprobe_events(os.path.dirname(sem_prog))
    # No uprobe is left on the file: it would raise the semaphores of the
    # next process that maps it.
    p = Prog([sem_prog])
    try:
        assert semaphores(p) == (0, 0)
    finally:
        p.stop()


def test_process_exits_while_the_wrapper_reads_it(bpf, sem_prog, tmp_path):
    """The process exits after the wrapper found it, while it reads the
    executable's probes (a probekit-scan that kills it first)."""
    token = f"pk_token_{os.getpid()}_{time.monotonic_ns()}"
    s = tmp_path / "gone.bt"
    s.write_text(GONE_BT.format(token=token))
    p = Prog([sem_prog])
    bindir = tmp_path / "bin"
    bindir.mkdir()
    scan = hook(bindir, "probekit-scan",
                f'[ "$1" = join ] && kill -9 {p.pid}\nexec {SCAN} "$@"\n')
    env = dict(os.environ, PROBEKIT_SCAN=str(scan))
    try:
        r = wrapper(p.pid, s, env=env)
    finally:
        p.stop()
    assert_gone_and_clean(r, p.pid, token, sem_prog)


def test_process_exits_before_bpftrace_runs(bpf, sem_prog, tmp_path):
    """The process is gone when bpftrace starts (BPFTRACE is a hook that
    kills it, then runs bpftrace)."""
    token = f"pk_token_{os.getpid()}_{time.monotonic_ns()}"
    s = tmp_path / "gone.bt"
    s.write_text(GONE_BT.format(token=token))
    p = Prog([sem_prog])
    bt = hook(tmp_path, "bpftrace", f'kill -9 {p.pid}\nexec bpftrace "$@"\n')
    try:
        r = wrapper(p.pid, s, env=dict(os.environ, BPFTRACE=str(bt)))
    finally:
        p.stop()
    assert_gone_and_clean(r, p.pid, token, sem_prog)


def test_process_exits_while_bpftrace_attaches(bpf, sem_prog, tmp_path):
    """The process exits after bpftrace attached its first USDT probe and
    before the others.  bpftrace attaches tracepoints first, then usdt
    probes and uprobes last to first; a watcher, a bpftrace of the test's
    own, makes the traced bpftrace stop itself (SIGSTOP) as its first
    perf_event_open() of a uprobe returns, the attach of pkgone:armed,
    whose semaphore proves it.  The watcher is a separate bpftrace because bpftrace 0.27
    filters every probe of its own by -p's PID, tracepoints too, so a
    tracepoint in the traced program never sees bpftrace itself.  The test
    then kills the process and lets bpftrace go on."""
    token = f"pk_token_{os.getpid()}_{time.monotonic_ns()}"
    s = tmp_path / "gone.bt"
    s.write_text(GONE_BT.format(token=token))
    pidfile, go = tmp_path / "bt.pid", tmp_path / "go"
    bt = tmp_path / "bpftrace"
    # The traced bpftrace waits for the watcher before it starts.
    bt.write_text(f'#!/bin/bash\necho $$ > {pidfile}\n'
                  f'while [ ! -e {go} ]; do sleep 0.01; done\n'
                  'exec bpftrace "$@"\n')
    bt.chmod(0o755)
    p = Prog([sem_prog])
    w = subprocess.Popen([WRAPPER, str(p.pid), str(s)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, BPFTRACE=str(bt)))
    # The kernel's number for a uprobe perf event (a USDT probe is one).
    with open("/sys/bus/event_source/devices/uprobe/type") as f:
        uprobe_type = int(f.read())
    watcher = None
    try:
        btpid = probekit.wait_until("the traced bpftrace's PID", lambda: (
            pidfile.exists() and pidfile.read_text().strip()))
        watcher = subprocess.Popen(
            ["bpftrace", "--unsafe", "-e",
             f"tracepoint:syscalls:sys_enter_perf_event_open /pid == {btpid}/\n"
             "{ @pk_type[tid] = *uptr((uint32 *)args->attr_uptr); }\n"
             f"tracepoint:syscalls:sys_exit_perf_event_open /pid == {btpid}/\n"
             f"{{ if (args->ret >= 0 && @pk_type[tid] == {uprobe_type}) "
             "{ signal(\"SIGSTOP\"); } }\n"
             'BEGIN { printf("READY\\n"); }\n'],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        wout = probekit.LineReader(watcher.stdout)
        wout.wait_for("READY")
        go.touch()
        deadline = time.monotonic() + probekit.TIMEOUT
        state = None
        while state != "T" and time.monotonic() < deadline and w.poll() is None:
            time.sleep(0.01)
            try:
                with open(f"/proc/{btpid}/stat") as f:
                    state = f.read().rsplit(") ", 1)[1].split()[0]
            except (OSError, ValueError):
                pass
        assert state == "T", w.communicate(timeout=probekit.TIMEOUT)
        assert semaphores(p) == (1, 0)
        p.proc.kill()
        p.proc.wait(timeout=probekit.TIMEOUT)
        os.kill(int(btpid), signal.SIGCONT)
        out, err = w.communicate(timeout=probekit.TIMEOUT)
    finally:
        if watcher is not None:
            probekit.interrupt(watcher, "watcher")
        p.stop()
        if w.poll() is None:
            w.kill()
            w.wait()
    r = subprocess.CompletedProcess(w.args, w.returncode, "", err)
    assert "probekit: tracing" not in out, out
    assert_gone_and_clean(r, p.pid, token, sem_prog)


def test_uprobe_events_left_for_bpftrace_are_removed(bpf, prog, sdt_build, tmp_path):
    """The uprobe events BCC made in tracefs for bpftrace and left there
    (named NAME_bcc_PID, PID bpftrace's: what a uprobe attach leaves when
    the process has exited, above) are removed once bpftrace has ended;
    one made for another process is not.  The BPFTRACE hook makes both on
    a copy of the program, then runs bpftrace under its own PID, which is
    the wrapper's."""
    exe = tmp_path / "left"
    shutil.copy2(sdt_build / "prog", exe)
    ours, other = "pk_left_bcc", "pk_other_bcc_1"
    events = "/sys/kernel/tracing/uprobe_events"
    bt = hook(tmp_path, "bpftrace",
              f'echo "p:uprobes/{ours}_$$ {exe}:0x0" >> {events} || exit 99\n'
              f'echo "p:uprobes/{other} {exe}:0x0" >> {events} || exit 99\n'
              'exec bpftrace "$@"\n')
    s = tmp_path / "end.bt"
    s.write_text("BEGIN { exit(); }\n")
    try:
        r = wrapper(prog.pid, s, env=dict(os.environ, BPFTRACE=str(bt)))
        assert r.returncode == 0, r
        left = probekit.uprobe_events(tmp_path)
        assert [e.split()[0] for e in left] == [f"p:uprobes/{other}"], left
    finally:
        # os.write: a file object opened to append seeks, which tracefs
        # refuses.
        fd = os.open(events, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, f"-:uprobes/{other}\n".encode())
        finally:
            os.close(fd)


def test_deleted_library(bpf, sdt_build, count_bt, tmp_path):
    """A library deleted since the process loaded it: one line that says so
    (bpftrace 0.17 cannot attach to it), not that the probe is missing."""
    exe = install_prog(sdt_build, str(tmp_path / "dl"))
    p = Prog([exe])
    try:
        os.unlink(os.path.join(os.path.dirname(exe), "libpk.so"))
        assert_one_line_error(wrapper("--dry-run", p.pid, count_bt),
                              "libpk.so that PID", "was deleted or replaced",
                              "restart the process")
        # A misspelt probe is still reported as such.
        s = tmp_path / "typo.bt"
        s.write_text("usdt:__EXE__:pkexe:tick { @a = count(); }\n"
                     "usdt:__EXE__:pkexe:tock { @b = count(); }\n")
        assert_one_line_error(wrapper("--dry-run", p.pid, s), "no USDT probe pkexe:tock in ",
                              "nearest: pkexe:tick")
    finally:
        p.stop()


# --- bpftrace's messages name the script's lines -----------------------------------

def test_errors_name_the_scripts_file_and_line(bpf, prog, count_bt, tmp_path):
    syn = tmp_path / "synline.bt"
    syn.write_text("#!/usr/bin/env bpftrace\n// a comment\n\n"
                   "BEGIN\n{\n\tprintf(\"hi\\n\");\n}\n"
                   "interval:s:1 { @n = count() +; }\n")
    r = wrapper(prog.pid, count_bt, syn)
    assert r.returncode == 1, r
    lines = r.stderr.splitlines()
    # The columns are those of the script's line, which bpftrace shows,
    # marked where the message says (which columns is its parser's
    # choice: "+;" for 0.17, ";" for 0.27).
    m = re.match(rf"{re.escape(str(syn))}:8:(\d+)-(\d+): ERROR: syntax", lines[0])
    assert m, r.stderr
    first, last = int(m.group(1)), int(m.group(2))
    assert 29 <= first < last <= 31, r.stderr
    assert lines[1:3] == ["interval:s:1 { @n = count() +; }",
                          " " * (first - 1) + "~" * (last - first)], r.stderr
    assert "stdin" not in r.stderr, r.stderr

    fn = tmp_path / "fn.bt"
    fn.write_text("BEGIN { printf(\"x\\n\"); }\n\nEND {\n  nosuchfn(1);\n}\n")
    r = wrapper(prog.pid, count_bt, fn)
    assert r.returncode == 1, r
    first = r.stderr.splitlines()[0]
    # The name as bpftrace quotes it: plain (0.17) or in '' (0.27).
    assert re.fullmatch(rf"{re.escape(str(fn))}:4:3-\d+: ERROR: Unknown function: "
                        r"('?)nosuchfn\1", first), r.stderr
    assert "stdin" not in r.stderr, r.stderr

    # A block whose brace opens its own line, in the second script.
    blk = tmp_path / "blk.bt"
    blk.write_text("interval:s:1\n{\n\t@x = 1;\n\tnosuchfn2(2);\n}\n")
    r = wrapper(prog.pid, count_bt, blk)
    assert r.returncode == 1, r
    assert re.fullmatch(rf"{re.escape(str(blk))}:4:2-\d+: ERROR: Unknown function: "
                        r"('?)nosuchfn2\1", r.stderr.splitlines()[0]), r.stderr


# --- paths ---------------------------------------------------------------------

# '?' is itself in a quoted probe path to bpftrace 0.17, 0.23 and 0.27
# alike ('*' and '[...]' are wildcards to 0.27, and refused below).
WEIRD_DIRS = ["with space", "amp&er", "pi|pe", "ha#sh", "dol$lar", "back\\slash",
              "all of & | # $ \\ {x}; 'q'", "__PID__ and __EXE__", "que?ry"]


@pytest.mark.parametrize("name", WEIRD_DIRS)
def test_weird_paths_are_traced(bpf, sdt_build, count_bt, tmp_path, name):
    exe = install_prog(sdt_build, str(tmp_path / name))
    p = Prog([exe])
    try:
        r = wrapper("--dry-run", p.pid, count_bt)
        assert r.returncode == 0, r.stderr
        t = Trace(p.pid, [count_bt]).start()
        p.fire(N)
        lines = t.stop()
        assert t.proc.returncode == 0, lines
        assert counts(lines) == {"tick": N, "fire": N, "lib_fn": N, "exe_fn": N}, lines
    finally:
        p.stop()


# A process in a mount namespace of its own whose files are also the host's
# at the same paths: one made by unshare alone, and one whose root is a
# bind mount of / moved onto its namespace's / (as a container's root is).
# bpftrace 0.27 given -p lists the process's files as /proc/PID/root/PATH
# and resolves a plain PATH too, and attached a probe named by the plain
# PATH on both (the bench's hitcost counted 2,000,006 for 1,000,003); the
# wrapper names every file of the PID through /proc/PID/root.
NS_N = 1009
NS_RUN = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c"]
IN_NAMESPACE = {
    "unshare": 'exec "$@"',
    "moved-root": 'r=$(mktemp -d) && mount --rbind / "$r" && cd "$r" && '
                  'mount --move . / && exec chroot . "$@"',
}
# Chrooted inside its namespace, below that namespace's root (as
# scripts/stack.sh's chroot is): the kernel writes its files from the
# namespace's root, a path that is PID's neither here nor under
# /proc/PID/root.
NESTED = 'r=$(mktemp -d) && mount --rbind / "$r" && exec chroot "$r" "$@"'


def count_in(p, count_bt, pre=()):
    """The counts of count_bt over NS_N firings of p, the wrapper run
    through pre."""
    t = Trace(p.pid, [count_bt])
    t.cmd = [*pre, *t.cmd]
    t.start()
    p.fire(NS_N)
    lines = t.stop()
    assert t.proc.returncode == 0, lines
    return counts(lines)


@pytest.mark.needs("unshare", "chroot", "mount")
@pytest.mark.parametrize("how", sorted(IN_NAMESPACE))
def test_process_in_another_mount_namespace_counts_once(bpf, sdt_build, count_bt, how):
    p = Prog([*NS_RUN, IN_NAMESPACE[how], "sh", str(sdt_build / "prog")])
    try:
        # The premise: another namespace, and the same file at the same path.
        assert os.readlink(f"/proc/{p.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        assert os.path.samefile(f"/proc/{p.pid}/exe", sdt_build / "prog")
        assert os.path.samefile(f"/proc/{p.pid}/root{sdt_build / 'prog'}", sdt_build / "prog")
        assert count_in(p, count_bt) == {"tick": NS_N, "fire": NS_N, "lib_fn": NS_N,
                                         "exe_fn": NS_N}
    finally:
        p.stop()


@pytest.mark.needs("unshare", "chroot", "mount", "nsenter")
def test_process_chrooted_in_its_namespace_is_refused_then_traced_from_its_root(
        bpf, sdt_build, count_bt):
    p = Prog([*NS_RUN, NESTED, "sh", str(sdt_build / "prog")])
    try:
        root = os.readlink(f"/proc/{p.pid}/root")
        assert root != "/" and os.readlink(f"/proc/{p.pid}/exe") == root + str(sdt_build / "prog")
        assert_one_line_error(wrapper("--dry-run", p.pid, count_bt),
                              f"PID {p.pid} runs chrooted inside a mount namespace",
                              f"nsenter --target {p.pid} --mount --root probekit-bpftrace")
        # As the line says: from the process's root, its paths are its own.
        assert count_in(p, count_bt, ["nsenter", "--target", str(p.pid), "--mount",
                                      "--root"]) == {"tick": NS_N, "fire": NS_N,
                                                     "lib_fn": NS_N, "exe_fn": NS_N}
    finally:
        p.stop()


@pytest.mark.parametrize("name,why", [('dq"uote', "double quote"),
                                      ("new\nline", "newline"),
                                      ("co:lon", "':'"),
                                      ("aster*isk", "'*'"),
                                      ("br[a]cket", "'['")])
def test_inexpressible_paths_are_refused(sdt_build, count_bt, tmp_path, name, why):
    exe = install_prog(sdt_build, str(tmp_path / name))
    p = Prog([exe])
    try:
        r = wrapper("--dry-run", p.pid, count_bt)
        assert_one_line_error(r, why, "copy or link the binary")
    finally:
        p.stop()


@pytest.mark.parametrize("probe,line", [
    ("usdt:__EXE__:pkexe:t?ck", "no USDT probe pkexe:t?ck in {exe}; nearest: pkexe:tick"),
    ("usdt:__EXE__:pkexe:t[i]ck", "no USDT probe pkexe:t[i]ck in {exe}; nearest: pkexe:tick"),
    ("usdt:__EXE__:pk[e]xe:tick", "no USDT probe pk[e]xe:tick in {exe}; nearest: pkexe:tick"),
    ("uprobe:__EXE__:pk_exe_wor?", "PID {pid} ({exe}) has no uprobe:__EXE__:pk_exe_wor?, "
     "in its executable or its libraries (bpftrace would silently attach nothing); "
     "check the name with: bpftrace -p {pid} -l 'usdt:*' or readelf -n"),
    ("uretprobe:__EXE__:pk_exe_wor[k]", "PID {pid} ({exe}) has no "
     "uretprobe:__EXE__:pk_exe_wor[k], in its executable or its libraries (bpftrace "
     "would silently attach nothing); check the name with: bpftrace -p {pid} -l "
     "'usdt:*' or readelf -n")])
def test_only_star_is_a_wildcard_in_names(prog, sdt_build, tmp_path, probe, line):
    """'?' and '[...]' in a usdt or uprobe name match only themselves in
    bpftrace 0.17, 0.23 and 0.27 (pkexe:t?ck and pkexe:t[i]ck attach
    nothing; 0.17 even refuses an unquoted '?'), but the wrapper took '?'
    for any character, found pkexe:tick for pkexe:t?ck and handed bpftrace
    a program that attached nothing.  Now such a name is missing, in one
    line with its nearest, on every stack."""
    s = tmp_path / "wild.bt"
    s.write_text(f"BEGIN {{ }}\n\n{probe} {{ @n = count(); }}\n")
    r = wrapper("--dry-run", prog.pid, s)
    exe = os.path.realpath(sdt_build / "prog")
    assert (r.returncode, r.stdout, r.stderr) == (1, "", "probekit-bpftrace: "
                                                  + line.format(exe=exe, pid=prog.pid)
                                                  + "\n")


def test_deleted_binary(bpf, sdt_build, tmp_path):
    """uprobes are traced through /proc/PID/exe; USDT is refused, saying why."""
    exe = install_prog(sdt_build, str(tmp_path / "gone"))
    p = Prog([exe])
    try:
        os.unlink(exe)
        assert os.readlink(f"/proc/{p.pid}/exe").endswith(" (deleted)")
        s = tmp_path / "fn.bt"
        s.write_text("uprobe:__EXE__:pk_exe_work /pid == __PID__/ { @fn = count(); }\n")
        t = Trace(p.pid, [str(s)]).start()
        p.fire(N)
        lines = t.stop()
        assert counts(lines) == {"fn": N}, lines
        u = tmp_path / "usdt.bt"
        u.write_text("usdt:__EXE__:pkexe:tick { @n = count(); }\n")
        assert_one_line_error(wrapper(p.pid, u), "deleted or replaced",
                              "cannot attach USDT probes")
    finally:
        p.stop()


# --- errors before bpftrace runs --------------------------------------------------

def test_error_no_pid():
    assert_one_line_error(wrapper(), "no PID or PATH given")


@pytest.mark.parametrize("pid", ["abc", "12x", "-5", "1.5", "+3", " 7"])
def test_error_non_numeric_pid(pid, count_bt):
    r = wrapper(pid, count_bt)
    if pid == "-5":
        assert_one_line_error(r, "unknown option")
    else:
        assert_one_line_error(r, "is neither a PID nor an existing file")


def test_error_pid_out_of_range(count_bt):
    assert_one_line_error(wrapper("0", count_bt), "out of range")
    assert_one_line_error(wrapper("99999999999999999999", count_bt), "out of range")


# The checks of the process, its probes and paths run in a dry run too,
# which needs neither bpftrace nor root: most error tests use -n, so they
# run anywhere; one repeats without it.

def test_error_pid_not_running(count_bt):
    p = subprocess.Popen(["true"])
    p.wait()
    assert_one_line_error(wrapper("--dry-run", p.pid, count_bt), f"no process with PID {p.pid}")


def test_error_pid_not_running_without_dry_run(bpf, count_bt):
    p = subprocess.Popen(["true"])
    p.wait()
    assert_one_line_error(wrapper(p.pid, count_bt), f"no process with PID {p.pid}")


def test_error_thread_id(count_bt):
    py = subprocess.Popen(["/usr/bin/python3", "-c",
                           "import threading,sys,time\n"
                           "t=threading.Thread(target=sys.stdin.read,daemon=True)\n"
                           "t.start(); print(t.native_id, flush=True); sys.stdin.read()"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        tid = int(py.stdout.readline())
        assert_one_line_error(wrapper("--dry-run", tid, count_bt), f"is a thread of process {py.pid}")
    finally:
        py.kill()
        py.wait()


def test_busy_process_is_found_every_time(tmp_path):
    """A process that keeps switching between running and sleeping changes
    the length of its /proc/PID/status State: line from one moment to the
    next; the wrapper must still find it, every time (reading status line
    by line lost it in about 3% of tries)."""
    busy = subprocess.Popen(["/usr/bin/python3", "-c",
                             "import time\n"
                             "print('go', flush=True)\n"
                             "while True:\n"
                             "    t = time.monotonic()\n"
                             "    while time.monotonic() - t < 0.0002: pass\n"
                             "    time.sleep(0.0002)\n"],
                            stdout=subprocess.PIPE)
    try:
        assert busy.stdout.readline() == b"go\n"
        s = tmp_path / "tp.bt"
        s.write_text("tracepoint:raw_syscalls:sys_enter /pid == __PID__/ { @n = count(); }\n")
        failed = []
        for _ in range(200):
            r = wrapper("--dry-run", busy.pid, s)
            if r.returncode != 0:
                failed.append(r.stderr)
        assert failed == []
    finally:
        busy.kill()
        busy.wait()


def test_error_no_script(prog):
    assert_one_line_error(wrapper(prog.pid), "no script given")


def test_error_missing_script(prog, tmp_path):
    assert_one_line_error(wrapper(prog.pid, tmp_path / "nope.bt"), "does not exist")
    # A name with a newline still makes one line.
    assert_one_line_error(wrapper(prog.pid, tmp_path / "no\npe.bt"), "no?pe.bt' does not exist")


def test_error_script_is_a_directory(prog, tmp_path):
    assert_one_line_error(wrapper(prog.pid, tmp_path), "not a regular file")


@pytest.fixture
def public_dir():
    """A directory an unprivileged user can enter (pytest's tmp_path is 0700)."""
    d = tempfile.mkdtemp(prefix="probekit-wrap-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d)


def test_error_unreadable_script(prog, public_dir):
    s = os.path.join(public_dir, "secret.bt")
    with open(s, "w") as f:
        f.write("BEGIN { exit(); }\n")
    os.chmod(s, 0)
    assert_one_line_error(wrapper(prog.pid, s, user=65534), "not readable")


def test_error_no_privilege(prog, public_dir):
    s = os.path.join(public_dir, "ok.bt")
    with open(s, "w") as f:
        f.write("usdt:__EXE__:pkexe:tick { @ = count(); }\n")
    os.chmod(s, 0o644)
    assert_one_line_error(wrapper(prog.pid, s, user=65534), "needs root")


def test_error_bpftrace_not_installed(prog, count_bt, tmp_path):
    """PATH holds everything of /usr/bin but bpftrace."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in os.listdir("/usr/bin"):
        if name != "bpftrace":
            os.symlink(os.path.join("/usr/bin", name), bindir / name)
    env = dict(os.environ, PATH=str(bindir))
    env.pop("BPFTRACE", None)
    assert_one_line_error(wrapper(prog.pid, count_bt, env=env), "bpftrace is not installed")


def test_error_process_without_the_probes(count_bt):
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        assert_one_line_error(wrapper("--dry-run", sleeper.pid, count_bt),
                              "has none of the script's USDT probes")
    finally:
        sleeper.kill()
        sleeper.wait()


def test_error_one_probe_misspelt(prog, tmp_path):
    s = tmp_path / "typo.bt"
    s.write_text("usdt:__EXE__:pkexe:tick { @a = count(); }\n"
                 "usdt:__EXE__:pkexe:tock { @b = count(); }\n")
    assert_one_line_error(wrapper("--dry-run", prog.pid, s), "no USDT probe pkexe:tock in ",
                          "nearest: pkexe:tick")
    f = tmp_path / "fn.bt"
    f.write_text("uprobe:__EXE__:pk_no_such_fn { @a = count(); }\n")
    assert_one_line_error(wrapper("--dry-run", prog.pid, f), "has no uprobe:__EXE__:pk_no_such_fn")


@pytest.mark.parametrize("opts,needle", [(["-d", "0"], "out of range"),
                                         (["-d", "1s"], "not a whole number"),
                                         (["-d"], "needs a number"),
                                         (["-o"], "needs a file name"),
                                         (["-x"], "unknown option")])
def test_error_bad_options(prog, count_bt, opts, needle):
    """A usage error exits 2, as every probekit command's does."""
    if opts in (["-d"], ["-o"]):
        r = wrapper(*opts)
    else:
        r = wrapper(*opts, prog.pid, count_bt)
    assert_one_line_error(r, needle)
    assert r.returncode == 2


def test_help():
    r = wrapper("-h")
    assert r.returncode == 0
    assert "USAGE: probekit-bpftrace" in r.stdout
    assert "probekit: tracing PID=<pid> (Ctrl-C to end)" in r.stdout


# --- cost: the programs the wrapper runs ------------------------------------------

def exec_calls(*args, read=None):
    """The programs a dry run of the wrapper executes (strace -f), as argv
    lists, after the wrapper itself.  With a list read, the ELF files that
    each probekit-scan opened (from the first ELF file it was given on: not
    the loader's opens, nor the scripts) are appended to it."""
    if not shutil.which("strace"):
        pytest.fail("strace is missing (apt-get install strace)")
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "exec.log")
        r = subprocess.run(["strace", "-f", "-qq", "-s", "4096",
                            "-e", "trace=execve,openat", "-e", "signal=none",
                            "-o", log, WRAPPER, *map(str, args)],
                           capture_output=True, text=True, timeout=probekit.TIMEOUT)
        assert r.returncode == 0, r.stderr
        calls, has = [], {}
        for ln in open(log):
            pid = ln.split()[0]
            m = re.search(r'execve\("[^"]*", \[(.*?)\]', ln)
            if m:
                argv = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))
                calls.append(argv)
                if len(argv) > 2 and argv[1] == "has":
                    has[pid] = (argv[2], [])
                elif len(argv) > 5 and argv[1] == "join":
                    has[pid] = (argv[5], [])
                continue
            m = re.search(r'openat\(AT_FDCWD, "([^"]*)", [^)]*\) = \d', ln)
            if m and pid in has:
                first, files = has[pid]
                # The reader opens with O_NONBLOCK, the loader without:
                # the first file may be a library probekit-scan itself
                # loads (libc.so.6, which Debian unstable's loader opens
                # after libelf, before libz and libzstd).
                if files or (m.group(1) == first and "O_NONBLOCK" in ln):
                    files.append(m.group(1))
    assert calls and WRAPPER in calls[0], calls
    if read is not None:
        for _, files in has.values():
            read += files
    return calls[1:]


def test_dry_run_reads_each_file_once(prog, sdt_build, count_bt, tmp_path):
    """Each ELF file is read once, by probekit-scan (its notes and symbols
    at once), never readelf or nm: the executable by the run that joins the
    scripts (and reads /proc/PID/exe: no readlink), the libraries by one
    more run only for probes the executable lacks, and only until every
    probe is found; no program runs per probe or per library."""
    s = tmp_path / "exe_only.bt"
    s.write_text("usdt:__EXE__:pkexe:tick { @a = count(); }\n"
                 "usdt:__EXE__:pkexe:t*k { @b = count(); }\n"
                 "uprobe:__EXE__:pk_exe_work { @c = count(); }\n"
                 "uretprobe:__EXE__:pk_exe_work { @d = count(); }\n")
    calls = exec_calls("--dry-run", prog.pid, s)
    names = [os.path.basename(c[0]) for c in calls]
    assert names == ["probekit-scan"], calls
    assert calls[0][1] == "join" and calls[0][5] == f"/proc/{prog.pid}/exe", calls

    read = []
    calls = exec_calls("--dry-run", prog.pid, count_bt, read=read)
    names = [os.path.basename(c[0]) for c in calls]
    assert "nm" not in names and "readelf" not in names, calls
    assert names.count("probekit-scan") == 2, calls
    assert len(read) == len(set(read)), read
    assert read[0] == f"/proc/{prog.pid}/exe", read
    # libpk.so has the missing probes; ld.so, mapped after it, is not read.
    assert read[-1] == str(sdt_build / "libpk.so"), read
    assert not any("ld-linux" in f for f in read), read
