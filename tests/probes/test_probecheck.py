# SPDX-License-Identifier: BSD-2-Clause
"""probecheck catches drift between the catalog, the binary and the scripts
and tools that read its probes, each mistake with its file, line and reason.

Most tests run against a binary built here from a catalog (every probe
fired once, plus the uprobe targets of the blktgt contract), so that a
catalog can be changed and a binary rebuilt from it in seconds, and so
that the checker is tested independently of blktgt.  The project's own
scripts and tools are checked against the real blktgt too."""

import glob
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

import probekit
from thirdparty import PY_SDT

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import argspec, features, notes as sdtnotes  # noqa: E402
from probelib.catalog import parse_catalog  # noqa: E402
# The installed bpftrace and libbpf as messages name them.
BT = argspec.reader_name(argspec.BPFTRACE)


def cannot_read(kind):
    """"bpftrace X.Y", "libbpf X.Y", both joined by "and", or "": which
    of the installed bpftrace and libbpf do not read operand kind, as
    detected here."""
    return " and ".join(argspec.reader_name(r) for r in
                        (argspec.BPFTRACE, argspec.LIBBPF)
                        if kind not in argspec.readers()[r])


# The programs these tests run; a missing one names its Debian package.
pytestmark = pytest.mark.needs("dtrace", "py:elftools")

ROOT = probekit.ROOT
PROBECHECK = os.path.join(probekit.BUILD, "bin", "probekit-check")
GENCAT = os.path.join(ROOT, "probes", "gencatalog")
CATALOG = os.path.join(ROOT, "probes", "blktgt.d")
FIX = os.path.join(probekit.ROOT, "tests", "fixtures", "probecheck")


def _load(name, path):
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


gencatalog = _load("gencatalog", GENCAT)

# The uprobe targets of the blktgt contract, plus two a uprobe would miss:
# a global function the compiler also inlines into main(), and a static
# one it only keeps as a .constprop clone.
UPROBE_TARGETS = r"""
struct bdev_io;
struct bdev;
int bdev_submit(struct bdev_io *io);
void bdev_io_complete(struct bdev_io *io);
int64_t bdev_execute(struct bdev *b, uint32_t type, uint64_t offset,
                     uint64_t len, void *buf, int fua);
int helper_inlined(int x);
__attribute__((noinline)) int bdev_submit(struct bdev_io *io)
{ __asm__ volatile("" ::: "memory"); return io ? 0 : -22; }
__attribute__((noinline)) void bdev_io_complete(struct bdev_io *io)
{ __asm__ volatile("" : : "r"(io) : "memory"); }
__attribute__((noinline)) int64_t bdev_execute(struct bdev *b, uint32_t type,
        uint64_t offset, uint64_t len, void *buf, int fua)
{ __asm__ volatile("" ::: "memory"); return b && buf && fua >= 0 && type < 4 ? (int64_t)(len + offset * 0) : -5; }
int helper_inlined(int x) { return x * 3 + 1; }
static __attribute__((noinline)) int helper_cloned(int x, int k)
{ __asm__ volatile(""); return x * k + (x >> k); }
"""


def build_from_catalog(catalog, outdir, globals_args=False):
    """Build outdir/bin from a catalog: each probe fired once, with values
    in registers (or, with globals_args, read from globals, which the
    compiler turns into sym(%rip) operands)."""
    os.makedirs(outdir, exist_ok=True)
    cat = parse_catalog(catalog)
    d = os.path.join(outdir, "p.d")
    shutil.copy(catalog, d)
    subprocess.run(["dtrace", "-h", "-s", d, "-o",
                    os.path.join(outdir, "sdt.h")], check=True)
    with open(os.path.join(outdir, "probes.h"), "w") as f:
        f.write(gencatalog.header(cat, d, "sdt.h"))
    subprocess.run(["dtrace", "-G", "-s", d, "-o",
                    os.path.join(outdir, "p.o")], check=True)
    src = ['#include <stdint.h>', '#include "probes.h"',
           'static char names[4][16] = {"alpha", "beta", "gamma", "delta"};',
           'static void *ptr = names;',
           'volatile uint64_t g64 = 7;', 'volatile int32_t g32 = -5;',
           UPROBE_TARGETS,
           "int main(int argc, char **argv) {",
           "\tuint64_t v64 = (uint64_t)argc * 7; int32_t v32 = -argc;",
           "\t(void)v64; (void)v32;",
           "\tint r = bdev_submit((struct bdev_io *)argv) + helper_inlined(argc)"
           " + helper_cloned(argc, 5) + helper_cloned(argc + 1, 5);",
           "\tbdev_io_complete((struct bdev_io *)argv);",
           "\tr += (int)bdev_execute((struct bdev *)argv, 0, 0, 4096, argv, 0);"]
    for p in cat["probes"]:
        vals = []
        for i, a in enumerate(p["args"]):
            if a["type"] == "char *":
                vals.append(f"names[{i % 4}]")
            elif a["type"] == "void *":
                vals.append("ptr")
            elif globals_args:
                vals.append("g64" if a["size"] == 8 else "g32")
            else:
                vals.append(f"v64 + {i}" if a["size"] == 8 else f"v32 + {i}")
        src.append(f"\t{gencatalog.macro_name(cat['provider'], p['name'])}"
                   f"({', '.join(vals)});")
    src += ["\treturn r == 12345;", "}"]
    c = os.path.join(outdir, "t.c")
    with open(c, "w") as f:
        f.write("\n".join(src) + "\n")
    exe = os.path.join(outdir, "bin")
    subprocess.run(["cc", "-O2", "-g", "-Wall", "-Werror", "-I", outdir, c,
                    os.path.join(outdir, "p.o"), "-o", exe], check=True)
    return exe


@pytest.fixture(scope="module")
def fixbin(tmp_path_factory):
    return build_from_catalog(CATALOG, str(tmp_path_factory.mktemp("fixbin")))


def run(*args, cwd=FIX):
    r = subprocess.run([probekit.PYTHON, PROBECHECK, *args], cwd=cwd,
                       capture_output=True, text=True, timeout=120)
    errors = [ln for ln in r.stderr.splitlines()
              if not ln.startswith("probekit-check: ")]
    return r, errors


def assert_errors(errors, expected):
    """expected: [(file:line: probe:, message fragment)], all of them and
    nothing else."""
    missing = [e for e in expected
               if not any(ln.startswith(e[0] + " ") and e[1] in ln
                          for ln in errors)]
    assert not missing, ("not reported: %r\ngot:\n%s" % (missing, "\n".join(errors)))
    assert len(errors) == len(expected), "\n".join(errors)


def coverage(stdout):
    m = re.search(r"coverage: (\d+) of (\d+) ", stdout)
    assert m, stdout
    return int(m.group(1)), int(m.group(2))


def catalog_line(name, path=CATALOG):
    for p in parse_catalog(path)["probes"]:
        if p["name"] == name:
            return p["line"]
    raise KeyError(name)


def provider_line(path=CATALOG):
    with open(path) as f:
        for i, ln in enumerate(f, 1):
            if re.match(r"\s*provider\s", ln):
                return i
    raise AssertionError("no provider line")


# --- 1. catalog against binary ------------------------------------------------

def test_binary_built_from_catalog_is_clean(fixbin):
    r, errors = run("--binary", fixbin, "--catalog", CATALOG)
    assert r.returncode == 0, r.stderr
    assert errors == []
    n = len(parse_catalog(CATALOG)["probes"])
    assert coverage(r.stdout) == (0, n)
    # Arguments the installed bpftrace cannot reach (bpftrace 0.17 reads
    # six; as many as it reads, detected) are worth a note, not an error.
    n = features.bpftrace()["max_args"]
    late = [p for p in parse_catalog(CATALOG)["probes"]
            if len(p["args"]) > n]
    notes = [ln for ln in r.stdout.splitlines() if "probekit-check: note:" in ln]
    assert len(notes) == len(late), r.stdout
    for p, ln in zip(late, notes):
        assert f"{CATALOG}:{p['line']}: blktgt:{p['name']}: arg{n} " in ln, ln
        assert f"beyond {BT}'s arg0..arg{n - 1}" in ln


def test_probe_renamed_in_catalog_only(fixbin, tmp_path):
    cat = tmp_path / "blktgt.d"
    text = open(CATALOG).read()
    assert text.count("probe io__submit(") == 1
    cat.write_text(text.replace("probe io__submit(", "probe io__queue("))
    r, errors = run("--binary", fixbin, "--catalog", str(cat))
    assert r.returncode == 1
    assert_errors(errors, [
        (f"{cat}:{catalog_line('io__queue', str(cat))}: blktgt:io__queue:",
         f"in the catalog but not in {fixbin} (renamed from io__submit?)"),
        (f"{cat}:{provider_line(str(cat))}: blktgt:io__submit:",
         f"in {fixbin} but not in the catalog (renamed to io__queue?)"),
    ])


def test_probe_missing_from_binary_and_size_changed(tmp_path):
    """A binary built from an older catalog: one probe missing, one
    argument narrower than the catalog now says."""
    old = tmp_path / "old.d"
    text = open(CATALOG).read()
    text = re.sub(r"\n[^\n]*\n\tprobe workload__done\([^)]*\);", "", text)
    text = text.replace("probe rpc__done(uint64_t id, char *method, int32_t status)",
                        "probe rpc__done(uint64_t id, char *method, int16_t status)")
    old.write_text(text)
    exe = build_from_catalog(str(old), str(tmp_path / "old"))
    r, errors = run("--binary", exe, "--catalog", CATALOG)
    assert r.returncode == 1
    assert_errors(errors, [
        (f"{CATALOG}:{catalog_line('workload__done')}: blktgt:workload__done:",
         f"in the catalog but not in {exe}"),
        (f"{CATALOG}:{catalog_line('rpc__done')}: blktgt:rpc__done:",
         "arg2 'int32_t status' is 4 bytes in the catalog but 2 in the binary"),
    ])


def test_symbol_relative_operands_are_refused(tmp_path):
    """Globals passed straight to a probe become sym(%rip) operands, which
    bpftrace 0.17 reads as garbage and no libbpf up to 1.7 parses."""
    exe = build_from_catalog(CATALOG, str(tmp_path / "g"), globals_args=True)
    notes = sdtnotes.read_probes(exe)
    rip = sorted({n.name for n in notes if "(%rip)" in n.spec})
    assert rip, "the compiler used no sym(%rip) operand"
    r, errors = run("--binary", exe, "--catalog", CATALOG)
    assert r.returncode == 1
    flagged = {re.search(r" blktgt:(\w+): ", e).group(1) for e in errors}
    assert flagged == set(rip), errors
    assert all("symbol-relative operand" in e for e in errors), errors


def test_argspec_operands():
    """Each operand kind is refused by the readers that cannot read it, as
    detected here (features.py), naming them."""
    ok = ["8@%rax", "-4@%r9d", "1@%sil", "8@-16(%rbp)", "4@(%rsp)",
          "8@40(%r12)"]
    bad = {"8@%xmm1": f"{BT} cannot read it",
           "8@counter(%rip)": "symbol-relative operand",
           "-4@40+CheckpointStats(%rip)": "symbol-relative operand",
           "3@%eax": "size must be 1, 2, 4 or 8",
           "8%rax": "not SIZE@OPERAND",
           "4@$0x10": "not decimal"}
    for spec, kind in (("8@8(%rax,%rbx,8)", "index"), ("-4@$-5", "const")):
        who = cannot_read(kind)
        if who:
            bad[spec] = f"{who} cannot read it"
        else:
            ok.append(spec)
    for spec in ok:
        assert argspec.spec_problems(spec) == [], spec
    for spec, why in bad.items():
        probs = argspec.spec_problems(spec)
        assert len(probs) == 1 and why in probs[0][1], (spec, probs)


# --- 2. scripts and tools -----------------------------------------------------

def test_good_files_pass(fixbin):
    r, errors = run("--binary", fixbin, "--catalog", CATALOG, "good.bt",
                    "goodtool")
    assert r.returncode == 0, r.stderr
    assert errors == []
    # io__submit, io__done, rpc__request, rpc__done and the 6 nbd__ probes
    # (good.bt's nbd__* matches every one in the catalog).
    assert coverage(r.stdout)[0] == 10


def broken_bt_errors(fixbin):
    """(file:line: probe:, message fragment) of each error broken.bt has against fixbin and the
    catalog, on the installed bpftrace (whether it reads arg6 is detected)."""
    return [
        ("broken.bt:6: blktgt:io__sbumit:",
         f"no such probe 'usdt:__EXE__:blktgt:io__sbumit' in {fixbin}"
         "; nearest: io__submit"),
        ("broken.bt:13: blktgt:io__done:",
         "arg6 out of range: the probe has 6 arguments, arg0..arg5"),
        ("broken.bt:18: blktgt:io__submit:",
         "str(arg2) reads a string, but arg2 is 'uint32_t type', not a pointer"),
        ("broken.bt:21: uprobe:bdev_sumbit:",
         f"no function 'bdev_sumbit' in the symbol table of {fixbin}"
         "; nearest: bdev_submit"),
        ("broken.bt:26: blktgt:rpc__request:",
         "reads 'blktgt' as a file path; write usdt::blktgt:rpc__request"),
        ("broken.bt:33: blktgt:rpc__done:",
         "retval is only set in a uretprobe, not in a usdt"),
        ("broken.bt:33: blktgt:rpc__done:",
         "printf %d of arg1, which is the string char *method; use %s and str(arg1)"),
        ("broken.bt:36: uprobe:helper_inlined:",
         "also inlined into 1 call site(s)"),
        ("broken.bt:37: uprobe:helper_cloned:",
         "exists only as the compiler's clone helper_cloned.constprop"),
        ("broken.bt:42: uprobe:bdev_execute:",
         "str(arg1) reads a string, but arg1 of bdev_execute() is 'type' "
         "(4 bytes), not a pointer"),
        ("broken.bt:43: uprobe:bdev_execute:",
         "arg6 out of range: bdev_execute() takes 6 arguments, arg0..arg5"),
    ] + ([("broken.bt:46: blktgt:nbd__request:",
           f"arg6 exists, but {BT} reads only arg0..arg5 of a USDT probe")]
         if features.bpftrace()["max_args"] <= 6 else [])


def test_broken_bpftrace_script(fixbin):
    r, errors = run("--binary", fixbin, "--catalog", CATALOG, "broken.bt")
    assert r.returncode == 1
    assert_errors(errors, broken_bt_errors(fixbin))


def test_json_report_holds_what_the_text_says(fixbin):
    """-j: the same errors (file, line, probe, message), notes and
    coverage as the text, as one JSON object on stdout and nothing on
    stderr; the exit status is the text's."""
    import json
    args = ("--binary", fixbin, "--catalog", CATALOG, "broken.bt", "good.bt")
    text, errors = run(*args)
    r, _ = run("-j", *args)
    assert (text.returncode, r.returncode, r.stderr) == (1, 1, "")
    obj = json.loads(r.stdout)
    assert set(obj) == {"findings", "coverage", "errors"}
    found = [f for f in obj["findings"] if f["severity"] == "error"]
    # broken.bt's errors; good.bt has none.
    want = len(broken_bt_errors(fixbin))
    assert len(found) == len(errors) == obj["errors"] == want
    assert [f"{f['file']}:{f['line']}: {f['probe']}: {f['message']}"
            for f in found] == errors
    assert text.stderr.splitlines()[-1] == f"probekit-check: {want} errors"
    notes = [f["message"] for f in obj["findings"] if f["severity"] == "note"]
    assert [f"probekit-check: note: {m}" for m in notes] == \
        text.stdout.splitlines()[:-1]
    # One note per catalog probe with arguments past those the installed
    # bpftrace reads (detected: six for 0.17, twelve for 0.27).
    assert len(notes) == len([p for p in parse_catalog(CATALOG)["probes"]
                              if len(p["args"]) > features.bpftrace()["max_args"]])
    cov = obj["coverage"]
    assert (cov["used"], cov["total"]) == coverage(text.stdout)
    assert (cov["of"], cov["files"]) == ("catalog probes", 2)
    assert text.stdout.splitlines()[-1].endswith(
        "used by 2 files; not used: " + ", ".join(cov["unused"]))
    assert len(cov["unused"]) == cov["total"] - cov["used"]


def test_broken_bcc_tool(fixbin):
    r, errors = run("--binary", fixbin, "--catalog", CATALOG, "brokentool")
    assert r.returncode == 1
    unset = "BCC returns -1 and leaves the variable unset"
    assert_errors(errors, [
        ("brokentool:22: blktgt:io__submit:",
         "bpf_usdt_readarg(3) into 'u64 type' (8 bytes) but arg2 is "
         f"'uint32_t type' (4 bytes): {unset}"),
        ("brokentool:23: blktgt:io__submit:",
         "bpf_usdt_readarg(7) out of range: the probe has 6 arguments, "
         "1..6 (BCC counts from 1)"),
        ("brokentool:24: blktgt:io__submit:",
         "bpf_usdt_readarg(5) into 'u32 len32' (4 bytes) but arg4 is "
         f"'uint64_t len' (8 bytes): {unset}"),
        ("brokentool:27: blktgt:io__submit:",
         "bpf_usdt_readarg_p(3) reads a string, but arg2 is 'uint32_t type'"),
        ("brokentool:34: blktgt:io__done:",
         "bpf_usdt_readarg(3) reads a string, but arg2 is 'uint32_t type'"),
        ("brokentool:34: blktgt:io__done:",
         f"bpf_usdt_readarg(3) into 'u64 addr' (8 bytes) but arg2 is "
         f"'uint32_t type' (4 bytes): {unset}"),
        ("brokentool:41: orphan:",
         "bpf_usdt_readarg(1) in orphan(), which no enable_probe attaches"),
        ("brokentool:46: uprobe:on_exec:",
         "PT_REGS_RC in a function attached only as a uprobe"),
        ("brokentool:50: uprobe:bdev_submit:",
         "PT_REGS_PARM2 out of range: bdev_submit() takes 1 argument"),
        ("brokentool:57: io__finish:",
         f"no such probe 'io__finish' in {fixbin}"),
        ("brokentool:59: uprobe:bdev_execute:",
         "target '/nonexistent/blktgt' does not exist"),
        ("brokentool:60: uprobe:bdev_exec:",
         f"no function 'bdev_exec' in the symbol table of {fixbin}"),
    ])


def test_broken_libbpf_program(fixbin):
    r, errors = run("--binary", fixbin, "--catalog", CATALOG, "badlat.bpf.c")
    assert r.returncode == 1
    assert_errors(errors, [
        ("badlat.bpf.c:15: blktgt:io__submit:",
         "bpf_usdt_arg(ctx, 6) out of range: the probe has 6 arguments, "
         "0..5 (libbpf counts from 0)"),
        ("badlat.bpf.c:20: blktgt:io__done:",
         "BPF_USDT(on_done) takes 7 arguments but the probe has 6"),
        ("badlat.bpf.c:27: blktgt:rpc__request:",
         "BPF_USDT(on_request) takes '__u32 method' (4 bytes) as arg1, "
         "'char *method' (8 bytes): it is truncated"),
        ("badlat.c:7: uprobe:bdev_execute_x:",
         f"no function 'bdev_execute_x' in the symbol table of {fixbin}"),
    ])


def test_libbpf_sec_with_path(fixbin, tmp_path):
    """SEC("usdt/PATH:provider:probe") and SEC("uprobe/PATH:function")."""
    src = tmp_path / "sec.bpf.c"
    src.write_text(
        '#include "vmlinux.h"\n'
        f'SEC("usdt/{fixbin}:blktgt:nbd__reply")\n'
        "int BPF_USDT(on_reply, __u64 conn, __u64 handle, __u32 cmd,\n"
        "\t     __u32 error)\n{\n\treturn 0;\n}\n\n"
        f'SEC("usdt/{fixbin}:blktgt:nbd__replied")\n'
        "int BPF_USDT(on_replied, __u64 conn)\n{\n\treturn 0;\n}\n\n"
        f'SEC("uretprobe/{fixbin}:bdev_execute")\n'
        "int BPF_KRETPROBE(on_exec_ret, long ret)\n{\n\treturn 0;\n}\n\n"
        f'SEC("uprobe/{fixbin}:bdev_execut")\n'
        "int BPF_KPROBE(on_exec)\n{\n\treturn 0;\n}\n")
    r, errors = run("--binary", fixbin, "--catalog", CATALOG, str(src))
    assert r.returncode == 1
    assert_errors(errors, [
        (f"{src}:9: blktgt:nbd__replied:",
         "no such probe 'blktgt:nbd__replied'"),
        (f"{src}:21: uprobe:bdev_execut:",
         "no function 'bdev_execut' in the symbol table"),
    ])


def test_catalog_without_binary(tmp_path):
    """With only a catalog, scripts are checked against its declarations."""
    r, errors = run("--catalog", CATALOG, "good.bt")
    assert r.returncode == 0, r.stderr
    r, errors = run("--catalog", CATALOG, "broken.bt")
    assert r.returncode == 1
    got = {e.split(": ", 1)[0] for e in errors}
    assert {"broken.bt:6", "broken.bt:13", "broken.bt:18", "broken.bt:26",
            "broken.bt:33"} <= got, errors


def test_any_helper_given_probe_pairs(tmp_path):
    """A tool's own helper that takes (probe, fn_name) pairs as probes= is
    checked as probekit's usdt_context is: each probe exists, each
    fn_name is a function of the program, and a list that is not literal
    pairs is one error."""
    tool = tmp_path / "pairtool"
    tool.write_text("""#!/usr/bin/python3
from bcc import BPF
text = \"\"\"
int on_submit(struct pt_regs *ctx) { u64 id = 0; bpf_usdt_readarg(1, ctx, &id); return 0; }
int on_done(struct pt_regs *ctx) { u32 st = 0; bpf_usdt_readarg(5, ctx, &st); return 0; }
\"\"\"
attach_all(pid, probes=[("blktgt:io__submit", "on_submit"),
                        ("blktgt:io__dome", "on_done"),
                        ("blktgt:io__done", "on_gone")])
attach_all(pid, probes=[name for name in ()])
""")
    r, errors = run("--catalog", CATALOG, str(tool))
    assert r.returncode == 1
    t = str(tool)
    assert_errors(errors, [
        (f"{t}:7: blktgt:io__dome:", "no such probe"),
        (f"{t}:7: blktgt:io__done:", "fn_name 'on_gone' is not a function"),
        (f"{t}:10: -:", "attach_all: probes must be a literal list"),
    ])


# --- a binary that is not ours: the notes alone --------------------------------

# make deps installs python3, whose python3.X has stapsdt notes on every
# release (the test asserts it has them).
needs_py_sdt = pytest.mark.needs(PY_SDT)


def python_fixtures(tmp_path):
    """The python_* fixtures with @PYTHON@ replaced by the python3.X
    found here (thirdparty.PY_SDT), in tmp_path under their own names."""
    for name in ("python_ok.bt", "python_bad.bt", "python_bcc"):
        with open(os.path.join(FIX, name)) as f:
            text = f.read().replace("@PYTHON@", PY_SDT)
        (tmp_path / name).write_text(text)
    return tmp_path


@needs_py_sdt
def test_python_probes_notes_only(tmp_path):
    """The probes every CPython 3 since 3.8 has (audit, gc__*, import__*;
    3.12 dropped function__entry, function__return and line), checked
    against the notes alone.  The operand of import__find__load__done's
    int and the number of probes are read from the binary."""
    fix = python_fixtures(tmp_path)
    found = sdtnotes.by_name(sdtnotes.read_probes(PY_SDT))
    assert found, f"{PY_SDT} has no stapsdt notes"
    found_op = found["python:import__find__load__done"][0].args[1].operand
    r, errors = run("--binary", PY_SDT, "python_ok.bt", cwd=fix)
    assert r.returncode == 0, r.stderr
    assert errors == []
    assert f"coverage: 3 of {len(found)} probes of {PY_SDT}" in r.stdout
    r, errors = run("--binary", PY_SDT, "python_bad.bt", cwd=fix)
    assert r.returncode == 1
    assert_errors(errors, [
        ("python_bad.bt:7: python:import__find__load__done:",
         "str(arg1) reads a string, but arg1 is a 4-byte signed integer "
         f"(-4@{found_op}), not a pointer"),
        ("python_bad.bt:12: python:audit:",
         "arg2 out of range: the probe has 2 arguments, arg0..arg1"),
        ("python_bad.bt:17: python:gc__done:",
         "str(arg0) reads a string, but arg0 is an 8-byte signed integer"),
        ("python_bad.bt:20: python:import__find__load__dome:",
         f"no such probe 'usdt:{PY_SDT}:python:import__find__load__dome' "
         f"in {PY_SDT}; nearest: import__find__load__done"),
    ])
    # A BCC tool, USDT(path=...) on the same binary: lines 12 to 14 are
    # right (a pointer read as a u64, a string read of a pointer, an int).
    r, errors = run("--binary", PY_SDT, "python_bcc", cwd=fix)
    assert r.returncode == 1
    assert_errors(errors, [
        ("python_bcc:15: python:import__find__load__done:",
         "bpf_usdt_readarg(2) into 'u64 found64' (8 bytes) but arg1 is a "
         f"4-byte signed integer (-4@{found_op}): BCC returns -1 and leaves "
         "the variable unset"),
        ("python_bcc:16: python:import__find__load__done:",
         "bpf_usdt_readarg_p(2) reads a string, but arg1 is a 4-byte signed "
         f"integer (-4@{found_op}), not a pointer"),
    ])


# --- bad input -------------------------------------------------------------------

def test_bad_input(fixbin, tmp_path):
    r, _ = run()
    # A usage error: exit 2 and exactly one line, as every command's
    # (test_conventions.py); it was exit 1 with the usage printed first.
    assert (r.returncode, r.stderr) == (
        2, "probekit-check: give --binary, --catalog or both (or --pid) "
        "(see --help)\n")
    r, errors = run("--binary", fixbin, str(tmp_path / "nope.bt"))
    assert r.returncode == 1
    assert errors == [f"{tmp_path}/nope.bt:1: -: cannot read: "
                      "No such file or directory"]
    notelf = tmp_path / "x"
    notelf.write_text("not an ELF file\n")
    r, _ = run("--binary", str(notelf))
    assert r.returncode == 1
    assert r.stderr.startswith(f"probekit-check: {notelf}: cannot read as ELF")
    bad = tmp_path / "bad.d"
    bad.write_text("provider p {\n\tprobe a(float x);\n};\n")
    r, _ = run("--binary", fixbin, "--catalog", str(bad))
    assert r.returncode == 1 and f"{bad}:2:" in r.stderr


# --- the project's own scripts and tools -----------------------------------------

def lint_files():
    """Exactly what 'make lint' checks: the Makefile's LINT_FILES, asked of
    make itself (nothing is built)."""
    out = subprocess.run(
        ["make", "-s", "--no-print-directory",
         "--eval=print-lint-files: ; @echo $(LINT_FILES)", "print-lint-files"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = out.split()
    assert files, "LINT_FILES is empty"
    # What the Makefile's wildcards must have found, but for the generic
    # tools, which attach whatever their command line names.
    generic = {"libbpf/usdtlat.bpf.c", "libbpf/usdtcount.bpf.c"}
    for pattern in ("bt/*.bt", "libbpf/*.bpf.c"):
        for f in glob.glob(os.path.join(ROOT, pattern)):
            rel = os.path.relpath(f, ROOT)
            assert (rel in files) != (rel in generic), (f, files)
    return files


def test_project_files_pass_against_catalog_binary(fixbin):
    r, errors = run("--binary", fixbin, "--catalog", CATALOG, *lint_files(),
                    cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert errors == []


def test_project_files_pass_against_blktgt(blktgt_bin):
    r, errors = run("--binary", blktgt_bin, "--catalog", CATALOG,
                    *lint_files(), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert errors == []
    print(r.stdout)


def test_bpftrace_syntax_corners(fixbin, tmp_path):
    """Probes named in comments are not probes; braces in strings do not
    end a block; a predicate's reads count; quoted paths, U: and ur:."""
    bt = tmp_path / "corners.bt"
    bt.write_text(
        "#!/usr/bin/env bpftrace\n"
        "#include <linux/types.h>\n"
        "/* usdt:__EXE__:blktgt:nope { arg9 } */\n"
        "struct foo { int x; char y[4]; }\n"
        "// usdt:__EXE__:blktgt:nope2 {\n"
        'BEGIN { printf("{ probekit: tracing }\\n"); }\n'
        "usdt:__EXE__:blktgt:io__submit /arg2 == 1 && arg9 > 0/\n"
        "{\n"
        '\tif (arg2 == 0) { printf("}{ %s\\n", str(arg5)); } else { @x = arg0; }\n'
        "}\n"
        f'usdt:"{fixbin}":blktgt:io__done {{ @y[str(arg2)] = count(); }}\n'
        'U::blktgt:rpc__request { printf("%s %s\\n", arg1, str(arg1)); }\n'
        "ur:__EXE__:bdev_submit { @r = arg0; }\n")
    r, errors = run("--binary", fixbin, "--catalog", CATALOG, str(bt))
    assert r.returncode == 1
    assert_errors(errors, [
        (f"{bt}:7: blktgt:io__submit:",
         "arg9 out of range: the probe has 6 arguments, arg0..arg5"),
        (f"{bt}:11: blktgt:io__done:",
         "str(arg2) reads a string, but arg2 is 'uint32_t type', not a pointer"),
        (f"{bt}:12: blktgt:rpc__request:",
         "printf %s of arg1, an integer to bpftrace; use str(arg1)"),
        (f"{bt}:13: uretprobe:bdev_submit:",
         "arg0 in a uretprobe: arguments are gone at return"),
    ])


def test_argument_names_and_types_from_the_binary(blktgt_bin, tmp_path):
    """With no catalog, the binary's probekit note gives each probe's
    argument names and C types: args.NAME resolves per probe (len is
    io__submit's arg4 and io__done's arg3), a misspelt one names the
    nearest, and str() of an integer, by name or as argN, names its type;
    printf's conversions are checked against a name's type as an argN's.
    A copy without the note takes argN only: a name is one line each."""
    bt = tmp_path / "names.bt"
    bt.write_text(
        "usdt:__EXE__:blktgt:io__submit { @a = sum(args.len); "
        "@b[str(args.bdev)] = count(); }\n"
        "usdt:__EXE__:blktgt:io__done { @c = sum(args->len); }\n"
        "usdt:__EXE__:blktgt:rpc__done /args.status < 0/ { @e = count(); }\n"
        "usdt:__EXE__:blktgt:io__submit { @d = sum(args.lne); }\n"
        "usdt:__EXE__:blktgt:io__done { printf(\"%s\\n\", str(args.len)); }\n"
        "usdt:__EXE__:blktgt:io__done { printf(\"%s\\n\", str(arg3)); }\n"
        "usdt:__EXE__:blktgt:rpc__done { printf(\"%d %s\\n\", args.method, args.status); }\n")
    r, errors = run("--binary", blktgt_bin, str(bt))
    assert r.returncode == 1
    assert errors == [
        f"{bt}:4: blktgt:io__submit: probe blktgt:io__submit has no argument "
        "lne; nearest: len",
        f"{bt}:5: blktgt:io__done: str(args.len) reads a string, but arg3 is "
        "'uint64_t len', not a pointer",
        f"{bt}:6: blktgt:io__done: str(arg3) reads a string, but arg3 is "
        "'uint64_t len', not a pointer",
        f"{bt}:7: blktgt:rpc__done: printf %d of args.method, which is the "
        "string char *method; use %s and str(args.method)",
        f"{bt}:7: blktgt:rpc__done: printf %s of args.status, which is the "
        "integer int32_t status; use %d"], r.stderr
    bare = tmp_path / "blktgt"
    subprocess.run(["objcopy", "--remove-section=.note.probekit", blktgt_bin,
                    bare], check=True)
    bt.write_text("usdt:__EXE__:blktgt:io__submit { @a = sum(args.len); }\n"
                  "usdt:__EXE__:blktgt:io__done { @a = sum(arg3); }\n")
    r, errors = run("--binary", str(bare), str(bt))
    assert r.returncode == 1
    assert errors == [
        f"{bt}:1: blktgt:io__submit: {bare} has no argument names for probe "
        "blktgt:io__submit (it was not built with probekit's header); give "
        "the argument by number, arg0 on"], r.stderr
