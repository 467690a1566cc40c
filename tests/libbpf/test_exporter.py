# SPDX-License-Identifier: BSD-2-Clause
"""probekit-exporter, scraped directly and by a real Prometheus.

Counts are asserted exactly, from known workloads, as raw _count values
read through Prometheus' HTTP API, never through increase(), which
extrapolates.  A value read from Prometheus is waited for (a scrape comes
every SCRAPE), then checked to be exact and to stay so over a later
scrape, so an overcount cannot hide behind the wait.

The latency test runs on a delay bdev whose reads take READ_US longer:
every read's latency then lies in one power-of-two bucket (checked from
the workload's own min and max), so the median does too, and
histogram_quantile(0.5, ...) must fall inside it.  The delay is large
against the scheduling noise of a loaded machine, as in
test_bdev_delay.py.
"""

import concurrent.futures
import fractions
import math
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time

import pytest

import histtools
import probekit
from thirdparty import PG_BIN, PG_NEEDS
from thirdparty import pg  # noqa: F401 (a fixture)
from exporter_client import Prometheus, exporter_bin, sample, series_dropped
from exporter_client import exporter  # noqa: F401 (a fixture)

pytestmark = pytest.mark.needs("prometheus", "promtool")

# 1040 ms: in (1, 2] seconds, with 960 ms to spare above.  The latency
# test bounds every read by the workload's own fastest and slowest, so a
# read that load stretches into the next bucket is still checked; the
# spare keeps the median's bucket the delay's.  Each run submits all its
# reads at once (queue depth = count), so each takes one delay.
READ_US = 1040000


def lat_bucket(ns):
    """The exporter's latency bucket of ns: (lower, upper] seconds."""
    k = math.ceil(math.log2(ns / 1e9))
    while ns > math.floor(2.0 ** k * 1e9):
        k += 1
    while ns <= math.floor(2.0 ** (k - 1) * 1e9):
        k -= 1
    return 2.0 ** (k - 1), 2.0 ** k


@pytest.fixture
def prometheus_for(tmp_path):
    started = []

    def start(target):
        p = Prometheus(tmp_path, target)
        started.append(p)
        p.wait_up()
        return p
    yield start
    for p in started:
        p.stop()


def test_blktgt_latency_through_prometheus(bpf, target, exporter,
                                           prometheus_for):
    target.rpc("bdev_malloc_create", name="M0", size_mb=16, block_size=512)
    target.rpc("bdev_delay_create", name="D0", base="M0", read_us=READ_US,
               write_us=READ_US)
    e = exporter("-p", str(target.pid))
    prom = prometheus_for(e.addr)
    count = 'probekit_io_latency_seconds_count{bdev="D0",type="read"}'
    size = 'probekit_io_size_bytes_count{bdev="D0",type="read"}'
    size_sum = 'probekit_io_size_bytes_sum{bdev="D0",type="read"}'

    first = target.rpc("workload_run", bdev="D0", pattern="randread",
                       io_size=4096, queue_depth=11, count=11)
    assert first["ios"] == 11
    prom.wait_value(count, 11)

    run = target.rpc("workload_run", bdev="D0", pattern="randread",
                     io_size=4096, queue_depth=23, count=23)
    assert run["ios"] == 23 and run["errors"] == 0
    prom.wait_value(count, 11 + 23)
    assert prom.value(size) == 34
    assert prom.value(size_sum) == 34 * 4096

    # The workload's own fastest and slowest reads bound every read: each
    # of the 34 lies in their buckets or between, in the exporter's own
    # histogram, however far load stretched the slowest.  The delay puts
    # them all in (1, 2] s on a machine that keeps up, and never below.
    lo = lat_bucket(min(first["lat_min_ns"], run["lat_min_ns"]))[0]
    hi = lat_bucket(max(first["lat_max_ns"], run["lat_max_ns"]))[1]
    assert lo == 1.0, (first, run)
    _, body = e.scrape()
    le = 'probekit_io_latency_seconds_bucket{bdev="D0",type="read",le="%.17g"}'
    assert (sample(body, le % lo), sample(body, le % hi)) == (0, 34), body
    q = prom.value('histogram_quantile(0.5, sum by (le) '
                   '(probekit_io_latency_seconds_bucket{bdev="D0",type="read"}))')
    assert lo < q <= hi, f"median {q} outside ({lo}, {hi}]"


def test_rpc_and_nbd_metrics(bpf, target, exporter):
    target.rpc("bdev_malloc_create", name="M0", size_mb=4, block_size=512)
    target.rpc("export_create", name="disk0", bdev="M0")
    e = exporter("-p", str(target.pid), "--nbd-commands")
    for _ in range(7):
        target.rpc("target_stats")
    # A method name from a client is not a label value: a method blktgt
    # does not have is "unknown", whatever its name (issue 26, item 5).
    with pytest.raises(probekit.RpcError):
        target.rpc('we"ird\\name\nx')
    subprocess.run(["qemu-io", "-f", "raw", "-r", "-c", "read 0 4096",
                    "-c", "read 4096 4096", "-c", "read 0 512",
                    target.nbd_uri("disk0")], check=True,
                   capture_output=True, timeout=probekit.TIMEOUT)
    _, body = e.scrape()
    assert sample(body, 'probekit_rpc_latency_seconds_count'
                  '{method="target_stats"}') == 7
    assert sample(body, 'probekit_rpc_latency_seconds_count'
                  '{method="unknown"}') == 1
    assert "ird" not in body
    assert sample(body, 'probekit_nbd_commands_total{command="READ"}') == 3
    assert sample(body, "probekit_nbd_connections_total") == 1
    # qemu-io has returned, but blktgt may still be closing its side.
    end = time.monotonic() + probekit.TIMEOUT
    while sample(body, "probekit_nbd_disconnections_total") != 1 and \
            time.monotonic() < end:
        time.sleep(0.05)
        _, body = e.scrape()
    assert sample(body, "probekit_nbd_disconnections_total") == 1
    # qemu-io's last command, sent as it leaves: counted by the time the
    # connection is closed.
    assert sample(body, 'probekit_nbd_commands_total{command="DISC"}') == 1
    # The same bytes parse as Prometheus' own checker wants them.
    chk = subprocess.run(["promtool", "check", "metrics"], input=body,
                         text=True, capture_output=True)
    assert chk.returncode == 0, chk.stdout + chk.stderr


def test_io_types_mixed_in_a_batch(bpf, target, exporter):
    """A randrw job's batches mix reads and writes, so the exporter's key
    changes within a batch: each type's count, size sum and size buckets
    are its own, exactly as blktgt counted them."""
    target.rpc("bdev_null_create", name="N0", size_mb=4, block_size=512)
    e = exporter("-p", str(target.pid))
    run = target.rpc("workload_run", bdev="N0", pattern="randrw",
                     io_size=4096, queue_depth=16, count=503)
    n = {"read": run["reads"], "write": run["writes"]}
    assert run["ios"] == 503 and sum(n.values()) == 503 and all(n.values())

    def series(name, t, le=None):
        return (f'probekit_io_{name}{{bdev="N0",type="{t}"'
                + (f',le="{le}"' if le else "") + "}")
    end = time.monotonic() + probekit.TIMEOUT
    while True:
        _, text = e.scrape()
        got = [sample(text, series("latency_seconds_count", t)) for t in n]
        if got == list(n.values()) or time.monotonic() > end:
            break
        time.sleep(0.05)
    assert got == list(n.values()), text
    for t, k in n.items():
        assert sample(text, series("size_bytes_count", t)) == k
        assert sample(text, series("size_bytes_sum", t)) == k * 4096
        assert sample(text, series("size_bytes_bucket", t, "4096")) == k
        assert sample(text, series("size_bytes_bucket", t, "2048")) == 0
        assert sample(text, series("latency_seconds_bucket", t, "+Inf")) == k
        assert sample(text, series("latency_seconds_sum", t)) > 0
        assert sample(text, series("errors_total", t)) == 0


def test_bucket_ranges_agree_with_buckets(build, tmp_path):
    """The batch loop counts a record in its run's bucket by the bucket's
    range of values alone (libbpf/exporter_buckets.h): tests/lib/exp_buckets.c,
    built for the host from the same header, checks the ranges against the
    bucket of each value at every bound and the labels' values."""
    exe = str(tmp_path / "exp_buckets")
    r = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror",
                        "-I", os.path.join(probekit.ROOT, "libbpf"),
                        "-I", os.path.join(build, "gen"), "-o", exe,
                        os.path.join(probekit.ROOT, "tests", "lib", "exp_buckets.c")],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([exe], capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert r.returncode == 0 and r.stdout == "exp_buckets: 1105 checks passed\n", \
        (r.stdout, r.stderr)


# Every record of every batch, from bpftrace: per bdev and type, how many
# had each latency (ns), each length, and a non-zero status; and how many
# batches held more than one key.  blktgt runs with batches of CAP records,
# so one unrolled block reads a whole batch (64 made bpftrace 0.23's and
# 0.27's program jump further than a BPF branch reaches).  The bdev's name is read when
# its index changes, as bt/iolat_batch.bt does.
CAP = 32
RECORDS_BT = r"""// probekit: structs io_rec bdev_io_type
BEGIN { printf("Tracing records. Hit Ctrl-C to end.\n"); }
usdt:__EXE__:blktgt:io__batch
{
	$r = (struct pk_io_rec *)arg2;
	$names = (uint8 *)arg3;
	$n = (int32)arg1;
	$i = 0;
	$b = $r->bdev;
	$t = $r->type;
	$bdev = str($names + $b * 32);
	$mixed = 0;
	unroll(%(cap)d) {
		if ($i < $n) {
			if ($r->bdev != $b) {
				$b = $r->bdev;
				$bdev = str($names + $b * 32);
				$mixed = 1;
			}
			if ($r->type != $t) {
				$t = $r->type;
				$mixed = 1;
			}
			@lat[$bdev, @pk_bdev_io_type[$t],
			     (int64)$r->done_ns - (int64)$r->submit_ns] = count();
			@len[$bdev, @pk_bdev_io_type[$t], $r->length] = count();
			if ($r->status != 0) {
				@errors[$bdev, @pk_bdev_io_type[$t]] = count();
			}
			$r = $r + 1;
		}
		$i++;
	}
	if ($mixed) {
		@mixed_batches = count();
	}
}
""" % {"cap": CAP}


def records(lines):
    """{map: {(bdev, type, value): count}} from RECORDS_BT's output; types
    as the exporter labels them (BDEV_IO_READ: read)."""
    out = {"lat": {}, "len": {}, "errors": {}, "mixed_batches": 0}
    for line in lines:
        m = re.match(r"@(lat|len)\[(\w+), BDEV_IO_(\w+), (-?\d+)\]: (\d+)$", line)
        if m:
            out[m[1]][(m[2], m[3].lower(), int(m[4]))] = int(m[5])
        m = re.match(r"@errors\[(\w+), BDEV_IO_(\w+)\]: (\d+)$", line)
        if m:
            out["errors"][(m[1], m[2].lower())] = int(m[3])
        m = re.match(r"@mixed_batches: (\d+)$", line)
        if m:
            out["mixed_batches"] = int(m[1])
    return out


def buckets(text, name, bdev, t):
    """{le: cumulative count} of one histogram series of a scrape."""
    pat = re.compile(r'%s_bucket\{bdev="%s",type="%s",le="([^"]+)"\} (\d+)$'
                     % (name, bdev, t))
    return {m[1]: int(m[2]) for m in map(pat.match, text.splitlines()) if m}


def upto(values, bound):
    """How many of values ({value: count}) are at most bound."""
    return sum(n for v, n in values.items() if v <= bound)


def test_every_record_in_its_bucket(bpf, blktgt_bin, tmp_path, monkeypatch,
                                    exporter):
    """One job alone, then four at once on delay bdevs, all on one
    reactor, so that runs of one key's records end on a latency bucket's
    bound, and batches mix bdevs, types and sizes: every cumulative bucket, count and sum of every latency
    and size histogram is what the records themselves give, record by
    record, by the bounds the labels state (an integer count of ns is
    <= le seconds when it is <= floor(le * 1e9)).  The exporter bins
    records in runs of one bucket; a run that took one record too many or
    too few, or a bucket's range off by one, would show here."""
    monkeypatch.setenv("BLKTGT_IO_BATCH_CAP", str(CAP))
    t = probekit.Target(blktgt_bin, tmp_path, threads=1).start()
    try:
        # A null bdev's job completes in a loop of its own: no other job's
        # records would come between its own.  So the jobs at once use
        # delay bdevs.
        t.rpc("bdev_null_create", name="N0", size_mb=64, block_size=512)
        t.rpc("bdev_null_create", name="N1", size_mb=16, block_size=512)
        t.rpc("bdev_malloc_create", name="M0", size_mb=16, block_size=512)
        # Delays just below a bucket's bound (2^-16 s is 15.26 us, 2^-17
        # 7.63, 2^-15 30.5), so that latencies straddle it, and runs end.
        for name, base, r_us, w_us in (("D0", "M0", 37, 101), ("D1", "N0", 15, 15),
                                       ("D2", "N1", 7, 29)):
            t.rpc("bdev_delay_create", name=name, base=base, read_us=r_us,
                  write_us=w_us)
        script = tmp_path / "records.bt"
        script.write_text(RECORDS_BT)
        tr = probekit.Trace(t.pid, [str(script)]).start()
        e = exporter("-p", str(t.pid))
        # One job alone on a null bdev at qd 32: full batches of one key,
        # whose latencies (about 32 I/Os' time) spread over several
        # buckets, so runs end inside a step; then four at once on the
        # delay bdevs: keys and sizes change within a batch.
        alone = ("N0", "randread", 4096, 32, 1009)
        jobs = [("D1", "randread", 65536, 2, 307), ("D1", "randread", 4096, 3, 101),
                ("D2", "randrw", 512, 5, 503), ("D0", "randrw", 4096, 3, 211)]

        def run(j):
            return t.rpc("workload_run", bdev=j[0], pattern=j[1], io_size=j[2],
                         queue_depth=j[3], count=j[4])
        replies = [run(alone)]
        # A connection each: the server answers one connection's
        # requests in turn, so pipelined jobs would run one by one.
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            replies += pool.map(run, jobs)
        jobs.insert(0, alone)
        for job, r in zip(jobs, replies):
            assert r["ios"] == job[-1] and r["errors"] == 0, (job, r)
        recs = records(tr.stop())
        _, text = e.scrape()
    finally:
        t.stop()
    assert recs["mixed_batches"] > 0, "no batch mixed keys: the test's premise"
    assert not recs["errors"], recs["errors"]
    keys = {k[:2] for k in recs["lat"]}
    assert sum(recs["lat"].values()) == sum(j[-1] for j in jobs) == 2131
    assert keys == {("N0", "read"), ("D1", "read"), ("D2", "read"), ("D2", "write"),
                    ("D0", "read"), ("D0", "write")}, keys
    for bdev, typ in sorted(keys):
        lat = {v: n for (b, ty, v), n in recs["lat"].items() if (b, ty) == (bdev, typ)}
        size = {v: n for (b, ty, v), n in recs["len"].items() if (b, ty) == (bdev, typ)}
        n = sum(lat.values())
        assert sum(size.values()) == n
        assert min(lat) >= 0, "a record done before its submit"
        got = buckets(text, "probekit_io_latency_seconds", bdev, typ)
        assert len(got) == 33 and got.pop("+Inf") == n, (bdev, typ, text)
        for le, c in got.items():
            bound = math.floor(fractions.Fraction(float(le)) * 10**9)
            assert c == upto(lat, bound), (bdev, typ, le, c, sorted(lat.items()))
        got = buckets(text, "probekit_io_size_bytes", bdev, typ)
        assert len(got) == 32 and got.pop("+Inf") == n, (bdev, typ, text)
        for le, c in got.items():
            assert c == upto(size, int(float(le))), (bdev, typ, le, c, size)
        labels = f'{{bdev="{bdev}",type="{typ}"}}'
        ns = sum(v * k for v, k in lat.items())
        want = {"probekit_io_latency_seconds_count": str(n),
                "probekit_io_latency_seconds_sum": f"{ns // 10**9}.{ns % 10**9:09d}",
                "probekit_io_size_bytes_count": str(n),
                "probekit_io_size_bytes_sum": str(sum(v * k for v, k in size.items())),
                "probekit_io_errors_total": "0"}
        for series, value in want.items():
            line = f"{series}{labels} {value}"
            assert line in text.splitlines(), (line, text)


def test_formats_and_http_errors(bpf, target, exporter):
    target.rpc("bdev_null_create", name="N0", size_mb=4, block_size=512)
    e = exporter("-p", str(target.pid), "--pid-label")
    run = target.rpc("workload_run", bdev="N0", pattern="randread",
                     io_size=4096, queue_depth=8, count=29)
    assert run["ios"] == 29
    pid = f'pid="{target.pid}"'
    series = f'probekit_io_latency_seconds_count{{bdev="N0",type="read",{pid}}}'
    end = time.monotonic() + probekit.TIMEOUT
    while True:
        ctype, text = e.scrape()
        if sample(text, series) == 29 or time.monotonic() > end:
            break
        time.sleep(0.05)
    assert sample(text, series) == 29
    assert ctype == "text/plain; version=0.0.4; charset=utf-8"
    assert "# TYPE probekit_io_errors_total counter" in text
    assert "# EOF" not in text
    # NBD commands cost a hit each: only with --nbd-commands.
    assert "probekit_nbd_commands_total" not in text

    ctype, om = e.scrape(openmetrics=True)
    assert ctype == ("application/openmetrics-text; version=1.0.0; "
                     "charset=utf-8")
    assert om.endswith("\n# EOF\n")
    assert "# TYPE probekit_io_errors counter" in om
    assert sample(om, series) == 29
    # The le strings are the same in every scrape.
    les = [ln.split("le=")[1].split("}")[0] for ln in text.splitlines()
           if ln.startswith("probekit_io_latency_seconds_bucket")]
    _, again = e.scrape()
    assert les == [ln.split("le=")[1].split("}")[0]
                   for ln in again.splitlines()
                   if ln.startswith("probekit_io_latency_seconds_bucket")]
    assert les[0] == '"1.4901161193847656e-08"' and les[-1] == '"+Inf"'

    # Anything but GET /metrics is an HTTP error, and serving goes on.
    assert e.request("POST", body="x")[0] == 405
    assert e.request("HEAD")[0] == 405
    assert e.request("GET", "/")[0] == 404
    assert e.request("GET", "/metrics/../x")[0] == 404
    assert e.request("GET", "/metrics", headers={"X-Big": "a" * 65536})[0] \
        in (413, 431)
    for raw, status in [
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n", 400),
            (b"GET /metrics HTTP/9.9\r\n\r\n", 505),
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
             b"\r\nhello", 400)]:
        with socket.create_connection(("127.0.0.1", e.port)) as s:
            s.settimeout(probekit.TIMEOUT)
            s.sendall(raw)
            assert s.recv(64).startswith(b"HTTP/1.1 %d" % status), raw
    assert e.scrape()[1].count("\n") > 10


def run_bad(build, *args):
    r = subprocess.run([exporter_bin(build), "--listen", "127.0.0.1:0"] +
                       list(args), capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("probekit-exporter: "), \
        r.stderr
    assert r.stdout == ""
    return r.returncode, lines[0]


@pytest.mark.parametrize("spec,why", [
    (["--pair", "q"], "give NAME=PROVIDER:START,PROVIDER:DONE"),
    (["--pair", "9q=a:b,c:d"], "letters, digits and _ only"),
    (["--pair", "q=a:b"], "give NAME=PROVIDER:START,PROVIDER:DONE"),
    (["--pair", "q=a:b,c:d,arg0"],
     "tid, an argument's name, or argN with N from 1 to 12"),
    (["--pair", "q=a:b,c:d,arg13"],
     "tid, an argument's name, or argN with N from 1 to 12"),
    (["--pair", "q=a:b,c:d,1d"],
     "tid, an argument's name, or argN with N from 1 to 12"),
    (["--pair", "q=a:b,c:d", "--count", "q=a:*"], "is given twice"),
    (["--count", "n=nocolon"], "give NAME=PROVIDER:PROBE"),
    (["--count", "probekit_io=a:b"], "probekit_ names are the exporter's"),
    (["--pair", "q=" + "a" * 600 + ":b,c:d"], "longer than 512"),
    (["--listen", "nohost"], "give HOST:PORT"),
    # Two families whose sample names would mix: a parser rejects the
    # scrape, so Prometheus would get none of it.
    (["--pair", "a=p:s,p:d", "--count", "a_seconds=p:x"],
     "--pair a and --count a_seconds both make a metric named a_seconds "),
    (["--pair", "lat=p:s,p:d", "--count", "lat_seconds_bucket=p:x"],
     "--pair lat and --count lat_seconds_bucket both make a metric named "
     "lat_seconds_bucket "),
    (["--count", "lat=p:x", "--count", "lat_total=p:y"],
     "named lat_total "),
    (["--count", "h_seconds_created=p:x", "--pair", "h=p:s,p:d"],
     "named h_seconds_created "),
    # What a user typed is shown on one line, control bytes escaped.
    (["--pair", "a\nb=p:s,p:d"], "bad --pair NAME 'a\\nb': letters"),
    (["--pair", "q=p:s\x1b[2J,p:d"], "bad --pair START 'p:s\\x1b[2J'"),
    (["--count", "n=p:a\nb"], "bad --count 'n=p:a\\nb'"),
    (["--max-inflight", "0"], "--max-inflight: must be 1.."),
    (["--max-series", "x"], "--max-series: not a number"),
    (["--count", "n=a:b", "--nbd-commands"], "give --blktgt too"),
])
def test_bad_specs(build, spec, why):
    rc, line = run_bad(build, "-b", "/bin/true", *spec)
    assert rc == 2 and why in line, line


def test_bad_targets(build, bpf, tmp_path):
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        rc, line = run_bad(build, "-p", str(sleeper.pid))
        assert rc == 1 and "has no USDT probe blktgt:io__batch" in line
    finally:
        sleeper.kill()
        sleeper.wait()
    rc, line = run_bad(build, "-b", f"{PG_BIN}/postgres",
                       "--count", "x=postgresql:nope*")
    assert rc == 1 and "no USDT probe matches postgresql:nope* in " in line
    # An argument only a symbol names: the exporter cannot pair by it.
    rc, line = run_bad(build, "-b", f"{PG_BIN}/postgres", "--pair",
                       "c=postgresql:checkpoint__start,"
                       "postgresql:checkpoint__done,arg1")
    assert rc == 1 and "cannot read" in line and "pair by tid" in line
    # A key by name: PostgreSQL's notes name no argument; blktgt's do, and
    # a misspelt one gets the nearest.
    rc, line = run_bad(build, "-b", f"{PG_BIN}/postgres", "--pair",
                       "t=postgresql:transaction__start,"
                       "postgresql:transaction__commit,xid")
    assert (rc, line) == (1, (
        f"probekit-exporter: {PG_BIN}/postgres has no argument names for "
        "probe postgresql:transaction__start (it was not built with "
        "probekit's header); give the argument by number, arg1 on"))
    rc, line = run_bad(build, "-b", os.path.join(build, "bin", "blktgt"),
                       "--pair", "io=blktgt:io__submit,blktgt:io__done,idd")
    assert (rc, line) == (1, "probekit-exporter: probe blktgt:io__submit has "
                          "no argument idd; nearest: id")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = subprocess.run([exporter_bin(build), "-b", "/bin/true",
                            "--listen", f"127.0.0.1:{port}"],
                           capture_output=True, text=True,
                           timeout=probekit.TIMEOUT)
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "Address already in use; pick another port" in r.stderr


def pg_session(cluster, n):
    """One connection to cluster: select pg_backend_pid(), then n
    queries, each its own statement.  Returns the backend's PID."""
    s = cluster.connect()
    try:
        pid = s.backend_pid()
        s.run([f"select {i};" for i in range(n)])
    finally:
        s.close()
    return pid


@pytest.mark.needs(*PG_NEEDS)
def test_postgres_query_pair_through_prometheus(bpf, pg, exporter,
                                                prometheus_for):
    """-b traces every process that runs the file, here the cluster's
    private copy of postgres, so only this cluster's backends; the pid
    label tells them apart, and the queries select this test's sessions'
    backends by it."""
    e = exporter("-b", pg.postgres, "--pid-label", "--pair",
                 "pg_query=postgresql:query__start,postgresql:query__done",
                 "--count", "pg_starts=postgresql:query__start")
    prom = prometheus_for(e.addr)
    # Two connections, each its own backend process, each with one query
    # more: the one that names its PID.
    pids = [pg_session(pg, 13), pg_session(pg, 4)]
    assert pids[0] != pids[1]
    ours = '{pid=~"%s"}' % "|".join(map(str, pids))
    prom.wait_value(f"sum(pg_query_seconds_count{ours})", 14 + 5,
                    f"max(timestamp(pg_query_seconds_count{ours}))")
    prom.wait_value(f"sum(pg_starts_total{ours})", 14 + 5,
                    f"max(timestamp(pg_starts_total{ours}))")
    want = {(("instance", e.addr), ("job", "probekit"), ("pid", str(p)),
             ("probe", "postgresql:query__start")) for p in pids}
    end = time.monotonic() + probekit.TIMEOUT
    while True:  # empty while a timed-out scrape has it stale
        got = set(prom.query(f"pg_starts_total{ours}"))
        if got or time.monotonic() > end:
            break
        time.sleep(0.1)
    assert got == want
    pids.append(pg_session(pg, 6))
    ours = '{pid=~"%s"}' % "|".join(map(str, pids))
    prom.wait_value(f"sum(pg_query_seconds_count{ours})", 14 + 5 + 7,
                    f"max(timestamp(pg_query_seconds_count{ours}))")


def test_pair_by_argument_and_count(bpf, target, exporter):
    """--pair keyed by an argument read from its operand (the I/O id),
    as arg1 and by its name, and --count over a glob, on blktgt's per-I/O
    probes."""
    target.rpc("bdev_null_create", name="N0", size_mb=4, block_size=512)
    e = exporter("-p", str(target.pid),
                 "--pair", "io=blktgt:io__submit,blktgt:io__done,arg1",
                 "--pair", "io_id=blktgt:io__submit,blktgt:io__done,id",
                 "--count", "io_events=blktgt:io__*")
    run = target.rpc("workload_run", bdev="N0", pattern="randrw",
                     io_size=4096, queue_depth=8, count=31)
    assert run["ios"] == 31
    _, body = e.scrape()
    assert sample(body, "io_seconds_count") == 31
    assert sample(body, "io_id_seconds_count") == 31
    assert sample(body, 'io_events_total{probe="blktgt:io__submit"}') == 31
    assert sample(body, 'io_events_total{probe="blktgt:io__done"}') == 31
    assert 'probe="blktgt:io__batch"' in body


def http_limit(name):
    """A limit of the exporter's HTTP server, read from where it is
    declared (libbpf/exporter_http.c), so the test follows it."""
    src = open(os.path.join(probekit.ROOT, "libbpf", "exporter_http.c")).read()
    return int(re.search(r"#define %s\s+(\d+)" % name, src).group(1))


class SlowClients:
    """Connections from one source address that send a request a byte at
    a time and never finish it; each remembers when it connected and
    when the server closed it."""

    REQUEST = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096

    def __init__(self, port, source, n):
        self.conns = []
        for _ in range(n):
            s = socket.socket()
            s.bind((source, 0))
            # Before connect(): the server's deadline starts at its
            # accept, which may come before connect() returns here (and
            # long before, when this thread is preempted), so only a time
            # taken first bounds it from below.
            at = time.monotonic()
            s.connect(("127.0.0.1", port))
            self.conns.append({"sock": s, "at": at,
                               "sent": 0, "closed": None})
            self.send(self.conns[-1])

    def send(self, c):
        try:
            c["sock"].send(self.REQUEST[c["sent"]:c["sent"] + 1])
            c["sent"] += 1
        except OSError:		# reset by the server: poll() says so
            pass

    def open(self):
        return [c for c in self.conns if c["closed"] is None]

    def poll(self, timeout):
        """Wait up to timeout seconds for the server to close any of
        them; note each one closed."""
        p = select.poll()
        by_fd = {c["sock"].fileno(): c for c in self.open()}
        for fd in by_fd:
            p.register(fd, select.POLLIN)
        for fd, _ in p.poll(timeout * 1000):
            c = by_fd[fd]
            try:
                data = c["sock"].recv(65536)
            except OSError:
                data = b""
            if not data:	# EOF or reset: what the server sends back
                c["closed"] = time.monotonic()	# is none of our business

    def tick(self):
        """A second's worth: a byte on each open connection, then wait
        out the second for closes."""
        for c in self.open():
            self.send(c)
        self.poll(1)

    def close(self):
        for c in self.conns:
            c["sock"].close()


def test_slow_clients_cannot_block_a_scrape(bpf, target, exporter):
    """PER_IP + 53 connections from 127.0.0.2, each sending a byte a
    second: the exporter serves PER_IP of them at once, refuses the rest,
    and closes each one it served at its deadline, though every byte would
    reset an idle timer; meanwhile a scrape from 127.0.0.1 gets its whole
    answer."""
    deadline = http_limit("HTTP_DEADLINE")
    per_ip = http_limit("HTTP_MAX_CONNS_PER_IP")
    e = exporter("-p", str(target.pid))
    slow = SlowClients(e.port, "127.0.0.2", per_ip + 53)
    try:
        end = time.monotonic() + probekit.TIMEOUT
        while len(slow.open()) > per_ip and time.monotonic() < end:
            slow.tick()
        held = slow.open()
        assert len(held) == per_ip
        _, body = e.scrape()
        assert body.startswith("# HELP probekit_io_latency_seconds ")
        assert "# TYPE probekit_nbd_disconnections_total counter\n" in body
        end = time.monotonic() + deadline + probekit.TIMEOUT
        while slow.open() and time.monotonic() < end:
            slow.tick()
        assert slow.open() == [], "still open past the deadline"
        # Closed at the deadline, not before: a lower bound, which a
        # loaded machine cannot break.
        for c in held:
            assert c["closed"] - c["at"] >= deadline - 0.05, c
            assert c["sent"] >= 2
    finally:
        slow.close()
    # And serving goes on.
    assert e.scrape()[1].startswith("# HELP probekit_io_latency_seconds ")


def test_flood_from_other_addresses_cannot_starve_a_scrape(bpf, target,
                                                           exporter):
    """Two addresses hold every connection the exporter serves at once;
    a scrape from a third gets in all the same, in the place of the
    oldest connection of an address holding the most."""
    per_ip = http_limit("HTTP_MAX_CONNS_PER_IP")
    total = http_limit("HTTP_MAX_CONNS")
    assert total == 2 * per_ip
    e = exporter("-p", str(target.pid))
    floods = [SlowClients(e.port, a, per_ip)
              for a in ("127.0.0.2", "127.0.0.3")]
    try:
        for f in floods:
            f.poll(0)
        assert [len(f.open()) for f in floods] == [per_ip, per_ip]
        _, body = e.scrape()
        assert body.startswith("# HELP probekit_io_latency_seconds ")
        for f in floods:
            f.poll(0)
        closed = [(i, k) for i, f in enumerate(floods)
                  for k, c in enumerate(f.conns) if c["closed"] is not None]
        assert closed == [(0, 0)]
    finally:
        for f in floods:
            f.close()


def scrape_until(e, series, want):
    """Scrape until series reaches want (hits are counted as they come);
    the last scrape."""
    end = time.monotonic() + probekit.TIMEOUT
    while True:
        _, body = e.scrape()
        if sample(body, series) == want or time.monotonic() > end:
            return body
        time.sleep(0.05)


def promtool_ok(body):
    chk = subprocess.run(["promtool", "check", "metrics"], input=body,
                         text=True, capture_output=True)
    assert chk.returncode == 0, chk.stdout + chk.stderr


STARTS_DROPPED = 'probekit_exporter_starts_dropped_total{reason="table_full"}'
STARTS_RECLAIMED = "probekit_exporter_starts_reclaimed_total"


def test_dead_processes_starts_reclaimed(bpf, blktgt_bin, tmp_path,
                                         exporter):
    """-b: three blktgt processes each killed with 8 I/Os in flight, on a
    table with room for 31.  Their 24 STARTs are reclaimed as each dies,
    so a fourth process's 23 I/Os are all measured; without that, 24 dead
    entries and its 8 in flight would not fit, and some would be lost."""
    e = exporter("-b", blktgt_bin, "--max-inflight", "31",
                 "--pair", "io=blktgt:io__submit,blktgt:io__done,arg1",
                 "--count", "subs=blktgt:io__submit",
                 "--count", "dones=blktgt:io__done")
    subs = 'subs_total{probe="blktgt:io__submit"}'
    dones = 'dones_total{probe="blktgt:io__done"}'
    for i in range(3):
        t = probekit.Target(blktgt_bin, tmp_path / f"killed{i}")
        (tmp_path / f"killed{i}").mkdir()
        t.start()
        t.rpc("bdev_malloc_create", name="M0", size_mb=4, block_size=512)
        # 10 s a read: still in flight when the process is killed.
        t.rpc("bdev_delay_create", name="D0", base="M0",
              read_us=10000000, write_us=10000000)

        def run(t=t):
            try:
                t.rpc("workload_run", bdev="D0", pattern="randread",
                      io_size=4096, queue_depth=8, count=8)
            except (OSError, probekit.RpcError):
                pass		# killed under it
        th = threading.Thread(target=run)
        th.start()
        scrape_until(e, subs, 8 * (i + 1))
        t.proc.kill()
        t.proc.wait()
        th.join(timeout=probekit.TIMEOUT)
        t.remove_trace_file()
    _, body = e.scrape()
    assert sample(body, subs) == 24
    in_flight = 24 - (sample(body, dones) or 0)
    assert sample(body, STARTS_RECLAIMED) == in_flight
    assert in_flight > 31 - 8	# what makes the last run need them gone
    assert (sample(body, "io_seconds_count") or 0) == 24 - in_flight

    (tmp_path / "healthy").mkdir()
    t = probekit.Target(blktgt_bin, tmp_path / "healthy").start()
    try:
        t.rpc("bdev_null_create", name="N0", size_mb=4, block_size=512)
        run = t.rpc("workload_run", bdev="N0", pattern="randread",
                    io_size=4096, queue_depth=8, count=23)
        assert run["ios"] == 23
        body = scrape_until(e, "io_seconds_count", 24 - in_flight + 23)
        assert sample(body, "io_seconds_count") == 24 - in_flight + 23
        assert sample(body, STARTS_DROPPED) == 0
        assert sample(body, STARTS_RECLAIMED) == in_flight
        promtool_ok(body)
    finally:
        t.stop()


def test_full_table_drops_counted(bpf, target, exporter):
    """A table with room for 7 STARTs, 16 I/Os in flight at a time: each
    of 23 I/Os is either measured or counted as dropped, never lost
    without a word."""
    target.rpc("bdev_malloc_create", name="M0", size_mb=4, block_size=512)
    target.rpc("bdev_delay_create", name="D0", base="M0", read_us=20000,
               write_us=20000)
    e = exporter("-p", str(target.pid), "--max-inflight", "7",
                 "--pair", "io=blktgt:io__submit,blktgt:io__done,arg1")
    run = target.rpc("workload_run", bdev="D0", pattern="randread",
                     io_size=4096, queue_depth=16, count=23)
    assert run["ios"] == 23
    _, body = e.scrape()
    measured, dropped = sample(body, "io_seconds_count"), \
        sample(body, STARTS_DROPPED)
    assert measured + dropped == 23, body
    assert dropped >= 16 - 7, body	# the first 16 went out together
    assert sample(body, STARTS_RECLAIMED) == 0
    assert sample(body, series_dropped("io_seconds")) == 0
    promtool_ok(body)


def test_series_cap_drops_counted(bpf, target, exporter):
    """Two series a family at most: the third RPC method's 13 calls are
    not recorded, and counted as such, under their family."""
    e = exporter("-p", str(target.pid), "--max-series", "2")
    for method, n in (("target_stats", 7), ("bdev_list", 11),
                      ("export_list", 13)):
        for _ in range(n):
            target.rpc(method)
    _, body = e.scrape()
    rpc = "probekit_rpc_latency_seconds"
    assert sample(body, f'{rpc}_count{{method="target_stats"}}') == 7
    assert sample(body, f'{rpc}_count{{method="bdev_list"}}') == 11
    assert f'method="export_list"' not in body
    assert sample(body, series_dropped(rpc)) == 13
    for fam in ("probekit_io_latency_seconds", "probekit_io_size_bytes",
                "probekit_io_errors", "probekit_nbd_connections",
                "probekit_nbd_disconnections"):
        assert sample(body, series_dropped(fam)) == 0
    assert sample(body, STARTS_DROPPED) == 0
    promtool_ok(body)
    _, om = e.scrape(openmetrics=True)
    assert sample(om, series_dropped(rpc)) == 13
    assert "# TYPE probekit_exporter_series_dropped counter\n" in om


def merged(body, reason):
    return sample(body, f'probekit_exporter_bdevs_merged{{reason="{reason}"}}')


def test_bdevs_merged_counted(bpf, target, exporter):
    """Two bdevs whose names share their first 31 characters share one
    label, and probekit_exporter_bdevs_merged{reason="name_cut"} says 2;
    257 live bdevs put the 2 past the name table's 255 slots under
    "(other)", and {reason="table_full"} says 2.  Each gauge follows a
    deletion at the next batch."""
    cut = histtools.MERGED_PAIR[0][:histtools.CUT]
    e = exporter("-p", str(target.pid))
    more = histtools.merged_bdevs(target, past=2)
    assert len(target.rpc("bdev_list")) == 257
    histtools.workload(target, histtools.MERGED_PAIR[0], "read", 4096, 2, 7)
    histtools.workload(target, histtools.MERGED_PAIR[1], "read", 4096, 2, 11)
    histtools.workload(target, more[-1], "read", 4096, 2, 13)
    _, body = e.scrape()
    lat = "probekit_io_latency_seconds_count"
    assert sample(body, f'{lat}{{bdev="{cut}",type="read"}}') == 7 + 11, body
    assert sample(body, f'{lat}{{bdev="(other)",type="read"}}') == 13, body
    assert merged(body, "name_cut") == 2, body
    assert merged(body, "table_full") == 2, body
    assert sample(body, series_dropped("probekit_exporter_bdevs_merged")) == 0
    promtool_ok(body)
    target.rpc("bdev_delete", name=histtools.MERGED_PAIR[1])
    target.rpc("bdev_delete", name=more[-2])
    histtools.workload(target, more[-1], "read", 4096, 2, 3)
    _, body = e.scrape()
    assert merged(body, "name_cut") == 0, body
    assert merged(body, "table_full") == 1, body
    assert "# TYPE probekit_exporter_bdevs_merged gauge\n" in body


@pytest.mark.needs("bpftool")
def test_taken_scratch_drops_records(bpf, target, exporter):
    """The state a run preempted in its batch leaves (test_batch_reentry):
    this CPU's buffer taken.  A batch that finds it so reads nothing, and
    each of its records is counted dropped under each I/O family; once it
    is free, the exporter counts again, exactly."""
    from batch_readers import scratch_map, set_busy
    target.rpc("bdev_malloc_create", name="M0", size_mb=16, block_size=512)
    e = exporter("-p", str(target.pid))
    m = scratch_map(e.proc.pid)
    set_busy(m, 1)
    histtools.workload(target, "M0", "randrw", 4096, 8, 1009)
    set_busy(m, 0)
    histtools.workload(target, "M0", "randrw", 4096, 8, 23)
    _, body = e.scrape()
    counts = [sample(body, f'probekit_io_latency_seconds_count{{bdev="M0",type="{t}"}}')
              for t in ("read", "write")]
    assert sum(counts) == 23, body
    for fam in ("probekit_io_latency_seconds", "probekit_io_size_bytes",
                "probekit_io_errors"):
        assert sample(body, series_dropped(fam)) == 1009, body


@pytest.mark.needs("g++")
def test_pid_finds_a_librarys_probes(bpf, tmp_path, exporter):
    """-p counts and pairs libstdc++'s probes, in a library the process
    maps, not in its executable."""
    import thirdparty
    exe = thirdparty.build_throws(str(tmp_path))
    k = 29
    p = subprocess.Popen([exe, str(k)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = probekit.LineReader(p.stdout)
    try:
        out.wait_for("^ready$")
        e = exporter("-p", str(p.pid), "--count", "cxx=libstdcxx:*",
                     "--pair", "exc=libstdcxx:throw,libstdcxx:catch")
        p.stdin.write(b"go\n")
        p.stdin.flush()
        out.wait_for("^caught %d$" % k)
        assert p.wait(timeout=probekit.TIMEOUT) == 0, out.lines
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    _, body = e.scrape()
    assert sample(body, 'cxx_total{probe="libstdcxx:throw"}') == k
    assert sample(body, 'cxx_total{probe="libstdcxx:catch"}') == k
    assert sample(body, "exc_seconds_count") == k
    assert sample(body, STARTS_RECLAIMED) == 0
    promtool_ok(body)


def exporter_on(build, pid, **popen):
    return subprocess.Popen(
        [exporter_bin(build), "--listen", "127.0.0.1:0", "-p", str(pid),
         "--count", "cxx=libstdcxx:*",
         "--pair", "exc=libstdcxx:throw,libstdcxx:catch"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


@pytest.mark.needs("g++")
def test_exit_during_attach_one_line(bpf, build, tmp_path, attach_pause):
    """A process killed while the exporter attaches (held at its first
    attach to the process, attach_hold, until the process is reaped):
    one line says the process exited while its probes were being
    attached, and the exporter exits 1.  Then at 7 moments spread over
    its start: each run either serves (the kill came after every probe
    was in) or prints one line that says the process exited, never an
    attach error that blames a file or a probe."""
    import attach_hold
    import thirdparty
    exe = thirdparty.build_throws(str(tmp_path))
    p = subprocess.Popen([exe, "1"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    hold = attach_hold.Hold(attach_pause, p.pid)
    ex = exporter_on(build, p.pid, env=dict(os.environ, **hold.env),
                     pass_fds=hold.pass_fds)
    hold.wait()
    p.kill()
    p.wait()
    hold.release()
    out, err = ex.communicate(timeout=probekit.TIMEOUT)
    assert (ex.returncode, out, err) == (1, "", (
        f"probekit-exporter: PID {p.pid} (throws) exited while its probes "
        "were being attached\n")), (out, err)
    for i in range(7):
        p = subprocess.Popen([exe, "1"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        assert p.stdout.readline() == b"ready\n"
        ex = exporter_on(build, p.pid)
        # The race itself: the kill lands somewhere in the start-up.
        time.sleep(i * 0.05)
        p.kill()
        p.wait()
        line = ex.stdout.readline()
        if line:
            assert "Hit Ctrl-C to end." in line
            ex.send_signal(signal.SIGINT)
        rc = ex.wait(timeout=probekit.TIMEOUT)
        err = ex.stderr.read()
        pid = p.pid
        if line:
            # Served: the exit, when it came first, is its one line.
            assert rc == 0 and err in (
                "", f"probekit-exporter: PID {pid} (throws) exited; still "
                "serving its metrics, with probekit_exporter_target_up 0\n"), err
            continue
        assert rc == 1 and err.count("\n") == 1, err
        assert err in (
            f"probekit-exporter: PID {pid} (throws) exited while its "
            "probes were being attached\n",
            f"probekit-exporter: PID {pid} has exited\n",
            f"probekit-exporter: no process with PID {pid}\n"), err
