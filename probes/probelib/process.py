# SPDX-License-Identifier: BSD-2-Clause
"""A running process as a tracer sees it: the ELF files it maps, opened
through /proc/PID/root (so a file that exists only in the process's mount
namespace, a container's library, is read as the process sees it), where
a file offset of one of them lies in its memory, and a few bytes of that
memory (a probe's semaphore)."""

import os

from . import privilege, words
from .inputs import open_regular

MAX_MAPS = 1 << 16      # lines of /proc/PID/maps read, at most
MAX_FILES = 4096        # distinct mapped files considered, at most
ELF_MAGIC = b"\x7fELF"


class ProcessError(Exception):
    """A process that cannot be read; the message is one line."""


def is_elf(path):
    """Whether path is a regular file that starts as ELF does."""
    try:
        with open_regular(path) as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


def _maps(pid):
    """[(start, end, file offset, name)] of pid's file-backed mappings."""
    out = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for n, line in enumerate(f):
                if n >= MAX_MAPS:
                    break
                fields = line.rstrip("\n").split(None, 5)
                if len(fields) < 6 or not fields[5].startswith("/"):
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                out.append((start, end, int(fields[2], 16), fields[5]))
    except FileNotFoundError:
        raise ProcessError(words.message("NO_PROCESS") % pid)
    except OSError as e:
        raise ProcessError(privilege.explain(
            "probekit-list", f"cannot read /proc/{pid}/maps",
            "reading another user's process", e))
    return out


def exe(pid):
    """The executable's path, as the process sees it."""
    try:
        path = os.readlink(f"/proc/{pid}/exe")
    except FileNotFoundError:
        raise ProcessError(words.message("NO_PROCESS") % pid)
    except OSError as e:
        raise ProcessError(privilege.explain(
            "probekit-list", f"cannot read /proc/{pid}/exe",
            "reading another user's process", e))
    return path


def files(pid):
    """[(name, openable path)]: the executable first, then each other
    mapped ELF file, in map order; name is the path as the process sees
    it, the openable path /proc/PID/root/NAME."""
    names = [exe(pid)]
    for _, _, _, name in _maps(pid):
        if name not in names and not name.endswith(" (deleted)"):
            names.append(name)
    root = f"/proc/{pid}/root"
    return [(n, root + n) for n in names[:MAX_FILES]
            if not n.endswith(" (deleted)") and is_elf(root + n)]


def address(pid, name, offset):
    """The address at which file offset offset of the mapped file name
    lies in pid's memory, or None when no mapping of it holds it."""
    for start, end, moff, mname in _maps(pid):
        if mname == name and moff <= offset < moff + (end - start):
            return start + offset - moff
    return None


def read_u16(pid, addr):
    """The unsigned short at addr in pid's memory (a USDT semaphore), or
    None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/mem", "rb") as f:
            f.seek(addr)
            b = f.read(2)
    except (OSError, ValueError, OverflowError):
        return None
    return int.from_bytes(b, "little") if len(b) == 2 else None
