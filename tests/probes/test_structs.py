# SPDX-License-Identifier: BSD-2-Clause
"""probekit-structs: struct definitions from DWARF that bpftrace 0.17 reads
at DWARF's offsets, enum name tables, and the wrapper's
"// probekit: structs" directive.

Two binaries: blktgt (bt/exports.bt reads struct export through the
pointer export__state passes, for a known sequence of state changes), and
a program of our own built with -g (a stand-in for a third-party binary
with debug info: Debian's postgresql-15-dbgsym is not reachable here),
whose struct holds the layouts that break naive definitions: padding, an
over-aligned member, a nested struct, an array of structs, an anonymous
union, a bitfield, an enum, a packed struct."""

import os
import re
import subprocess
import sys

import pytest

import probekit
from probekit import ROOT, WRAPPER, Trace

sys.path.insert(0, os.path.join(ROOT, "probes"))
from probelib import argspec, dwarf, features  # noqa: E402

STRUCTS = os.path.join(probekit.BUILD, "bin", "probekit-structs")

DEMO_C = r"""
#include <stdio.h>
#include <string.h>
#include <sys/sdt.h>

enum color { RED = -1, GREEN = 1, BLUE = 300 };
struct inner { short s; long l; };
struct rec {
	char tag;
	int i;
	struct inner in;
	enum color c;
	unsigned flag:3, more:5;
	char name[13];
	_Alignas(32) long aligned;
	union { int ui; char uc; };
	struct { unsigned char a, b; } anon;
	struct inner arr[2];
	struct rec *next;
	double d;
};
struct tight { char a; int b; long c; } __attribute__((packed));

int main(void)
{
	static struct rec r;
	static struct tight t;
	char line[16];

	/* Byte k of each object is k, so a field read at offset o of size n
	 * is the little-endian number made of bytes o..o+n-1. */
	for (size_t k = 0; k < sizeof(r); k++)
		((unsigned char *)&r)[k] = (unsigned char)k;
	for (size_t k = 0; k < sizeof(t); k++)
		((unsigned char *)&t)[k] = (unsigned char)k;
	strcpy(r.name, "hello");
	r.c = GREEN;
	r.next = &r;
	printf("ready %zu\n", sizeof(r));
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	DTRACE_PROBE2(demo, rec, &r, &t);
	return 0;
}
"""

# (bpftrace expression, DWARF path from the struct) of each field read.
REC_FIELDS = ["tag", "i", "in.s", "in.l", "aligned", "ui", "uc",
              "arr[1].s", "arr[1].l", "next->tag"]
TIGHT_FIELDS = ["a", "b", "c"]


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True,
                          timeout=probekit.TIMEOUT, **kw)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    d = tmp_path_factory.mktemp("demo")
    src = d / "demo.c"
    src.write_text(DEMO_C)
    exe = d / "demo"
    r = run(["cc", "-g", "-O0", "-o", str(exe), str(src)])
    assert r.returncode == 0, r.stderr
    return exe


def dwarf_field(types, root, path):
    """(offset, size, signed) of a field path such as arr[1].l or
    next->tag (a pointer back to the object itself) in struct root."""
    t, off = types.lookup("struct", root), 0
    for part in re.findall(r"(?:->|\.)?(\w+)(?:\[(\d+)\])?", path):
        name, idx = part
        if t.kind == "pointer":
            t, off = t.target, 0        # the demo's pointers point to r
        for m in t.members:
            if m.name == name:
                off += m.offset
                break
            if m.name is None and any(x.name == name for x in m.type.members):
                off += m.offset      # a member of an anonymous member
                m = next(x for x in m.type.members if x.name == name)
                off += m.offset
                break
        t = m.type
        if idx:
            off += int(idx) * t.elem.size
            t = t.elem
    return off, t.size, t.signed


def expected(off, size, signed):
    v = int.from_bytes(bytes(range(off, off + size)), "little")
    return v - (1 << 8 * size) if signed and v >> (8 * size - 1) else v


def test_demo_offsets_as_bpftrace_reads_them(bpf, demo, tmp_path):
    defs = tmp_path / "demo.bt"
    r = run([STRUCTS, str(demo), "rec", "tight"])
    assert r.returncode == 0, r.stderr
    e = run([STRUCTS, "--enums", str(demo), "color"])
    assert e.returncode == 0, e.stderr
    defs.write_text(r.stdout + e.stdout)

    lines = ["// probekit: structs rec tight color",
             "BEGIN { printf(\"size %d %d\\n\", sizeof(struct pk_rec), "
             "sizeof(struct pk_tight)); }",
             "usdt:__EXE__:demo:rec {",
             "\t$r = (struct pk_rec *)arg0;",
             "\t$t = (struct pk_tight *)arg1;",
             "\tprintf(\"name %s color %s\\n\", $r->name, @pk_color[$r->c]);"]
    for f in REC_FIELDS:
        lines.append(f"\tprintf(\"rec.{f} %lld\\n\", (int64)$r->{f});")
    for f in TIGHT_FIELDS:
        lines.append(f"\tprintf(\"tight.{f} %lld\\n\", (int64)$t->{f});")
    lines.append("\tprintf(\"done\\n\");\n}")
    script = tmp_path / "read.bt"
    script.write_text("\n".join(lines) + "\n")

    proc = subprocess.Popen([str(demo)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("ready")
        t = Trace(proc.pid, [str(script)],
                  env={"PROBEKIT_STRUCTS": str(defs)}).start()
        try:
            proc.stdin.write("go\n")
            proc.stdin.flush()
            t.out.wait_for("^done$")
        finally:
            out = t.stop()
    finally:
        proc.kill()
        proc.wait()
    assert t.proc.returncode == 0, "\n".join(out)

    types = dwarf.Types(str(demo))
    try:
        size = (f"size {types.lookup('struct', 'rec').size} "
                f"{types.lookup('struct', 'tight').size}")
        got = {l.split(" ", 1)[0]: l.split(" ", 1)[1] for l in out
               if re.match(r"^(rec|tight)\.\S+ -?\d+$", l)}
        for root, fields in (("rec", REC_FIELDS), ("tight", TIGHT_FIELDS)):
            for f in fields:
                assert int(got[f"{root}.{f}"]) == expected(
                    *dwarf_field(types, root, f)), (root, f, out)
        assert size in out, out
        assert "name hello color GREEN" in out, out
    finally:
        types.close()


def test_exports_bt_reads_struct_export(bpf, target):
    """bt/exports.bt, through the wrapper and the build's definitions:
    the export's name, its bdev's name (a pointer followed) and the state
    names, for create, pause, resume and delete, exactly."""
    target.rpc("bdev_malloc_create", name="m0", size_mb=8, block_size=4096)
    t = Trace(target.pid, [os.path.join(ROOT, "bt", "exports.bt")]).start()
    try:
        target.rpc("export_create", name="e0", bdev="m0")
        target.rpc("export_pause", name="e0")
        target.rpc("export_resume", name="e0")
        target.rpc("export_delete", name="e0")
        t.out.wait_for(r"^e0 +m0 +EXPORT_ACTIVE +EXPORT_INACTIVE ")
    finally:
        out = t.stop()
    assert t.proc.returncode == 0, "\n".join(out)
    rows = [l.split() for l in out if l.startswith("e0 ")]
    assert rows == [["e0", "m0", "EXPORT_INACTIVE", "EXPORT_ACTIVE", "0"],
                    ["e0", "m0", "EXPORT_ACTIVE", "EXPORT_PAUSED", "0"],
                    ["e0", "m0", "EXPORT_PAUSED", "EXPORT_ACTIVE", "0"],
                    ["e0", "m0", "EXPORT_ACTIVE", "EXPORT_INACTIVE", "0"]], out
    assert not any("ERROR" in l or "@pk_" in l for l in out), out


def test_build_generated_the_definitions():
    path = os.path.join(probekit.BUILD, "share", "probekit", "structs",
                        "blktgt.bt")
    with open(path) as f:
        text = f.read()
    assert "struct pk_export {" in text and "@pk_export_state[1] = " \
        "\"EXPORT_ACTIVE\";" in text


def one_line(r, pattern):
    lines = r.stderr.splitlines()
    assert r.returncode == 1 and len(lines) == 1, (r.returncode, lines)
    assert re.match(rf"^probekit-structs: .*{pattern}", lines[0]), lines


def test_no_debug_info_is_one_line(tmp_path):
    src = tmp_path / "x.c"
    src.write_text("int main(void) { return 0; }\n")
    r = run(["cc", "-o", str(tmp_path / "x"), str(src)])
    assert r.returncode == 0, r.stderr
    one_line(run([STRUCTS, str(tmp_path / "x"), "foo"]),
             "has no debug information")


def test_unknown_type_is_one_line(demo):
    one_line(run([STRUCTS, str(demo), "recs"]),
             r"no struct or union 'recs' .*; nearest: rec$")
    one_line(run([STRUCTS, "--enums", str(demo), "colour"]),
             r"no enum 'colour' .*; nearest: color$")


def test_wrapper_refuses_definitions_of_another_build(demo, target, tmp_path):
    defs = tmp_path / "demo.bt"
    defs.write_text(run([STRUCTS, str(demo), "rec"]).stdout)
    script = tmp_path / "s.bt"
    script.write_text("// probekit: structs rec\nBEGIN { exit(); }\n")
    r = run([WRAPPER, "--dry-run", str(target.pid), str(script)],
            env=dict(os.environ, PROBEKIT_STRUCTS=str(defs)))
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "was made from another build" in r.stderr


def test_wrapper_refuses_a_type_not_generated(target, tmp_path):
    script = tmp_path / "s.bt"
    script.write_text("// probekit: structs export nosuch\nBEGIN { exit(); }\n")
    r = run([WRAPPER, "--dry-run", str(target.pid), str(script)])
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "asks for 'nosuch'" in r.stderr


def test_probecheck_checks_field_reads_against_dwarf(tmp_path):
    """exports.bt passes; the same script with a misspelt member, str() of
    a char array (where the installed bpftrace refuses it, as detected)
    and -> into a char array fails, one line each."""
    check = os.path.join(probekit.BUILD, "bin", "probekit-check")
    binary = os.path.join(probekit.BUILD, "bin", "blktgt")
    good = os.path.join(ROOT, "bt", "exports.bt")
    with open(good) as f:
        text = f.read()
    assert "$e->bdev->name," in text
    bad = tmp_path / "bad.bt"
    bad.write_text(text.replace("$e->bdev->name,", "$e->bdv->name, "
                                "str($e->name), $e->per[1].inflight, "
                                "$e->name->x,"))
    r = run([check, "--binary", binary, good])
    assert r.returncode == 0, r.stderr
    r = run([check, "--binary", binary, str(bad)])
    line = 1 + text[:text.index("$e->bdev->name,")].count("\n")
    assert r.returncode == 1
    bt = argspec.reader_name(argspec.BPFTRACE)
    want = [
        f"{bad}:{line}: struct pk_export: struct export has no member 'bdv'"
        "; nearest: bdev",
        f"{bad}:{line}: struct pk_export: str($e->name) of a char array: "
        f"{bt} refuses it; print it with printf %s as it is",
        f"{bad}:{line}: struct pk_export: '$e->name->x': $e->name is "
        "char[64], which has no members"]
    if features.bpftrace()["str_array"]:
        del want[1]
    assert r.stderr.splitlines() == want + [
        f"probekit-check: {len(want)} errors"], r.stderr
