# SPDX-License-Identifier: BSD-2-Clause
"""What the installed bpftrace and libbpf read, found by trying them.

probekit-check's and probekit-list's rules are the installed tools'
rules, detected by behaviour, never by version: a fixture executable
(assembled here from FIXTURE_PROBES with the C compiler, x86_64) fires
one USDT probe per operand kind, each argument holding a known value.

- bpftrace runs the fixture (-c) with a program that prints every
  argument; a kind is read when bpftrace compiles the program and prints
  the value the fixture put there (bpftrace 0.17 compiles a
  symbol-relative operand and prints garbage: compiling is not enough).
  Whether it refuses a whole probe for one operand it cannot read, read
  or not (bpftrace 0.27 does), is tried on a probe of two.  The same run
  tells how many USDT arguments it reads (arg0..arg11, or fewer) and
  whether str() takes a char array member of a struct.
- libbpf: a BPF program with libbpf's own USDT support (usdt.bpf.h) is
  built with clang and loaded through the installed libbpf.so (ctypes);
  a kind is read when bpf_program__attach_usdt() accepts the fixture's
  probe of that kind (libbpf parses every operand at attach time).

Detection needs root (BPF), cc, and for libbpf clang; it costs a few
seconds, so its answer is cached in ~/.cache/probekit (XDG_CACHE_HOME,
or PROBEKIT_CACHE_DIR), keyed by the identity of the bpftrace binary and
of libbpf.so (path, inode, size, mtime) and of this file, so upgrading
either tool detects again.  At most CACHE_KEEP answers are kept.

When a tool cannot be tried (not installed, not root, no compiler), its
rules fall back to FALLBACK, what the oldest releases probekit knows
read (bpftrace 0.17's and libbpf 1.1's, as detected on Debian 12), and
why says so: probekit-check prints it as a notice, never silently.
"""

import ctypes
import ctypes.util
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

# The operand kinds of argspec.parse_operand the fixture has, each as
# (probe name, spec, value the reader must print).  The fixture sets
# %edi to 23, puts 1009 at 8(%rsp), 7919 at label and 104729 at
# table + 4 * 2 + 8 before it fires them.
FIXTURE_PROBES = {
    "reg": ("k_reg", "-4@%edi", 23),
    "mem": ("k_mem", "8@8(%rsp)", 1009),
    "const": ("k_const", "-4@$20011", 20011),
    "sym": ("k_sym", "4@label(%rip)", 7919),
    "index": ("k_index", "4@8(%rax,%rbx,4)", 104729),
}
# A probe of 12 arguments (sys/sdt.h's most), argument i holding 100 + i,
# and one whose argument points at struct pk_feat { char name[16]; }.
MANY = "k_many"
MANY_REGS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9", "r10", "r11", "r12",
             "r13", "r14", "r15")
STRUCT = "k_struct"
# A probe whose arg0 every reader reads and whose arg1 (symbol-relative)
# none known does: a reader that refuses it refuses a probe for any
# operand it cannot parse, read or not (libbpf does; bpftrace 0.27 too).
PAIR = ("k_pair", "-4@%edi 4@label(%rip)")
STRUCT_TEXT = "probekit"
PROVIDER = "probekit"

# What the oldest bpftrace and libbpf probekit knows read on x86_64, as
# detected on Debian 12 (bpftrace 0.17, libbpf 1.1; Debian 13's bpftrace
# 0.23 and libbpf 1.5 read the same): the rules when a tool cannot be
# tried.
FALLBACK = {
    "bpftrace": {"kinds": ["reg", "mem", "const", "index"], "max_args": 6,
                 "str_array": False, "whole_probe": False},
    "libbpf": {"kinds": ["const", "reg", "mem"]},
}
ASK_TIMEOUT = 60        # seconds per bpftrace run (LLVM, a loaded machine)
CACHE_KEEP = 8


def fixture_asm():
    """The fixture's x86_64 assembly: sets each argument's value, fires
    each probe once, exits 0."""
    # The values in .data are stored at run time too: a page the process
    # has not touched is not mapped yet, and a BPF read of it fails (reads
    # 0), which would be taken for a reader that cannot read the operand.
    # .data is one page (data_page aligns it).
    a = [".text", ".globl _start", "_start:",
         "\tmovl $7919, label(%rip)", "\tmovl $104729, table+16(%rip)",
         "\tsubq $16, %rsp", "\tmovq $1009, 8(%rsp)",
         "\tmovl $23, %edi",
         "\tleaq table(%rip), %rax", "\tmovq $2, %rbx"]
    notes = []

    def site(name, spec):
        n = len(notes)
        a.append(f"{name}_site: nop")
        notes.extend([
            ".balign 4", f".4byte .Ln{n}b-.Ln{n}a, .Ln{n}d-.Ln{n}c, 3",
            f".Ln{n}a: .asciz \"stapsdt\"", f".Ln{n}b: .balign 4",
            f".Ln{n}c: .8byte {name}_site", ".8byte _.stapsdt.base",
            ".8byte 0", f".asciz \"{PROVIDER}\"", f".asciz \"{name}\"",
            f".asciz \"{spec}\"", f".Ln{n}d: .balign 4"])

    for name, spec, _ in FIXTURE_PROBES.values():
        site(name, spec)
    site(*PAIR)         # %edi still 23
    for i, r in enumerate(MANY_REGS):
        a.append(f"\tmovq ${100 + i}, %{r}")
    site(MANY, " ".join(f"8@%{r}" for r in MANY_REGS))
    a.append("\tleaq pk_feat(%rip), %rdi")
    site(STRUCT, "8@%rdi")
    a += ["\tmovl $60, %eax", "\txorl %edi, %edi", "\tsyscall",
          ".data", ".balign 4096", "label: .long 7919",
          "table: .long 0, 0, 0, 0, 104729",
          f"pk_feat: .asciz \"{STRUCT_TEXT}\"", ".space 7",
          ".section .note.stapsdt,\"?\",\"note\""] + notes + [
          ".section .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat",
          ".weak _.stapsdt.base", ".hidden _.stapsdt.base",
          "_.stapsdt.base: .space 1"]
    return "\n".join(a) + "\n"


class NotDetected(Exception):
    """A tool that cannot be tried here, and why (one line)."""


def _run(argv, **kw):
    return subprocess.run(argv, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, errors="replace",
                          timeout=kw.pop("timeout", ASK_TIMEOUT), **kw)


def build_fixture(d):
    """The path of the fixture executable, assembled in directory d."""
    cc = shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")
    if not cc:
        raise NotDetected("no C compiler (cc) to build the fixture")
    if os.uname().machine != "x86_64":
        raise NotDetected("the fixture is x86_64 assembly; this machine "
                          f"is {os.uname().machine}")
    src, exe = os.path.join(d, "fixture.s"), os.path.join(d, "fixture")
    with open(src, "w") as f:
        f.write(fixture_asm())
    r = _run([cc, "-nostdlib", "-static", "-o", exe, src])
    if r.returncode:
        raise NotDetected(f"cannot build the fixture: {r.stderr.strip()}")
    return exe


# --- bpftrace -----------------------------------------------------------------

def bpftrace_path():
    """The bpftrace the wrapper would run: $BPFTRACE, else bpftrace on PATH."""
    b = os.environ.get("BPFTRACE") or "bpftrace"
    return shutil.which(b) if "/" not in b else \
        (b if os.access(b, os.X_OK) and os.path.isfile(b) else None)


def _bt_program(blocks, struct=False):
    head = "struct pk_feat { char name[16]; }\n" if struct else ""
    return head + "\n".join(blocks) + "\n"


def _bt_block(exe, probe, body):
    return f'usdt:{exe}:{PROVIDER}:{probe} {{ {body} }}'


def _bt_run(bt, exe, program):
    """bpftrace's output lines running the fixture under program, or None
    when it refuses the program."""
    r = _run([bt, "-c", exe, "-e", program])
    if r.returncode:
        return None
    return r.stdout.splitlines()


def detect_bpftrace(exe):
    bt = bpftrace_path()
    if not bt:
        raise NotDetected("no bpftrace to try")
    if os.geteuid() != 0:
        raise NotDetected("trying bpftrace needs root")

    def reads(kind):
        name, _, value = FIXTURE_PROBES[kind]
        out = _bt_run(bt, exe, _bt_program([_bt_block(
            exe, name, f'printf("{kind} %d\\n", arg0);')]))
        return out is not None and f"{kind} {value}" in out

    # One run for every kind first; one per kind only when that fails
    # (bpftrace refuses a whole program for one operand it cannot read).
    blocks = [_bt_block(exe, name, f'printf("{k} %d\\n", arg0);')
              for k, (name, _, _) in FIXTURE_PROBES.items()]
    out = _bt_run(bt, exe, _bt_program(blocks))
    if out is not None:
        kinds = [k for k, (_, _, v) in FIXTURE_PROBES.items()
                 if f"{k} {v}" in out]
    else:
        kinds = [k for k in FIXTURE_PROBES if reads(k)]
    if "reg" not in kinds:
        raise NotDetected(f"{bt} reads no USDT argument of the fixture")
    # The most arguments it reads: all 12, else the first 6.
    max_args = 0
    for n in (len(MANY_REGS), 6):
        body = " ".join(f'printf("a{i} %d\\n", arg{i});' for i in range(n))
        out = _bt_run(bt, exe, _bt_program([_bt_block(exe, MANY, body)]))
        if out is not None and all(f"a{i} {100 + i}" in out
                                   for i in range(n)):
            max_args = n
            break
    out = _bt_run(bt, exe, _bt_program([_bt_block(
        exe, STRUCT, 'printf("s %s\\n", str(((struct pk_feat *)arg0)->name));')],
        struct=True))
    out = _bt_run(bt, exe, _bt_program([_bt_block(
        exe, PAIR[0], 'printf("p %d\\n", arg0);')]))
    whole = not (out is not None and "p 23" in out)
    return {"kinds": kinds, "max_args": max_args or 6, "whole_probe": whole,
            "str_array": out is not None and f"s {STRUCT_TEXT}" in out}


# --- libbpf ---------------------------------------------------------------------

# libbpf's USDT support on the BPF side, with one program that reads
# nothing: attaching it is what makes libbpf parse every operand.
LIBBPF_BPF_C = r"""
#include <stdbool.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
char LICENSE[] SEC("license") = "GPL";
SEC("usdt") int BPF_USDT(pk_feat) { return 0; }
"""


def libbpf_path():
    """The installed libbpf.so the dynamic linker finds, or None."""
    name = ctypes.util.find_library("bpf")
    if not name:
        return None
    for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
              "/usr/lib64", "/usr/lib", "/usr/local/lib"):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return os.path.realpath(p)
    return name


def detect_libbpf(exe, d):
    so = libbpf_path()
    if not so:
        raise NotDetected("no libbpf.so to try")
    if os.geteuid() != 0:
        raise NotDetected("trying libbpf needs root")
    clang = shutil.which("clang")
    if not clang:
        raise NotDetected("no clang to build the BPF side of the test")
    src, obj = os.path.join(d, "feat.bpf.c"), os.path.join(d, "feat.bpf.o")
    with open(src, "w") as f:
        f.write(LIBBPF_BPF_C)
    r = _run([clang, "-g", "-O2", "-target", "bpf", "-D__TARGET_ARCH_x86",
              "-I/usr/include/x86_64-linux-gnu", "-c", src, "-o", obj])
    if r.returncode:
        raise NotDetected("cannot build the BPF side: "
                          + (r.stderr.strip().splitlines() or ["?"])[-1])
    lib = ctypes.CDLL(so, use_errno=True)
    lib.bpf_object__open_file.restype = ctypes.c_void_p
    lib.bpf_object__open_file.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    lib.bpf_object__load.argtypes = [ctypes.c_void_p]
    lib.bpf_object__close.argtypes = [ctypes.c_void_p]
    lib.bpf_object__find_program_by_name.restype = ctypes.c_void_p
    lib.bpf_object__find_program_by_name.argtypes = [ctypes.c_void_p,
                                                     ctypes.c_char_p]
    lib.bpf_program__attach_usdt.restype = ctypes.c_void_p
    lib.bpf_program__attach_usdt.argtypes = [
        ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
        ctypes.c_char_p, ctypes.c_void_p]
    lib.bpf_link__destroy.argtypes = [ctypes.c_void_p]
    # libbpf's warnings (an operand it cannot parse) are the expected
    # answer here, not the user's concern: no print callback.
    PRINT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                             ctypes.c_void_p)
    lib.libbpf_set_print.restype = ctypes.c_void_p
    lib.libbpf_set_print.argtypes = [ctypes.c_void_p]
    lib.libbpf_set_print(None)
    o = lib.bpf_object__open_file(obj.encode(), None)
    if not o:
        raise NotDetected(f"{so} cannot open the test's BPF object")
    try:
        if lib.bpf_object__load(o):
            raise NotDetected(f"{so} cannot load the test's BPF object")
        prog = lib.bpf_object__find_program_by_name(o, b"pk_feat")
        kinds = []
        for kind, (name, _, _) in FIXTURE_PROBES.items():
            link = lib.bpf_program__attach_usdt(
                prog, -1, exe.encode(), PROVIDER.encode(), name.encode(),
                None)
            if link:
                kinds.append(kind)
                lib.bpf_link__destroy(link)
    finally:
        lib.bpf_object__close(o)
    del PRINT
    if "reg" not in kinds:
        raise NotDetected(f"{so} attaches to no USDT probe of the fixture")
    return {"kinds": kinds}


# --- the cache ------------------------------------------------------------------

def _identity(path):
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns]


def cache_dir():
    d = os.environ.get("PROBEKIT_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or \
            os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "probekit")
    return d


def _key():
    with open(os.path.abspath(__file__), "rb") as f:
        me = hashlib.sha256(f.read()).hexdigest()
    key = {"bpftrace": _identity(bpftrace_path()),
           "libbpf": _identity(libbpf_path()), "detector": me,
           "root": os.geteuid() == 0}
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]


def detect():
    """{"bpftrace": {...}, "libbpf": {...}}, each with "why" (a reason it
    fell back to FALLBACK, or None)."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="probekit-feat.") as d:
        try:
            exe = build_fixture(d)
        except NotDetected as e:
            return {t: {**FALLBACK[t], "why": str(e)} for t in FALLBACK}
        for tool, fn in (("bpftrace", lambda: detect_bpftrace(exe)),
                         ("libbpf", lambda: detect_libbpf(exe, d))):
            try:
                out[tool] = {**fn(), "why": None}
            except (NotDetected, OSError, subprocess.SubprocessError) as e:
                out[tool] = {**FALLBACK[tool], "why": str(e)}
    return out


def _store(d, path, result):
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".features.")
    with os.fdopen(fd, "w") as f:
        json.dump(result, f)
    os.replace(tmp, path)
    # Bounded: the newest CACHE_KEEP answers stay.
    old = sorted((e for e in os.scandir(d) if e.name.startswith("features-")),
                 key=lambda e: e.stat().st_mtime_ns, reverse=True)
    for e in old[CACHE_KEEP:]:
        try:
            os.unlink(e.path)
        except OSError:
            pass


@functools.lru_cache(maxsize=None)
def features():
    """The detected (or cached) answer of detect()."""
    d = cache_dir()
    path = os.path.join(d, f"features-{_key()}.json")
    try:
        with open(path) as f:
            got = json.load(f)
        if set(got) == set(FALLBACK):
            return got
    except (OSError, ValueError):
        pass
    got = detect()
    # A fallback for a reason that may pass (a timeout under load) is
    # not kept: the next run tries again.
    if all(v["why"] is None for v in got.values()) or os.geteuid() != 0:
        try:
            _store(d, path, got)
        except OSError:
            pass
    return got


def bpftrace():
    return features()["bpftrace"]


def libbpf():
    return features()["libbpf"]


def main():
    """python3 -m probelib.features: the answer, as JSON."""
    print(json.dumps(features(), indent=1))


if __name__ == "__main__":
    main()
