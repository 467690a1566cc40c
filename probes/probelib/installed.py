# SPDX-License-Identifier: BSD-2-Clause
"""The tracer a message means, named as it is installed.

probekit-check's rules for bpftrace (no immediate or symbol-relative
operand, arg0..arg5, no str() of a char array) were checked on bpftrace
0.17, and they are applied whatever is installed: nothing here changes
what is checked.  A message names the bpftrace the user runs, though: the
one the wrapper would run ($BPFTRACE, else bpftrace on PATH), by the
version its --version prints, or plain "bpftrace" when there is none to
ask.  It is asked once, and only when a message needs the name."""

import functools
import os
import re
import subprocess

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
