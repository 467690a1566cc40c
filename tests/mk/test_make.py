# SPDX-License-Identifier: BSD-2-Clause
"""The build writes only under its output directory, whatever variables a
user passes: every variable that names an output is refused on the command
line, and O=DIR stays the one way to build elsewhere."""

import glob
import os
import re
import subprocess

import pytest

import probekit

MAKEFILES = [os.path.join(probekit.ROOT, "Makefile")] + sorted(
    glob.glob(os.path.join(probekit.ROOT, "mk", "*.mk")))


def assignments():
    """{variable: right-hand side} for every assignment in the build files,
    continuation lines joined (later += parts appended)."""
    out = {}
    for path in MAKEFILES:
        text = open(path).read().replace("\\\n", " ")
        for m in re.finditer(r"^(?:override\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?::=|\+=|\?=|=)(.*)$",
                             text, re.M):
            out[m.group(1)] = out.get(m.group(1), "") + " " + m.group(2)
    return out


def output_vars():
    """Variables whose value is a path under $(O) (flags that only mention
    $(O), such as -I$(O)/gen, are not outputs), and the variables their
    values are made from."""
    a = assignments()
    outs = {v for v, rhs in a.items()
            if re.search(r"(^|[\s,(])\$\(O\)/", rhs) and not v.endswith(("FLAGS", "LIBS"))}
    grew = True
    while grew:
        grew = False
        for v in list(outs):
            for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", a[v]):
                if ref in a and ref not in outs and ref != "O" \
                        and not ref.endswith(("FLAGS", "LIBS")):
                    outs.add(ref)
                    grew = True
    return outs


def make(*args, env=None):
    return subprocess.run(["make", "-n", "--no-print-directory", *args],
                          cwd=probekit.ROOT, capture_output=True, text=True,
                          timeout=probekit.TIMEOUT, env=env)


def listed():
    return set(probekit.make_vars(["OUTPUT_VARS"])["OUTPUT_VARS"].split())


def test_every_output_variable_is_guarded():
    found = output_vars()
    # Sanity: the scan sees the outputs named in the issue that found this.
    assert {"TARGET", "PROBES_H", "PROBES_O", "LIBBPF_BINS", "TRACE_TOOL"} <= found
    assert found <= listed(), f"not in OUTPUT_VARS: {sorted(found - listed())}"


@pytest.mark.parametrize("var", sorted(output_vars()))
def test_output_variable_refused(var, tmp_path):
    victim = tmp_path / "victim"
    p = make(f"O={tmp_path}/out", f"{var}={victim}", "all", "probes", "bench-progs")
    assert p.returncode != 0
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and f"{var} names a build output" in err[0] and "O=DIR" in err[0], p.stderr
    assert str(victim) not in p.stdout


def test_make_probes_target_does_not_touch_the_file(tmp_path):
    """The report: 'make probes TARGET=FILE' relinked blktgt over FILE."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me\n")
    p = subprocess.run(["make", "--no-print-directory", f"O={tmp_path}/out", "probes",
                        f"TARGET={victim}"], cwd=probekit.ROOT, capture_output=True,
                       text=True, timeout=probekit.TIMEOUT)
    assert p.returncode != 0 and "TARGET names a build output" in p.stderr
    assert victim.read_bytes() == b"keep me\n"
    assert not (tmp_path / "out").exists()


def test_environment_override_refused(tmp_path):
    env = dict(os.environ, TARGET=str(tmp_path / "victim"))
    p = subprocess.run(["make", "-e", "-n", "--no-print-directory", f"O={tmp_path}/out", "all"],
                       cwd=probekit.ROOT, capture_output=True, text=True,
                       timeout=probekit.TIMEOUT, env=env)
    assert p.returncode != 0 and "TARGET names a build output" in p.stderr


def test_plain_environment_and_o_still_work(tmp_path):
    """A TARGET in the environment (without -e) does not override the
    Makefile, and O=DIR puts every output under DIR."""
    out = tmp_path / "out"
    env = dict(os.environ, TARGET=str(tmp_path / "victim"))
    p = make(f"O={out}", "-B", "all", env=env)
    assert p.returncode == 0, p.stderr
    assert str(tmp_path / "victim") not in p.stdout
    written = re.findall(r"\s-o\s+(\S+)", p.stdout)
    assert written and all(w.startswith(str(out) + "/") for w in written), written


def test_check_installs_nothing_and_test_is_deps_then_check():
    """make check is for a machine that has what it needs (a package
    build, a user without network): it never runs the installer."""
    p = make("check")
    assert p.returncode == 0, p.stderr
    assert "deps.sh" not in p.stdout and "apt-get" not in p.stdout
    p = make("test")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    deps = [i for i, l in enumerate(lines) if "scripts/deps.sh" in l]
    check = [i for i, l in enumerate(lines) if re.search(r"make.* check$", l)]
    assert deps and check and deps[0] < check[0], p.stdout


def test_missing_program_names_its_package(monkeypatch):
    """A test that needs a program that is not installed says which Debian
    package has it (conftest.py skips it, or fails it under CI=true)."""
    monkeypatch.setenv("PATH", "/nonexistent")
    assert probekit.missing(["qemu-io", "fio"]) == (
        "needs qemu-io (Debian package qemu-utils), fio (Debian package fio); "
        "run 'make deps'")
    assert probekit.missing(["py:elftools"]) is None
    assert probekit.missing(["py:no_such_module_here"]).startswith(
        "needs no_such_module_here (Debian package ?)")
