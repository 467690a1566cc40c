# SPDX-License-Identifier: BSD-2-Clause
"""The delay bdev: a bdev over another whose reads and writes complete a
configured time after submission, done with a timer on the reactor.

What the delay bdev guarantees is checked, and only that: every I/O
completes no sooner than its delay after its submission, and I/Os complete
in the order they fall due.  How much later than its delay an I/O
completes is the scheduler's to say, not the bdev's: on a loaded machine
the reactor, woken by its timer on time, waited 172 ms for a CPU under
ASan (three busy loops beside it; sched_wakeup to sched_switch), and
every I/O due by then completed that much late.  So no test bounds a latency from above.  In-flight
I/O is observed through target_stats (submitted minus completed), never
a sleep.

Run against the ASan+UBSan build too (BUILD=.../asan, as 'make test' does):
the target must exit 0 at the end of each test, so a use after free or a
leak of a delayed I/O or of a reactor's timer fails it.
"""

import os
import subprocess
import threading

import pytest

import histtools
import probekit
from probekit import Trace, wait_until
from histtools import Tool, by_key, nonzero, parse, total

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("qemu-io")

READ_US, WRITE_US = 130000, 260000


def slow(target, read_us=READ_US, write_us=WRITE_US):
    target.rpc("bdev_malloc_create", name="M0", size_mb=16, block_size=512)
    assert target.rpc("bdev_delay_create", name="D0", base="M0",
                      read_us=read_us, write_us=write_us) == "D0"


def in_flight(target):
    s = target.rpc("target_stats")
    return s["io_submitted"] - s["io_completed"]


class Background:
    """workload_run in a thread: the RPC returns when the workload ends."""

    def __init__(self, target, **params):
        self.result = self.error = None

        def run():
            try:
                self.result = target.rpc("workload_run", **params)
            except Exception as e:  # noqa: BLE001 (reported by join())
                self.error = e
        self.t = threading.Thread(target=run, daemon=True)
        self.t.start()

    def join(self):
        self.t.join(probekit.TIMEOUT)
        assert not self.t.is_alive(), "workload_run did not return"
        return self.result, self.error


def test_list_and_create_errors(target):
    slow(target)
    bdevs = {b["name"]: b for b in target.rpc("bdev_list")}
    assert bdevs["D0"] == {"name": "D0", "type": "delay",
                           "num_blocks": bdevs["M0"]["num_blocks"],
                           "block_size": 512}
    cases = [
        (dict(name="D1", base="nope", read_us=1, write_us=1),
         -19, "no base bdev named 'nope'"),
        (dict(name="D0", base="M0", read_us=1, write_us=1),
         -17, "bdev 'D0' already exists"),
        (dict(name="D1", base="M0", read_us=10000001, write_us=1),
         -32602, "'read_us' must be an integer in 0..10000000"),
        (dict(name="bad name", base="M0", read_us=1, write_us=1),
         -32602, "'name' must be 1..63 of"),
        (dict(name="D1", base="M0", read_us=1),
         -32602, "write_us"),
    ]
    for params, code, msg in cases:
        with pytest.raises(probekit.RpcError) as e:
            target.rpc("bdev_delay_create", **params)
        assert e.value.code == code and msg in e.value.error["message"], \
            (params, e.value.error)
    assert sorted(b["name"] for b in target.rpc("bdev_list")) == ["D0", "M0"]


def test_base_cannot_go_first(target):
    slow(target)
    with pytest.raises(probekit.RpcError) as e:
        target.rpc("bdev_delete", name="M0")
    assert (e.value.code, e.value.error["message"]) == (
        -16, "bdev 'M0' is the base of 1 delay bdev(s); delete them first")
    assert target.rpc("bdev_delete", name="D0") is True
    assert target.rpc("bdev_delete", name="M0") is True


def test_data_goes_through(target):
    """Writes through the delay bdev land on its base, reads come back
    from it (the NBD path: qemu-io writes a pattern, then reads it back
    both through the delay export and straight from the base's)."""
    import subprocess
    slow(target, 1000, 2000)
    target.rpc("export_create", name="slow", bdev="D0")
    target.rpc("export_create", name="fast", bdev="M0")
    def run(exp, *cmds):
        return subprocess.run(
            ["qemu-io", "-f", "raw", *sum((["-c", c] for c in cmds), []),
             target.nbd_uri(exp)], capture_output=True, text=True,
            timeout=probekit.TIMEOUT)
    p = run("slow", "write -P 0xa5 0 64k", "read -P 0xa5 0 64k")
    assert p.returncode == 0 and "Pattern verification failed" not in p.stdout, p
    p = run("fast", "read -P 0xa5 0 64k")
    assert p.returncode == 0 and "Pattern verification failed" not in p.stdout, p


# Every record of every io__batch hit, in the order the reactor completed
# them: blktgt's own submission and completion stamps (CLOCK_MONOTONIC, the
# delay bdev's clock).  Up to 64 records per hit; each hit's count is
# printed too, so a longer batch shows as records missing, not as a pass.
RECORDS_BT = """// probekit: structs io_rec
usdt:__EXE__:blktgt:io__batch
{
	$r = (struct pk_io_rec *)arg2;
	$n = (int32)arg1;
	$i = 0;
	printf("batch %d %llu\\n", $n, arg4);
	unroll(64) {
		if ($i < $n) {
			printf("rec %llu %d %llu %llu\\n", $r->id, $r->type,
			       $r->submit_ns, $r->done_ns);
			$r = $r + 1;
		}
		$i++;
	}
}
"""


def completed_in_order(lines):
    """The records RECORDS_BT printed, as (id, type, submit_ns, done_ns) in
    completion order, and the sum of the batches' counts.  Each hit's
    lines come out together, but hits on different CPUs may not come out
    in order: the order is the completion stamp's, then the flush's, then
    the place in the batch."""
    recs, announced, flush = [], 0, None
    for line in lines:
        f = line.split()
        if f[:1] == ["batch"]:
            announced += int(f[1])
            flush = int(f[2])
        elif f[:1] == ["rec"]:
            recs.append((int(f[4]), flush, len(recs),
                         (int(f[1]), int(f[2]), int(f[3]), int(f[4]))))
    return [r[-1] for r in sorted(recs)], announced


def test_every_io_gets_its_delay(bpf, target, tmp_path):
    """Reads and writes mixed at queue depth 8, so a read often queues
    behind writes due later.  Every I/O completes at least its delay after
    its submission (blktgt's own stamps, to the nanosecond; libbpf
    iolatency sees every read at 128 ms or more and every write at 256 ms
    or more), and the reactor completes them in the order they fall due:
    a read submitted after a write overtakes it (this workload's types are
    fixed by the job's seed, and it has such a read), and none waits for
    a write due later, however late a loaded machine runs the reactor."""
    slow(target)
    script = tmp_path / "records.bt"
    script.write_text(RECORDS_BT)
    trace = Trace(target.pid, [str(script)]).start()
    t = Tool("libbpf", "iolatency", target.pid, "-O", "-m").start()
    r = histtools.workload(target, "D0", "randrw", 4096, 8, 47)
    hists = by_key(parse(t.stop()), "type")
    lines = trace.stop()
    assert trace.proc.returncode == 0, lines

    assert set(hists) == {("read",), ("write",)}, hists
    assert total(hists[("read",)]) == r["reads"], hists
    assert total(hists[("write",)]) == r["writes"], hists
    assert r["reads"] + r["writes"] == 47, r
    assert min(nonzero(hists[("read",)]))[0] >= 128, hists
    assert min(nonzero(hists[("write",)]))[0] >= 256, hists

    done, announced = completed_in_order(lines)
    assert announced == len(done) == 47, lines
    assert len({io for io, _, _, _ in done}) == 47, done
    delay = {0: READ_US * 1000, 1: WRITE_US * 1000}
    assert sorted(typ for _, typ, _, _ in done) == \
        [0] * r["reads"] + [1] * r["writes"], done
    early = [rec for rec in done if rec[3] - rec[2] < delay[rec[1]]]
    assert early == [], early
    due = [sub + delay[typ] for _, typ, sub, _ in done]
    assert due == sorted(due), done
    overtook = [(a, b) for i, a in enumerate(done) for b in done[i + 1:]
                if a[1] == 0 and b[1] == 1 and a[2] > b[2]]
    assert overtook, done


def test_uretprobe_sees_only_submission(bpf, target):
    """bdev_execute returns when the base has done the work, long before
    the delayed completion: funclat on it sees microseconds, never the
    delay.  This is why nbdtime times the bdev with io__submit/io__done.
    The delay is 1.1 s, in [1024, 2047] ms, and every call must be below
    1024 ms: a call that waited for the delay cannot be, and one that did
    not is that long only if the scheduler held its reactor for a second
    inside it (64 ms under a 130 ms delay left less than the 172 ms the
    top of this file records).  At qd 23 the job is one round of the
    delay."""
    slow(target, 1100000, 1100000)
    t = Tool("libbpf", "funclat", target.pid, "-m").start()
    histtools.workload(target, "D0", "read", 4096, 23, 23)
    lat = parse(t.stop())[-1]
    assert total(lat) == 23, lat
    assert all(hi < 1024 for lo, hi in nonzero(lat)), lat


def test_delete_refused_while_in_flight_then_drains(target):
    """With I/O queued on the delay bdev, deleting it or its base is
    refused; a shutdown then waits for the queued I/O: the workload's
    reply, and the target's log of it, count the 2 writes that were in
    flight, none lost (the target exits 0, which under ASan also means no
    leak and no use after free)."""
    slow(target, 1000, 3000000)
    bg = Background(target, bdev="D0", pattern="write", io_size=4096,
                    queue_depth=2, count=4)
    wait_until("2 I/Os in flight", lambda: in_flight(target) == 2)
    for name in ("D0", "M0"):
        with pytest.raises(probekit.RpcError) as e:
            target.rpc("bdev_delete", name=name)
        assert e.value.code == -16, e.value.error
    assert sorted(b["name"] for b in target.rpc("bdev_list")) == ["D0", "M0"]
    assert target.stop() == 0
    result, error = bg.join()
    why = "workload stopped early by shutdown after 2 I/Os"
    assert result is None and isinstance(error, probekit.RpcError), \
        (result, error)
    assert (error.code, error.error.get("message")) == (-125, why), error.error
    assert f"blktgt: info: rpc workload_run: error -125: {why}" in \
        target.out.lines, target.out.lines


def test_delete_after_io_drains(target):
    slow(target, 1000, 1000)
    histtools.workload(target, "D0", "randrw", 4096, 4, 29)
    assert in_flight(target) == 0
    assert target.rpc("bdev_delete", name="D0") is True
    assert target.rpc("bdev_delete", name="M0") is True


def test_rpc_py(target):
    target.rpc("bdev_malloc_create", name="M0", size_mb=8, block_size=512)
    p = subprocess.run([probekit.PYTHON, probekit.RPC_PY, "-s", target.rpc_sock,
                        "bdev_delay_create", "D0", "M0", "100", "200"],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode == 0 and p.stdout.strip() == '"D0"', p
    p = subprocess.run([probekit.PYTHON, probekit.RPC_PY, "-s", target.rpc_sock,
                        "bdev_delay_create", "D1", "M0", "-1", "200"],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode == 2 and "expected an integer >= 0" in p.stderr, p
    assert os.path.exists(target.rpc_sock)
