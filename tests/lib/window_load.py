# SPDX-License-Identifier: BSD-2-Clause
"""A full-rate load on blktgt (tests/wrapper/test_window.py's), and what
each script of one window counts of it."""

import os
import re
import threading

import pytest

import probekit


QD = 8

                        # workload at a fraction of its speed
BT_DIR = os.path.join(probekit.ROOT, "bt")


@pytest.fixture
def full(target):
    """The running blktgt with a 64 MiB RAM bdev m0 exported as e0."""
    target.rpc("bdev_malloc_create", name="m0", size_mb=64, block_size=4096)
    target.rpc("export_create", name="e0", bdev="m0")
    return target


class Load:
    """blktgt's workload through e0, unthrottled, for as long as the target
    runs (the target's stop ends it: the call then says so)."""

    def __init__(self, t):
        self.t = t
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            self.t.rpc("workload_run", export="e0", pattern="randrw", io_size=4096,
                       queue_depth=QD, seconds=3600)
        except probekit.RpcError as e:
            self.error = e

    def start(self):
        """Returns once the workload has completed I/Os."""
        before = self.t.rpc("target_stats")["io_completed"]
        self.thread.start()
        probekit.wait_until("the workload's first I/Os", lambda:
                            self.t.rpc("target_stats")["io_completed"] > before + 10000)
        return self


def hits(lines):
    """--hits' lines, {probe: hits}."""
    return {m.group(1): int(m.group(2)) for m in
            (re.match(r"^probekit: hits (\S+) (\d+)$", l) for l in lines) if m}
