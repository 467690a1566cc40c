# SPDX-License-Identifier: BSD-2-Clause
"""The tool specs (specs/*.toml): each tool's options, help and examples,
and the limits both languages share, declared once.  A scratch option
added to a copy of a spec reaches the libbpf tool's parser and --help,
the BCC tool's, and the man page; so does a scratch retired short
option, which both forms refuse with the same line; each shared limit is
spelled with its value only in specs/limits.toml; the man pages'
generated regions are current."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import histtools
import probekit

from spec_files import GENTOOL, ROOT, SCRATCH, SPECS, SPEC_TOOLS

sys.path.insert(0, os.path.join(ROOT, "probes"))
from probelib import toolspec  # noqa: E402


# Names the limits went by before they had one home; none may come back
# with a value of its own.
OLD_NAMES = {"NAME_LEN": ["BDEV_LEN"], "TYPE_LEN": ["IOTYPE_LEN"],
             "MAX_INFLIGHT": ["PAIR_INFLIGHT_DEFAULT"],
             "USDT_GATES_MAX": ["GATES_MAX"]}


def tracked_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True,
                         text=True, check=True).stdout.split()
    return [f for f in out if os.path.isfile(os.path.join(root, f))]


def limit_definitions(root):
    """{(file, line): text} of every line outside specs/limits.toml that
    gives a shared limit (or a name it went by) a literal value: a C
    #define, a Python assignment, a -DNAME=N flag."""
    limits = toolspec.limits()
    names = [n for name in limits for n in [name] + OLD_NAMES.get(name, [])]
    pat = re.compile(r"(#\s*define\s+(%s)\s+\(?\d)|(^[ \t]*(%s)[ \t]*=[ \t]*\d)|"
                     r"(-D(%s)=\d)" % (("|".join(names),) * 3), re.M)
    found = {}
    for f in tracked_files(root):
        if f == "specs/limits.toml" or f.startswith(("tests/", "debian/")):
            continue
        try:
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                text = fh.read()
        except (UnicodeDecodeError, OSError):
            continue
        for m in pat.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found[(f, line)] = text.splitlines()[line - 1].strip()
    return found


def libbpf_helpers():
    """The helper objects every libbpf tool links: mk/libbpf.mk's
    LIBBPF_HELPERS, its $(TOOL_ROOMS) expanded (the one list)."""
    mk = open(os.path.join(ROOT, "mk", "libbpf.mk")).read()
    var = dict(re.findall(r"(?m)^(TOOL_ROOMS|LIBBPF_HELPERS) := (.*)$", mk))
    return var["LIBBPF_HELPERS"].replace("$(TOOL_ROOMS)",
                                         var["TOOL_ROOMS"]).split()


def remade_man(spec_dir, tool, tmp_path):
    """A copy of tool's man page with its options region remade from the
    specs in spec_dir: (its path, its text)."""
    page = tmp_path / f"probekit-{tool}.8"
    shutil.copy(os.path.join(ROOT, "man", f"probekit-{tool}.8"), page)
    subprocess.run([GENTOOL, "--spec-dir", spec_dir, "man", tool, str(page)],
                   check=True)
    return page, page.read_text()


def test_each_shared_limit_has_its_value_only_in_its_spec():
    """Before the specs, MAX_INFLIGHT, NAME_LEN and TYPE_LEN were written
    in libbpf/blktgt_io.h and bcc/probekit_bcc_load.py, IO_BATCH_MAX and
    BDEV_NAME_LEN in include/io_batch.h and bcc/probekit_bcc_probes.py,
    MAX_RATE_LIMIT in libbpf/tool_options.h and bcc/probekit_bcc_args.py
    and wrapper/bpftrace.sh; this test names those 14 lines on the starting
    commit)."""
    limits = toolspec.limits()
    assert set(limits) >= {"NAME_LEN", "TYPE_LEN", "MAX_INFLIGHT",
                           "MAX_RATE_LIMIT", "IO_BATCH_MAX", "BDEV_NAME_LEN",
                           "PAIR_INFLIGHT_LIMIT", "PAIR_TGIDS_MAX"}
    assert limit_definitions(ROOT) == {}


def test_the_limits_reach_both_languages():
    """The generated header and the bcc/ modules hold the same values."""
    hdr = open(os.path.join(probekit.BUILD, "gen", "probekit_limits.h")).read()
    c = {m[0]: int(m[1]) for m in re.findall(r"#define (\w+) (\d+)", hdr)}
    assert c == toolspec.limits()
    py = subprocess.run(
        [probekit.PYTHON, "-c",
         "import probekit_bcc_load as l, probekit_bcc_probes as p, "
         "probekit_bcc_args as a; print(l.MAX_INFLIGHT, l.NAME_LEN, "
         "l.TYPE_LEN, p.IO_BATCH_MAX, p.BDEV_NAME_LEN, a.MAX_RATE_LIMIT)"],
        cwd=os.path.join(ROOT, "bcc"), capture_output=True, text=True)
    assert py.returncode == 0, py.stderr
    assert py.stdout.split() == [str(c[n]) for n in (
        "MAX_INFLIGHT", "NAME_LEN", "TYPE_LEN", "IO_BATCH_MAX",
        "BDEV_NAME_LEN", "MAX_RATE_LIMIT")]


@pytest.mark.parametrize("tool", SPEC_TOOLS)
def test_man_page_regions_are_generated_from_the_spec(tool):
    page = os.path.join(ROOT, "man", f"probekit-{tool}.8")
    p = subprocess.run([GENTOOL, "man", tool, page, "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def help_of(cmd):
    p = subprocess.run(cmd + ["--help"], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    return p.stdout


def not_in_help(text, spec, form):
    """What the spec (and specs/common.toml) declare for this form that
    its --help text lacks: each option's flags with its argument and its
    help (argp and argparse lay them out apart: "-d, --duration SECS",
    "-d SECS, --duration SECS"), each example's arguments and comment."""
    flat = " ".join(text.replace("\\\n", " ").split())
    gone = []
    for o in toolspec.common_options(spec, form) + spec["option"]:
        long = "--" + o["long"] + (" " + o["arg"] if o.get("arg") else "")
        flags = (rf"(?m)^ +-{o['short']}\b[^\n]*{re.escape(long)}(\s|$)"
                 if o.get("short") else rf"(?m)^ +{re.escape(long)}(\s|$)")
        if not re.search(flags, text):
            gone.append(long)
        h = (o["help_binary"] if spec.get("binary") and "help_binary" in o
             else toolspec.help_text(o))
        if " ".join(h.split()) not in flat:
            gone.append(h)
    for e in spec["example"]:
        for part in (e["args"], "# " + e["what"]):
            if " ".join(part.split()) not in flat:
                gone.append(part)
    return gone


@pytest.mark.parametrize("tool", SPEC_TOOLS)
def test_twins_print_the_same_usage_and_examples(tool):
    """Each form's --help has every option its spec and specs/common.toml
    declare for it (flags, argument, help: argp and argparse render them,
    each its own way) and every example of the spec; and apart from the
    command's name, -v (libbpf only) and the engine named in the
    description, both forms' usage and examples are the same."""
    c = help_of([os.path.join(probekit.BUILD, "bin", f"probekit-{tool}")])
    b = help_of([os.path.join(probekit.BUILD, "bin", f"probekit-{tool}-bcc")])
    spec = toolspec.load(tool)
    assert not_in_help(c, spec, "libbpf") == [], c
    assert not_in_help(b, spec, "bcc") == [], b

    def norm(text, cmd):
        usage = text[:text.index("\n\n")].replace(cmd, "CMD")
        usage = re.sub(r"\s+", " ", usage).replace(" [-v]", "")
        examples = text[text.index("\nexamples:\n"):]
        return usage, re.sub(r"(?m)^    %s" % re.escape(cmd), "    CMD",
                             examples).replace(" " * 4, " ")

    cu, ce = norm(c, f"probekit-{tool}")
    bu, be = norm(b, f"probekit-{tool}-bcc")
    assert cu == bu
    assert re.sub(" +", " ", ce) == re.sub(" +", " ", be)


def scratch_tools(tmp_path, tool, addition):
    """A copy of specs/ (with bcc/, probes/probelib and VERSION beside
    it) whose specs/TOOL.toml ends with addition (or, a function, is
    addition(its text)); the libbpf tool built from it and the BCC tool's
    argv run from it: (spec_dir, exe, bcc)."""
    tree = tmp_path / "tree"
    shutil.copytree(SPECS, tree / "specs")
    shutil.copytree(os.path.join(ROOT, "bcc"), tree / "bcc", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(ROOT, "VERSION"), tree / "VERSION")
    shutil.copytree(os.path.join(ROOT, "probes", "probelib"),
                    tree / "probes" / "probelib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    path = tree / "specs" / f"{tool}.toml"
    path.write_text(addition(path.read_text()) if callable(addition)
                    else path.read_text() + addition)
    spec_dir = str(tree / "specs")

    # libbpf: the spec header from the copy, then TOOL.c built on it.
    gen = tmp_path / "gen"
    gen.mkdir()
    subprocess.run([GENTOOL, "--spec-dir", spec_dir, "header", tool, "-o",
                    str(gen / f"{tool}.spec.h")], check=True)
    obj = os.path.join(probekit.BUILD, "obj", "libbpf")
    exe = str(tmp_path / f"probekit-{tool}")
    cc = subprocess.run(
        ["cc", "-std=gnu11", "-D_GNU_SOURCE", f"-I{gen}",
         "-I" + os.path.join(probekit.BUILD, "gen", "libbpf"),
         "-I" + os.path.join(probekit.BUILD, "gen"),
         "-I" + os.path.join(ROOT, "libbpf"), "-o", exe,
         os.path.join(ROOT, "libbpf", f"{tool}.c")] +
        [os.path.join(obj, f"{h}.o") for h in libbpf_helpers()] +
        ["-lbpf", "-lelf", "-lz"], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    # BCC: the same spec, from the same copy, at run time.
    return spec_dir, exe, [probekit.PYTHON, str(tree / "bcc" / tool)]


def test_scratch_option_reaches_both_parsers_help_and_man(tmp_path):
    """A copy of specs/ with one option more in iosize.toml: the libbpf
    tool built from it and the BCC tool run from a tree holding it both
    take the option and show it in --help, and the man page made from it
    lists it."""
    spec_dir, exe, bcc = scratch_tools(tmp_path, "iosize", SCRATCH)
    text = help_of([exe])
    assert re.search(r"(?m)^ +--scratch-opt N +a scratch option "
                     r"\(tests/specs/test_toolspec.py\)$", text), text
    assert "[--scratch-opt N]" in text
    p = subprocess.run([exe, "-p", "999999999", "--scratch-opt"],
                       capture_output=True, text=True)
    assert (p.returncode, p.stderr) == (
        2, "probekit-iosize: option '--scratch-opt' needs an argument "
        "(see --help)\n")

    # BCC: the same option, from the same copy, at run time.
    text = help_of(bcc)
    assert re.search(r"(?m)^  --scratch-opt N +a scratch option "
                     r"\(tests/specs/test_toolspec.py\)$", text), text
    assert "[--scratch-opt N]" in text
    p = subprocess.run(bcc + ["-p", "1", "--scratch-opt", "0"],
                       capture_output=True, text=True)
    assert (p.returncode, p.stderr) == (
        2, "probekit-iosize-bcc: argument --scratch-opt: must be positive: "
        "'0' (see --help)\n")

    # The man page: its options region, remade from the copy.
    page, roff = remade_man(spec_dir, "iosize", tmp_path)
    assert ".TP\n.BI \\-\\-scratch\\-opt \" N\"\nA scratch option " \
        "(tests/specs/test_toolspec.py).\n" in roff
    p = subprocess.run([GENTOOL, "man", "iosize", str(page), "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "out of date" in p.stderr


def changed_rules(text):
    """iolatency.toml with -W's default 10 made 7, its "requires" -L made
    --per-io, and --per-io made to conflict with -L."""
    old_w = 'default = 10\nrequires = "linear"\n'
    old_p = 'long = "per-io"\n'
    assert text.count(old_w) == 1 and text.count(old_p) == 1
    return text.replace(old_w, 'default = 7\nrequires = "per-io"\n').replace(
        old_p, old_p + 'conflicts = "linear"\n')


def test_changed_default_and_rules_reach_both_forms_help_and_man(tmp_path):
    """A copy of specs/ whose iolatency.toml gives -W another default and
    another rule, and --per-io a conflict: the generated C, the Python
    reading, both forms' --help and usage errors, and the man page all
    follow, with no other copy to change."""
    spec_dir, exe, bcc = scratch_tools(tmp_path, "iolatency", changed_rules)
    header = (tmp_path / "gen" / "iolatency.spec.h").read_text()
    assert "#define SPEC_DEFAULT_WIDTH 7\n" in header
    assert "{ 'W', OPT_PER_IO, false,\n\t  \"-W/--width needs --per-io\" }" in header
    assert "{ OPT_PER_IO, 'L', true,\n\t  \"--per-io cannot go with -L/--linear\" }" \
        in header

    spec = toolspec.load("iolatency", spec_dir)
    assert toolspec.option_named(spec, "width")["default"] == 7
    assert [line for _, _, _, line in toolspec.rules(spec)] == [
        "-W/--width needs --per-io", "--per-io cannot go with -L/--linear"]
    # The BCC form's parser, from the copy: the default once no -W is
    # given, the value given otherwise.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "import probekit_bcc_spec as s; p = s.parser('iolatency'); "
            "print(p.parse_args(['-p', '1']).width, "
            "p.parse_args(['-p', '1', '--per-io', '-W', '3']).width)")
    p = subprocess.run([probekit.PYTHON, "-c", code,
                        str(tmp_path / "tree" / "bcc")],
                       capture_output=True, text=True)
    assert (p.returncode, p.stdout, p.stderr) == (0, "7 3\n", "")

    for argv, name in (([exe], "probekit-iolatency"),
                       (bcc, "probekit-iolatency-bcc")):
        text = re.sub(r"\s+", " ", help_of(argv))
        assert "-W WIDTH, --width WIDTH with --per-io: units per bucket " \
            "(default 7)" in text.replace("-W, --width", "-W WIDTH, --width"), text
        assert "two hits per I/O, not io__batch (one hit per up to 256 " \
            "I/Os) (not with -L)" in text, text
        for args, line in ((["-W", "3"], "-W/--width needs --per-io"),
                           (["-L", "-W", "3"], "-W/--width needs --per-io"),
                           (["-L", "--per-io"],
                            "--per-io cannot go with -L/--linear")):
            p = subprocess.run(argv + ["-p", "999999999"] + args,
                               capture_output=True, text=True)
            assert (p.returncode, p.stderr) == (
                2, f"{name}: {line} (see --help)\n"), args

    _, roff = remade_man(spec_dir, "iolatency", tmp_path)
    assert "With\n.BR \\-\\-per\\-io :\nthe width of a bucket, in the " \
        "unit (default 7).\n" in roff
    assert "takes one per up to 256 I/Os.\nNot with\n.BR \\-L .\n" in roff


@pytest.mark.parametrize("rule,other", [("requires", "nope"),
                                        ("conflicts", "width")])
def test_a_rule_must_name_another_option(tmp_path, rule, other):
    """A rule that names no other option of the tool is one line, exit 1."""
    spec_dir = tmp_path / "specs"
    shutil.copytree(SPECS, spec_dir)
    path = spec_dir / "iolatency.toml"
    path.write_text(path.read_text().replace(
        'requires = "linear"', f'{rule} = "{other}"'))
    p = subprocess.run([GENTOOL, "--spec-dir", str(spec_dir), "header",
                        "iolatency"], capture_output=True, text=True)
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == f"gentool: {path}: option width: {rule} '{other}' is " \
        "not the long name of another of the tool's own options\n"


# Every short option a tool's spec retires ([[retired]]), with the line
# both forms must print for it, written out: a letter retired in a spec
# must be added here, and its wording is held to this.
RETIRED_LINES = {
    ("funclat", "f"): "-f is not --function any more: -f is --format "
                      "across probekit's commands; write --function",
}


def test_retired_lines_are_the_specs():
    assert {(t, r["short"]): toolspec.retired_line(r)
            for t in SPEC_TOOLS
            for r in toolspec.load(t)["retired"]} == RETIRED_LINES


@pytest.mark.parametrize("kind", histtools.KINDS)
@pytest.mark.parametrize("tool,letter", sorted(RETIRED_LINES))
@pytest.mark.parametrize("args", [
    ("-p", "1", "-{}", "bdev_submit"),     # as a script wrote it
    ("-{}", "bdev_submit"),                # named before the missing -p
    ("-p", "1", "-j{}bdev_submit"),        # bundled after a flag
])
def test_retired_short_option_names_its_new_spelling(kind, tool, letter,
                                                     args):
    """funclat's -f FUNC, now --function: both forms refuse it with one
    line that says what to write, exit 2, before touching the target."""
    name = histtools.program(kind, tool)[-1].rsplit("/", 1)[1]
    p = subprocess.run(histtools.program(kind, tool) +
                       [a.format(letter) for a in args],
                       capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert (p.returncode, p.stdout, p.stderr) == (
        2, "", f"{name}: {RETIRED_LINES[(tool, letter)]}\n")


SCRATCH_RETIRED = """
[[retired]]
short = "Q"
now = "--per-io"
why = "a scratch (tests/specs/test_toolspec.py)"
"""


def test_scratch_retired_option_reaches_both_parsers_and_man(tmp_path):
    """A copy of specs/ whose iosize.toml retires -Q: the libbpf tool
    built from it and the BCC tool run from it both refuse -Q with the
    same line, exit 2, and the man page made from it says so under
    --per-io; the tools built from specs/ itself only call -Q unknown."""
    spec_dir, exe, bcc = scratch_tools(tmp_path, "iosize", SCRATCH_RETIRED)
    line = "-Q is not --per-io any more: a scratch (tests/specs/test_toolspec.py);" \
        " write --per-io\n"
    for argv, name in ((exe, "probekit-iosize"), (bcc, "probekit-iosize-bcc")):
        argv = argv if isinstance(argv, list) else [argv]
        p = subprocess.run(argv + ["-p", "1", "-Q"], capture_output=True,
                           text=True, timeout=probekit.TIMEOUT)
        assert (p.returncode, p.stdout, p.stderr) == (
            2, "", f"{name}: {line}")
    for kind in histtools.KINDS:
        cmd = histtools.program(kind, "iosize")
        p = subprocess.run(cmd + ["-p", "1", "-Q"], capture_output=True,
                           text=True, timeout=probekit.TIMEOUT)
        assert (p.returncode, p.stderr) == (
            2, "%s: unrecognized option '-Q' (see --help)\n"
            % cmd[-1].rsplit("/", 1)[1])

    page = tmp_path / "probekit-iosize.8"
    shutil.copy(os.path.join(ROOT, "man", "probekit-iosize.8"), page)
    subprocess.run([GENTOOL, "--spec-dir", spec_dir, "man", "iosize",
                    str(page)], check=True)
    assert ".B \\-\\-per\\-io\n" in page.read_text()
    assert "\nIt was \\-Q: a scratch (tests/specs/test_toolspec.py).\n" \
        in page.read_text()


@pytest.mark.parametrize("entry,why", [
    ('short = "a"\nnow = "--function"\nwhy = "x"', "-a is an option of the "
     "tool; it cannot be retired"),
    ('short = "j"\nnow = "--function"\nwhy = "x"', "-j is an option of the "
     "tool; it cannot be retired"),
    ('short = "q"\nnow = "--func"\nwhy = "x"', "now '--func' is not --LONG "
     "of an option the tool takes"),
    ('short = "q"\nnow = "--function"', "needs short, now and why, and "
     "only those"),
])
def test_a_retired_letter_must_be_free_and_name_an_option(tmp_path, entry,
                                                          why):
    """gentool refuses, in one line, a [[retired]] letter the tool still
    takes (its own -a, the common -j), or one whose "now" is no option."""
    shutil.copytree(SPECS, tmp_path / "specs")
    with open(tmp_path / "specs" / "funclat.toml", "a") as f:
        f.write("\n[[retired]]\n" + entry + "\n")
    p = subprocess.run([GENTOOL, "--spec-dir", str(tmp_path / "specs"),
                        "header", "funclat"], capture_output=True, text=True)
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == "gentool: %s: retired 2%s %s\n" % (
        tmp_path / "specs" / "funclat.toml",
        ":" if "needs" not in why else "", why)


@pytest.mark.parametrize("kind", histtools.KINDS)
def test_an_unknown_letter_bundled_after_a_flag_is_named(kind):
    """-jq: both forms name -q, as getopt does (argparse alone said
    "argument -j/--json: ignored explicit argument 'q'")."""
    cmd = histtools.program(kind, "funclat")
    p = subprocess.run(cmd + ["-p", "1", "-jq"], capture_output=True,
                       text=True, timeout=probekit.TIMEOUT)
    assert (p.returncode, p.stdout, p.stderr) == (
        2, "", "%s: unrecognized option '-q' (see --help)\n"
        % cmd[-1].rsplit("/", 1)[1])


def test_the_wrappers_retired_n_has_the_tools_wording():
    """The wrapper's -n (now --dry-run only) is refused in the words of
    toolspec.RETIRED, which the tools' lines are made from; a shell
    script cannot import it, so this holds the two together."""
    wrapper = os.path.join(probekit.BUILD, "bin", "probekit-bpftrace")
    p = subprocess.run([wrapper, "-n", "x"], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == "probekit-bpftrace: %s\n" % toolspec.RETIRED % (
        "n", "--dry-run", "across probekit's commands -n is nanoseconds",
        "--dry-run")
