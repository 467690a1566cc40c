# SPDX-License-Identifier: BSD-2-Clause
"""The NBD server's rooms call down, never back up (ARCHITECTURE.md,
"blktgt's NBD rooms").  target/nbd.c keeps a connection's lifetime and
calls the rooms below it: listeners (nbd_listen.c), negotiation
(nbd_neg.c), transmission (nbd_tx.c) and the wire protocol (nbd_proto.c).
Those report back only through what nbd.c hands them (callbacks, return
values), so none of them calls a function nbd.c defines, and none calls a
sibling room except the wire protocol they all share.

The call graph is cscope's, which parses C (comments and strings are not
calls), over every target/nbd*.[ch]: a new file there is checked too."""

import glob
import os
import re
import subprocess

import pytest

import probekit

pytestmark = pytest.mark.needs("cscope")

TARGET = os.path.join(probekit.ROOT, "target")
TOP = "nbd.c"            # a connection's lifetime
SHARED = "nbd_proto.c"   # the wire protocol, which every room may call


class CallGraph:
    """cscope's cross-reference of target/nbd*.[ch], asked in its line
    mode: one process answers every query."""

    def __init__(self, tmp_path):
        self.files = sorted(os.path.basename(p) for p in
                            glob.glob(os.path.join(TARGET, "nbd*.[ch]")))
        self.db = str(tmp_path / "cscope.out")
        # -k: not /usr/include; -u: build afresh; -b: build only.
        subprocess.run(["cscope", "-b", "-k", "-u", "-f", self.db] + self.files,
                       cwd=TARGET, check=True)

    def ask(self, queries):
        """{query: [(file, function, line, text)]} for cscope queries
        such as "1NAME" (NAME's global definitions) or "3NAME" (the
        functions that call NAME)."""
        out = subprocess.run(["cscope", "-d", "-l", "-f", self.db], cwd=TARGET,
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
        """{file: {name: is_static}} for every function each nbd*.c file
        defines (what a file can call: the others' non-static ones)."""
        names = set()
        for f in self.files:
            text = open(os.path.join(TARGET, f)).read()
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
        from one nbd*.c file into a function another one defines."""
        owner = {}
        for f, fns in defs.items():
            for n, static in fns.items():
                if not static:
                    owner.setdefault(n, []).append(f)
        out = []
        for q, rows in self.ask(["3" + n for n in sorted(owner)]).items():
            n = q[1:]
            for f, fn, ln, _ in rows:
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
