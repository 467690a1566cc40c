# SPDX-License-Identifier: BSD-2-Clause
"""The semaphores of a live process's USDT probes, read from its memory."""

import os
import sys

from elftools.elf.elffile import ELFFile

import probekit

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import notes as sdtnotes  # noqa: E402


class Semaphores:
    """The semaphores of a live process's USDT probes, read from its memory
    at the addresses the ELF file's stapsdt notes give (a semaphore lives in
    the .probes section; its file offset is found in /proc/PID/maps)."""

    def __init__(self, pid, names):
        exe = os.readlink(f"/proc/{pid}/exe")
        sems = {n.name: n.semaphore for n in sdtnotes.read_probes(exe)}
        with open(exe, "rb") as f:
            sec = ELFFile(f).get_section_by_name(".probes")
            base, off = sec["sh_addr"], sec["sh_offset"]
        maps = []
        with open(f"/proc/{pid}/maps") as f:
            for ln in f:
                fields = ln.split()
                if len(fields) == 6 and fields[5] == exe:
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    maps.append((lo, hi, int(fields[2], 16)))
        self.pid, self.addr = pid, {}
        for name in names:
            file_off = sems[name] - base + off
            (addr,) = [lo + file_off - moff for lo, hi, moff in maps
                       if moff <= file_off < moff + hi - lo]
            self.addr[name] = addr

    def read(self):
        out = {}
        with open(f"/proc/{self.pid}/mem", "rb") as mem:
            for name, addr in self.addr.items():
                mem.seek(addr)
                out[name] = int.from_bytes(mem.read(2), "little")
        return out
