# SPDX-License-Identifier: BSD-2-Clause
"""blktgt's JSON-RPC control plane: every rpc.py form, and the errors
that bad requests get (parse error, invalid request, unknown method,
invalid params naming the param, refusals from the bdev layer)."""

import json
import os
import random
import socket
import subprocess

import pytest

import histtools
import probekit
from rpc_client import HALF, closed_by_server, still_open, unix_client

PYTHON = probekit.PYTHON
RPC_PY = probekit.RPC_PY


def rpc_py(target, *args, check=True):
    """Run target/rpc.py; returns (rc, parsed stdout or None, stderr)."""
    p = subprocess.run([PYTHON, RPC_PY, "-s", target.rpc_sock, *map(str, args)],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    out = json.loads(p.stdout) if p.returncode == 0 else None
    if check:
        assert p.returncode == 0, p.stderr
    return p.returncode, out, p.stderr


def raw_exchange(sock_path, data, n=1, shut=False, until_close=False):
    """Send raw bytes; read n responses (or, with until_close, everything
    until the server closes).  Returns (responses, closed_by_server)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(probekit.TIMEOUT)
        s.connect(sock_path)
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        buf = b""
        closed = False
        while True:
            resps = decode_all(buf)
            if not until_close and len(resps) >= n:
                return resps, False
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            buf += chunk
        return decode_all(buf), closed


def decode_all(buf):
    """Every complete JSON value in buf, in order."""
    dec = json.JSONDecoder()
    text = buf.decode()
    out, pos = [], 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos >= len(text):
            return out
        try:
            obj, pos = dec.raw_decode(text, pos)
        except ValueError:
            return out
        out.append(obj)


def request(method, params=None, rid=1):
    r = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        r["params"] = params
    return json.dumps(r).encode()


def error_of(target, method, params=None):
    with pytest.raises(probekit.RpcError) as ei:
        probekit.rpc_call(target.rpc_sock, method, params)
    return ei.value.code, ei.value.error["message"]


def test_every_rpc_form(target, tmp_path):
    img = tmp_path / "disk.img"
    img.write_bytes(b"\0" * (4 << 20))

    assert rpc_py(target, "bdev_malloc_create", "-b", "Malloc0", 8, 512)[1] == "Malloc0"
    assert rpc_py(target, "bdev_null_create", "Null0", 16, 4096)[1] == "Null0"
    assert rpc_py(target, "bdev_file_create", "File0", img, 4096)[1] == "File0"
    bdevs = {b["name"]: b for b in rpc_py(target, "bdev_list")[1]}
    assert bdevs == {
        "Malloc0": {"name": "Malloc0", "type": "malloc", "num_blocks": 16384, "block_size": 512},
        "Null0": {"name": "Null0", "type": "null", "num_blocks": 4096, "block_size": 4096},
        "File0": {"name": "File0", "type": "file", "num_blocks": 1024, "block_size": 4096},
    }
    assert rpc_py(target, "bdev_flush", "File0")[1] is True

    assert rpc_py(target, "export_create", "disk0", "Malloc0")[1] is True
    assert rpc_py(target, "export_list")[1] == [
        {"name": "disk0", "bdev": "Malloc0", "state": "ACTIVE", "clients": 0}]
    assert rpc_py(target, "export_pause", "disk0")[1] is True
    assert rpc_py(target, "export_list")[1][0]["state"] == "PAUSED"
    assert rpc_py(target, "export_resume", "disk0")[1] is True
    assert rpc_py(target, "export_list")[1][0]["state"] == "ACTIVE"

    res = rpc_py(target, "workload_run", "-b", "Null0", "-w", "randread", "-o", 4096,
                 "-q", 8, "-n", 101)[1]
    assert (res["ios"], res["reads"], res["writes"], res["errors"], res["bytes"]) == \
        (101, 101, 0, 0, 101 * 4096)
    assert set(res) == {"ios", "reads", "writes", "errors", "bytes", "elapsed_ns", "iops",
                        "lat_min_ns", "lat_avg_ns", "lat_max_ns"}
    assert res["lat_min_ns"] <= res["lat_avg_ns"] <= res["lat_max_ns"]
    res = rpc_py(target, "workload_run", "-e", "disk0", "-w", "write", "-o", 512,
                 "-q", 2, "-n", 13)[1]
    assert (res["ios"], res["writes"], res["bytes"]) == (13, 13, 13 * 512)
    res = rpc_py(target, "workload_run", "-b", "Null0", "-w", "read", "-o", 4096,
                 "-q", 1, "-T", 1)[1]
    assert res["ios"] > 0 and res["ios"] == res["reads"] and res["errors"] == 0

    stats = rpc_py(target, "target_stats")[1]
    assert stats["state"] == "RUNNING"
    assert stats["threads"] == 2
    assert stats["bdevs"] == 3 and stats["exports"] == 1
    assert stats["io_completed"] == stats["io_submitted"]
    assert stats["io_errors"] == 0

    assert rpc_py(target, "export_delete", "disk0")[1] is True
    assert rpc_py(target, "export_list")[1] == []
    for name in ("Malloc0", "Null0", "File0"):
        assert rpc_py(target, "bdev_delete", name)[1] is True
    assert rpc_py(target, "bdev_list")[1] == []

    assert rpc_py(target, "target_shutdown")[1] is True
    assert target.proc.wait(timeout=probekit.TIMEOUT) == 0
    assert not os.path.exists(target.rpc_sock)


def test_rpc_py_reports_errors(target):
    rc, _, err = rpc_py(target, "bdev_delete", "nosuch", check=False)
    assert rc == 1
    assert err.strip() == "blktgt-rpc: bdev_delete: error -2: no bdev named 'nosuch'"
    # Bad usage never reaches the target: argparse's exit 2, one message.
    for args in (["bdev_null_create", "x", "12abc", "512"],
                 ["bdev_null_create", "x", "-1", "512"],
                 ["workload_run", "-b", "x", "-w", "randread", "-o", "4096", "-q", "1"],
                 ["no_such_method"]):
        rc, _, err = rpc_py(target, *args, check=False)
        assert rc == 2, args
        assert err.startswith("blktgt-rpc") and len(err.splitlines()) == 1, err
    p = subprocess.run([PYTHON, RPC_PY, "-s", target.rpc_sock + ".missing", "bdev_list"],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode == 1 and p.stdout == ""
    assert "blktgt-rpc: bdev_list:" in p.stderr


def test_parse_error_closes_the_connection(target):
    resps, closed = raw_exchange(target.rpc_sock, b'{"jsonrpc": "2.0", "id": 1, "method": x}',
                                 until_close=True)
    assert closed
    assert resps == [{"jsonrpc": "2.0", "id": None,
                      "error": {"code": -32700,
                                "message": "parse error: invalid JSON at byte 38"}}]
    # Truncated input: the error comes when the client ends its side.
    resps, closed = raw_exchange(target.rpc_sock, b'{"jsonrpc": "2.0", "id": 1', shut=True,
                                 until_close=True)
    assert closed and resps[0]["error"]["code"] == -32700
    # The server is still there for the next client.
    assert probekit.rpc_call(target.rpc_sock, "bdev_list") == []


def test_oversized_request(target):
    big = b'{"jsonrpc": "2.0", "id": 1, "method": "bdev_list", "params": {"x": "' + \
        b"a" * (70 * 1024) + b'"}}'
    resps, closed = raw_exchange(target.rpc_sock, big, until_close=True)
    assert closed
    assert resps[0]["error"]["code"] == -32600
    assert "larger than 65536 bytes" in resps[0]["error"]["message"]
    assert probekit.rpc_call(target.rpc_sock, "bdev_list") == []


def test_invalid_requests(target):
    cases = [
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "bdev_list"}]', None, "batch"),
        (b'"hello"', None, "JSON object"),
        (b'{"id": 7, "method": "bdev_list"}', 7, '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc": "1.0", "id": 7, "method": "bdev_list"}', 7, '"jsonrpc"'),
        (b'{"jsonrpc": "2.0", "id": "a", "method": 5}', "a", '"method" must be a string'),
        (b'{"jsonrpc": "2.0", "id": 8, "method": "bdev_list", "extra": 1}', 8,
         "unknown member 'extra'"),
        (b'{"jsonrpc": "2.0", "id": 9, "method": "bdev_list", "method": "bdev_list"}', 9,
         "duplicate member 'method'"),
        (b'{"jsonrpc": "2.0", "id": 9, "id": 10, "method": "bdev_list"}', 9,
         "duplicate member 'id'"),
        (b'{"jsonrpc": "2.0", "id": [1], "method": "bdev_list"}', None, "id must be"),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "bdev_list", "params": 5}', 3,
         '"params" must be'),
    ]
    # All on one connection: an invalid request does not close it.
    data = b"\n".join(c[0] for c in cases) + b"\n" + request("bdev_list", rid=99)
    resps, closed = raw_exchange(target.rpc_sock, data, n=len(cases) + 1)
    assert not closed
    assert len(resps) == len(cases) + 1
    for (_, rid, text), resp in zip(cases, resps):
        assert resp["id"] == rid
        assert resp["error"]["code"] == -32600, resp
        assert text in resp["error"]["message"], resp
    assert resps[-1] == {"jsonrpc": "2.0", "id": 99, "result": []}


def test_unknown_method(target):
    code, msg = error_of(target, "bdev_frobnicate", {"name": "x"})
    assert code == -32601
    assert "bdev_frobnicate" in msg


@pytest.mark.parametrize("method, params, text", [
    ("bdev_null_create", {"size_mb": 8, "block_size": 512}, "missing param 'name'"),
    ("bdev_null_create", {"name": "a", "size_mb": 8}, "missing param 'block_size'"),
    ("bdev_null_create", {"name": "a", "size_mb": "8", "block_size": 512},
     "'size_mb' must be an integer"),
    ("bdev_null_create", {"name": "a", "size_mb": 8.5, "block_size": 512},
     "'size_mb' must be an integer"),
    ("bdev_null_create", {"name": "a", "size_mb": -8, "block_size": 512},
     "'size_mb' must be an integer"),
    ("bdev_null_create", {"name": "a", "size_mb": 0, "block_size": 512},
     "'size_mb' must be an integer in 1.."),
    ("bdev_null_create", {"name": "a", "size_mb": 8, "block_size": 100},
     "'block_size' must be an integer in 512..65536"),
    ("bdev_null_create", {"name": "a", "size_mb": 8, "block_size": 1000},
     "'block_size' a power of two"),
    ("bdev_null_create", {"name": "a", "size_mb": 8, "block_size": 512, "color": "red"},
     "unknown param 'color'"),
    ("bdev_null_create", {"name": "x" * 64, "size_mb": 8, "block_size": 512},
     "'name' must be 1..63 bytes"),
    ("bdev_null_create", {"name": "a b", "size_mb": 8, "block_size": 512}, "'name' must be"),
    ("bdev_malloc_create", {"name": "a", "size_mb": 1 << 20, "block_size": 512}, "'size_mb'"),
    ("bdev_file_create", {"name": "a", "block_size": 512}, "missing param 'path'"),
    ("bdev_delete", {}, "missing param 'name'"),
    ("bdev_delete", None, "missing param 'name'"),
    ("bdev_delete", [1], "params must be an object"),
    ("bdev_list", {"verbose": True}, "unknown param 'verbose'"),
    ("export_create", {"name": "e"}, "missing param 'bdev'"),
    ("workload_run", {"bdev": "n", "pattern": "zigzag", "io_size": 4096, "queue_depth": 1,
                      "count": 1}, "'pattern' must be one of"),
    ("workload_run", {"bdev": "n", "pattern": "read", "io_size": 4096, "queue_depth": 1},
     "exactly one of 'count' and 'seconds'"),
    ("workload_run", {"bdev": "n", "pattern": "read", "io_size": 4096, "queue_depth": 1,
                      "count": 1, "seconds": 1}, "exactly one of 'count' and 'seconds'"),
    ("workload_run", {"pattern": "read", "io_size": 4096, "queue_depth": 1, "count": 1},
     "exactly one of 'bdev' and 'export'"),
    ("workload_run", {"bdev": "n", "pattern": "read", "io_size": 4096, "queue_depth": 0,
                      "count": 1}, "'queue_depth' must be an integer in 1..256"),
    ("workload_run", {"bdev": "n", "pattern": "read", "io_size": 1000, "queue_depth": 1,
                      "count": 1}, "'io_size' must be a multiple of the block size"),
    ("target_shutdown", {"now": True}, "unknown param 'now'"),
])
def test_invalid_params(target, method, params, text):
    target.rpc("bdev_null_create", name="n", size_mb=1, block_size=512)
    code, msg = error_of(target, method, params)
    assert code == -32602, msg
    assert text in msg


def test_duplicate_param(target):
    data = (b'{"jsonrpc": "2.0", "id": 4, "method": "bdev_delete", '
            b'"params": {"name": "a", "name": "b"}}')
    resps, _ = raw_exchange(target.rpc_sock, data + b"\n" + request("bdev_list", rid=5), n=2)
    assert resps[0]["error"] == {"code": -32602,
                                 "message": "invalid params: duplicate param 'name'"}


def test_refusals(target, tmp_path):
    target.rpc("bdev_malloc_create", name="m", size_mb=4, block_size=512)
    code, msg = error_of(target, "bdev_malloc_create", {"name": "m", "size_mb": 4,
                                                        "block_size": 512})
    assert (code, msg) == (-17, "bdev 'm' already exists")
    code, msg = error_of(target, "bdev_null_create", {"name": "m", "size_mb": 4,
                                                      "block_size": 512})
    assert code == -17
    target.rpc("export_create", name="e", bdev="m")
    code, msg = error_of(target, "export_create", {"name": "e", "bdev": "m"})
    assert (code, msg) == (-17, "export 'e' already exists")
    code, msg = error_of(target, "bdev_delete", {"name": "m"})
    assert (code, msg) == (-16, "bdev 'm' is in use by 1 export(s) and 0 workload(s)")
    code, msg = error_of(target, "export_create", {"name": "e2", "bdev": "nosuch"})
    assert (code, msg) == (-2, "no bdev named 'nosuch'")
    code, msg = error_of(target, "export_pause", {"name": "nosuch"})
    assert (code, msg) == (-2, "no export named 'nosuch'")
    code, msg = error_of(target, "export_resume", {"name": "e"})
    assert code == -114     # EALREADY: not paused
    code, msg = error_of(target, "bdev_file_create", {"name": "f", "block_size": 512,
                                                      "path": str(tmp_path / "missing")})
    assert code == -2 and "missing" in msg
    code, msg = error_of(target, "workload_run", {"bdev": "nosuch", "pattern": "read",
                                                  "io_size": 512, "queue_depth": 1,
                                                  "count": 1})
    assert (code, msg) == (-2, "no bdev named 'nosuch'")
    # Refusals changed nothing.
    assert [b["name"] for b in target.rpc("bdev_list")] == ["m"]
    target.rpc("export_delete", name="e")
    assert target.rpc("bdev_delete", name="m") is True


def test_notification_gets_no_reply(target):
    note = b'{"jsonrpc": "2.0", "method": "bdev_null_create", ' \
           b'"params": {"name": "quiet", "size_mb": 1, "block_size": 512}}'
    resps, closed = raw_exchange(target.rpc_sock, note + b"\n" + request("bdev_list", rid=2),
                                 shut=True, until_close=True)
    assert closed and len(resps) == 1 and resps[0]["id"] == 2
    assert [b["name"] for b in resps[0]["result"]] == ["quiet"]


def test_pipelined_requests_answer_in_order(target):
    data = b"".join(request("bdev_null_create", {"name": f"n{i}", "size_mb": 1,
                                                 "block_size": 512}, rid=i)
                    for i in range(23))
    resps, _ = raw_exchange(target.rpc_sock, data + request("bdev_list", rid=23), n=24)
    assert [r["id"] for r in resps] == list(range(24))
    assert len(resps[-1]["result"]) == 23


def test_config_file(blktgt_bin, tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps([
        {"method": "bdev_malloc_create", "params": {"name": "m0", "size_mb": 4,
                                                     "block_size": 512}},
        {"method": "bdev_null_create", "params": {"name": "n0", "size_mb": 4,
                                                   "block_size": 4096}},
        {"method": "export_create", "params": {"name": "disk", "bdev": "m0"}},
    ]))
    t = probekit.Target(blktgt_bin, tmp_path).start(["-c", str(cfg)])
    try:
        assert sorted(b["name"] for b in t.rpc("bdev_list")) == ["m0", "n0"]
        assert t.rpc("export_list") == [{"name": "disk", "bdev": "m0", "state": "ACTIVE",
                                         "clients": 0}]
    finally:
        t.stop()


@pytest.mark.parametrize("content, text", [
    ('[{"method": "bdev_null_create", "params": {"name": "n", "size_mb": 0, '
     '"block_size": 512}}]', "call 1 (bdev_null_create) failed: -32602"),
    ('[{"method": "bdev_list"}, {"method": "nope"}]', "call 2 (nope) failed: -32601"),
    ('[{"method": "bdev_list", "param": {}}]', "call 1: each call is"),
    ('{"method": "bdev_list"}', "must hold a JSON array"),
    ('[{"method": "bdev_list"}', "unexpected end of input"),
])
def test_bad_config_file_fails_start(blktgt_bin, tmp_path, content, text):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(content)
    p = subprocess.run([blktgt_bin, "-s", str(tmp_path / "rpc.sock"), "-l", "none",
                        "-c", str(cfg)], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 1
    assert "running" not in p.stdout
    assert text in p.stderr, p.stderr


def test_rpc_probes_pair(target, bpf):
    prog = r'''
usdt::blktgt:rpc__request { @start[arg0] = 1; @req[str(arg1)] = count(); }
usdt::blktgt:rpc__done /@start[arg0]/ {
    delete(@start[arg0]); @done[str(arg1), (int32)arg2] = count(); }
BEGIN { printf("READY\n"); }
END { clear(@start); }
'''
    proc, out = probekit.bpftrace_program(target.pid, prog)
    for i in range(11):
        target.rpc("bdev_list")
    for i in range(7):
        with pytest.raises(probekit.RpcError):
            target.rpc("bdev_delete", name="nosuch")
    with pytest.raises(probekit.RpcError):
        target.rpc("no_such_method")
    lines = "\n".join(probekit.stop_bpftrace(proc, out))
    assert "@req[bdev_list]: 11" in lines
    assert "@req[bdev_delete]: 7" in lines
    assert "@req[unknown]: 1" in lines
    assert "@done[bdev_list, 0]: 11" in lines
    assert "@done[bdev_delete, -2]: 7" in lines
    assert "@done[unknown, -32601]: 1" in lines
    assert "no_such_method" not in lines


@pytest.mark.parametrize("kind", histtools.KINDS)
def test_unknown_methods_are_one_key_in_rpclat(bpf, target, kind):
    """A client can name any method: 23 calls to 23 methods blktgt does
    not have are one key, "unknown", in rpclat, beside the 7 known calls,
    so a tool keyed by method is bounded by blktgt's method tables."""
    t = histtools.Tool(kind, "rpclat", target.pid).start()
    for i in range(23):
        code, msg = error_of(target, f"no_such_method_{i}")
        assert (code, msg) == (-32601, f"method not found: no_such_method_{i}")
    for _ in range(7):
        target.rpc("bdev_list")
    hists = histtools.by_key(histtools.parse(t.stop()), "method")
    assert {k: histtools.total(h) for k, h in hists.items()} == {
        ("unknown",): 23, ("bdev_list",): 7}


def test_fuzz_harness_replays_its_seeds(tmp_path):
    """The libFuzzer harness of make fuzz-jsonrpc, built standalone with
    ASan+UBSan by the ordinary compiler, replays its seeds clean."""
    root = probekit.ROOT
    exe = tmp_path / "replay"
    srcs = [os.path.join(root, p) for p in
            ("fuzz/jsonrpc_fuzz.c", "target/json.c", "target/jsonrpc_parse.c")]
    subprocess.run(["cc", "-std=gnu11", "-D_GNU_SOURCE", "-g", "-O1", "-Wall", "-Wextra",
                    "-Werror", "-I" + os.path.join(root, "target"),
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                    "-DJSONRPC_FUZZ_STANDALONE", "-o", str(exe), *srcs],
                   check=True, timeout=probekit.TIMEOUT)
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    subprocess.run([str(exe), "--seeds", str(seeds)], check=True, timeout=probekit.TIMEOUT)
    files = sorted(str(p) for p in seeds.iterdir())
    assert len(files) == 22
    p = subprocess.run([str(exe), *files], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "jsonrpc_fuzz: 22 inputs replayed, no invariant broken\n"


def exchange_bytes(sock_path, data, shut=False):
    """Send raw bytes and read every byte the server sends until it closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(probekit.TIMEOUT)
        s.connect(sock_path)
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return buf
            buf += chunk


def strict_replies(raw):
    """Each reply line as JSON, after checking the bytes are UTF-8."""
    text = raw.decode("utf-8")      # strict: raises on any bad sequence
    return [json.loads(line) for line in text.splitlines() if line.strip()]


BAD_UTF8 = "invalid UTF-8 in a string"
BAD_SURROGATE = "a \\u escape of an unpaired UTF-16 surrogate"


@pytest.mark.parametrize("data, at, what", [
    # raw bytes that are not UTF-8, in the id, the method and a param
    (b'{"jsonrpc":"2.0","id":"\xc0\xaf","method":"bdev_list"}', b"\xc0", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":"\xc1\xbf","method":"bdev_list"}', b"\xc1", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xe0\x80\xaf"}', b"\xe0", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xe0\x9f\xbf"}', b"\xe0", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"\xf0\x80\x80\xaf"}}',
     b"\xf0", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"\xf0\x8f\xbf\xbf"}}',
     b"\xf0", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"m"}', b"\xed", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xed\xbf\xbf"}', b"\xed", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xf4\x90\x80\x80"}', b"\xf4", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xf7\xbf\xbf\xbf"}', b"\xf7", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":"\xe2\x82","method":"m"}', b"\xe2", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"ab\xf0\x9f\x98x"}', b"\xf0", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"a\x80"}', b"\x80", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xbf\xbf"}', b"\xbf", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', b"\xff", BAD_UTF8),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xc3\xa9\xfe"}', b"\xfe", BAD_UTF8),
    # \u escapes of surrogates that have no pair
    (b'{"jsonrpc":"2.0","id":"\\ud800","method":"m"}', b"\\ud800", BAD_SURROGATE),
    (b'{"jsonrpc":"2.0","id":1,"method":"\\udfffx"}', b"\\udfff", BAD_SURROGATE),
    (b'{"jsonrpc":"2.0","id":1,"method":"\\ud83d\\u0041"}', b"\\ud83d", BAD_SURROGATE),
    (b'{"jsonrpc":"2.0","id":1,"method":"\\udbff\\ud800"}', b"\\udbff", BAD_SURROGATE),
    (b'{"jsonrpc":"2.0","id":1,"method":"\\ude00\\ud83d"}', b"\\ude00", BAD_SURROGATE),
])
def test_bad_utf8_is_a_parse_error(target, data, at, what):
    """Every reply is valid UTF-8 JSON: text that is not UTF-8 is refused
    with -32700 naming the offset, never quoted back."""
    resps = strict_replies(exchange_bytes(target.rpc_sock, data, shut=True))
    assert resps == [{"jsonrpc": "2.0", "id": None, "error": {
        "code": -32700, "message": f"parse error: {what} at byte {data.index(at)}"}}]
    assert probekit.rpc_call(target.rpc_sock, "bdev_list") == []


def test_good_utf8_is_quoted_back(target):
    """Well-formed UTF-8 up to U+10FFFF, raw or as escapes (a surrogate
    pair), reaches the method and comes back intact."""
    name = "\u00e9\u20ac\U0001f600\U0010ffff"
    data = ('{"jsonrpc":"2.0","id":"\u00e9\\ud83d\\ude00","method":"%s"}' % name).encode()
    resps = strict_replies(exchange_bytes(target.rpc_sock, data, shut=True))
    assert resps == [{"jsonrpc": "2.0", "id": "\u00e9\U0001f600", "error": {
        "code": -32601, "message": f"method not found: {name}"}}]
    # A truncated sequence at the end of the input waits for more, then is
    # the end of input it is.
    resps = strict_replies(exchange_bytes(
        target.rpc_sock, b'{"jsonrpc":"2.0","id":1,"method":"\xf0\x9f\x98', shut=True))
    assert resps[0]["error"] == {"code": -32700,
                                 "message": "parse error: unexpected end of input"}


def test_mangled_requests_get_utf8_json_replies(target):
    """499 requests (a prime), each with random bytes put into its id,
    method or a param: every reply is valid UTF-8 JSON, and each request
    whose text is not UTF-8 gets -32700."""
    rng = random.Random(1009)
    template = '{"jsonrpc":"2.0","id":"%s","method":"%s","params":{"name":"%s"}}'
    not_utf8 = 0
    for _ in range(499):
        junk = bytes(rng.randrange(0x80, 0x100) if rng.random() < 0.7
                     else rng.choice(b"az09 ~") for _ in range(rng.randrange(1, 6)))
        fields = [b"n", b"bdev_list", b"n"]
        fields[rng.randrange(3)] = b"a" + junk
        data = template.encode() % tuple(fields)
        resps = strict_replies(exchange_bytes(target.rpc_sock, data, shut=True))
        assert len(resps) == 1, data
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            not_utf8 += 1
            assert resps[0]["error"]["code"] == -32700, (data, resps)
            assert BAD_UTF8 in resps[0]["error"]["message"]
    assert not_utf8 > 100


def test_stall_limit_closes_a_half_sent_request(blktgt_bin, tmp_path):
    """-i 1: a client that sends half a request is closed once the limit
    has passed; an idle client, connected before it, is not timed."""
    t = probekit.Target(blktgt_bin, tmp_path, extra=["-i", "1"]).start()
    try:
        idle = unix_client(t.rpc_sock)
        stalled = unix_client(t.rpc_sock)
        stalled.sendall(HALF)
        assert closed_by_server(stalled)
        t.out.wait_for(r"rpc: closing fd \d+: the rest of its request did not come "
                       rf"within 1 s \({len(HALF)} bytes of a request held\)")
        assert still_open(idle)
        idle.sendall(request("bdev_list", rid=3))
        assert decode_all(idle.recv(65536)) == [{"jsonrpc": "2.0", "id": 3, "result": []}]
        idle.close()
        stalled.close()
    finally:
        t.stop()
