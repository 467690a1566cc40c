# SPDX-License-Identifier: BSD-2-Clause
"""probekit-check on binaries that are not blktgt, without a catalog: each
argument operand form a reader cannot take is caught where a script or
program reads it, naming the reader; and a script's __EXE__ probes that
live in a library are found with --lib or --pid.

The operand forms: a symbol-relative %rip operand and an immediate, in
Debian's PostgreSQL; a scale-index-base operand, which no installed
binary here has, in tests/lib/operands.c built with gcc (which also has the
other two, so libbpf's refusal is checked on one small program).
"""

import os
import re
import subprocess
import sys

import pytest

import probekit
import thirdparty
from probekit import LineReader, TIMEOUT

CHECK = os.path.join(probekit.BUILD, "bin", "probekit-check")
POSTGRES = f"{thirdparty.PG_BIN}/postgres"

pytestmark = pytest.mark.needs("py:elftools")

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import argspec, features, notes  # noqa: E402
from probelib.argspec import BPFTRACE, LIBBPF  # noqa: E402
from notes_readelf import readelf_names  # noqa: E402

# What the installed bpftrace and libbpf read (x86_64), as probekit-check
# detects it here, and their names in its messages.
KINDS = argspec.readers()
BT = argspec.reader_name(BPFTRACE)
# What probekit-check adds to each operand it says a reader cannot read.
FIX = "; " + argspec.operand_fix()
LB = argspec.reader_name(LIBBPF)


def check(*args):
    r = subprocess.run([CHECK, *map(str, args)], capture_output=True,
                       text=True, timeout=TIMEOUT)
    return r.returncode, r.stdout.splitlines(), r.stderr.splitlines()


def attach_fails(bt, line, name, read):
    """The errors for the operands of PostgreSQL's probe name that a
    script's line reads none of (read: the argument numbers it reads) and
    the installed bpftrace cannot parse, when it refuses a whole probe for
    one (detected)."""
    if not features.bpftrace()["whole_probe"]:
        return []
    p = [p for p in notes.read_probes(POSTGRES) if p.name == name][0]
    return [f"{bt}:{line}: postgresql:{name}: attaching fails: arg{i}: {w}{FIX}"
            for i, a in enumerate(p.args) if i not in read
            for w in [argspec.reader_problem(a.operand, BPFTRACE)] if w]


@pytest.mark.needs(POSTGRES)
def test_postgres_operands_bpftrace_cannot_read(tmp_path):
    """checkpoint__done's arguments are sym(%rip) and 40+sym(%rip);
    clog__checkpoint__start's is $1.  Each is an error where the installed
    bpftrace does not read its kind (detected: bpftrace 0.17 reads $1 and
    garbage for sym(%rip)); arguments it can read pass."""
    bt = tmp_path / "pg.bt"
    bt.write_text(
        'usdt:__EXE__:postgresql:checkpoint__done { @a = arg0; @b = arg1; }\n'
        'usdt:__EXE__:postgresql:clog__checkpoint__start { @c = arg0; }\n'
        'usdt:__EXE__:postgresql:transaction__commit { @d = arg0; }\n')
    rc, out, err = check("--binary", POSTGRES, bt)
    want = attach_fails(bt, 1, "checkpoint__done", {0, 1})
    if "sym" not in KINDS[BPFTRACE]:
        want += [
            f"{bt}:1: postgresql:checkpoint__done: arg0: {BT} cannot "
            "read 40+CheckpointStats(%rip): a symbol-relative %rip operand" + FIX,
            f"{bt}:1: postgresql:checkpoint__done: arg1: {BT} cannot "
            "read NBuffers(%rip): a symbol-relative %rip operand" + FIX]
    want += attach_fails(bt, 2, "clog__checkpoint__start", {0})
    if "const" not in KINDS[BPFTRACE]:
        want.append(f"{bt}:2: postgresql:clog__checkpoint__start: arg0: "
                    f"{BT} cannot read $1: an immediate (constant) operand" + FIX)
    want += attach_fails(bt, 3, "transaction__commit", {0})
    want.append(f"probekit-check: {len(want)} error{'s' * (len(want) != 1)}")
    assert err == (want if len(want) > 1 else []), err
    assert rc == (1 if len(want) > 1 else 0), (out, err)
    # Without any file, the binary's unreadable operands are notes.
    rc, out, err = check("--binary", POSTGRES)
    assert rc == 0 and err == [], (out, err)
    whys = [f"{argspec.reader_name(r)} cannot read NBuffers(%rip): a "
            "symbol-relative %rip operand" for r in (BPFTRACE, LIBBPF)
            if "sym" not in KINDS[r]]
    assert whys, "a libbpf that reads sym(%rip): a new operand kind"
    assert ("probekit-check: note: postgresql:checkpoint__done: arg1: "
            + "; ".join(whys) + FIX) in out, out


@pytest.mark.needs("gcc")
def test_scale_index_base_and_libbpf(operands, tmp_path):
    """A scale-index-base operand, read by a bpftrace script; and a libbpf
    program attached to a probe with any operand the installed libbpf
    cannot parse (detected: libbpf 1.1 to 1.6 no scale-index-base, none a
    symbol-relative one), read or not, which libbpf refuses at attach
    time."""
    bt = tmp_path / "ops.bt"
    bt.write_text("usdt:__EXE__:probekit:pick { @p = arg0; }\n"
                  "usdt:__EXE__:probekit:konst { @k = count(); }\n")
    rc, out, err = check("--binary", operands, bt)
    want = [f"{bt}:1: probekit:pick: arg0: {BT} cannot read "
            "(%rdi,%rsi,4): a scale-index-base operand" + FIX] * \
        ("index" not in KINDS[BPFTRACE])
    # A bpftrace that refuses a whole probe for one operand (detected)
    # fails on pick's arg1, unread, too.
    if features.bpftrace()["whole_probe"]:
        want.append(f"{bt}:1: probekit:pick: attaching fails: arg1: {BT} "
                    "cannot read counter(%rip): a symbol-relative %rip "
                    "operand" + FIX)
    if want:
        want.append(f"probekit-check: {len(want)} "
                    f"error{'s' * (len(want) > 1)}")
    assert (rc, err) == (int(bool(want)), want), (out, err)
    prog = tmp_path / "ops.bpf.c"
    prog.write_text(
        '#include "vmlinux.h"\n'
        '#include <bpf/usdt.bpf.h>\n'
        f'SEC("usdt/{operands}:probekit:konst")\n'
        'int BPF_USDT(on_konst, int k)\n{\n\treturn k;\n}\n'
        f'SEC("usdt/{operands}:probekit:pick")\n'
        'int BPF_USDT(on_pick)\n{\n\treturn 0;\n}\n')
    (tmp_path / "ops.c").write_text("int main(void) { return 0; }\n")
    rc, out, err = check("--binary", operands, prog)
    want = [f"{prog}:8: probekit:pick: attaching fails: arg0: {LB} cannot "
            "read (%rdi,%rsi,4): a scale-index-base operand" + FIX] * \
        ("index" not in KINDS[LIBBPF]) + [
        f"{prog}:8: probekit:pick: attaching fails: arg1: {LB} cannot "
        "read counter(%rip): a symbol-relative %rip operand" + FIX]
    assert (rc, err) == (1, want + [
        f"probekit-check: {len(want)} error{'s' * (len(want) > 1)}"]), \
        (out, err)


@pytest.mark.needs("g++")
def test_exe_probes_in_a_library(tmp_path):
    """A script's __EXE__ probes that live in libstdc++: not in the
    program, found with --lib PATH or with --pid of a process mapping it;
    a misspelt one is named with the nearest probe there."""
    exe = thirdparty.build_throws(str(tmp_path))
    bt = tmp_path / "throws.bt"
    bt.write_text("usdt:__EXE__:libstdcxx:throw { @t = count(); }\n")
    rc, out, err = check("--binary", exe, bt)
    assert rc == 1 and len(err) == 2, err
    assert err[0].startswith(f"{bt}:1: libstdcxx:throw: no such probe"), err
    lib = subprocess.run(["g++", "-print-file-name=libstdc++.so.6"],
                         capture_output=True, text=True).stdout.strip()
    rc, out, err = check("--binary", exe, "--lib", lib, bt)
    assert (rc, err) == (0, []), (out, err)
    # The coverage counts the probes checked: the program's (none) and
    # the library's three.
    unused = "; not used: libstdcxx:catch, libstdcxx:rethrow"
    assert out == [f"probekit-check: coverage: 1 of 3 probes of {exe}, "
                   f"{lib} used by 1 file{unused}"], out
    p = subprocess.Popen([exe, "1"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        LineReader(p.stdout).wait_for("^ready$")
        rc, out, err = check("--pid", p.pid, bt)
        assert (rc, err) == (0, []), (out, err)
        # With --pid the coverage counts the probes of every file the
        # process maps that has any, in map order, as readelf reads them:
        # libstdc++'s three here, and the C library's and the dynamic
        # loader's where glibc is built with probes (Debian unstable's).
        root = f"/proc/{p.pid}/root"
        with open(f"/proc/{p.pid}/maps") as f:
            mapped = dict.fromkeys(ln.split()[5] for ln in f
                                   if len(ln.split()) == 6 and ln.split()[5][0] == "/")
        assert any("libstdc++" in m for m in mapped), mapped
        probed = {}
        for m in mapped:
            with open(root + m, "rb") as f:
                elf = f.read(4) == b"\x7fELF"
            found = readelf_names(root + m) if elf and m != os.path.realpath(exe) else []
            if found:
                probed[m] = sorted(set(found))
        total = sum(len(v) for v in probed.values())
        unused = "; not used: " + ", ".join(dict.fromkeys(
            f"{pv}:{n}" for v in probed.values() for pv, n in v
            if (pv, n) != ("libstdcxx", "throw")))
        assert out == [f"probekit-check: coverage: 1 of {total} probes of "
                       f"{root}{os.path.realpath(exe)}, "
                       + ", ".join(root + m for m in probed)
                       + f" used by 1 file{unused}"], out
        bt.write_text("usdt:__EXE__:libstdcxx:thrown { @t = count(); }\n")
        rc, out, err = check("--pid", p.pid, bt)
        assert rc == 1 and re.fullmatch(
            rf"{re.escape(str(bt))}:1: libstdcxx:thrown: no such probe "
            r"'usdt:__EXE__:libstdcxx:thrown' in /proc/\d+/root\S+ or "
            r".*libstdc\+\+\.so\.6.*; nearest: throw", err[0]), err
    finally:
        p.kill()
        p.wait()


# A pointer a probe takes from a global: sys/sdt.h's "m" constraint keeps
# the compiler's symbol-relative operand, 8@label(%rip).
NAMED_C = r"""
#include <sys/sdt.h>
char *label = "named";
#undef STAP_SDT_ARG_CONSTRAINT
#define STAP_SDT_ARG_CONSTRAINT m
__attribute__((noinline)) void named(void)
{
	STAP_PROBE1(probekit, named, label);
}
int main(void) { named(); return 0; }
"""


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    d = tmp_path_factory.mktemp("named")
    (d / "named.c").write_text(NAMED_C)
    exe = str(d / "named")
    r = subprocess.run(["gcc", "-O2", "-o", exe, str(d / "named.c")],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return exe


def bpftrace_name():
    """How probekit-check names the installed bpftrace, from what its
    --version says here ("bpftrace v0.17.0": "bpftrace 0.17")."""
    out = subprocess.run(["bpftrace", "--version"], capture_output=True,
                         text=True, timeout=TIMEOUT).stdout
    m = re.match(r"bpftrace v?(\d+)\.(\d+)", out)
    return f"bpftrace {m[1]}.{m[2]}"


@pytest.mark.needs("gcc", "bpftrace")
def test_one_bad_read_one_report(named, tmp_path):
    """str(arg0) is one read of arg0: an operand bpftrace cannot read is
    reported once, as str(arg0), not again for the arg0 inside it; an
    out-of-range str(arg1) and a str(arg0) in a uretprobe once each, in
    their own words."""
    assert subprocess.run(["readelf", "-n", named], capture_output=True,
                          text=True).stdout.count("8@label(%rip)") == 1
    bt = tmp_path / "named.bt"
    bt.write_text('usdt:__EXE__:probekit:named { printf("%s\\n", str(arg0)); }\n'
                  "usdt:__EXE__:probekit:named { @[str(arg1)] = count(); }\n"
                  "uretprobe:__EXE__:named { @r = str(arg0); }\n")
    rc, out, err = check("--binary", named, bt)
    assert (rc, err) == (1, [
        f"{bt}:1: probekit:named: str(arg0): {bpftrace_name()} cannot read "
        "label(%rip): a symbol-relative %rip operand" + FIX,
    ] + [
        f"{bt}:2: probekit:named: attaching fails: arg0: {bpftrace_name()} "
        "cannot read label(%rip): a symbol-relative %rip operand" + FIX] * \
        features.bpftrace()["whole_probe"] + [
        f"{bt}:2: probekit:named: str(arg1) out of range: the probe has 1 "
        "argument, arg0..arg0",
        f"{bt}:3: uretprobe:named: str(arg0) in a uretprobe: arguments are "
        "gone at return; read them at entry",
        f"probekit-check: {3 + features.bpftrace()['whole_probe']} "
        "errors"]), (out, err)
    assert out == ["probekit-check: coverage: 1 of 1 probes of "
                   f"{named} used by 1 file"], out


@pytest.mark.needs("gcc")
def test_messages_name_the_installed_bpftrace(named, tmp_path):
    """The reader a message names is the bpftrace that is installed
    ($BPFTRACE, as the wrapper runs it); with none, "bpftrace" without a
    version.  What is checked is the same either way."""
    bt = tmp_path / "named.bt"
    bt.write_text("usdt:__EXE__:probekit:named { @a = arg0; }\n")
    for env, name in (("/nonexistent/bpftrace", "bpftrace"),
                      (str(tmp_path), "bpftrace")):
        r = subprocess.run([CHECK, "--binary", named, str(bt)],
                           capture_output=True, text=True, timeout=TIMEOUT,
                           env={**os.environ, "BPFTRACE": env})
        assert (r.returncode, r.stderr.splitlines()) == (1, [
            f"{bt}:1: probekit:named: arg0: {name} cannot read label(%rip): "
            "a symbol-relative %rip operand" + FIX,
            "probekit-check: 1 error"]), r.stderr
