# SPDX-License-Identifier: BSD-2-Clause
"""sdtnotes: read the USDT probes (systemtap .note.stapsdt notes) of an ELF
file, and its symbol table, with pyelftools.

Each note says: provider, probe name, the probe site's address, the
semaphore's address (0 when there is none) and the argument spec, a list of
"SIZE@OPERAND" items where a negative size means a signed argument, e.g.
"-4@%eax 8@-16(%rbp)".  A probe may have several sites (one per inlined
or repeated call); they share the name and should share the spec's sizes.
"""

import re
from dataclasses import dataclass, field

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection


@dataclass
class SdtArg:
    size: int          # bytes (1, 2, 4, 8)
    signed: bool
    operand: str       # %reg, $imm, disp(%reg), ...


@dataclass
class SdtProbe:
    provider: str
    name: str
    pc: int
    semaphore: int
    args: list = field(default_factory=list)
    spec: str = ""


_ARG = re.compile(r"(-?\d+)@(\S+)")


def parse_argspec(spec):
    """Split an argument spec into SdtArg items."""
    out = []
    for m in _ARG.finditer(spec):
        n = int(m.group(1))
        out.append(SdtArg(abs(n), n < 0, m.group(2)))
    return out


def read_probes(path):
    """All stapsdt notes of the ELF file at path, in file order."""
    probes = []
    with open(path, "rb") as f:
        elf = ELFFile(f)
        sec = elf.get_section_by_name(".note.stapsdt")
        if sec is None:
            return probes
        ptr = 8 if elf.elfclass == 64 else 4
        for note in sec.iter_notes():
            # pyelftools names type 3 NT_GNU_BUILD_ID and hex-decodes
            # n_desc; the raw bytes are in n_descdata.
            if note["n_name"] != "stapsdt" or note["n_type"] not in (
                    3, "NT_GNU_BUILD_ID", "NT_STAPSDT"):
                continue
            desc = note.get("n_descdata")
            if desc is None:
                desc = bytes.fromhex(note["n_desc"])
            endian = "little" if elf.little_endian else "big"
            pc = int.from_bytes(desc[0:ptr], endian)
            sem = int.from_bytes(desc[2 * ptr:3 * ptr], endian)
            strings = desc[3 * ptr:].split(b"\0")
            provider, name, spec = (s.decode(errors="replace")
                                    for s in (strings + [b"", b"", b""])[:3])
            probes.append(SdtProbe(provider, name, pc, sem,
                                   parse_argspec(spec), spec))
    return probes


def read_symbols(path):
    """{name: (value, size, type)} of the ELF file's function and object
    symbols, from .symtab (or .dynsym when stripped)."""
    syms = {}
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for secname in (".symtab", ".dynsym"):
            sec = elf.get_section_by_name(secname)
            if not isinstance(sec, SymbolTableSection):
                continue
            for s in sec.iter_symbols():
                t = s["st_info"]["type"]
                if s.name and t in ("STT_FUNC", "STT_OBJECT", "STT_GNU_IFUNC") \
                        and s["st_shndx"] != "SHN_UNDEF":
                    syms.setdefault(s.name, (s["st_value"], s["st_size"], t))
            if syms:
                break
    return syms
