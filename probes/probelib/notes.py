# SPDX-License-Identifier: BSD-2-Clause
"""The USDT probes of an ELF file: systemtap's .note.stapsdt notes.

Each note says: provider, probe name, the probe site's address, the
address of .stapsdt.base at link time, the semaphore's address (0 when
there is none) and the argument spec, a list of "SIZE@OPERAND" items where
a negative size means a signed argument, e.g. "-4@%eax 8@-16(%rbp)".  A
probe may have several sites (one per inlined or repeated call); they share
the name and should share the spec's sizes.

This is probekit's one Python reader of these notes: probekit-check, the
bcc/ tools and the tests all read them here.
"""

import re
from dataclasses import dataclass, field

from .elf import ELFFile, file_offset

MAX_ARGS = 12           # sys/sdt.h's limit; bpftrace, BCC and libbpf agree


@dataclass
class SdtArg:
    size: int          # bytes (1, 2, 4, 8)
    signed: bool
    operand: str       # %reg, $imm, disp(%reg), ...


@dataclass
class SdtProbe:
    provider: str
    name: str
    pc: int             # the site's virtual address
    semaphore: int      # the semaphore's virtual address, 0: none
    args: list = field(default_factory=list)
    spec: str = ""
    semaphore_offset: int = 0   # its file offset (ref_ctr_offset), 0: none
    offset: int = None          # the site's file offset (a uprobe's), if any

    @property
    def full(self):
        return f"{self.provider}:{self.name}"


_ARG = re.compile(r"(-?\d+)@(\S+)")


def parse_argspec(spec):
    """Split an argument spec into SdtArg items."""
    out = []
    for m in _ARG.finditer(spec):
        n = int(m.group(1))
        out.append(SdtArg(abs(n), n < 0, m.group(2)))
    return out


def _note_desc(note):
    # pyelftools names type 3 NT_GNU_BUILD_ID and hex-decodes n_desc; the
    # raw bytes are in n_descdata.
    desc = note.get("n_descdata")
    return desc if desc is not None else bytes.fromhex(note["n_desc"])


def _probe(elf, desc, base_addr):
    """An SdtProbe from one note's description.  Where the file was
    prelinked, .stapsdt.base moved from the address the note recorded, and
    the site and semaphore moved with it."""
    ptr = 8 if elf.elfclass == 64 else 4
    endian = "little" if elf.little_endian else "big"
    pc, base, sem = (int.from_bytes(desc[i * ptr:(i + 1) * ptr], endian)
                     for i in range(3))
    if base_addr is not None and base:
        pc += base_addr - base
        if sem:
            sem += base_addr - base
    strings = desc[3 * ptr:].split(b"\0")
    provider, name, spec = (s.decode(errors="replace")
                            for s in (strings + [b"", b"", b""])[:3])
    sem_off = (file_offset(elf, sem) or 0) if sem else 0
    return SdtProbe(provider, name, pc, sem, parse_argspec(spec), spec,
                    sem_off, file_offset(elf, pc))


def read_probes(path):
    """All stapsdt notes of the ELF file at path, in file order."""
    probes = []
    with open(path, "rb") as f:
        elf = ELFFile(f)
        sec = elf.get_section_by_name(".note.stapsdt")
        if sec is None:
            return probes
        base_sec = elf.get_section_by_name(".stapsdt.base")
        base_addr = base_sec["sh_addr"] if base_sec is not None else None
        for note in sec.iter_notes():
            if note["n_name"] != "stapsdt" or note["n_type"] not in (
                    3, "NT_GNU_BUILD_ID", "NT_STAPSDT"):
                continue
            probes.append(_probe(elf, _note_desc(note), base_addr))
    return probes


def by_name(probes):
    """{"provider:name": [SdtProbe, one per site]}, in file order."""
    out = {}
    for p in probes:
        out.setdefault(p.full, []).append(p)
    return out
