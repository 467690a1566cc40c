# SPDX-License-Identifier: BSD-2-Clause
"""C-like text read with regular expressions: comments and literals
masked so structure can be found, functions, structs and declarations,
and the calls within a range.  Offsets always map to the original text."""

import re

from .inputs import open_regular

MAX_FILE = 4 << 20          # bytes read from any script or tool


def read_text(path):
    with open_regular(path) as f:
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise ValueError(f"larger than {MAX_FILE} bytes")
    return data.decode("utf-8", errors="replace")


def mask_c_like(text, line_comments=("//",)):
    """Blank comments and the contents of string and char literals (keeping
    quotes, lengths and newlines), so that structure can be found with
    regular expressions and offsets still map to the original text."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif any(text.startswith(lc, i) for lc in line_comments):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " " if out[k] != "\n" else "\n"
            i = j + 1
        else:
            i += 1
    return "".join(out)


def line_of(text, off):
    return text.count("\n", 0, off) + 1


def match_close(text, open_off, o="{", c="}"):
    """Offset just past the bracket closing the one at open_off."""
    depth = 0
    for i in range(open_off, len(text)):
        if text[i] == o:
            depth += 1
        elif text[i] == c:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def split_top(text, sep=","):
    """Split on sep outside brackets; return [(start_offset, piece)]."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append((start, text[start:i]))
            start = i + 1
    out.append((start, text[start:]))
    return out



_C_SIZES = {
    "char": 1, "u8": 1, "s8": 1, "__u8": 1, "__s8": 1, "uint8_t": 1,
    "int8_t": 1, "bool": 1, "_Bool": 1,
    "short": 2, "u16": 2, "s16": 2, "__u16": 2, "__s16": 2, "uint16_t": 2,
    "int16_t": 2,
    "int": 4, "unsigned": 4, "u32": 4, "s32": 4, "__u32": 4, "__s32": 4,
    "uint32_t": 4, "int32_t": 4, "pid_t": 4,
    "long": 8, "u64": 8, "s64": 8, "__u64": 8, "__s64": 8, "uint64_t": 8,
    "int64_t": 8, "size_t": 8, "ssize_t": 8, "uintptr_t": 8, "intptr_t": 8,
}
_C_KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "do",
               "else", "case", "goto"}
_C_FUNC = re.compile(
    r"(?:^|(?<=[\s;}*]))([A-Za-z_]\w*)\s*\(((?:[^(){};]|\([^()]*\))*)\)\s*\{")
_C_STRUCT = re.compile(r"\bstruct\s+(\w+)\s*\{")


def c_type_size(t):
    if "*" in t:
        return 8
    words = [w for w in t.split() if w not in ("const", "volatile", "struct",
                                               "static", "signed", "register")]
    if not words:
        return None
    if words.count("long") or words[-1] == "long":
        return 8
    if words == ["unsigned"]:
        return 4
    words = [w for w in words if w != "unsigned"]
    if "short" in words:
        return 2
    return _C_SIZES.get(words[-1]) if len(words) == 1 else (
        _C_SIZES.get(words[-1]) if words[-1] == "int" else None)


def c_declarations(text):
    """{name: type} of the declarations in a piece of C text (statements
    split at ; { } and parameter lists at commas)."""
    out = {}
    for stmt in re.split(r"[;{}()]", text):
        m = re.match(r"\s*((?:(?:const|volatile|unsigned|signed|struct|static|"
                     r"long|short)\s+)*[A-Za-z_]\w*)\s+(.*)$", stmt, re.S)
        if not m:
            continue
        base = m.group(1)
        first = base.split()[-1]
        if first in _C_KEYWORDS or first == "return":
            continue
        for _, decl in split_top(m.group(2)):
            d = decl.split("=")[0].strip()
            dm = re.fullmatch(r"(\**)\s*([A-Za-z_]\w*)\s*(\[[^\]]*\])?", d)
            if dm:
                out.setdefault(dm.group(2), base + (" " + dm.group(1) if dm.group(1) else "")
                               + ("[]" if dm.group(3) else ""))
    return out


def c_params(params):
    out = {}
    for _, p in split_top(params):
        pm = re.match(r"\s*(.*?)([A-Za-z_]\w*)\s*$", p, re.S)
        if pm and pm.group(1).strip():
            out[pm.group(2)] = pm.group(1).strip()
    return out


class CText:
    """Functions and structs of a C text, offsets into it."""

    def __init__(self, masked):
        self.masked = masked
        self.funcs = {}         # name -> (def offset, params, body start, end)
        self.structs = {}
        for m in _C_STRUCT.finditer(masked):
            end = match_close(masked, m.end() - 1)
            self.structs[m.group(1)] = c_declarations(masked[m.end():end - 1])
        for m in _C_FUNC.finditer(masked):
            name = m.group(1)
            if name in _C_KEYWORDS:
                continue
            # A definition has a return type before its name.
            before = masked[max(0, m.start() - 80):m.start()]
            if not re.search(r"[A-Za-z_]\w*[\s*]+$", before) or \
                    re.search(r"\b(return|else)\s*$", before):
                continue
            params = m.group(2)
            if name.startswith("BPF_") and params:
                pieces = split_top(params)
                name = pieces[0][1].strip()
                params = ",".join(p for _, p in pieces[1:])
                macro = m.group(1)
            else:
                macro = None
            body = m.end() - 1
            self.funcs[name] = (m.start(), params, body,
                                match_close(masked, body), macro)
        self.globals = c_declarations(re.sub(r"\{[^{}]*\}", ";", masked))

    def var_type(self, fname, expr):
        """The C type of an lvalue like v, s.f or p->f, or None."""
        f = self.funcs.get(fname)
        scope = {}
        if f:
            scope.update(self.globals)
            scope.update(c_params(f[1]))
            scope.update(c_declarations(self.masked[f[2]:f[3]]))
        else:
            scope.update(self.globals)
        parts = re.split(r"\s*(?:\.|->)\s*", expr.strip())
        t = scope.get(parts[0])
        for field in parts[1:]:
            if t is None:
                return None
            sm = re.search(r"struct\s+(\w+)", t)
            if not sm or sm.group(1) not in self.structs:
                return None
            t = self.structs[sm.group(1)].get(field)
        return t


def c_calls(masked, name, start, end):
    """[(offset, [argument text])] of calls to name within [start, end)."""
    out = []
    for m in re.finditer(r"\b" + name + r"\s*\(", masked[start:end]):
        popen = start + m.end() - 1
        pclose = match_close(masked, popen, "(", ")")
        out.append((start + m.start(),
                    [p.strip() for _, p in split_top(masked[popen + 1:pclose - 1])]))
    return out


def to_int(s):
    try:
        return int(s, 0)
    except ValueError:
        return None

