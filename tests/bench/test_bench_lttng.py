# SPDX-License-Identifier: BSD-2-Clause
"""The bench's LTTng-UST peer (bench/lttngcost.c, bench/lttngsession.py).

make bench times an LTTng-UST event with the trace ring's bdev_io_submit
payload, recorded into a snapshot-mode session that the bench's own
session daemon serves.  These tests run that part briefly and check what
the timing cannot: every event the program fires is in the snapshot, an
event disabled in the session records nothing, and when the session is
closed no lttng-sessiond or lttng-consumerd is left running.  Nothing here
is timed.
"""

import os
import subprocess
import sys

import pytest

import probekit
from bench_runs import make

sys.path.insert(0, os.path.join(probekit.ROOT, "bench"))
import lttngsession  # noqa: E402

pytestmark = pytest.mark.needs("lttng", "lttng-sessiond")

EVENTS = 1009           # prime, and small enough that the snapshot keeps them all


@pytest.fixture(scope="module")
def lttngcost(tmp_path_factory):
    out = tmp_path_factory.mktemp("lttng")
    make(f"O={out}", f"{out}/bench/lttngcost")
    return str(out / "bench" / "lttngcost")


def lttng_daemons():
    """PIDs of every live lttng-sessiond and lttng-consumerd on the machine.
    A zombie has exited and only waits for init (the daemon's parent once
    it backgrounds itself) to reap it, so it does not count."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        if comm.startswith("lttng-") and state not in "ZX":
            found.append(int(pid))
    return found


def test_every_event_recorded_and_nothing_left(lttngcost):
    before = set(lttng_daemons())
    with lttngsession.LttngSession(lttngcost) as s:
        daemon, home = s.pid, s.dir
        assert daemon in lttng_daemons()
        off = s.run(EVENTS, enabled=False)
        assert off["enabled"] is False
        assert s.count_recorded() == (0, 0)
        on = s.run(EVENTS)
        assert on["enabled"] is True
        # object runs 0..EVENTS-1: the sum shows each event once.
        assert s.count_recorded() == (EVENTS, EVENTS * (EVENTS - 1) // 2)
        mine = set(lttng_daemons()) - before
        assert daemon in mine and len(mine) >= 2, \
            f"expected the session daemon and its consumer daemon, saw {mine}"
    assert not set(lttng_daemons()) & mine, "a session or consumer daemon outlived the session"
    assert not os.path.exists(home)


def test_bad_event_count_is_one_line(lttngcost):
    # No daemon here: LTTNG_UST_REGISTER_TIMEOUT=0 spares the 3 s wait.
    env = dict(os.environ, LTTNG_UST_REGISTER_TIMEOUT="0")
    r = subprocess.run([lttngcost, "-n", "12x"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 2
    assert r.stderr == "lttngcost: -n wants 1..1000000000, got '12x'\n"
