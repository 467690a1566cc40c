# SPDX-License-Identifier: BSD-2-Clause
"""workload_run: exact I/O counts on every bdev type and pattern, checked
by its reply and, with probes attached, by counting io__submit/io__done;
the written data pattern; data flushed to a file bdev surviving kill -9."""

import os
import signal
import struct

import pytest

import probekit

N = 1009          # a prime number of I/Os, as BCC's guide suggests
PATTERNS = ["read", "write", "randread", "randwrite", "randrw"]


def make_bdev(target, kind, name, tmp_path, size_mb=4, block_size=4096):
    if kind == "null":
        target.rpc("bdev_null_create", name=name, size_mb=size_mb, block_size=block_size)
    elif kind == "malloc":
        target.rpc("bdev_malloc_create", name=name, size_mb=size_mb, block_size=block_size)
    else:
        img = tmp_path / f"{name}.img"
        with open(img, "wb") as f:
            f.truncate(size_mb << 20)
        target.rpc("bdev_file_create", name=name, path=str(img), block_size=block_size)
    return name


@pytest.mark.parametrize("kind", ["null", "malloc", "file"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_exact_counts(target, tmp_path, kind, pattern):
    make_bdev(target, kind, "d0", tmp_path)
    r = target.rpc("workload_run", bdev="d0", pattern=pattern, io_size=4096,
                   queue_depth=7, count=N)
    assert r["ios"] == N
    assert r["errors"] == 0
    assert r["reads"] + r["writes"] == N
    assert r["bytes"] == N * 4096
    if pattern in ("read", "randread"):
        assert r["writes"] == 0
    elif pattern in ("write", "randwrite"):
        assert r["reads"] == 0
    else:
        assert r["reads"] > 0 and r["writes"] > 0
    assert 0 < r["lat_min_ns"] <= r["lat_avg_ns"] <= r["lat_max_ns"] <= r["elapsed_ns"]
    stats = target.rpc("target_stats")
    assert stats["io_submitted"] == stats["io_completed"] == N
    assert stats["workloads"] == 0


def test_count_below_queue_depth(target, tmp_path):
    make_bdev(target, "malloc", "m", tmp_path)
    for count in (1, 2, 3):
        r = target.rpc("workload_run", bdev="m", pattern="randrw", io_size=512 * 8,
                       queue_depth=32, count=count)
        assert r["ios"] == count


def test_workload_validation(target, tmp_path):
    make_bdev(target, "null", "n", tmp_path, size_mb=1, block_size=4096)
    for io_size in (512, 4096 + 512, 2 << 20):  # not a block multiple / bigger than bdev
        with pytest.raises(probekit.RpcError) as ei:
            target.rpc("workload_run", bdev="n", pattern="read", io_size=io_size,
                       queue_depth=1, count=1)
        assert ei.value.code == -32602
    assert target.rpc("target_stats")["io_submitted"] == 0


@pytest.mark.parametrize("kind", ["null", "malloc", "file"])
def test_probes_count_every_io(target, tmp_path, bpf, kind):
    make_bdev(target, kind, "dev_" + kind, tmp_path)
    prog = r'''
usdt::blktgt:io__submit /str(arg1) == "%(name)s"/ {
    @submit = count(); @inflight[arg0] = 1; @len[arg4] = count();
    @type[str(arg5)] = count(); }
usdt::blktgt:io__done /str(arg1) == "%(name)s"/ {
    @done = count(); @status[(int32)arg4] = count();
    if (@inflight[arg0]) { @paired = count(); delete(@inflight[arg0]); } }
usdt::blktgt:workload__start { @wl_start[str(arg1), str(arg2), arg3, arg4] = count(); }
usdt::blktgt:workload__done { @wl_done[arg1, (int32)arg2] = count(); }
BEGIN { printf("READY\n"); }
''' % {"name": "dev_" + kind}
    proc, out = probekit.bpftrace_program(target.pid, prog)
    r = target.rpc("workload_run", bdev="dev_" + kind, pattern="randrw", io_size=8192,
                   queue_depth=16, count=N)
    lines = probekit.stop_bpftrace(proc, out)
    text = "\n".join(lines)
    assert r["ios"] == N
    assert f"@submit: {N}" in lines
    assert f"@done: {N}" in lines
    assert f"@paired: {N}" in lines
    assert not [ln for ln in lines if ln.startswith("@inflight[")], text
    assert f"@len[8192]: {N}" in lines
    assert f"@status[0]: {N}" in lines
    assert f"@type[read]: {r['reads']}" in lines
    assert f"@type[write]: {r['writes']}" in lines
    assert f"@wl_start[dev_{kind}, randrw, 8192, 16]: 1" in lines, text
    assert f"@wl_done[{N}, 0]: 1" in lines, text


def check_pattern(path, io_size, count):
    """The workload's write pattern: each 8-byte word holds its offset."""
    with open(path, "rb") as f:
        data = f.read(io_size * count)
    words = struct.unpack(f"<{len(data) // 8}Q", data)
    bad = [i * 8 for i, w in enumerate(words) if w != i * 8]
    assert not bad, f"{len(bad)} words differ, first at byte {bad[0]}"


def test_sequential_write_pattern_on_file(target, tmp_path):
    make_bdev(target, "file", "f", tmp_path, size_mb=1)
    r = target.rpc("workload_run", bdev="f", pattern="write", io_size=4096,
                   queue_depth=4, count=256)
    assert r["ios"] == 256 and r["errors"] == 0
    check_pattern(tmp_path / "f.img", 4096, 256)


def test_flushed_data_survives_kill9(blktgt_bin, tmp_path):
    # Not the fixture: it expects a clean exit.
    target = probekit.Target(blktgt_bin, tmp_path).start()
    make_bdev(target, "file", "f", tmp_path, size_mb=2)
    r = target.rpc("workload_run", bdev="f", pattern="write", io_size=65536,
                   queue_depth=8, count=32)
    assert r["ios"] == 32 and r["errors"] == 0
    assert target.rpc("bdev_flush", name="f") is True
    target.stop(sig=signal.SIGKILL, expect_rc=-signal.SIGKILL)
    check_pattern(tmp_path / "f.img", 65536, 32)
    assert os.path.getsize(tmp_path / "f.img") == 2 << 20


def test_flush_is_an_io(target, tmp_path, bpf):
    """bdev_flush goes through bdev_submit like any I/O: one flush pair."""
    make_bdev(target, "file", "f", tmp_path, size_mb=1)
    prog = r'''
usdt::blktgt:io__submit { @submit[str(arg1), str(arg5), arg3, arg4] = count(); }
usdt::blktgt:io__done { @done[str(arg1), str(arg5), (int32)arg4] = count(); }
BEGIN { printf("READY\n"); }
'''
    proc, out = probekit.bpftrace_program(target.pid, prog)
    assert target.rpc("bdev_flush", name="f") is True
    lines = probekit.stop_bpftrace(proc, out)
    assert "@submit[f, flush, 0, 0]: 1" in lines, lines
    assert "@done[f, flush, 0]: 1" in lines, lines


def test_seconds_mode(target, tmp_path):
    make_bdev(target, "null", "n", tmp_path)
    r = target.rpc("workload_run", bdev="n", pattern="randread", io_size=4096,
                   queue_depth=4, seconds=1)
    assert r["ios"] > 0 and r["reads"] == r["ios"] and r["errors"] == 0
    stats = target.rpc("target_stats")
    assert stats["io_submitted"] == stats["io_completed"] == r["ios"]


def test_bdev_in_use_by_workload(target, tmp_path):
    """bdev_delete is refused while a workload runs on the bdev, and the
    RPC connection that runs it is held while others are not; a bdev whose
    workload has ended can be deleted.  The running workload cannot end
    before the test has looked (an hour, WORKLOAD_MAX_SECONDS): shutdown
    ends it.  A 2 s one ended under a test thread held up by load, and
    its bdev_delete then succeeded."""
    import threading
    make_bdev(target, "null", "ended", tmp_path)
    r = target.rpc("workload_run", bdev="ended", pattern="read", io_size=4096,
                   queue_depth=7, count=N)
    assert (r["ios"], r["reads"], r["errors"]) == (N, N, 0), r
    assert target.rpc("bdev_delete", name="ended") is True

    make_bdev(target, "null", "n", tmp_path)
    result = {}

    def run():
        try:
            target.rpc("workload_run", bdev="n", pattern="read", io_size=4096,
                       queue_depth=1, seconds=3600)
        except probekit.RpcError as e:
            result["err"] = e
    th = threading.Thread(target=run)
    th.start()
    try:
        # The workload is running once target_stats says so (no sleep).
        while target.rpc("target_stats")["workloads"] == 0:
            assert th.is_alive(), result
        with pytest.raises(probekit.RpcError) as ei:
            target.rpc("bdev_delete", name="n")
        assert ei.value.code == -16
        assert ei.value.error["message"] == \
            "bdev 'n' is in use by 0 export(s) and 1 workload(s)"
        assert th.is_alive(), result
        assert [b["name"] for b in target.rpc("bdev_list")] == ["n"]
    finally:
        target.stop(sig=signal.SIGTERM)
        th.join(probekit.TIMEOUT)
    assert not th.is_alive()
    assert result["err"].code == -125   # ECANCELED: the hour did not pass


def test_shutdown_stops_a_running_workload(target, tmp_path):
    make_bdev(target, "malloc", "m", tmp_path)
    import threading
    result = {}

    def run():
        try:
            target.rpc("workload_run", bdev="m", pattern="randrw", io_size=4096,
                       queue_depth=8, seconds=3600)
        except probekit.RpcError as e:
            result["err"] = e
        except ConnectionError as e:
            result["conn"] = e
    th = threading.Thread(target=run)
    th.start()
    while target.rpc("target_stats")["workloads"] == 0:
        assert th.is_alive()
    target.stop(sig=signal.SIGTERM)
    th.join(probekit.TIMEOUT)
    assert not th.is_alive()
    assert result["err"].code == -125   # ECANCELED
    assert "stopped early by shutdown" in result["err"].error["message"]
