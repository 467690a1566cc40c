# SPDX-License-Identifier: BSD-2-Clause
"""nbd_wire: what an NBD client sends, as bytes (the NBD protocol's
newstyle negotiation and transmission requests).  The one encoder for
tests/target/test_nbd.py's raw-socket client and fuzz/nbd_seeds.py's seeds, so
both speak the protocol the same way; replies are decoded where they are
read."""

import struct

NBD_MAGIC = 0x4E42444D41474943
OPTS_MAGIC = 0x49484156454F5054
REP_MAGIC = 0x3E889045565A9
REQUEST_MAGIC = 0x25609513
REPLY_MAGIC = 0x67446698

OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_INFO, OPT_GO = 1, 2, 3, 6, 7
OPT_STRUCTURED_REPLY = 8
REP_ACK, REP_SERVER, REP_INFO = 1, 2, 3
INFO_EXPORT, INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE = 0, 1, 2, 3
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_TRIM = 0, 1, 2, 3, 4
FLAG_FUA = 1
CLIENT_FIXED_NEWSTYLE_NO_ZEROES = 3


def client_flags(cflags=CLIENT_FIXED_NEWSTYLE_NO_ZEROES):
    """The client's flags, its first four bytes."""
    return struct.pack(">I", cflags)


def option(opt, data=b"", length=None):
    """An option; length, when given, is what the header claims instead
    of len(data) (to send a lie)."""
    n = len(data) if length is None else length
    return struct.pack(">QII", OPTS_MAGIC, opt, n) + data


def info_go(opt, name, infos=()):
    """NBD_OPT_INFO or NBD_OPT_GO for export name, asking for infos."""
    n = name.encode() if isinstance(name, str) else name
    return option(opt, struct.pack(">I", len(n)) + n +
                  struct.pack(">H", len(infos)) +
                  b"".join(struct.pack(">H", i) for i in infos))


def request(cmd, offset=0, length=0, flags=0, handle=1, payload=b""):
    """A transmission request, followed by payload (a write's data)."""
    return struct.pack(">IHHQQI", REQUEST_MAGIC, flags, cmd, handle, offset,
                       length) + payload
