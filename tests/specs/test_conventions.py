# SPDX-License-Identifier: BSD-2-Clause
"""The command-line conventions every probekit command keeps
(ARCHITECTURE.md, "Conventions"), checked on every command in
$(O)/bin: -h and --help print the usage, naming the command, and
examples, and exit 0; --version prints "NAME (probekit) VERSION"; an
unknown option is one line on stderr naming the command, non-zero exit,
nothing on stdout; a short option means one thing across the toolkit;
-j is --json and -p is --pid wherever they exist."""

import collections
import os
import re
import subprocess

import pytest

import histtools
import probekit

BIN = os.path.join(probekit.BUILD, "bin")


def commands():
    return sorted(os.listdir(BIN)) if os.path.isdir(BIN) else []


def run(cmd, *args):
    return subprocess.run([os.path.join(BIN, cmd), *args], capture_output=True,
                          text=True, timeout=probekit.TIMEOUT,
                          stdin=subprocess.DEVNULL)


def version():
    with open(os.path.join(probekit.ROOT, "VERSION")) as f:
        return f.read().strip()


def test_commands_are_built():
    assert len(commands()) >= 20, f"{BIN} is not built; run 'make'"


@pytest.mark.parametrize("cmd", commands())
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_has_usage_and_examples_and_exits_0(cmd, flag):
    p = run(cmd, flag)
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    lines = p.stdout.splitlines()
    usage = [ln for ln in lines if re.match(r"(?i)usage: ", ln)]
    assert usage and usage[0].split()[1] == cmd, \
        f"{cmd} {flag}: no 'usage: {cmd} ...' line"
    assert "examples:" in lines, f"{cmd} {flag}: no 'examples:' section"
    after = lines[lines.index("examples:") + 1:]
    assert any(ln.strip().startswith(cmd + " ") for ln in after), \
        f"{cmd} {flag}: no example runs {cmd}"


@pytest.mark.parametrize("cmd", commands())
def test_version(cmd):
    p = run(cmd, "--version")
    assert (p.returncode, p.stdout, p.stderr) == (
        0, f"{cmd} (probekit) {version()}\n", "")


@pytest.mark.parametrize("cmd", commands())
def test_unknown_option_is_one_line(cmd):
    p = run(cmd, "--no-such-option")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(cmd + ": "), \
        p.stderr
    assert "no-such-option" in p.stderr


# "-X, --long" or "-X ARG, --long ARG" at the start of a help line.
SHORT = re.compile(r"^\s+-([A-Za-z])(?: [A-Z_a-z.{},|]+)?, --([a-z][a-z-]*)",
                   re.M)


# "-X" or "-X ARG" with no long form (none today; one added later still
# counts): its meaning is taken to be its ARG ("<ARG>"), "<>" for a flag.
SHORT_ONLY = re.compile(r"^\s+-([A-Za-z])(?: ([A-Z][A-Z_:]*))?(?=\s)(?!,)"
                        r"(?!.*, --)", re.M)


def short_options():
    """{letter: {meaning: [commands]}} over every command's --help: the
    long name of "-X, --long", else "<ARG>" of a short-only "-X ARG"."""
    seen = collections.defaultdict(lambda: collections.defaultdict(list))
    for cmd in commands():
        text = run(cmd, "--help").stdout
        for letter, long in SHORT.findall(text):
            seen[letter][long].append(cmd)
        for letter, arg in SHORT_ONLY.findall(text):
            seen[letter][f"<{arg}>"].append(cmd)
    return seen


def test_one_meaning_per_short_option():
    """No exception: blktgt's server options too (-R, -l, -i; the -t, -L
    and -H they once were are refused, test_target_lifecycle)."""
    seen = short_options()
    assert {"p", "j", "h", "s", "c", "U", "e", "R", "l", "i", "t"} <= set(seen)
    clash = {f"-{k}": dict(v) for k, v in seen.items() if len(v) > 1}
    assert clash == {}
    assert set(seen["p"]) == {"pid"} and set(seen["j"]) == {"json"}
    # The RPC socket, in the target and its client alike.
    assert seen["s"] == {"rpc-socket": ["blktgt", "blktgt-rpc"]}
    assert seen["l"] == {"listen": ["blktgt", "probekit-exporter"]}


def test_list_json_holds_what_the_text_shows(blktgt_bin):
    """probekit-list -j: every probe of blktgt, as the text lists them,
    with the catalog's argument names (one probe per catalog entry)."""
    import json
    cat = os.path.join(probekit.ROOT, "probes", "blktgt.d")
    text = run("probekit-list", "--catalog", cat, blktgt_bin)
    js = run("probekit-list", "--catalog", cat, "-j", "-b", blktgt_bin)
    assert text.returncode == js.returncode == 0, text.stderr + js.stderr
    heads = re.findall(r"(?m)^  (\w+:\w+)  (\d+) sites?  semaphore: yes$",
                       text.stdout)
    (f,) = json.loads(js.stdout)["files"]
    assert f["file"] == blktgt_bin
    assert [(p["probe"], str(p["sites"])) for p in f["probes"]] == heads
    with open(cat) as fh:
        declared = re.findall(r"(?m)^\s*probe (\w+)\(([^)]*)\)", fh.read())
    assert len(heads) == len(declared) == 27
    args = {f"blktgt:{n}": [a.split()[-1].lstrip("*") for a in sig.split(",")
                            if a.strip()] for n, sig in declared}
    for p in f["probes"]:
        assert p["semaphore"] is True
        assert [a["name"] for a in p["args"]] == args[p["probe"]]
        assert [a["bpftrace"] for a in p["args"]] == \
            [f"arg{i}" for i in range(len(p["args"]))]


# --- zero hits: the header and an empty result --------------------------
#
# Each tool of both forms on an idle blktgt (no bdev, no NBD client, no
# RPC after its start): what it prints under its readiness line, the
# histogram tools' first header and "0 COUNTS" (specs/TOOL.toml's counts),
# usdtcount its table's header and "0 hits".

HEAD_LOG2 = "     %-19s : count     distribution"
HEAD_LINEAR = "     %-13s : count     distribution"

ZERO = [  # (tool, its arguments, the text after the banner)
    ("iolatency", (), [HEAD_LOG2 % "usecs", "0 I/Os"]),
    ("iolatency", ("-L", "-BO"), [HEAD_LINEAR % "usecs", "0 I/Os"]),
    ("iosize", (), [HEAD_LOG2 % "bytes", "0 I/Os"]),
    ("qdepth", (), [HEAD_LINEAR % "depth", "0 I/Os"]),
    ("rpclat", ("-m",), [HEAD_LOG2 % "msecs", "0 RPCs"]),
    ("nbdtime", (), [HEAD_LOG2 % "usecs", "0 NBD requests"]),
    ("funclat", (), [HEAD_LOG2 % "arg4",
                     "0 calls: bdev_execute() was not called"]),
    ("usdtlat", ("-n", "blktgt:io__submit", "blktgt:io__done"),
     [HEAD_LOG2 % "nsecs", "0 pairs"]),
    ("usdtcount", ("blktgt:io__*",), ["%-40s %12s" % ("PROBE", "COUNT"),
                                      "0 hits"]),
]
# The tools that report lost STARTs here (iolatency does with --per-io).
PAIR_TOOLS = {"qdepth", "rpclat", "nbdtime", "funclat", "usdtlat"}
# The tools that report the values their full map of keys dropped
# (--max-keys), and what they call a value.
KEY_TOOLS = {"iolatency": "I/Os", "iosize": "I/Os", "qdepth": "I/Os",
             "nbdtime": "values", "rpclat": "RPCs"}
# The tools that read io__batch, which also report what they could not
# read of batches: records (busy buffer, unreadable), hits (bad count).
BATCH_TOOLS = {"iolatency", "iosize"}


def zero_id(case):
    return case[0] + "".join(case[1][:2])


@pytest.mark.needs("py:bcc")
@pytest.mark.parametrize("kind", histtools.KINDS)
@pytest.mark.parametrize("case", ZERO, ids=zero_id)
def test_zero_hits_print_header_and_empty_result(bpf, target, kind, case):
    """-d 1 on an idle blktgt: the banner, then exactly the header and
    the empty result, the same bytes from both forms; -j: one object
    whose result is an empty list."""
    tool, args, want = case
    lines = histtools.Tool(kind, tool, target.pid, "-d", "1",
                           *args).start().wait()
    assert lines[0].endswith("Hit Ctrl-C to end.")
    assert lines[1:] == want
    (obj,) = histtools.json_objects(histtools.Tool(
        kind, tool, target.pid, "-d", "1", "-j", *args).start().wait())
    empty = {"tool": tool, "pid": target.pid}
    empty["counts" if tool == "usdtcount" else "histograms"] = []
    if tool in PAIR_TOOLS:
        empty["starts"] = {"dropped": 0, "reclaimed": 0}
    if tool in KEY_TOOLS:
        empty[KEY_TOOLS[tool]] = {"dropped": 0}
    if tool in BATCH_TOOLS:
        empty[KEY_TOOLS[tool]].update(busy=0, unreadable=0)
        empty["batches"] = {"bad_count": 0}
    assert obj == empty


@pytest.mark.needs("py:bcc")
@pytest.mark.parametrize("kind", histtools.KINDS)
def test_zero_hits_at_each_interval(bpf, target, kind):
    """Every interval that saw nothing says so, -T's time first."""
    lines = histtools.Tool(kind, "rpclat", target.pid, "-T", "1",
                           "3").start().wait()
    body = [HEAD_LOG2 % "usecs", "0 RPCs"]
    assert len(lines) == 1 + 3 * 3 + 2
    for i in range(3):
        got = lines[1 + 4 * i:4 + 4 * i]
        assert histtools.TIMESTAMP.match(got[0]) and got[1:] == body, lines
        assert i == 2 or lines[4 + 4 * i] == ""


# A synopsis line in --help: "  NAME [-x ...]" (or "usage: NAME [-x").
SYNOPSIS = re.compile(r"(?m)^\s*(?:usage: )?([a-z][\w.-]*) \[-")


@pytest.mark.parametrize("cmd", commands())
def test_help_names_only_its_command(cmd):
    """Every synopsis --help shows names the command as it is installed,
    not the file it was once (probekit-check's said "probecheck")."""
    names = set(SYNOPSIS.findall(run(cmd, "--help").stdout))
    assert names <= {cmd}


# --- one voice: one wording for each common mistake ----------------------------
#
# Declared once, in probes/probelib/toolspec.py (NEAREST, NO_PROBES, TARGET_*),
# which the libbpf tools get through specs/gentool's SPEC_* and probelib's
# commands through probelib.words; the wrapper says the same words.

NO_TARGET = {  # command: its line without -p/-b (or a PATH)
    "probekit-usdtcount": "no target: give -p PID or -b PATH",
    "probekit-usdtcount-bcc": "no target: give -p PID or -b PATH",
    "probekit-usdtlat": "no target: give -p PID or -b PATH",
    "probekit-exporter": "no target: give -p PID or -b PATH",
    "probekit-list": "no target: give -p PID or -b PATH",
    "probekit-iolatency": "no target: give -p PID",
    "probekit-iolatency-bcc": "no target: give -p PID",
}


@pytest.mark.parametrize("cmd", sorted(NO_TARGET))
def test_missing_target_is_worded_once(cmd):
    """Without -p or -b, every command says it in the same words, then
    -p and -b together."""
    args = {"probekit-usdtlat": ["p:a", "p:b"]}.get(
        cmd, ["blktgt:*"] if "usdt" in cmd else [])
    r = run(cmd, *args)
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", f"{cmd}: {NO_TARGET[cmd]} (see --help)\n")
    if NO_TARGET[cmd].endswith("-b PATH"):
        r = run(cmd, "-p", "1", "-b", "/bin/true", *args)
        assert (r.returncode, r.stderr) == (
            2, f"{cmd}: -p/--pid and -b/--binary exclude each other "
            "(see --help)\n")


def test_misspelt_probe_is_worded_once(blktgt_bin, tmp_path):
    """A misspelt probe, io__submt: each command names the nearest,
    io__submit, with the same words, "; nearest: NAME"."""
    blktgt_bin = os.path.realpath(blktgt_bin)    # as the tools show it
    bt = tmp_path / "m.bt"
    bt.write_text("usdt:__EXE__:blktgt:io__submt { @n = count(); }\n")
    where = f"in {blktgt_bin}; nearest: "
    want = {
        ("probekit-usdtcount", "-b", blktgt_bin, "blktgt:io__submt"):
            f"no USDT probe matches blktgt:io__submt {where}"
            "blktgt:io__submit",
        ("probekit-usdtcount-bcc", "-b", blktgt_bin, "blktgt:io__submt"):
            f"no USDT probe matches blktgt:io__submt {where}"
            "blktgt:io__submit",
        ("probekit-usdtlat-bcc", "-b", blktgt_bin, "blktgt:io__submt",
         "blktgt:io__done"):
            f"no USDT probe blktgt:io__submt {where}blktgt:io__submit",
        ("probekit-list", blktgt_bin, "blktgt:io__submt"):
            f"no USDT probe matches blktgt:io__submt {where}"
            "blktgt:io__submit",
        ("probekit-check", "--binary", blktgt_bin, str(bt)):
            f"{bt}:1: blktgt:io__submt: no such probe "
            f"'usdt:__EXE__:blktgt:io__submt' {where}io__submit",
        ("probekit-bpftrace", "--dry-run", blktgt_bin, str(bt)):
            f"no USDT probe blktgt:io__submt {where}blktgt:io__submit",
    }
    for (cmd, *args), line in want.items():
        r = run(cmd, *args)
        # (probekit-check prints its coverage on stdout)
        assert r.returncode == 1, (cmd, r)
        prefix = "" if cmd == "probekit-check" else f"{cmd}: "
        assert r.stderr.splitlines()[0] == prefix + line, (cmd, r.stderr)


BAD_PID = {  # command: its line for -p 1x, after the option as it names it
    "probekit-usdtcount": "-p/--pid: invalid PID '1x' (see --help)",
    "probekit-usdtcount-bcc": "argument -p/--pid: invalid PID '1x' (see --help)",
    "probekit-exporter": "-p/--pid: invalid PID '1x' (see --help)",
    "probekit-list": "argument -p/--pid: invalid PID '1x' (see --help)",
    "probekit-check": "argument --pid: invalid PID '1x' (see --help)",
    "probekit-bpftrace": "-p: invalid PID '1x'; for a file give -b PATH",
}


@pytest.mark.parametrize("cmd", sorted(BAD_PID))
def test_bad_pid_is_worded_once(cmd):
    """-p 1x: every command says "invalid PID '1x'" (specs/limits.toml's
    PID_INVALID), after the option as its parser names it."""
    opt = "--pid" if cmd == "probekit-check" else "-p"
    args = {"probekit-usdtcount": ["blktgt:*"], "probekit-usdtcount-bcc": ["blktgt:*"],
            "probekit-bpftrace": ["x.bt"]}.get(cmd, [])
    r = run(cmd, opt, "1x", *args)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"{cmd}: {BAD_PID[cmd]}\n")
