# SPDX-License-Identifier: BSD-2-Clause
"""A PATH traced through the wrapper that a new file replaces (a package
upgrade, a deploy: cp new && mv new PATH): bpftrace stays on the old file,
which cannot be helped, and the wrapper says so in one line, once, with
what to run instead."""

import os
import re
import shutil
import subprocess

import probekit
from probekit import WRAPPER

def replaced_line():
    """The line, as specs/limits.toml's REPLACED_NOT_FOLLOWED words it for
    every tool that cannot follow a file (one declaration)."""
    text = open(os.path.join(probekit.ROOT, "specs", "limits.toml")).read()
    fmt = re.search(r'^\[message\.REPLACED_NOT_FOLLOWED\]\ntext = "(.*)"$', text, re.M).group(1)
    return re.compile("^probekit-bpftrace: " + re.escape(fmt).replace("%s", "(.+)") + "$")


REPLACED = replaced_line()


def test_replaced_path_is_said_once(bpf, blktgt_bin, tmp_path):
    exe = tmp_path / "tp"
    shutil.copy2(blktgt_bin, exe)
    script = tmp_path / "s.bt"
    script.write_text("usdt:__EXE__:blktgt:io__submit { @s = count(); }\n")
    p = subprocess.Popen([WRAPPER, str(exe), str(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    out = probekit.LineReader(p.stdout)
    try:
        out.wait_for(r"^probekit: tracing PATH=")
        new = tmp_path / "tp.new"
        shutil.copy2(blktgt_bin, new)
        os.rename(new, exe)
        m = out.wait_for(REPLACED.pattern)
        assert m.groups() == (str(exe), "probekit-bpftrace"), m.group(0)
    finally:
        probekit.interrupt(p, "the trace")
    lines = out.drain(10)
    assert sum(1 for l in lines if REPLACED.match(l)) == 1, lines


def test_unchanged_path_says_nothing(bpf, blktgt_bin, tmp_path):
    """The watcher is silent while the file stays, and the trace's output
    ends with bpftrace (it holds none of the caller's pipes)."""
    exe = tmp_path / "tp"
    shutil.copy2(blktgt_bin, exe)
    script = tmp_path / "s.bt"
    script.write_text("usdt:__EXE__:blktgt:io__submit { @s = count(); }\n")
    r = subprocess.run([WRAPPER, "-d", "2", str(exe), str(script)], capture_output=True,
                       text=True, timeout=probekit.TIMEOUT)
    assert r.returncode == 0, r
    assert "replaced" not in r.stdout + r.stderr, r
