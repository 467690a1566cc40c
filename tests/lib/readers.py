# SPDX-License-Identifier: BSD-2-Clause
"""Both readers of notes, C (probekit-scan notes) and Python (probelib),
run on one file."""

import os
import subprocess
import sys

import pytest

import probekit

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import argspec, notes  # noqa: E402


SCAN = os.path.join(probekit.BUILD, "libexec", "probekit", "probekit-scan")


def scan(*args, check=True, stdin=None):
    r = subprocess.run([SCAN, *map(str, args)], capture_output=True,
                       input=stdin, timeout=probekit.TIMEOUT)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def c_notes(path):
    out = []
    for ln in scan("notes", path).stdout.decode().splitlines():
        prov, name, pc, pc_off, sem, sem_off, spec = ln.split("\t")
        out.append((prov, name, int(pc, 16), int(pc_off, 16), int(sem, 16),
                    int(sem_off, 16), spec))
    return out


def py_notes(path):
    # The C reader says 0 where an address has no file offset.
    return [(p.provider, p.name, p.pc, p.offset or 0, p.semaphore,
             p.semaphore_offset, p.spec) for p in notes.read_probes(path)]


def c_args(spec, arch="x86_64"):
    """probekit-scan's operands of spec: [kind, size, signed, value,
    register, bpftrace reads, libbpf reads, index, scale]."""
    return [ln.split("\t") for ln in scan("args", "--machine", arch, spec)
            .stdout.decode().splitlines()]


def both_readers(n, arch):
    """Note n's operands as probekit-scan (C) and probelib read them for
    arch, held to each other: the same sizes and signedness, and the same
    kind, one each takes.  [(C's fields, probelib's arg, parsed operand)]."""
    ca = c_args(n.spec, arch)
    assert [(int(a[1]), a[2] == "1") for a in ca] == \
        [(a.size, a.signed) for a in n.args], n.spec
    out = []
    for a, py in zip(ca, n.args):
        o = argspec.parse_operand(py.operand, arch)
        assert a[0] == o.kind != "unknown", (n.spec, py.operand)
        out.append((a, py, o))
    return out


# Two files of USDT sites, with semaphores and without
# (tests/fixtures/probelib/).
SITES_SRC = [os.path.join(probekit.ROOT, "tests", "fixtures", "probelib", f)
             for f in ("sites.c", "sites_nosem.c")]


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """SITES_SRC built into one program (gcc -O2 -g)."""
    out = str(tmp_path_factory.mktemp("sites") / "sites")
    subprocess.run(["cc", "-O2", "-g", "-Wall", "-Werror", "-o", out,
                    *SITES_SRC], check=True)
    return out
