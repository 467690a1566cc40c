# SPDX-License-Identifier: BSD-2-Clause
"""The hardening an ELF file shows, read back from the file itself: PIE,
immediate binding, RELRO, the stack protector and FORTIFY_SOURCE's
checked functions."""

import re
import subprocess

import probekit


def readelf(*args):
    p = subprocess.run(["readelf", "-W", *args], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stderr
    return p.stdout


def hardening(path):
    """What the ELF file at path shows: {pie, bind_now, relro, stack_chk,
    fortified (the *_chk functions it calls), hash (a .hash section)}."""
    dyn = readelf("-d", path)
    flags = re.search(r"\(FLAGS\)\s+(.*)", dyn)
    flags_1 = re.search(r"\(FLAGS_1\)\s+Flags:\s+(.*)", dyn)
    syms = readelf("--dyn-syms", path)
    return {
        "pie": (re.search(r"^\s+Type:\s+DYN\b", readelf("-h", path), re.M) is not None
                and flags_1 is not None and "PIE" in flags_1.group(1).split()),
        "bind_now": flags is not None and "BIND_NOW" in flags.group(1).split()
                    and flags_1 is not None and "NOW" in flags_1.group(1).split(),
        "relro": re.search(r"^\s+GNU_RELRO\b", readelf("-l", path), re.M) is not None,
        "stack_chk": re.search(r"\b__stack_chk_fail\b", syms) is not None,
        "fortified": sorted(set(re.findall(r"\b(__\w+_chk)@", syms)) - {"__stack_chk_fail"}),
        "hash": re.search(r"\] \.hash\s", readelf("-S", path)) is not None,
    }


def hardening_problems(path):
    """What path lacks of the default hardening, as a list of words."""
    h = hardening(path)
    return [k for k in ("pie", "bind_now", "relro", "stack_chk") if not h[k]] + \
        ([] if h["fortified"] else ["fortify"])
