# SPDX-License-Identifier: BSD-2-Clause
"""scripts/stack.sh, the runner of the suite on other Debian releases:
its mounts end with it, even when it is killed with SIGKILL, and bad
input gets one line.

The chroot here is a tiny one made by the test (sh, sleep, env and
umount with their libraries), carrying the marks of a current one (base: debootstrap
finished; stamp: the current package list is installed), so the runner
reuses it as it would a cached Debian userland and needs no network.
"""

import os
import pathlib
import re
import shutil
import signal
import subprocess

import pytest

import probekit
from probekit import LineReader, TIMEOUT, make_vars
from chroots import children, copy_with_libs, mounts, sigkill_leaves_nothing

STACK = os.path.join(probekit.ROOT, "scripts", "stack.sh")
pytestmark = pytest.mark.needs("unshare", "pivot_root", "findmnt", "chroot",
                               "ldd", "debootstrap")


def tiny_stack(cache, name):
    """A chroot the runner takes for a current cached NAME."""
    root = cache / name / "root"
    for d in ("proc", "sys", "dev", "etc", "srv", "bin", "usr/bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for prog in ("sh", "sleep", "env", "umount"):
        copy_with_libs(root, prog)
    for prog, at in (("sh", "bin/sh"), ("env", "usr/bin/env")):
        if not (root / at).exists():
            shutil.copy2(root / shutil.which(prog).lstrip("/"), root / at)
    stamp = subprocess.run([STACK, "--stamp", name], capture_output=True,
                           text=True, check=True).stdout
    (cache / name / "stamp").write_text(stamp)
    (cache / name / "base").write_text(name + "\n")
    return root


def test_sigkill_leaves_no_mount(tmp_path):
    cache = tmp_path / "cache"
    root = tiny_stack(cache, "trixie")
    env = dict(os.environ, PROBEKIT_STACK_CACHE=str(cache))
    runner = subprocess.Popen([STACK, "trixie", "echo ready $$; exec sleep 1009"],
                              env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    out = LineReader(runner.stdout)
    try:
        sleeper = int(out.wait_for(r"^ready (\d+)$").group(1))
        [inner] = children(runner.pid)
        # The runner's namespace has them; this one never sees them.
        inside = mounts(inner)
        for d in ("", "/proc", "/sys", "/dev"):
            assert f"{root}{d}" in inside, (d, inside)
        assert f"{root}/sys/kernel/tracing" in inside, inside
        sigkill_leaves_nothing(runner, out, (inner, sleeper), cache)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


@pytest.mark.parametrize("args,line", [
    (["bogus"], "stack: unknown stack 'bogus': debootstrap knows no Debian "
                "release of that name; usage: scripts/stack.sh NAME "),
    ([], "stack: no stack given; usage: scripts/stack.sh NAME "),
    (["-x"], "stack: unknown option '-x'; usage: scripts/stack.sh NAME "),
    (["trixie", "make", "test"], "stack: give COMMAND as one argument "),
])
def test_bad_input(tmp_path, args, line):
    env = dict(os.environ, PROBEKIT_STACK_CACHE=str(tmp_path))
    r = subprocess.run([STACK, *args], capture_output=True, text=True,
                       env=env, timeout=TIMEOUT)
    assert r.returncode == 2 and r.stdout == "", r
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(line), r.stderr
    assert os.listdir(tmp_path) == []


def test_prepare_only(tmp_path):
    """--prepare readies the cached chroot (here a current one, so there is
    nothing to install), runs no command, and leaves no mount."""
    cache = tmp_path / "cache"
    root = tiny_stack(cache, "trixie")
    env = dict(os.environ, PROBEKIT_STACK_CACHE=str(cache))
    r = subprocess.run([STACK, "--prepare", "trixie"], capture_output=True,
                       text=True, env=env, timeout=TIMEOUT)
    assert r.returncode == 0, r
    assert f"stack: trixie: prepared in {root}, on:\n" in r.stdout, r.stdout
    assert "running" not in r.stdout, r.stdout
    assert (root / "srv" / "probekit" / "scripts" / "stack.sh").exists()
    assert not [m for m in mounts() if m.startswith(str(cache))]
    r = subprocess.run([STACK, "--prepare", "trixie", "true"], capture_output=True,
                       text=True, env=env, timeout=TIMEOUT)
    assert r.returncode == 2 and r.stderr.startswith(
        "stack: --prepare takes a stack and no command; usage: "), r


def test_second_run_refuses_or_waits(tmp_path):
    """While one run holds a stack, a second refuses at once, naming the
    lock; with --wait (CI's run after its --prepare) it waits, and runs
    its command once the first has ended."""
    cache = tmp_path / "cache"
    tiny_stack(cache, "trixie")
    env = dict(os.environ, PROBEKIT_STACK_CACHE=str(cache))
    first = subprocess.Popen([STACK, "trixie", "echo ready; exec sleep 1009"],
                             env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    waiter = None
    try:
        LineReader(first.stdout).wait_for(r"^ready$")
        r = subprocess.run([STACK, "trixie", "echo second"], capture_output=True,
                           text=True, env=env, timeout=TIMEOUT)
        lock = cache / "trixie" / "lock"
        assert r.returncode == 2 and r.stdout == "", r
        assert r.stderr == (f"stack: another run of stack trixie holds {lock}; "
                            "wait for it to end (or give --wait)\n"), r.stderr
        waiter = subprocess.Popen([STACK, "--wait", "trixie", "echo second 23"],
                                  env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        out = LineReader(waiter.stdout)
        out.wait_for(rf"^stack: trixie: waiting for the run that holds {lock}$")
        assert first.poll() is None and waiter.poll() is None
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=TIMEOUT)
        assert waiter.wait(timeout=TIMEOUT) == 0
        lines = out.drain(TIMEOUT)
        assert lines.count("second 23") == 1, lines
        assert "stack: trixie: 'echo second 23' exited 0 (PASS), on:" in lines, lines
    finally:
        for p in (first, waiter):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        first.stdout.close()
        if waiter:
            waiter.stdout.close()


def documented_leave_out():
    """The code spans that open the bullets of doc/supported-systems.md's
    section on what CI's chroot runs leave out."""
    with open(os.path.join(probekit.ROOT, "doc", "supported-systems.md")) as f:
        text = f.read()
    section = text.split("### What the chroot runs leave out\n", 1)[1]
    section = section.split("\n#", 1)[0]
    return re.findall(r"^- `([^`]+)`", section, re.M)


def test_leave_out_is_documented_and_real():
    """STACK_LEAVE_OUT (mk/stack.mk), what .ci/run's chroot runs leave
    out, is the list doc/supported-systems.md gives, in its order, and each
    entry is a stage of make check or a test file or test that exists."""
    r = subprocess.run(["make", "-s", "--no-print-directory", "stack-leave-out"],
                       cwd=probekit.ROOT, capture_output=True, text=True,
                       timeout=TIMEOUT, check=True)
    declared = r.stdout.split()
    assert declared and declared == documented_leave_out(), \
        (declared, documented_leave_out())
    stages = make_vars(["CHECK_STAGES"])["CHECK_STAGES"].split()
    tests = os.path.join(probekit.ROOT, "tests")
    for entry in declared:
        if entry in stages:
            continue
        path, _, name = entry.partition("::")
        assert os.path.isfile(os.path.join(tests, path)), entry
        if name:
            with open(os.path.join(tests, path)) as f:
                assert re.search(rf"^def {re.escape(name)}\(", f.read(), re.M), entry


CHILD = """
import os, sys
sys.path.insert(0, sys.argv[1])
import probekit

def werror(env):
    return probekit.make_vars(["CHECK_WERROR"], env=env)["CHECK_WERROR"]

print(werror(dict(os.environ)), werror(None))
"""


def test_a_make_above_is_not_inherited(tmp_path):
    """A make that runs the suite with CHECK_WERROR=0 on its command line,
    as make stack-check STACK=sid does, hands it down twice (in MAKEFLAGS,
    and exported as a variable of its own): a plain environment gives a
    test's make 0, probekit.own_make_env() the Makefile's own 1."""
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    lib = os.path.join(probekit.ROOT, "tests", "lib")
    r = subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", "-", "CHECK_WERROR=0",
         "OTHER=a b"],
        input=f"all:\n\t@/usr/bin/python3 {child} {lib}\n",
        env=probekit.own_make_env(), capture_output=True, text=True,
        timeout=TIMEOUT)
    assert (r.returncode, r.stdout) == (0, "0 1\n"), r.stdout + r.stderr
    assert probekit.make_command_line_vars("s -- FOO=a\\ b CHECK_WERROR=0") \
        == ["FOO", "CHECK_WERROR"]
    assert probekit.make_command_line_vars("s -j2") == []


def test_warnings_are_errors_but_on_the_warn_only_stacks():
    """make check's builds make every C and BPF compiler warning an error
    (CHECK_WERROR, 1 unless given), and make stack-check STACK=NAME, as
    .ci/run runs it, does too on every CI stack but those of
    STACKS_WARN_ONLY (unstable), whose warnings it only reports."""
    v = make_vars(["CHECK_WERROR", "CI_STACKS", "STACKS_WARN_ONLY", "WARN",
                   "BPF_CFLAGS"])
    assert v["CHECK_WERROR"] == "1" and v["STACKS_WARN_ONLY"] == "sid"
    assert "-Werror" not in v["WARN"] + v["BPF_CFLAGS"]
    on = make_vars(["WARN", "BPF_CFLAGS"], "WERROR=1")
    assert "-Werror" in on["WARN"].split() and "-Werror" in on["BPF_CFLAGS"].split()
    want = {s: "0" if s in v["STACKS_WARN_ONLY"].split() else "1"
            for s in v["CI_STACKS"].split() + ["sid"]}
    assert want == {"trixie": "1", "sid": "0"}
    assert {s: make_vars(["STACK_WERROR"], f"STACK={s}")["STACK_WERROR"]
            for s in want} == want
    with open(os.path.join(probekit.ROOT, ".ci", "run")) as f:
        assert '"make stack-check STACK=$s"' in f.read()
    with open(os.path.join(probekit.ROOT, "Makefile")) as f:
        mk = f.read()
    recipes = re.findall(r"(?ms)^check-(?:build|asan):\n(.*?)\n\n", mk)
    builds = [ln for r in recipes for ln in r.splitlines() if " all" in ln]
    assert len(builds) == 3 and all("WERROR=$(CHECK_WERROR)" in ln
                                    for ln in builds), builds


def scripts_copy(tmp_path, edit=None):
    """stack.sh with its library and deps.sh in tmp_path/scripts, deps.sh
    changed by edit (old, new), as a commit might change it; stack.sh
    --stamp reads the deps.sh beside it."""
    d = tmp_path / "scripts"
    d.mkdir(parents=True)
    for name in ("stack.sh", "chroot-lib.sh", "deps.sh"):
        shutil.copy2(os.path.join(probekit.ROOT, "scripts", name), d / name)
    if edit:
        text = (d / "deps.sh").read_text()
        assert text.count(edit[0]) == 1, edit
        (d / "deps.sh").write_text(text.replace(*edit))
    return d


def stamp_of(scripts, env=None):
    return subprocess.run([str(scripts / "stack.sh"), "--stamp", "trixie"],
                          capture_output=True, text=True, check=True,
                          env=env, timeout=TIMEOUT).stdout


def test_stamp_follows_the_list_not_the_system(tmp_path):
    """A cached chroot is refreshed when deps.sh's package list changes,
    its per-system rules included (clang's runtime, the kernel headers,
    the cross toolchain, which --list left out, so that a package added
    to them left a cached chroot without it); the stamp is
    the same whatever the system's architecture and clang, which the
    runner reads on the host, not in the chroot."""
    same = stamp_of(scripts_copy(tmp_path / "same"))
    assert same == stamp_of(pathlib.Path(probekit.ROOT) / "scripts")
    # Another architecture and clang: dpkg and clang that say so.
    fake = tmp_path / "fake"
    fake.mkdir()
    for prog, out in (("dpkg", "arm64"), ("clang", "clang version 97.0.1")):
        (fake / prog).write_text(f"#!/bin/sh\necho '{out}'\n")
        (fake / prog).chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    assert stamp_of(scripts_copy(tmp_path / "arm64"), env) == same
    listed = subprocess.run([os.path.join(probekit.ROOT, "scripts", "deps.sh"),
                             "--list"], capture_output=True, text=True,
                            check=True, timeout=TIMEOUT).stdout
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert f"linux-headers-{arch}" not in listed and "libclang-rt-1" not in listed
    for i, edit in enumerate([("cscope pkgconf", "cscope pkgconf strace-67"),
                              ("libc6-dev-arm64-cross", "libc6-dev-arm64-cross "
                               "libgcc-s1-arm64-cross"),
                              ('@ARCH@"', '@ARCH@ linux-kbuild-@ARCH@"')]):
        assert stamp_of(scripts_copy(tmp_path / f"edit{i}", edit)) != same, edit


def test_changed_list_rebuilds(tmp_path):
    """A chroot whose stamp is another list's is rebuilt from debootstrap
    on: said in one line, its marks removed (here debootstrap then fails
    at once, on a mirror that does not exist, and the run says so)."""
    cache = tmp_path / "cache"
    tiny_stack(cache, "trixie")
    (cache / "trixie" / "stamp").write_text("0" * 64 + "\n")
    env = dict(os.environ, PROBEKIT_STACK_CACHE=str(cache),
               PROBEKIT_STACK_MIRROR=f"file://{tmp_path}/no-mirror")
    r = subprocess.run([STACK, "trixie", "echo ran"], capture_output=True,
                       text=True, env=env, timeout=TIMEOUT)
    assert r.returncode == 2, r
    assert r.stdout.splitlines()[:2] == [
        "stack: trixie: the package list changed; rebuilding the chroot",
        f"stack: trixie: debootstrap --variant=minbase trixie from "
        f"file://{tmp_path}/no-mirror"], r.stdout
    assert r.stderr == ("stack: debootstrap of trixie failed; see "
                        f"{cache}/trixie/debootstrap.log\n"), r.stderr
    assert not (cache / "trixie" / "stamp").exists()
    assert not (cache / "trixie" / "base").exists()
    assert not [m for m in mounts() if m.startswith(str(cache))]
