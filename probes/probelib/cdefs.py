# SPDX-License-Identifier: BSD-2-Clause
"""C struct definitions and enum name tables for bpftrace 0.17, made from
a binary's DWARF (dwarf.Types): probekit-structs' generator, and the name
mapping probekit-check uses to check field reads against the same DWARF.

Every generated type is named PREFIX + its DWARF name (struct export
becomes struct pk_export), so it cannot clash with a kernel type bpftrace
knows from BTF.  The definitions sit inside #pragma pack(push, 1) and
carry an explicit padding member before every gap, so each member lies at
exactly the offset DWARF gives, whatever alignment clang would choose:

  - a named struct or union member is emitted as its own prefixed
    definition, before the type that holds it; an anonymous one inline;
  - an enum member becomes the integer of its size and signedness (the
    --enums table gives its names);
  - a char array stays a char array, which bpftrace reads as a string
    (printf %s); other arrays become one-dimensional;
  - a pointer to a struct or union that is also generated keeps its type,
    so a script can follow it; char * stays char * (for str()); any other
    pointer becomes void *;
  - bitfields, floating-point and other types bpftrace 0.17 cannot
    read become byte arrays named after what they cover, and so does a
    member that overlaps the one before it.
"""

import re

PREFIX = "pk_"
IDENT = re.compile(r"[A-Za-z_]\w{0,127}")
MAX_ENUMERATORS = 4096


class DefsError(Exception):
    pass


def find(types, name, kinds=("struct", "union")):
    """The CType a user's name means: a struct, union (or enum) of that
    name, else a typedef of one; None when the DWARF has none."""
    for k in kinds:
        t = types.lookup(k, name)
        if t is not None:
            return t
    t = types.lookup("typedef", name)
    if t is not None and t.kind in kinds:
        return t
    return None


def type_name(t):
    """The name a generated definition has in its DWARF (struct or union
    tag, else the typedef it was named by)."""
    return t.name or t.typedef


def _int_spelling(size, signed):
    base = {1: "char", 2: "short", 4: "int", 8: "long"}.get(size)
    if base is None:
        return None
    if size == 1:
        return "signed char" if signed else "unsigned char"
    return base if signed else f"unsigned {base}"


def _is_char(t):
    return t is not None and t.kind == "base" and t.size == 1 and \
        t.name is not None and "char" in t.name


class _Emitter:
    def __init__(self, types, prefix):
        self.types = types
        self.prefix = prefix
        self.done = {}          # (kind, name) -> emitted tag
        self.out = []
        self.wanted = set()     # (kind, name) of the types asked for

    def tag(self, t):
        name = type_name(t)
        if not name or not IDENT.fullmatch(name):
            raise DefsError(f"{t.spelled()} has no name usable in C")
        return f"{t.kind} {self.prefix}{name}"

    def define(self, t):
        """Emit t (a named struct or union) after what it holds."""
        key = (t.kind, type_name(t))
        if key in self.done:
            return self.done[key]
        self.done[key] = self.tag(t)
        body = self.body(t, 1, 0)
        self.out.append(f"{self.tag(t)} {{\n{body}}};\n")
        return self.done[key]

    def body(self, t, depth, base):
        """The members of struct or union t, padded to DWARF's layout;
        base is t's offset in the outermost definition, which names the
        padding (unique there, as inline anonymous members share it)."""
        pad = "__pad" if t.kind == "struct" else f"__upad{depth}"
        ind = "\t" * depth
        lines, cursor = [], 0
        members = list(t.members)
        i = 0
        while i < len(members):
            m = members[i]
            if t.kind == "union":
                cursor = 0
            if m.bits is not None or m.offset < cursor:
                # A run of bitfields (or an overlap): bytes, named for it.
                start = max(m.offset, cursor)
                end, names = start, []
                while i < len(members) and (members[i].bits is not None or
                                            members[i].offset < cursor):
                    b = members[i]
                    bits = b.bits or (8 * (b.type.size or 0), 0)
                    end = max(end, b.offset + (bits[1] + bits[0] + 7) // 8)
                    names.append(b.name or "?")
                    i += 1
                    if t.kind == "union":
                        break
                if start < cursor:
                    start = cursor
                if start > cursor:
                    lines.append(f"{ind}char {pad}_{base + cursor}[{start - cursor}];\n")
                if end > start:
                    lines.append(f"{ind}unsigned char __bits_{base + start}[{end - start}];"
                                 f"\t/* {', '.join(names)} */\n")
                    cursor = end
                continue
            if m.offset > cursor and t.kind == "struct":
                lines.append(f"{ind}char {pad}_{base + cursor}[{m.offset - cursor}];\n")
                cursor = m.offset
            lines.append(self.member(m, depth, base))
            cursor = m.offset + (m.type.size or 0) if t.kind == "struct" else \
                max(cursor, m.type.size or 0)
            i += 1
        if t.size is not None and t.size > cursor:
            lines.append(f"{ind}char {pad}_{base + cursor}[{t.size - cursor}];\n")
        return "".join(lines)

    def member(self, m, depth, base):
        ind = "\t" * depth
        name = m.name
        t = m.type
        if name is not None and not IDENT.fullmatch(name):
            raise DefsError(f"member name {name!r} is not a C identifier")
        if name is None and t is not None and t.kind in ("struct", "union"):
            return (f"{ind}{t.kind} {{\n{self.body(t, depth + 1, base + m.offset)}"
                    f"{ind}}};\n")
        spelled, dims, note = self.spell(t)
        dim = f"[{dims}]" if dims is not None else ""
        sep = "" if spelled.endswith("*") else " "
        return f"{ind}{spelled}{sep}{name or '__anon_' + str(m.offset)}{dim};" + \
            (f"\t/* {note} */" if note else "") + "\n"

    def spell(self, t):
        """(C spelling, array length or None, comment) of a member type."""
        size = t.size if t is not None else 0
        if t is None:
            return "unsigned char", 0, "void"
        if t.kind == "base":
            if t.name and "_Bool" in t.name:
                return "unsigned char", None, "_Bool"
            if _is_char(t):
                return "char", None, None
            if t.name and ("float" in t.name or "double" in t.name or
                           "complex" in t.name.lower()):
                return "unsigned char", size, t.name
            s = _int_spelling(size, t.signed)
            return (s, None, None) if s else ("unsigned char", size, t.name)
        if t.kind == "enum":
            s = _int_spelling(size, t.signed)
            return (s, None, t.spelled()) if s else \
                ("unsigned char", size, t.spelled())
        if t.kind == "pointer":
            tg = t.target
            if _is_char(tg):
                return "char *", None, None
            if tg is not None and tg.kind in ("struct", "union") and \
                    (tg.kind, type_name(tg)) in self.wanted:
                return f"{self.tag(tg)} *", None, None
            return "void *", None, t.spelled() if tg is not None else None
        if t.kind in ("struct", "union"):
            if type_name(t):
                return self.define(t), None, None
            # An anonymous aggregate reached by an array or a typedef'd
            # member: its bytes (no name to define it by).
            return "unsigned char", size, t.spelled()
        if t.kind == "array":
            n = 1
            for d in t.dims:
                n *= d
            if _is_char(t.elem):
                return "char", n, None
            es, edims, note = self.spell(t.elem)
            if edims is not None:
                return "unsigned char", size, t.spelled()
            return es, n, note or (t.spelled() if len(t.dims) > 1 else None)
        return "unsigned char", size, t.spelled()


def struct_defs(types, names, prefix=PREFIX):
    """The C text that defines the structs or unions names (and the named
    ones they hold), for bpftrace.  Raises DefsError for an unknown name."""
    found = []
    for n in names:
        t = find(types, n)
        if t is None:
            raise DefsError(f"no struct or union '{n}'")
        if t.size is None:
            raise DefsError(f"{t.spelled()} has no size (only declared)")
        found.append(t)
    em = _Emitter(types, prefix)
    em.wanted = {(t.kind, type_name(t)) for t in found}
    for t in found:
        em.define(t)
    return "#pragma pack(push, 1)\n" + "".join(em.out) + "#pragma pack(pop)\n"


def enum_map(t, prefix=PREFIX):
    return f"@{prefix}{type_name(t)}"


def enum_block(types, names, prefix=PREFIX):
    """A bpftrace BEGIN block that fills @PREFIX<enum>[value] = "NAME" for
    each enum, and an END block that clears the maps."""
    maps, fills = [], []
    for n in names:
        t = find(types, n, ("enum",))
        if t is None:
            raise DefsError(f"no enum '{n}'")
        if len(t.values) > MAX_ENUMERATORS:
            raise DefsError(f"enum '{n}' has {len(t.values)} values, more "
                            f"than {MAX_ENUMERATORS}")
        m = enum_map(t, prefix)
        maps.append(m)
        seen = set()
        for name, value in t.values:
            if value in seen or not IDENT.fullmatch(name or ""):
                continue
            seen.add(value)
            fills.append(f"\t{m}[{value}] = \"{name}\";\n")
    return ("BEGIN\n{\n" + "".join(fills) + "}\n\nEND\n{\n" +
            "".join(f"\tclear({m});\n" for m in maps) + "}\n")
