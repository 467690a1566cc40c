# SPDX-License-Identifier: BSD-2-Clause
"""Paths and names from outside, as every probelib command and
probekit-scan take them.

  - A path that is not a regular file (a FIFO, a directory, a character
    device, a socket) is refused at once, in one line, with exit status 1:
    a FIFO with no writer used to block probekit-list, probekit-structs,
    probekit-check, probekit-gencatalog and probekit-scan until killed.
    Each run has a timeout that a hang would hit.
  - A control character in a path or name echoed in an error is escaped,
    so that the error stays one line."""

import os
import socket
import subprocess

import pytest

import probekit

BIN = os.path.join(probekit.BUILD, "bin")
LIST = os.path.join(BIN, "probekit-list")
STRUCTS = os.path.join(BIN, "probekit-structs")
CHECK = os.path.join(BIN, "probekit-check")
GENCAT = os.path.join(BIN, "probekit-gencatalog")
SCAN = os.path.join(probekit.BUILD, "libexec", "probekit", "probekit-scan")
CATALOG = os.path.join(probekit.ROOT, "probes", "blktgt.d")
# A refusal takes well under a second; a hang is killed here.
HANG = 20


def run(argv, stdin=""):
    return subprocess.run(argv, capture_output=True, text=True, input=stdin,
                          timeout=HANG)


@pytest.fixture(params=["fifo", "directory", "chardev", "socket"])
def odd(request, tmp_path):
    """(path, what it is) of a path that is not a regular file."""
    kind = request.param
    if kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
        yield str(path), "a FIFO"
    elif kind == "directory":
        yield str(tmp_path), "a directory"
    elif kind == "chardev":
        yield "/dev/zero", "a character device"
    else:
        path = tmp_path / "sock"
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))
            yield str(path), "a socket"


def commands(path, blktgt, script):
    """(argv, stdin, program, the one line after "PROGRAM: ") of each
    command that opens a path given to it."""
    return [
        ([LIST, path], "", "probekit-list", None),
        ([LIST, path, "p:*"], "", "probekit-list", None),
        ([STRUCTS, path, "bdev"], "", "probekit-structs", None),
        ([STRUCTS, "--enums", path, "e"], "", "probekit-structs", None),
        ([CHECK, "--binary", path], "", "probekit-check", None),
        ([CHECK, "--catalog", path], "", "probekit-check", None),
        ([CHECK, "--binary", blktgt, "--lib", path, script], "",
         "probekit-check", None),
        ([GENCAT, "--json", path], "", "probekit-gencatalog", None),
        ([GENCAT, "--update-doc", path, CATALOG], "", "probekit-gencatalog",
         None),
        ([SCAN, "notes", path], "", "probekit-bpftrace", None),
        ([SCAN, "build-id", path], "", "probekit-bpftrace", None),
        ([SCAN, "has", path], "1\tusdt\tblktgt:io__submit\n",
         "probekit-bpftrace", None),
        ([SCAN, "nearest", "blktgt:io__submt", path], "",
         "probekit-bpftrace", None),
        ([SCAN, "join", "1", "READY", "", "", path], "", "probekit-bpftrace",
         "cannot read script '{path}': {why}"),
    ]


def test_not_a_regular_file(odd, blktgt_bin, tmp_path):
    path, kind = odd
    why = f"is {kind}, not a regular file"
    script = tmp_path / "ok.bt"
    script.write_text("usdt:__EXE__:blktgt:io__submit { @n = count(); }\n")
    for argv, stdin, prog, form in commands(path, blktgt_bin, str(script)):
        r = run(argv, stdin)
        line = (form or "{path}: {why}").format(path=path, why=why)
        assert (r.returncode, r.stderr) == (1, f"{prog}: {line}\n"), argv
        if prog != "probekit-bpftrace":
            assert r.stdout == "", argv
    # A script that is not a regular file is an error of that file alone;
    # the others are still checked.
    r = run([CHECK, "--binary", blktgt_bin, path, str(script)])
    assert (r.returncode, r.stderr) == (
        1, f"{path}:1: -: cannot read: {why}\nprobekit-check: 1 error\n")
    assert r.stdout.startswith("probekit-check: coverage: 1 of 27 probes of "
                               f"{blktgt_bin} used by 1 file; not used: ")


# A path with a newline, a tab and an escape sequence in it, and how an
# error shows it.
ODD_NAME = "/nonexistent/a\nb\tc\x1b[31m"
SHOWN = "/nonexistent/a\\nb\\tc\\x1b[31m"


@pytest.mark.parametrize("argv,line", [
    ([LIST, ODD_NAME], f"probekit-list: {SHOWN}: No such file or directory"),
    ([LIST, "-p", str(os.getpid()), "a\nb"],
     f"probekit-list: no USDT probe matches a\\nb in PID {os.getpid()} or "
     "the files it maps; nearest: "),
    ([LIST, "--catalog", ODD_NAME, "/bin/true"],
     f"probekit-list: cannot read catalog {SHOWN}: No such file or "
     "directory"),
    ([STRUCTS, ODD_NAME, "x"],
     f"probekit-structs: {SHOWN}: No such file or directory"),
    ([CHECK, "--binary", ODD_NAME],
     f"probekit-check: {SHOWN}: No such file or directory"),
    ([CHECK, "--catalog", ODD_NAME],
     f"probekit-check: {SHOWN}: No such file or directory"),
    ([GENCAT, "--json", ODD_NAME],
     f"probekit-gencatalog: {SHOWN}: No such file or directory"),
    ([SCAN, "notes", ODD_NAME],
     f"probekit-bpftrace: {SHOWN}: No such file or directory"),
    ([SCAN, "join", "1", "READY", "", "", ODD_NAME],
     f"probekit-bpftrace: cannot read script '{SHOWN}': No such file or "
     "directory"),
])
def test_control_characters_escaped(argv, line):
    """(A line that ends "nearest: " is followed by the probe nearest
    among those of the test's own interpreter and libraries.)"""
    r = run(argv)
    if line.endswith("; nearest: "):
        assert (r.returncode, r.stdout, r.stderr.count("\n")) == (1, "", 1)
        assert r.stderr.startswith(line) and ":" in r.stderr[len(line):], \
            r.stderr
        return
    assert (r.returncode, r.stdout, r.stderr) == (1, "", line + "\n")


def test_names_in_errors_escaped(blktgt_bin, tmp_path):
    """A type name given to probekit-structs and a probe name a script
    gives probekit-check are echoed escaped, one line each."""
    r = run([STRUCTS, blktgt_bin, "bdev\nio"])
    assert (r.returncode, r.stderr) == (
        1, "probekit-structs: 'bdev\\nio' is not a C type name\n")
    bt = tmp_path / "esc.bt"
    bt.write_text("usdt:__EXE__:blktgt:io__\x1bsubmit { @n = count(); }\n"
                  "usdt:__EXE__:blktgt:io__done { @m = count(); }\n")
    r = run([CHECK, "--binary", blktgt_bin, str(bt)])
    assert (r.returncode, r.stderr) == (1, (
        f"{bt}:1: blktgt:io__\\x1bsubmit: no such probe "
        "'usdt:__EXE__:blktgt:io__\\x1bsubmit' in "
        f"{blktgt_bin}; nearest: io__submit\n"
        "probekit-check: 1 error\n"))
    nl = tmp_path / "a\nb.bt"
    nl.write_text("usdt:__EXE__:blktgt:io__done { @m = str(arg2); }\n")
    r = run([CHECK, "--binary", blktgt_bin, "--catalog", CATALOG, str(nl)])
    assert (r.returncode, r.stderr) == (1, (
        f"{tmp_path}/a\\nb.bt:1: blktgt:io__done: str(arg2) reads a string, "
        "but arg2 is 'uint32_t type', not a pointer\n"
        "probekit-check: 1 error\n"))
