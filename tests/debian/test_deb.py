# SPDX-License-Identifier: BSD-2-Clause
"""The Debian package: make deb builds it (dpkg-buildpackage, then lintian
with no error), dpkg -i installs it on this machine, every command the
build makes is the package's and answers --version, the installed commands
alone trace a blktgt (run from /, no checkout directory on PATH: the
wrapper with bpftrace, a libbpf tool and its BCC twin),
doc/probes-in-your-code.md's program of one's own builds from it with
make, CMake and Meson word for word and counts (test_guide.py), and dpkg --purge
leaves nothing behind.  On another Debian release (make stack) this runs
in its chroot, so the package is built, installed and run with that
release's tools.

Slow (a whole package build) and it installs into the system, so it runs
under CI=true (make check in CI) or when PROBEKIT_DEB=1 asks for it."""

import glob
import os
import re
import subprocess

import pytest

import histtools
import probekit
import guides
from installs import check_commands

pytestmark = [
    pytest.mark.skipif(os.environ.get("CI") != "true" and os.environ.get("PROBEKIT_DEB") != "1",
                       reason="builds and installs the Debian package (minutes): "
                              "runs under CI=true, or with PROBEKIT_DEB=1"),
    pytest.mark.needs("dpkg-buildpackage", "dh", "lintian", "bpftrace", "gdb", "man",
                      "systemd-analyze", "cmake", "meson", "ninja"),
]

BUILD_TIMEOUT = 3600
IO_COUNT = 23


def run(cmd, **kw):
    kw.setdefault("timeout", probekit.TIMEOUT)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def installed():
    p = run(["dpkg-query", "-W", "-f=${Status}", "probekit"])
    return p.returncode == 0 and "installed" in p.stdout.split()


def clean_env():
    path = [d for d in os.environ.get("PATH", "").split(":")
            if d and not os.path.realpath(d).startswith(probekit.ROOT)]
    return dict(os.environ, PATH=":".join(path))


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    out = tmp_path_factory.mktemp("deb")
    p = run(["make", "--no-print-directory", f"O={out}", "deb"], cwd=probekit.ROOT,
            timeout=BUILD_TIMEOUT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert not re.search(r"^E: ", p.stdout, re.M), p.stdout
    debs = glob.glob(os.path.join(out, "deb", "probekit_*.deb"))
    assert len(debs) == 1, debs
    # It ends naming what it built, and lintian's line about running as
    # root, which matters nothing here, is not shown.
    assert p.stdout.splitlines()[-1] == f"deb: built {debs[0]}", p.stdout
    assert "root privileges" not in p.stdout + p.stderr, p.stderr
    return debs[0]


def test_package_contents(deb):
    p = run(["dpkg-deb", "-c", deb])
    assert p.returncode == 0, p.stderr
    files = p.stdout
    for path in ("./usr/bin/blktgt", "./usr/bin/probekit-bpftrace",
                 "./usr/share/probekit/VERSION", "./usr/share/probekit/probekit.mk",
                 # The specs and their reader, which the BCC tools load.
                 "./usr/share/probekit/probes/probelib/toolspec.py",
                 "./usr/share/probekit/specs/limits.toml",
                 "./usr/share/probekit/specs/iosize.toml",
                 "./usr/share/man/man8/probekit-iolatency.8.gz",
                 "./usr/share/gdb/auto-load/usr/bin/blktgt-gdb.py",
                 # The docs and examples a user of the package follows.
                 "./usr/share/doc/probekit/README.md.gz",
                 "./usr/share/doc/probekit/bt/README.md.gz",
                 "./usr/share/doc/probekit/examples/quickstart/Makefile",
                 "./usr/share/doc/probekit/examples/quickstart/CMakeLists.txt",
                 "./usr/share/doc/probekit/examples/quickstart/meson.build",
                 "./usr/share/probekit/cmake/probekit-config.cmake",
                 "./usr/share/probekit/cmake/probekit-config-version.cmake",
                 "./usr/share/doc/probekit/examples/quickstart/quickstart.d",
                 "./usr/share/doc/probekit/examples/quickstart/bt/requests.bt",
                 "./usr/share/doc/probekit/examples/exporter.prometheus.yml",
                 "./usr/share/doc/probekit/examples/exporter/probekit-dashboard.json",
                 "./usr/share/doc/probekit/examples/exporter/blktgt.env",
                 "./usr/share/pkgconfig/probekit.pc",
                 "./usr/share/bash-completion/completions/probekit-iosize",
                 "./usr/share/bash-completion/completions/probekit-iosize-bcc",
                 "./usr/share/bash-completion/completions/probekit-list",
                 "./usr/share/bash-completion/completions/blktgt-trace"):
        assert re.search(rf" {re.escape(path)}( -> .*)?$", files, re.M), path
    # The exporter's unit, where debhelper puts it (/lib/systemd/system on
    # Debian 12, /usr/lib/systemd/system on 13): in a directory this
    # system's systemd reads units from.
    p = run(["systemd-analyze", "--system", "unit-paths"])
    assert p.returncode == 0, p.stderr
    units = [f"./{d.strip('/')}/probekit-exporter@.service" for d in p.stdout.split()]
    assert [u for u in units if re.search(rf" {re.escape(u)}$", files, re.M)], units
    # Every guide the README links to, beside it (dh_compress gzips the
    # larger ones).
    docs = sorted(os.path.basename(g) for g in
                  glob.glob(os.path.join(probekit.ROOT, "doc", "*.md")))
    assert docs
    missing = [g for g in docs if not re.search(
        rf" \./usr/share/doc/probekit/doc/{re.escape(g)}(\.gz)?$", files, re.M)]
    assert missing == [], missing
    # Skeletons are embedded in the tools; no raw BPF object ships.
    assert ".bpf.o" not in files
    assert "__pycache__" not in files
    version = open(os.path.join(probekit.ROOT, "VERSION")).read().strip()
    p = run(["dpkg-deb", "-f", deb, "Version"])
    assert p.stdout.strip() == version


def test_lintian_has_no_warning_and_no_hardening_tag(deb):
    """lintian -I: no error, no warning, and none of its hardening-* tags
    (the binaries are fortified, PIE and fully RELRO)."""
    p = run(["lintian", "-I", deb], timeout=600)
    tags = [line for line in p.stdout.splitlines() if re.match(r"[EWI]: ", line)]
    assert [t for t in tags if t.startswith(("E:", "W:")) or " hardening-" in t] == [], tags
    # No maintainer script enables or starts the exporter: a template unit.
    p = run(["dpkg-deb", "-I", deb])
    assert "postinst" not in p.stdout, p.stdout


def test_installed_package_traces_blktgt_then_purges(deb, tmp_path, bpf):
    assert not installed(), ("probekit is already installed on this machine; "
                             "dpkg --purge probekit first (this test removes it)")
    # What is there before the package: with a merged /usr, /lib is a
    # link that no package owns, yet the package may list it (Debian 12's
    # debhelper puts its unit in /lib/systemd/system), and the purge
    # rightly leaves it.
    p = run(["dpkg-deb", "-c", deb])
    assert p.returncode == 0, p.stderr
    before = {line.split()[5][1:].rstrip("/") or "/"
              for line in p.stdout.splitlines()}
    before = {path for path in before if os.path.lexists(path)}
    p = run(["dpkg", "-i", deb], timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    try:
        listed = run(["dpkg", "-L", "probekit"]).stdout.split()
        assert "/usr/bin/blktgt" in listed
        check_installed(tmp_path, set(listed))
    finally:
        p = run(["dpkg", "--purge", "probekit"], timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not installed()
    # Whatever the package listed is gone, but for directories that other
    # packages own too (/usr/bin, /usr/share/gdb/auto-load/usr/bin ...).
    left = [path for path in listed if path != "/." and os.path.lexists(path)
            and path not in before
            and not (os.path.isdir(path) and not os.path.islink(path)
                     and run(["dpkg", "-S", path]).returncode == 0)]
    assert left == [], f"left after dpkg --purge: {left}"


def check_installed(tmp_path, listed):
    env = clean_env()
    check_commands("/usr/bin", lambda real: real in listed)
    # blktgt keeps its symbols: dh_strip was told to leave it.
    p = run(["readelf", "-S", "-W", "/usr/bin/blktgt"])
    assert " .symtab " in p.stdout and " .debug_info " in p.stdout

    p = run(["probekit-check", "--binary", "/usr/bin/blktgt", "--catalog",
             "/usr/share/probekit/probes/blktgt.d"]
            + sorted(glob.glob("/usr/share/probekit/bt/*.bt")), cwd="/", env=env)
    assert p.returncode == 0, p.stdout + p.stderr

    # doc/probes-in-your-code.md's program of one's own, word for word,
    # from the package: make, CMake and Meson find it where it is
    # installed, and each route's program counts its 23 jobs.
    home = tmp_path / "home"
    home.mkdir()
    guide_env = dict(env, HOME=str(home))
    guides.check_shown(*guides.run_guide(home, guide_env))
    for build in guides.ROUTES:
        prog = str(home / "mysvc" / build / "mysvc")
        assert guides.count("/usr/bin/probekit-usdtcount", prog, guides.JOBS,
                                guide_env) == guides.COUNTS, build

    p = run(["man", "-w", "probekit-iolatency-bcc"], env=env)
    assert p.returncode == 0 and p.stdout.startswith("/usr/share/man/man8/"), p.stderr

    # gdb loads the helpers from its own auto-load directory, which its
    # default safe-path allows: no configuration.
    p = run(["gdb", "-batch", "-nx", "-ex", "help blktgt-ios", "/usr/bin/blktgt"],
            cwd="/", env=env)
    assert p.returncode == 0 and "Undefined command" not in p.stderr, p.stdout + p.stderr

    target = probekit.Target("/usr/bin/blktgt", tmp_path)
    target.start()
    trace = None
    try:
        rpc = ["blktgt-rpc", "-s", target.rpc_sock]
        p = run(rpc + ["bdev_null_create", "Null0", "64", "4096"], cwd="/", env=env)
        assert p.returncode == 0, p.stderr
        trace = subprocess.Popen(["probekit-bpftrace", str(target.pid),
                                  "/usr/share/probekit/bt/iops.bt"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 cwd="/", env=env, start_new_session=True)
        out = probekit.LineReader(trace.stdout)
        out.wait_for(re.escape(f"probekit: tracing PID={target.pid}"))
        p = run(rpc + ["workload_run", "-b", "Null0", "-w", "randread", "-o", "4096",
                       "-q", "4", "-n", str(IO_COUNT)], cwd="/", env=env)
        assert p.returncode == 0, p.stderr
        probekit.interrupt(trace, "trace")
        lines = out.drain(10)
        assert trace.returncode == 0, lines
        assert f"@iops_total[Null0, read]: {IO_COUNT}" in lines, lines
        # The twins as installed: the libbpf tool, and the BCC one on the
        # system's python3 and its bcc module.
        for tool in ("probekit-iolatency", "probekit-iolatency-bcc"):
            trace = subprocess.Popen([tool, "-p", str(target.pid)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, cwd="/", env=env,
                                     start_new_session=True)
            out = probekit.LineReader(trace.stdout)
            out.wait_for(histtools.READY)
            p = run(rpc + ["workload_run", "-b", "Null0", "-w", "randread", "-o", "4096",
                           "-q", "4", "-n", str(IO_COUNT)], cwd="/", env=env)
            assert p.returncode == 0, p.stderr
            probekit.interrupt(trace, tool)
            lines = out.drain(10)
            assert trace.returncode == 0, (tool, lines)
            hists = histtools.parse(lines)
            assert [histtools.total(h) for h in hists] == [IO_COUNT], (tool, lines)
    finally:
        if trace and trace.poll() is None:
            probekit.interrupt(trace, "trace")
        target.stop()
