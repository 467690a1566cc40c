# SPDX-License-Identifier: BSD-2-Clause
"""USDT binaries nobody here wrote, driven through known workloads for
the generic tools' tests: a private PostgreSQL 15 cluster, python3.11
scripts, and a C++ program built from tests/throws.cc.

The PostgreSQL cluster runs a private copy of Debian's postgres binary
(the copy is its own inode), so a tool given its path with -b counts
this cluster's backends and no other cluster another test on this
machine may run at the same time.  Its data directory and its unix
socket live in a directory of its own; it listens on no TCP port.
"""

import os
import shutil
import subprocess
import tempfile

import probekit
from probekit import LineReader, TIMEOUT

PG_VERSION = "15"
PG_BIN = f"/usr/lib/postgresql/{PG_VERSION}/bin"
PG_LIB = f"/usr/lib/postgresql/{PG_VERSION}/lib"
PG_SHARE = f"/usr/share/postgresql/{PG_VERSION}"
PG_USER = "postgres"
PYTHON311 = "/usr/bin/python3.11"
# The programs these tests run, for the needs marker.
PG_NEEDS = (f"{PG_BIN}/postgres", f"{PG_BIN}/psql", "setpriv")


def as_user(user, cmd, **kw):
    """Run cmd as user (with its groups), to completion."""
    return subprocess.run(["setpriv", f"--reuid={user}", f"--regid={user}",
                           "--init-groups", "--", *cmd], timeout=TIMEOUT,
                          capture_output=True, **kw)


class Postgres:
    """A private PostgreSQL cluster: a copy of postgres, initdb and pg_ctl
    under DIR/usr/lib/postgresql/15/bin (PostgreSQL finds its share and
    lib directories relative to its binary, so they are links to
    Debian's), the data in DIR/data, the socket in DIR.  Autovacuum and
    the logical replication launcher are off, so that no transaction runs
    that a test did not send."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="probekit-pg-")
        os.chmod(self.dir, 0o755)
        bindir = self.dir + PG_BIN
        os.makedirs(bindir)
        for prog in ("postgres", "initdb", "pg_ctl"):
            shutil.copy2(os.path.join(PG_BIN, prog), bindir)
        os.symlink(PG_LIB, self.dir + PG_LIB)
        os.makedirs(os.path.dirname(self.dir + PG_SHARE))
        os.symlink(PG_SHARE, self.dir + PG_SHARE)
        self.postgres = os.path.join(bindir, "postgres")
        self.data = os.path.join(self.dir, "data")
        self.bindir = bindir
        shutil.chown(self.dir, PG_USER)
        self.started = False

    def _run(self, *cmd):
        r = as_user(PG_USER, cmd)
        assert r.returncode == 0, (cmd, r.stdout.decode(errors="replace"),
                                   r.stderr.decode(errors="replace"))
        return r

    def start(self):
        self._run(f"{self.bindir}/initdb", "-D", self.data, "-A", "trust",
                  "-U", PG_USER, "--no-sync")
        opts = (f"-k {self.dir} -c listen_addresses= -c autovacuum=off "
                "-c max_logical_replication_workers=0 -c fsync=off")
        # -w waits until the server accepts connections.
        self._run(f"{self.bindir}/pg_ctl", "-D", self.data, "-o", opts,
                  "-l", os.path.join(self.dir, "log"), "-w", "-t",
                  str(int(TIMEOUT)), "start")
        self.started = True
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.pid = int(f.readline())
        return self

    def stop(self):
        if self.started:
            self._run(f"{self.bindir}/pg_ctl", "-D", self.data, "-m",
                      "fast", "-w", "stop")
            self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)

    def connect(self):
        return Session(self)


class Session:
    """One psql connection (one backend), kept open; run() sends queries
    and returns once the server has answered all of them."""

    def __init__(self, pg):
        self.proc = subprocess.Popen(
            ["setpriv", f"--reuid={PG_USER}", f"--regid={PG_USER}",
             "--init-groups", "--", f"{PG_BIN}/psql", "-X", "-q", "-A",
             "-t", "-o", "/dev/null", "-h", pg.dir, "-U", PG_USER,
             "postgres"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT)
        self.out = LineReader(self.proc.stdout)
        self.marks = 0
        # psql connects before it reads a line, and exits if it cannot:
        # the echo proves the connection is up, and runs no query.
        self._send("\\echo CONNECTED\n")
        self.out.wait_for("^CONNECTED$")

    def _send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def value(self, expr):
        """The value of the SQL expression expr, through \\gset."""
        self.marks += 1
        self._send(f"select {expr} as v \\gset\n"
                   f"\\echo VALUE{self.marks} :v\n")
        return self.out.wait_for(rf"^VALUE{self.marks} (\S+)$").group(1)

    def run(self, queries):
        """Send queries (each one statement, its own transaction); return
        once psql has printed the mark that follows them, i.e. every one
        was answered."""
        self.marks += 1
        self._send("".join(q + "\n" for q in queries)
                   + f"\\echo DONE{self.marks}\n")
        self.out.wait_for(rf"^DONE{self.marks}$")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=TIMEOUT)


def build_throws(tmp_path):
    """tests/throws.cc built with g++ into tmp_path: the program."""
    exe = os.path.join(tmp_path, "throws")
    src = os.path.join(probekit.ROOT, "tests", "throws.cc")
    r = subprocess.run(["g++", "-O1", "-o", exe, src], capture_output=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return exe
