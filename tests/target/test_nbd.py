# SPDX-License-Identifier: BSD-2-Clause
"""The NBD server of blktgt, driven by real clients (nbdinfo, qemu-io,
qemu-img, nbdcopy, fio's nbd engine) and by a raw-socket client that sends
what no well-behaved client would.

Every test checks exact figures from a known workload: bytes read back,
request and I/O counts from target_stats or from the probes.  Waits are for
a condition (a counter reaching a value), bounded by a deadline that only
limits a failure.

Run against the ASan+UBSan build too (BUILD=.../asan): the target must
then exit 0 at the end of each test, which LeakSanitizer turns into a leak
check of every connection the test opened and dropped.
"""

import json
import os
import re
import select
import signal
import socket
import struct
import subprocess

import pytest

import allowed_skips
import probekit
from probekit import wait_until
from nbd_wire import (  # noqa: F401  (the wire's names, for the tests)
    CMD_DISC, CMD_FLUSH, CMD_READ, CMD_TRIM, CMD_WRITE, FLAG_FUA,
    INFO_BLOCK_SIZE, INFO_DESCRIPTION, INFO_EXPORT, INFO_NAME, NBD_MAGIC,
    OPT_ABORT, OPT_EXPORT_NAME, OPT_GO, OPT_INFO, OPT_LIST,
    OPT_STRUCTURED_REPLY, OPTS_MAGIC, REP_ACK, REP_INFO, REP_MAGIC,
    REP_SERVER, REPLY_MAGIC, REQUEST_MAGIC)
import nbd_wire as wire
from nbd_client import RawNbd, make_export, stats

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("qemu-io", "qemu-img", "nbdcopy", "nbdinfo", "fio", "prlimit")

REP_ERR_UNSUP = (1 << 31) | 1
REP_ERR_INVALID = (1 << 31) | 3
REP_ERR_UNKNOWN = (1 << 31) | 6
EINVAL, ENOSPC = 22, 28
MAX_OPTION_LEN = 8192           # NBD_MAX_OPTION_LEN in target/nbd_proto.h
MAX_REQUEST_SIZE = 32 << 20     # NBD_MAX_REQUEST_SIZE
TIMEOUT = 60
MiB = 1 << 20


# --- helpers ---------------------------------------------------------------


def settled_stats(target):
    """The counters once every client has gone: a client such as qemu-io
    exits right after sending its last request (NBD_CMD_DISC), before the
    server has read it, so counters read at once may miss it."""
    return wait_until("every NBD client to be closed",
                      lambda: (lambda s: s if s["nbd_connections"] == 0 else None)(stats(target)))


def run(cmd, timeout=TIMEOUT, check=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    out = p.stdout.decode(errors="replace")
    if check:
        assert p.returncode == 0, f"{cmd} exited {p.returncode}:\n{out}"
    return out


def unix_uri(target, export):
    return f"nbd+unix:///{export}?socket={target.nbd_sock}"


def qemu_io(uri, *cmds):
    args = ["qemu-io", "-f", "raw"]
    for c in cmds:
        args += ["-c", c]
    out = run(args + [uri])
    assert "Pattern verification failed" not in out, out
    assert "error" not in out.lower(), out
    return out


def connections_closed(target, base_total):
    """All connections the test opened (total rose past base_total) are
    gone again."""
    s = stats(target)
    return s["nbd_connections"] == 0 and s["nbd_total_connections"] > base_total


# --- negotiation -------------------------------------------------------------

def test_nbdinfo_size_and_list(target):
    make_export(target, "e0", size_mb=64, block_size=512)
    make_export(target, "n0", size_mb=1024, block_size=4096, kind="null")

    info = json.loads(run(["nbdinfo", "--json", target.nbd_uri("e0")]))
    (exp,) = info["exports"]
    assert exp["export-name"] == "e0"
    assert exp["export-size"] == 64 * MiB
    assert exp["block_size_minimum"] == 512
    assert exp["block_size_maximum"] == MAX_REQUEST_SIZE
    for cap in ("can_flush", "can_fua", "can_trim", "can_multi_conn"):
        assert exp[cap] is True, cap
    assert exp["is_read_only"] is False

    listing = json.loads(run(["nbdinfo", "--list", "--json",
                              f"nbd://127.0.0.1:{target.port}"]))
    sizes = {e["export-name"]: e["export-size"] for e in listing["exports"]}
    assert sizes == {"e0": 64 * MiB, "n0": 1024 * MiB}

    # The same over the unix socket, with the description the server offers.
    info = json.loads(run(["nbdinfo", "--json", unix_uri(target, "n0")]))
    assert info["exports"][0]["export-size"] == 1024 * MiB
    assert info["exports"][0]["description"] == "null bdev n0_bdev"


def test_raw_negotiation(target):
    make_export(target, "e0", size_mb=8, block_size=4096)

    c = RawNbd(target)
    c.flags()
    c.option(OPT_STRUCTURED_REPLY)                  # refused, not fatal
    assert c.reply()[1] == REP_ERR_UNSUP
    c.option(99, b"whatever")                        # unknown option
    assert c.reply()[:2] == (99, REP_ERR_UNSUP)
    c.option(OPT_LIST, b"x")                         # LIST takes no data
    assert c.reply()[1] == REP_ERR_INVALID
    c.option(OPT_LIST)
    assert c.reply() == (OPT_LIST, REP_SERVER, struct.pack(">I", 2) + b"e0")
    assert c.reply() == (OPT_LIST, REP_ACK, b"")
    _, final = c.info_go(OPT_INFO, "nope")
    assert final == REP_ERR_UNKNOWN
    c.option(OPT_GO, struct.pack(">I", 100) + b"e0")  # name past the data
    assert c.reply()[1] == REP_ERR_INVALID
    infos, final = c.info_go(OPT_INFO, "e0",
                             (INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE))
    assert final == REP_ACK
    infos = dict(infos)
    assert struct.unpack(">QH", infos[INFO_EXPORT])[0] == 8 * MiB
    assert infos[INFO_NAME] == b"e0"
    assert infos[INFO_DESCRIPTION] == b"malloc bdev e0_bdev"
    assert struct.unpack(">III", infos[INFO_BLOCK_SIZE]) == \
        (4096, 4096, MAX_REQUEST_SIZE)
    c.option(OPT_ABORT)
    assert c.reply() == (OPT_ABORT, REP_ACK, b"")
    assert c.closed_by_server()
    c.close()

    # NBD_OPT_EXPORT_NAME: 124 zero bytes unless NO_ZEROES, then transmit.
    for cflags, tail in ((1, 124), (3, 0)):
        c = RawNbd(target)
        c.flags(cflags)
        c.option(OPT_EXPORT_NAME, b"e0")
        size, tflags = struct.unpack(">QH", c.recv(10))
        assert size == 8 * MiB and tflags & 1
        assert c.recv(tail) == bytes(tail)
        c.request(CMD_READ, 4096, 4096, handle=7)
        assert c.simple_reply(4096) == (0, 7, bytes(4096))
        c.request(CMD_DISC)
        assert c.closed_by_server()
        c.close()

    # An unknown export cannot be refused politely with EXPORT_NAME.
    c = RawNbd(target)
    c.flags()
    c.option(OPT_EXPORT_NAME, b"nope")
    assert c.closed_by_server()
    c.close()


def test_requests_right_behind_go(target):
    """A client that pipelines its first requests behind NBD_OPT_GO, in the
    same packet: the bytes the negotiating reactor already read travel with
    the connection to its transmission reactor and are served in order."""
    make_export(target, "e0", size_mb=8)
    c = RawNbd(target)
    go = wire.info_go(OPT_GO, "e0")
    write = wire.request(CMD_WRITE, 512, 512, handle=1, payload=b"\xa5" * 512)
    read = wire.request(CMD_READ, 0, 512, handle=2)
    c.send(wire.client_flags() + go + write + read)
    while True:
        _, rtype, _ = c.reply()
        if rtype != REP_INFO:
            assert rtype == REP_ACK
            break
    # Replies may come in any order; only a read's carries data.
    magic, err, h = struct.unpack(">IIQ", c.recv(16))
    assert (magic, err) == (REPLY_MAGIC, 0) and h in (1, 2)
    if h == 2:
        assert c.recv(512) == bytes(512)
        assert c.simple_reply() == (0, 1, b"")
    else:
        assert c.simple_reply(512) == (0, 2, bytes(512))
    c.request(CMD_READ, 512, 512, handle=3)
    assert c.simple_reply(512) == (0, 3, b"\xa5" * 512)
    c.request(CMD_DISC)
    assert c.closed_by_server()
    c.close()


@pytest.mark.parametrize("case", ["bad-option-magic", "oversized-option",
                                  "unknown-client-flags", "truncated-option"])
def test_bad_negotiation_disconnects(target, case):
    make_export(target, "e0", size_mb=8)
    base = stats(target)["nbd_total_connections"]

    c = RawNbd(target)
    if case == "unknown-client-flags":
        c.flags(1 << 7)
    else:
        c.flags()
    if case == "bad-option-magic":
        c.send(struct.pack(">QII", 0x1122334455667788, OPT_GO, 0))
    elif case == "oversized-option":
        c.option(OPT_GO, length=MAX_OPTION_LEN + 1)
    if case == "truncated-option":
        c.send(struct.pack(">QI", OPTS_MAGIC, OPT_GO))
        c.close()
    else:
        assert c.closed_by_server()
        c.close()

    wait_until("the connection to go", lambda: connections_closed(target, base))
    qemu_io(target.nbd_uri("e0"), "write -P 0x11 0 64k", "read -P 0x11 0 64k")


# --- data integrity with real clients --------------------------------------

def test_qemu_io_pattern_tcp_and_unix(target):
    make_export(target, "e0", size_mb=64)
    qemu_io(target.nbd_uri("e0"), "write -P 0xab 0 1M", "read -P 0xab 0 1M")
    # The other listener sees the same data, and adds its own.
    qemu_io(unix_uri(target, "e0"), "read -P 0xab 0 1M",
            "write -P 0xcd 1M 1M", "read -P 0xcd 1M 1M")
    # FUA write, flush and trim are accepted.
    qemu_io(target.nbd_uri("e0"), "write -f -P 0xef 2M 64k", "flush",
            "discard 3M 1M", "read -P 0xef 2M 64k", "read -P 0xcd 1M 1M")


def test_qemu_img_info_and_convert(target, tmp_path):
    make_export(target, "e0", size_mb=16)
    info = json.loads(run(["qemu-img", "info", "--output=json",
                           target.nbd_uri("e0")]))
    assert info["virtual-size"] == 16 * MiB
    assert info["format"] == "raw"

    src = tmp_path / "src.img"
    src.write_bytes(os.urandom(16 * MiB))
    run(["qemu-img", "convert", "-n", "-f", "raw", "-O", "raw", str(src),
         target.nbd_uri("e0")])
    out = tmp_path / "out.img"
    run(["qemu-img", "convert", "-f", "raw", "-O", "raw",
         unix_uri(target, "e0"), str(out)])
    assert out.read_bytes() == src.read_bytes()


def test_nbdcopy_round_trip(target, tmp_path):
    make_export(target, "e0", size_mb=32, block_size=4096)
    src = tmp_path / "src.img"
    src.write_bytes(os.urandom(32 * MiB))
    run(["nbdcopy", str(src), target.nbd_uri("e0")])
    out = tmp_path / "out.img"
    run(["nbdcopy", target.nbd_uri("e0"), str(out)])
    assert out.stat().st_size == 32 * MiB
    assert out.read_bytes() == src.read_bytes()


def fio_cmd(uri, out, size, extra=()):
    return ["fio", "--name=nbdverify", "--ioengine=nbd", f"--uri={uri}",
            "--rw=randwrite", "--bs=4k", f"--size={size}", "--iodepth=32",
            "--verify=crc32c", "--do_verify=1", "--verify_state_save=0",
            "--output-format=json",
            f"--output={out}", *extra]


def fio_result(out):
    with open(out) as f:
        text = f.read()
    job = json.loads(text[text.index("{"):])["jobs"][0]
    return job


def test_fio_verify(target, tmp_path):
    make_export(target, "e0", size_mb=64)
    base = stats(target)
    out = tmp_path / "fio.json"
    run(fio_cmd(target.nbd_uri("e0"), out, "4M"))
    job = fio_result(out)
    assert job["error"] == 0
    assert job["write"]["total_ios"] == 1024        # 4 MiB / 4 KiB
    assert job["read"]["total_ios"] == 1024         # every block verified
    s = stats(target)
    assert s["io_errors"] == base["io_errors"]
    # Every block written and read back went through the bdev exactly once.
    assert s["io_completed"] - base["io_completed"] >= 2048


# --- malformed transmission requests -----------------------------------------

def test_bad_requests_get_errors(target):
    make_export(target, "e0", size_mb=8, block_size=512)
    size = 8 * MiB
    base = stats(target)
    c = RawNbd(target)
    assert c.go("e0")[0] == size

    checks = [
        # (cmd, offset, length, flags, payload, expected error)
        (CMD_READ, size, 512, 0, None, EINVAL),            # past the end
        (CMD_READ, size - 512, 1024, 0, None, EINVAL),     # straddles the end
        (CMD_WRITE, size, 512, 0, b"\1" * 512, ENOSPC),    # payload skipped
        (CMD_TRIM, 2**64 - 512, 1024, 0, None, EINVAL),    # offset overflow
        (CMD_READ, 100, 512, 0, None, EINVAL),             # unaligned
        (CMD_WRITE, 0, 100, 0, b"\2" * 100, EINVAL),       # unaligned, skipped
        (CMD_READ, 0, MAX_REQUEST_SIZE + 512, 0, None, EINVAL),  # oversized
        (7, 0, 512, 0, None, EINVAL),                      # BLOCK_STATUS
        (99, 0, 0, 0, None, EINVAL),                       # unknown command
        (CMD_READ, 0, 512, 1 << 3, None, EINVAL),          # unknown flag
        (CMD_FLUSH, 512, 0, 0, None, EINVAL),              # flush with offset
    ]
    for i, (cmd, off, length, flags, payload, err) in enumerate(checks):
        c.request(cmd, off, length, flags, handle=1000 + i, payload=payload)
        assert c.simple_reply() == (err, 1000 + i, b""), (cmd, off, length)

    # The connection is still in sync: a good write and read follow.
    c.request(CMD_WRITE, 4096, 512, FLAG_FUA, handle=1, payload=b"\x5a" * 512)
    assert c.simple_reply() == (0, 1, b"")
    c.request(CMD_READ, 4096, 512, handle=2)
    assert c.simple_reply(512) == (0, 2, b"\x5a" * 512)
    c.request(CMD_FLUSH, handle=3)
    assert c.simple_reply() == (0, 3, b"")
    c.request(CMD_DISC)
    assert c.closed_by_server()
    c.close()

    wait_until("the connection to go", lambda: connections_closed(target, base["nbd_total_connections"]))
    s = stats(target)
    assert s["nbd_requests"] - base["nbd_requests"] == len(checks) + 4
    # Only the two good writes/reads and the flush reached the bdev.
    assert s["io_submitted"] - base["io_submitted"] == 3


@pytest.mark.parametrize("case", ["bad-magic", "oversized-write",
                                  "truncated-header", "truncated-payload"])
def test_unrecoverable_requests(target, case):
    make_export(target, "e0", size_mb=8)
    base = stats(target)
    c = RawNbd(target)
    c.go("e0")
    if case == "bad-magic":
        c.send(struct.pack(">IHHQQI", 0x12560953, 0, CMD_READ, 1, 0, 512))
    elif case == "oversized-write":
        # Its data cannot be skipped cheaply: the server hangs up.
        c.request(CMD_WRITE, 0, MAX_REQUEST_SIZE + 512)
    elif case == "truncated-header":
        c.send(struct.pack(">IHHQ", REQUEST_MAGIC, 0, CMD_READ, 1))
    else:
        c.request(CMD_WRITE, 0, 64 * 1024, payload=b"\3" * 1000)
    if case in ("bad-magic", "oversized-write"):
        assert c.closed_by_server()
    c.close()

    wait_until("the connection to go",
               lambda: connections_closed(target, base["nbd_total_connections"]))
    assert stats(target)["io_submitted"] == base["io_submitted"]
    qemu_io(target.nbd_uri("e0"), "write -P 0x22 0 64k", "read -P 0x22 0 64k")


def test_disconnect_with_io_in_flight(target):
    """A client that sends writes and hangs up while they are held (the
    export is paused) must not lose or leak them: the connection outlives
    its socket until its I/O is done, then everything is freed."""
    make_export(target, "e0", size_mb=64)
    n = 199                                     # prime, 12.4 MiB in flight
    base = stats(target)
    c = RawNbd(target)
    c.go("e0")
    target.rpc("export_pause", name="e0")
    payload = b"\x77" * 65536
    for i in range(n):
        c.request(CMD_WRITE, i * 65536, 65536, handle=i, payload=payload)
    wait_until(f"{n} requests received", lambda: stats(target)["nbd_requests"]
               - base["nbd_requests"] == n)
    c.close()
    s = stats(target)
    assert s["io_submitted"] == base["io_submitted"]    # all held by the pause
    assert s["nbd_connections"] == 1                    # kept for its I/O
    assert target.rpc("export_list")[0]["clients"] == 1

    target.rpc("export_resume", name="e0")
    wait_until("the connection to go",
               lambda: connections_closed(target, base["nbd_total_connections"]))
    s = stats(target)
    assert s["io_completed"] - base["io_completed"] == n
    assert s["io_errors"] == base["io_errors"]
    assert target.rpc("export_list")[0]["clients"] == 0
    # Nothing was lost: the writes landed.
    qemu_io(target.nbd_uri("e0"), f"read -P 0x77 0 {n * 64}k")


def test_many_clients_pipelining(target):
    """Several clients at once, each with many requests in flight, replies
    matched by handle (they may come out of order)."""
    make_export(target, "e0", size_mb=16, block_size=4096)
    clients = [RawNbd(target) for _ in range(5)]
    for c in clients:
        c.go("e0")
    for k, c in enumerate(clients):
        for i in range(64):
            off = (k * 64 + i) * 4096
            c.request(CMD_WRITE, off, 4096, handle=i,
                      payload=bytes([k * 64 + i & 0xFF]) * 4096)
    for c in clients:
        assert sorted(c.simple_reply()[1] for _ in range(64)) == list(range(64))
    for k, c in enumerate(clients):
        for i in range(64):
            c.request(CMD_READ, (k * 64 + i) * 4096, 4096, handle=i)
        got = {}
        for _ in range(64):
            err, h, data = c.simple_reply(4096)
            assert err == 0
            got[h] = data
        for i in range(64):
            assert got[i] == bytes([k * 64 + i & 0xFF]) * 4096
        c.request(CMD_DISC)
        c.close()


def test_backpressure_many_reads_unread(target):
    """A client that sends 1000 reads of 64 KiB before reading any reply
    (64 MiB of replies, far past NBD_MAX_INFLIGHT and the socket buffers):
    the server stops reading, waits for the socket, and resumes; every
    reply arrives, once, with the right data."""
    import threading

    make_export(target, "e0", size_mb=64, block_size=4096)
    qemu_io(target.nbd_uri("e0"), "write -P 0x3e 0 64M")
    base = settled_stats(target)
    n = 1000
    c = RawNbd(target)
    c.go("e0")
    reqs = b"".join(wire.request(CMD_READ, (i % 1024) * 65536, 65536,
                                 handle=i) for i in range(n))
    sender = threading.Thread(target=c.send, args=(reqs,))
    sender.start()
    # Read nothing until the server has stalled on the full socket: it has
    # stopped short of the 1000 requests sent.
    wait_until("requests to arrive",
               lambda: stats(target)["nbd_requests"] > base["nbd_requests"])
    seen = set()
    for _ in range(n):
        err, h, data = c.simple_reply(65536)
        assert err == 0 and data == b"\x3e" * 65536
        assert h not in seen
        seen.add(h)
    sender.join(TIMEOUT)
    assert seen == set(range(n))
    c.request(CMD_DISC)
    assert c.closed_by_server()
    c.close()
    s = stats(target)
    assert s["nbd_requests"] - base["nbd_requests"] == n + 1
    assert s["io_completed"] - base["io_completed"] == n


def test_trim_larger_than_max_io(target):
    """TRIM has no payload, so it may exceed the maximum payload size; the
    server splits it into bdev-sized pieces."""
    make_export(target, "e0", size_mb=96, block_size=4096)
    qemu_io(target.nbd_uri("e0"), "write -P 0x44 90M 1M")
    base = settled_stats(target)
    c = RawNbd(target)
    c.go("e0")
    c.request(CMD_TRIM, 0, 80 * MiB, FLAG_FUA, handle=5)
    assert c.simple_reply() == (0, 5, b"")
    c.request(CMD_DISC)
    assert c.closed_by_server()
    c.close()
    s = stats(target)
    assert s["io_submitted"] - base["io_submitted"] == 3   # 32 + 32 + 16 MiB
    assert s["io_errors"] == base["io_errors"]
    qemu_io(target.nbd_uri("e0"), "read -P 0x44 90M 1M")   # untouched


def test_shutdown_with_clients_connected(blktgt_bin, tmp_path):
    """SIGTERM with one client mid-negotiation, one mid-payload and one
    idle in transmission: every connection is closed, the target exits 0
    (and, under ASan, without a leak)."""
    t = probekit.Target(blktgt_bin, tmp_path)
    t.start()
    try:
        make_export(t, "e0", size_mb=8)
        negotiating = RawNbd(t)
        mid_payload = RawNbd(t)
        mid_payload.go("e0")
        mid_payload.request(CMD_WRITE, 0, 65536, payload=b"\1" * 1000)
        idle = RawNbd(t)
        idle.go("e0")
        wait_until("the half-sent write", lambda: stats(t)["nbd_requests"] == 1)
    finally:
        t.stop()
    for c in (negotiating, mid_payload, idle):
        assert c.closed_by_server()
        c.close()


def test_shutdown_with_io_held_by_pause(blktgt_bin, tmp_path):
    """SIGTERM while a paused export holds a client's write: shutdown must
    not wait forever for it; the write is let go and lands."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(4 * MiB)
    t = probekit.Target(blktgt_bin, tmp_path)
    t.start()
    try:
        t.rpc("bdev_file_create", name="f0", path=str(img), block_size=512)
        t.rpc("export_create", name="e0", bdev="f0")
        c = RawNbd(t)
        c.go("e0")
        t.rpc("export_pause", name="e0")
        c.request(CMD_WRITE, 8192, 4096, handle=9, payload=b"\x99" * 4096)
        wait_until("the held write", lambda: stats(t)["nbd_requests"] == 1)
        assert stats(t)["io_submitted"] == 0
    finally:
        t.stop()
    # The write may be answered before the server hangs up, or not.
    assert c.rest() in (b"", struct.pack(">IIQ", REPLY_MAGIC, 0, 9))
    c.close()
    data = img.read_bytes()
    assert data[8192:12288] == b"\x99" * 4096
    assert data[:8192] == bytes(8192) and data[12288:] == bytes(4 * MiB - 12288)


def test_random_clients(target):
    """200 clients (seeded, so the same every run) that send random bytes
    while negotiating, or random requests (valid magic, random fields,
    payloads that match or not) and then hang up without reading: the
    target stays up, closes every connection, and serves the next client."""
    import random

    rng = random.Random(1009)
    make_export(target, "e0", size_mb=4, block_size=512)
    base = stats(target)
    for i in range(200):
        c = RawNbd(target, timeout=10)
        try:
            if i % 2 == 0:
                c.flags(rng.choice([1, 3, rng.getrandbits(32)]))
                blob = bytearray(rng.randbytes(rng.randrange(0, 300)))
                if blob and rng.random() < 0.5:
                    blob[:8] = struct.pack(">Q", OPTS_MAGIC)
                c.send(bytes(blob))
            else:
                c.go("e0")
                for _ in range(rng.randrange(1, 20)):
                    cmd = rng.choice([0, 1, 1, 2, 3, 4, 5, 6, 7, 99])
                    length = rng.choice([0, 1, 512, 4096, 65536, MAX_REQUEST_SIZE + 1,
                                         rng.getrandbits(32)])
                    offset = rng.choice([0, 512, 4 * MiB - 512, 4 * MiB,
                                         rng.getrandbits(64)])
                    payload = b""
                    if cmd == 1 and length <= 65536:
                        payload = rng.randbytes(rng.choice([length, length // 2]))
                    c.request(cmd, offset, length, rng.choice([0, 1, 2, 0xFFFF]),
                              rng.getrandbits(64), payload)
        except (BrokenPipeError, ConnectionResetError):
            pass                # the server hung up first: allowed
        c.close()
    wait_until("every connection to go",
               lambda: connections_closed(target, base["nbd_total_connections"] + 199))
    qemu_io(target.nbd_uri("e0"), "write -P 0x12 0 1M", "read -P 0x12 0 1M")


# --- pause and resume under load ------------------------------------------------

def test_pause_resume_with_fio(target, tmp_path):
    make_export(target, "e0", size_mb=64)
    target.rpc("export_pause", name="e0")
    base = stats(target)
    out = tmp_path / "fio.json"
    fio = subprocess.Popen(fio_cmd(target.nbd_uri("e0"), out, "16M"),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # fio connects to the paused export and sends its first writes,
        # which are held: none reaches the bdev, so fio cannot finish.
        wait_until("fio's first requests",
                   lambda: stats(target)["nbd_requests"] > base["nbd_requests"])
        assert stats(target)["io_submitted"] == base["io_submitted"]
        assert fio.poll() is None
        target.rpc("export_resume", name="e0")
        wait_until("I/O to flow", lambda: stats(target)["io_completed"]
                   - base["io_completed"] >= 256)
        # Pause again mid-run, then resume: in-flight I/O drains, new I/O
        # waits, nothing fails.
        target.rpc("export_pause", name="e0")
        assert target.rpc("export_list")[0]["state"] == "PAUSED"
        target.rpc("export_resume", name="e0")
        fio.wait(timeout=TIMEOUT)
    finally:
        if fio.poll() is None:
            fio.kill()
            fio.wait()
    assert fio.returncode == 0, fio.stdout.read().decode()
    job = fio_result(out)
    assert job["error"] == 0
    assert job["write"]["total_ios"] == 4096
    assert job["read"]["total_ios"] == 4096
    assert stats(target)["io_errors"] == base["io_errors"]


def test_pause_resume_with_qemu_io(target):
    make_export(target, "e0", size_mb=16)
    target.rpc("export_pause", name="e0")
    base = stats(target)
    q = subprocess.Popen(["qemu-io", "-f", "raw", "-c", "write -P 0x6b 0 4M",
                          "-c", "read -P 0x6b 0 4M", target.nbd_uri("e0")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until("qemu-io's write",
                   lambda: stats(target)["nbd_requests"] > base["nbd_requests"])
        assert q.poll() is None
        assert stats(target)["io_submitted"] == base["io_submitted"]
        target.rpc("export_resume", name="e0")
        out = q.communicate(timeout=TIMEOUT)[0].decode()
    finally:
        if q.poll() is None:
            q.kill()
            q.wait()
    assert q.returncode == 0 and "Pattern verification failed" not in out, out
    assert "read 4194304/4194304" in out


# --- durability -------------------------------------------------------------------

def test_file_bdev_survives_kill9(blktgt_bin, tmp_path):
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(16 * MiB)

    t = probekit.Target(blktgt_bin, tmp_path)
    t.start()
    try:
        t.rpc("bdev_file_create", name="f0", path=str(img), block_size=512)
        t.rpc("export_create", name="e0", bdev="f0")
        # One FUA write, one plain write made durable by a flush.
        qemu_io(t.nbd_uri("e0"), "write -f -P 0x3c 0 1M",
                "write -P 0x4d 1M 1M", "flush")
    finally:
        t.stop(sig=signal.SIGKILL, expect_rc=-signal.SIGKILL)

    data = img.read_bytes()
    assert data[:MiB] == b"\x3c" * MiB
    assert data[MiB:2 * MiB] == b"\x4d" * MiB
    assert data[2 * MiB:] == bytes(14 * MiB)

    # A new target on the same file serves the same bytes.
    t = probekit.Target(blktgt_bin, tmp_path)
    t.start()
    try:
        t.rpc("bdev_file_create", name="f0", path=str(img), block_size=512)
        t.rpc("export_create", name="e0", bdev="f0")
        qemu_io(t.nbd_uri("e0"), "read -P 0x3c 0 1M", "read -P 0x4d 1M 1M")
    finally:
        t.stop()


# --- probes -------------------------------------------------------------------

def test_probes_count_writes_exactly(target, bpf, blktgt_bin):
    """qemu-io issuing exactly K writes fires exactly K nbd__request with
    cmd WRITE and K io__submit of type write on that bdev, each with the
    right length, and the probe strings read back."""
    bdev = make_export(target, "e0", size_mb=16)
    k = 23
    b = blktgt_bin
    prog = f"""
usdt:{b}:blktgt:nbd__request /arg2 == 1/ {{ @req[str(arg5), arg4] = count(); }}
usdt:{b}:blktgt:nbd__reply /arg2 == 1 && arg3 == 0/ {{ @reply = count(); }}
usdt:{b}:blktgt:io__submit /str(arg1) == "{bdev}" && arg2 == 1/ {{ @io[str(arg5), arg4] = count(); }}
usdt:{b}:blktgt:nbd__connect {{ @peer[str(arg1)] = count(); }}
usdt:{b}:blktgt:nbd__option {{ @opt[str(arg2), arg3] = count(); }}
usdt:{b}:blktgt:nbd__disconnect {{ @disc = count(); @sent = sum(arg2); }}
BEGIN {{ printf("READY\\n"); }}
"""
    proc, out = probekit.bpftrace_program(target.pid, prog)
    try:
        qemu_io(target.nbd_uri("e0"),
                *[f"write -P 0x{i + 1:02x} {i * 8}k 8k" for i in range(k)])
        wait_until("the connection to go", lambda: stats(target)["nbd_connections"] == 0)
    finally:
        lines = probekit.stop_bpftrace(proc, out)
    text = "\n".join(lines)
    print(text)
    assert re.search(rf"^@req\[WRITE, 8192\]: {k}$", text, re.M), text
    assert re.search(rf"^@reply: {k}$", text, re.M), text
    assert re.search(rf"^@io\[write, 8192\]: {k}$", text, re.M), text
    assert re.search(r"^@peer\[127\.0\.0\.1:\d+\]: 1$", text, re.M), text
    assert re.search(r"^@opt\[GO, 0\]: 1$", text, re.M), text
    assert re.search(r"^@disc: 1$", text, re.M), text
    # Requests, as the disconnect probe counts them: K writes, at least
    # the closing DISC, and whatever else (flush) qemu sent.
    m = re.search(r"^@sent: (\d+)$", text, re.M)
    assert m and int(m.group(1)) >= k + 1, text


def test_request_offset_and_flags_reach_the_bdev(target, bpf, blktgt_bin):
    """Each request reaches the bdev with its own offset, length and FUA
    flag: a write whose payload arrives after its header, a read, a flush,
    and a TRIM split into 32 MiB pieces, FUA on every piece."""
    make_export(target, "e0", size_mb=96, block_size=4096)
    prog = f"""
uprobe:{blktgt_bin}:bdev_execute {{
    @x[arg1 & 0xffffffff, arg2, arg3, arg5 & 0xffffffff] = count(); }}
BEGIN {{ printf("READY\\n"); }}
"""
    proc, out = probekit.bpftrace_program(target.pid, prog)
    try:
        c = RawNbd(target)
        c.go("e0")
        c.request(CMD_WRITE, 8192, 4096, FLAG_FUA, handle=1, payload=b"\x11" * 4096)
        assert c.simple_reply() == (0, 1, b"")
        c.request(CMD_WRITE, 12288, 4096, 0, handle=2, payload=b"\x22" * 4096)
        assert c.simple_reply() == (0, 2, b"")
        c.request(CMD_READ, 8192, 8192, handle=3)
        assert c.simple_reply(8192) == (0, 3, b"\x11" * 4096 + b"\x22" * 4096)
        c.request(CMD_FLUSH, handle=4)
        assert c.simple_reply() == (0, 4, b"")
        c.request(CMD_TRIM, 4096, 80 * MiB, FLAG_FUA, handle=5)
        assert c.simple_reply() == (0, 5, b"")
        c.request(CMD_DISC)
        assert c.closed_by_server()
        c.close()
    finally:
        lines = probekit.stop_bpftrace(proc, out)
    got = sorted(ln for ln in lines if ln.startswith("@x["))
    # type (0 read, 1 write, 2 flush, 3 trim), offset, length, fua
    want = sorted(f"@x[{t}, {o}, {n}, {f}]: 1" for t, o, n, f in [
        (1, 8192, 4096, 1), (1, 12288, 4096, 0), (0, 8192, 8192, 0), (2, 0, 0, 0),
        (3, 4096, 32 * MiB, 1), (3, 4096 + 32 * MiB, 32 * MiB, 1),
        (3, 4096 + 64 * MiB, 16 * MiB, 1)])
    assert got == want, "\n".join(lines)


# --- the fuzz harness's seeds, replayed under ASan -----------------------------

def test_fuzz_seeds_replay(build):
    root = probekit.ROOT
    out = run(["make", "-s", "-C", root, f"O={build}", "fuzz-nbd-replay"],
              timeout=300)
    m = re.search(r"nbd_fuzz: (\d+) inputs replayed", out)
    assert m and int(m.group(1)) >= 8, out


def test_fuzz_nbd_short(build):
    """`make fuzz-nbd` builds the libFuzzer harness and fuzzes, bounded."""
    root = probekit.ROOT
    out = run(["make", "-s", "-C", root, f"O={build}", "fuzz-nbd",
               "FUZZ_NBD_SECONDS=5"], timeout=300)
    m = re.search(r"Done (\d+) runs in \d+ second", out)
    assert m and int(m.group(1)) > 1000, out


def test_handshake_limit_closes_idle_negotiations(blktgt_bin, tmp_path):
    """A client that connects and then says nothing is closed once the
    handshake limit (-i 3) has passed, and counted out; a client that
    finished negotiating before it, and so is older, is still served.
    The limit also bounds the other two clients' negotiations, a few
    round trips each, which on a loaded machine can take a good part of
    a second: 3 s, not 1, keeps them inside it."""
    t = probekit.Target(blktgt_bin, tmp_path, extra=["-i", "3"])
    t.start()
    try:
        make_export(t, "e0", size_mb=1, block_size=512)
        served = RawNbd(t)
        served.go("e0")
        idle = RawNbd(t)                 # the greeting, then silence
        half = RawNbd(t)                 # client flags, an option, then silence
        half.flags()
        half.option(OPT_LIST)
        assert half.reply()[1] == REP_SERVER
        assert idle.closed_by_server()   # within the socket's 30 s timeout
        assert half.rest()[-20:] == struct.pack(">QIII", REP_MAGIC, OPT_LIST, REP_ACK, 0)
        t.out.wait_for(r"disconnecting: handshake not finished within 3 s")
        served.request(CMD_READ, 0, 512, handle=9)
        assert served.simple_reply(512) == (0, 9, b"\0" * 512)
        stats = t.rpc("target_stats")
        assert stats["nbd_connections"] == 1, stats
        served.close()
    finally:
        t.stop()


def test_export_delete_races_clients(target):
    """Clients choosing an export while it is being deleted: each either
    gets it (and then the delete waits for it, -EBUSY) or is refused; none
    may hold a reference to a freed export.  Under the ASan build a stale
    reference is a use-after-free report and a dead target."""
    import threading

    target.rpc("bdev_malloc_create", name="rb", size_mb=1, block_size=512)
    acks = refused = 0
    for _ in range(60):
        target.rpc("export_create", name="re", bdev="rb")
        stop = threading.Event()
        results = []

        def client():
            while not stop.is_set():
                try:
                    c = RawNbd(target, timeout=10)
                    c.flags()
                    _, final = c.info_go(OPT_GO, "re")
                    results.append(final)
                    c.close()
                except (ConnectionError, OSError, AssertionError):
                    results.append(None)

        threads = [threading.Thread(target=client) for _ in range(3)]
        for th in threads:
            th.start()
        try:
            while True:
                try:
                    target.rpc("export_delete", name="re")
                    break
                except probekit.RpcError:
                    continue  # busy: a client holds it; try again
        finally:
            stop.set()
            for th in threads:
                th.join()
        assert target.proc.poll() is None, "target died during the race"
        acks += results.count(REP_ACK)
        refused += len(results) - results.count(REP_ACK)
        assert target.rpc("export_list") == []
    # Both outcomes happened, so the race was really exercised.
    assert acks > 0 and refused > 0, (acks, refused)
    assert target.rpc("bdev_delete", name="rb") is not None


# --- descriptor limits -----------------------------------------------------

def limited(blktgt_bin, tmp_path, nofile):
    """A script that runs blktgt under prlimit --nofile=SOFT:HARD.  exec
    keeps the PID, so the running line names the script's own."""
    path = tmp_path / "blktgt-limited"
    path.write_text(f'#!/bin/sh\nexec prlimit --nofile={nofile} {blktgt_bin} "$@"\n')
    path.chmod(0o755)
    return str(path)


def cpu_seconds(pid):
    """User plus system CPU time of every thread of pid, from /proc/PID/stat
    (utime and stime, the 14th and 15th fields)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def greeting_or_eof(sock):
    """The first 8 bytes the server sends, or b"" when it closes first."""
    data = b""
    try:
        while len(data) < 8:
            chunk = sock.recv(8 - len(data))
            if not chunk:
                return b""
            data += chunk
    except ConnectionResetError:
        return b""
    return data


def rest_until_close(sock):
    """What the server still sends before it closes the connection."""
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except ConnectionResetError:
        return data


def test_soft_fd_limit_is_raised_for_the_connection_cap(blktgt_bin, tmp_path):
    """Under a soft limit of 1024 (a common default) 1024 NBD clients need
    more descriptors than there are: blktgt raises the soft limit, up to
    the hard one, says so, and then takes exactly its 1024 clients and
    refuses the 5 beyond (not EMFILE at about 1010)."""
    import resource
    saved = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft, hard = saved
    if soft < 1200:
        soft = min(hard, 4096)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        if soft < 1200:
            allowed_skips.require(f"this test holds 1029 sockets; its own fd "
                                  f"limit is {soft} (hard limit {hard})")
        t = probekit.Target(limited(blktgt_bin, tmp_path, "1024:8192"), tmp_path,
                            extra=["-i", "0"]).start()
        clients = []
        try:
            m = t.out.wait_for(r"fd limit: soft limit raised from 1024 to (\d+), for 1024 NBD "
                               r"and 64 RPC connections")
            with open(f"/proc/{t.pid}/limits") as f:
                lim = re.search(r"Max open files\s+(\d+)\s+(\d+)", f.read())
            assert (int(lim.group(1)), int(lim.group(2))) == (int(m.group(1)), 8192)
            for _ in range(1024 + 5):
                clients.append(socket.create_connection(("127.0.0.1", t.port), timeout=TIMEOUT))
            # The backlog is first in, first out: the last five are the refused.
            got = [greeting_or_eof(c) for c in clients]
            assert got == [b"NBDMAGIC"] * 1024 + [b""] * 5
            assert stats(t)["nbd_connections"] == 1024
            t.out.wait_for(r"nbd: refusing a connection: 1024 open, the most allowed")
        finally:
            for c in clients:
                c.close()
            t.stop()
    finally:
        # The pytest process's own limit, as it was: every later test's
        # children inherit it.
        resource.setrlimit(resource.RLIMIT_NOFILE, saved)


def test_out_of_descriptors_the_listener_rests(blktgt_bin, tmp_path):
    """Under a hard limit of 64 the limit cannot be raised, so NBD clients
    take every descriptor and accept() fails with EMFILE while 7 more wait
    in the backlog.  blktgt must not spin on it: it warns once, its CPU time
    stays small for the seconds until -i 3 closes the clients it has, RPC
    still answers, and the 7 are taken as soon as those connections close."""
    waiting = 7
    t = probekit.Target(limited(blktgt_bin, tmp_path, "64:64"), tmp_path,
                        extra=["-i", "3"]).start()
    clients = []
    try:
        t.out.wait_for(r"fd limit: 64 \(hard limit 64\), below the \d+ that 1024 NBD and "
                       r"64 RPC connections and 1024 file bdevs need")
        free = 64 - len(os.listdir(f"/proc/{t.pid}/fd"))
        for _ in range(free + waiting):
            clients.append(socket.create_connection(("127.0.0.1", t.port), timeout=TIMEOUT))
        t.out.wait_for(r"nbd: accept: Too many open files")
        cpu0 = cpu_seconds(t.pid)
        # A new RPC client gets in on the descriptor held in reserve.
        st = stats(t)
        assert (st["nbd_connections"], st["nbd_total_connections"]) == (free, free)
        assert [greeting_or_eof(c) for c in clients[:free]] == [b"NBDMAGIC"] * free
        # -i 3 closes those; then the waiting ones are accepted.
        assert [len(rest_until_close(c)) for c in clients[:free]] == [18 - 8] * free
        assert [greeting_or_eof(c) for c in clients[free:]] == [b"NBDMAGIC"] * waiting
        spent = cpu_seconds(t.pid) - cpu0
        assert spent < 0.5, f"{spent:.2f} s of CPU while out of descriptors"
        warnings = [line for line in t.out.lines if "nbd: accept:" in line]
        assert 1 <= len(warnings) <= 2, warnings[:3]
        assert re.search(r"nbd: accept: Too many open files \(%d connections open, soft fd "
                         r"limit 64\); new clients wait until a connection closes" % free,
                         warnings[0]), warnings[0]
        assert stats(t)["nbd_total_connections"] == free + waiting
    finally:
        for c in clients:
            c.close()
        t.stop()


def rpc_send(sock, rid):
    """A target_stats request with id rid."""
    sock.sendall(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "target_stats"}).encode())


def rpc_reply(sock):
    """The next JSON-RPC reply on sock."""
    dec, buf = json.JSONDecoder(), ""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a whole reply; got {buf!r}")
        buf += chunk.decode()
        try:
            return dec.raw_decode(buf.lstrip())[0]
        except ValueError:
            continue


def test_out_of_descriptors_rpc_reserve_then_rest(blktgt_bin, tmp_path):
    """NBD clients take every descriptor.  The RPC server still lets one
    client in, on the descriptor it holds back; the next waits in the
    backlog while the listener rests (one warning, no spinning through
    its retries) and is answered as soon as the first client leaves."""
    t = probekit.Target(limited(blktgt_bin, tmp_path, "64:64"), tmp_path,
                        extra=["-i", "0"]).start()
    socks = []
    try:
        t.out.wait_for(r"fd limit: 64 \(hard limit 64\), below the \d+ that")
        free = 64 - len(os.listdir(f"/proc/{t.pid}/fd"))
        nbd = [socket.create_connection(("127.0.0.1", t.port), timeout=TIMEOUT)
               for _ in range(free)]
        socks += nbd
        assert [greeting_or_eof(c) for c in nbd] == [b"NBDMAGIC"] * free
        first, second = (socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2))
        socks += [first, second]
        for s in (first, second):
            s.settimeout(TIMEOUT)
        first.connect(t.rpc_sock)
        rpc_send(first, 23)
        r = rpc_reply(first)
        assert (r["id"], r["result"]["nbd_connections"]) == (23, free), r
        second.connect(t.rpc_sock)      # into the backlog
        rpc_send(second, 29)
        t.out.wait_for(r"rpc: accept: Too many open files \(1 clients connected, soft fd "
                       r"limit 64\); new clients wait until a descriptor is free")
        cpu0 = cpu_seconds(t.pid)
        # Through two of the listener's one-second retries, each failing
        # again: no reply, and no CPU burnt on accept().  (Nothing signals
        # that nothing happened, so this one waits.)
        assert select.select([second], [], [], 2.5)[0] == []
        spent = cpu_seconds(t.pid) - cpu0
        assert spent < 0.5, f"{spent:.2f} s of CPU while out of descriptors"
        first.close()
        r = rpc_reply(second)
        assert (r["id"], r["result"]["nbd_connections"]) == (29, free), r
        warnings = [line for line in t.out.lines if ": accept:" in line]
        assert len(warnings) == 1 and "rpc: accept:" in warnings[0], warnings[:3]
    finally:
        for s in socks:
            s.close()
        t.stop()
