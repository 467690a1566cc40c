# SPDX-License-Identifier: BSD-2-Clause
"""Field reads through probekit-structs' definitions in a bpftrace script,
checked against the binary's DWARF (the same that made them): a variable
set from a cast to struct PREFIX<T> *, then each $var->member chain must
name real members, follow only pointers, and read neither a bitfield
(the definitions hold those as bytes) nor a char array with str()
when the installed bpftrace refuses an array there (0.17 does;
detected, features.py), since printf %s reads it."""

import re

from . import dwarf, features, installed
from .cdefs import PREFIX, find
from .report import near

_CAST = re.compile(r"(\$\w+)\s*=\s*\(\s*struct\s+" + PREFIX + r"(\w+)\s*\*\s*\)")
_CHAIN = re.compile(r"(\bstr\s*\(\s*)?(\$\w+)((?:\s*(?:->|\.)\s*\w+(?:\s*\[\s*\d+\s*\])?)+)")
_STEP = re.compile(r"\s*(->|\.)\s*(\w+)((?:\s*\[\s*\d+\s*\])?)")


def _member(t, name):
    for m in t.members:
        if m.name == name:
            return m
        if m.name is None and m.type is not None and \
                m.type.kind in ("struct", "union"):
            inner = _member(m.type, name)
            if inner is not None:
                return inner
    return None


def check_struct_reads(ck, path, script):
    """Report every field read that DWARF contradicts."""
    text = script.masked
    casts = {m.group(1): m.group(2) for m in _CAST.finditer(text)}
    if not casts or ck.binary is None or not ck.binary.elf:
        return
    try:
        types = dwarf.Types(ck.binary.path)
    except (OSError, dwarf.NoDebugInfo):
        ck.report.note(f"{path}: {ck.binary.path} has no DWARF; struct "
                       "reads not checked")
        return
    try:
        for m in _CHAIN.finditer(text):
            root = casts.get(m.group(2))
            if root is None:
                continue
            _check_chain(ck, path, script.line(m.start()), types, root, m)
    finally:
        types.close()


def _check_chain(ck, path, line, types, root, m):
    t = find(types, root)
    what = f"struct {PREFIX}{root}"
    if t is None:
        # Not this binary's type (the wrapper refuses to run the script
        # against it); nothing to check the reads by.
        ck.report.note(f"{path}:{line}: {what}: no struct or union "
                       f"'{root}' in the DWARF of {ck.binary.path}; "
                       "reads not checked")
        return
    shown = m.group(2)
    pointer = True          # $var holds a pointer to root
    mem = None
    for op, name, index in _STEP.findall(m.group(3)):
        if t is None or t.kind not in ("struct", "union"):
            ck.report.error(path, line, what,
                            f"'{shown}{op}{name}': {shown} is "
                            f"{t.spelled() if t else 'not a struct'}, "
                            "which has no members")
            return
        if (op == "->") != pointer:
            ck.report.error(path, line, what,
                            f"'{shown}{op}{name}': {shown} is "
                            f"{'a pointer; use ->' if pointer else 'not a pointer; use .'}")
            return
        mem = _member(t, name)
        if mem is None:
            ck.report.error(path, line, what,
                            f"{t.spelled()} has no member '{name}'"
                            f"{near(name, [x.name for x in t.members if x.name])}")
            return
        shown += f"{op}{name}{index.replace(' ', '')}"
        if mem.bits is not None:
            ck.report.error(path, line, what,
                            f"'{shown}' is a bitfield, which the generated "
                            "struct holds as bytes")
            return
        t = mem.type
        if index and t is not None and t.kind == "array":
            t = t.elem
        pointer = t is not None and t.kind == "pointer"
        if pointer:
            t = t.target
            if t is None or t.kind not in ("struct", "union"):
                pointer = False
                t = mem.type
    if m.group(1) and mem is not None and mem.type is not None and \
            mem.type.kind == "array" and not index and \
            not features.bpftrace()["str_array"]:
        ck.report.error(path, line, what,
                        f"str({shown}) of a char array: "
                        f"{installed.bpftrace()} refuses it; print it with "
                        "printf %s as it is")
