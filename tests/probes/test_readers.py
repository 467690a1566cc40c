# SPDX-License-Identifier: BSD-2-Clause
"""One reader per format and per language, held to the same fixtures.

probekit reads stapsdt notes and bpftrace scripts twice: in Python
(probes/probelib, for probekit-check and the bcc/ tools) and in C
(probes/usdt, for the wrapper through probekit-scan, and for the C tools).
Each pair is run here on the same inputs and must give the same answer,
which for notes is also readelf's:

  - notes of tests/fixtures/probelib/sites.c + sites_nosem.c, and of blktgt;
  - the __EXE__ attach points of the scripts in tests/fixtures/bt/, whose
    expected references are in refs.json;
  - argument operands, by kind, size, displacement and register, of
    x86_64 and of aarch64 (chosen by the file's e_machine, not the host's);
  - the notes and operands of tests/fixtures/probelib/sites*.c and tests/lib/operands.c
    cross-built for aarch64 by GCC and clang, at -O0 and -O2.

Both readers must also refuse a corrupt or truncated ELF file in the same
one line, without allocating what the file claims."""

import json
import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

import probekit
from notes_readelf import check_against_readelf, prelinked_copy, readelf_notes

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import argspec, bpftrace, notes, registers  # noqa: E402
from readers import (SCAN, SITES_SRC, both_readers, c_args, c_notes, py_notes,
                     scan)
from readers import sites  # noqa: F401 (a fixture)

TESTS = os.path.join(probekit.ROOT, "tests")
LIB = os.path.join(TESTS, "lib")
FIX_BT = os.path.join(TESTS, "fixtures", "bt")


@pytest.mark.needs("readelf")
def test_notes_fixture(sites):
    """Both readers give readelf's notes, with the same file offsets."""
    check_against_readelf(sites)
    got = c_notes(sites)
    assert got == py_notes(sites)
    assert [(n[0], n[1]) for n in got] == [
        ("fix", "hit"), ("fix", "twice"), ("fix", "twice"), ("fix", "konst")]
    hit, konst = got[0], got[3]
    assert hit[5] not in (0, hit[4])        # semaphore offset != address
    assert konst[4] == konst[5] == 0 and konst[6] == "-4@$42"


@pytest.mark.needs("readelf")
def test_notes_blktgt(blktgt_bin):
    got = c_notes(blktgt_bin)
    assert len(got) == len(readelf_notes(blktgt_bin)) > 0
    assert got == py_notes(blktgt_bin)


def test_notes_prelinked(sites, tmp_path):
    """A note whose recorded .stapsdt.base differs from the section's
    address moves its site and semaphore by the difference, in both."""
    moved = str(tmp_path / "moved")
    pc, sem = prelinked_copy(sites, moved, 0x1000)
    got = c_notes(moved)
    assert (got[0][2], got[0][4]) == (pc + 0x1000, sem + 0x1000)
    assert got == py_notes(moved)


def one_error_line(r, path):
    err = r.stderr.decode()
    assert r.returncode == 1 and r.stdout == b"", r
    assert err.count("\n") == 1 and err.startswith("probekit-bpftrace: "), err
    assert path in err, err


@pytest.mark.parametrize("keep", [16, 64, 0.5, -64])
def test_notes_truncated(sites, tmp_path, keep):
    """A truncated file: one line, exit 1, whatever is cut."""
    data = open(sites, "rb").read()
    n = int(len(data) * keep) if isinstance(keep, float) else keep
    cut = str(tmp_path / "cut")
    with open(cut, "wb") as f:
        f.write(data[:n])
    one_error_line(scan("notes", cut, check=False), cut)


LIST = os.path.join(probekit.BUILD, "bin", "probekit-list")
CHECK = os.path.join(probekit.BUILD, "bin", "probekit-check")


def first_note(path):
    """(file bytes, offset of the first stapsdt note's header, its
    namesz, descsz, type, and its provider, name and spec)."""
    data = open(path, "rb").read()
    prov, name, pc, base, sem, spec = readelf_notes(path)[0]
    at = data.index(struct.pack("<3Q", pc, base, sem))
    # The note header sits just before its "stapsdt\0" name and the desc.
    hdr = at - 8 - 12
    return (data, hdr, *struct.unpack_from("<3I", data, hdr),
            prov.encode(), name.encode(), spec.encode())


def mutations(path):
    """{case: (the bytes of a corrupt copy of path, the cause both readers
    must name)}: each a real binary with one thing wrong in its first
    stapsdt note."""
    data, hdr, namesz, descsz, typ, prov, name, spec = first_note(path)
    assert (namesz, typ) == (8, 3)
    desc = hdr + 12 + 8
    strings = desc + 24
    text = prov + b"\0" + name + b"\0" + spec + b"\0"
    assert data[strings:desc + descsz] == text
    # The three strings run together: a probe of two or more arguments
    # has a space in its spec, which no provider has.
    assert b" " in spec and len(prov + name + spec) < 127, spec

    def header(size):
        return data[:hdr] + struct.pack("<3I", namesz, size, typ) + \
            data[hdr + 12:]

    def strings_as(new):
        return data[:strings] + new + data[strings + len(new):]
    nul = "is not NUL-terminated inside the note"
    name_bytes = "has a control, non-ASCII, space or colon byte"
    return {
        "nuls_removed": (strings_as(text.replace(b"\0", b"") + b"\0" * 3),
                         f"its provider {name_bytes} (0x20)"),
        "nuls_replaced": (strings_as(text.replace(b"\0", b"x")),
                          f"its provider {nul}"),
        "provider_cut": (header(24 + len(prov)), f"its provider {nul}"),
        "name_cut": (header(24 + len(prov) + 1 + len(name) - 2),
                     f"its probe name {nul}"),
        "spec_cut": (header(24 + len(prov) + len(name) + 2 + 3),
                     f"its argument spec {nul}"),
        "desc_short": (header(8), "its description of 8 bytes is shorter "
                       "than its three 8-byte addresses"),
        "desc_huge": (header(1 << 28), "its name (8 bytes) and description "
                      "(268435456 bytes) run past the end of .note.stapsdt"),
        "name_newline": (strings_as(prov + b"\0" + name[:2] + b"\n"),
                         f"its probe name {name_bytes} (0x0a)"),
        # The strings run on over the next note: the provider is longer
        # than the readers' field.
        "provider_long": (header(24 + 200)[:strings] + b"p" * 150 + b"\0"
                          + data[strings + 151:],
                          "its provider is longer than 127 bytes"),
    }


@pytest.mark.needs("readelf")
@pytest.mark.parametrize("case", ["nuls_removed", "nuls_replaced",
                                  "provider_cut", "name_cut", "spec_cut",
                                  "desc_short", "desc_huge", "name_newline",
                                  "provider_long"])
def test_notes_corrupt(blktgt_bin, tmp_path, case):
    """A copy of blktgt with one corrupt note: the C reader
    (probekit-scan), the Python one (probekit-list, probekit-check and
    notes.read_probes) each give the same one line, naming the file, the
    note's file offset and the cause, and exit 1.  No probe is listed."""
    data, cause = mutations(blktgt_bin)[case]
    hdr = first_note(blktgt_bin)[1]
    bad = str(tmp_path / case)
    with open(bad, "wb") as f:
        f.write(data)
    line = f"{bad}: the stapsdt note at file offset 0x{hdr:x} is " \
           f"corrupt: {cause}"
    with pytest.raises(notes.NoteError) as e:
        notes.read_probes(bad)
    assert f"{bad}: {e.value}" == line
    for cmd, prog in (([SCAN, "notes"], "probekit-bpftrace"),
                      ([LIST], "probekit-list"),
                      ([LIST, bad, "blktgt:*"], "probekit-list"),
                      ([CHECK, "--binary"], "probekit-check")):
        argv = cmd + [bad] if bad not in cmd else cmd
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=probekit.TIMEOUT)
        assert (r.returncode, r.stdout, r.stderr) == \
            (1, "", f"{prog}: {line}\n"), argv


def test_note_bounds_agree():
    """The bounds on a note's strings and on their number are the same in
    both readers (usdt_notes.h, notes.py)."""
    h = open(os.path.join(probekit.ROOT, "probes", "usdt",
                          "usdt_notes.h")).read()

    def define(name):
        return int(re.search(rf"#define {name} (\d+)", h).group(1))
    assert (define("USDT_NAME_MAX") - 1, define("USDT_SPEC_MAX") - 1,
            define("USDT_NOTES_MAX")) == \
        (notes.NAME_MAX, notes.SPEC_MAX, notes.NOTES_MAX) == (127, 511, 65536)


def test_not_elf(tmp_path):
    p = tmp_path / "text"
    p.write_text("not an ELF file\n")
    one_error_line(scan("notes", p, check=False), str(p))
    # The wrapper's lookup skips a file that is not ELF (a mapped data
    # file): it has nothing.
    assert scan("has", p, stdin=b"1\tusdt\tblktgt:io__submit\n").stdout == b""


def c_refs(path):
    """The references of probekit-scan join (wrapper/join.c's lines), each
    checked against the program at its offset: KIND:__EXE__:SPEC there."""
    out = scan("join", 1, "READY", "", "", path).stdout
    head, prog = out.split(b"\nprogram\n", 1)
    refs = []
    for ln in head.decode().splitlines():
        if ln.startswith("ref "):
            n, at, kind, spec = ln.split(" ")[1:]
            at = int(at)
            assert int(n) == len(refs) + 1, ln
            assert prog[at - len(kind) - 1:at + 8 + len(spec)] == \
                f"{kind}:__EXE__:{spec}".encode(), ln
            refs.append([kind, spec])
    return refs


def py_refs(path):
    with open(path) as f:
        script = bpftrace.parse(f.read())
    return [[ap.parts[0], ":".join(ap.parts[2:])]
            for b in script.blocks for ap in b.points
            if ap.kind and len(ap.parts) > 2 and ap.parts[1] == "__EXE__"]


with open(os.path.join(FIX_BT, "refs.json")) as _f:
    REFS = json.load(_f)


@pytest.mark.parametrize("name", sorted(REFS))
def test_script_refs(name):
    """Both parsers find the same __EXE__ attach points, and only those:
    none in a comment or a string, in a header or outside one."""
    path = os.path.join(FIX_BT, name)
    assert py_refs(path) == REFS[name]
    assert c_refs(path) == REFS[name]


def test_script_fixtures_through_wrapper(target):
    """The fixtures resolve against blktgt as the wrapper runs them: each
    reference is replaced by the executable's path, the comments and
    strings that mention __EXE__ are left as they are."""
    paths = [os.path.join(FIX_BT, n) for n in sorted(REFS)]
    r = subprocess.run([probekit.WRAPPER, "--dry-run", str(target.pid), *paths],
                       capture_output=True, timeout=probekit.TIMEOUT)
    assert r.returncode == 0, r.stderr
    prog = r.stdout.decode()
    exe = f"/proc/{target.pid}/root" + os.path.realpath(f"/proc/{target.pid}/exe")
    for refs in REFS.values():
        for kind, spec in refs:
            assert f'{kind}:"{exe}":{spec}' in prog
    for text in ("/* usdt:__EXE__:blktgt:in_a_comment */",
                 "/* usdt:__EXE__:blktgt:after_a_point */",
                 '"usdt:__EXE__:blktgt:nothing { in a string }\\n"'):
        assert text in prog


# Operands both argument parsers read alike: (operand, kind, disp or
# value, register).
OPERANDS = [
    ("$42", "const", 42, ""),
    ("$-1", "const", -1, ""),
    ("%edi", "reg", 0, "edi"),
    ("%r9d", "reg", 0, "r9d"),
    ("(%rdx)", "mem", 0, "rdx"),
    ("-16(%rbp)", "mem", -16, "rbp"),
    ("8(%rax,%rbx,4)", "index", 8, "rax"),
    ("NBuffers(%rip)", "sym", 0, "rip"),
    ("%xmm0", "reg", 0, "xmm0"),
]


@pytest.mark.parametrize("op,kind,val,reg", OPERANDS)
def test_operands(op, kind, val, reg):
    spec = f"-4@{op}"
    c = c_args(spec)[0]
    assert c[:5] == [kind, "4", "1", str(val), reg]
    py = argspec.parse_operand(op)
    assert py.kind == kind
    assert (py.value if kind == "const" else py.disp) == val
    assert py.base == reg
    # A readable operand is one the Python checker finds no problem in,
    # for the kinds every reader takes.
    if kind in ("reg", "mem"):
        assert c[5:7] == (["1", "1"] if argspec.operand_problem(op) is None
                          else ["0", "0"])
    if kind == "index":
        assert c[7:] == [py.index, str(py.scale)] == ["rbx", "4"]


# aarch64 operands, every form GCC and clang emit (sys/sdt.h's "nor"
# constraint and "m"), and forms no reader takes: (operand, kind, disp or
# value, base register, index register, scale, bpftrace reads, libbpf
# reads, the pt_regs offset of the base for BPF).
A64_OPERANDS = [
    ("x0", "reg", 0, "x0", "", 1, True, True, 0),
    ("x30", "reg", 0, "x30", "", 1, True, True, 240),
    ("sp", "reg", 0, "sp", "", 1, True, True, 248),
    ("w1", "reg", 0, "w1", "", 1, False, False, 8),
    ("[sp, 12]", "mem", 12, "sp", "", 1, True, True, 248),
    ("[sp]", "mem", 0, "sp", "", 1, True, True, 248),
    ("[x19, 8]", "mem", 8, "x19", "", 1, True, True, 152),
    ("[x2, -16]", "mem", -16, "x2", "", 1, True, True, 16),
    ("[x3, #8]", "mem", 8, "x3", "", 1, False, False, 24),
    ("[x1, 0x10]", "mem", 16, "x1", "", 1, True, False, 8),
    ("[x5, #:lo12:.LANCHOR0]", "sym", 0, "x5", "", 1, False, False, 40),
    ("[x0, x1]", "index", 0, "x0", "x1", 1, True, False, 0),
    ("[x0, x1, lsl 2]", "index", 0, "x0", "x1", 4, False, False, 0),
    ("42", "const", 42, "", "", 1, False, True, None),
    ("-7", "const", -7, "", "", 1, False, True, None),
    ("#5", "const", 5, "", "", 1, False, False, None),
    ("pc", "reg", 0, "pc", "", 1, False, False, 256),
    ("x31", "unknown", 0, "", "", 1, False, False, None),
    ("%eax", "unknown", 0, "", "", 1, False, False, None),
]


@pytest.mark.parametrize("op,kind,val,reg,index,scale,bt,lb,off",
                         A64_OPERANDS)
def test_operands_aarch64(op, kind, val, reg, index, scale, bt, lb, off):
    """Both parsers read an aarch64 operand alike, and alike judge
    whether bpftrace and libbpf read it; its register is the one the
    table puts at off in struct pt_regs."""
    c = c_args(f"-4@{op}", "aarch64")
    assert len(c) == 1, c
    c = c[0]
    assert c[:5] == [kind, "4", "1", str(val), reg]
    assert c[5:7] == [str(int(bt)), str(int(lb))]
    if kind == "index":
        assert c[7:] == [index, str(scale)]
    py = argspec.parse_operand(op, "aarch64")
    assert (py.kind, py.value if kind == "const" else py.disp, py.base) == \
        (kind, val, reg)
    if kind == "index":
        assert (py.index, py.scale) == (index, scale)
    for reader, reads in ((argspec.BPFTRACE, bt), (argspec.LIBBPF, lb)):
        why = argspec.reader_problem(op, reader, arch="aarch64")
        assert (why is None) == reads, why
        if why:
            assert why.startswith(f"{argspec.reader_name(reader)} cannot "
                                  f"read {op}: "), why
    if off is not None:
        assert registers.find("aarch64", reg).offset == off
    # The same text read as x86_64 is no operand of that architecture.
    if kind != "unknown" and not op.lstrip("-").isdigit():
        assert argspec.parse_operand(op).kind == "unknown"


def test_space_inside_brackets():
    """aarch64 writes "[sp, 12]" with a space: one argument, in both."""
    spec = "-4@[sp, 12] 8@x0 -8@[x5, #:lo12:.LANCHOR0]"
    c = c_args(spec, "aarch64")
    py = notes.parse_argspec(spec, "aarch64")
    assert [a[0] for a in c] == ["mem", "reg", "sym"]
    assert [(a.size, a.signed, a.operand) for a in py] == [
        (4, True, "[sp, 12]"), (8, False, "x0"),
        (8, True, "[x5, #:lo12:.LANCHOR0]")]


A64_CC = {"gcc": ["aarch64-linux-gnu-gcc"],
          "clang": ["clang", "--target=aarch64-linux-gnu"]}


def cross_build(cc, opt, sources, out, tmp):
    """sources built for aarch64 by cc at opt into out, with sys/sdt.h
    from a private include directory (the host's is in an x86_64
    directory the cross compilers do not search)."""
    inc = os.path.join(tmp, "include")
    os.makedirs(os.path.join(inc, "sys"), exist_ok=True)
    for h in ("sdt.h", "sdt-config.h"):
        shutil.copy(f"/usr/include/x86_64-linux-gnu/sys/{h}",
                    os.path.join(inc, "sys", h))
    subprocess.run([*A64_CC[cc], opt, "-g", "-Wall", "-Werror", "-I", inc,
                    "-o", out, *sources], check=True)
    return out


@pytest.fixture(scope="module", params=[("gcc", "-O2"), ("gcc", "-O0"),
                                        ("clang", "-O2"), ("clang", "-O0")],
                ids=lambda p: "-".join(p))
def a64_sites(request, tmp_path_factory):
    cc, opt = request.param
    for tool in ("aarch64-linux-gnu-gcc", "readelf"):
        why = probekit.missing((tool,))
        if why:
            if os.environ.get("CI") == "true":
                pytest.fail(f"required in CI: {why}")
            pytest.skip(why)
    tmp = str(tmp_path_factory.mktemp("a64"))
    out = {}
    for name, srcs in (("sites", SITES_SRC),
                       ("operands", [os.path.join(LIB, "operands.c")])):
        out[name] = cross_build(cc, opt, srcs, os.path.join(tmp, name), tmp)
    return cc, opt, out


def test_notes_aarch64(a64_sites):
    """The notes of aarch64 binaries, GCC's and clang's: both readers give
    readelf's, with the same file offsets, and parse each operand alike as
    aarch64, because the file says it is one (this host is x86_64)."""
    cc, opt, bins = a64_sites
    kinds = set()
    for path in bins.values():
        got = check_against_readelf(path)
        assert {p.arch for p in got} == {"aarch64"}
        c = c_notes(path)
        assert c == py_notes(path)
        for n in got:
            for a, py, o in both_readers(n, "aarch64"):
                kinds.add(o.kind)
                for reader, col in ((argspec.BPFTRACE, 5), (argspec.LIBBPF, 6)):
                    why = argspec.reader_problem(py.operand, reader,
                                                 arch="aarch64")
                    assert (why is None) == (a[col] == "1"), (py.operand, why)
    hit = [p for p in notes.read_probes(bins["sites"]) if p.name == "hit"][0]
    assert [(a.size, a.signed) for a in hit.args] == [(4, True), (8, True)]
    konst = [p for p in notes.read_probes(bins["sites"])
             if p.name == "konst"][0]
    assert konst.spec == "-4@42"
    assert kinds >= {"const", "mem"}
    if (cc, opt) == ("gcc", "-O2"):
        # GCC's global (symbol-relative) and scaled index operands.
        pick = [p for p in notes.read_probes(bins["operands"])
                if p.name == "pick"][0]
        assert pick.spec == "-4@[x0, x1, lsl 2] -4@[x2, #:lo12:.LANCHOR0]"
        assert {"reg", "index", "sym"} <= kinds


@pytest.mark.needs("aarch64-linux-gnu-gcc")
def test_list_aarch64(tmp_path):
    """probekit-list's readability columns for an aarch64 binary are the
    aarch64 readers', each "no" with its reason (GCC -O2's operands)."""
    path = cross_build("gcc", "-O2", [os.path.join(LIB, "operands.c")],
                       str(tmp_path / "operands"), str(tmp_path))
    r = subprocess.run([LIST, path], capture_output=True,
                       text=True, timeout=probekit.TIMEOUT)
    assert r.returncode == 0, r.stderr
    bt = argspec.reader_name(argspec.BPFTRACE)
    lb = argspec.reader_name(argspec.LIBBPF)
    lines = r.stdout.splitlines()
    want = [
        "      arg0/arg1  -4@[x0, x1, lsl 2]  bpftrace: no  libbpf: no",
        f"        {bt} cannot read [x0, x1, lsl 2]: an operand it does not "
        "parse",
        f"        {lb} cannot read [x0, x1, lsl 2]: a scale-index-base "
        "operand",
        "      arg1/arg2  -4@[x2, #:lo12:.LANCHOR0]  bpftrace: no  libbpf: no",
        f"        {bt} cannot read [x2, #:lo12:.LANCHOR0]: a symbol-relative "
        "operand",
        f"        {lb} cannot read [x2, #:lo12:.LANCHOR0]: a "
        "symbol-relative operand",
        "      arg0/arg1  -4@5  bpftrace: no  libbpf: yes",
        f"        {bt} cannot read 5: an immediate (constant) operand",
    ]
    at = [lines.index(w) for w in want]
    assert at == sorted(at), r.stdout


def test_fixture_args(sites):
    """Every operand of the fixture, through both parsers."""
    for n in c_notes(sites):
        c = c_args(n[6])
        py = notes.parse_argspec(n[6])
        assert [(int(a[1]), a[2] == "1") for a in c] == \
            [(a.size, a.signed) for a in py]
        assert [a[0] for a in c] == \
            [argspec.parse_operand(a.operand).kind for a in py]


@pytest.mark.parametrize("spec,why", [
    ("3@%eax", "size must be 1, 2, 4 or 8"),
    ("%eax", "is not SIZE@OPERAND"),
    ("4@", "is not SIZE@OPERAND"),
    (" ".join(["4@%eax"] * 13), "more than 12 arguments"),
    ("8@" + "x" * 80, "longer than 63 bytes"),
])
def test_bad_specs(spec, why):
    r = scan("args", spec, check=False)
    assert r.returncode == 1 and why in r.stderr.decode(), r.stderr


# --- one line for one bad ELF file ----------------------------------------

def _elf_fields(data):
    """{field: (offset, struct format)} of a 64-bit little-endian ELF
    header, and the values of the section-header fields."""
    assert data[4:6] == b"\x02\x01", "the fixture is ELF64 little-endian"
    shoff, = struct.unpack_from("<Q", data, 40)
    shnum, shstrndx = struct.unpack_from("<HH", data, 60)
    return shoff, shnum, shstrndx


def _sh(data, shoff, i):
    """(its file offset, name, type, offset, size) of section header i."""
    at = shoff + 64 * i
    name, typ = struct.unpack_from("<II", data, at)
    off, size = struct.unpack_from("<QQ", data, at + 24)
    return at, name, typ, off, size


def _put(data, at, fmt, *values):
    b = bytearray(data)
    struct.pack_into(fmt, b, at, *values)
    return bytes(b)


def elf_mutations(path):
    """{case: (the bytes of a broken copy of path, the cause both readers
    must give)}: a real ELF file with one thing wrong in its headers."""
    data = open(path, "rb").read()
    n = len(data)
    shoff, shnum, shstrndx = _elf_fields(data)
    names = [_sh(data, shoff, i) for i in range(shnum)]
    note = next(i for i, h in enumerate(names)
                if data[names[shstrndx][3] + h[1]:].startswith(
                    b".note.stapsdt\0"))
    symtab = next(i for i, h in enumerate(names) if h[2] == 2)
    sh_trunc = f"truncated: its section headers run past the end of the " \
               f"file ({n} bytes)"
    ph_trunc = f"truncated: its program headers run past the end of the " \
               f"file ({n} bytes)"
    nat = names[note][0]
    return {
        "class": (_put(data, 4, "B", 3), "corrupt: its ELF class is 3, "
                  "neither 1 (32-bit) nor 2 (64-bit)"),
        "byte_order": (_put(data, 5, "B", 0), "corrupt: its byte order is "
                       "0, neither 1 (little-endian) nor 2 (big-endian)"),
        "header_cut": (data[:40], "truncated: its ELF header runs past "
                       "the end of the file (40 bytes)"),
        "shnum_huge": (_put(data, 60, "<H", 0xfeff), sh_trunc),
        "shoff_huge": (_put(data, 40, "<Q", 1 << 40), sh_trunc),
        "shoff_wraps": (_put(data, 40, "<Q", (1 << 64) - 64), sh_trunc),
        "phnum_huge": (_put(data, 56, "<H", 0xfeff), ph_trunc),
        "phoff_huge": (_put(data, 32, "<Q", 1 << 40), ph_trunc),
        "shentsize": (_put(data, 58, "<H", 32), "corrupt: its section "
                      "headers are 32 bytes each, not 64"),
        "phentsize": (_put(data, 54, "<H", 64), "corrupt: its program "
                      "headers are 64 bytes each, not 56"),
        # Extended numbering: the count in section 0's sh_size.
        "shnum_extended_huge": (_put(_put(data, 60, "<H", 0), shoff + 32,
                                     "<Q", 1 << 40), sh_trunc),
        "no_name_table": (_put(data, 62, "<H", 0), "corrupt: its section "
                          f"name table is section 0, not one of its {shnum} "
                          "sections"),
        "name_table_past": (_put(data, 62, "<H", shnum + 3), "corrupt: its "
                            f"section name table is section {shnum + 3}, "
                            f"not one of its {shnum} sections"),
        "name_table_not_strtab": (_put(data, 62, "<H", symtab), "corrupt: "
                                  f"its section name table (section "
                                  f"{symtab}) is not a string table"),
        "section_size_huge": (_put(data, nat + 32, "<Q", 1 << 40),
                              f"truncated: section {note} runs past the "
                              f"end of the file ({n} bytes)"),
        "section_offset_past": (_put(data, nat + 24, "<Q", n + 1),
                                f"truncated: section {note} runs past the "
                                f"end of the file ({n} bytes)"),
        "section_name_outside": (_put(data, nat, "<I", 0x7fffffff),
                                 f"corrupt: the name of section {note} "
                                 "lies outside its section name table"),
        "cut_at_64": (data[:64], sh_trunc.replace(f"({n} ", "(64 ")),
        "cut_at_half": (data[:n // 2], None),
        "cut_64_short": (data[:-64], sh_trunc.replace(f"({n} ",
                                                      f"({n - 64} ")),
    }


def _small_as():
    """Run a reader with 1 GiB of address space, so that allocating what
    a file claims (a TiB) fails instead of passing unseen."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize("case", ["class", "byte_order", "header_cut",
                                  "shnum_huge", "shoff_huge", "shoff_wraps",
                                  "phnum_huge", "phoff_huge", "shentsize",
                                  "phentsize", "shnum_extended_huge",
                                  "no_name_table", "name_table_past",
                                  "name_table_not_strtab",
                                  "section_size_huge", "section_offset_past",
                                  "section_name_outside", "cut_at_64",
                                  "cut_at_half", "cut_64_short"])
def test_bad_elf_one_line(sites, tmp_path, case):
    """A copy of a real ELF file with one header broken or cut short: the
    C reader (probekit-scan), the Python one (notes.read_probes), and
    probekit-list and probekit-check each give the same one line, the
    path and the cause, and exit 1; each within 1 GiB of address space,
    whatever size the file claims."""
    data, cause = elf_mutations(sites)[case]
    bad = str(tmp_path / case)
    with open(bad, "wb") as f:
        f.write(data)
    with pytest.raises(notes.BadELF) as e:
        notes.read_probes(bad)
    if cause is not None:
        assert str(e.value) == cause
    line = f"{bad}: {e.value}"
    runs = [(subprocess.Popen(cmd + [bad], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              preexec_fn=_small_as), prog)
            for cmd, prog in (([SCAN, "notes"], "probekit-bpftrace"),
                              ([LIST], "probekit-list"),
                              ([CHECK, "--binary"], "probekit-check"))]
    for p, prog in runs:
        out, err = p.communicate(timeout=probekit.TIMEOUT)
        assert (p.returncode, out, err) == (1, "", f"{prog}: {line}\n")


@pytest.mark.needs("py:bcc")
def test_symlink_loop_named_as_one(tmp_path):
    """A symbolic link loop given as a file is named as one, in one line
    and exit 1: by both readers (probekit-scan's notes, notes.read_probes),
    and by every command that reads a file it is given: probekit-list,
    probekit-check (a binary, a catalog), probekit-gencatalog,
    probekit-bpftrace, and a tool's -b in both forms; never as a file
    that does not exist."""
    import errno
    loop = str(tmp_path / "a")
    os.symlink("b", loop)
    os.symlink("a", tmp_path / "b")
    why = os.strerror(errno.ELOOP)
    with pytest.raises(OSError) as e:
        notes.read_probes(loop)
    assert e.value.errno == errno.ELOOP
    binp = os.path.join(probekit.BUILD, "bin")
    runs = []
    for cmd, line in (
            ([SCAN, "notes", loop], f"probekit-bpftrace: {loop}: {why}"),
            ([LIST, loop], f"probekit-list: {loop}: {why}"),
            ([CHECK, "--binary", loop], f"probekit-check: {loop}: {why}"),
            ([CHECK, "--catalog", loop], f"probekit-check: {loop}: {why}"),
            ([os.path.join(binp, "probekit-gencatalog"), "--json", loop],
             f"probekit-gencatalog: {loop}: {why}"),
            ([os.path.join(binp, "probekit-bpftrace"), loop, "x.bt"],
             f"probekit-bpftrace: '{loop}': {why}; give the process id, "
             "or the path of an executable or shared library"),
            ([os.path.join(binp, "probekit-usdtcount"), "-b", loop, "io*"],
             f"probekit-usdtcount: cannot trace {loop}: {why}"),
            ([os.path.join(binp, "probekit-usdtcount-bcc"), "-b", loop,
              "io*"], f"probekit-usdtcount-bcc: cannot trace {loop}: {why}")):
        runs.append((subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True),
                     line))
    for p, line in runs:
        out, err = p.communicate(timeout=probekit.TIMEOUT)
        assert (p.returncode, out, err) == (1, "", line + "\n"), p.args


# --- argument names and types: probekit's own note --------------------------

@pytest.fixture(scope="module")
def argnames_dump(tmp_path_factory):
    """tests/lib/argnames_dump.c on the C reader (build/lib)."""
    out = str(tmp_path_factory.mktemp("argnames") / "argnames_dump")
    subprocess.run(["cc", "-Wall", "-Werror",
                    "-I", os.path.join(probekit.ROOT, "probes", "usdt"),
                    os.path.join(LIB, "argnames_dump.c"),
                    os.path.join(probekit.BUILD, "lib",
                                 "libprobekit_usdt.a"), "-lelf", "-o", out],
                   check=True)
    return out


def c_arg_names(dump, path):
    """{"provider:name": [(type, name)]} by the C reader, or its error."""
    r = subprocess.run([dump, path], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    if r.returncode:
        assert r.stdout == "" and r.stderr.count("\n") == 1, r
        return r.stderr.removeprefix("argnames_dump: ").rstrip("\n")
    out = {}
    for ln in r.stdout.splitlines():
        full, *args = ln.split("\t")
        out[full] = [tuple(a.rsplit(" ", 1)) for a in args]
    return out


def py_arg_names(path):
    try:
        return {k: v.args for k, v in notes.read_arg_names(path).items()}
    except notes.BadELF as e:
        return f"{path}: {e}"


def test_arg_names_blktgt(blktgt_bin, argnames_dump, tmp_path):
    """blktgt carries each catalog probe's argument types and names, one
    note per probe, and both readers read the catalog's; so does a
    stripped copy (the note is allocated: strip keeps it)."""
    from probelib.catalog import parse_catalog
    cat = parse_catalog(os.path.join(probekit.ROOT, "probes", "blktgt.d"))
    want = {f"blktgt:{p['name']}": [(a["type"], a["name"])
                                    for a in p["args"]]
            for p in cat["probes"]}
    assert len(want) == 27
    assert want["blktgt:io__submit"][0] == ("uint64_t", "id")
    stripped = str(tmp_path / "blktgt")
    shutil.copy(blktgt_bin, stripped)
    subprocess.run(["strip", "--strip-all", stripped], check=True)
    assert ".symtab" not in subprocess.run(
        ["readelf", "-S", stripped], capture_output=True, text=True,
        check=True).stdout
    for path in (blktgt_bin, stripped):
        assert c_arg_names(argnames_dump, path) == want
        assert py_arg_names(path) == want


def test_arg_names_none(argnames_dump, sites):
    """A binary built without probekit's header has none: {} from both."""
    assert c_arg_names(argnames_dump, sites) == {} == py_arg_names(sites)


def test_list_names_without_catalog(blktgt_bin):
    """probekit-list shows each argument's type and name from the binary
    itself, with no catalog."""
    r = subprocess.run([LIST, blktgt_bin, "blktgt:io__submit"],
                       capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert r.returncode == 0, r.stderr
    args = [ln for ln in r.stdout.splitlines() if ln.startswith("      arg")]
    assert [ln.split("  ")[-1] for ln in args] == [
        "uint64_t id", "char * bdev", "uint32_t type", "uint64_t offset",
        "uint64_t len", "char * type_name"]


def pk_mutations(path):
    """{case: (bytes, cause)}: path with its first probekit note broken."""
    data = open(path, "rb").read()
    at = data.index(b"probekit\0\0\0\0\1\0\0\0") - 12
    namesz, descsz, typ = struct.unpack_from("<3I", data, at)
    assert (namesz, typ) == (9, 1)
    desc = at + 12 + 12
    argc, = struct.unpack_from("<I", data, desc + 4)
    strings = data[desc + 8:desc + descsz]
    prov_end = strings.index(b"\0")
    # What the last argument's type and name take, with their NULs.
    past = sum(len(x) + 1 for x in strings.split(b"\0")[-3:-1])

    def put(off, fmt, *v):
        return _put(data, off, fmt, *v)
    return {
        "version": (put(desc, "<I", 2), "its version is 2, not 1 (the one "
                    "this probekit reads)"),
        "argc_huge": (put(desc + 4, "<I", 13), "its argument count 13 is "
                      "more than 12"),
        "argc_more": (put(desc + 4, "<I", argc + 1),
                      f"its argument {argc}'s type is not NUL-terminated "
                      "inside the note"),
        "argc_less": (put(desc + 4, "<I", argc - 1),
                      f"its description has {past} bytes past its last "
                      "string"),
        "desc_short": (put(at + 4, "<I", 4), "its description of 4 bytes "
                       "is shorter than its version and argument count"),
        "desc_huge": (put(at + 4, "<I", 1 << 30), "its name (9 bytes) and "
                      "description (1073741824 bytes) run past the end of "
                      ".note.probekit"),
        "provider_colon": (put(desc + 8 + prov_end - 1, "B", ord(":")),
                           "its provider has a control, non-ASCII, space "
                           "or colon byte (0x3a)"),
    }


@pytest.mark.parametrize("case", ["version", "argc_huge", "argc_more",
                                  "argc_less", "desc_short", "desc_huge",
                                  "provider_colon"])
def test_arg_names_corrupt(blktgt_bin, argnames_dump, tmp_path, case):
    """A copy of blktgt with its first probekit note broken: both readers
    give the same one line, the note's file offset and the cause; so does
    probekit-list, which reads the note."""
    data, cause = pk_mutations(blktgt_bin)[case]
    at = open(blktgt_bin, "rb").read().index(
        b"probekit\0\0\0\0\1\0\0\0") - 12
    bad = str(tmp_path / case)
    with open(bad, "wb") as f:
        f.write(data)
    line = f"{bad}: the probekit note at file offset 0x{at:x} is " \
           f"corrupt: {cause}"
    assert py_arg_names(bad) == line
    assert c_arg_names(argnames_dump, bad) == line
    r = subprocess.run([LIST, bad], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert (r.returncode, r.stdout, r.stderr) == \
        (1, "", f"probekit-list: {line}\n")


def test_pk_note_format_agrees():
    """The probekit note's section, owner, type, version and bounds are
    the same in both readers (usdt_notes.h, notes.py)."""
    h = open(os.path.join(probekit.ROOT, "probes", "usdt",
                          "usdt_notes.h")).read()

    def define(name):
        return re.search(rf"#define {name} (\S+)", h).group(1).strip('"')
    assert (define("USDT_PK_NOTE_SECTION"), define("USDT_PK_NOTE_OWNER"),
            int(define("USDT_PK_NOTE_TYPE")),
            int(define("USDT_PK_NOTE_VERSION")),
            int(define("USDT_PK_NOTES_MAX")),
            int(define("USDT_TYPE_MAX")) - 1) == \
        (notes.PK_NOTE_SECTION, notes.PK_NOTE_OWNER, notes.PK_NOTE_TYPE,
         notes.PK_NOTE_VERSION, notes.PK_NOTES_MAX, notes.TYPE_MAX)
