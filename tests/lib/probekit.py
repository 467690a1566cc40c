# SPDX-License-Identifier: BSD-2-Clause
"""Helpers for probekit's tests: run blktgt, talk JSON-RPC to it, attach
bpftrace through the wrapper and wait for honest readiness signals.

Nothing here sleeps for a fixed time: each wait is for a line the other
process prints once it is ready (blktgt's "running" line, the wrapper's
BEGIN line), with a generous timeout that only bounds a failure.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
WRAPPER = os.path.join(BUILD, "bin", "probekit-bpftrace")
RPC_PY = os.path.join(BUILD, "bin", "blktgt-rpc")
PYTHON = "/usr/bin/python3"
# A bound on every wait, only ever reached by a failure; an emulated
# machine (tests/machines/arm64_smoke.py) raises it with PROBEKIT_TEST_TIMEOUT.
TIMEOUT = int(os.environ.get("PROBEKIT_TEST_TIMEOUT", "60"))


# Programs and Python modules the tests run, and the Debian package that
# has each (make deps installs them all).  A test names what it needs with
# @pytest.mark.needs(...) (conftest.py); "py:NAME" is a module for
# /usr/bin/python3.
PACKAGES = {
    "bpftrace": "bpftrace", "tplist-bpfcc": "bpfcc-tools", "bpftool": "bpftool",
    "dtrace": "systemtap-sdt-dev", "clang": "clang", "readelf": "binutils",
    "aarch64-linux-gnu-gcc": "gcc-aarch64-linux-gnu",
    "objdump": "binutils", "strace": "strace", "setpriv": "util-linux",
    "unshare": "util-linux", "prlimit": "util-linux",
    "pivot_root": "util-linux-extra", "qemu-io": "qemu-utils",
    "qemu-img": "qemu-utils", "nbdcopy": "libnbd-bin", "nbdinfo": "libnbd-bin",
    "fio": "fio", "nbdkit": "nbdkit", "gdb": "gdb", "valgrind": "valgrind",
    "lttng": "lttng-tools", "lttng-sessiond": "lttng-tools",
    "perf": "linux-perf",
    "aarch64-linux-gnu-gcc": "gcc-aarch64-linux-gnu",
    "qemu-system-aarch64": "qemu-system-arm", "gdb-multiarch": "gdb-multiarch",
    "py:bcc": "python3-bpfcc", "py:elftools": "python3-pyelftools",
    "dpkg-buildpackage": "dpkg-dev", "dh": "debhelper", "lintian": "lintian",
    "man": "man-db", "cscope": "cscope", "pkg-config": "pkgconf",
    "systemd-analyze": "systemd",
    "prometheus": "prometheus", "promtool": "prometheus",
    "g++": "g++", "gcc": "gcc",
}
# thirdparty.py adds the paths of PostgreSQL and python3.X it finds.


# What a make above the suite (make check, make stack-check STACK=sid)
# hands every make below it: its flags and level, and its command-line
# variables (CHECK_WERROR=0 on a warn-only stack), which it both lists in
# MAKEFLAGS after "--" and exports as variables of their own.  A test's
# own make runs without them.
MAKE_INHERITED = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")


def make_command_line_vars(makeflags):
    """The names of the variables a make's command line set, from its
    MAKEFLAGS ('s -- FOO=a\\ b CHECK_WERROR=0': FOO, CHECK_WERROR)."""
    _, sep, defs = makeflags.partition(" -- ")
    if not sep and makeflags.startswith("-- "):
        defs = makeflags[3:]
    return re.findall(r"(?:^|(?<=[^\\] ))([A-Za-z_][\w.-]*)\s*[:+?]?=", defs)


def own_make_env(**extra):
    """This environment less what a make above the suite passes down."""
    drop = set(MAKE_INHERITED) | set(
        make_command_line_vars(os.environ.get("MAKEFLAGS", "")))
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra)
    return env


def make_vars(names, *args, env=None):
    """{name: value} of the Makefile's variables names, as make with args
    alone gives them (env, by default own_make_env(): not what a make
    above the suite hands down)."""
    p = subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", "-", "print", *args],
        input="include Makefile\nprint:\n" + "".join(
            "\t@echo '$(%s)'\n" % n for n in names),
        cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT,
        env=own_make_env() if env is None else env)
    assert p.returncode == 0, p.stderr
    return dict(zip(names, p.stdout.splitlines()))


def missing(names):
    """A one-line reason naming the packages of whatever in names is not
    installed, or None."""
    gone = []
    for n in names:
        if n.startswith("py:"):
            ok = subprocess.run([PYTHON, "-c", f"import {n[3:]}"],
                                capture_output=True).returncode == 0
        else:
            ok = shutil.which(n) is not None
        if not ok:
            gone.append(f"{n[3:] if n.startswith('py:') else n} "
                        f"(Debian package {PACKAGES.get(n, '?')})")
    if not gone:
        return None
    return "needs " + ", ".join(gone) + "; run 'make deps'"


def bpf_unavailable():
    """Why BPF tracing cannot work here, or None when it can."""
    if os.geteuid() != 0:
        return "not root (bpftrace 0.17 runs only as root)"
    if not shutil.which("bpftrace"):
        return "bpftrace is not installed (run 'make deps')"
    if not os.path.exists("/sys/kernel/tracing/uprobe_events"):
        return "tracefs is not mounted at /sys/kernel/tracing (run 'make deps')"
    return None


def uprobe_events(under):
    """tracefs's uprobe events on files under the directory `under`, as
    uprobe_events lists them ("p:GROUP/NAME PATH:0xOFFSET").  A tracer
    that attaches through perf_event_open() makes none; one is what an
    attach through tracefs left behind (BCC's fallback, see
    wrapper/bpftrace.sh), which lasts until reboot.  Empty when the file
    cannot be read (not root)."""
    prefix = os.path.join(str(under), "")
    try:
        with open("/sys/kernel/tracing/uprobe_events") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return [l for l in lines if l.partition(" ")[2].startswith(prefix)]


class LineReader:
    """Read a process's output line by line with a deadline.

    A thread reads the stream all the time, not only while a test waits:
    a pipe nobody drains fills up at 64 KiB and then blocks the writer, and
    a blktgt reactor blocked in a log write(2) looks exactly like a hang
    in the target.
    """

    def __init__(self, stream):
        self.stream = stream
        self.lines = []
        self.eof = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        buf = b""
        fd = self.stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if chunk:
                buf += chunk
                *done, buf = buf.split(b"\n")
                new = [d.decode(errors="replace") for d in done]
            else:
                new = [buf.decode(errors="replace")] if buf else []
            with self._cond:
                self.lines += new
                if not chunk:
                    self.eof = True
                self._cond.notify_all()
            if not chunk:
                return

    def wait_more(self, count, timeout):
        """Wait until more than count lines were read, or end of file, or
        the timeout; true when there is more."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.lines) > count or self.eof,
                                max(timeout, 0))
            return len(self.lines) > count

    def wait_for(self, pattern, timeout=TIMEOUT):
        """Return the first match of pattern in any line read so far or
        arriving before the timeout (earlier lines are searched again)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        i = 0
        while True:
            while i < len(self.lines):
                m = rx.search(self.lines[i])
                if m:
                    return m
                i += 1
            left = deadline - time.monotonic()
            if left <= 0 or (self.eof and i >= len(self.lines)):
                raise AssertionError(
                    f"no line matching {pattern!r} within {timeout}s; got:\n"
                    + "\n".join(self.lines[-40:]))
            self.wait_more(i, left)

    def wait_until(self, pred, timeout=TIMEOUT):
        """Wait until pred(lines) holds; AssertionError with the output when
        the stream ends or the timeout passes first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    why = ("the output ended" if self.eof
                           else f"{timeout} s passed with the stream still open")
                    raise AssertionError(f"{why} before the expected lines; got:\n"
                                         + "\n".join(self.lines[-40:]))
                self._cond.wait(left)

    def drain(self, timeout=TIMEOUT):
        """All lines, once the stream ended (or the timeout passed)."""
        self._thread.join(timeout)
        return self.lines


class RpcError(Exception):
    def __init__(self, error):
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.error = error


def wait_until(what, fn, timeout=TIMEOUT):
    """Poll fn() every 10 ms until it returns a true value, and return
    that value; past timeout seconds fail, naming what was awaited.  The
    one polling helper of the tests: a condition, never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def rpc_batch(sock_path, calls, timeout=TIMEOUT):
    """JSON-RPC 2.0 calls [(method, params or None)], all sent at once on one
    connection (the server takes pipelined requests); returns every reply,
    by id: the call's index plus one."""
    reqs = []
    for i, (method, params) in enumerate(calls):
        req = {"jsonrpc": "2.0", "id": i + 1, "method": method}
        if params is not None:
            req["params"] = params
        reqs.append(json.dumps(req).encode())
    dec, buf, out = json.JSONDecoder(), "", {}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(b"".join(reqs))
        while len(out) < len(calls):
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError(f"{calls[len(out)][0]}: connection closed after "
                                      f"{len(out)} of {len(calls)} replies; got {buf!r}")
            buf += chunk.decode()
            while True:
                buf = buf.lstrip()
                try:
                    resp, end = dec.raw_decode(buf)
                except ValueError:
                    break
                out[resp["id"]] = resp
                buf = buf[end:]
    return out


def rpc_call(sock_path, method, params=None, timeout=TIMEOUT):
    """One JSON-RPC 2.0 call over the unix socket; returns the result or
    raises RpcError."""
    resp, = rpc_batch(sock_path, [(method, params)], timeout).values()
    if "error" in resp:
        raise RpcError(resp["error"])
    return resp["result"]


class Target:
    """A blktgt process for one test."""

    def __init__(self, binary, tmp_path, threads=2, extra=()):
        self.binary = binary
        self.tmp = tmp_path
        self.threads = threads
        self.extra = list(extra)
        self.rpc_sock = str(tmp_path / "rpc.sock")
        self.nbd_sock = str(tmp_path / "nbd.sock")
        self.proc = None
        self.out = None
        self.port = None
        self.pid = None

    def start(self, args=()):
        cmd = [self.binary, "-R", str(self.threads), "-s", self.rpc_sock,
               "-l", "127.0.0.1:0", "-U", self.nbd_sock] + self.extra + list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.out = LineReader(self.proc.stdout)
        m = self.out.wait_for(r"blktgt: running pid=(\d+).* nbd=[^ ]*:(\d+)")
        assert int(m.group(1)) == self.pid
        self.port = int(m.group(2))
        return self

    def rpc(self, method, **params):
        return rpc_call(self.rpc_sock, method, params or None)

    def nbd_uri(self, export):
        return f"nbd://127.0.0.1:{self.port}/{export}"

    def remove_trace_file(self):
        """A killed target leaves its trace ring file in /dev/shm."""
        try:
            os.unlink(f"/dev/shm/blktgt_trace.pid{self.pid}")
        except FileNotFoundError:
            pass

    def stop(self, sig=signal.SIGTERM, expect_rc=0):
        if self.proc is None or self.proc.poll() is not None and self.proc.returncode is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("blktgt did not exit within "
                                 f"{TIMEOUT}s of signal {sig}")
        lines = self.out.drain(5)
        if rc < 0:
            # Killed: the ring file stays by design (post-mortem); the
            # test has had its chance to read it before calling stop().
            self.remove_trace_file()
        if expect_rc is not None:
            assert rc == expect_rc, (f"blktgt exited {rc}, expected {expect_rc}:\n"
                                     + "\n".join(lines[-30:]))
        return rc


@contextlib.contextmanager
def exported_copy(binary, tmp_path):
    """A blktgt run from a copy of binary of the test's own (so that a
    trace of its PATH counts no other blktgt), with a 64 MiB RAM bdev m0
    exported as e0; yields (the Target, the copy's path), stopped after."""
    exe = tmp_path / "blktgt"
    shutil.copy2(binary, exe)
    t = Target(str(exe), tmp_path)
    t.start()
    try:
        t.rpc("bdev_malloc_create", name="m0", size_mb=64, block_size=4096)
        t.rpc("export_create", name="e0", bdev="m0")
        yield t, str(exe)
    finally:
        t.stop()


def interrupt(proc, what, timeout=TIMEOUT, resend=20):
    """Ctrl-C a tracer's process group and wait for it to exit.

    One SIGINT, not one a second: bpftrace 0.17 drops every event it reads
    after a SIGINT, and a second one while END runs cuts END's output and
    the maps short (seen under load, where END takes over a second).  A
    SIGINT that lands while bpftrace is printing is noticed only when the
    next event arrives; the wrapper's signal tracepoint and
    bpftrace_program()'s heartbeat are such events, so the first one always
    works, and the repeat after `resend` seconds is only a fallback."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=max(0.1, min(resend, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise AssertionError(f"{what} did not stop within {timeout}s of SIGINT")
    return proc.returncode


class Trace:
    """bpftrace attached to a PID through wrapper/bpftrace.sh.  start()
    returns once the script's BEGIN has run, i.e. every probe is attached."""

    READY = "probekit: tracing"

    def __init__(self, pid, scripts, args=(), env=None, wrapper_opts=()):
        self.cmd = [WRAPPER, *wrapper_opts, str(pid), *scripts]
        if args:
            self.cmd += ["--", *map(str, args)]
        self.env = dict(os.environ, **(env or {}))
        self.proc = None

    def start(self, ready=None):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        self.out = LineReader(self.proc.stdout)
        self.out.wait_for(ready or re.escape(self.READY))
        return self

    def stop(self):
        """SIGINT (Ctrl-C) the trace; return all its output lines."""
        interrupt(self.proc, "trace")
        return self.out.drain(10)


def bpftrace_program(pid, program, ready="READY"):
    """Run a bpftrace program (-p PID) directly; returns a started process
    whose BEGIN has printed `ready`."""
    # The heartbeat prints nothing; it is an event, after which bpftrace
    # 0.17 notices a SIGINT that arrived while it was busy (interrupt()).
    program += '\ninterval:ms:200 { printf(""); }\n'
    # With -p, bpftrace 0.27 attaches usdt:PATH twice (once by the path,
    # once through the process) and counts every hit twice; through
    # /proc/PID/root, as the wrapper names it, every version attaches once.
    program = re.sub(r"\busdt:(/(?!proc/)[^:\s\"]+):",
                     lambda m: f"usdt:/proc/{pid}/root{os.path.realpath(m.group(1))}:",
                     program)
    proc = subprocess.Popen(["bpftrace", "-p", str(pid), "-e", program],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    out = LineReader(proc.stdout)
    out.wait_for(re.escape(ready))
    return proc, out


def stop_bpftrace(proc, out):
    interrupt(proc, "bpftrace")
    return out.drain(10)


class FuncsDriver:
    """tests/lib/funcs_driver.c: threads that die or wait inside a
    bdev_execute() of blktgt's signature, one command line at a time."""

    def __init__(self, tmp_path):
        exe = str(tmp_path / "funcs_driver")
        subprocess.run(["cc", "-O1", "-g", "-Wall", "-Werror", "-pthread", "-o", exe,
                        os.path.join(ROOT, "tests", "lib", "funcs_driver.c")],
                       check=True, timeout=TIMEOUT)
        self.proc = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=False)
        self.out = LineReader(self.proc.stdout)
        self.pid = int(self.out.wait_for(r"^funcs_driver: ready pid=(\d+)$").group(1))

    def do(self, cmd, reply):
        """Send cmd and wait for its reply: a line after those read before
        it was sent, so that a command repeated waits for its own."""
        seen = len(self.out.lines)
        self.proc.stdin.write(cmd.encode() + b"\n")
        self.proc.stdin.flush()
        self.out.wait_until(lambda ls: reply in ls[seen:])

    def wait_threads(self, n):
        """Wait until the process has n threads: a thread leaves
        /proc/PID/task only after the exit tracepoint has run for it, while
        pthread_join() may return before that."""
        task = f"/proc/{self.pid}/task"
        deadline = time.monotonic() + TIMEOUT
        while len(os.listdir(task)) != n:
            assert time.monotonic() < deadline, os.listdir(task)
            time.sleep(0.01)

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=TIMEOUT) == 0
