# SPDX-License-Identifier: BSD-2-Clause
"""Bash completion, generated from the tool specs (specs/gentool
completion): sourced in bash, each command's completion function offers
exactly the options its --help lists, PIDs after -p, files after -b, and
nothing after an option's number; a scratch option added to a copy of a
spec is offered too; make install puts one file per command where
bash-completion looks for it."""

import os
import re
import shutil
import subprocess

import pytest

import histtools
import probekit
from installs import inst  # noqa: F401 (a fixture)
from spec_files import GENTOOL, SCRATCH, SPEC_TOOLS, SPECS

pytestmark = pytest.mark.needs("bash")

COMPLETIONS = os.path.join(probekit.BUILD, "share", "bash-completion",
                           "completions")
BIN = os.path.join(probekit.BUILD, "bin")
# The commands that have no tool spec (specs/gentool's COMMANDS).
OTHERS = subprocess.run([GENTOOL, "commands"], capture_output=True,
                        text=True, check=True).stdout.split()


def complete(script, words, cword=None):
    """What bash offers, sourcing script, for the command line words
    (the last one being completed unless cword says another)."""
    cword = len(words) - 1 if cword is None else cword
    cmd = words[0]
    fn = "_" + cmd.replace("-", "_")
    prog = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=%d; '
            'COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; %s; '
            'printf "%%s\\n" "${COMPREPLY[@]}"' % (cword, fn))
    # The commands as installed: on PATH, probekit-scan beside them.
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"])
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog, "bash",
                        script, *words], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT, env=env)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    return [w for w in p.stdout.split("\n") if w]


def help_options(kind, tool):
    """The options a command's --help lists: the -x and --long words of
    its option column (kind None: tool is a command of BIN)."""
    argv = histtools.program(kind, tool) if kind else \
        [os.path.join(BIN, tool)]
    p = subprocess.run(argv + ["--help"],
                       capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stderr
    opts = set()
    for line in p.stdout.splitlines():
        # "  -p, --pid PID   help" (libbpf), "  -p PID, --pid PID  help"
        # (argparse), "      --version  help": the option column.
        m = re.match(r"^ {2,6}(-.*?)(?:  |$)", line)
        if m:
            opts |= set(re.findall(r"(?:^|, )(--?[\w-]+)", m.group(1)))
    return opts


def command(kind, tool):
    return f"probekit-{tool}" + ("-bcc" if kind == "bcc" else "")


@pytest.mark.parametrize("kind", histtools.KINDS)
@pytest.mark.parametrize("tool", SPEC_TOOLS)
def test_offers_what_help_lists(kind, tool):
    """After '-', every option --help lists and no other."""
    cmd = command(kind, tool)
    offered = complete(os.path.join(COMPLETIONS, cmd), [cmd, "-"])
    assert len(offered) == len(set(offered))
    assert set(offered) == help_options(kind, tool)


def test_prefix_pids_files_and_numbers(tmp_path):
    """A prefix narrows the options; -p offers live PIDs (this one among
    them), -b the files that start with the word, -d (a number)
    nothing."""
    script = os.path.join(COMPLETIONS, "probekit-usdtcount")
    cmd = "probekit-usdtcount"
    # Every --max-* option --help lists (--max-rate, --max-strings, ...),
    # and nothing else.
    assert complete(script, [cmd, "--max"]) == sorted(
        o for o in help_options("libbpf", "usdtcount") if o.startswith("--max"))
    assert sorted(complete(script, [cmd, "--"]))[:3] == [
        "--binary", "--catalog", "--duration"]
    pids = complete(script, [cmd, "-p", ""])
    assert str(os.getpid()) in pids and all(p.isdigit() for p in pids)
    assert complete(script, [cmd, "--pid", str(os.getpid())]) \
        == [str(os.getpid())]
    (tmp_path / "svc-23").write_text("")
    (tmp_path / "svc-1009").write_text("")
    (tmp_path / "other").write_text("")
    assert sorted(complete(script, [cmd, "-b", str(tmp_path / "svc")])) == [
        str(tmp_path / "svc-1009"), str(tmp_path / "svc-23")]
    assert complete(script, [cmd, "-d", ""]) == []
    assert complete(script, [cmd, "-p", "1", "blktgt:io"]) == []


def test_scratch_option_is_offered(tmp_path):
    """A copy of specs/ with one option more in iosize.toml: the
    completion made from it offers --scratch-opt, and nothing after it
    (it takes a number)."""
    tree = tmp_path / "specs"
    shutil.copytree(SPECS, tree)
    with open(tree / "iosize.toml", "a") as f:
        f.write(SCRATCH)
    for form, cmd in (("libbpf", "probekit-iosize"),
                      ("bcc", "probekit-iosize-bcc")):
        out = tmp_path / cmd
        subprocess.run([GENTOOL, "--spec-dir", str(tree), "completion",
                        "iosize", "--form", form, "-o", str(out)],
                       check=True)
        before = complete(os.path.join(COMPLETIONS, cmd), [cmd, "-"])
        after = complete(str(out), [cmd, "-"])
        assert "--scratch-opt" not in before
        assert sorted(after) == sorted(before + ["--scratch-opt"])
        assert complete(str(out), [cmd, "--scratch-opt", ""]) == []


def test_installed_one_file_per_command(inst):  # noqa: F811
    """make install puts a completion per tool command under
    share/bash-completion/completions (bash-completion loads
    completions/COMMAND on first use), and the installed one works."""
    d = os.path.join(inst, "share", "bash-completion", "completions")
    want = sorted(command(k, t) for k in histtools.KINDS for t in SPEC_TOOLS)
    assert sorted(os.listdir(d)) == sorted(want + OTHERS) == \
        sorted(os.listdir(os.path.join(inst, "bin")))
    assert complete(os.path.join(d, "probekit-nbdtime-bcc"),
                    ["probekit-nbdtime-bcc", "--pi"]) == ["--pid"]


# --- the commands without a spec, and probe names ----------------------------

def test_every_command_has_one():
    """Every command of BIN has a completion file, and no other file is
    there."""
    assert sorted(os.listdir(COMPLETIONS)) == sorted(os.listdir(BIN))


@pytest.mark.parametrize("cmd", OTHERS)
def test_other_command_offers_what_help_lists(cmd):
    """After '-', every option the command's --help lists and no other,
    read from the command itself when first completed."""
    offered = complete(os.path.join(COMPLETIONS, cmd), [cmd, "-"])
    assert len(offered) == len(set(offered))
    assert set(offered) == help_options(None, cmd)


def test_other_commands_arguments(tmp_path):
    """What follows an option, by the name --help gives its argument:
    PIDs after --pid, files after --binary, the choices of -f."""
    (tmp_path / "svc-23").write_text("")
    (tmp_path / "svc-1009").write_text("")
    pids = complete(os.path.join(COMPLETIONS, "probekit-exporter"),
                    ["probekit-exporter", "-p", ""])
    assert str(os.getpid()) in pids and all(p.isdigit() for p in pids)
    for cmd, opt in (("probekit-check", "--binary"),
                     ("probekit-list", "-b"), ("probekit-bpftrace", "-b")):
        assert sorted(complete(os.path.join(COMPLETIONS, cmd),
                               [cmd, opt, str(tmp_path / "svc")])) == [
            str(tmp_path / "svc-1009"), str(tmp_path / "svc-23")], cmd
    assert complete(os.path.join(COMPLETIONS, "blktgt-trace"),
                    ["blktgt-trace", "-f", ""]) == ["text", "json", "chrome"]
    assert complete(os.path.join(COMPLETIONS, "blktgt"),
                    ["blktgt", "-R", ""]) == []


IO_PROBES = ["io__batch", "io__done", "io__submit"]


def test_probe_names_from_binary(blktgt_bin):
    """Probe operands and --gate complete from -b PATH's notes (as
    provider:name, the part before the word's last ':' taken off as
    bash breaks words at ':'); probekit-list's from its PATH operand."""
    for cmd in ("probekit-usdtcount", "probekit-usdtcount-bcc",
                "probekit-usdtlat", "probekit-usdtlat-bcc"):
        script = os.path.join(COMPLETIONS, cmd)
        assert sorted(complete(script, [cmd, "-b", blktgt_bin,
                                        "blktgt:io__"])) == IO_PROBES, cmd
        assert sorted(complete(script, [cmd, "--binary", blktgt_bin,
                                        "--gate", "blktgt:rpc__"])) == [
            "rpc__done", "rpc__request"], cmd
    script = os.path.join(COMPLETIONS, "probekit-list")
    assert sorted(complete(script, ["probekit-list", blktgt_bin,
                                    "blktgt:io__"])) == IO_PROBES


def test_probe_names_from_pid(target):
    """-p PID: the probes of the process's executable and the files it
    maps."""
    for cmd in ("probekit-usdtlat", "probekit-list"):
        got = complete(os.path.join(COMPLETIONS, cmd),
                       [cmd, "-p", str(target.pid), "blktgt:io__"])
        assert sorted(got) == IO_PROBES, cmd


@pytest.mark.parametrize("args", [
    ("-p", "0"), ("-p", "x"), ("-p", "99999999999"), ("-p", "$(reboot)"),
    ("-b", "/nonexistent"), ("-b", "/dev/zero"), ("-b", "/proc"),
    ("-b", "/etc/hostname"), ("-b", "'"),
])
def test_probe_names_bad_target(args):
    """A target that is no process or no ELF file: nothing offered, no
    error on the terminal (complete() checks stderr), and no wait."""
    for cmd in ("probekit-usdtcount", "probekit-list"):
        assert complete(os.path.join(COMPLETIONS, cmd),
                        [cmd, *args, "blktgt:"]) == [], (cmd, args)
