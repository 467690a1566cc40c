# SPDX-License-Identifier: BSD-2-Clause
"""doc/probes-in-your-code.md's "A program of your own", word for word:
its files and commands, taken from its code blocks in order, run as one
shell session in a fresh directory (HOME a temporary directory), from a
`make install PREFIX=$HOME/pk` of this checkout, with no checkout
directory on PATH.  The make route's trace must print what the guide
shows; the CMake and Meson programs are then counted the same way, and
the operand pitfall the guide shows is built and checked.
(test_cleanroom.py runs the guide's steps before that section from the
Debian package.)"""

import os
import re
import subprocess

import pytest

import probekit
from probekit import TIMEOUT
from installs import clean_env
from guides import COUNTS, JOBS, ROUTES, check_shown, count, run_guide
from guides import home  # noqa: F401 (a fixture)


pytestmark = pytest.mark.needs("dtrace", "readelf", "pkg-config", "cmake", "meson", "ninja")


def user_env(home):
    """A user with the install alone; pkg-config searches nothing of this
    machine's but what the guide puts on its path."""
    return dict(clean_env(), HOME=str(home), PKG_CONFIG_LIBDIR=str(home / "no-system-pc"),
                PKG_CONFIG_PATH="")


@pytest.fixture(scope="module")
def guided(home):
    return run_guide(home, user_env(home))


def test_guide_commands_print_what_it_shows(guided, bpf):
    check_shown(*guided)


@pytest.mark.parametrize("build", ROUTES)
def test_each_route_builds_a_program_that_counts(guided, home, build, bpf):
    prog = str(home / "mysvc" / build / "mysvc")
    usdtcount = str(home / "pk" / "bin" / "probekit-usdtcount")
    assert count(usdtcount, prog, JOBS, user_env(home)) == COUNTS


def test_missing_probekit_stops_each_route(guided, home, tmp_path):
    """Without the prefix on pkg-config's or CMake's path, each build stops
    at its start, saying probekit is missing, and builds nothing."""
    src = home / "mysvc"
    env = dict(user_env(home), PATH=clean_env()["PATH"])
    runs = {
        "make": (["make", "-C", str(src), f"O={tmp_path}/make"],
                 "pkg-config finds no probekit"),
        "cmake": (["cmake", "-S", str(src), "-B", f"{tmp_path}/cmake"],
                  "probekit-config.cmake"),
        "meson": (["meson", "setup", f"{tmp_path}/meson", str(src)],
                  "Dependency \"probekit\" not found"),
    }
    for what, (argv, says) in runs.items():
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT * 5)
        assert p.returncode != 0 and says in p.stdout + p.stderr, (what, p.stdout, p.stderr)
    assert not (tmp_path / "make").exists()
    assert not list((tmp_path / "cmake").glob("*.probekit"))


def test_array_element_operand_and_its_fix(guided, home, tmp_path):
    """The pitfall the guide shows: mysvc.c without its empty asm passes
    kinds[...] as a scale-index-base operand, which probekit-check says the
    installed libbpf cannot read (when it cannot: detected), naming the
    fix; with the asm (the guide's build) it is a register."""
    import sys
    sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
    from probelib import argspec
    src = home / "mysvc"
    naive = tmp_path / "naive"
    naive.mkdir()
    for f in ("mysvc.d", "Makefile"):
        (naive / f).write_text((src / f).read_text())
    code = (src / "mysvc.c").read_text()
    asm = '\t\t__asm__ volatile("" : "+r"(kind));\t/* a register operand */\n'
    assert asm in code
    (naive / "mysvc.c").write_text(code.replace(asm, ""))
    env = dict(user_env(home), PATH=f"{home}/pk/bin:" + clean_env()["PATH"],
               PKG_CONFIG_PATH=f"{home}/pk/share/pkgconfig")
    p = subprocess.run(["make", "-C", str(naive)], env=env, capture_output=True, text=True,
                       timeout=TIMEOUT * 5)
    assert p.returncode == 0, p.stdout + p.stderr

    def operand(prog):
        notes = subprocess.run(["readelf", "-n", "-W", prog], capture_output=True, text=True,
                               check=True).stdout
        m = re.search(r"Name: job__start\n.*\n\s+Arguments: \S+ 8@(\S+)", notes)
        assert m, notes
        return m.group(1)

    op = operand(str(naive / "build" / "mysvc"))
    assert re.fullmatch(r"-?\d*\(%\w+,%\w+,8\)", op), op
    assert re.fullmatch(r"%\w+", operand(str(src / "build" / "mysvc")))
    p = subprocess.run([f"{home}/pk/bin/probekit-check", "--binary",
                        str(naive / "build" / "mysvc")], env=env, capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr
    note = (f"probekit-check: note: mysvc:job__start: arg1: "
            f"{argspec.reader_name(argspec.LIBBPF)} cannot read {op}: a scale-index-base "
            f"operand; {argspec.operand_fix()}")
    if "index" in argspec.readers()[argspec.LIBBPF]:
        # libbpf 1.7 (unstable) reads it: nothing to note.
        assert not [ln for ln in p.stdout.splitlines()
                    if ln.startswith("probekit-check: note: mysvc:")], p.stdout
    else:
        assert note in p.stdout.splitlines(), p.stdout
