# SPDX-License-Identifier: BSD-2-Clause
"""USDT argument operands (the OPERAND of SIZE@OPERAND, x86-64, AT&T
syntax): parsed into their parts, and judged against what bpftrace 0.17,
BCC 0.26 and libbpf 1.1 can read.

All three read the general-purpose registers in every width and memory at
disp(%reg).  Constants ($N) are read by BCC and libbpf 1.1 (in decimal
only), not by bpftrace 0.17 ("couldn't get argument", checked here).  BCC's
parser also takes xmm registers but reads them as 0; bpftrace has no
pt_regs offset for them and aborts.  Symbol-relative operands (sym(%rip),
GCC's off+sym(%rip)) and scale-index-base ones (disp(%b,%i,s)) are read by
BCC only.
"""

import re
from dataclasses import dataclass

from . import installed

# Each general-purpose register, in every width, and the struct pt_regs
# field that holds it.
PT_REGS = {"rip": "ip"}
for _r in ("a", "b", "c", "d"):
    for _n in (f"r{_r}x", f"e{_r}x", f"{_r}x", f"{_r}l"):
        PT_REGS[_n] = f"{_r}x"
for _r in ("si", "di", "bp", "sp"):
    for _n in (f"r{_r}", f"e{_r}", _r, f"{_r}l"):
        PT_REGS[_n] = _r
for _i in range(8, 16):
    for _n in (f"r{_i}", f"r{_i}d", f"r{_i}w", f"r{_i}b"):
        PT_REGS[_n] = f"r{_i}"
GPR = frozenset(PT_REGS)

_OP_REG = re.compile(r"^%(\w+)$")
_OP_CONST = re.compile(r"^\$(-?\w+)$")
_OP_MEM = re.compile(r"^(-?\d*)\(%(\w+)\)$")
_OP_INDEX = re.compile(r"^(-?\w*)\(%(\w+),%(\w+)(?:,(\d+))?\)$")
# sym(%rip), sym+8(%rip), and GCC's 40+sym(%rip) (an offset into a struct).
_OP_SYM = re.compile(r"^(?:-?\d+\+)?([A-Za-z_.][\w.]*)(?:[+-]\d+)?\(%(\w+)\)$")


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


def parse_operand(op):
    """The Operand that op, as written in a spec, denotes."""
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


def operand_problem(op):
    """Why bpftrace, BCC or libbpf cannot read this operand, or None."""
    m = _OP_CONST.match(op)
    if m:
        if not re.fullmatch(r"-?\d+", m.group(1)):
            return f"constant {op} is not decimal; libbpf 1.1 misreads it"
        return (f"immediate operand {op}: {installed.bpftrace()} cannot "
                "read it (BCC and libbpf can)")
    m = _OP_REG.match(op)
    if m:
        reg = m.group(1)
        if reg.startswith("xmm") or reg.startswith("ymm"):
            return (f"register %{reg}: {installed.bpftrace()} cannot read "
                    "it, BCC 0.26 reads 0, libbpf 1.1 refuses it")
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
    m = _OP_SYM.match(op)
    if m:
        return (f"symbol-relative operand {op}: {installed.bpftrace()} and "
                "libbpf 1.1 cannot read it (only BCC can)")
    m = _OP_INDEX.match(op)
    if m:
        if m.group(2) not in GPR or m.group(3) not in GPR:
            return f"operand {op} uses a register that is not a general register"
        return (f"scale-index-base operand {op}: {installed.bpftrace()} and "
                "libbpf 1.1 cannot read it (only BCC can)")
    return f"operand '{op}' is not one bpftrace, BCC and libbpf parse"


def spec_problems(spec):
    """[(index, problem)] for a stapsdt argument spec."""
    out = []
    for i, item in enumerate(spec.split()):
        m = re.fullmatch(r"(-?\d+)@(.+)", item)
        if not m:
            out.append((i, f"argument spec '{item}' is not SIZE@OPERAND"))
            continue
        if abs(int(m.group(1))) not in (1, 2, 4, 8):
            out.append((i, f"argument spec '{item}': size must be 1, 2, 4 or 8"))
            continue
        why = operand_problem(m.group(2))
        if why:
            out.append((i, why))
    return out


# The readers probekit names, and the operand kinds each can read (checked
# on this machine for bpftrace 0.17's immediates and symbol-relative
# operands; libbpf 1.1 from its x86 parser, which knows only off(%reg),
# %reg and $imm; BCC 0.26 from its usdt_args.cc).  bpftrace and libbpf
# need a general-purpose base register other than %rip.  A message names
# bpftrace as installed (reader_name).
BPFTRACE = "bpftrace"
READERS = {
    BPFTRACE: ("reg", "mem"),
    "libbpf 1.1": ("const", "reg", "mem"),
    "BCC 0.26": ("const", "reg", "mem", "sym", "index"),
}
_KIND_WHY = {
    "const": "an immediate (constant) operand",
    "sym": "a symbol-relative %rip operand",
    "index": "a scale-index-base operand",
    "unknown": "an operand it does not parse",
}


def reader_name(reader):
    """How a message names reader: bpftrace by the installed version."""
    return installed.bpftrace() if reader == BPFTRACE else reader


def reader_problem(op, reader, kinds=None):
    """Why reader (a key of READERS, or any name with the kinds it reads)
    cannot read operand op, as "READER cannot read OPERAND: a ...
    operand", or None when it can."""
    o = parse_operand(op)
    kinds = kinds or READERS[reader]
    reader = reader_name(reader)
    if o.kind in ("reg", "mem") and (o.base not in GPR or o.base == "rip"):
        return f"{reader} cannot read {op}: %{o.base} is not a general register"
    if o.kind in kinds:
        return None
    return f"{reader} cannot read {op}: {_KIND_WHY.get(o.kind, 'an operand it does not parse')}"
