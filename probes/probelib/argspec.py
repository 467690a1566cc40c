# SPDX-License-Identifier: BSD-2-Clause
"""USDT argument operands (the OPERAND of SIZE@OPERAND) of x86-64 (AT&T
syntax) and aarch64 (GNU as syntax), chosen by the ELF file's machine:
parsed into their parts, and judged against what the installed bpftrace
and libbpf, and BCC 0.26, can read.

x86-64: which of immediates ($N), symbol-relative operands (sym(%rip),
GCC's off+sym(%rip)) and scale-index-base ones (disp(%b,%i,s)) bpftrace
and libbpf read is detected by trying the installed ones (features.py):
on Debian 12, bpftrace 0.17 reads immediates and scale-index-base
operands and misreads symbol-relative ones; libbpf 1.1 to 1.6 parse
immediates only, and libbpf 1.7 adds scale-index-base (its usdt.c).  All read the general-purpose registers
in every width and memory at disp(%reg); libbpf reads $N in decimal only.
BCC 0.26 (its usdt_args.cc) reads them all, and takes xmm registers but
reads them as 0.

aarch64 (read in their sources; an x86_64 machine cannot try them):
libbpf 1.1 to 1.7 read xN, sp, [reg], [reg, N] and a decimal N; BCC 0.26
also [reg, reg] (no shift); bpftrace 0.17 reads through BCC's parser, so
it takes [reg, reg] too, and is taken to miss immediates.  None parses
wN, a '#' before a number, a shifted index ([x0, x1, lsl 2]) or a
symbol-relative [x5, #:lo12:sym].

The registers, their pt_regs fields and which names the readers parse
come from probekit's one register table (registers.py).
"""

import re
from dataclasses import dataclass

from . import features, installed, registers

X86_64 = "x86_64"
AARCH64 = "aarch64"

# Each x86-64 general-purpose register, in every width, and the struct
# pt_regs field that holds it (BCC's C names it so).
PT_REGS = {r.name: r.field for r in registers.TABLE if r.arch == X86_64}
GPR = frozenset(PT_REGS)

_OP_REG = re.compile(r"^%(\w+)$")
_OP_CONST = re.compile(r"^\$(-?\w+)$")
_OP_MEM = re.compile(r"^(-?\d*)\(%(\w+)\)$")
_OP_INDEX = re.compile(r"^(-?\w*)\(%(\w+),%(\w+)(?:,(\d+))?\)$")
# sym(%rip), sym+8(%rip), and GCC's 40+sym(%rip) (an offset into a struct).
_OP_SYM = re.compile(r"^(?:-?\d+\+)?([A-Za-z_.][\w.]*)(?:[+-]\d+)?\(%(\w+)\)$")
# aarch64: N or #N; a register; [base], [base, disp], [base, index(, lsl
# N)]; [base, #:lo12:sym].
_A64_NUM = re.compile(r"^#?(-?(?:0x[0-9a-fA-F]+|\d+))$")
_A64_REG = re.compile(r"^([a-z][a-z0-9]*)$")
_A64_MEM = re.compile(r"^\[\s*([a-z][a-z0-9]*)\s*(?:,\s*([^\]]*?))?\s*\]$")
_A64_INDEX = re.compile(r"^([a-z][a-z0-9]*)(?:\s*,\s*lsl\s+(\d+))?$")


def pt_regs_field(arch, name):
    """The struct pt_regs member that holds register name of arch (BCC's
    C names it: "ax", "regs[3]"), or None for a name the table lacks or
    the program counter."""
    r = registers.find(arch, name)
    return r.field if r and r.role == "gpr" else None


@dataclass
class Operand:
    """kind is "const" (value), "reg" (base), "mem" (disp(base)), "index"
    (disp(base,index,scale)), "sym" (symbol-relative) or "unknown"."""
    kind: str
    text: str
    value: int = 0
    base: str = ""
    disp: int = 0
    index: str = ""
    scale: int = 1


def _int(s, default=0):
    try:
        return int(s, 0) if s not in ("", "-") else default
    except ValueError:
        return None


def _strtoll(s):
    """s as C's strtoll(s, NULL, 0) reads it (a leading 0 is octal), as
    usdt_notes.c reads it."""
    neg, digits = s.startswith("-"), s.lstrip("-")
    if digits[:2].lower() == "0x":
        v = int(digits[2:], 16)
    elif len(digits) > 1 and digits[0] == "0":
        v = int(digits, 8) if set(digits) <= set("01234567") else None
    else:
        v = int(digits)
    return None if v is None else -v if neg else v


def _parse_a64(op):
    m = _A64_NUM.match(op)
    if m and _strtoll(m.group(1)) is not None:
        return Operand("const", op, value=_strtoll(m.group(1)))
    m = _A64_REG.match(op)
    if m and registers.find(AARCH64, op):
        return Operand("reg", op, base=op)
    m = _A64_MEM.match(op)
    if not m or not registers.find(AARCH64, m.group(1)):
        return Operand("unknown", op)
    base, rest = m.group(1), m.group(2)
    if rest is None:
        return Operand("mem", op, base=base)
    n = _A64_NUM.match(rest)
    if n and _strtoll(n.group(1)) is not None:
        return Operand("mem", op, base=base, disp=_strtoll(n.group(1)))
    if rest.startswith("#:"):
        return Operand("sym", op, base=base)
    i = _A64_INDEX.match(rest)
    if i and registers.find(AARCH64, i.group(1)) and \
            int(i.group(2) or 0) <= 3:
        return Operand("index", op, base=base, index=i.group(1),
                       scale=1 << int(i.group(2) or 0))
    return Operand("unknown", op)


def parse_operand(op, arch=X86_64):
    """The Operand that op, as a file of arch writes it in a spec, denotes."""
    if arch == AARCH64:
        return _parse_a64(op)
    if arch != X86_64:
        return Operand("unknown", op)
    m = _OP_CONST.match(op)
    if m:
        v = _int(m.group(1))
        return Operand("const", op, value=v) if v is not None \
            else Operand("unknown", op)
    m = _OP_REG.match(op)
    if m:
        return Operand("reg", op, base=m.group(1))
    m = _OP_MEM.match(op)
    if m:
        return Operand("mem", op, base=m.group(2), disp=_int(m.group(1)))
    m = _OP_SYM.match(op)
    if m:
        return Operand("sym", op, base=m.group(2))
    m = _OP_INDEX.match(op)
    if m:
        disp = _int(m.group(1))
        if disp is None:
            return Operand("unknown", op)
        return Operand("index", op, base=m.group(2), disp=disp,
                       index=m.group(3), scale=int(m.group(4) or 1))
    return Operand("unknown", op)


_KIND_LABEL = {"const": "immediate", "sym": "symbol-relative",
               "index": "scale-index-base"}


def _who(names):
    return " and ".join([", ".join(names[:-1]), names[-1]] if
                        len(names) > 1 else names)


def operand_fix():
    """What to do about an operand a reader cannot read: specs/limits.toml's
    OPERAND_FIX, which the C tools print too (through toolspec, which
    privilege.py finds beside probes/)."""
    from .privilege import spec
    return spec.texts()["OPERAND_FIX"][0]


def operand_problem(op, arch=X86_64):
    """Why bpftrace, BCC or libbpf cannot read this operand, or None."""
    if arch != X86_64:
        whys = [reader_problem(op, r, arch=arch) for r in readers(arch)]
        cannot = [reader_name(r) for r, w in zip(readers(arch), whys) if w]
        if not cannot:
            return None
        why = next(w for w in whys if w).split(": ", 1)[1]
        return f"operand {op}: {_who(cannot)} cannot read it ({why})"
    m = _OP_CONST.match(op)
    if m and not re.fullmatch(r"-?\d+", m.group(1)):
        # Every libbpf reads $N with sscanf's %ld (usdt.c): decimal only.
        return (f"constant {op} is not decimal; {reader_name(LIBBPF)} "
                "misreads it")
    m = _OP_REG.match(op)
    if m:
        reg = m.group(1)
        if reg.startswith("xmm") or reg.startswith("ymm"):
            return (f"register %{reg}: {reader_name(BPFTRACE)} cannot read "
                    f"it, {BCC} reads 0, {reader_name(LIBBPF)} refuses it")
        if reg not in GPR:
            return f"register %{reg} is not one bpftrace, BCC and libbpf read"
        if reg == "rip":
            return "register %rip is the probe address, not a value"
        return None
    m = _OP_MEM.match(op)
    if m:
        if m.group(2) not in GPR:
            return f"base register %{m.group(2)} is not a general register"
        if m.group(2) == "rip":
            return (f"operand {op} is relative to %rip; the readers add it "
                    "to the probe address, which is not what the compiler meant")
        return None
    o = parse_operand(op)
    if o.kind == "index" and (o.base not in GPR or o.index not in GPR):
        return f"operand {op} uses a register that is not a general register"
    if o.kind in _KIND_LABEL:
        rs = readers()
        cannot = [reader_name(r) for r in rs if o.kind not in rs[r]]
        can = [reader_name(r) for r in rs if o.kind in rs[r]]
        if not cannot:
            return None
        return (f"{_KIND_LABEL[o.kind]} operand {op}: {_who(cannot)} cannot "
                f"read it" + (f" ({_who(can)} can)" if can else ""))
    return f"operand '{op}' is not one bpftrace, BCC and libbpf parse"


def split_spec(spec):
    """The SIZE@OPERAND items of a spec: separated by blanks outside
    brackets, since aarch64's "-4@[sp, 12]" is one item."""
    items, depth, cur = [], 0, ""
    for c in spec:
        if c in " \t" and not depth:
            if cur:
                items.append(cur)
            cur = ""
            continue
        depth += (c == "[") - (c == "]" and depth > 0)
        cur += c
    return items + [cur] if cur else items


def spec_problems(spec, arch=X86_64):
    """[(index, problem)] for a stapsdt argument spec of a file of arch."""
    out = []
    for i, item in enumerate(split_spec(spec)):
        m = re.fullmatch(r"(-?\d+)@(.+)", item)
        if not m:
            out.append((i, f"argument spec '{item}' is not SIZE@OPERAND"))
            continue
        if abs(int(m.group(1))) not in (1, 2, 4, 8):
            out.append((i, f"argument spec '{item}': size must be 1, 2, 4 or 8"))
            continue
        why = operand_problem(m.group(2), arch)
        if why:
            out.append((i, f"{why}; {operand_fix()}"))
    return out


# The readers probekit names.  On x86_64 the operand kinds bpftrace and
# libbpf read are the installed ones', detected by trying them
# (features.py); BCC's are BCC 0.26's, from its usdt_args.cc.  bpftrace
# and libbpf need a general-purpose base register other than %rip.  A
# message names bpftrace and libbpf as installed (reader_name).
BPFTRACE = "bpftrace"
LIBBPF = "libbpf"
BCC = "BCC 0.26"
BCC_KINDS = ("const", "reg", "mem", "sym", "index")
# aarch64 files, read on any machine: what bpftrace 0.17 and libbpf 1.1
# to 1.7 read, from their aarch64 parsers (module docstring; libbpf's
# did not change from 1.1 to 1.7), since the installed tools of an
# x86_64 machine cannot be tried on them.
READERS_A64 = {
    BPFTRACE: ("reg", "mem", "index"),
    LIBBPF: ("const", "reg", "mem"),
    BCC: ("const", "reg", "mem", "index"),
}
_KIND_WHY = {
    "const": "an immediate (constant) operand",
    "sym": "a symbol-relative %rip operand",
    "index": "a scale-index-base operand",
    "unknown": "an operand it does not parse",
}
_UNPARSED = "an operand it does not parse"


def readers(arch=X86_64):
    """{reader: operand kinds it reads} for a file of arch."""
    if arch == AARCH64:
        return READERS_A64
    return {BPFTRACE: tuple(features.bpftrace()["kinds"]),
            LIBBPF: tuple(features.libbpf()["kinds"]), BCC: BCC_KINDS}


def reader_name(reader):
    """How a message names reader: bpftrace and libbpf as installed."""
    if reader == BPFTRACE:
        return installed.bpftrace()
    if reader == LIBBPF:
        return installed.libbpf()
    return reader


def _a64_problem(o, reader, named):
    """Why named reader cannot read aarch64 operand o though its kind is
    one it reads, or None; the words are usdt_sites.c's kind_why()."""
    for name in (o.base, o.index):
        r = registers.find(AARCH64, name) if name else None
        if r and r.role != "gpr":
            return f"{name} is not a general register"
        if r and not r.parsed and named:
            return "a register name it does not parse"
    if not named:
        return None
    if "#" in o.text or (o.kind == "index" and o.scale != 1):
        return _KIND_WHY["const"] if o.kind == "const" else _UNPARSED
    if reader == LIBBPF and o.kind in ("const", "mem") and \
            re.search(r"0x", o.text):
        return _KIND_WHY["const"] if o.kind == "const" else _UNPARSED
    return None


def reader_problem(op, reader, kinds=None, arch=X86_64):
    """Why reader (a key of readers(arch), or any name with the kinds it
    reads) cannot read operand op of a file of arch, as "READER cannot
    read OPERAND: a ... operand", or None when it can."""
    o = parse_operand(op, arch)
    named = kinds is None
    kinds = kinds or readers(arch)[reader]
    who = reader_name(reader)
    if arch == AARCH64:
        if o.kind in kinds:
            why = _a64_problem(o, reader, named)
            return f"{who} cannot read {op}: {why}" if why else None
        why = "a symbol-relative operand" if o.kind == "sym" else \
            _KIND_WHY.get(o.kind, _UNPARSED)
        return f"{who} cannot read {op}: {why}"
    if o.kind in ("reg", "mem") and (o.base not in GPR or o.base == "rip"):
        return f"{who} cannot read {op}: %{o.base} is not a general register"
    if o.kind in kinds:
        return None
    return f"{who} cannot read {op}: {_KIND_WHY.get(o.kind, _UNPARSED)}"
