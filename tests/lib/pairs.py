# SPDX-License-Identifier: BSD-2-Clause
"""tests/lib/pairs_driver.c, built and run: threads and processes that
fire START and DONE pairs on command."""

import os
import subprocess

import pytest

import probekit
from probekit import LineReader, TIMEOUT


DRIVER_SRC = os.path.join(probekit.ROOT, "tests", "lib", "pairs_driver.c")


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("pairs") / "pairs_driver")
    r = subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, DRIVER_SRC],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


class Driver:
    """pairs_driver, one command at a time."""

    def __init__(self, exe):
        self.proc = subprocess.Popen([exe], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.out = LineReader(self.proc.stdout)
        self.out.wait_for("^ready$")
        self.done = 0

    def do(self, cmd):
        self.proc.stdin.write(cmd.encode() + b"\n")
        self.proc.stdin.flush()
        self.done += 1
        # "ready", then one "ok" per command.
        assert self.out.wait_more(self.done, TIMEOUT), self.out.lines
        assert self.out.lines[self.done] == "ok", self.out.lines

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=TIMEOUT)
