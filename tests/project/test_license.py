# SPDX-License-Identifier: BSD-2-Clause
"""probekit can be shipped: a LICENSE at the root, an SPDX line in every
source file (scripts and extensionless tools included), and BPF programs
that declare a license the kernel accepts for GPL-only helpers."""

import glob
import os
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

import probekit

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("py:elftools")

NOT_SOURCE = (".md", ".txt", ".svg", ".json", ".dat", ".ini")
NOT_SOURCE_NAMES = {"LICENSE", "VERSION", ".gitignore"}


def tracked():
    p = subprocess.run(["git", "ls-files", "-z"], cwd=probekit.ROOT, capture_output=True,
                       check=True)
    return [f for f in p.stdout.decode().split("\0") if f]


def sources():
    out = []
    for f in tracked():
        if f.endswith(NOT_SOURCE) or os.path.basename(f) in NOT_SOURCE_NAMES \
                or f.startswith("debian/"):
            continue
        out.append(f)
    return out


def spdx(path):
    """The SPDX identifier in the first three lines, or None."""
    with open(os.path.join(probekit.ROOT, path), encoding="utf-8", errors="replace") as f:
        for _ in range(3):
            line = f.readline()
            if "SPDX-License-Identifier:" in line:
                ident = line.split("SPDX-License-Identifier:", 1)[1]
                return ident.strip().removesuffix("*/").strip()
    return None


def test_license_file_is_bsd_2_clause():
    text = open(os.path.join(probekit.ROOT, "LICENSE")).read()
    assert "Redistribution and use in source and binary forms" in text
    assert "1. Redistributions of source code" in text
    assert "2. Redistributions in binary form" in text
    assert "3." not in text     # two clauses, not three


def test_every_source_file_has_an_spdx_line():
    files = sources()
    assert len(files) > 100
    missing = [f for f in files if spdx(f) is None]
    assert not missing, f"no SPDX-License-Identifier in the first lines of: {missing}"


def test_spdx_identifiers():
    """User space is BSD-2-Clause; BPF programs are dual-licensed, as
    their 'Dual BSD/GPL' license section says."""
    for f in sources():
        want = "(BSD-2-Clause OR GPL-2.0-only)" if f.endswith((".bpf.c", ".bpf.h")) \
            else "BSD-2-Clause"
        assert spdx(f) == want, f


def test_bpf_programs_declare_dual_bsd_gpl():
    progs = sorted(glob.glob(os.path.join(probekit.ROOT, "libbpf", "*.bpf.c")))
    assert progs
    for p in progs:
        text = open(p).read()
        assert 'char LICENSE[] SEC("license") = "Dual BSD/GPL";' in text, p


def test_built_bpf_objects_carry_the_license(build):
    objs = sorted(glob.glob(os.path.join(build, "obj", "libbpf", "*.bpf.o")))
    if not objs:
        pytest.fail(f"no BPF objects under {build}/obj/libbpf; run the suite with 'make check'")
    for o in objs:
        with open(o, "rb") as f:
            sec = ELFFile(f).get_section_by_name("license")
            assert sec is not None, o
            assert sec.data().rstrip(b"\0") == b"Dual BSD/GPL", o
