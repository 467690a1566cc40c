# SPDX-License-Identifier: BSD-2-Clause
"""probekit-exporter run by a test: the process and its readiness, a scrape
read back into samples, and a real Prometheus that scrapes it."""

import http.client
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse

import pytest

import probekit


SCRAPE = "1s"


def exporter_bin(build):
    path = os.path.join(build, "bin", "probekit-exporter")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built; run the suite with 'make test'")
    return path


class Exporter:
    """A probekit-exporter on an ephemeral loopback port."""

    def __init__(self, build, args):
        self.proc = subprocess.Popen(
            [exporter_bin(build), "--listen", "127.0.0.1:0"] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.out = probekit.LineReader(self.proc.stdout)
        m = self.out.wait_for(r"at http://127\.0\.0\.1:(\d+)/metrics\.\.\. "
                              r"Hit Ctrl-C to end\.")
        self.port = int(m.group(1))
        self.addr = f"127.0.0.1:{self.port}"

    def request(self, method="GET", path="/metrics", headers=None, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port,
                                       timeout=probekit.TIMEOUT)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r.getheader("Content-Type"), r.read().decode()
        finally:
            c.close()

    def scrape(self, openmetrics=False):
        headers = {"Accept": "application/openmetrics-text;version=1.0.0,"
                   "text/plain;version=0.0.4;q=0.5"} if openmetrics else {}
        status, ctype, body = self.request(headers=headers)
        assert status == 200, body
        return ctype, body

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(timeout=probekit.TIMEOUT)
        lines = self.out.drain(5)
        assert rc == 0, "exporter exited %d:\n%s" % (rc, "\n".join(lines))


def sample(body, series):
    """The value of one series line ('name{labels}') of a scrape."""
    for line in body.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """Debian's prometheus, scraping one target every SCRAPE, with its
    storage in the test's tmpdir."""

    def __init__(self, tmp_path, target):
        self.dir = tmp_path / "prometheus"
        self.dir.mkdir()
        cfg = self.dir / "prometheus.yml"
        cfg.write_text(
            "global:\n"
            f"  scrape_interval: {SCRAPE}\n"
            f"  scrape_timeout: {SCRAPE}\n"
            "scrape_configs:\n"
            "  - job_name: probekit\n"
            "    static_configs:\n"
            f"      - targets: ['{target}']\n")
        # Its port is picked free, then bound by prometheus: on the rare
        # lost race it exits, and another port is tried.
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                ["prometheus", f"--config.file={cfg}",
                 f"--storage.tsdb.path={self.dir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 "--web.console.templates=", "--web.console.libraries="],
                cwd=self.dir, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT)
            self.out = probekit.LineReader(self.proc.stdout)
            m = self.out.wait_for(r"Server is ready to receive web requests"
                                  r"|address already in use")
            if "ready" in m.group(0):
                return
            self.proc.wait(timeout=probekit.TIMEOUT)
        pytest.fail("prometheus found no free port in 5 tries")

    def query(self, q):
        """The instant vector of q: {labels-without-__name__: (ts, value)}."""
        c = http.client.HTTPConnection("127.0.0.1", self.port,
                                       timeout=probekit.TIMEOUT)
        try:
            c.request("GET", "/api/v1/query?" +
                      urllib.parse.urlencode({"query": q}))
            resp = json.loads(c.getresponse().read())
        finally:
            c.close()
        assert resp["status"] == "success", resp
        return {tuple(sorted((k, v) for k, v in e["metric"].items()
                             if k != "__name__")):
                (float(e["value"][0]), float(e["value"][1]))
                for e in resp["data"]["result"]}

    def one(self, q):
        """q's single (timestamp, value), or None while it has none."""
        r = self.query(q)
        assert len(r) <= 1, r
        return next(iter(r.values())) if r else None

    def value(self, q):
        """q's value, waited for: a scrape that times out on a loaded
        machine marks every series of the target stale until the next
        one, and a stale series has no value."""
        end = time.monotonic() + probekit.TIMEOUT
        while time.monotonic() < end:
            v = self.one(q)
            if v is not None:
                return v[1]
            time.sleep(0.1)
        pytest.fail(f"{q} has no value")

    def wait_value(self, q, want, stamp=None):
        """Wait until q reaches want (a scrape after the workload), then
        check that it is exactly want and still is one scrape later.
        stamp is the query of q's scrape time: timestamp(q) for a
        selector; an aggregation has none of its own, so it names one."""
        stamp = stamp or f"timestamp({q})"
        end = time.monotonic() + probekit.TIMEOUT
        got = None
        while time.monotonic() < end:
            # The value first: a series that appears between the two
            # queries then has its stamp too, from that scrape or later.
            got = self.one(q), self.one(stamp)
            if got[0] is not None and got[0][1] >= want:
                break
            time.sleep(0.1)
        assert got[0] is not None and got[0][1] == want, \
            f"{q}: {got[0]}, expected {want}"
        ts = got[1][1] if got[1] else 0
        later = None
        while time.monotonic() < end:
            later = self.one(stamp)
            if later and later[1] > ts:
                break
            time.sleep(0.1)
        assert later and later[1] > ts, f"no scrape of {q} after {ts}"
        assert self.value(q) == want, f"{q} moved past {want}"

    def wait_up(self):
        end = time.monotonic() + probekit.TIMEOUT
        while time.monotonic() < end:
            v = self.one('up{job="probekit"}')
            if v and v[1] == 1:
                return
            time.sleep(0.1)
        pytest.fail("prometheus never scraped the exporter:\n" +
                    "\n".join(self.out.lines[-20:]))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=probekit.TIMEOUT)
        assert rc == 0, "prometheus exited %d" % rc


@pytest.fixture
def exporter(build):
    started = []

    def start(*args):
        e = Exporter(build, args)
        started.append(e)
        return e
    yield start
    for e in started:
        e.stop()


def series_dropped(family):
    return f'probekit_exporter_series_dropped_total{{family="{family}"}}'
