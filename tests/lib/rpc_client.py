# SPDX-License-Identifier: BSD-2-Clause
"""A client of blktgt's JSON-RPC unix socket, and what a test asks of the
server's side of a connection (tests/target/test_target_rpc.py and
test_target_rpc_load.py)."""

import socket

import probekit


def closed_by_server(sock):
    """Wait (bounded by the socket's timeout) for the server to close sock;
    true on end of file or reset, false if data came instead."""
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True


def still_open(sock):
    """Nothing to read and no end of file: the server has not closed it."""
    sock.setblocking(False)
    try:
        sock.recv(4096)
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)
    return False


def unix_client(path):
    """A connected client; the connect blocks while the backlog is full
    (a unix socket with a timeout would fail with EAGAIN instead)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(probekit.TIMEOUT)
    return s


HALF = b'{"jsonrpc": "2.0", "id": 1, "meth'
