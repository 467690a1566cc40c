# SPDX-License-Identifier: BSD-2-Clause
"""probelib, probekit's one Python reader of ELF files, stapsdt notes,
argument specs and symbols, against binutils' readelf and nm, which read
the same files independently.

The fixture (tests/fixtures/probelib/) is built here: two probes with semaphores
in a .probes section whose file offset differs from its address, one of
them with two sites (an inlined helper called twice), and a probe without
a semaphore whose argument is a constant.  The same fixture is meant for
the C reader too.  blktgt itself is read as well."""

import os
import subprocess
import sys

import pytest

import probekit

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import argspec, elf, notes  # noqa: E402
from notes_readelf import (check_against_readelf, prelinked_copy, readelf_notes,
                           readelf_offset)
from readers import sites  # noqa: F401 (a fixture)


@pytest.mark.needs("readelf")
def test_fixture_notes(sites):
    got = check_against_readelf(sites)
    assert [p.full for p in got] == ["fix:hit", "fix:twice", "fix:twice",
                                     "fix:konst"]
    by = notes.by_name(got)
    assert [len(by[k]) for k in ("fix:hit", "fix:twice", "fix:konst")] \
        == [1, 2, 1]
    hit, konst = by["fix:hit"][0], by["fix:konst"][0]
    # The semaphore's file offset is not its address: .probes is placed
    # in a segment whose offset and address differ.
    assert hit.semaphore_offset not in (0, hit.semaphore)
    assert [(a.size, a.signed) for a in hit.args] == [(4, True), (8, True)]
    assert konst.semaphore == konst.semaphore_offset == 0
    assert [(a.size, a.signed, a.operand) for a in konst.args] \
        == [(4, True, "$42")]
    assert [(a.size, a.signed) for a in by["fix:twice"][1].args] \
        == [(8, True), (8, False)]


@pytest.mark.needs("readelf")
def test_blktgt_notes(blktgt_bin):
    got = check_against_readelf(blktgt_bin)
    assert len(got) == len(readelf_notes(blktgt_bin)) > 0
    assert all(p.semaphore_offset for p in got)


@pytest.mark.needs("readelf")
def test_prelinked_base(sites, tmp_path):
    """A note whose recorded .stapsdt.base differs from the section's
    address (a prelinked file) moves its site and semaphore by the
    difference, as systemtap's reader and BCC's do."""
    moved = str(tmp_path / "moved")
    pc, sem = prelinked_copy(sites, moved, 0x1000)
    p = notes.read_probes(moved)[0]
    assert (p.pc, p.semaphore) == (pc + 0x1000, sem + 0x1000)
    assert notes.read_probes(moved)[1:] == notes.read_probes(sites)[1:]


@pytest.mark.needs("nm")
def test_symbols(sites):
    """Functions and data objects, as nm sees them (T/t/i, D/d/B/b)."""
    syms = elf.read_symbols(sites)
    out = subprocess.run(["nm", "--defined-only", sites], check=True,
                         stdout=subprocess.PIPE).stdout.decode()
    nm = {}
    for ln in out.splitlines():
        addr, kind, name = ln.split()
        nm.setdefault(name, (int(addr, 16), kind))
    for name in ("main", "site", "nosem", "fix_data_object",
                 "fix_hit_semaphore"):
        assert syms[name][0] == nm[name][0], name
    assert syms["site"][2] == syms["nosem"][2] == "STT_FUNC"
    assert syms["fix_data_object"][2] == "STT_OBJECT"
    assert "twice" not in syms      # inlined away
    assert elf.function_offset(sites, "site") == readelf_offset(
        sites, nm["site"][0])
    assert elf.function_offset(sites, "fix_data_object") is None
    assert elf.function_offset(sites, "twice") is None


@pytest.mark.parametrize("op,want", [
    ("$42", argspec.Operand("const", "$42", value=42)),
    ("$-1", argspec.Operand("const", "$-1", value=-1)),
    ("%edi", argspec.Operand("reg", "%edi", base="edi")),
    ("(%rdx)", argspec.Operand("mem", "(%rdx)", base="rdx")),
    ("-16(%rbp)", argspec.Operand("mem", "-16(%rbp)", base="rbp", disp=-16)),
    ("8(%rax,%rbx,4)", argspec.Operand("index", "8(%rax,%rbx,4)", base="rax",
                                       disp=8, index="rbx", scale=4)),
    ("NBuffers(%rip)", argspec.Operand("sym", "NBuffers(%rip)", base="rip")),
    ("%xmm0", argspec.Operand("reg", "%xmm0", base="xmm0")),
    ("foo", argspec.Operand("unknown", "foo")),
])
def test_parse_operand(op, want):
    assert argspec.parse_operand(op) == want


@pytest.mark.needs("readelf")
def test_every_blktgt_operand_maps_to_pt_regs(blktgt_bin, sites):
    """Every operand in blktgt and the fixture is one the bcc/ tools can
    read: a constant, or a general register pt_regs holds (a base, for
    memory)."""
    seen = 0
    for path in (blktgt_bin, sites):
        for p in notes.read_probes(path):
            for a in p.args:
                op = argspec.parse_operand(a.operand)
                assert op.kind in ("const", "reg", "mem"), (p.full, a)
                if op.kind != "const":
                    assert argspec.PT_REGS[op.base] != "ip", (p.full, a)
                seen += 1
    assert seen > 0
