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
import struct
from dataclasses import dataclass, field

from .argspec import X86_64, split_spec
from .elf import BadELF, file_offset, open_elf
from .registers import arch_of

MAX_ARGS = 12           # sys/sdt.h's limit; bpftrace, BCC and libbpf agree


@dataclass
class SdtArg:
    size: int          # bytes (1, 2, 4, 8)
    signed: bool
    operand: str       # %reg, $imm, disp(%reg), ...; aarch64 x0, [sp, 8]
    arch: str = X86_64  # the file's architecture: how to read operand


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
    arch: str = X86_64          # the file's (registers.arch_of)

    @property
    def full(self):
        return f"{self.provider}:{self.name}"


_ARG = re.compile(r"(-?\d+)@(.+)")


def parse_argspec(spec, arch=X86_64):
    """Split an argument spec of a file of arch into SdtArg items (items
    that are not SIZE@OPERAND are left out; argspec.spec_problems names
    them)."""
    out = []
    for item in split_spec(spec):
        m = _ARG.fullmatch(item)
        if m:
            n = int(m.group(1))
            out.append(SdtArg(abs(n), n < 0, m.group(2), arch))
    return out


class NoteError(BadELF):
    """A .note.stapsdt section that cannot be read as notes; the message
    is one line that names the note's file offset and the cause, and is
    word for word what the C reader (usdt_notes.c) says."""


# The bounds usdt_notes.h puts on a note's strings (USDT_NAME_MAX and
# USDT_SPEC_MAX less the NUL) and on their number (USDT_NOTES_MAX);
# tests/probes/test_readers.py holds the two files to the same values.
NAME_MAX = 127
SPEC_MAX = 511
NOTES_MAX = 65536
NT_STAPSDT = 3
_OWNER = b"stapsdt\0"

# probekit's own note: each probe's argument names and C types, which a
# stapsdt note does not carry (doc/probes-in-your-code.md, "Names and
# types in the binary").  Section .note.probekit (allocated, so strip
# keeps it), owner "probekit", type PK_NOTE_TYPE; its description, in the
# file's byte order: a 4-byte version (PK_NOTE_VERSION), a 4-byte argument
# count, then NUL-terminated strings: provider, probe name, and each
# argument's C type and name.  One note per probe, tied to its stapsdt
# notes by provider and name.  usdt_notes.h declares the same values;
# tests/probes/test_readers.py holds the two to them.
PK_NOTE_SECTION = ".note.probekit"
PK_NOTE_OWNER = "probekit"
PK_NOTE_TYPE = 1
PK_NOTE_VERSION = 1


def _bad_byte(s, spec):
    """The first byte of s that no provider or probe name has (a control
    or non-ASCII byte, a space, a colon), or for spec no argument spec
    (a control or non-ASCII byte); None when there is none."""
    for b in s:
        if b < 0x20 or b >= 0x7f or (not spec and b in b" :"):
            return b
    return None


def _string(desc, at, what, limit, spec=False):
    """The string of desc at at and the offset past its NUL, or NoteError's
    cause: the same checks, in the same order, as usdt_notes.c's
    take_field."""
    nul = desc.find(b"\0", at)
    if nul < 0:
        return None, f"its {what} is not NUL-terminated inside the note"
    s = desc[at:nul]
    if len(s) > limit:
        return None, f"its {what} is longer than {limit} bytes"
    if not s and not spec:
        return None, f"its {what} is empty"
    b = _bad_byte(s, spec)
    if b is not None:
        kind = "a control or non-ASCII byte" if spec else \
            "a control, non-ASCII, space or colon byte"
        return None, f"its {what} has {kind} (0x{b:02x})"
    return s.decode("ascii"), nul + 1


def _probe(elf, desc, base_addr):
    """An SdtProbe from one note's description, or NoteError's cause.
    Where the file was prelinked, .stapsdt.base moved from the address
    the note recorded, and the site and semaphore moved with it."""
    ptr = 8 if elf.elfclass == 64 else 4
    endian = "little" if elf.little_endian else "big"
    if len(desc) < 3 * ptr:
        return f"its description of {len(desc)} bytes is shorter than " \
               f"its three {ptr}-byte addresses"
    pc, base, sem = (int.from_bytes(desc[i * ptr:(i + 1) * ptr], endian)
                     for i in range(3))
    if base_addr is not None and base:
        pc += base_addr - base
        if sem:
            sem += base_addr - base
    at = 3 * ptr
    provider, at = _string(desc, at, "provider", NAME_MAX)
    if provider is None:
        return at
    name, at = _string(desc, at, "probe name", NAME_MAX)
    if name is None:
        return at
    spec, at = _string(desc, at, "argument spec", SPEC_MAX, spec=True)
    if spec is None:
        return at
    sem_off = (file_offset(elf, sem) or 0) if sem else 0
    arch = arch_of(elf)
    return SdtProbe(provider, name, pc, sem, parse_argspec(spec, arch), spec,
                    sem_off, file_offset(elf, pc), arch)


def _walk(elf, sec, what, owner, ntype_want, limit, parse):
    """parse(desc) of each note of owner and type ntype_want in one
    SHT_NOTE section, walked as usdt_notes.c's walk_section walks it: each
    note's header, name and description must lie inside the section, and
    a note of ours must read whole (parse returns a cause, a str, when it
    does not); at most limit of them."""
    data = sec.data()
    sec_off = sec["sh_offset"]
    secname = sec.name
    align = 8 if sec["sh_addralign"] == 8 else 4
    endian = "<" if elf.little_endian else ">"
    owner = owner.encode() + b"\0"
    out, off = [], 0
    while off < len(data):
        def bad(cause):
            return NoteError(f"the {what} note at file offset "
                             f"0x{sec_off + off:x} is corrupt: {cause}")
        if len(data) - off < 12:
            raise bad(f"its 12-byte header runs past the end of {secname}")
        namesz, descsz, ntype = struct.unpack_from(endian + "3I", data, off)
        name_at = off + 12
        desc_at = name_at + -(-namesz // align) * align
        if desc_at > len(data) or descsz > len(data) - desc_at:
            raise bad(f"its name ({namesz} bytes) and description "
                      f"({descsz} bytes) run past the end of {secname}")
        if namesz == len(owner) and ntype == ntype_want and \
                data[name_at:name_at + namesz] == owner:
            if len(out) == limit:
                raise NoteError(f"more than {limit} {what} notes")
            p = parse(data[desc_at:desc_at + descsz])
            if isinstance(p, str):
                raise bad(p)
            out.append(p)
        off = desc_at + -(-descsz // align) * align
    return out


def _notes(elf, sec, base_addr):
    """The SdtProbes of one .note.stapsdt section."""
    return _walk(elf, sec, "stapsdt", "stapsdt", NT_STAPSDT, NOTES_MAX,
                 lambda desc: _probe(elf, desc, base_addr))


@dataclass
class ArgNames:
    """One probe's argument types and names, from its probekit note."""
    provider: str
    name: str
    args: list          # [(C type, name)], arg0 first

    @property
    def full(self):
        return f"{self.provider}:{self.name}"


def type_is_string(ctype):
    """Whether an argument of C type ctype (as a probekit note gives it)
    is a string a reader may read with str(): a char pointer
    (usdt_notes.c's usdt_type_is_string())."""
    return "char" in ctype and "*" in ctype


# A bound on probekit notes (one per probe, not per site), and on an
# argument type's length (USDT_PK_NOTES_MAX, USDT_TYPE_MAX in C).
PK_NOTES_MAX = 4096
TYPE_MAX = 63


def _arg_names(elf, desc):
    """An ArgNames from one probekit note's description, or the cause:
    the same checks, in the same order, as usdt_notes.c's parse_pk_note."""
    if len(desc) < 8:
        return f"its description of {len(desc)} bytes is shorter than its " \
               "version and argument count"
    endian = "little" if elf.little_endian else "big"
    version = int.from_bytes(desc[0:4], endian)
    argc = int.from_bytes(desc[4:8], endian)
    if version != PK_NOTE_VERSION:
        return f"its version is {version}, not {PK_NOTE_VERSION} (the " \
               "one this probekit reads)"
    if argc > MAX_ARGS:
        return f"its argument count {argc} is more than {MAX_ARGS}"
    provider, at = _string(desc, 8, "provider", NAME_MAX)
    if provider is None:
        return at
    name, at = _string(desc, at, "probe name", NAME_MAX)
    if name is None:
        return at
    args = []
    for i in range(argc):
        t, at = _string(desc, at, f"argument {i}'s type", TYPE_MAX,
                        spec=True)
        if t is None:
            return at
        n, at = _string(desc, at, f"argument {i}'s name", NAME_MAX)
        if n is None:
            return at
        args.append((t, n))
    if at != len(desc):
        return f"its description has {len(desc) - at} bytes past its " \
               "last string"
    return ArgNames(provider, name, args)


def read_arg_names(path):
    """{"provider:name": ArgNames} from the probekit notes of the ELF file
    at path ({} when it has none: a binary built without probekit's
    header, or with USDT=0).  Raises as read_probes does; NoteError for a
    corrupt note, or two that disagree about one probe."""
    with open_elf(path) as elf:
        sec = elf.get_section_by_name(PK_NOTE_SECTION)
        if sec is None or sec["sh_type"] != "SHT_NOTE":
            return {}
        out = {}
        for a in _walk(elf, sec, "probekit", PK_NOTE_OWNER, PK_NOTE_TYPE,
                       PK_NOTES_MAX, lambda desc: _arg_names(elf, desc)):
            if out.setdefault(a.full, a) != a:
                raise NoteError(f"two probekit notes of {a.full} disagree "
                                "about its arguments")
        return out


def read_probes(path):
    """All stapsdt notes of the ELF file at path, in file order.  Raises
    OSError (inputs.NotRegularFile for a FIFO, a device, a directory),
    ELFError for a file that is not ELF, BadELF for a corrupt one
    (NoteError for corrupt notes)."""
    with open_elf(path) as elf:
        sec = elf.get_section_by_name(".note.stapsdt")
        if sec is None or sec["sh_type"] != "SHT_NOTE":
            return []
        base_sec = elf.get_section_by_name(".stapsdt.base")
        base_addr = base_sec["sh_addr"] if base_sec is not None else None
        return _notes(elf, sec, base_addr)


def by_name(probes):
    """{"provider:name": [SdtProbe, one per site]}, in file order."""
    out = {}
    for p in probes:
        out.setdefault(p.full, []).append(p)
    return out
