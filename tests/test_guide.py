# SPDX-License-Identifier: BSD-2-Clause
"""doc/probes-in-your-code.md's "A program of your own", word for word:
its files and commands, taken from its code blocks in order, run as one
shell session in a fresh directory (HOME a temporary directory), from a
`make install PREFIX=$HOME/pk` of this checkout, with no checkout
directory on PATH.  The make route's trace must print what the guide
shows; the CMake and Meson programs are then counted the same way, and
the operand pitfall the guide shows is built and checked.
(test_cleanroom.py runs the guide's steps before that section from the
Debian package.)"""

import os
import re
import signal
import subprocess

import pytest

import histtools
import probekit
from probekit import LineReader, TIMEOUT
from test_cleanroom import fenced_blocks, shown_in
from test_install import clean_env

GUIDE = os.path.join(probekit.ROOT, "doc", "probes-in-your-code.md")
SECTION = "## A program of your own"
FILE_LANGS = ("c", "d", "make", "cmake", "meson")
JOBS = 23

pytestmark = pytest.mark.needs("dtrace", "readelf", "pkg-config", "cmake", "meson", "ninja")


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


def user_env(home):
    """A user with the install alone; pkg-config searches nothing of this
    machine's but what the guide puts on its path."""
    return dict(clean_env(), HOME=str(home), PKG_CONFIG_LIBDIR=str(home / "no-system-pc"),
                PKG_CONFIG_PATH="")


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


@pytest.fixture(scope="module")
def guided(home):
    return run_guide(home, user_env(home))


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


def test_guide_commands_print_what_it_shows(guided, bpf):
    check_shown(*guided)


@pytest.mark.parametrize("build", ROUTES)
def test_each_route_builds_a_program_that_counts(guided, home, build, bpf):
    prog = str(home / "mysvc" / build / "mysvc")
    usdtcount = str(home / "pk" / "bin" / "probekit-usdtcount")
    assert count(usdtcount, prog, JOBS, user_env(home)) == COUNTS


def test_missing_probekit_stops_each_route(guided, home, tmp_path):
    """Without the prefix on pkg-config's or CMake's path, each build stops
    at its start, saying probekit is missing, and builds nothing."""
    src = home / "mysvc"
    env = dict(user_env(home), PATH=clean_env()["PATH"])
    runs = {
        "make": (["make", "-C", str(src), f"O={tmp_path}/make"],
                 "pkg-config finds no probekit"),
        "cmake": (["cmake", "-S", str(src), "-B", f"{tmp_path}/cmake"],
                  "probekit-config.cmake"),
        "meson": (["meson", "setup", f"{tmp_path}/meson", str(src)],
                  "Dependency \"probekit\" not found"),
    }
    for what, (argv, says) in runs.items():
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT * 5)
        assert p.returncode != 0 and says in p.stdout + p.stderr, (what, p.stdout, p.stderr)
    assert not (tmp_path / "make").exists()
    assert not list((tmp_path / "cmake").glob("*.probekit"))


def test_array_element_operand_and_its_fix(guided, home, tmp_path):
    """The pitfall the guide shows: mysvc.c without its empty asm passes
    kinds[...] as a scale-index-base operand, which probekit-check says the
    installed libbpf cannot read (when it cannot: detected), naming the
    fix; with the asm (the guide's build) it is a register."""
    import sys
    sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
    from probelib import argspec
    src = home / "mysvc"
    naive = tmp_path / "naive"
    naive.mkdir()
    for f in ("mysvc.d", "Makefile"):
        (naive / f).write_text((src / f).read_text())
    code = (src / "mysvc.c").read_text()
    asm = '\t\t__asm__ volatile("" : "+r"(kind));\t/* a register operand */\n'
    assert asm in code
    (naive / "mysvc.c").write_text(code.replace(asm, ""))
    env = dict(user_env(home), PATH=f"{home}/pk/bin:" + clean_env()["PATH"],
               PKG_CONFIG_PATH=f"{home}/pk/share/pkgconfig")
    p = subprocess.run(["make", "-C", str(naive)], env=env, capture_output=True, text=True,
                       timeout=TIMEOUT * 5)
    assert p.returncode == 0, p.stdout + p.stderr

    def operand(prog):
        notes = subprocess.run(["readelf", "-n", "-W", prog], capture_output=True, text=True,
                               check=True).stdout
        m = re.search(r"Name: job__start\n.*\n\s+Arguments: \S+ 8@(\S+)", notes)
        assert m, notes
        return m.group(1)

    op = operand(str(naive / "build" / "mysvc"))
    assert re.fullmatch(r"-?\d*\(%\w+,%\w+,8\)", op), op
    assert re.fullmatch(r"%\w+", operand(str(src / "build" / "mysvc")))
    p = subprocess.run([f"{home}/pk/bin/probekit-check", "--binary",
                        str(naive / "build" / "mysvc")], env=env, capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr
    note = (f"probekit-check: note: mysvc:job__start: arg1: "
            f"{argspec.reader_name(argspec.LIBBPF)} cannot read {op}: a scale-index-base "
            f"operand; {argspec.operand_fix()}")
    if "index" in argspec.readers()[argspec.LIBBPF]:
        # libbpf 1.7 (unstable) reads it: nothing to note.
        assert not [ln for ln in p.stdout.splitlines()
                    if ln.startswith("probekit-check: note: mysvc:")], p.stdout
    else:
        assert note in p.stdout.splitlines(), p.stdout
