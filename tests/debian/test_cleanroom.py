# SPDX-License-Identifier: BSD-2-Clause
"""The package from a clean room (scripts/cleanroom.sh): it builds in a
minimal Debian chroot of this machine's release holding only
build-essential and debian/control's Build-Depends, installs there with
its Depends, and its commands run from / (every one answers --version;
the wrapper counts a blktgt's 23 reads).  Then, in a chroot with nothing
of probekit's but that package, the guide the README sends a newcomer to,
as the package ships it, runs word for word: its sh blocks in order, as
one shell session in the home directory beside the .deb, with each text
block it shows checked against what the commands before it printed.

One package build serves both (a module fixture).  Slow: the chroot is
made once (debootstrap, then the Build-Depends; cached, and made again
when the release or the Build-Depends change), and each run builds the
package and installs it.  So it runs under CI=true (make check in CI), or
when PROBEKIT_CLEANROOM=1 asks for it; the cache is
$PROBEKIT_STACK_CACHE/cleanroom.

test_sigkill_leaves_no_mount needs neither network nor package: it runs
on a tiny chroot that carries the marks of a current one, as test_stack's
test of the same does."""

import gzip
import io
import os
import re
import shutil
import subprocess
import tarfile

import pytest

import probekit
from probekit import LineReader, TIMEOUT
from chroots import children, copy_with_libs, mounts, sigkill_leaves_nothing
from guides import fenced_blocks, shown_in

CLEANROOM = os.path.join(probekit.ROOT, "scripts", "cleanroom.sh")
# What the README sends a newcomer to: it names this guide, and its
# commands are the quickstart's, from the package.
GUIDE = "doc/probes-in-your-code.md"
SLOW = os.environ.get("CI") == "true" or os.environ.get("PROBEKIT_CLEANROOM") == "1"
BUILD_TIMEOUT = 7200
IO_COUNT = 23                   # tests/machines/cleanroom_smoke.sh's reads

pytestmark = pytest.mark.needs("unshare", "findmnt", "debootstrap", "dpkg-deb")
slow = pytest.mark.skipif(not SLOW, reason="builds the package in a debootstrap chroot "
                          "(minutes): runs under CI=true, or with PROBEKIT_CLEANROOM=1")


def deb_files(deb):
    """{path: bytes} of the files in the package (a link's target, for a
    symbolic link)."""
    data = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        return {m.name[1:]: t.extractfile(m).read() if m.isfile() else m.linkname
                for m in t.getmembers() if m.isfile() or m.issym()}


def shipped_text(files, path):
    """A doc as the package ships it, gzipped by dh_compress or not."""
    if path in files:
        return files[path].decode()
    return gzip.decompress(files[path + ".gz"]).decode()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("cleanroom")
    p = subprocess.run([CLEANROOM, "build", str(out)], capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT)
    debs = [os.path.join(out, f) for f in os.listdir(out)
            if re.match(r"probekit_.*\.deb$", f)]
    return p, debs


@slow
def test_builds_installs_and_runs_in_a_clean_room(built):
    p, debs = built
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert len(debs) == 1, debs
    files = deb_files(debs[0])
    commands = [f for f in files if f.startswith("/usr/bin/")]
    version = files["/usr/share/probekit/VERSION"].decode().strip()
    smoke = [line for line in p.stdout.splitlines() if line.startswith("smoke: ")]
    assert smoke == [
        f"smoke: {len(commands)} of {len(commands)} commands answer --version with {version}",
        f"smoke: @iops_total[Null0, read]: {IO_COUNT}",
    ], p.stdout + p.stderr


@slow
def test_shipped_guide_word_for_word(built, tmp_path):
    p, debs = built
    assert p.returncode == 0 and len(debs) == 1, p.stdout[-4000:] + p.stderr[-4000:]
    files = deb_files(debs[0])
    readme = shipped_text(files, "/usr/share/doc/probekit/README.md")
    assert f"]({GUIDE})" in readme, "the shipped README no longer sends a newcomer to " + GUIDE
    guide = shipped_text(files, "/usr/share/doc/probekit/" + GUIDE)
    # The steps from the package; test_guide.py runs the section after them.
    guide = guide.split("\n## A program of your own\n", 1)[0]
    blocks = fenced_blocks(guide)
    script, shown = [], []
    for lang, text in blocks:
        if lang == "sh":
            script += [f"echo '=== cleanroom: block {len(shown)}'", text]
            shown.append([])
        elif lang == "text":
            assert shown, "the guide shows output before any command"
            shown[-1].append(text)
    assert len(shown) >= 5, blocks
    (tmp_path / "guide.sh").write_text("\n".join(script) + "\n")
    r = subprocess.run([CLEANROOM, "run", debs[0], str(tmp_path / "guide.sh")],
                       capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]
    printed = re.split(r"^=== cleanroom: block \d+\n", r.stdout, flags=re.M)[1:]
    assert len(printed) == len(shown), r.stdout[-6000:]
    checked = 0
    for i, (texts, out) in enumerate(zip(shown, printed)):
        for text in texts:
            assert shown_in(text, out), f"block {i} printed, not as the guide shows:\n{out}"
            checked += 1
    # The two traces: requests.bt and batch.bt, each 23 requests.
    assert checked == 2, checked


def tiny_cleanroom(cache):
    """A base and build layer the runner takes for current ones: sh, bash,
    env, umount and sleep with their libraries, and an apt-get that does
    nothing."""
    root = cache / "cleanroom" / "base" / "root"
    for d in ("proc", "sys", "dev", "etc/apt", "var/cache/apt/archives", "root",
              "tmp", "bin", "usr/bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for prog in ("sh", "bash", "sleep", "env", "umount"):
        copy_with_libs(root, prog)
    for prog, at in (("sh", "bin/sh"), ("env", "usr/bin/env")):
        if not (root / at).exists():
            shutil.copy2(root / shutil.which(prog).lstrip("/"), root / at)
    (root / "usr/bin/apt-get").write_text("#!/bin/sh\nexit 0\n")
    (root / "usr/bin/apt-get").chmod(0o755)
    (cache / "cleanroom" / "base" / "base").write_text("tiny\n")
    (cache / "cleanroom" / "base" / "updated").write_text("")
    (cache / "cleanroom" / "build").mkdir()
    stamp = subprocess.run([CLEANROOM, "--stamp"], capture_output=True, text=True,
                           check=True).stdout
    (cache / "cleanroom" / "build" / "stamp").write_text(stamp)
    return root


def test_sigkill_leaves_no_mount(tmp_path):
    cache = tmp_path / "cache"
    tiny_cleanroom(cache)
    (tmp_path / "script.sh").write_text("echo ready $$\nexec sleep 1009\n")
    (tmp_path / "probekit_0_amd64.deb").write_text("")
    env = dict(os.environ, PROBEKIT_STACK_CACHE=str(cache))
    runner = subprocess.Popen([CLEANROOM, "run", str(tmp_path / "probekit_0_amd64.deb"),
                               str(tmp_path / "script.sh")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = LineReader(runner.stdout)
    try:
        sleeper = int(out.wait_for(r"^ready (\d+)$").group(1))
        [inner] = children(runner.pid)
        # The run's overlay, and what tracing needs under it, are in the
        # runner's namespace only.
        [run] = [d for d in os.listdir(cache / "cleanroom") if d.startswith("run.")]
        root = str(cache / "cleanroom" / run / "root")
        inside = mounts(inner)
        for d in ("", "/proc", "/sys", "/dev", "/var/cache/apt/archives"):
            assert f"{root}{d}" in inside, (d, inside)
        sigkill_leaves_nothing(runner, out, (inner, sleeper), cache)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    # The run's directory went with it (the inner script's TERM trap).
    assert not [d for d in os.listdir(cache / "cleanroom") if d.startswith("run.")]


@pytest.mark.parametrize("args,line", [
    ([], "cleanroom: usage: scripts/cleanroom.sh build OUT | run DEB SCRIPT"),
    (["bogus"], "cleanroom: unknown command 'bogus'; usage: "),
    (["build"], "cleanroom: give the output directory; usage: "),
    (["run", "/nonexistent.deb", "/nonexistent.sh"], "cleanroom: no package '/nonexistent.deb'; usage: "),
])
def test_bad_input(tmp_path, args, line):
    env = dict(os.environ, PROBEKIT_STACK_CACHE=str(tmp_path))
    r = subprocess.run([CLEANROOM, *args], capture_output=True, text=True,
                       env=env, timeout=TIMEOUT)
    assert r.returncode == 2 and r.stdout == "", r
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(line), r.stderr
    assert os.listdir(tmp_path) == []
