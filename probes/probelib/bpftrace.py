# SPDX-License-Identifier: BSD-2-Clause
"""bpftrace scripts, read as bpftrace reads them as far as probekit
needs: probe blocks, their attach points (usdt, uprobe, uretprobe and
their short forms), and what each block's predicate and action read:
argN, str()/buf() of an argument or of a variable set from one, printf
conversions, retval.  Offsets index the script's text; line() maps them
to its lines.  This is probekit's one Python parser of bpftrace scripts.
"""

import re
from dataclasses import dataclass, field

from . import features
from .ctext import line_of, mask_c_like, match_close, split_top

# A uprobe's argN is a register of the x86_64 calling convention, six
# of them: every bpftrace reads arg0..arg5 there ("x86_64 doesn't support
# arg6").
UPROBE_MAX_ARG = 5


def usdt_max_arg():
    """The last USDT argN the installed bpftrace reads: detected by trying
    it (features.py); bpftrace 0.17 stops at arg5, as for a uprobe."""
    return features.bpftrace()["max_args"] - 1


ALIASES = {"U": "usdt", "u": "uprobe", "ur": "uretprobe",
           "usdt": "usdt", "uprobe": "uprobe", "uretprobe": "uretprobe"}
_ARG = re.compile(r"\barg(\d+)\b")
ARG_EXPR = re.compile(r"arg(\d+)")     # an expression that is one argument
_STRFN = re.compile(r"\b(str|buf)\s*\(\s*(\$\w+|arg\d+)\b")
# args.NAME and args->NAME: a usdt argument by name (probekit-bpftrace
# resolves it per probe from the binary's probekit note), alone or in
# str()/buf().
ARGS_NAME = re.compile(r"(?<![\w$@.>])args(?:\.|->)([A-Za-z_]\w*)")
_STRFN_NAME = re.compile(r"\b(str|buf)\s*\(\s*(args(?:\.|->)([A-Za-z_]\w*))")
_VARSET = re.compile(r"(\$\w+)\s*=\s*arg(\d+)\s*;")
_FMT = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?([a-zA-Z%])")
# A colon outside double quotes.
_COLON = re.compile(r':(?=(?:[^"]*"[^"]*")*[^"]*$)')


@dataclass
class AttachPoint:
    """One attach point of a block.  kind is usdt, uprobe or uretprobe
    (short forms resolved), None for any other probe type.  parts is the
    point split at colons outside quotes, as written; shown is the point
    as the masked header has it (quoted text blanked)."""
    off: int
    text: str
    shown: str
    kind: str
    parts: list


@dataclass
class Read:
    """An argument read: argN (string=False), or str()/buf() of argN or
    of a variable set from it (string=True); index counts from 0.  direct
    is False for str($x) where $x = argN: argN itself is read (and
    checked) where $x is set, and this read adds only that it is a
    string."""
    off: int
    index: int
    form: str
    string: bool
    direct: bool = True


@dataclass
class Block:
    """A probe block: its attach points, then the predicate and action
    from offset uses to end, and what they read."""
    points: list
    uses: int
    end: int
    reads: list = field(default_factory=list)
    # args.NAME reads, as Read with index -1 and the name in form: (Read,
    # name).
    named: list = field(default_factory=list)
    printfs: list = field(default_factory=list)    # (off, conv, expr)
    retval: int = None                              # offset of retval


@dataclass
class Script:
    text: str
    masked: str
    blocks: list

    def line(self, off):
        return line_of(self.masked, off)


def split_attach(header):
    """Split a probe header into [(offset, attach point)] and the offset
    where the predicate starts (or len(header))."""
    points, i, n = [], 0, len(header)
    while True:
        while i < n and header[i].isspace():
            i += 1
        start = i
        quoted = False
        while i < n:
            ch = header[i]
            if ch == '"':
                quoted = not quoted
            elif not quoted and (ch.isspace() or ch == ","):
                break
            i += 1
        if i > start:
            points.append((start, header[start:i]))
        while i < n and header[i].isspace():
            i += 1
        if i < n and header[i] == ",":
            i += 1
            continue
        return points, i


def parse(text):
    """The Script of a bpftrace program's text."""
    masked = mask_c_like(text, line_comments=("//",))
    # Preprocessor lines (#include, #define, the #! line) are not probes.
    masked = re.sub(r"(?m)^[ \t]*#[^\n]*", lambda m: " " * len(m.group(0)),
                    masked)
    blocks = []
    i, n, seg_start = 0, len(masked), 0
    while i < n:
        ch = masked[i]
        if ch == "{":
            end = match_close(masked, i)
            block = _block(text, masked, seg_start, i, end)
            if block is not None:
                blocks.append(block)
            i = seg_start = end
            continue
        if ch in ";}":
            seg_start = i + 1
        i += 1
    return Script(text, masked, blocks)


def _block(text, masked, hoff, bopen, bend):
    """The Block whose header runs from hoff to the brace at bopen, or
    None for a struct, union or enum declaration."""
    header = masked[hoff:bopen]
    stripped = header.strip()
    if not stripped or re.match(r"(struct|union|enum)\b", stripped):
        return None
    points, pred = split_attach(header)
    aps = []
    for off, shown in points:
        # Masking blanked quoted paths; read the attach point as written.
        written = text[hoff + off:hoff + off + len(shown)]
        parts = _COLON.split(written)
        aps.append(AttachPoint(hoff + off, written, shown,
                               ALIASES.get(parts[0]), parts))
    block = Block(aps, hoff + pred, bend)
    _reads(text, masked, block)
    return block


def _reads(text, masked, block):
    """Fill in what the predicate and action of block read."""
    start = block.uses
    region = masked[start:block.end]
    # $x = argN; then str($x) reads argN.
    alias = {m.group(1): int(m.group(2)) for m in _VARSET.finditer(region)}
    # str(argN) is one read of argN, as a string: the argN inside it is
    # not a second read (each of its faults would be reported twice).
    inside = set()
    for m in _STRFN.finditer(region):
        ref = m.group(2)
        if ref.startswith("$"):
            idx = alias.get(ref)
        else:
            idx = int(ref[3:])
            inside.add(m.start(2))
        if idx is not None:
            block.reads.append(Read(start + m.start(), idx,
                                    f"{m.group(1)}({ref})", True,
                                    not ref.startswith("$")))
    for m in _ARG.finditer(region):
        if m.start() not in inside:
            block.reads.append(Read(start + m.start(), int(m.group(1)),
                                    m.group(0), False))
    block.reads.sort(key=lambda r: r.off)
    inside = set()
    for m in _STRFN_NAME.finditer(region):
        inside.add(m.start(2))
        block.named.append((Read(start + m.start(), -1,
                                 f"{m.group(1)}({m.group(2)})", True),
                            m.group(3)))
    for m in ARGS_NAME.finditer(region):
        if m.start() not in inside:
            block.named.append((Read(start + m.start(), -1, m.group(0),
                                     False), m.group(1)))
    block.named.sort(key=lambda r: r[0].off)
    block.printfs = list(_printf_args(text, masked, start, block.end))
    m = re.search(r"\bretval\b", region)
    block.retval = start + m.start() if m else None


def _printf_args(text, masked, start, end):
    """(offset, conversion, argument expression) of printf calls whose
    format is a literal."""
    for m in re.finditer(r"\bprintf\s*\(", masked[start:end]):
        popen = start + m.end() - 1
        pclose = match_close(masked, popen, "(", ")")
        pieces = split_top(masked[popen + 1:pclose - 1])
        if not pieces:
            continue
        f_off, f_piece = pieces[0]
        lit = f_piece.strip()
        if not (lit.startswith('"') and lit.endswith('"')):
            continue
        a = popen + 1 + f_off + f_piece.index('"')
        fmt = text[a + 1:a + len(lit) - 1]
        convs = [c for c in _FMT.findall(fmt) if c != "%"]
        for conv, (p_off, piece) in zip(convs, pieces[1:]):
            yield (popen + 1 + p_off + len(piece) - len(piece.lstrip()),
                   conv, piece.strip())
