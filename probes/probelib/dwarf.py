# SPDX-License-Identifier: BSD-2-Clause
"""What DWARF says about a file's functions: their parameters, and how many
copies of each the compiler inlined (a uprobe on the function never sees
those)."""

from .elf import ELFFile


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
    with open(path, "rb") as f:
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

