# SPDX-License-Identifier: BSD-2-Clause
"""probekit-check on binaries that are not blktgt, without a catalog: each
argument operand form a reader cannot take is caught where a script or
program reads it, naming the reader; and a script's __EXE__ probes that
live in a library are found with --lib or --pid.

The operand forms: a symbol-relative %rip operand and an immediate, in
Debian's PostgreSQL; a scale-index-base operand, which no installed
binary here has, in tests/operands.c built with gcc (which also has the
other two, so libbpf's refusal is checked on one small program).
"""

import os
import re
import subprocess

import pytest

import probekit
import thirdparty
from probekit import LineReader, TIMEOUT

CHECK = os.path.join(probekit.BUILD, "bin", "probekit-check")
POSTGRES = f"{thirdparty.PG_BIN}/postgres"

pytestmark = pytest.mark.needs("py:elftools")


def check(*args):
    r = subprocess.run([CHECK, *map(str, args)], capture_output=True,
                       text=True, timeout=TIMEOUT)
    return r.returncode, r.stdout.splitlines(), r.stderr.splitlines()


@pytest.fixture(scope="module")
def operands(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("operands") / "operands")
    r = subprocess.run(["gcc", "-O2", "-o", exe,
                        os.path.join(probekit.ROOT, "tests", "operands.c")],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.mark.needs(POSTGRES)
def test_postgres_operands_bpftrace_cannot_read(tmp_path):
    """checkpoint__done's arguments are sym(%rip) and 40+sym(%rip);
    clog__checkpoint__start's is $1.  bpftrace 0.17 reads garbage or
    nothing for both; arguments it can read pass."""
    bt = tmp_path / "pg.bt"
    bt.write_text(
        'usdt:__EXE__:postgresql:checkpoint__done { @a = arg0; @b = arg1; }\n'
        'usdt:__EXE__:postgresql:clog__checkpoint__start { @c = arg0; }\n'
        'usdt:__EXE__:postgresql:transaction__commit { @d = arg0; }\n')
    rc, out, err = check("--binary", POSTGRES, bt)
    assert rc == 1, (out, err)
    assert err == [
        f"{bt}:1: postgresql:checkpoint__done: arg0: bpftrace 0.17 cannot "
        "read 40+CheckpointStats(%rip): a symbol-relative %rip operand",
        f"{bt}:1: postgresql:checkpoint__done: arg1: bpftrace 0.17 cannot "
        "read NBuffers(%rip): a symbol-relative %rip operand",
        f"{bt}:2: postgresql:clog__checkpoint__start: arg0: bpftrace 0.17 "
        "cannot read $1: an immediate (constant) operand",
        "probekit-check: 3 errors"], err
    # Without any file, the binary's unreadable operands are notes.
    rc, out, err = check("--binary", POSTGRES)
    assert rc == 0 and err == [], (out, err)
    assert ("probekit-check: note: postgresql:checkpoint__done: arg1: "
            "bpftrace 0.17 cannot read NBuffers(%rip): a symbol-relative "
            "%rip operand; libbpf 1.1 cannot read NBuffers(%rip): a "
            "symbol-relative %rip operand") in out, out


@pytest.mark.needs("gcc")
def test_scale_index_base_and_libbpf(operands, tmp_path):
    """A scale-index-base operand, read by a bpftrace script; and a libbpf
    program attached to a probe with any operand libbpf 1.1 cannot parse,
    read or not, which libbpf refuses at attach time."""
    bt = tmp_path / "ops.bt"
    bt.write_text("usdt:__EXE__:probekit:pick { @p = arg0; }\n"
                  "usdt:__EXE__:probekit:konst { @k = count(); }\n")
    rc, out, err = check("--binary", operands, bt)
    assert (rc, err) == (1, [
        f"{bt}:1: probekit:pick: arg0: bpftrace 0.17 cannot read "
        "(%rdi,%rsi,4): a scale-index-base operand",
        "probekit-check: 1 error"]), (out, err)
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
    assert (rc, err) == (1, [
        f"{prog}:8: probekit:pick: attaching fails: arg0: libbpf 1.1 cannot "
        "read (%rdi,%rsi,4): a scale-index-base operand",
        f"{prog}:8: probekit:pick: attaching fails: arg1: libbpf 1.1 cannot "
        "read counter(%rip): a symbol-relative %rip operand",
        "probekit-check: 2 errors"]), (out, err)


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
    p = subprocess.Popen([exe, "1"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        LineReader(p.stdout).wait_for("^ready$")
        rc, out, err = check("--pid", p.pid, bt)
        assert (rc, err) == (0, []), (out, err)
        bt.write_text("usdt:__EXE__:libstdcxx:thrown { @t = count(); }\n")
        rc, out, err = check("--pid", p.pid, bt)
        assert rc == 1 and re.fullmatch(
            rf"{re.escape(str(bt))}:1: libstdcxx:thrown: no such probe "
            r"'usdt:__EXE__:libstdcxx:thrown' in /proc/\d+/root\S+ or "
            r".*libstdc\+\+\.so\.6.* \(did you mean throw\?\)", err[0]), err
    finally:
        p.kill()
        p.wait()
