# SPDX-License-Identifier: BSD-2-Clause
"""The probe catalog is the single source of truth: the USDT=1 binary has
exactly its probes with matching argument sizes, the USDT=0 binary has no
probe at all, and a probe really fires under bpftrace."""

import importlib.machinery
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

import probekit

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import notes as sdtnotes  # noqa: E402
from probelib.catalog import CatalogError, macro_name, parse_catalog  # noqa: E402,E501


def _load_gencatalog():
    # The generator is a script without a .py suffix; load it as a module.
    path = os.path.join(probekit.ROOT, "probes", "gencatalog")
    loader = importlib.machinery.SourceFileLoader("gencatalog", path)
    spec = importlib.util.spec_from_loader("gencatalog", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


gencatalog = _load_gencatalog()

CATALOG = os.path.join(probekit.ROOT, "probes", "blktgt.d")


def catalog():
    return parse_catalog(CATALOG)


def test_notes_match_catalog(blktgt_bin):
    cat = catalog()
    notes = sdtnotes.read_probes(blktgt_bin)
    assert notes, "USDT=1 binary has no .note.stapsdt probes"
    by_name = {}
    for n in notes:
        assert n.provider == cat["provider"], n
        by_name.setdefault(n.name, []).append(n)
    want = {p["name"]: p for p in cat["probes"]}
    assert sorted(by_name) == sorted(want), (
        f"missing from binary: {sorted(set(want) - set(by_name))}; "
        f"not in catalog: {sorted(set(by_name) - set(want))}")
    for name, sites in by_name.items():
        args = want[name]["args"]
        for site in sites:
            assert len(site.args) == len(args), (name, site.spec)
            for a, c in zip(site.args, args):
                assert a.size == c["size"], (name, site.spec, c)
            # Every probe carries a semaphore, so _ENABLED() works.
            assert site.semaphore != 0, (name, "has no semaphore")


def test_usdt0_has_no_notes(build):
    path = os.path.join(build, "nousdt", "bin", "blktgt")
    assert os.access(path, os.X_OK), f"{path} missing; 'make test' builds it"
    out = subprocess.run(["readelf", "-S", path], capture_output=True,
                         text=True, check=True).stdout
    assert ".note.stapsdt" not in out
    assert ".probes" not in out
    assert sdtnotes.read_probes(path) == []


def test_disabled_header_never_evaluates_arguments(tmp_path):
    """USDT=0: arguments are type-checked but not evaluated."""
    hdr = tmp_path / "blktgt_probes.h"
    subprocess.run([probekit.PYTHON, os.path.join(probekit.ROOT, "probes", "gencatalog"),
                    "--disabled-header", CATALOG, "-o", str(hdr)], check=True)
    src = tmp_path / "t.c"
    src.write_text('#include "blktgt_probes.h"\n#include <stdio.h>\n'
                   "static int n;\nstatic int bump(void) { return ++n; }\n"
                   "int main(void) {\n"
                   '  BLKTGT_TARGET_STATE(bump(), "x");\n'
                   "  if (BLKTGT_TARGET_STATE_ENABLED()) bump();\n"
                   '  printf("%d\\n", n);\n  return 0;\n}\n')
    exe = tmp_path / "t"
    subprocess.run(["cc", "-Wall", "-Werror", "-I", str(tmp_path), str(src),
                    "-o", str(exe)], check=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True,
                          check=True).stdout.strip() == "0"
    # A wrongly typed argument is a compile error, even in USDT=0.
    src.write_text('#include "blktgt_probes.h"\nstruct s { int x; };\n'
                   "int main(void) { struct s v = {0};\n"
                   "  BLKTGT_TARGET_STATE(v, \"x\"); return 0; }\n")
    r = subprocess.run(["cc", "-I", str(tmp_path), str(src), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode != 0


def test_probe_fires_under_bpftrace(target, bpf):
    """Attach to rpc__request by PID, make exactly 7 RPC calls, count 7."""
    proc, out = probekit.bpftrace_program(
        target.pid,
        'BEGIN { printf("READY\\n"); } '
        'usdt::blktgt:rpc__request { @calls[str(arg1)] = count(); }')
    for _ in range(7):
        target.rpc("target_stats")
    lines = probekit.stop_bpftrace(proc, out)
    assert "@calls[target_stats]: 7" in lines, lines


def test_probe_table_is_generated_from_catalog():
    """probes/README.md's table is the catalog's; 'make probes-doc' remakes it."""
    doc = os.path.join(probekit.ROOT, "probes", "README.md")
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    assert gencatalog.update_doc(text, catalog()) == text, (
        "probes/README.md's probe table differs from probes/blktgt.d; "
        "run 'make probes-doc'")


# --- the grammar: every line taken as what it is ---------------------------

_P = "provider t {\n"
_E = "};\n"
_X = [("a", [("uint64_t", "x")])]

# {case: (the catalog's text, what it is read as)}: a list of (probe,
# [(type, name)]) when it is read whole, else (LINE, a part of the one-line
# reason that FILE:LINE: starts).  The borderline forms were tried on
# systemtap's dtrace -h (4.8, with pyparsing): it takes every whole one
# below as the same probes, and falls back to a line-by-line guess, exit
# 0, for most refused ones (prob_typo and name_dash give no probe at all,
# unclosed_arguments never ends), and it reads "(void)" as one argument.
MALFORMED = {
    "comment_before_semicolon": (_P + "\tprobe a(uint64_t x) /* c */ ;\n" + _E,
                                 _X),
    "comment_inside_arguments": (_P + "\tprobe a(uint64_t /* id */ x);\n" + _E,
                                 _X),
    "multiline": (_P + "\tprobe a(\n\t\tuint64_t x, /* one */\n"
                  "\t\tchar *s\n\t);\n" + _E,
                  [("a", [("uint64_t", "x"), ("char *", "s")])]),
    "line_comments": ("// t\n" + _P + "\tprobe a(uint64_t x); // x\n" + _E
                      + "// end\n", _X),
    "define": ("#define LocalTransactionId unsigned int\n" + _P
               + "\tprobe a(uint64_t x);\n" + _E, _X),
    "no_arguments": (_P + "\tprobe a();\n\tprobe b( /* none */ );\n" + _E,
                     [("a", []), ("b", [])]),
    "void": (_P + "\tprobe a(void);\n" + _E,
             (2, "probe a: dtrace -h reads '(void)' as one argument; "
              "write 'probe a();' for none")),
    "const_and_star": (_P + "\tprobe a(const char* s, void *p);\n" + _E,
                       [("a", [("char *", "s"), ("void *", "p")])]),
    "crlf": ((_P + "\tprobe a(uint64_t x);\n" + _E).replace("\n", "\r\n"),
             _X),
    "prob_typo": (_P + "\tprob typo(uint64_t x);\n" + _E,
                  (2, "expected 'probe NAME(ARGS);' or the provider's "
                   "closing '};', found 'prob'")),
    "missing_semicolon": (_P + "\tprobe a(uint64_t x)\n"
                          "\tprobe b(uint64_t x);\n" + _E,
                          (2, "probe a: expected ';' after its argument "
                           "list, found 'probe'")),
    "name_dash": (_P + "\tprobe io-submit(uint64_t x);\n" + _E,
                  (2, "a probe name 'io-...' has '-'")),
    "name_non_ascii": (_P + "\tprobe caf\u00e9(uint64_t x);\n" + _E,
                       (2, "a probe name 'caf\u00e9...' has '\u00e9'")),
    "name_dollar": (_P + "\tprobe a$b(uint64_t x);\n" + _E,
                    (2, "a probe name 'a$...' has '$'")),
    "name_digit_first": (_P + "\tprobe 1a(uint64_t x);\n" + _E,
                         (2, "expected a probe name after 'probe', "
                          "found '1'")),
    "name_too_long": (_P + "\tprobe " + "n" * 128 + "(uint64_t x);\n" + _E,
                      (2, "is longer than 127 characters")),
    "duplicate_argument": (_P + "\tprobe a(uint64_t x, uint32_t x);\n" + _E,
                           (2, "probe a: two arguments are named 'x'")),
    "invalid_utf8": (b"/* \xff */\n" + (_P + "\tprobe a(uint64_t x);\n"
                                        + _E).encode(),
                     (1, "not UTF-8 (byte 0xff)")),
    "nul_byte": (_P + "\tprobe a(uint64_t x);\x00\n" + _E,
                 (2, "found '\\x00'")),
    "if0": (_P + "#if 0\n\tprobe a(uint64_t x);\n#endif\n" + _E,
            (2, "#if: dtrace -h reads a catalog without the C "
             "preprocessor")),
    "include": ('#include "x.d"\n' + _P + "\tprobe a(uint64_t x);\n" + _E,
                (1, "#include: dtrace -h reads")),
    "unclosed_comment": (_P + "\t/* oops\n\tprobe a(uint64_t x);\n" + _E,
                         (2, "a /* comment is never closed")),
    "no_close": (_P + "\tprobe a(uint64_t x);\n",
                 (3, "found the end of the file")),
    "close_without_semicolon": (_P + "\tprobe a(uint64_t x);\n}\n",
                                (4, "expected ';' after the provider "
                                 "block's '}'")),
    "text_after": (_P + "\tprobe a(uint64_t x);\n" + _E
                   + "probe b(uint64_t x);\n",
                   (4, "expected nothing but comments after the provider "
                    "block's '};', found 'probe'")),
    "second_provider": (_P + "\tprobe a(uint64_t x);\n" + _E + _P
                        + "\tprobe b(uint64_t x);\n" + _E,
                        (4, "a second provider block")),
    "empty_provider": (_P + _E, (1, "provider t declares no probes")),
    "no_provider": ("/* nothing */\nprobe a(uint64_t x);\n",
                    (2, "expected 'provider NAME {'")),
    "empty_file": ("", (1, "expected 'provider NAME {'")),
    "provider_without_name": ("provider {\n\tprobe a(uint64_t x);\n" + _E,
                              (1, "expected a provider name after "
                               "'provider', found '{'")),
    "unknown_type": (_P + "\tprobe a(unsigned long long x);\n" + _E,
                     (2, "probe a: argument 'x' has type 'unsigned long "
                      "long'; use one of")),
    "no_argument_name": (_P + "\tprobe a(uint64_t);\n" + _E,
                         (2, "argument 0 'uint64_t' needs a type and a "
                          "name")),
    "keyword_name": (_P + "\tprobe a(uint64_t for);\n" + _E,
                     (2, "argument 0 is named 'for', a C keyword")),
    "empty_argument": (_P + "\tprobe a(uint64_t x, );\n" + _E,
                       (2, "probe a: argument 1 is empty")),
    "array": (_P + "\tprobe a(char s[16]);\n" + _E,
              (2, "argument 0 'char s[16]': an array is not a probe "
               "argument")),
    "function_pointer": (_P + "\tprobe a(void (*f)(void));\n" + _E,
                         (2, "probe a: expected its arguments and ')', "
                          "found '('")),
    "too_many_arguments": (_P + "\tprobe a(" + ", ".join(
        f"uint64_t a{i}" for i in range(13)) + ");\n" + _E,
        (2, "probe a has 13 arguments; sys/sdt.h allows 12")),
    "duplicate_probe": (_P + "\tprobe a(uint64_t x);\n"
                        "\tprobe a(uint64_t x);\n" + _E,
                        (3, "probe a declared twice")),
    "macro_clash": (_P + "\tprobe io__submit(uint64_t x);\n"
                    "\tprobe io_submit(uint64_t x);\n" + _E,
                    (3, "probe io_submit's macro T_IO_SUBMIT is also probe "
                     "io__submit's")),
    "translated": (_P + "\tprobe a(uint64_t x) : (uint64_t x);\n" + _E,
                   (2, "translated arguments")),
    "unclosed_arguments": (_P + "\tprobe a(uint64_t x\n",
                           (3, "expected its arguments and ')', found the "
                            "end of the file")),
    "double_semicolon": (_P + "\tprobe a(uint64_t x);;\n" + _E,
                         (2, "found ';'")),
    # The trace ring's events, in @ring comments (dtrace skips them).
    "ring_whole": (_P + "\t/* @ring group g 0 \"a, group\" */\n"
                   "\t/* @ring owner o 0 t */ /* @ring object none 0 - */\n"
                   "\tprobe a(uint64_t x);\n"
                   "\t/* @ring event e g 3 o none new\n\t * \"doc, with a "
                   "comma\" INT x */\n" + _E, _X),
    "ring_unknown": (_P + "\t/* @ring evnt e */\n\tprobe a(uint64_t x);\n"
                     + _E, (2, "@ring evnt: expected group, owner, object "
                            "or event")),
    "ring_before_probe": (_P + "\t/* @ring group g 0 \"g\" */\n"
                          "\t/* @ring owner o 0 t */\n"
                          "\t/* @ring object none 0 - */\n"
                          "\t/* @ring event e g 0 o none \"d\" */\n"
                          "\tprobe a(uint64_t x);\n" + _E,
                          (5, "@ring event: it must come right after the "
                           "probe it mirrors")),
    "ring_argument_not_in_probe": (
        _P + "\t/* @ring group g 0 \"g\" */ /* @ring owner o 0 t */\n"
        "\t/* @ring object none 0 - */\n\tprobe a(uint64_t x);\n"
        "\t/* @ring event e g 0 o none \"d\" INT y */\n" + _E,
        (5, "@ring event e: argument 'y' is not an argument of probe a")),
    "ring_undeclared_group": (
        _P + "\tprobe a(uint64_t x);\n"
        "\t/* @ring event e g 0 o none \"d\" INT x */\n" + _E,
        (3, "@ring: no group 'g' is declared above")),
    "ring_bad_type": (
        _P + "\t/* @ring group g 0 \"g\" */ /* @ring owner o 0 t */\n"
        "\t/* @ring object none 0 - */\n\tprobe a(uint64_t x);\n"
        "\t/* @ring event e g 0 o none \"d\" INT64 x */\n" + _E,
        (5, "argument 'INT64 x' is not TYPE NAME")),
    "ring_bit_twice": (
        _P + "\t/* @ring group g 0 \"g\" */ /* @ring owner o 0 t */\n"
        "\t/* @ring object none 0 - */\n\tprobe a(uint64_t x);\n"
        "\t/* @ring event e g 0 o none \"d\" */\n\tprobe b();\n"
        "\t/* @ring event f g 0 o none \"d\" */\n" + _E,
        (7, "@ring event f: its name or its group and bit are e's too")),
    # An owner's or object's id may be one of the probe's integer arguments.
    "ring_bound_whole": (
        _P + "\t/* @ring group g 0 \"g\" */ /* @ring owner o 0 t */\n"
        "\t/* @ring object none 0 - */ /* @ring object j 1 j */\n"
        "\tprobe a(uint64_t x);\n"
        "\t/* @ring event e g 0 o(x) j(x) new related j(x) \"d\" */\n" + _E,
        _X),
    "ring_bound_not_in_probe": (
        _P + "\t/* @ring group g 0 \"g\" */ /* @ring owner o 0 t */\n"
        "\t/* @ring object none 0 - */\n\tprobe a(uint64_t x);\n"
        "\t/* @ring event e g 0 o(y) none \"d\" */\n" + _E,
        (5, "@ring event e: o's id 'y' is not an argument of probe a")),
    "ring_bound_pointer": (
        _P + "\t/* @ring group g 0 \"g\" */ /* @ring owner o 0 t */\n"
        "\t/* @ring object none 0 - */\n\tprobe a(char *s);\n"
        "\t/* @ring event e g 0 o(s) none \"d\" */\n" + _E,
        (5, "@ring event e: o's id 's' is a char *; an id is an integer")),
    "ring_bound_none": (
        _P + "\t/* @ring group g 0 \"g\" */ /* @ring owner o 0 t */\n"
        "\t/* @ring object none 0 - */\n\tprobe a(uint64_t x);\n"
        "\t/* @ring event e g 0 o none(x) \"d\" */\n" + _E,
        (5, "@ring event e: none(x) names no object; write none")),
}

# What another project's file (strict=False) reads whole where a catalog
# of probekit's is refused: types, and the preprocessor lines of -C.
LENIENT = {
    "unknown_type": [("a", [("unsigned long long", "x")])],
    "no_argument_name": [("a", [("uint64_t", "")])],
    "array": [("a", [("char s[16]", "")])],
    "if0": _X,
    "include": _X,
    "void": [("a", [("void", "")])],
}


def test_trace_defs_generated_from_catalog():
    """target/trace_defs.h, the trace ring's lists, is the catalog's @ring
    comments as gencatalog writes them; 'make probes-doc' remakes it.
    Each of the ring's 9 events mirrors a probe of the catalog."""
    path = os.path.join(probekit.ROOT, "target", "trace_defs.h")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert gencatalog.trace_defs(catalog(), "probes/blktgt.d") == text, (
        "target/trace_defs.h differs from probes/blktgt.d's @ring comments; "
        "run 'make probes-doc'")
    ring = catalog()["ring"]
    assert [(e["name"], e["probe"]) for e in ring["events"]] == [
        ("thread_start", "thread__start"), ("thread_stop", "thread__stop"),
        ("msg_exec", "msg__exec"), ("bdev_io_submit", "io__submit"),
        ("bdev_io_done", "io__done"), ("nbd_request", "nbd__request"),
        ("nbd_reply", "nbd__reply"), ("rpc_request", "rpc__request"),
        ("rpc_done", "rpc__done")]


def _c_code(path):
    """path's C text with its comments blanked (lines kept)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return re.sub(r"/\*.*?\*/|//[^\n]*",
                  lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)


def test_probe_and_ring_event_fire_at_one_call_site():
    """Where a probe and a ring event coincide, target/ fires both through
    their one generated macro, BLKTGT_<PROBE>_EV(...) (target/trace_defs.h),
    never the probe macro or trace_<event>() by hand, which could drift
    apart; and each of those macros has a call site."""
    cat = catalog()
    target = os.path.join(probekit.ROOT, "target")
    files = sorted(f for f in os.listdir(target) if f.endswith((".c", ".h"))
                   and f != "trace_defs.h")
    code = {f: _c_code(os.path.join(target, f)) for f in files}
    by_hand, used = [], set()
    for e in cat["ring"]["events"]:
        m = macro_name(cat["provider"], e["probe"])
        hand = re.compile(rf"\b(?:{m}|trace_{e['name']})\s*\(")
        for f, text in code.items():
            for x in hand.finditer(text):
                line = text.count("\n", 0, x.start()) + 1
                by_hand.append(f"target/{f}:{line}: {x.group().rstrip('(')}")
            if re.search(rf"\b{m}_EV\s*\(", text):
                used.add(e["name"])
    assert by_hand == [], ("fire these through their BLKTGT_<PROBE>_EV(), "
                           "which fires the probe and records the ring event")
    assert used == {e["name"] for e in cat["ring"]["events"]}


def _write_case(tmp_path, case):
    text, _ = MALFORMED[case]
    path = tmp_path / f"{case}.d"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def _read(cat):
    return [(p["name"], [(a["type"], a["name"]) for a in p["args"]])
            for p in cat["probes"]]


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_catalog(tmp_path, case):
    """Each catalog is read whole or refused in one line, FILE:LINE: why,
    exit 1, alike by probekit-gencatalog and probekit-check (never a
    traceback, never a probe left out); strict=False reads the same
    probes, or refuses the same way, but for types."""
    path = _write_case(tmp_path, case)
    want = MALFORMED[case][1]
    gen = subprocess.Popen([os.path.join(probekit.BUILD, "bin",
                                         "probekit-gencatalog"),
                            "--json", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    chk = subprocess.Popen([os.path.join(probekit.BUILD, "bin",
                                         "probekit-check"),
                            "--catalog", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    gout, gerr = gen.communicate(timeout=probekit.TIMEOUT)
    cout, cerr = chk.communicate(timeout=probekit.TIMEOUT)
    if isinstance(want, list):
        assert (gen.returncode, gerr) == (0, ""), gerr
        assert _read(json.loads(gout)) == want
        assert chk.returncode == 0 and "Traceback" not in cerr, cerr
        assert f"0 of {len(want)} catalog probes used" in cout, cout
    else:
        line, why = want
        head = f"{path}:{line}: "
        assert (gen.returncode, gout) == (1, ""), gerr
        assert gerr.startswith("probekit-gencatalog: " + head) and \
            gerr.count("\n") == 1 and why in gerr, gerr
        assert (chk.returncode, cout) == (1, ""), cerr
        assert cerr == gerr[len("probekit-gencatalog: "):], cerr
    lenient = LENIENT.get(case, want)
    if isinstance(lenient, list):
        assert _read(parse_catalog(path, strict=False)) == lenient
    else:
        with pytest.raises(CatalogError) as e:
            parse_catalog(path, strict=False)
        assert f"{e.value}\n" == cerr


@pytest.mark.needs("dtrace")
@pytest.mark.parametrize("case", sorted(c for c, (_, w) in MALFORMED.items()
                                        if isinstance(w, list)))
def test_dtrace_reads_what_the_grammar_takes(tmp_path, case):
    """Every borderline form the grammar takes, systemtap's dtrace -h
    parses (no fallback to its line-by-line guess) into the same probes
    with the same argument counts."""
    path = _write_case(tmp_path, case)
    out = tmp_path / "sdt.h"
    r = subprocess.run(["dtrace", "-h", "-s", path, "-o", str(out)],
                       capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    # Its fallback says "Proceeding as if --no-pyparsing was given";
    # pyparsing 3.2 (unstable) adds a deprecation warning of its own.
    assert r.returncode == 0 and "no-pyparsing" not in r.stdout + r.stderr \
        and "syntax error" not in r.stdout + r.stderr, r
    got = re.findall(r"^#define T_(\w+)\(([^)]*)\) \\?$",
                     out.read_text(), re.M)
    want = MALFORMED[case][1]
    assert sorted((m, len([a for a in args.split(",") if a.strip()]))
                  for m, args in got) == \
        sorted((macro_name("t", p)[2:], len(a)) for p, a in want)


@pytest.mark.needs("dtrace", "readelf")
def test_arg_note_once_and_only_with_usdt(tmp_path):
    """The USDT=1 header puts one probekit note per probe in the program,
    however many files include it (a COMDAT group); the USDT=0 header
    puts none."""
    gen = [probekit.PYTHON, os.path.join(probekit.ROOT, "probes",
                                         "gencatalog")]
    cat = catalog()
    subprocess.run(["dtrace", "-h", "-s", CATALOG, "-o",
                    str(tmp_path / "sdt.h")], check=True)
    for tu in ("a", "b"):
        (tmp_path / f"{tu}.c").write_text(
            '#include "blktgt_probes.h"\n'
            f"int {tu}(void) {{ return BLKTGT_USDT; }}\n")
    (tmp_path / "m.c").write_text("int a(void); int b(void);\n"
                                  "int main(void) { return a() + b(); }\n")
    counts = {}
    for mode, opt in ((1, ["--enabled-header", "sdt.h"]),
                      (0, ["--disabled-header"])):
        subprocess.run(gen + opt + [CATALOG, "-o",
                                    str(tmp_path / "blktgt_probes.h")],
                       check=True)
        exe = str(tmp_path / f"usdt{mode}")
        # No semaphore is referenced, so the -G object is not needed.
        subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-I", str(tmp_path),
                        *(str(tmp_path / f"{t}.c") for t in "abm"),
                        "-o", exe], check=True)
        out = subprocess.run(["readelf", "-n", exe], capture_output=True,
                             text=True, check=True).stdout
        counts[mode] = len(re.findall(r"^\s+probekit\s", out, re.M))
    assert counts == {1: len(cat["probes"]), 0: 0}
