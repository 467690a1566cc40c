# SPDX-License-Identifier: BSD-2-Clause
"""Rooms call down, never back up.  First the NBD server's, never back up (ARCHITECTURE.md,
"blktgt's NBD rooms").  target/nbd.c keeps a connection's lifetime and
calls the rooms below it: listeners (nbd_listen.c), negotiation
(nbd_neg.c), transmission (nbd_tx.c) and the wire protocol (nbd_proto.c).
Those report back only through what nbd.c hands them (callbacks, return
values), so none of them calls a function nbd.c defines, and none calls a
sibling room except the wire protocol they all share.

Then the libbpf tools' helpers (libbpf/README.md, "The helpers' rooms"):
one file per concern, as libbpf-tools keeps them, each defining its own
concern's functions and calling only the rooms below it.

The call graph is cscope's, which parses C (comments and strings are not
calls), over every target/nbd*.[ch] and libbpf/tool_*.c: a new file there
is checked too.

Then the includes: no C file reaches a header through "../" (a header two
rooms share lives in include/).

Last, the suite's own rooms: tests/ mirrors the code, and what tests
share lives in tests/lib/ (ARCHITECTURE.md, "The tests' folders")."""

import ast
import glob
import os
import re
import subprocess

import pytest

import probekit

pytestmark = pytest.mark.needs("cscope")

TARGET = os.path.join(probekit.ROOT, "target")
LIBBPF = os.path.join(probekit.ROOT, "libbpf")
TOP = "nbd.c"            # a connection's lifetime
SHARED = "nbd_proto.c"   # the wire protocol, which every room may call


class CallGraph:
    """cscope's cross-reference of the files of directory that match
    pattern (target/nbd*.[ch]), asked in its line mode: one process
    answers every query."""

    def __init__(self, tmp_path, directory=TARGET, pattern="nbd*.[ch]",
                 index=False):
        self.dir = directory
        self.files = sorted(os.path.basename(p) for p in
                            glob.glob(os.path.join(directory, pattern)))
        self.db = str(tmp_path / "cscope.out")
        # -k: not /usr/include; -u: build afresh; -b: build only.  -q, the
        # inverted index, for libbpf/tool_*.c: without it cscope 15.9 dies
        # of SIGSEGV answering "3syscall" there.
        self.index = ["-q"] if index else []
        subprocess.run(["cscope", "-b", "-k", "-u", "-f", self.db] + self.index + self.files,
                       cwd=directory, check=True)

    def ask(self, queries):
        """{query: [(file, function, line, text)]} for cscope queries
        such as "1NAME" (NAME's global definitions) or "3NAME" (the
        functions that call NAME)."""
        out = subprocess.run(["cscope", "-d", "-l", "-f", self.db] + self.index, cwd=self.dir,
                             input="".join(q + "\n" for q in queries),
                             capture_output=True, text=True, check=True).stdout
        answers, lines = {}, out.split("\n")
        it = iter(queries)
        i = 0
        while i < len(lines):
            # cscope says "Unable to search database" when nothing matches.
            m = re.match(r"(?:>> )?(?:cscope: (\d+) lines?|Unable to search database)$",
                         lines[i])
            i += 1
            if not m:
                continue
            n = int(m.group(1) or 0)
            rows = []
            for row in lines[i:i + n]:
                f, fn, ln, text = row.split(" ", 3)
                rows.append((f, fn, int(ln), text))
            i += n
            answers[next(it)] = rows
        assert len(answers) == len(queries), f"cscope answered {len(answers)} of " \
            f"{len(queries)} queries:\n{out[-2000:]}"
        return answers

    def functions(self):
        """{file: {name: is_static}} for every function each .c file
        defines (what a file can call: the others' non-static ones)."""
        names = set()
        for f in self.files:
            text = open(os.path.join(self.dir, f)).read()
            names |= set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", text))
        defs = {f: {} for f in self.files}
        for q, rows in self.ask(["1" + n for n in sorted(names)]).items():
            for f, _, _, text in rows:
                # A definition's first line names the function and opens
                # its parameter list; variables, macros and prototypes
                # (ending in ';') are not functions defined here.
                m = re.match(r"(static\s+)?[^#=;]*?\b%s\s*\([^;]*$" % re.escape(q[1:]), text)
                if m and f.endswith(".c"):
                    defs[f][q[1:]] = bool(m.group(1))
        return defs

    def calls(self, defs):
        """[(caller file, caller, line, callee file, callee)] for every call
        from one .c file into a function another one defines."""
        owner = {}
        for f, fns in defs.items():
            for n, static in fns.items():
                if not static:
                    owner.setdefault(n, []).append(f)
        out = []
        for q, rows in self.ask(["3" + n for n in sorted(owner)]).items():
            n = q[1:]
            for f, fn, ln, _ in rows:
                # cscope also reads the headers a file includes from its
                # directory (tool_*.h); only the files asked for
                # are callers here.
                if f not in defs:
                    continue
                # A file's own function of that name is the one it calls.
                if n in defs.get(f, {}):
                    continue
                out += [(f, fn, ln, g, n) for g in owner[n] if g != f]
        return out


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    g = CallGraph(tmp_path_factory.mktemp("cscope"))
    defs = g.functions()
    return defs, g.calls(defs)


def show(edges):
    return "\n".join(f"  {f}:{ln} {fn}() calls {g}'s {n}()" for f, fn, ln, g, n in edges)


def test_the_reader_sees_the_rooms(graph):
    """The graph is real: nbd.c defines the server's public functions and
    calls into every room below it, so a test below that finds no call up
    has looked."""
    defs, calls = graph
    assert {"nbd_shutdown", "nbd_get_stats"} <= set(defs[TOP]), sorted(defs[TOP])
    lower = sorted(f for f in defs if f.endswith(".c") and f != TOP)
    assert {"nbd_listen.c", "nbd_neg.c", "nbd_tx.c", SHARED} <= set(lower), lower
    down = {g for f, _, _, g, _ in calls if f == TOP}
    assert down == set(lower), f"nbd.c calls into {sorted(down)}, not every room " \
        f"of {lower}"


def test_no_room_calls_back_up(graph):
    """No file below nbd.c calls a function nbd.c defines."""
    _, calls = graph
    up = [e for e in calls if e[0] != TOP and e[3] == TOP]
    assert not up, "calls back up into the connection-lifetime file target/nbd.c " \
        "(hand the lower room a callback or return a value instead):\n" + show(up)


def test_rooms_below_do_not_call_each_other(graph):
    """The rooms below nbd.c meet only in nbd_proto.c, the wire protocol;
    nbd.c moves a connection from one to the next."""
    _, calls = graph
    side = [e for e in calls if TOP not in (e[0], e[3]) and e[3] != SHARED]
    assert not side, "calls between the rooms below target/nbd.c (let nbd.c " \
        "pass the connection on):\n" + show(side)


# --- the libbpf tools' helpers -----------------------------------------------

# Each room and the functions of its concern that must be defined there
# (the exported ones, which the tools and the other rooms call), as
# libbpf/README.md lists them.
HELPER_ROOMS = {
    "tool_options.c": {"command_name", "tool_err", "escaped", "usage_error",
                       "parse_long", "positive_arg", "parse_options",
                       "libbpf_quiet"},
    "tool_priv.c": {"report_denied"},
    "tool_target.c": {"target_open", "target_open_path",
                      "target_exited_during_attach", "target_close",
                      "target_where"},
    "tool_attach.c": {"report_load_error", "attach_usdt", "attach_uprobe",
                      "pair_exit_detect", "pair_exit_attach",
                      "tracepoint_field_offset", "attach_warm_start",
                      "attach_warm_stop", "kernel_has_bpf_loop",
                      "report_object_load_error",
                      "say_batch_fallback"},
    "tool_drain.c": {"hist_map_drain", "collect_by_name", "loss_report",
                     "pair_report", "hist_report", "hist_entries_drain",
                     "hist_entries_done", "drained_hash_init",
                     "drained_hash_take", "drained_hash_arm",
                     "drained_hash_ready", "probes_quiesce"},
    "tool_loop.c": {"run_loop", "run_loop_print"},
    "tool_main.c": {"tool_start", "tool_opened", "tool_load", "tool_attach_exit",
                    "tool_run", "tool_end"},
}

# The rooms each room may call: the command line (and its error line) is
# at the bottom and calls no room; privilege says why an open or attach
# was denied; the loop prints what the drain reads, and ends the attach
# room's head start on the first attach (attach_warm_stop()) at the
# readiness line.  Options never call
# the loop, nor the target, attach or drain rooms the loop's callers use.
HELPER_CALLS = {
    "tool_options.c": set(),
    "tool_priv.c": {"tool_options.c"},
    "tool_target.c": {"tool_options.c", "tool_priv.c"},
    "tool_attach.c": {"tool_options.c", "tool_priv.c"},
    "tool_drain.c": {"tool_options.c"},
    "tool_loop.c": {"tool_options.c", "tool_drain.c", "tool_attach.c"},
    # The steps of a main(), on top: no room calls it.
    "tool_main.c": {"tool_options.c", "tool_target.c", "tool_attach.c",
                    "tool_drain.c", "tool_loop.c"},
}


@pytest.fixture(scope="module")
def helpers(tmp_path_factory):
    g = CallGraph(tmp_path_factory.mktemp("cscope-libbpf"), LIBBPF, "tool_*.c",
                  index=True)
    defs = g.functions()
    return defs, g.calls(defs)


def test_helper_rooms_are_the_ones_named(helpers):
    """libbpf/tool_*.c are exactly the rooms above, and trace_helpers.c
    and .h, which held and declared all six concerns, are gone."""
    defs, _ = helpers
    assert set(defs) == set(HELPER_ROOMS), sorted(defs)
    assert not any(os.path.exists(os.path.join(LIBBPF, "trace_helpers" + e)) for e in (".c", ".h"))


def test_each_concern_in_its_own_room(helpers):
    """Each concern's functions are defined in its own room and in no other,
    so no file defines the functions of two concerns."""
    defs, _ = helpers
    wrong = []
    for room, names in HELPER_ROOMS.items():
        for n in sorted(names):
            where = sorted(f for f, fns in defs.items() if n in fns)
            if where != [room]:
                wrong.append(f"  {n}() belongs in {room}, is defined in {where}")
    assert not wrong, "helpers outside their concern's room:\n" + "\n".join(wrong)
    # An exported function no room claims is a concern this table misses.
    claimed = set().union(*HELPER_ROOMS.values())
    extra = sorted(f"{f}: {n}()" for f, fns in defs.items()
                   for n, static in fns.items() if not static and n not in claimed)
    assert not extra, "exported helpers HELPER_ROOMS does not name (add each to " \
        "its concern's room): " + ", ".join(extra)


def test_helper_rooms_call_down(helpers):
    """Each room calls only the rooms HELPER_CALLS allows; in particular the
    option parsing never calls the output loop.  The graph is real: the
    target and attach rooms call privilege, and the loop the options'
    error line.  (The loop hands the drain's pair_report() on as the
    output's trailer, a reference cscope does not count as a call.)"""
    _, calls = helpers
    seen = {(f, g) for f, _, _, g, _ in calls}
    assert {("tool_target.c", "tool_priv.c"), ("tool_attach.c", "tool_priv.c"),
            ("tool_loop.c", "tool_options.c"), ("tool_main.c", "tool_loop.c")} \
        <= seen, sorted(seen)
    bad = [e for e in calls if e[3] not in HELPER_CALLS[e[0]]]
    assert not bad, "calls between the helpers' rooms that HELPER_CALLS does " \
        "not allow (libbpf/README.md):\n" + show(bad)


# --- bcc/ is the BCC tools' own room (ARCHITECTURE.md, "The folders") -------

BCC = os.path.join(probekit.ROOT, "bcc")


def python_files(top, skip=()):
    """Every Python file under top (a .py, or a script whose first line
    names python), but those in the directories of skip, the build
    directory and hidden ones."""
    skip = {os.path.realpath(d) for d in (*skip, probekit.BUILD)}
    for d, subdirs, files in os.walk(top):
        subdirs[:] = sorted(s for s in subdirs if not s.startswith(".")
                            and s != "__pycache__"
                            and os.path.realpath(os.path.join(d, s)) not in skip)
        for f in sorted(files):
            path = os.path.join(d, f)
            if f.endswith(".py"):
                yield path
            elif "." not in f and os.path.isfile(path):
                with open(path, "rb") as fh:
                    if re.match(rb"#!.*python", fh.readline()):
                        yield path


def reaches_into_bcc(path, modules):
    """(line, what) for each import of a bcc/ module (modules: their
    names) in path, and each change of sys.path that names bcc/ (through a
    module-level name too, as ROOT/"bcc" held in a variable)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    names = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name)}

    def strings(node, seen=()):
        for n in ast.walk(node):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                yield n.value
            elif isinstance(n, ast.Name) and n.id in names and n.id not in seen:
                yield from strings(names[n.id], (*seen, n.id))

    def is_sys_path(n):
        return (isinstance(n, ast.Attribute) and n.attr == "path"
                and isinstance(n.value, ast.Name) and n.value.id == "sys")

    out = []
    for n in ast.walk(tree):
        mods = ([a.name for a in n.names] if isinstance(n, ast.Import) else
                [n.module] if isinstance(n, ast.ImportFrom) and n.module else [])
        out += [(n.lineno, f"imports {m}") for m in mods
                if m.split(".")[0] in modules]
        edit = None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and is_sys_path(n.func.value):
            edit = n
        elif isinstance(n, (ast.Assign, ast.AugAssign)) and any(
                is_sys_path(t) or isinstance(t, ast.Subscript) and is_sys_path(t.value)
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])):
            edit = n.value
        if edit is not None and any(re.search(r"(^|/)bcc(/|$)", s)
                                    for s in strings(edit)):
            out.append((n.lineno, "puts bcc/ on sys.path"))
    return out


def test_nothing_reaches_into_bcc():
    """No Python file outside bcc/ imports one of bcc/'s modules or puts
    bcc/ on sys.path: what a BCC tool shares with anything else (the spec
    reader, probelib.toolspec) sits in probelib, below both.  The reader
    is real: it finds the bcc/ tools' own imports of their modules."""
    modules = {f[:-3] for f in os.listdir(BCC) if f.endswith(".py")}
    assert {"probekit_bcc_hist", "probekit_bcc_args"} <= modules, sorted(modules)
    own = reaches_into_bcc(os.path.join(BCC, "iolatency"), modules)
    assert "imports probekit_bcc_args" in {what for _, what in own}, own
    files = list(python_files(probekit.ROOT, skip=[BCC]))
    assert len(files) > 50 and os.path.join(probekit.ROOT, "specs", "gentool") \
        in files, files
    bad = [f"  {os.path.relpath(p, probekit.ROOT)}:{ln}: {what}"
           for p in files for ln, what in reaches_into_bcc(p, modules)]
    assert not bad, "reaches into bcc/ from outside it (move what is shared " \
        "into probes/probelib/):\n" + "\n".join(bad)


# --- includes: a header two rooms share lives in include/ --------------------

# An #include's path, quoted or bracketed; it climbs out of the including
# file's folder when one of its components is "..".
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^">\n]*)[">]', re.M)


def c_sources(root=probekit.ROOT):
    """Every C source and header of the tree (not the build's output)."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in (".git", "build")
                         and not x.startswith("build"))
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith((".c", ".h"))]
    return out


def climbing_includes(paths):
    """[(path, line, included path)] for each #include through "../"."""
    out = []
    for p in paths:
        text = open(p, errors="replace").read()
        for m in INCLUDE.finditer(text):
            if ".." not in m.group(1).split("/"):
                continue
            out.append((os.path.relpath(p, probekit.ROOT),
                        text.count("\n", 0, m.start()) + 1, m.group(1)))
    return out


def test_no_include_reaches_into_another_room(tmp_path):
    """No C file includes a header through "../" (libbpf/ once reached
    ../target/io_batch.h): a header two rooms share lives in include/ and
    is included by its name alone, on -Iinclude (ARCHITECTURE.md, "The
    folders")."""
    paths = c_sources()
    # The walk is real: it reaches the rooms that share include/'s headers.
    rel = {os.path.relpath(p, probekit.ROOT) for p in paths}
    assert {"target/bdev.c", "libbpf/io_batch.bpf.h", "libbpf/exporter_render.c",
            "include/io_batch.h"} <= rel, sorted(rel)[:20]
    bad = climbing_includes(paths)
    assert not bad, "includes through ../ (move the header to include/ and " \
        "include it by name):\n" + "\n".join(f"  {p}:{ln}: {h}" for p, ln, h in bad)
    # The check can fail: each spelling of a climb is found, a name is not.
    f = tmp_path / "x.c"
    f.write_text('#include "../target/io_batch.h"\n# include <../include/a.h>\n'
                 '#include "sub/../b.h"\n#include "io_batch.h"\n#include "..x.h"\n')
    assert [(ln, h) for _, ln, h in climbing_includes([str(f)])] == \
        [(1, "../target/io_batch.h"), (2, "../include/a.h"), (3, "sub/../b.h")]


# --- a header per C file ----------------------------------------------------

# The rooms whose C files each have their own header: blktgt, and the
# libbpf tools with the exporter.  A BPF program (*.bpf.c, *.bpf.h) is
# not one: its header is the one it shares with its tool (TOOL.h).
HEADER_ROOMS = [TARGET, LIBBPF]


def strip_c(text):
    """text without comments, string and character literals, and
    preprocessor lines (a line kept for each line removed)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    text = re.sub(r"/\*.*?\*/", blank, text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\\n])*'", "''", text)
    return re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", "", text, flags=re.M)


# A function's name: the first identifier followed by "(" that is not an
# attribute or operator (__attribute__((format(...))) names no function).
FUNC_NAME = re.compile(r"\b(?!__attribute__\b|sizeof\b|__typeof__\b)([A-Za-z_]\w*)\s*\(")
ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\)")


def file_scope(text):
    """(declared, defined): the functions text declares (prototypes) and
    defines at file scope, by name.  A prototype is a statement at brace
    depth 0 that is not a typedef or an initialised variable and whose
    first name is followed by "(" (not "(*": a pointer to a function); a
    definition is the same head followed by a body.  Upper-case names are
    macros (X-macro lists, SEC()), not functions."""
    declared, defined = [], []
    depth, head, body_of_fn = 0, [], False
    for ch in strip_c(text):
        if depth:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if not depth and body_of_fn:
                head = []
            continue
        if ch in "{;":
            h = ATTRIBUTE.sub(" ", " ".join("".join(head).split()))
            m = FUNC_NAME.search(h)
            fn = m and not m.group(1).isupper() and not h.startswith("typedef") \
                and "=" not in h and not re.match(r"\(\s*\*", h[m.end() - 1:])
            if ch == "{":
                body_of_fn = bool(fn) and h.endswith(")")
                if body_of_fn:
                    defined.append(m.group(1))
                depth = 1
            else:
                head = []
                if fn:
                    declared.append(m.group(1))
            continue
        head.append(ch)
    return declared, defined


def header_faults(directory):
    """[(file, fault)] for directory's C files: a C file other than a
    main() without its own same-named header, or one that does not
    include it; a header declaring a function its own C file does not
    define (or declaring one with no C file of its own)."""
    faults = []
    names = sorted(os.listdir(directory))
    for f in names:
        if f.endswith(".bpf.c") or f.endswith(".bpf.h") or not f.endswith((".c", ".h")):
            continue
        text = open(os.path.join(directory, f)).read()
        stem = f[:-2]
        if f.endswith(".c"):
            if "main" in file_scope(text)[1]:
                continue
            if stem + ".h" not in names:
                faults.append((f, f"has no header {stem}.h"))
            elif not re.search(r'^\s*#\s*include\s*"%s\.h"' % re.escape(stem), text, re.M):
                faults.append((f, f'does not include "{stem}.h"'))
            continue
        declared, inline = file_scope(text)
        own = os.path.join(directory, stem + ".c")
        defined = file_scope(open(own).read())[1] if os.path.exists(own) else []
        for n in declared:
            if n not in defined and n not in inline:
                faults.append((f, f"declares {n}(), which {stem}.c does not define"))
    return faults


def test_a_header_per_c_file(tmp_path):
    """Each C file of target/ and libbpf/ (the exporter's too) but a
    main() has its own header, which it includes, and a header declares
    only the functions its own C file defines: one 420-line header over
    six files (libbpf/trace_helpers.h once), or a parser's functions
    declared by the server above it (target/jsonrpc.h once), is gone."""
    faults = [(os.path.relpath(d, probekit.ROOT), f, why)
              for d in HEADER_ROOMS for f, why in header_faults(d)]
    assert not faults, "C files and headers out of step (give the C file " \
        "its own header; declare a function in its own file's header):\n" + \
        "\n".join(f"  {d}/{f} {why}" for d, f, why in faults)
    # The parser is real: it reads the prototypes of a room's header.
    declared, _ = file_scope(open(os.path.join(LIBBPF, "tool_priv.h")).read())
    assert declared == ["report_denied"], declared
    # The check can fail: a prototype moved to another room's header, and
    # a C file whose header is gone.
    for f in ("tool_options.c", "tool_options.h", "tool_priv.c", "tool_priv.h"):
        with open(os.path.join(LIBBPF, f)) as src:
            (tmp_path / f).write_text(src.read())
    priv = (tmp_path / "tool_priv.h").read_text()
    proto = re.search(r"^bool report_denied\(.*?\);\n", priv, re.M | re.S).group(0)
    (tmp_path / "tool_priv.h").write_text(priv.replace(proto, ""))
    opts = (tmp_path / "tool_options.h").read_text()
    end = opts.rindex("#endif")
    (tmp_path / "tool_options.h").write_text(opts[:end] + proto + opts[end:])
    assert header_faults(str(tmp_path)) == \
        [("tool_options.h", "declares report_denied(), which tool_options.c does not define")]
    (tmp_path / "tool_priv.h").unlink()
    assert ("tool_priv.c", "has no header tool_priv.h") in header_faults(str(tmp_path))


# --- tests/ mirrors the code ---------------------------------------------------

TESTS = os.path.join(probekit.ROOT, "tests")


def declared_test_folders():
    """The folders of ARCHITECTURE.md's table "The tests' folders", the
    one list of them."""
    with open(os.path.join(probekit.ROOT, "ARCHITECTURE.md")) as f:
        text = f.read()
    section = text.split("## The tests' folders\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `tests/([\w-]+)/` \|", section, re.M)


def imports_of_test_modules(path):
    """[(line, module)] for each test module (test_*) path imports."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            names = [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            names = [n.module]
        else:
            continue
        out += [(n.lineno, m) for m in names if m.startswith("test_")]
    return out


def layout_faults(tests, declared):
    """What in the tree at tests breaks the rules of its folders."""
    folders = sorted(d for d in os.listdir(tests) if d != "__pycache__"
                     and os.path.isdir(os.path.join(tests, d)))
    faults = [f"tests/{d}/ is not in ARCHITECTURE.md's table" for d in folders
              if d not in declared]
    faults += [f"ARCHITECTURE.md's table names tests/{d}/, which is not there"
               for d in declared if d not in folders]
    faults += [f"tests/{f} is in no folder" for f in sorted(os.listdir(tests))
               if f.startswith("test_") and f.endswith(".py")]
    seen = {}
    for d in folders:
        for f in sorted(os.listdir(os.path.join(tests, d))):
            if not f.endswith(".py"):
                continue
            if f.startswith("test_"):
                if f in seen:
                    faults.append(f"tests/{d}/{f}: tests/{seen[f]}/ has a "
                                  "module of that name (pytest imports each by name)")
                seen[f] = d
            elif d != "lib":
                continue
            for ln, m in imports_of_test_modules(os.path.join(tests, d, f)):
                faults.append(f"tests/{d}/{f}:{ln}: imports the test module {m}")
    return faults


def test_tests_mirror_the_code(tmp_path):
    """tests/ has a folder per code folder it tests and the folders
    ARCHITECTURE.md's table names, no test outside them, and no test or
    helper that imports a test module: what tests share sits in
    tests/lib/.  (The emulated machines' suites in tests/machines/ run
    the host's tests again by importing them; they are no test_ file.)"""
    declared = declared_test_folders()
    assert {"probes", "target", "wrapper", "bt", "bcc", "libbpf", "lib",
            "fixtures"} <= set(declared), declared
    top = {d for d in os.listdir(probekit.ROOT)
           if os.path.isdir(os.path.join(probekit.ROOT, d))}
    assert not [d for d in declared if d in ("probes", "target", "wrapper",
                                             "bt", "bcc", "libbpf")
                and d not in top]
    assert layout_faults(TESTS, declared) == []
    # The check can fail: a test outside the folders, a folder the table
    # leaves out, a name twice, and a test that imports another.
    for d in ("target", "lib", "odd"):
        (tmp_path / d).mkdir()
    (tmp_path / "test_loose.py").write_text("")
    (tmp_path / "target" / "test_a.py").write_text("import os\n")
    (tmp_path / "odd" / "test_a.py").write_text(
        "import probekit\nfrom test_b import helper\n")
    (tmp_path / "lib" / "helpers.py").write_text("import test_c\n")
    assert layout_faults(str(tmp_path), ["target", "lib", "gone"]) == [
        "tests/odd/ is not in ARCHITECTURE.md's table",
        "ARCHITECTURE.md's table names tests/gone/, which is not there",
        "tests/test_loose.py is in no folder",
        "tests/lib/helpers.py:1: imports the test module test_c",
        "tests/odd/test_a.py:2: imports the test module test_b",
        "tests/target/test_a.py: tests/odd/ has a module of that name "
        "(pytest imports each by name)",
    ]
