# SPDX-License-Identifier: BSD-2-Clause
"""probekit-exporter as a service: the systemd unit the package installs
(debian/probekit.probekit-exporter@.service) and the Grafana dashboard it
ships (examples/exporter/probekit-dashboard.json).

PID 1 is not systemd here, so the unit is checked by systemd-analyze
verify, and its ExecStart is run as the unit would run it: as a user
that exists nowhere (DynamicUser), with exactly the unit's ambient and
bounding capabilities and NoNewPrivileges (setpriv), configured by the
example environment file.  A real Prometheus scrapes it while blktgt runs
known workloads; every expression of the dashboard is then run against
that Prometheus and must return finite values, and its raw-count panels
must equal the workloads' counts exactly."""

import json
import math
import os
import pwd
import re
import shlex
import shutil
import subprocess
import tempfile

import pytest

import probekit
from exporter_client import Prometheus

UNIT = os.path.join(probekit.ROOT, "debian", "probekit.probekit-exporter@.service")
ENV_FILE = os.path.join(probekit.ROOT, "examples", "exporter", "blktgt.env")
DASHBOARD = os.path.join(probekit.ROOT, "examples", "exporter", "probekit-dashboard.json")
EXPORTER = os.path.join(probekit.BUILD, "bin", "probekit-exporter")
RUNS = (23, 29)         # two workloads, so every rate() has a rise to see
NBD_READS = (3, 5)


def ios(i):
    """The I/Os blktgt did by the end of round i: workload and NBD reads."""
    return sum(RUNS[:i + 1]) + sum(NBD_READS[:i + 1])


def unit_settings(path=UNIT):
    """{key: [values]} of the [Service] section."""
    out, section = {}, None
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            k, v = line.split("=", 1)
            out.setdefault(k, []).append(v)
    return out


def env_file_args(path=ENV_FILE):
    for line in open(path):
        if line.startswith("PROBEKIT_EXPORTER_ARGS="):
            return line.split("=", 1)[1].split()
    pytest.fail(f"{path} sets no PROBEKIT_EXPORTER_ARGS")


@pytest.mark.needs("systemd-analyze", "man")
def test_unit_verifies(tmp_path):
    """systemd-analyze verify, as an instance, with the built exporter in
    ExecStart and the man page of Documentation= found by man."""
    text = open(UNIT).read().replace("/usr/bin/probekit-exporter", EXPORTER)
    unit = tmp_path / "probekit-exporter@blktgt.service"
    unit.write_text(text)
    man8 = tmp_path / "man" / "man8"
    man8.mkdir(parents=True)
    shutil.copy(os.path.join(probekit.ROOT, "man", "probekit-exporter.8"), man8)
    p = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True,
                       env=dict(os.environ, MANPATH=str(tmp_path / "man")),
                       timeout=probekit.TIMEOUT)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    # Nothing starts on its own: a template, never enabled by itself.
    s = unit_settings()
    assert s["ExecStart"] == ["/usr/bin/probekit-exporter $PROBEKIT_EXPORTER_ARGS"]
    assert s["EnvironmentFile"] == ["/etc/probekit/exporter-%i.env"]


def unused_dynamic_uid():
    """A uid in systemd's DynamicUser range that names no user."""
    for uid in range(61184, 65520):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    pytest.fail("no free uid in 61184..65519")


def setpriv_command(settings, uid):
    """ExecStart's user, capabilities and no_new_privs, as setpriv sets them."""
    assert settings["DynamicUser"] == ["yes"]
    assert settings["NoNewPrivileges"] == ["yes"]
    caps = settings["AmbientCapabilities"][0].split()
    assert settings["CapabilityBoundingSet"][0].split() == caps
    spec = "-all," + ",".join("+" + c.lower().removeprefix("cap_") for c in caps)
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            f"--inh-caps={spec}", f"--ambient-caps={spec}", f"--bounding-set={spec}",
            "--no-new-privs", "--"]


def exec_start(settings, binary, extra_env_args=()):
    """ExecStart with $PROBEKIT_EXPORTER_ARGS from the example environment
    file: the built exporter, this test's copy of blktgt, any free port."""
    argv = shlex.split(settings["ExecStart"][0])
    assert argv[0] == "/usr/bin/probekit-exporter"
    args = env_file_args()
    assert args[:2] == ["-b", "/usr/bin/blktgt"] and "--listen" in args
    args[1] = binary
    args[args.index("--listen") + 1] = "127.0.0.1:0"
    out = []
    for a in argv[1:]:
        out += args if a == "$PROBEKIT_EXPORTER_ARGS" else [a]
    return [EXPORTER] + out + list(extra_env_args)


@pytest.fixture
def public_dir():
    """A directory the service's user can read (pytest's tmp_path is
    root's alone): the traced binary lives there."""
    d = tempfile.mkdtemp(prefix="probekit-service-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d)


def start_service_exporter(settings, blktgt, uid):
    cmd = setpriv_command(settings, uid) + exec_start(settings, blktgt)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd="/")
    out = probekit.LineReader(proc.stdout)
    m = out.wait_for(r"at http://127\.0\.0\.1:(\d+)/metrics\.\.\. Hit Ctrl-C to end\.|"
                     r"^probekit-exporter: .*")
    if not m.group(1):
        proc.wait(timeout=probekit.TIMEOUT)
        pytest.fail(f"the unit's ExecStart failed: {m.group(0)}")
    return proc, out, f"127.0.0.1:{m.group(1)}"


def stop(proc, out):
    if proc.poll() is None:
        proc.send_signal(2)
    rc = proc.wait(timeout=probekit.TIMEOUT)
    assert rc == 0, "\n".join(out.drain(5))


@pytest.mark.needs("setpriv")
def test_exec_start_needs_the_units_capability(bpf, public_dir, tmp_path):
    """The unit's capabilities are what attaching needs: without
    CAP_SYS_ADMIN (with CAP_BPF and CAP_PERFMON instead) it is refused."""
    s = unit_settings()
    assert s["AmbientCapabilities"] == ["CAP_SYS_ADMIN"]
    blktgt = os.path.join(public_dir, "blktgt")
    shutil.copy(os.path.join(probekit.BUILD, "bin", "blktgt"), blktgt)
    weaker = dict(s, AmbientCapabilities=["CAP_BPF CAP_PERFMON"],
                  CapabilityBoundingSet=["CAP_BPF CAP_PERFMON"])
    p = subprocess.run(setpriv_command(weaker, unused_dynamic_uid()) +
                       exec_start(weaker, blktgt), capture_output=True, text=True,
                       cwd="/", timeout=probekit.TIMEOUT)
    assert p.returncode != 0 and "permission denied" in p.stderr.lower(), p.stderr


# --- the dashboard -----------------------------------------------------------

def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def expressions(d):
    """(panel title, expr) of every query of every panel."""
    return [(p["title"], t["expr"]) for p in d["panels"] for t in p.get("targets", [])]


def query(prom, q, at):
    r = prom_api(prom, "query", {"query": q, "time": f"{at:.3f}"})
    assert r["status"] == "success", (q, r)
    return r["data"]["result"]


def prom_api(prom, path, params):
    import http.client
    import urllib.parse
    c = http.client.HTTPConnection("127.0.0.1", prom.port, timeout=probekit.TIMEOUT)
    try:
        c.request("GET", f"/api/v1/{path}?" + urllib.parse.urlencode(params, doseq=True))
        return json.loads(c.getresponse().read())
    finally:
        c.close()


def label_values(prom, definition, values):
    """Grafana's label_values(SELECTOR, LABEL), through the series API."""
    m = re.fullmatch(r"label_values\((.*), (\w+)\)", definition)
    assert m, definition
    selector = substitute(m.group(1), values)
    r = prom_api(prom, "series", {"match[]": selector})
    assert r["status"] == "success", r
    return {s[m.group(2)] for s in r["data"] if m.group(2) in s}


def substitute(expr, values):
    for k, v in values.items():
        expr = expr.replace("${%s}" % k, v).replace("$" + k, v)
    assert "$" not in expr.replace("$__rate_interval", ""), expr
    return expr.replace("$__rate_interval", "1m")


@pytest.mark.needs("setpriv", "prometheus", "qemu-io")
def test_dashboard_queries_return_data_from_the_service(bpf, public_dir, tmp_path):
    s = unit_settings()
    blktgt = os.path.join(public_dir, "blktgt")
    shutil.copy(os.path.join(probekit.BUILD, "bin", "blktgt"), blktgt)
    args = env_file_args()
    pair = args[args.index("--pair") + 1].split("=")[0]
    count = args[args.index("--count") + 1].split("=")[0]

    target = probekit.Target(blktgt, tmp_path)
    target.start()
    proc = prom = None
    try:
        target.rpc("bdev_null_create", name="N0", size_mb=4, block_size=512)
        target.rpc("export_create", name="disk0", bdev="N0")
        proc, out, addr = start_service_exporter(s, blktgt, unused_dynamic_uid())
        prom = Prometheus(tmp_path, addr)
        prom.wait_up()
        reads = writes = 0
        for i, n in enumerate(RUNS):
            run = target.rpc("workload_run", bdev="N0", pattern="randrw", io_size=4096,
                             queue_depth=8, count=n)
            assert run["ios"] == n and run["errors"] == 0
            reads, writes = reads + run["reads"], writes + run["writes"]
            subprocess.run(["qemu-io", "-f", "raw", "-r"]
                           + [c for k in range(NBD_READS[i]) for c in ("-c", f"read {k * 4096} 4096")]
                           + [target.nbd_uri("disk0")], check=True, capture_output=True,
                           timeout=probekit.TIMEOUT)
            # The scrape after this run: every counter has risen by then.
            # Each NBD read is an I/O of the bdev too.
            prom.wait_value(f'sum({pair}_seconds_count)', ios(i),
                            stamp=f'max(timestamp({pair}_seconds_count))')
        at = prom.value(f'max(timestamp({pair}_seconds_count))')
        prom.wait_value('probekit_nbd_commands_total{command="READ"}', sum(NBD_READS))
        at = max(at, prom.value('timestamp(probekit_nbd_commands_total{command="READ"})'))

        d = dashboard()
        values = {"job": "probekit", "instance": addr, "pair": pair, "count": count}
        variables = {v["name"]: v for v in d["templating"]["list"] if v["type"] == "query"}
        assert sorted(variables) == sorted(values)
        for name, v in variables.items():
            got = label_values(prom, v["definition"], values)
            if v["regex"]:
                rx = re.compile(v["regex"].strip("/"))
                got = {rx.fullmatch(g).group(1) for g in got if rx.fullmatch(g)}
            assert values[name] in got, (name, got)

        exprs = expressions(d)
        assert len(exprs) >= 18
        for title, expr in exprs:
            result = query(prom, substitute(expr, values), at)
            assert result, f"{title}: {expr} returned no data"
            bad = [r for r in result if not math.isfinite(float(r["value"][1]))]
            assert bad == [], f"{title}: {expr} gave {bad}"

        def panel(title):
            (p,) = [p for p in d["panels"] if p["title"] == title]
            (t,) = p["targets"]
            return {tuple(sorted(r["metric"].items())): float(r["value"][1])
                    for r in query(prom, substitute(t["expr"], values), at)}
        assert panel("I/Os since the exporter started") == {
            (("bdev", "N0"), ("type", "read")): reads + sum(NBD_READS),
            (("bdev", "N0"), ("type", "write")): writes}
        assert panel("$pair since the exporter started") == {(): ios(1)}
        hits = panel("$count hits since the exporter started")
        assert hits[(("probe", "blktgt:io__submit"),)] == ios(1)
        assert hits[(("probe", "blktgt:io__done"),)] == ios(1)
        assert panel("NBD connections open") == {(): 0}
    finally:
        if prom:
            prom.stop()
        if proc:
            stop(proc, out)
        target.stop()
