# SPDX-License-Identifier: BSD-2-Clause
"""The tracers a message means, named as they are installed.

What probekit-check applies is what the installed bpftrace and libbpf
read, detected by trying them (features.py), never by version.  The
version only names them in a message: the bpftrace the wrapper would run
($BPFTRACE, else bpftrace on PATH) by what its --version prints, libbpf
by the version string of the libbpf.so the dynamic linker finds; plain
"bpftrace" or "libbpf" when there is none to ask.  Each is asked once,
and only when a message needs the name."""

import ctypes
import functools
import os
import re
import subprocess

from . import features

_VERSION = re.compile(r"bpftrace v?(\d+)\.(\d+)")
ASK_TIMEOUT = 10        # seconds; bpftrace --version answers in ~40 ms


@functools.lru_cache(maxsize=None)
def bpftrace():
    """"bpftrace MAJOR.MINOR" of the installed bpftrace, or "bpftrace"."""
    try:
        r = subprocess.run([os.environ.get("BPFTRACE") or "bpftrace",
                            "--version"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, errors="replace",
                           timeout=ASK_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return "bpftrace"
    m = _VERSION.search(r.stdout) if r.returncode == 0 else None
    return f"bpftrace {m.group(1)}.{m.group(2)}" if m else "bpftrace"


@functools.lru_cache(maxsize=None)
def libbpf():
    """"libbpf MAJOR.MINOR" of the installed libbpf.so, or "libbpf"."""
    so = features.libbpf_path()
    try:
        f = ctypes.CDLL(so).libbpf_version_string
    except (OSError, TypeError, AttributeError):
        return "libbpf"
    f.restype = ctypes.c_char_p
    m = re.match(rb"v?(\d+)\.(\d+)", f() or b"")
    return f"libbpf {m.group(1).decode()}.{m.group(2).decode()}" if m \
        else "libbpf"
