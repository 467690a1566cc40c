# SPDX-License-Identifier: BSD-2-Clause
"""USDT binaries nobody here wrote, driven through known workloads for
the generic tools', the wrapper's and the exporter's tests: a private
PostgreSQL cluster, python3 scripts, and a C++ program built from
tests/lib/throws.cc.  Which PostgreSQL and which python3.X binary is found
by looking (PG_BIN, PY_SDT), so the tests run on any Debian release.

The PostgreSQL cluster runs a private copy of Debian's postgres binary.
Uprobes given a path are set on its inode, so a tool given the copy's
path with -b counts this cluster's backends and no other cluster's that
another test on this machine may run at the same time.  The copy is
bind-mounted over Debian's path in a mount namespace of the server's
own (postgres finds its share/ and lib/ directories from the path it
runs as); the namespace, and the mount with it, ends with the server's
last process.  Its data directory and its unix socket live in a
directory of its own; it listens on no TCP port.
"""

import contextlib
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

import probekit
from probekit import LineReader, TIMEOUT


def _pg_bin():
    """The bin directory of the newest PostgreSQL server installed
    (Debian's /usr/lib/postgresql/N/bin, N from the postgresql
    metapackage), or that path with N unknown when there is none, so that
    a test needing it names what is missing."""
    def version(d):
        n = os.path.basename(os.path.dirname(d))
        return tuple(int(x) for x in n.split(".") if x.isdigit())
    found = [d for d in glob.glob("/usr/lib/postgresql/*/bin")
             if os.path.exists(os.path.join(d, "postgres"))]
    return max(found, key=version) if found else "/usr/lib/postgresql/N/bin"


def _has_sdt_notes(path):
    """Whether path has a .note.stapsdt section: its name is in the
    section name table of any binary that has one, and in no other."""
    with open(path, "rb") as f:
        return b".note.stapsdt" in f.read()


def _python_sdt():
    """The python3.X binary with USDT probes: the one /usr/bin/python3
    runs (Debian builds it --with-dtrace), else any other python3.X
    there is; /usr/bin/python3's own target when none has probes, so
    that a test needing probes in it fails on what it reads."""
    default = os.path.realpath("/usr/bin/python3")
    others = sorted(p for p in glob.glob("/usr/bin/python3.[0-9]*")
                    if re.fullmatch(r"python3\.[0-9]+", os.path.basename(p)))
    for p in [default, *others]:
        if os.path.isfile(p) and _has_sdt_notes(p):
            return p
    return default


def python_with_probes(*names):
    """A python3.X binary of this system whose notes have every probe in
    names (python:NAME), or None: CPython's probe set changes between
    releases (3.12 dropped function__entry, function__return and line)."""
    _probelib = os.path.join(probekit.ROOT, "probes")
    if _probelib not in sys.path:
        sys.path.insert(0, _probelib)
    from probelib import notes
    for p in sorted(glob.glob("/usr/bin/python3.[0-9]*")):
        if not re.fullmatch(r"python3\.[0-9]+", os.path.basename(p)) or \
                not _has_sdt_notes(p):
            continue
        have = {n.name for n in notes.read_probes(p) if n.provider == "python"}
        if set(names) <= have:
            return p
    return None


@contextlib.contextmanager
def spinning_python(python, script, count, tmp_path):
    """Runs script (text) under python with argv [count, flag] and yields
    go() once it prints "spinning": the probes are there to attach to
    while it waits.  go() makes the flag file, and the script does its
    work; when the block ends it must print "done" and exit 0.  Killed
    and reaped if the block fails, so no interpreter outlives a test."""
    path = tmp_path / "script.py"
    path.write_text(script)
    flag = tmp_path / "go"
    py = subprocess.Popen([python, str(path), str(count), str(flag)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = LineReader(py.stdout)
    try:
        out.wait_for("^spinning$")
        yield py, lambda: flag.write_text("")
        out.wait_for("^done$")
        assert py.wait(timeout=TIMEOUT) == 0, out.lines
    finally:
        if py.poll() is None:
            py.kill()
            py.wait()


PG_BIN = _pg_bin()
PG_USER = "postgres"
PY_SDT = _python_sdt()
probekit.PACKAGES.update({f"{PG_BIN}/postgres": "postgresql",
                          f"{PG_BIN}/psql": "postgresql-client",
                          PY_SDT: "python3"})
# The programs a test that runs a cluster needs, for its needs marker.
PG_NEEDS = (f"{PG_BIN}/postgres", f"{PG_BIN}/psql", "setpriv", "unshare")
AS_PG = ["setpriv", f"--reuid={PG_USER}", f"--regid={PG_USER}",
         "--init-groups", "--"]


class Cluster:
    """What a test sees of a running private cluster: dir (its own
    directory), sock (the unix socket's directory), postgres (the copy's
    path, for -b), pid (the postmaster's PID, in the root namespace)."""

    def __init__(self, top):
        self.dir = top
        self.sock = os.path.join(top, "sock")
        self.postgres = os.path.join(top, "postgres")
        self.pid = None
        self.sessions = []

    def connect(self):
        """A new Session; one the test leaves open is closed when the
        cluster stops."""
        s = Session(self)
        self.sessions.append(s)
        return s


@contextlib.contextmanager
def private_postgres():
    """Run a private cluster; yield its Cluster.  Autovacuum and the
    logical replication launcher are off, so that no transaction runs
    that a test did not send.  On the way out, also when the test or the
    start failed, the sessions left open are closed, the server is
    stopped (fast shutdown, which ends its backends) and its directory
    removed.  The directory is not under pytest's tmp_path, which user
    postgres cannot enter."""
    top = tempfile.mkdtemp(prefix="probekit-pg-")
    cluster, srv = Cluster(top), None
    try:
        os.chmod(top, 0o755)
        data = os.path.join(top, "data")
        for d in (data, cluster.sock):
            os.mkdir(d)
            shutil.chown(d, PG_USER, PG_USER)
        shutil.copy2(f"{PG_BIN}/postgres", cluster.postgres)
        r = subprocess.run([*AS_PG, f"{PG_BIN}/initdb", "-D", data, "-A",
                            "trust", "-U", PG_USER, "--no-sync"],
                           capture_output=True, text=True,
                           timeout=2 * TIMEOUT)
        assert r.returncode == 0, r.stdout + r.stderr
        # unshare and sh exec, so the process started is the postmaster.
        server = " ".join([*AS_PG, f"{PG_BIN}/postgres", "-D", data,
                           "-k", cluster.sock, "-c", "listen_addresses=",
                           "-c", "autovacuum=off",
                           "-c", "max_logical_replication_workers=0",
                           "-c", "fsync=off"])
        mount = f"mount --bind {cluster.postgres} {PG_BIN}/postgres"
        srv = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c",
             f"{mount} && exec {server}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        log = LineReader(srv.stdout)
        log.wait_for("database system is ready to accept connections")
        cluster.pid = srv.pid
        yield cluster
    finally:
        try:
            try:
                for s in cluster.sessions:
                    s.close()
            finally:
                if srv:
                    _stop(srv, log)
        finally:
            shutil.rmtree(top, ignore_errors=True)


def _stop(srv, log):
    """SIGINT is a fast shutdown: the postmaster ends its backends, then
    itself.  One that does not end in time is killed; its backends see
    the postmaster gone and exit.  The log pipe is closed once its
    reader has seen its end."""
    srv.send_signal(signal.SIGINT)
    try:
        srv.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        srv.kill()
        srv.wait()
        raise
    finally:
        log.drain(TIMEOUT)
        srv.stdout.close()


@pytest.fixture
def pg():
    """A private cluster (private_postgres) for one test; its directory
    is checked to be gone after it."""
    with private_postgres() as cluster:
        yield cluster
    assert not os.path.exists(cluster.dir)


class Session:
    """One psql connection (one backend), kept open.  Query results go
    to /dev/null; the marks psql echoes tell when the server answered.
    sent counts the statements sent."""

    def __init__(self, cluster):
        self.proc = subprocess.Popen(
            [*AS_PG, f"{PG_BIN}/psql", "-X", "-q", "-A", "-t", "-o",
             "/dev/null", "-h", cluster.sock, "-U", PG_USER, "postgres"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT)
        self.out = LineReader(self.proc.stdout)
        self.marks = 0
        self.sent = 0
        # psql connects before it reads a line, and exits if it cannot:
        # the echo proves the connection is up, and runs no query.
        try:
            self._send("\\echo CONNECTED\n")
            self.out.wait_for("^CONNECTED$")
        except BaseException:
            self.close()
            raise

    def _send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def value(self, expr):
        """The value of the SQL expression expr, through \\gset: one
        statement."""
        self.marks += 1
        self.sent += 1
        self._send(f"select {expr} as v \\gset\n"
                   f"\\echo VALUE{self.marks} :v\n")
        return self.out.wait_for(rf"^VALUE{self.marks} (\S+)$").group(1)

    def backend_pid(self):
        """The PID of this session's backend: one statement."""
        return int(self.value("pg_backend_pid()"))

    def run(self, queries):
        """Send queries (each one statement, its own transaction); return
        once psql has printed the mark that follows them, i.e. every one
        was answered."""
        self.marks += 1
        self.sent += len(queries)
        self._send("".join(q + "\n" for q in queries)
                   + f"\\echo DONE{self.marks}\n")
        self.out.wait_for(rf"^DONE{self.marks}$")

    def close(self):
        """End the session (psql exits at the end of its input); closing
        twice is harmless."""
        if not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self.out.drain(TIMEOUT)
            self.proc.stdout.close()


def build_throws(tmp_path):
    """tests/lib/throws.cc built with g++ into tmp_path: the program."""
    exe = os.path.join(tmp_path, "throws")
    src = os.path.join(probekit.ROOT, "tests", "lib", "throws.cc")
    r = subprocess.run(["g++", "-O1", "-o", exe, src], capture_output=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return exe


K = 29                  # calls and throws
