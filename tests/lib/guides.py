# SPDX-License-Identifier: BSD-2-Clause
"""A guide's text as a test reads it: its fenced blocks, what it says a
command shows, and a guide run word for word (doc/probes-in-your-code.md's
program of one's own, built with make, CMake and Meson)."""

import os
import re
import signal
import subprocess

import pytest

import histtools
import probekit
from probekit import LineReader, TIMEOUT


def fenced_blocks(text):
    """(language, text) of each fenced block, in order, with the fence's
    indentation (a block in a list item) taken off its lines."""
    out, lang, indent, lines = [], None, 0, []
    for line in text.split("\n"):
        m = re.match(r"^( *)```(\w*)\s*$", line)
        if lang is None and m:
            lang, indent, lines = m.group(2), len(m.group(1)), []
        elif lang is not None and m and not m.group(2):
            out.append((lang, "\n".join(lines)))
            lang = None
        elif lang is not None:
            lines.append(line[indent:] if line[:indent].strip() == "" else line)
    assert lang is None, "a fence is not closed"
    return out


def shown_in(shown, printed):
    """Whether the lines of a text block appear, in order, among the lines
    printed; "..." in the block stands for any lines, and lines next to
    each other in it must be next to each other in the output."""
    runs, run = [], []
    for line in shown.split("\n"):
        if line.strip() == "...":
            runs, run = runs + [run], []
        else:
            run.append(line.rstrip())
    runs.append(run)
    got = [line.rstrip() for line in printed.split("\n")]
    at = 0
    for run in [r for r in runs if r]:
        while at <= len(got) - len(run) and got[at:at + len(run)] != run:
            at += 1
        if at > len(got) - len(run):
            return False
        at += len(run)
    return True


GUIDE = os.path.join(probekit.ROOT, "doc", "probes-in-your-code.md")
SECTION = "## A program of your own"
FILE_LANGS = ("c", "d", "make", "cmake", "meson")
JOBS = 23


def section():
    with open(GUIDE) as f:
        text = f.read()
    assert SECTION in text, f"{GUIDE} has no '{SECTION}'"
    return text.split("\n" + SECTION + "\n", 1)[1].split("\n## ", 1)[0]


def steps(text):
    """[(kind, name or None, text)] of the section's blocks in order: a file
    block (its language one of FILE_LANGS) is named by the last code span
    of the line before it, which ends with a colon."""
    lines = text.split("\n")
    out, fence_at = [], [i for i, ln in enumerate(lines) if ln.startswith("```")]
    opens = fence_at[0::2]
    for (lang, body), at in zip(fenced_blocks(text), opens):
        name = None
        if lang in FILE_LANGS:
            before = [ln for ln in lines[:at] if ln.strip()][-1]
            m = re.search(r"`([\w.]+)`[^`]*:\s*$", before)
            assert m, f"the {lang} block after {before!r} names no file"
            name = m.group(1)
        out.append((lang, name, body))
    return out


def session(blocks):
    """The section as one bash script; each sh block's output follows a
    marker line, and each text block is paired with the sh block before."""
    script, shown = ["set -e"], []
    for lang, name, body in blocks:
        if name:
            assert "PROBEKIT_GUIDE_EOF" not in body
            script += [f"cat > {name} <<'PROBEKIT_GUIDE_EOF'", body, "PROBEKIT_GUIDE_EOF"]
        elif lang == "sh":
            script += [f"echo '=== guide: block {len(shown)}'", body]
            shown.append([])
        elif lang == "text":
            assert shown, "the section shows output before any command"
            shown[-1].append(body)
    return "\n".join(script) + "\n", shown


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A home with a make install of this checkout in $HOME/pk."""
    home = tmp_path_factory.mktemp("home")
    p = subprocess.run(["make", "--no-print-directory", f"O={probekit.BUILD}", "install",
                        f"PREFIX={home}/pk"], cwd=probekit.ROOT, capture_output=True,
                       text=True, timeout=TIMEOUT * 10)
    assert p.returncode == 0, p.stdout + p.stderr
    return home


def run_guide(home, env):
    """The section run as written in home, as a user with env: (its output
    split by sh block, the text blocks it shows).  test_deb.py runs it from
    the installed package too."""
    script, shown = session(steps(section()))
    p = subprocess.run(["bash", "-c", script], cwd=home, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=TIMEOUT * 20)
    assert p.returncode == 0, p.stdout[-6000:]
    printed = re.split(r"^=== guide: block \d+\n", p.stdout, flags=re.M)[1:]
    assert len(printed) == len(shown), p.stdout
    return printed, shown


def check_shown(printed, shown):
    """Each text block the section shows is in what its sh block printed."""
    checked = 0
    for i, (texts, out) in enumerate(zip(shown, printed)):
        for text in texts:
            assert shown_in(text, out), f"block {i} printed, not as the guide shows:\n{out}"
            checked += 1
    assert checked == 1, checked
    # probekit-check passed the program against its catalog (set -e).
    assert "of 3 catalog probes used" in "".join(printed), printed


# Each route's program in the guide's directory, and what 23 jobs fire.
ROUTES = ("build", "cmake-build", "meson-build")
COUNTS = {"mysvc:job__start": JOBS, "mysvc:job__done": JOBS, "mysvc:service__start": 1}


def count(usdtcount, prog, jobs, env):
    """{probe: count} from usdtcount -b prog while prog runs jobs jobs."""
    tool = subprocess.Popen([usdtcount, "-b", prog, "mysvc:*"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)
    out = LineReader(tool.stdout)
    try:
        out.wait_for(histtools.READY)
        p = subprocess.run([prog, str(jobs)], capture_output=True, text=True, env=env,
                           timeout=TIMEOUT)
        assert p.returncode == 0 and f"mysvc: {jobs} jobs done" in p.stdout, p
        probekit.interrupt(tool, "probekit-usdtcount")
        lines = out.drain(10)
    finally:
        if tool.poll() is None:
            os.killpg(tool.pid, signal.SIGKILL)
            tool.wait()
    assert tool.returncode == 0, lines
    return {m[1]: int(m[2]) for m in (re.match(r"^(mysvc:\w+)\s+(\d+)$", ln) for ln in lines)
            if m}
