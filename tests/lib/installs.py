# SPDX-License-Identifier: BSD-2-Clause
"""make install into a scratch prefix, and what an installed probekit's
commands must answer."""

import os
import subprocess

import pytest

import probekit


PREFIX = "/usr/local"


def make(*args, cwd=probekit.ROOT):
    return subprocess.run(["make", "--no-print-directory", f"O={probekit.BUILD}", *args],
                          cwd=cwd, capture_output=True, text=True,
                          timeout=probekit.TIMEOUT * 10)


def install(stage):
    p = make("install", f"DESTDIR={stage}", f"PREFIX={PREFIX}")
    assert p.returncode == 0, p.stdout + p.stderr
    return str(stage) + PREFIX


def clean_env():
    """The environment of a user who has only the install: no checkout or
    build directory on PATH."""
    path = [d for d in os.environ.get("PATH", "").split(":")
            if d and not os.path.realpath(d).startswith(probekit.ROOT)]
    return dict(os.environ, PATH=":".join(path))


def commands():
    """The commands in $(O)/bin; none before a build (the tests that need
    them then fail, saying so)."""
    d = os.path.join(probekit.BUILD, "bin")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


@pytest.fixture(scope="module")
def inst(tmp_path_factory):
    """One staged install for the module's read-only tests."""
    return install(tmp_path_factory.mktemp("stage"))


def check_commands(bindir, owns):
    """Every command the build made is in bindir, is the install's own copy
    (owns(its real path) is true), and answers --version from /, with no
    checkout directory on PATH.  test_deb.py checks the installed package
    with it too."""
    version = open(os.path.join(probekit.ROOT, "VERSION")).read().strip()
    names = commands()
    assert {"blktgt", "probekit-bpftrace", "probekit-check", "probekit-gencatalog",
            "blktgt-trace", "blktgt-rpc"} <= set(names)
    for name in names:
        path = os.path.join(bindir, name)
        assert os.path.lexists(path), f"{name} is not installed"
        # What runs is the installed copy, never the checkout's file.
        real = os.path.realpath(path)
        assert owns(real), f"{name} -> {real}"
        p = subprocess.run([path, "--version"], cwd="/", env=clean_env(),
                           capture_output=True, text=True, timeout=probekit.TIMEOUT)
        assert p.returncode == 0 and p.stdout == f"{name} (probekit) {version}\n", \
            (name, p.stdout, p.stderr)
