# SPDX-License-Identifier: BSD-2-Clause
"""ELF files through pyelftools: symbols, and where a virtual address
lies in the file."""

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from .inputs import open_regular

__all__ = ["ELFError", "ELFFile", "file_offset", "function_offset",
           "read_symbols"]


def file_offset(elf, vaddr):
    """The file offset of virtual address vaddr, from the PT_LOAD segment
    that maps it from the file, or None when no segment does (an address
    in .bss has no file offset)."""
    for seg in elf.iter_segments():
        if seg["p_type"] != "PT_LOAD":
            continue
        start = seg["p_vaddr"]
        if start <= vaddr < start + seg["p_filesz"]:
            return vaddr - start + seg["p_offset"]
    return None


def read_symbols(path):
    """{name: (value, size, type)} of the ELF file's function and object
    symbols, from .symtab (or .dynsym when stripped)."""
    syms = {}
    with open_regular(path) as f:
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


FUNC_TYPES = ("STT_FUNC", "STT_GNU_IFUNC")


def function_offset(path, name):
    """The file offset of function name in the ELF file at path (where a
    uprobe on it goes), or None when it has no such function."""
    sym = read_symbols(path).get(name)
    if sym is None or sym[2] not in FUNC_TYPES:
        return None
    with open_regular(path) as f:
        return file_offset(ELFFile(f), sym[0])
