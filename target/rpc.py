#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""blktgt-rpc: blktgt's JSON-RPC client (stdlib only).

  blktgt-rpc [-s PATH] [-t TIMEOUT] METHOD ARGS...

Prints the method's JSON result and exits 0; on an error prints it on
stderr and exits 1 (2 for bad usage).

examples:
  blktgt-rpc bdev_malloc_create -b Malloc0 64 512
  blktgt-rpc bdev_null_create Null0 1024 4096
  blktgt-rpc bdev_file_create File0 /var/tmp/disk.img 4096
  blktgt-rpc bdev_delay_create Slow0 Malloc0 2000 5000   # +2 ms reads, +5 ms writes
  blktgt-rpc export_create disk0 Malloc0
  blktgt-rpc workload_run -b Null0 -w randread -o 4096 -q 32 -n 100000
  blktgt-rpc workload_run -e disk0 -w randwrite -o 4096 -q 8 -T 5
  blktgt-rpc bdev_flush File0
  blktgt-rpc target_stats
  blktgt-rpc trace_enable_group bdev        # then: blktgt-trace -p PID
"""

import argparse
import json
import os
import socket
import sys

DEFAULT_SOCK = "/var/tmp/blktgt.sock"
MAX_RESPONSE = 4 * 1024 * 1024  # bytes; the server's replies are far smaller


def call(sock_path, method, params=None, timeout=None):
    """One JSON-RPC 2.0 request; returns the response object."""
    req = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        req["params"] = params
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(json.dumps(req).encode())
        dec = json.JSONDecoder()
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("the target closed the connection "
                                      "without a reply")
            buf += chunk
            if len(buf) > MAX_RESPONSE:
                raise ValueError(f"reply larger than {MAX_RESPONSE} bytes")
            try:
                resp, _ = dec.raw_decode(buf.decode().lstrip())
                return resp
            except (ValueError, UnicodeDecodeError):
                continue


def positive(text):
    """An integer > 0, nothing else ("12abc", "0x10", "-1" are refused)."""
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def nonnegative(text):
    """An integer >= 0, nothing else."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return int(text)


def mask_arg(text):
    """A trace mask: decimal or 0x hex, not 0."""
    try:
        v = int(text, 0)
    except ValueError:
        v = 0
    if v <= 0 or v >= 1 << 64:
        raise argparse.ArgumentTypeError(f"expected a mask (decimal or 0x hex), got {text!r}")
    return v


# probes/probelib.cmdline: the argparse base every probekit command shares
# (one-line usage errors) and the one reader of VERSION.  probes/ sits
# beside target/ in the checkout and under PREFIX/share/probekit.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__))), "probes"))
from probelib import privilege  # noqa: E402
from probelib.cmdline import Parser, VersionAction  # noqa: E402


def build_parser():
    p = Parser(
        prog="blktgt-rpc", description="Control a running blktgt over JSON-RPC.",
        epilog=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    # -s is blktgt's --rpc-socket too; -t is the timeout, as in SPDK's rpc.py.
    p.add_argument("-s", "--rpc-socket", dest="sock", metavar="PATH", default=DEFAULT_SOCK,
                   help=f"RPC socket (default {DEFAULT_SOCK})")
    p.add_argument("-t", "--timeout", dest="timeout", type=positive, default=None,
                   help="seconds to wait for the reply (default: no limit)")
    p.add_argument("--version", action=VersionAction)
    sub = p.add_subparsers(dest="method", metavar="METHOD")
    sub.required = True

    def method(name, help_):
        return sub.add_parser(name, help=help_, description=help_)

    m = method("bdev_malloc_create", "create a RAM bdev")
    m.add_argument("-b", dest="name", required=True, help="bdev name")
    m.add_argument("size_mb", type=positive)
    m.add_argument("block_size", type=positive)

    m = method("bdev_null_create", "create a null bdev (reads zeroes, discards writes)")
    m.add_argument("name")
    m.add_argument("size_mb", type=positive)
    m.add_argument("block_size", type=positive)

    m = method("bdev_file_create", "create a bdev on an existing file")
    m.add_argument("name")
    m.add_argument("path")
    m.add_argument("block_size", type=positive)

    m = method("bdev_delay_create",
               "create a bdev over BASE whose reads and writes take READ_US/WRITE_US longer")
    m.add_argument("name")
    m.add_argument("base", help="the bdev it wraps")
    m.add_argument("read_us", type=nonnegative, help="added read latency, microseconds")
    m.add_argument("write_us", type=nonnegative, help="added write latency, microseconds")

    for name, help_ in (("bdev_delete", "delete a bdev"),
                        ("bdev_flush", "flush a bdev (file: fdatasync)"),
                        ("export_delete", "stop and delete an export"),
                        ("export_pause", "pause an export (I/O is held, not lost)"),
                        ("export_resume", "resume a paused export"),
                        ("trace_disable_group", "stop recording a trace ring group")):
        method(name, help_).add_argument("name")

    m = method("trace_enable_group", "record a trace ring group (blktgt -e help lists them)")
    m.add_argument("name", help="group, or all")
    m.add_argument("mask", nargs="?", type=mask_arg,
                   help="tracepoints of the group by bit (default: all of them)")

    m = method("export_create", "export a bdev under a name")
    m.add_argument("name")
    m.add_argument("bdev")

    for name, help_ in (("bdev_list", "list bdevs"), ("export_list", "list exports"),
                        ("target_stats", "the target's state and counters"),
                        ("target_shutdown", "stop the target cleanly"),
                        ("trace_get_info", "trace ring groups, file and dump command")):
        method(name, help_)

    m = method("workload_run", "run the built-in workload generator")
    what = m.add_mutually_exclusive_group(required=True)
    what.add_argument("-b", dest="bdev", help="bdev to drive")
    what.add_argument("-e", dest="export", help="export to drive (honours pause)")
    m.add_argument("-w", dest="pattern", required=True,
                   choices=["read", "write", "randread", "randwrite", "randrw"])
    m.add_argument("-o", dest="io_size", type=positive, required=True, help="I/O size, bytes")
    m.add_argument("-q", dest="queue_depth", type=positive, required=True)
    howmuch = m.add_mutually_exclusive_group(required=True)
    howmuch.add_argument("-n", dest="count", type=positive, help="exactly this many I/Os")
    howmuch.add_argument("-T", dest="seconds", type=positive, help="run this many seconds")
    return p


def params_of(a):
    m = a.method
    if m in ("bdev_malloc_create", "bdev_null_create"):
        return {"name": a.name, "size_mb": a.size_mb, "block_size": a.block_size}
    if m == "bdev_file_create":
        return {"name": a.name, "path": a.path, "block_size": a.block_size}
    if m == "bdev_delay_create":
        return {"name": a.name, "base": a.base, "read_us": a.read_us, "write_us": a.write_us}
    if m in ("bdev_delete", "bdev_flush", "export_delete", "export_pause", "export_resume",
             "trace_disable_group"):
        return {"name": a.name}
    if m == "trace_enable_group":
        return {"name": a.name, **({"mask": a.mask} if a.mask is not None else {})}
    if m == "export_create":
        return {"name": a.name, "bdev": a.bdev}
    if m == "workload_run":
        p = {"pattern": a.pattern, "io_size": a.io_size, "queue_depth": a.queue_depth}
        p.update({k: getattr(a, k) for k in ("bdev", "export", "count", "seconds")
                  if getattr(a, k) is not None})
        return p
    return None


def main():
    a = build_parser().parse_args()
    try:
        resp = call(a.sock, a.method, params_of(a), a.timeout)
    except OSError as e:
        # blktgt's socket is mode 0755: another user's needs a capability.
        print("blktgt-rpc: " + privilege.explain(
            "blktgt-rpc", f"{a.method}: {a.sock}",
            "connecting to another user's socket", e), file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"blktgt-rpc: {a.method}: {a.sock}: {e}", file=sys.stderr)
        return 1
    if "error" in resp:
        err = resp["error"]
        print(f"blktgt-rpc: {a.method}: error {err.get('code')}: {err.get('message')}",
              file=sys.stderr)
        return 1
    print(json.dumps(resp.get("result"), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
