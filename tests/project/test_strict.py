# SPDX-License-Identifier: BSD-2-Clause
"""The suite's runner is strict by itself: make check (the README's test
command is make deps, then make check) runs pytest under CI=true, so a
program make deps installs, or BPF tracing, that is missing fails the run
rather than skipping a test, and so does any skip not on
tests/lib/allowed_skips.py's list.  A plain pytest run of the same file skips
instead, and both end with their skips counted, each reason once.

Each run here is make check-suite (the stage of make check that runs the
whole suite) on a tiny test file of its own, with a PATH that has every
program but bpftrace: about a second.
"""

import os
import re
import subprocess

import allowed_skips
import probekit
from probekit import ROOT, TIMEOUT

TINY = '''
import pytest

@pytest.mark.needs("bpftrace")
def test_needs_bpftrace():
    pass

def test_attaches(bpf):
    pass

def test_skips():
    pytest.skip("a reason of its own")
'''

# A test on tests/lib/allowed_skips.py's list, by its node id.
ALLOWED = '''
import pytest

def test_emulated_smoke():
    pytest.skip("the smoke runs in make arm64-smoke")
'''


def path_without(tmp_path, name):
    """A PATH of one directory with every program of this one but name."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for f in os.listdir(d):
            link = bin_dir / f
            if f != name and not os.path.lexists(link):
                link.symlink_to(os.path.join(d, f))
    return str(bin_dir)


def run_suite(tmp_path, files, strict, path):
    """The tiny files, run as make check-suite runs the suite (strict), or
    by a plain pytest in tests/ (not strict); (exit status, output)."""
    tiny = tmp_path / "tiny"
    tiny.mkdir(exist_ok=True)
    for name, text in files.items():
        (tiny / name).parent.mkdir(parents=True, exist_ok=True)
        (tiny / name).write_text(text)
    # tests/conftest.py as a plugin, on a directory of the tiny files' own.
    args = f"-p conftest -c pytest.ini --rootdir={tiny} -q {tiny}"
    env = probekit.own_make_env()
    env.pop("CI", None)
    env["PATH"] = path
    if strict:
        cmd = ["make", "-s", "--no-print-directory", "-C", ROOT,
               "check-suite", f"PYTEST_ARGS={args}"]
    else:
        cmd = ["/usr/bin/python3", "-m", "pytest", *args.split()]
    p = subprocess.run(cmd, cwd=os.path.join(ROOT, "tests"), env=env,
                       capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout + p.stderr


def test_make_check_fails_without_bpftrace(tmp_path):
    """make check-suite with no bpftrace on PATH: the test that needs it
    and the one that attaches fail (errors at setup), the one that skips
    on its own fails; a skip that tests/lib/allowed_skips.py lists (by node
    id) stays a skip, and the run ends with it, its reason and the
    list's."""
    path = path_without(tmp_path, "bpftrace")
    rc, out = run_suite(tmp_path, {"test_tiny.py": TINY,
                                   "scripts/test_arm64.py": ALLOWED}, True, path)
    assert rc != 0, out
    assert re.search(r"^1 failed, 1 skipped, 2 errors in ", out, re.M), out
    for line in [
            "required under CI=true (make check): needs bpftrace (Debian "
            "package bpftrace); run 'make deps'",
            "required under CI=true (make check): BPF tracing is "
            "unavailable: bpftrace is not installed (run 'make deps')",
            "skipped under CI=true, and not on tests/lib/allowed_skips.py's "
            "list: a reason of its own"]:
        assert line in out.splitlines(), out
    tail = out[out.index("1 skipped; strict (CI=true)"):]
    why = allowed_skips.allowed("scripts/test_arm64.py::test_emulated_smoke")
    assert [ln for ln in tail.splitlines() if " skipped: " in ln] == [
        f"1 skipped: the smoke runs in make arm64-smoke [allowed: {why}]"], out


def test_plain_pytest_skips_and_says_why(tmp_path):
    """The same files by a plain pytest (a developer's run by hand): four
    skips, counted, each reason on a line of its own."""
    path = path_without(tmp_path, "bpftrace")
    rc, out = run_suite(tmp_path, {"test_tiny.py": TINY,
                                   "scripts/test_arm64.py": ALLOWED}, False, path)
    assert rc == 0, out
    assert re.search(r"^4 skipped in ", out, re.M), out
    tail = out[out.index("4 skipped; not strict (CI is not true)"):]
    why = allowed_skips.allowed("scripts/test_arm64.py::test_emulated_smoke")
    assert [ln for ln in tail.splitlines() if " skipped: " in ln] == [
        "1 skipped: BPF tracing is unavailable: bpftrace is not installed "
        "(run 'make deps')",
        "1 skipped: a reason of its own",
        "1 skipped: needs bpftrace (Debian package bpftrace); run 'make deps'",
        f"1 skipped: the smoke runs in make arm64-smoke [allowed: {why}]",
    ], out
