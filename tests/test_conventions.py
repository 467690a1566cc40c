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
    assert p.returncode != 0 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(cmd + ": "), \
        p.stderr
    assert "no-such-option" in p.stderr


# "-X, --long" or "-X ARG, --long ARG" at the start of a help line.
SHORT = re.compile(r"^\s+-([A-Za-z])(?: [A-Z_a-z.{},|]+)?, --([a-z][a-z-]*)",
                   re.M)


def short_options():
    """{letter: {long name: [commands]}} over every command's --help."""
    seen = collections.defaultdict(lambda: collections.defaultdict(list))
    for cmd in commands():
        for letter, long in SHORT.findall(run(cmd, "--help").stdout):
            seen[letter][long].append(cmd)
    return seen


def test_one_meaning_per_short_option():
    seen = short_options()
    assert {"p", "j", "h"} <= set(seen)
    clash = {f"-{k}": dict(v) for k, v in seen.items() if len(v) > 1}
    assert clash == {}
    assert set(seen["p"]) == {"pid"} and set(seen["j"]) == {"json"}


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
