# SPDX-License-Identifier: BSD-2-Clause
"""5-byte-nop probe sites: the red-zone hazard, and the USDT_NOP5=1 build.

A traced 5-byte nop site (0f 1f 44 00 00) is turned by Linux 6.18+ into a
call to the kernel's uprobe trampoline.  The call writes below the stack
pointer, so a leaf function that keeps its locals in the x86-64 red zone
gets them corrupted.  bench/redzone.c is such a leaf function; it counts
the calls whose locals changed across its probe site.  These tests build it
three ways and trace it with bpftrace:

- stock sys/sdt.h (1-byte nop, int3): never corrupted;
- 5-byte nop with -mno-red-zone (what USDT_NOP5=1 builds): never corrupted;
- 5-byte nop WITH the red zone: corrupted, which shows that the check can
  catch the hazard.  On a kernel that does not optimize the site (no
  [uprobes-trampoline] mapping) the hazard cannot show: that case fails
  under CI=true (make check: CI's kernel optimizes it) and skips with the
  reason in a plain pytest run.

Then they check that a USDT_NOP5=1 blktgt really has 5-byte nops at every
probe site and that every target/*.c was compiled with -mno-red-zone (from
the DW_AT_producer of its DWARF compile unit).
"""

import glob
import os
import re
import signal
import subprocess
import sys

import pytest

import allowed_skips
import probekit

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import elf as _elf, notes as _notes  # noqa: E402
from elftools.elf.elffile import ELFFile  # noqa: E402
from bench_runs import make

# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("objdump", "py:elftools")

NOP1 = b"\x90"
NOP5 = bytes.fromhex("0f1f440000")
CALLS = 200003          # a prime number of calls, so counts cannot line up by luck
VARIANTS = ("stock", "nop5", "nop5-redzone")


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("nop5")
    make(f"O={out}", "bench-progs")
    return out / "bench"


@pytest.fixture(scope="module")
def nop5_blktgt(tmp_path_factory):
    out = tmp_path_factory.mktemp("nop5-blktgt")
    make(f"O={out}", "USDT=1", "USDT_NOP5=1", "all")
    return out


def site_bytes(path, pc, n):
    """n bytes of the ELF file at virtual address pc."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for sec in elf.iter_sections():
            start = sec["sh_addr"]
            if (sec["sh_type"] != "SHT_NOBITS" and start
                    and start <= pc < start + sec["sh_size"]):
                return sec.data()[pc - start:pc - start + n]
    raise AssertionError(f"{path}: no section holds address {pc:#x}")


def sites(path):
    probes = _notes.read_probes(path)
    assert probes, f"{path} has no .note.stapsdt probes"
    return [(p.provider, p.name, p.pc) for p in probes]


@pytest.mark.parametrize("prog", ["hitcost", "redzone"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_bench_site_is_the_nop_it_claims(bench_dir, prog, variant):
    path = str(bench_dir / f"{prog}-{variant}")
    want = NOP1 if variant == "stock" else NOP5
    for provider, name, pc in sites(path):
        got = site_bytes(path, pc, len(want))
        assert got == want, f"{provider}:{name} at {pc:#x} is {got.hex()}"


def leaf_disassembly(path):
    r = subprocess.run(["objdump", "-d", "--no-show-raw-insn",
                        "--disassemble=redzone_leaf", path],
                       stdout=subprocess.PIPE, check=True, timeout=60)
    return r.stdout.decode()


@pytest.mark.parametrize("variant", VARIANTS)
def test_redzone_leaf_uses_the_red_zone_unless_told_not_to(bench_dir, variant):
    """The checker is only meaningful if its leaf really keeps locals below
    the stack pointer when the red zone is allowed, and does not without."""
    asm = leaf_disassembly(str(bench_dir / f"redzone-{variant}"))
    assert re.search(r"mov\s+%\w+,-0x[0-9a-f]+\(%rbp\)", asm), asm
    moves_sp = re.search(r"sub\s+\$0x[0-9a-f]+,%rsp", asm) is not None
    assert moves_sp == (variant == "nop5"), asm


def run_traced(binary, provider, probe, calls):
    """Run a bench program with bpftrace counting its probe; return
    (result fields, bpftrace's count)."""
    proc = subprocess.Popen([binary, "-n", str(calls)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = probekit.LineReader(proc.stdout)
    bt = None
    try:
        pid = int(out.wait_for(r": ready pid=(\d+)").group(1))
        assert pid == proc.pid
        bt, bt_out = probekit.bpftrace_program(
            pid, f'usdt:{binary}:{provider}:{probe} {{ @hits = count(); }} '
                 'BEGIN { printf("READY\\n"); }')
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        m = out.wait_for(r"calls=(\d+) corrupted=(\d+) trampoline=(-?\d+)")
        assert proc.wait(timeout=probekit.TIMEOUT) == 0
        lines = probekit.stop_bpftrace(bt, bt_out)
        bt = None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if bt is not None and bt.poll() is None:
            os.killpg(bt.pid, signal.SIGKILL)
            bt.wait()
    counts = [int(c) for c in re.findall(r"^@hits: (\d+)$", "\n".join(lines), re.M)]
    assert len(counts) == 1, "\n".join(lines)
    calls_done, corrupted, trampoline = map(int, m.groups())
    assert calls_done == calls
    return corrupted, trampoline, counts[0]


@pytest.mark.parametrize("variant", VARIANTS)
def test_traced_site_and_the_red_zone(bench_dir, bpf, variant):
    corrupted, trampoline, hits = run_traced(
        str(bench_dir / f"redzone-{variant}"), "redzone", "site", CALLS)
    assert hits == CALLS, "bpftrace did not see every call"
    assert trampoline in (0, 1), "could not read /proc/self/maps"
    if variant == "stock":
        # int3 never touches the user stack, and is never optimized.
        assert trampoline == 0
        assert corrupted == 0
    elif variant == "nop5":
        assert corrupted == 0, (f"{corrupted} of {CALLS} calls corrupted "
                                "with -mno-red-zone")
    else:
        if not trampoline:
            allowed_skips.require(
                "this kernel did not optimize the 5-byte nop uprobe (no "
                "[uprobes-trampoline]), so the red-zone hazard cannot be "
                "reproduced here")
        # Every hit after the first (which optimizes the site) goes through
        # the trampoline; demand most of them, so the detector is shown
        # to work without depending on the exact kernel path.
        assert corrupted >= CALLS // 2, (
            f"only {corrupted} of {CALLS} calls corrupted: the checker no "
            "longer shows the hazard it is meant to catch")


def test_nop5_sites_are_really_optimized(bench_dir, bpf):
    """On a kernel that optimizes uprobes at all, a -mno-red-zone 5-byte
    nop site must be optimized too; otherwise the nop5 result above would
    be safe only because nothing was tested."""
    _, trampoline_unsafe, _ = run_traced(
        str(bench_dir / "redzone-nop5-redzone"), "redzone", "site", 1009)
    _, trampoline_safe, hits = run_traced(
        str(bench_dir / "redzone-nop5"), "redzone", "site", 1009)
    assert hits == 1009
    assert trampoline_safe == trampoline_unsafe


def cu_producers(binary):
    """{address range: (source, DW_AT_producer)} of each DWARF unit."""
    out = []
    with open(binary, "rb") as f:
        elf = ELFFile(f)
        assert elf.has_dwarf_info(), "built without -g: cannot check flags"
        dwarf = elf.get_dwarf_info()
        for cu in dwarf.iter_CUs():
            top = cu.get_top_DIE()
            name = top.attributes.get("DW_AT_name")
            prod = top.attributes.get("DW_AT_producer")
            if name is None or prod is None:
                continue
            src = (name.value.decode(), prod.value.decode())
            if "DW_AT_ranges" in top.attributes:
                rl = dwarf.range_lists().get_range_list_at_offset(
                    top.attributes["DW_AT_ranges"].value, cu=cu)
                out += [((r.begin_offset, r.end_offset), src) for r in rl
                        if hasattr(r, "begin_offset")]
            elif "DW_AT_low_pc" in top.attributes:
                lo = top.attributes["DW_AT_low_pc"].value
                hi = top.attributes["DW_AT_high_pc"]
                end = hi.value if hi.form == "DW_FORM_addr" else lo + hi.value
                out.append(((lo, end), src))
    return out


def test_stock_blktgt_sites_are_1_byte_nops_but_io_batch(blktgt_bin):
    """The stock build keeps the int3 site everywhere but io__batch, whose
    hit a whole batch pays: a 5-byte nop, in code with no red zone, and
    the count, the records' address and the merge counts in registers, so
    a reader takes each with one register read, not also a read of
    blktgt's memory (and bpftrace 0.17, which cannot read a %rip-relative
    operand, reads the merge counts)."""
    units = cu_producers(blktgt_bin)
    batch = 0
    for provider, name, pc in sites(blktgt_bin):
        if name != "io__batch":
            got = site_bytes(blktgt_bin, pc, 1)
            assert got == NOP1, f"{provider}:{name} at {pc:#x} is {got.hex()}"
            continue
        batch += 1
        probe = [p for p in _notes.read_probes(blktgt_bin) if p.pc == pc][0]
        for i in (1, 2, 5):
            assert re.fullmatch(r"%\w+", probe.args[i].operand), (
                f"io__batch argument {i} is {probe.args[i].operand}: "
                f"not a register ({probe.spec})")
        got = site_bytes(blktgt_bin, pc, len(NOP5))
        assert got == NOP5, f"{provider}:{name} at {pc:#x} is {got.hex()}"
        holders = [src for (lo, hi), src in units if lo <= pc < hi]
        assert len(holders) == 1, f"io__batch at {pc:#x}: units {holders}"
        src, prod = holders[0]
        assert "-mno-red-zone" in prod.split(), (
            f"io__batch's site is in {src}, compiled with a red zone: {prod}")
    assert batch == 1, f"{batch} io__batch sites, want the one in target/bdev.c"


def test_usdt_nop5_blktgt_sites_are_5_byte_nops(nop5_blktgt):
    binary = str(nop5_blktgt / "bin" / "blktgt")
    found = sites(binary)
    assert {p for p, _, _ in found} == {"blktgt"}
    for provider, name, pc in found:
        got = site_bytes(binary, pc, len(NOP5))
        assert got == NOP5, f"{provider}:{name} at {pc:#x} is {got.hex()}"


def test_usdt_nop5_blktgt_has_no_red_zone_anywhere(nop5_blktgt):
    """Every target/*.c must be compiled with -mno-red-zone: a site that an
    inlined function carries into any file is in that file's code."""
    binary = str(nop5_blktgt / "bin" / "blktgt")
    producers = {}
    with open(binary, "rb") as f:
        elf = ELFFile(f)
        assert elf.has_dwarf_info(), "built without -g: cannot check flags"
        for cu in elf.get_dwarf_info().iter_CUs():
            top = cu.get_top_DIE()
            name = top.attributes.get("DW_AT_name")
            prod = top.attributes.get("DW_AT_producer")
            if name is not None and prod is not None:
                producers[name.value.decode()] = prod.value.decode()
    sources = sorted(os.path.relpath(p, probekit.ROOT)
                     for p in glob.glob(os.path.join(probekit.ROOT, "target", "*.c")))
    assert sources, "no target/*.c"
    for src in sources:
        assert src in producers, f"{src}: no DWARF unit in {binary}"
        assert "-mno-red-zone" in producers[src].split(), (
            f"{src} compiled without -mno-red-zone: {producers[src]}")
    config = (nop5_blktgt / ".config").read_text()
    assert "-mno-red-zone" in config and "-Iprobes/nop5" in config


def test_usdt_nop5_blktgt_traces_exact_counts(nop5_blktgt, bpf, tmp_path):
    """The 5-byte nop build still traces: a known workload, exact counts."""
    binary = str(nop5_blktgt / "bin" / "blktgt")
    t = probekit.Target(binary, tmp_path).start()
    try:
        t.rpc("bdev_null_create", name="n0", size_mb=64, block_size=4096)
        bt, out = probekit.bpftrace_program(
            t.pid, 'usdt::blktgt:io__submit { @submit = count(); } '
                   'usdt::blktgt:io__done { @done = count(); } '
                   'BEGIN { printf("READY\\n"); }')
        try:
            r = t.rpc("workload_run", bdev="n0", pattern="randread",
                      io_size=4096, queue_depth=8, count=2003)
        finally:
            lines = probekit.stop_bpftrace(bt, out)
        assert r["ios"] == 2003
        text = "\n".join(lines)
        assert re.search(r"^@submit: 2003$", text, re.M), text
        assert re.search(r"^@done: 2003$", text, re.M), text
    finally:
        t.stop()
