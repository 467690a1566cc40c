# SPDX-License-Identifier: BSD-2-Clause
"""A raw NBD client of blktgt (tests/lib/nbd_wire.py's messages on a
socket), the exports it needs, and blktgt's counters read by RPC."""

import socket
import struct

import nbd_wire as wire
from nbd_wire import (INFO_BLOCK_SIZE, INFO_EXPORT, NBD_MAGIC, OPT_GO, OPTS_MAGIC,
                      REP_ACK, REP_INFO, REP_MAGIC, REPLY_MAGIC)


def make_export(target, name="e0", size_mb=64, block_size=512, kind="malloc",
                bdev=None):
    bdev = bdev or name + "_bdev"
    target.rpc(f"bdev_{kind}_create", name=bdev, size_mb=size_mb,
               block_size=block_size)
    target.rpc("export_create", name=name, bdev=bdev)
    return bdev


def stats(target):
    return target.rpc("target_stats")


class RawNbd:
    """A deliberately low-level NBD client: every field is the caller's."""

    def __init__(self, target, timeout=30):
        self.sock = socket.create_connection(("127.0.0.1", target.port),
                                             timeout=timeout)
        magic, opts, hflags = struct.unpack(">QQH", self.recv(18))
        assert magic == NBD_MAGIC and opts == OPTS_MAGIC
        assert hflags & 1, "server must offer fixed newstyle"
        self.hflags = hflags

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def recv(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
            buf += chunk
        return buf

    def closed_by_server(self):
        """True once the server has closed the connection (EOF/reset)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def rest(self):
        """Everything the server still sends, up to its close."""
        data = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return data
                data += chunk
        except ConnectionResetError:
            return data

    def flags(self, cflags=3):
        self.send(wire.client_flags(cflags))

    def option(self, opt, data=b"", length=None):
        self.send(wire.option(opt, data, length))

    def reply(self):
        magic, opt, rtype, n = struct.unpack(">QIII", self.recv(20))
        assert magic == REP_MAGIC
        return opt, rtype, self.recv(n)

    def info_go(self, opt, name, infos=()):
        """Send NBD_OPT_INFO/GO; return ([(info type, payload)], final)."""
        self.send(wire.info_go(opt, name, infos))
        infos_seen = []
        while True:
            ropt, rtype, data = self.reply()
            assert ropt == opt
            if rtype != REP_INFO:
                return infos_seen, rtype
            infos_seen.append((struct.unpack(">H", data[:2])[0], data[2:]))

    def go(self, name="e0"):
        self.flags()
        infos, final = self.info_go(OPT_GO, name, (INFO_BLOCK_SIZE,))
        assert final == REP_ACK
        size, tflags = struct.unpack(">QH", dict(infos)[INFO_EXPORT])
        return size, tflags

    def request(self, cmd, offset=0, length=0, flags=0, handle=1,
                payload=None):
        self.send(wire.request(cmd, offset, length, flags, handle,
                               payload or b""))

    def simple_reply(self, datalen=0):
        magic, error, handle = struct.unpack(">IIQ", self.recv(16))
        assert magic == REPLY_MAGIC
        data = self.recv(datalen) if error == 0 and datalen else b""
        return error, handle, data
