# SPDX-License-Identifier: BSD-2-Clause
"""Every C program probekit builds is hardened, read back from the ELF
files themselves: a position-independent executable (type DYN, FLAGS_1
PIE), full RELRO (a GNU_RELRO segment and BIND_NOW), the stack protector
(__stack_chk_fail) and _FORTIFY_SOURCE (the glibc *_chk functions).  And
a distribution's CPPFLAGS, CFLAGS and LDFLAGS reach every compile and
link: given flags that turn fortify and the stack protector off and pick
another hash style, the binaries show exactly that."""

import os
import subprocess

import pytest

import probekit
from elf_hardening import hardening, hardening_problems

pytestmark = pytest.mark.needs("readelf")


def compiled_programs(build):
    """The ELF executables in build's bin/ and libexec/ (the scripts are
    links into the tree)."""
    out = []
    for d in ("bin", os.path.join("libexec", "probekit")):
        d = os.path.join(build, d)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            path = os.path.join(d, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    out.append(path)
    return out


def test_every_compiled_program_is_hardened():
    progs = compiled_programs(probekit.BUILD)
    names = {os.path.basename(p) for p in progs}
    # blktgt, the eight libbpf tools, the exporter and the wrapper's helper.
    assert {"blktgt", "probekit-iolatency", "probekit-usdtcount", "probekit-exporter",
            "probekit-scan"} <= names, names
    assert len(progs) >= 11, progs
    bad = {os.path.basename(p): hardening_problems(p) for p in progs}
    assert {n: b for n, b in bad.items() if b} == {}


# One of each kind of compile: the target (with its dtrace -G object), a
# libbpf tool, the exporter, and the note reader's helper.
GIVEN_TARGETS = ("bin/blktgt", "bin/probekit-qdepth", "bin/probekit-exporter",
                 "libexec/probekit/probekit-scan")


def test_given_distribution_flags_reach_every_compile_and_link(tmp_path):
    out = tmp_path / "given"
    p = subprocess.run(["make", "--no-print-directory", f"O={out}",
                        "CPPFLAGS=-U_FORTIFY_SOURCE",
                        "CFLAGS=-O2 -g -fno-stack-protector",
                        "LDFLAGS=-Wl,--hash-style=sysv"]
                       + [f"{out}/{t}" for t in GIVEN_TARGETS],
                       cwd=probekit.ROOT, capture_output=True, text=True,
                       timeout=probekit.TIMEOUT * 15)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for t in GIVEN_TARGETS:
        h = hardening(os.path.join(out, t))
        # The given flags win where they speak...
        assert (h["fortified"], h["stack_chk"], h["hash"]) == ([], False, True), (t, h)
        # ...and PIE and full RELRO stay, which they did not turn off.
        assert h["pie"] and h["bind_now"] and h["relro"], (t, h)
