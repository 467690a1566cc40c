# SPDX-License-Identifier: BSD-2-Clause
"""probekit's one register table (probes/usdt/registers), read here for
Python and by probes/usdt/genregs for C: for each architecture, each name
a USDT operand may give a register, the register's struct pt_regs field
and offset, the bytes the name reads, and whether bpftrace, BCC and
libbpf parse that name.

The architecture is the ELF file's (e_machine), never the host's: a file
read on any machine is read as what it was built for.
"""

import os
from dataclasses import dataclass

# Where the table sits from here, in the checkout and installed alike
# (mk/install.mk installs probes/usdt/registers beside probelib).
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                    "usdt", "registers")

# e_machine as pyelftools and <elf.h> name it, by the architecture names
# the table uses.
MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}


@dataclass(frozen=True)
class Register:
    arch: str       # "x86_64", "aarch64"
    name: str       # as an operand writes it: "eax", "x3", "sp"
    size: int       # the bytes this name reads
    role: str       # "gpr", or "pc" (the probe address at a uprobe)
    field: str      # struct pt_regs member: "ax", "regs[3]", "sp"
    offset: int     # its byte offset in struct pt_regs
    parsed: bool    # bpftrace 0.17, BCC 0.26 and libbpf 1.1 parse the name


class TableError(Exception):
    """A line of the register table that is not ARCH ROLE FIELD OFFSET
    NAME/SIZE...: a defect of the tree, named by line."""


def parse(text, where=PATH):
    """[Register] of the table text, in table order."""
    out, seen = [], set()
    for lineno, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        bad = f"{where}:{lineno}: "
        if len(words) < 5 or words[0] not in MACHINES or \
                words[1] not in ("gpr", "pc") or not words[3].isdigit():
            raise TableError(bad + "not ARCH ROLE FIELD OFFSET NAME/SIZE...")
        for item in words[4:]:
            name, _, size = item.rstrip("*").partition("/")
            if size not in ("1", "2", "4", "8") or not name:
                raise TableError(bad + f"'{item}' is not NAME/SIZE")
            if (words[0], name) in seen:
                raise TableError(bad + f"{words[0]} register {name} twice")
            seen.add((words[0], name))
            out.append(Register(words[0], name, int(size), words[1],
                                words[2], int(words[3]),
                                not item.endswith("*")))
    return out


def _load():
    with open(PATH) as f:
        return parse(f.read())


TABLE = _load()
BY_NAME = {(r.arch, r.name): r for r in TABLE}


def find(arch, name):
    """The Register arch calls name, or None."""
    return BY_NAME.get((arch, name))


def arch_of(elf):
    """The table's name for a pyelftools ELFFile's architecture, or its
    e_machine as pyelftools names it when the table has none."""
    machine = elf["e_machine"]
    for arch, em in MACHINES.items():
        if em == machine:
            return arch
    return str(machine)
