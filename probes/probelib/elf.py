# SPDX-License-Identifier: BSD-2-Clause
"""ELF files through pyelftools: symbols, and where a virtual address
lies in the file.

Before pyelftools reads a file, check() walks its headers and section
headers in their raw bytes, the checks and words of usdt_notes.c's
usdt_elf_check, in the same order: a truncated or corrupt file is one line
(BadELF), the C reader's, and no size the file claims is read or
allocated before it is known to lie inside the file."""

import os
import struct
from contextlib import contextmanager

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from .inputs import open_regular

__all__ = ["BadELF", "ELFError", "ELFFile", "check", "file_offset",
           "function_offset", "open_elf", "read_symbols"]


class BadELF(Exception):
    """An ELF file that is truncated or corrupt: str() is the cause, word
    for word what the C reader (usdt_notes.c) says after the path."""


SHT_NOBITS = 8
SHT_STRTAB = 3
SHN_XINDEX = 0xffff
# (ELF header, program header, section header) sizes per class.
_SIZES = {1: (52, 32, 40), 2: (64, 56, 64)}


def check(f):
    """Raise ELFError for a file that is not ELF, BadELF for one whose
    headers or sections do not lie inside it; f is open for reading."""
    size = os.fstat(f.fileno()).st_size

    def read(off, n):
        f.seek(off)
        return f.read(n)
    ident = read(0, 16)
    if len(ident) < 16 or ident[:4] != b"\x7fELF":
        raise ELFError("not an ELF file")
    cls, order = ident[4], ident[5]
    if cls not in _SIZES:
        raise BadELF(f"corrupt: its ELF class is {cls}, neither 1 (32-bit) "
                     "nor 2 (64-bit)")
    if order not in (1, 2):
        raise BadELF(f"corrupt: its byte order is {order}, neither 1 "
                     "(little-endian) nor 2 (big-endian)")
    ehsize, phsize, shsize = _SIZES[cls]
    if size < ehsize:
        raise BadELF(f"truncated: its ELF header runs past the end of the "
                     f"file ({size} bytes)")
    e = "<" if order == 1 else ">"
    word = "I" if cls == 1 else "Q"
    hdr = read(16, ehsize - 16)
    phoff, shoff = struct.unpack_from(e + 2 * word, hdr, 8 + (4 if cls == 1
                                                               else 8))
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(
        e + "5H", hdr, ehsize - 16 - 10)

    def shdr(i):
        """(name, type, offset, size, link) of section header i."""
        raw = read(shoff + i * shsize, shsize)
        if cls == 1:
            name, typ, _, _, off, sz, link = struct.unpack_from(e + "7I", raw)
        else:
            name, typ, _, _, off, sz, link = struct.unpack_from(
                e + "2I4QI", raw)
        return name, typ, off, sz, link
    if shoff:
        if shentsize != shsize:
            raise BadELF(f"corrupt: its section headers are {shentsize} "
                         f"bytes each, not {shsize}")
        if shoff > size or (shnum or 1) * shsize > size - shoff:
            raise BadELF("truncated: its section headers run past the end "
                         f"of the file ({size} bytes)")
        if shnum == 0:              # more than 0xff00: in section 0
            shnum = shdr(0)[3]
            if shnum * shsize > size - shoff:
                raise BadELF("truncated: its section headers run past the "
                             f"end of the file ({size} bytes)")
    else:
        shnum = 0
    if phoff and phnum:
        if phentsize != phsize:
            raise BadELF(f"corrupt: its program headers are {phentsize} "
                         f"bytes each, not {phsize}")
        if phoff > size or phnum * phsize > size - phoff:
            raise BadELF("truncated: its program headers run past the end "
                         f"of the file ({size} bytes)")
    if not shnum:
        return
    if shstrndx == SHN_XINDEX:
        shstrndx = shdr(0)[4]
    if shstrndx == 0 or shstrndx >= shnum:
        raise BadELF(f"corrupt: its section name table is section "
                     f"{shstrndx}, not one of its {shnum} sections")
    heads = [shdr(i) for i in range(shnum)]
    for i, (_, typ, off, sz, _) in enumerate(heads):
        if i and typ != SHT_NOBITS and (off > size or sz > size - off):
            raise BadELF(f"truncated: section {i} runs past the end of the "
                         f"file ({size} bytes)")
    names = heads[shstrndx]
    if names[1] != SHT_STRTAB:
        raise BadELF(f"corrupt: its section name table (section "
                     f"{shstrndx}) is not a string table")
    for i, h in enumerate(heads):
        if i and h[0] >= names[3]:
            raise BadELF(f"corrupt: the name of section {i} lies outside "
                         "its section name table")


@contextmanager
def open_elf(path):
    """The ELF file at path, checked (check()), as an ELFFile.  Raises
    OSError (inputs.NotRegularFile for a FIFO, a device, a directory),
    ELFError for a file that is not ELF, BadELF for a corrupt one."""
    with open_regular(path) as f:
        check(f)
        f.seek(0)
        yield ELFFile(f)


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
    with open_elf(path) as elf:
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
    with open_elf(path) as elf:
        return file_offset(elf, sym[0])
