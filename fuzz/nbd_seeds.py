#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
"""nbd_seeds.py DIR: write seed inputs for fuzz/nbd_fuzz.c into DIR.

Each seed is one byte of mode (even: negotiation, odd: transmission)
followed by what a well-behaved client sends, so the fuzzer starts from
every option and command the server understands rather than from nothing.
"""

import os
import struct
import sys

# The wire's encoder is the one tests/target/test_nbd.py's raw client uses.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__))), "tests", "lib"))
import nbd_wire as wire  # noqa: E402
from nbd_wire import info_go, option  # noqa: E402


def request(cmd, offset=0, length=0, flags=0, handle=1):
    """A request; a write (cmd 1) carries its data, as the server reads it."""
    return wire.request(cmd, offset, length, flags, handle,
                        b"\xab" * length if cmd == wire.CMD_WRITE else b"")


FLAGS = wire.client_flags()  # FIXED_NEWSTYLE | NO_ZEROES
SEEDS = {
    "neg-go": b"\0" + FLAGS + info_go(7, "disk", (3, 1, 2)),
    "neg-info-go": b"\0" + FLAGS + info_go(6, "null", (3,)) + info_go(7, "null"),
    "neg-list-abort": b"\0" + FLAGS + option(3) + option(2),
    "neg-sr-go-default": b"\0" + FLAGS + option(8) + info_go(7, ""),
    "neg-export-name": b"\0" + struct.pack(">I", 1) + option(1, b"disk"),
    "neg-unknown": b"\0" + FLAGS + info_go(7, "nope") + option(99, b"xyz"),
    "req-mix": b"\1" + bytes([0, 8, 9]) + request(0, 0, 4096) +
               request(1, 4096, 512, 1) + request(3) + request(4, 0, 8192) +
               request(2),
    "req-bad": b"\1" + bytes([0, 8, 9]) + request(0, 1 << 40, 512) +
               request(7, 0, 512) + request(0, 3, 5) +
               struct.pack(">IHHQQI", 0x12345678, 0, 0, 0, 0, 0),
}


def main():
    if len(sys.argv) != 2:
        print("usage: nbd_seeds.py DIR", file=sys.stderr)
        return 2
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(sys.argv[1], name), "wb") as f:
            f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
