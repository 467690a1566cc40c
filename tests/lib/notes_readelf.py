# SPDX-License-Identifier: BSD-2-Clause
"""What readelf says of a file's stapsdt notes, and probelib's reader
held to it."""

import os
import re
import shutil
import struct
import subprocess
import sys

import probekit

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import notes  # noqa: E402


def _readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True,
                          stdout=subprocess.PIPE).stdout.decode()


_NOTE = re.compile(
    r"Provider: (\S+)\s+Name: (\S+)\s+Location: (0x[0-9a-f]+), "
    r"Base: (0x[0-9a-f]+), Semaphore: (0x[0-9a-f]+)"
    r"(?:\s+Arguments: ([^\n]*))?")


def readelf_notes(path):
    """[(provider, name, pc, base, semaphore, spec)] as readelf -n says."""
    return [(m[0], m[1], int(m[2], 16), int(m[3], 16), int(m[4], 16),
             m[5].strip()) for m in _NOTE.findall(_readelf("-n", path))]


def readelf_offset(path, addr):
    """The file offset of addr, from readelf -S's section of it."""
    for ln in _readelf("-S", path).splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+"
                     r"([0-9a-f]+)\s+([0-9a-f]+)", ln)
        if not m or m[2] == "NOBITS":
            continue
        start, off, size = (int(x, 16) for x in m.group(3, 4, 5))
        if start and start <= addr < start + size:
            return addr - start + off
    return None


def check_against_readelf(path):
    got = notes.read_probes(path)
    want = readelf_notes(path)
    assert [(p.provider, p.name, p.pc, p.semaphore, p.spec) for p in got] \
        == [(w[0], w[1], w[2], w[4], w[5]) for w in want]
    for p in got:
        assert p.offset == readelf_offset(path, p.pc), p
        want_sem = readelf_offset(path, p.semaphore) if p.semaphore else 0
        assert p.semaphore_offset == want_sem, p
    return got


def readelf_names(path):
    """[(provider, name)] of each stapsdt note, as readelf -n says."""
    out = subprocess.run(["readelf", "-n", "--wide", path],
                         capture_output=True, text=True, check=True).stdout
    return re.findall(r"Provider: (\S+)\s+Name: (\S+)", out)


def prelinked_copy(path, dst, shift=0x1000):
    """A copy of path at dst whose first stapsdt note records a
    .stapsdt.base shift below the section's address, as a prelinked
    file's may: a reader must move that site and its semaphore up by
    shift.  (pc, semaphore) as the note records them."""
    shutil.copy(path, dst)
    _, _, pc, base, sem, _ = readelf_notes(path)[0]
    with open(dst, "r+b") as f:
        data = f.read()
        f.seek(data.index(struct.pack("<3Q", pc, base, sem)))
        f.write(struct.pack("<3Q", pc, base - shift, sem))
    return pc, sem
