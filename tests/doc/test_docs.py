# SPDX-License-Identifier: BSD-2-Clause
"""The docs name real things: every command in README.md, the guides in
doc/ and the readers' guides (bt/, bcc/, libbpf/README.md) is a real
command (one of build/bin/, or a system command the docs rely on), every
option it is given appears in that command's --help, and every relative
link reaches a real file and, for #anchor, a real heading (GitHub's
anchor rules).  No heading appears twice across the README and the
guides, so no anchor is shadowed.

Commands are read from fenced code blocks (sh, console or none; where a
block has "$ " prompts, only the prompted lines), from indented code
blocks and from inline code spans whose first word is a known command:
a documented example is a command line, so a renamed option breaks it.
"""

import functools
import glob
import os
import re
import shlex
import subprocess

import pytest

import probekit
from probekit import ROOT, BUILD

FRONT = "README.md"
GUIDES = sorted(os.path.relpath(p, ROOT)
                for p in glob.glob(os.path.join(ROOT, "doc", "*.md")))
READERS = ["bt/README.md", "bcc/README.md", "libbpf/README.md"]
DOCS = [FRONT] + GUIDES + READERS

# Commands the docs use that probekit does not build: True where their
# --help lists their options, so those are checked too, or the options
# their --help leaves out but their man page has (gdb -p, for --pid).
SYSTEM = {
    "bpftrace": True, "gdb": {"-p"}, "make": True, "setpriv": True,
    "tplist-bpfcc": True, "qemu-io": True, "nbdinfo": True, "fio": False,
    "perf": False, "apt": False, "cp": True, "cat": False, "grep": False,
    "pkg-config": True, "ulimit": False, "mount": True, "coredumpctl": False,
    "pgrep": True, "psql": False, "dpkg": False, "sudo": False,
    "kill": False, "python3": False, "head": False, "readelf": True,
    "mkdir": False, "cmake": True, "meson": False, "chown": False, "su": False,
}
# Shell words that are never a command of their own.
SHELL_WORDS = {"cd", "export", "for", "do", "done", "if", "then", "fi",
               "echo", "while", "until", "wait"}
PROMPT = "$ "


def probekit_commands():
    return set(os.listdir(os.path.join(BUILD, "bin")))


def gdb_commands():
    """The gdb commands gdb/blktgt.py adds, which the docs name too."""
    with open(os.path.join(ROOT, "gdb", "blktgt.py")) as f:
        return set(re.findall(r'super\(\).__init__\("([\w-]+)"', f.read()))


# --- anchors and links ---------------------------------------------------------

def slug(heading):
    """GitHub's anchor for a heading: its text as rendered (links keep
    their text, code spans and emphasis lose their marks), lower-cased,
    every character but letters, digits, '-', '_' and spaces dropped,
    spaces made '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ ")
    return text.replace(" ", "-")


def strip_code(text):
    """The text with fenced blocks blanked (line count kept), so that
    what a code block shows is not read as a link or a heading."""
    out, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append("")
        elif m:
            fence = m.group(1)
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def headings(text):
    return [m.group(2).strip() for m in
            re.finditer(r"^(#{1,6})\s+(.*?)\s*#*\s*$", strip_code(text), re.M)]


def anchors(path):
    """Every anchor a file has: its headings' slugs, a repeated one
    suffixed -1, -2... as GitHub does, and explicit <a name|id=...>."""
    with open(path) as f:
        text = f.read()
    seen, out = {}, set()
    for h in headings(text):
        s = slug(h)
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    out.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return out


def link_problems(path):
    """One line per broken relative link of the markdown file PATH."""
    with open(path) as f:
        text = strip_code(f.read())
    text = re.sub(r"`[^`\n]*`", "", text)     # code spans are not links
    problems = []
    for lineno, line in enumerate(text.split("\n"), 1):
        for target in re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)", line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue                    # https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                    if file_part else path)
            where = f"{os.path.relpath(path, ROOT)}:{lineno}: {target}"
            if not os.path.exists(dest):
                problems.append(f"{where}: no such file")
            elif anchor and (not dest.endswith(".md")
                             or anchor not in anchors(dest)):
                problems.append(f"{where}: no heading with anchor #{anchor}"
                                f" in {os.path.relpath(dest, ROOT)}")
    return problems


# --- commands ------------------------------------------------------------------

def prompt_of(line, known):
    """The command a shell prompt ("$ ", or root's "# " before a command)
    starts on LINE, or None: a "# " line is a comment unless a command
    follows."""
    body = line.lstrip()
    if body.startswith(PROMPT):
        return body[len(PROMPT):]
    if body.startswith("# "):
        first = body[2:].split(" ", 1)[0]
        if command_name(first, known):
            return body[2:]
    return None


def code_lines(text, known):
    """(line number, command line, must) from fenced blocks, indented
    blocks and inline code spans.  must: the line is a shell command
    (a line of an sh block without prompts, or a prompted line), so its
    first word must be a command; other lines (output, prose in a span)
    are checked only when their first word names a command."""
    out, fence, lang, block = [], None, None, []

    def flush_fenced():
        shell = lang in ("sh", "console", "shell", "bash")
        prompted = any(prompt_of(ln, known) is not None for _, ln in block)
        joined, start, must = "", None, False
        for n, ln in block:
            if not joined:
                p = prompt_of(ln, known)
                if prompted:
                    if p is None:
                        if not shell:
                            out.append((n, ln, False))
                        continue
                    ln, must = p, True
                else:
                    must = shell
                start = n
            if ln.rstrip().endswith("\\"):
                joined += ln.rstrip()[:-1] + " "
                continue
            joined += ln
            if joined.strip() and not joined.lstrip().startswith("#"):
                out.append((start, joined, must))
            joined, start = "", None

    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"^(```+|~~~+)\s*([\w-]*)", line.lstrip())
        if fence:
            if m and line.lstrip().startswith(fence) and not m.group(2):
                flush_fenced()
                fence, block = None, []
            else:
                block.append((n, line))
            continue
        if m:
            fence, lang, block = m.group(1), m.group(2), []
            continue
        if line.startswith("    "):
            body = line[4:]
            p = prompt_of(body, known)
            out.append((n, body if p is None else p, p is not None))
            continue
        for span in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", line):
            out.append((n, span, False))
    return out


def words(cmdline):
    """The first simple command of a shell line, as words: command
    substitutions and everything after a pipe, a list operator, a
    redirection or a comment are left out."""
    s = re.sub(r"\$\(\([^)]*\)\)", "N", cmdline)
    s = re.sub(r"\$\([^)]*\)", "X", s)
    s = re.sub(r"\s#.*$", "", s)
    try:
        toks = shlex.split(s, comments=False)
    except ValueError:
        return []
    out = []
    for t in toks:
        if t in ("|", "||", "&&", ";", "&") or re.match(r"^\d*[<>]", t):
            break
        out.append(t.rstrip(";&"))
        if t.endswith((";", "&")) and len(t) > 1:
            break
    while out and re.match(r"^[A-Z_][A-Z0-9_]*=", out[0]):
        out.pop(0)                          # VAR=value before the command
    return out


def command_name(word, known):
    """The command a first word names, or None if it names none: a path
    into build/bin, a probekit command, or a system command."""
    base = os.path.basename(word)
    if word.startswith(("build/bin/", "$HOME/pk/bin/", "/usr/bin/")):
        return base or None
    if "/" in word or base in gdb_commands():
        return None
    if base in known or base in SYSTEM or \
            re.match(r"^(probekit-[\w-]+|blktgt(-[\w-]+)?)$", base):
        return base
    return None


# A terminal's escape sequences: an OSC (a hyperlink, ESC ] 8 ;; URL ST) and
# a CSI (a colour or bold, ESC [ 1 m).  GNU coreutils 9.10 (Debian
# unstable, 2026) writes both into its --help even through a pipe: each
# option wrapped in a link to its manual and set in bold.
ESCAPES = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-?]*[ -/]*[@-~]")


def plain(text):
    """text without a terminal's escape sequences."""
    return ESCAPES.sub("", text)


@functools.lru_cache(maxsize=None)
def help_text(name, sub=None):
    """What `name [sub] --help` (or -h) prints, stdout and stderr, with no
    terminal escape sequences."""
    exe = os.path.join(BUILD, "bin", name)
    argv = [exe if os.path.exists(exe) else name] + ([sub] if sub else [])
    text = ""
    for flag in ("--help", "-h"):
        try:
            p = subprocess.run(argv + [flag], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            return None
        text += plain(p.stdout + p.stderr)
        if p.returncode == 0:
            break
    return text


def test_help_is_read_without_escapes():
    """An option coreutils 9.10 prints as a bold hyperlink reads as the
    option, and plain text is left as it is."""
    link = ("  \x1b]8;;https://www.gnu.org/software/coreutils/manual/"
            "coreutils.html#cp-a\x1b\\\x1b[1m-a, --archive\x1b[0m\x1b]8;;\x1b\\\n")
    assert plain(link) == "  -a, --archive\n"
    assert plain("-a, --archive [=WHEN]\n") == "-a, --archive [=WHEN]\n"
    assert plain("bell \x1b]0;title\x07end") == "bell end"


def option_problems(name, argv):
    """The options of argv (its first word is NAME) missing from NAME's
    help; a blktgt-rpc method's options from that method's help."""
    sub = None
    if name == "blktgt-rpc":
        sub = next((w for w in argv[1:] if re.match(r"^[a-z]+_[a-z_]+$", w)), None)
    helps = help_text(name) + (help_text(name, sub) if sub else "")
    documented = SYSTEM.get(name) if isinstance(SYSTEM.get(name), set) else set()
    problems = []
    for w in argv[1:]:
        if w == "--":
            break
        if w in documented:
            continue
        if name in SYSTEM and re.match(r"^-[a-zA-Z][\w-]+$", w):
            # A system command's single-dash word is one option (gdb
            # -iex, -batch), which its help spells with one dash or two.
            if re.search(rf"(?<![\w-])-?{re.escape(w)}(?![\w-])", helps):
                continue
            problems += [f"-{c}" for c in w[1:] if not re.search(
                rf"(?<![\w-])-{c}(?![\w-])", helps)][:1]
        elif re.match(r"^--[a-zA-Z][\w-]*", w):
            opt = w.split("=", 1)[0]
            if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", helps):
                problems.append(opt)
        elif re.match(r"^-[a-zA-Z]+$", w):
            # -BO is -B -O; an option's own value may follow it glued
            # (-ofile), so only the letters up to one taking a value.
            for c in w[1:]:
                if not re.search(rf"(?<![\w-])-{c}(?![\w-])", helps):
                    problems.append(f"-{c}")
                    break
                if re.search(rf"(?<![\w-])-{c}[ ,]+[A-Z]", helps):
                    break
    return problems


def command_problems(path, known=None):
    known = probekit_commands() if known is None else known
    with open(path) as f:
        text = f.read()
    problems = []
    for lineno, line, must in code_lines(text, known):
        argv = words(line)
        if not argv:
            continue
        where = f"{os.path.relpath(path, ROOT)}:{lineno}: {line.strip()}"
        first = argv[0]
        if first in SHELL_WORDS or first.startswith(("./", "-")):
            continue
        name = command_name(first, known)
        if name is None:
            if must and re.match(r"^[a-z][\w.+-]*$", first) \
                    and not re.search(r"[A-Z]", first):
                problems.append(f"{where}: {first} is no command probekit "
                                f"builds and no known system command")
            continue
        if re.search(r"[A-Z]", name):
            continue                        # a placeholder: probekit-TOOL
        if name not in known and name not in SYSTEM:
            problems.append(f"{where}: no command {name} in build/bin")
            continue
        if name in SYSTEM and not SYSTEM[name]:
            continue
        if help_text(name) is None:
            problems.append(f"{where}: {name} is not installed")
            continue
        for opt in option_problems(name, argv):
            problems.append(f"{where}: {name} has no option {opt}")
    return problems


# --- the tests -------------------------------------------------------------------

@pytest.mark.parametrize("doc", DOCS)
def test_links(doc):
    assert link_problems(os.path.join(ROOT, doc)) == []


@pytest.mark.parametrize("doc", DOCS)
def test_commands(build, doc):
    assert command_problems(os.path.join(ROOT, doc)) == []


def test_no_heading_twice():
    """The README and the guides are one set of pages: a heading in two
    of them would be two places to say one thing."""
    seen, twice = {}, []
    for doc in [FRONT] + GUIDES:
        with open(os.path.join(ROOT, doc)) as f:
            for h in headings(f.read()):
                if slug(h) in seen:
                    twice.append(f"{h!r} in {seen[slug(h)]} and {doc}")
                seen.setdefault(slug(h), doc)
    assert twice == []


def test_guides_are_linked_and_shipped():
    """Every guide is reached from the README, and the package ships doc/."""
    with open(os.path.join(ROOT, FRONT)) as f:
        front = f.read()
    assert [g for g in GUIDES if f"]({g})" not in front] == []
    with open(os.path.join(ROOT, "debian", "probekit.docs")) as f:
        assert "doc" in f.read().split()


def test_slug_follows_github():
    assert slug("Is the time in the network, the bdev or the queue?") == \
        "is-the-time-in-the-network-the-bdev-or-the-queue"
    assert slug("The wrapper: probekit-bpftrace") == "the-wrapper-probekit-bpftrace"
    assert slug("Gated probes: `--gate`") == "gated-probes---gate"
    assert slug("`probekit-exporter`: metrics for Prometheus") == \
        "probekit-exporter-metrics-for-prometheus"


def test_checker_finds_what_is_broken(build, tmp_path):
    """The checks above can fail: a page with a missing file, a missing
    anchor, an unknown command and an unknown option gets one line each,
    and its good link, command and option none."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A real heading\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        "[good](other.md#a-real-heading) [gone](missing.md) "
        "[bad anchor](other.md#no-such-heading) [self](#page)\n\n"
        "```sh\n"
        "probekit-iolatency -p PID -BO 1 5\n"
        "probekit-iolatency -p PID --no-such-option\n"
        "probekit-nosuchtool -p PID\n"
        "frobnicate --now\n"
        "```\n")
    links = link_problems(str(page))
    assert len(links) == 2, links
    assert "missing.md: no such file" in links[0]
    assert "no heading with anchor #no-such-heading" in links[1]
    cmds = command_problems(str(page))
    assert [c.split(": ", 2)[-1] for c in cmds] == [
        "probekit-iolatency has no option --no-such-option",
        "no command probekit-nosuchtool in build/bin",
        "frobnicate is no command probekit builds and no known system command",
    ], cmds


# --- the layout -------------------------------------------------------------------

def top_folders():
    """The repository's top-level folders: the first component of every
    path git tracks that has more than one."""
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True,
                         text=True, check=True).stdout
    return {p.split("/", 1)[0] for p in out.splitlines() if "/" in p}


def layout_rows(text):
    """The first cell's first path of each row of README's "Layout" table,
    backticks off ("probes/blktgt.d")."""
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `([^`]+)`", section, re.M)]


def unnamed_folders(folders, readme, architecture):
    """[(doc, folder)]: each folder README's layout table or
    ARCHITECTURE.md does not name as FOLDER/."""
    rows = layout_rows(readme)
    missing = [("README.md", d) for d in sorted(folders)
               if not any(r == d + "/" or r.startswith(d + "/") for r in rows)]
    return missing + [("ARCHITECTURE.md", d) for d in sorted(folders)
                      if not re.search(r"(?<![\w./-])%s/" % re.escape(d), architecture)]


def test_layout_names_every_folder():
    """README's layout table and ARCHITECTURE.md name every top-level
    folder of the repository, so a new one cannot go unexplained."""
    folders = top_folders()
    assert {"probes", "target", "tests", "specs", "mk"} <= folders
    with open(os.path.join(ROOT, FRONT)) as f:
        readme = f.read()
    with open(os.path.join(ROOT, "ARCHITECTURE.md")) as f:
        architecture = f.read()
    assert unnamed_folders(folders, readme, architecture) == []
    # The check can fail: a folder neither names, and one each leaves out.
    assert unnamed_folders(folders | {"zz"}, readme, architecture) == \
        [("README.md", "zz"), ("ARCHITECTURE.md", "zz")]
    no_mk = "\n".join(l for l in readme.splitlines() if not l.startswith("| `mk/"))
    assert unnamed_folders(folders, no_mk, architecture) == [("README.md", "mk")]
    assert unnamed_folders(folders, readme, architecture.replace("mk/", "")) == \
        [("ARCHITECTURE.md", "mk")]
