# SPDX-License-Identifier: BSD-2-Clause
"""probekit-bpftrace's own command line, apart from tracing: --list names
every shipped script in one line each, and --help is short, with the rest
in the man page."""

import glob
import os
import re
import subprocess

import probekit
from probekit import ROOT, WRAPPER

BT_DIR = os.path.join(ROOT, "bt")
MAN = os.path.join(ROOT, "man", "probekit-bpftrace.8")


def run(*args):
    return subprocess.run([WRAPPER, *map(str, args)], capture_output=True, text=True,
                          timeout=probekit.TIMEOUT, stdin=subprocess.DEVNULL)


def test_list_names_every_shipped_script():
    """One line a script, its name as the wrapper takes it and the first
    sentence of its header, under 80 columns."""
    r = run("--list")
    assert r.returncode == 0 and r.stderr == "", r
    lines = r.stdout.splitlines()
    names = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(BT_DIR, "*.bt")))
    assert [l.split()[0] for l in lines] == names, r.stdout
    for line in lines:
        assert len(line) < 80, line
        name, purpose = line.split(None, 1)
        # The purpose is the header's own words: its first line's.
        head = open(os.path.join(BT_DIR, name + ".bt")).read()
        first = re.search(rf"^ \* {name}\.bt\s+(.*)$", head, re.M).group(1)
        shown = purpose.removesuffix(" ...")
        assert first.startswith(shown[:len(first)]) and shown, line


def test_a_listed_name_runs_that_script(tmp_path):
    """A name from --list is the shipped script (no PID needed for the
    check: --dry-run of an absent PID fails on the PID, after the name is
    taken; an unknown name fails on the name)."""
    r = run("--dry-run", "1", "no_such_script")
    assert r.returncode == 1 and "script 'no_such_script' does not exist" in r.stderr, r


def test_help_is_short_and_names_the_man_page():
    """--help is the synopsis, the options and examples; the internals are
    in probekit-bpftrace(8), which documents every option --help shows."""
    r = run("--help")
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert len(lines) <= 50, len(lines)
    assert "probekit-bpftrace(8)" in r.stdout
    man = open(MAN).read().replace("\\-", "-")
    for opt in sorted(set(re.findall(r"^\s+(?:-\w, )?(--[a-z-]+)", r.stdout, re.M))):
        if opt in ("--help", "--version"):
            continue
        assert opt in man, opt
