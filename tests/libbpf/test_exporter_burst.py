# SPDX-License-Identifier: BSD-2-Clause
"""probekit-exporter's HTTP side under a burst: 200 connections from one
address, opened at once, none finishing its request, never keep a scrape
from another address out.

Checked by state, not by the clock: the burst's connections are all
established (each connect() completed) and have each sent a byte before
the scrape; the scrape, one connection from 127.0.0.2 with no retry, is
answered, and its own body says the exporter held 201 connections (the
burst's and its own) and refused or closed none; then none of the burst's
200 has been closed by the exporter.
"""

import http.client
import os
import select
import shutil
import socket

import pytest

import probekit
from probekit import TIMEOUT
from exporter_client import Exporter, sample

BURST = 200


@pytest.fixture
def tp(tmp_path):
    """Any file with probes to trace: a copy of blktgt's, run by nobody."""
    path = str(tmp_path / "blktgt")
    shutil.copy2(os.path.join(probekit.BUILD, "bin", "blktgt"), path)
    return path


def burst(port, source, n):
    """n connections from source, connected at once (non-blocking), each
    once established sending one byte of a request it never finishes."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.bind((source, 0))
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        socks.append(s)
    p = select.poll()
    for s in socks:
        p.register(s, select.POLLOUT)
    pending = {s.fileno() for s in socks}
    while pending:
        ready = p.poll(TIMEOUT * 1000)
        assert ready, f"{len(pending)} of {n} connections never completed"
        for fd, _ in ready:
            pending.discard(fd)
            p.unregister(fd)
    for s in socks:
        assert s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
        assert s.send(b"G") == 1
    return socks


def closed_by_server(socks):
    """The sockets the server has closed (EOF or reset readable)."""
    p = select.poll()
    for s in socks:
        p.register(s, select.POLLIN)
    return p.poll(0)


def test_burst_from_one_address_never_keeps_a_scrape_out(bpf, build, tp):
    e = Exporter(build, ["-b", tp, "--count", "c=blktgt:io__submit"])
    socks = []
    try:
        socks = burst(e.port, "127.0.0.1", BURST)
        # One connection, no retry: http.client raises on a reset or a
        # close without an answer.
        c = http.client.HTTPConnection("127.0.0.1", e.port, timeout=TIMEOUT,
                                       source_address=("127.0.0.2", 0))
        try:
            c.request("GET", "/metrics")
            r = c.getresponse()
            status, body = r.status, r.read().decode()
        finally:
            c.close()
        assert status == 200, body
        assert sample(body, "probekit_exporter_http_connections") == \
            BURST + 1, body
        for reason in ("address_limit", "server_limit", "displaced",
                       "deadline"):
            assert sample(body, 'probekit_exporter_http_closed_total'
                          f'{{reason="{reason}"}}') == 0, body
        assert closed_by_server(socks) == []
    finally:
        for s in socks:
            s.close()
        e.stop()
