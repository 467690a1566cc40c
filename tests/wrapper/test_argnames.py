# SPDX-License-Identifier: BSD-2-Clause
"""args.NAME in a usdt block through the wrapper: the argument of that
name, from the probekit note blktgt carries (no .d file at hand), in the
argN form bpftrace reads; each probe of a block its own (len is
io__submit's fifth argument and io__done's fourth); a signed type read
signed; a mistake one line before bpftrace runs."""

import re
import subprocess

import pytest

import probekit
from probekit import WRAPPER, Trace

N = 10007               # prime
SIZE = 4096

NAMED_BT = """usdt:__EXE__:blktgt:io__submit,
usdt:__EXE__:blktgt:io__done
{
	@ios[probe, str(args.bdev)] = count();
	@bytes[probe] = sum(args.len);
}

usdt:__EXE__:blktgt:io__done
/args->status < 0/
{
	@failed = count();
}
"""


@pytest.fixture
def tgt(target):
    target.rpc("bdev_malloc_create", name="m0", size_mb=64, block_size=4096)
    target.rpc("export_create", name="e0", bdev="m0")
    return target


def run(what, target, tmp_path):
    script = tmp_path / "named.bt"
    script.write_text(NAMED_BT)
    t = Trace(what, [str(script)], wrapper_opts=["--hits"]).start()
    try:
        r = target.rpc("workload_run", export="e0", pattern="randrw", io_size=SIZE,
                       queue_depth=8, count=N)
    finally:
        lines = t.stop()
    assert r["ios"] == N and r["errors"] == 0, r
    return lines


def check(lines):
    text = "\n".join(lines)
    for p in ("io__submit", "io__done"):
        assert re.search(rf"^@ios\[usdt:\S+:blktgt:{p}, m0\]: {N}$", text, re.M), text
        assert re.search(rf"^@bytes\[usdt:\S+:blktgt:{p}\]: {N * SIZE}$", text, re.M), text
    # (bpftrace 0.17 prints a keyless count() never hit as 0)
    assert not re.search(r"^@failed: [1-9]", text, re.M), text
    assert f"probekit: hits blktgt:io__submit {N}" in lines, text


def test_names_count_a_prime_workload_pid(bpf, tgt, tmp_path):
    check(run(tgt.pid, tgt, tmp_path))


def test_names_count_a_prime_workload_path(bpf, blktgt_bin, tmp_path):
    with probekit.exported_copy(blktgt_bin, tmp_path) as (t, exe):
        lines = run(exe, t, tmp_path)
    check(lines)


def dry(target, text, tmp_path):
    script = tmp_path / "s.bt"
    script.write_text(text)
    return subprocess.run([WRAPPER, "--dry-run", str(target.pid), str(script)],
                          capture_output=True, text=True, timeout=probekit.TIMEOUT)


def test_each_probe_reads_its_own_index_and_signed_types_signed(target, tmp_path):
    """The block of two probes becomes one block each; status, an int32_t,
    is read through (int32)."""
    r = dry(target, NAMED_BT, tmp_path)
    assert r.returncode == 0, r.stderr
    blocks = re.findall(r'^usdt:"[^"]+":blktgt:(\w+)\n\{ if \(@__pk_gate == 1\) \{\n(.*?)\n\}\}',
                        r.stdout, re.M | re.S)
    assert [(p, "sum(arg4)" in b or "sum(arg3)" in b) for p, b in blocks][:2] == [
        ("io__submit", True), ("io__done", True)], r.stdout
    assert "sum(arg4)" in blocks[0][1] and "sum(arg3)" in blocks[1][1], r.stdout
    assert "str(arg1)" in blocks[0][1], r.stdout
    assert re.search(r"^/\(int32\)arg4 < 0/$", r.stdout, re.M), r.stdout


@pytest.mark.parametrize("text,line", [
    ("usdt:__EXE__:blktgt:io__submit { @x = sum(args.lenn); }\n",
     "{s}:1: probe blktgt:io__submit has no argument lenn; nearest: len"),
    ("usdt:__EXE__:blktgt:io__submit { printf(\"%s\", str(args.len)); }\n",
     "{s}:1: str(args.len) reads a string, but len of probe blktgt:io__submit is uint64_t, "
     "not a char *"),
    ("usdt:__EXE__:blktgt:io__* { @x = sum(args.len); }\n",
     "{s}:1: args names the arguments of one probe, and blktgt:io__* is a wildcard; name each "
     "probe, or read argN"),
])
def test_a_mistake_is_one_line(target, tmp_path, text, line):
    r = dry(target, text, tmp_path)
    assert r.returncode == 1 and r.stdout == "", r
    assert r.stderr == "probekit-bpftrace: " + line.format(s=tmp_path / "s.bt") + "\n", r.stderr


def dry_path(path, text, tmp_path):
    script = tmp_path / "s.bt"
    script.write_text(text)
    return subprocess.run([WRAPPER, "--dry-run", str(path), str(script)],
                          capture_output=True, text=True, timeout=probekit.TIMEOUT)


def test_a_probe_without_names_is_the_tools_line(blktgt_bin, tmp_path):
    """args.NAME of a probe its file has without probekit's note: the
    tools' words (toolspec.ARG_NO_NAMES, as usdtcount -H says them),
    argN from 0; of a misspelt probe: the tools' "no USDT probe" line with
    its nearest; of a probe the file lacks (a library's): what args.NAME
    reads, and what to write instead."""
    bare = tmp_path / "blktgt"
    subprocess.run(["objcopy", "--remove-section=.note.probekit", blktgt_bin, bare],
                   check=True)
    s = tmp_path / "s.bt"
    for path, probe, line in [
            (bare, "blktgt:io__submit",
             f"{s}:1: {bare} has no argument names for probe blktgt:io__submit (it was not "
             "built with probekit's header); give the argument by number, arg0 on"),
            (blktgt_bin, "blktgt:io__submt",
             f"{s}:1: no USDT probe blktgt:io__submt in {blktgt_bin}; nearest: "
             "blktgt:io__submit"),
            (blktgt_bin, "libc:setjmp",
             f"{s}:1: no USDT probe libc:setjmp in {blktgt_bin}, whose notes args.NAME reads; "
             "a probe in a library: give the argument by number, arg0 on")]:
        r = dry_path(path, f"usdt:__EXE__:{probe} {{ @x = sum(args.len); }}\n", tmp_path)
        assert r.returncode == 1 and r.stdout == "", r
        assert r.stderr == f"probekit-bpftrace: {line}\n", r.stderr
