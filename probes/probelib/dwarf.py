# SPDX-License-Identifier: BSD-2-Clause
"""What DWARF says about a file's functions: their parameters, and how many
copies of each the compiler inlined (a uprobe on the function never sees
those)."""

import os

from .elf import ELFFile
from .inputs import open_regular


def _die_type(die, depth=0):
    """(size, is_pointer) of a DIE's DW_AT_type, through typedefs and
    qualifiers; (None, False) when unknown."""
    if depth > 8 or "DW_AT_type" not in die.attributes:
        return None, False
    t = die.get_DIE_from_attribute("DW_AT_type")
    if t.tag == "DW_TAG_pointer_type":
        return 8, True
    if t.tag in ("DW_TAG_typedef", "DW_TAG_const_type",
                 "DW_TAG_volatile_type", "DW_TAG_restrict_type"):
        return _die_type(t, depth + 1)
    size = t.attributes.get("DW_AT_byte_size")
    return (size.value if size else None), False


def read_dwarf(path):
    """({function: inlined copies}, {function: [(param, size, pointer)]})
    from DWARF; both empty when the file has no debug information."""

    inlined, params = {}, {}
    with open_regular(path) as f:
        elf = ELFFile(f)
        if not elf.has_dwarf_info():
            return inlined, params
        dwarf = elf.get_dwarf_info()
        for cu in dwarf.iter_CUs():
            for die in cu.iter_DIEs():
                if die.tag == "DW_TAG_subprogram" and \
                        "DW_AT_name" in die.attributes and \
                        "DW_AT_declaration" not in die.attributes:
                    name = die.attributes["DW_AT_name"].value.decode(
                        errors="replace")
                    ps = []
                    for c in die.iter_children():
                        if c.tag == "DW_TAG_formal_parameter":
                            pn = c.attributes.get("DW_AT_name")
                            ps.append((pn.value.decode(errors="replace")
                                       if pn else "?", *_die_type(c)))
                    params.setdefault(name, ps)
                if die.tag != "DW_TAG_inlined_subroutine":
                    continue
                origin = die
                seen = 0
                # abstract_origin may chain through a declaration.
                while seen < 4 and "DW_AT_name" not in origin.attributes:
                    ref = None
                    for k in ("DW_AT_abstract_origin", "DW_AT_specification"):
                        if k in origin.attributes:
                            ref = origin.get_DIE_from_attribute(k)
                            break
                    if ref is None:
                        break
                    origin = ref
                    seen += 1
                name = origin.attributes.get("DW_AT_name")
                if name:
                    n = name.value.decode(errors="replace")
                    inlined[n] = inlined.get(n, 0) + 1
    return inlined, params



# --- types: structs, unions and enums, for probekit-structs and the checker --

class NoDebugInfo(Exception):
    """The file has no DWARF (nor a separate debug file for its build-id)."""


class CType:
    """One DWARF type, resolved through typedefs and qualifiers.

    kind: "base" (name, size, signed), "pointer" (target: CType or None
    for void), "struct"/"union" (name or None, size, members), "enum"
    (name, size, signed, values), "array" (elem, dims), "func".
    members: [Member]; values: [(enumerator, value)]."""

    def __init__(self, kind, name=None, size=None, signed=False):
        self.kind = kind
        self.name = name
        self.size = size
        self.signed = signed
        self.members = []
        self.values = []
        self.target = None
        self.elem = None
        self.dims = []
        self.typedef = None          # the typedef name it was reached by

    def spelled(self):
        if self.kind in ("struct", "union", "enum"):
            return f"{self.kind} {self.name or '(anonymous)'}"
        if self.kind == "pointer":
            return (self.target.spelled() if self.target else "void") + " *"
        if self.kind == "array":
            return self.elem.spelled() + "".join(f"[{d}]" for d in self.dims)
        return self.name or self.kind


class Member:
    """A struct or union member: offset in bytes; bits is None, or
    (bit size, bit offset from the start of the member's storage unit at
    offset, counted from its least significant bit) for a bitfield."""

    def __init__(self, name, offset, ctype, bits=None):
        self.name = name
        self.offset = offset
        self.type = ctype
        self.bits = bits


_QUALIFIERS = ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type",
               "DW_TAG_restrict_type", "DW_TAG_atomic_type")
_MAX_DEPTH = 32         # nesting of types; DWARF from outside is bounded


def _name(die):
    a = die.attributes.get("DW_AT_name")
    return a.value.decode(errors="replace") if a else None


def _int(die, attr):
    a = die.attributes.get(attr)
    return a.value if a is not None and isinstance(a.value, int) else None


class Types:
    """The named structs, unions, enums and typedefs of a file's DWARF:
    the first complete definition of each name, read lazily."""

    def __init__(self, path):
        self.path = path
        self.structs, self.unions, self.enums, self.typedefs = {}, {}, {}, {}
        self._cache = {}
        self._file = open_regular(_debug_file(path))
        try:
            elf = ELFFile(self._file)
            if not elf.has_dwarf_info() or \
                    elf.get_section_by_name(".debug_info") is None:
                raise NoDebugInfo(path)
            dwarf = elf.get_dwarf_info()
            tables = {"DW_TAG_structure_type": self.structs,
                      "DW_TAG_union_type": self.unions,
                      "DW_TAG_enumeration_type": self.enums,
                      "DW_TAG_typedef": self.typedefs}
            for cu in dwarf.iter_CUs():
                for die in cu.get_top_DIE().iter_children():
                    table = tables.get(die.tag)
                    name = _name(die)
                    if table is None or name is None or name in table or \
                            "DW_AT_declaration" in die.attributes:
                        continue
                    table[name] = die
        except BaseException:
            self._file.close()
            raise

    def close(self):
        self._file.close()

    def lookup(self, kind, name):
        """The CType of struct, union or enum name, or of typedef name
        when kind is "typedef"; None when the DWARF has no such type."""
        table = {"struct": self.structs, "union": self.unions,
                 "enum": self.enums, "typedef": self.typedefs}[kind]
        die = table.get(name)
        return self.resolve(die) if die is not None else None

    def resolve(self, die, depth=0):
        """The CType of a type DIE (None: void)."""
        if die is None:
            return None
        if depth > _MAX_DEPTH:
            raise ValueError(f"types nest deeper than {_MAX_DEPTH} levels")
        key = die.offset
        if key in self._cache:
            return self._cache[key]
        tag = die.tag
        if tag in _QUALIFIERS:
            t = self.resolve(_type_of(die), depth + 1)
            if tag == "DW_TAG_typedef" and t is not None and \
                    t.kind in ("struct", "union", "enum") and t.typedef is None:
                t.typedef = _name(die)
            return t
        if tag == "DW_TAG_base_type":
            enc = _int(die, "DW_AT_encoding")
            # DW_ATE_signed 0x5, DW_ATE_signed_char 0x6
            t = CType("base", _name(die), _int(die, "DW_AT_byte_size"),
                      enc in (0x5, 0x6))
        elif tag in ("DW_TAG_pointer_type", "DW_TAG_reference_type"):
            t = CType("pointer", size=_int(die, "DW_AT_byte_size") or 8)
            self._cache[key] = t        # before the target: lists point back
            t.target = self.resolve(_type_of(die), depth + 1)
            return t
        elif tag == "DW_TAG_subroutine_type":
            t = CType("func")
        elif tag in ("DW_TAG_structure_type", "DW_TAG_union_type"):
            kind = "struct" if tag == "DW_TAG_structure_type" else "union"
            name = _name(die)
            if "DW_AT_declaration" in die.attributes and name:
                full = (self.structs if kind == "struct" else
                        self.unions).get(name)
                if full is not None:
                    return self.resolve(full, depth)
            t = CType(kind, name, _int(die, "DW_AT_byte_size"))
            self._cache[key] = t
            for c in die.iter_children():
                if c.tag == "DW_TAG_member":
                    t.members.append(self._member(c, depth))
            return t
        elif tag == "DW_TAG_enumeration_type":
            t = CType("enum", _name(die), _int(die, "DW_AT_byte_size"))
            base = self.resolve(_type_of(die), depth + 1)
            for c in die.iter_children():
                if c.tag == "DW_TAG_enumerator":
                    t.values.append((_name(c), c.attributes["DW_AT_const_value"].value))
            t.signed = base.signed if base is not None and base.kind == "base" \
                else any(v < 0 for _, v in t.values)
            if t.signed:    # pyelftools reads DW_FORM_data* unsigned
                bits = 8 * (t.size or 4)
                t.values = [(n, v - (1 << bits) if v >= 1 << (bits - 1) else v)
                            for n, v in t.values]
        elif tag == "DW_TAG_array_type":
            t = CType("array")
            t.elem = self.resolve(_type_of(die), depth + 1)
            for c in die.iter_children():
                if c.tag != "DW_TAG_subrange_type":
                    continue
                n = _int(c, "DW_AT_count")
                if n is None:
                    ub = _int(c, "DW_AT_upper_bound")
                    n = ub + 1 if ub is not None else 0
                t.dims.append(n)
            count = 1
            for d in t.dims:
                count *= d
            t.size = count * (_size(t.elem) or 0)
        else:
            t = CType("base", _name(die) or tag, _int(die, "DW_AT_byte_size"))
        self._cache[key] = t
        return t

    def _member(self, die, depth):
        name = _name(die)
        off = _int(die, "DW_AT_data_member_location") or 0
        t = self.resolve(_type_of(die), depth + 1)
        bits = None
        bsize = _int(die, "DW_AT_bit_size")
        if bsize is not None:
            # DWARF 4+: DW_AT_data_bit_offset counts from the struct's
            # start; DWARF 2/3: DW_AT_bit_offset counts from the storage
            # unit's most significant bit (little-endian machines here).
            dbo = _int(die, "DW_AT_data_bit_offset")
            if dbo is not None:
                off, bo = dbo // 8, dbo % 8
            else:
                unit = _int(die, "DW_AT_byte_size") or _size(t) or 4
                bo = unit * 8 - _int(die, "DW_AT_bit_offset") - bsize
                off += bo // 8
                bo %= 8
            bits = (bsize, bo)
        return Member(name, off, t, bits)


def _type_of(die):
    return die.get_DIE_from_attribute("DW_AT_type") \
        if "DW_AT_type" in die.attributes else None


def _size(t):
    if t is None:
        return None
    return t.size


def build_id(elf):
    """The hex build-id of an open ELFFile, or None."""
    for sec in elf.iter_sections():
        if sec["sh_type"] != "SHT_NOTE":
            continue
        for note in sec.iter_notes():
            if note["n_type"] == "NT_GNU_BUILD_ID":
                return note["n_desc"]
    return None


def _debug_file(path):
    """path, or the separate debug file a debug symbols package installs
    for its build-id (/usr/lib/debug/.build-id/xx/rest.debug) when path
    itself has no .debug_info."""
    with open_regular(path) as f:
        elf = ELFFile(f)
        if elf.get_section_by_name(".debug_info") is not None:
            return path
        bid = build_id(elf)
    if bid:
        sep = os.path.join("/usr/lib/debug/.build-id", bid[:2], bid[2:] + ".debug")
        if os.path.isfile(sep):
            return sep
    return path
