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

OPTS_MAGIC = 0x49484156454F5054
REQ_MAGIC = 0x25609513


def option(opt, data=b""):
    return struct.pack(">QII", OPTS_MAGIC, opt, len(data)) + data


def info_go(opt, name, infos=()):
    n = name.encode()
    return option(opt, struct.pack(">I", len(n)) + n +
                  struct.pack(">H", len(infos)) +
                  b"".join(struct.pack(">H", i) for i in infos))


def request(cmd, offset=0, length=0, flags=0, handle=1):
    r = struct.pack(">IHHQQI", REQ_MAGIC, flags, cmd, handle, offset, length)
    return r + (b"\xab" * length if cmd == 1 else b"")


FLAGS = struct.pack(">I", 3)  # FIXED_NEWSTYLE | NO_ZEROES
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
