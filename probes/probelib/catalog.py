# SPDX-License-Identifier: BSD-2-Clause
"""The probe catalog: a DTrace provider file, as systemtap's dtrace reads
it, with the types probekit allows.  probekit's one reader of it:
probekit-gencatalog makes headers and docs from what it returns, and
probekit-check checks binaries and scripts against it.

The grammar is strict: every character of the file is taken as what it
is, and anything else is an error that names FILE:LINE.  A catalog is

    catalog  := extra* provider extra*
    provider := "provider" NAME "{" (extra | probe)* "}" ";"
    probe    := "probe" NAME "(" [ arg ("," arg)* ] ")" ";"
    arg      := TYPE NAME           TYPE one of TYPES ("const" ignored)
    extra    := a comment (/* ... */ or // to the end of the line), which
                may also sit between any two words; a preprocessor line
                (# first on its line, as PostgreSQL's probes.d #defines)

where NAME is ASCII letters, digits and _ not starting with a digit.
Everything the grammar accepts, systemtap's dtrace -h reads as the same
probes (tests/probes/test_catalog.py checks it).  What dtrace itself lets through
but probekit refuses: a missing ";", a second provider block, a name with
"$", Solaris' translated arguments ("probe p(a) : (b)"), and in a strict
catalog "(void)", which dtrace -h reads as one argument, and #if and
#include, which it reads only under -C.

strict=False reads another project's provider file (PostgreSQL's
probes.d: its own type names, arguments without names): an argument whose
type probekit does not know keeps its text as its type, its name if it
has one, and size and pointer None.  The grammar is the same: no line is
ever skipped, no probe ever dropped."""

import re

from .inputs import open_regular
from .notes import MAX_ARGS, NAME_MAX

# The C types the catalog may use, with their size in bytes and whether
# they are pointers.  Anything else is refused: argument sizes must be
# fixed, so every reader (bpftrace, BCC, libbpf) agrees on them.
TYPES = {
    "int8_t": (1, False), "uint8_t": (1, False),
    "int16_t": (2, False), "uint16_t": (2, False),
    "int32_t": (4, False), "uint32_t": (4, False),
    "int64_t": (8, False), "uint64_t": (8, False),
    "char *": (8, True), "void *": (8, True),
}

# A catalog is a few kB; a file past this is not one (and is not read
# whole into memory).
MAX_BYTES = 1 << 20

# Words that end a C type, not name an argument ("unsigned int").
_C_TYPE_WORDS = {"int", "long", "short", "char", "signed", "unsigned",
                 "bool", "float", "double", "void", "const", "volatile",
                 "struct", "union", "enum"}

# C's keywords: no argument name (a parameter of the generated header).
_C_KEYWORDS = _C_TYPE_WORDS | {
    "auto", "break", "case", "continue", "default", "do", "else", "extern",
    "for", "goto", "if", "inline", "register", "restrict", "return",
    "sizeof", "static", "switch", "typedef", "while", "_Bool", "_Atomic",
    "_Alignas", "_Alignof", "_Complex", "_Generic", "_Noreturn",
    "_Static_assert", "_Thread_local"}

# Preprocessor lines a strict catalog may hold: dtrace -h without -C
# ignores them, and so they change nothing.  #if and #include would mean
# something only under -C, which probekit's build does not pass.
_PP_INERT = {"", "define", "undef", "pragma", "error", "warning", "line",
             "ident"}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"""
    (?P<space>[ \t\f\v\r]+)
  | (?P<newline>\n)
  | (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<unclosed>/\*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>[0-9]+)
  | (?P<punct>[{}();,*\[\]:])
""", re.X | re.S)


class CatalogError(Exception):
    """A catalog that cannot be read: str() is one line, FILE:LINE: why."""


def macro_name(provider, probe):
    """The C macro of a probe, as dtrace -h names it (BLKTGT_IO_SUBMIT)."""
    return f"{provider}_{probe.replace('__', '_')}".upper()


def _shown(text):
    """A token as an error message quotes it."""
    return "the end of the file" if text is None else repr(text)


class _Tokens:
    """The tokens of a catalog's text, comments apart: each (kind, text,
    line, start offset, end offset)."""

    def __init__(self, text, path, strict):
        self.path = path
        self.source = text
        self.toks = []
        self.comments = []      # (token index it precedes, text, line)
        line, at, bol = 1, 0, True
        while at < len(text):
            if bol:
                m = re.match(r"[ \t\f\v\r]*#", text[at:at + 4096])
                if m:
                    line, at = self._preprocessor(text, at + m.end(), line,
                                                  strict)
                    continue
            m = _TOKEN.match(text, at)
            if m is None:
                self.toks.append(("other", text[at], line, at, at + 1))
                at += 1
                bol = False
                continue
            kind = m.lastgroup
            if kind == "unclosed":
                raise self.error(line, "a /* comment is never closed")
            if kind == "comment":
                body = m.group()
                body = body[2:-2] if body.startswith("/*") else body[2:]
                self.comments.append((len(self.toks), body, line))
            elif kind not in ("space", "newline"):
                self.toks.append((kind, m.group(), line, at, m.end()))
            line += m.group().count("\n")
            bol = kind == "newline" or (bol and kind == "space")
            at = m.end()
        self.end_line = line

    def _preprocessor(self, text, at, line, strict):
        """Skip the preprocessor line whose text starts at at (past its
        #), with its backslash continuations: (line, offset) past it."""
        start = line
        end = at
        while True:
            nl = text.find("\n", end)
            if nl < 0:
                end = len(text)
                break
            line += 1
            if text[end:nl].rstrip("\r").endswith("\\"):
                end = nl + 1
                continue
            end = nl + 1
            break
        word = re.match(r"\s*([A-Za-z_]*)", text[at:end]).group(1)
        if strict and word not in _PP_INERT:
            raise self.error(start, f"#{word}: dtrace -h reads a catalog "
                             "without the C preprocessor, so this line would "
                             "change nothing; declare every probe plainly")
        return line, end

    def error(self, line, why):
        return CatalogError(f"{self.path}:{line}: {why}")


class _Parser:
    def __init__(self, toks, strict):
        self.t = toks
        self.strict = strict
        self.i = 0

    def peek(self):
        return self.t.toks[self.i] if self.i < len(self.t.toks) else None

    def text(self):
        tok = self.peek()
        return tok[1] if tok else None

    def line(self):
        tok = self.peek()
        return tok[2] if tok else self.t.end_line

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def fail(self, why, line=None):
        return self.t.error(self.line() if line is None else line, why)

    def expect(self, text, what):
        if self.text() != text:
            raise self.fail(f"expected {what}, found {_shown(self.text())}")
        return self.take()

    def name(self, what, after):
        """A NAME token, refused whole when a character no name has runs
        on from it (io-submit, café)."""
        tok = self.peek()
        if tok is None or tok[0] != "name":
            raise self.fail(f"expected {what} after {after}, found "
                            f"{_shown(self.text())}")
        self.take()
        nxt = self.peek()
        if nxt is not None and nxt[3] == tok[4] and nxt[0] in ("other",
                                                                "number"):
            raise self.fail(f"{what} '{tok[1]}{nxt[1]}...' has "
                            f"{_shown(nxt[1])}: a name is ASCII letters, "
                            "digits and _", tok[2])
        if len(tok[1]) > NAME_MAX:
            raise self.fail(f"{what} '{tok[1][:32]}...' is longer than "
                            f"{NAME_MAX} characters (the stapsdt note's "
                            "bound)", tok[2])
        return tok

    def doc(self, since):
        """The documentation of the probe whose 'probe' is the next token:
        the last comment after token index since and before it."""
        docs = [c for at, c, _ in self.t.comments
                if since <= at <= self.i and not _is_ring(c)]
        if not docs:
            return ""
        doc = " ".join(docs[-1].split()).strip()
        return "" if doc.startswith("---") else doc

    def catalog(self):
        if self.text() != "provider":
            raise self.fail("expected 'provider NAME {' (comments, blank "
                            "lines and # lines may come before it), found "
                            f"{_shown(self.text())}")
        pline = self.take()[2]
        provider = self.name("a provider name", "'provider'")[1]
        self.expect("{", f"'{{' after 'provider {provider}'")
        probes, seen, macros = [], set(), {}
        since = self.i
        while self.text() != "}":
            if self.text() != "probe":
                raise self.fail("expected 'probe NAME(ARGS);' or the "
                                "provider's closing '};', found "
                                f"{_shown(self.text())}")
            doc = self.doc(since)
            p = self.probe()
            line = p["line"]
            if p["name"] in seen:
                raise self.fail(f"probe {p['name']} declared twice", line)
            seen.add(p["name"])
            m = macro_name(provider, p["name"])
            if m in macros:
                raise self.fail(f"probe {p['name']}'s macro {m} is also "
                                f"probe {macros[m]}'s (dtrace -h writes __ "
                                "as _, in capitals): rename one", line)
            macros[m] = p["name"]
            p["doc"] = doc
            probes.append(p)
            since = self.i
        self.take()
        self.expect(";", "';' after the provider block's '}'")
        if self.peek() is not None:
            if self.text() == "provider":
                raise self.fail("a second provider block: a catalog "
                                "declares one provider")
            raise self.fail("expected nothing but comments after the "
                            f"provider block's '}};', found "
                            f"{_shown(self.text())}")
        if not probes:
            raise self.fail(f"provider {provider} declares no probes", pline)
        cat = {"provider": provider, "probes": probes}
        ring = _Ring(self.t, probes).read()
        if ring:
            cat["ring"] = ring
        return cat

    def probe(self):
        line = self.take()[2]
        name = self.name("a probe name", "'probe'")[1]
        self.expect("(", f"'(' after 'probe {name}'")
        words = []
        while self.text() != ")":
            tok = self.peek()
            if tok is None or tok[1] in (";", "{", "}", "(") or \
                    tok[0] == "other":
                raise self.fail(f"probe {name}: expected its arguments and "
                                f"')', found {_shown(self.text())}")
            words.append(self.take())
        close = self.take()[2]
        if self.text() == ":":
            raise self.fail(f"probe {name}: translated arguments "
                            "(': (...)') are Solaris DTrace's; systemtap's "
                            "dtrace ignores them")
        if self.text() != ";":
            raise self.fail(f"probe {name}: expected ';' after its "
                            f"argument list, found {_shown(self.text())}",
                            close)
        self.take()
        args = self.arguments(name, words)
        if len(args) > MAX_ARGS:
            raise self.fail(f"probe {name} has {len(args)} arguments; "
                            f"sys/sdt.h allows {MAX_ARGS}", line)
        return {"name": name, "doc": "", "line": line, "args": args,
                "end": self.i}

    def arguments(self, probe, words):
        """The typed arguments of a probe from the words between its
        parentheses."""
        if not words:
            return []
        if self.strict and [w[1] for w in words] == ["void"]:
            raise self.fail(f"probe {probe}: dtrace -h reads '(void)' as "
                            f"one argument; write 'probe {probe}();' for "
                            "none", words[0][2])
        items, cur = [], []
        for w in words:
            if w[1] == ",":
                items.append(cur)
                cur = []
            else:
                cur.append(w)
        items.append(cur)
        args, seen = [], set()
        for i, item in enumerate(items):
            a = self.argument(probe, i, item,
                              words[0][2] if not item else item[0][2])
            if a["name"]:
                if a["name"] in seen:
                    raise self.fail(f"probe {probe}: two arguments are "
                                    f"named '{a['name']}'", item[0][2])
                seen.add(a["name"])
            args.append(a)
        return args

    def argument(self, probe, i, item, line):
        if not item:
            raise self.fail(f"probe {probe}: argument {i} is empty", line)
        text = " ".join(self.t.source[item[0][3]:item[-1][4]].split())
        if any(w[1] in "[]:" or w[0] == "number" for w in item):
            if self.strict:
                raise self.fail(f"probe {probe}: argument {i} '{text}': an "
                                "array is not a probe argument; pass a "
                                "pointer", line)
            return {"name": "", "type": text, "size": None, "pointer": None}
        last = item[-1]
        named = len(item) > 1 and last[0] == "name" and \
            last[1] not in _C_TYPE_WORDS
        t = _type_text(item[:-1] if named else item)
        if named and last[1] in _C_KEYWORDS:
            raise self.fail(f"probe {probe}: argument {i} is named "
                            f"'{last[1]}', a C keyword", line)
        if self.strict and not named:
            raise self.fail(f"probe {probe}: argument {i} '{text}' needs "
                            "a type and a name", line)
        if self.strict and t not in TYPES:
            raise self.fail(f"probe {probe}: argument '{last[1]}' has type "
                            f"'{t}'; use one of " + ", ".join(TYPES), line)
        size, ptr = TYPES.get(t, (None, None))
        return {"name": last[1] if named else "", "type": t, "size": size,
                "pointer": ptr}


# --- the trace ring's events, declared beside the probes they mirror ------
#
# blktgt's trace ring (target/trace.h) records events of its own; they are
# declared in the catalog, in comments that dtrace skips and this reader
# takes strictly, each one directive:
#
#   /* @ring group NAME INDEX "DOC" */      a group of up to 64 events
#   /* @ring owner NAME INDEX LETTER */     who records an event
#   /* @ring object NAME INDEX LETTER */    what an event is about
#   /* @ring event NAME GROUP BIT OWNER OBJECT [new] [related OBJECT] "DOC"
#    *   [TYPE ARG, ...] */
#
# An event comes right after the probe it mirrors, and each of its ARGs is
# one of that probe's arguments, by name: the probe and the event record
# the same values.  TYPE is one of RING_TYPES.  An event's OWNER, OBJECT
# and related OBJECT may each be written TYPE(ARG), where ARG is the
# probe's integer argument that carries its id (thread(thread),
# bdev_io(id)); an id the probe does not carry is given at the call site.
# probekit-gencatalog --trace-defs writes target/trace_defs.h from them:
# the ring's lists, and for each event one call-site macro,
# PROVIDER_PROBE_EV(ids..., probe args...), that fires both the probe and
# the event.

RING_TYPES = ("INT", "INT32", "PTR", "STR8", "STR16", "STR24", "STR32")
_RING_WORD = re.compile(r'"(?:[^"\\\n]|\\.)*"|[^\s,]+|,')


def _is_ring(comment):
    return comment.lstrip(" *\t\n").startswith("@ring")


class _Ring:
    def __init__(self, toks, probes):
        self.t = toks
        self.probes = probes
        self.out = {"groups": [], "owners": [], "objects": [], "events": []}

    def read(self):
        for at, body, line in self.t.comments:
            if _is_ring(body):
                self.directive(at, body, line)
        return self.out if any(self.out.values()) else None

    def directive(self, at, body, line):
        text = " ".join(ln.strip().lstrip("*") for ln in body.split("\n"))
        words = _RING_WORD.findall(text)[1:]
        what = words[0] if words else ""
        kinds = {"group": "groups", "owner": "owners", "object": "objects"}
        if what in kinds:
            self.table(kinds[what], what, words[1:], line)
        elif what == "event":
            self.event(at, words[1:], line)
        else:
            raise self.t.error(line, f"@ring {what!s}: expected group, "
                               "owner, object or event")

    def _fail(self, line, why):
        return self.t.error(line, why)

    def _name(self, w, what, line):
        if not _NAME.fullmatch(w or ""):
            raise self._fail(line, f"@ring: {what} '{w}' is not a name "
                             "(ASCII letters, digits and _)")
        return w

    def _index(self, w, what, line, limit):
        if not re.fullmatch(r"[0-9]{1,3}", w or "") or int(w) >= limit:
            raise self._fail(line, f"@ring: {what} '{w}' is not a number "
                             f"from 0 to {limit - 1}")
        return int(w)

    def _doc(self, w, line):
        if not w or len(w) < 2 or w[0] != '"' or w[-1] != '"':
            raise self._fail(line, f"@ring: expected a \"description\", "
                             f"found '{w}'")
        return w[1:-1]

    def _declared(self, table, name, line):
        if name not in [e["name"] for e in self.out[table]]:
            raise self._fail(line, f"@ring: no {table[:-1]} '{name}' is "
                             "declared above")

    def table(self, table, what, words, line):
        if len(words) != 3:
            raise self._fail(line, f"@ring {what}: expected NAME INDEX "
                             + ('"DOC"' if what == "group" else "LETTER"))
        name = self._name(words[0], f"{what} name", line)
        index = self._index(words[1], f"{what} index", line, 64)
        if what == "group":
            third = {"doc": self._doc(words[2], line)}
        else:
            if not re.fullmatch(r"[a-z-]", words[2]):
                raise self._fail(line, f"@ring {what} {name}: its letter "
                                 f"'{words[2]}' is not one of a-z or -")
            third = {"letter": words[2]}
        for e in self.out[table]:
            if e["name"] == name or e["index"] == index:
                raise self._fail(line, f"@ring {what} {name}: its name or "
                                 f"index is {e['name']}'s too")
        self.out[table].append({"name": name, "index": index, **third})

    def event(self, at, words, line):
        mirrors = [p for p in self.probes if p["end"] <= at]
        if not mirrors or any(e["probe"] == mirrors[-1]["name"]
                              for e in self.out["events"]):
            raise self._fail(line, "@ring event: it must come right after "
                             "the probe it mirrors (one event per probe)")
        probe = mirrors[-1]
        if len(words) < 6:
            raise self._fail(line, "@ring event: expected NAME GROUP BIT "
                             "OWNER OBJECT [new] [related OBJECT] \"DOC\" "
                             "[TYPE ARG, ...]")
        name = self._name(words[0], "event name", line)
        group = words[1]
        self._declared("groups", group, line)
        bit = self._index(words[2], "bit", line, 64)
        owner, owner_arg = self._bound(words[3], "owners", name, probe, line)
        obj, obj_arg = self._bound(words[4], "objects", name, probe, line)
        rest = words[5:]
        new = bool(rest) and rest[0] == "new"
        rest = rest[new:]
        related, rel_arg = "none", None
        if rest and rest[0] == "related":
            related, rel_arg = self._bound(rest[1] if len(rest) > 1 else "",
                                           "objects", name, probe, line)
            rest = rest[2:]
        doc = self._doc(rest[0] if rest else "", line)
        args, names = [], {a["name"] for a in probe["args"]}
        items = " ".join(rest[1:]).split(",") if rest[1:] else []
        for item in items:
            tn = item.split()
            if len(tn) != 2 or tn[0] not in RING_TYPES:
                raise self._fail(line, f"@ring event {name}: argument "
                                 f"'{item.strip()}' is not TYPE NAME, TYPE "
                                 "one of " + ", ".join(RING_TYPES))
            if tn[1] not in names:
                raise self._fail(line, f"@ring event {name}: argument "
                                 f"'{tn[1]}' is not an argument of probe "
                                 f"{probe['name']}, which it mirrors")
            if tn[1] in [a[1] for a in args]:
                raise self._fail(line, f"@ring event {name}: two arguments "
                                 f"are named '{tn[1]}'")
            args.append((tn[0], tn[1]))
        for e in self.out["events"]:
            if e["name"] == name or (e["group"], e["bit"]) == (group, bit):
                raise self._fail(line, f"@ring event {name}: its name or "
                                 f"its group and bit are {e['name']}'s too")
        self.out["events"].append({
            "name": name, "group": group, "bit": bit, "owner": owner,
            "object": obj, "new": new, "related": related, "doc": doc,
            "args": args, "probe": probe["name"], "line": line,
            "owner_arg": owner_arg, "object_arg": obj_arg,
            "related_arg": rel_arg})

    def _bound(self, word, table, event, probe, line):
        """An owner or object type, TYPE or TYPE(ARG): (TYPE, ARG or
        None), ARG one of the probe's integer arguments."""
        m = re.fullmatch(r"([^()]*)\(([^()]*)\)", word)
        kind, arg = (m.group(1), m.group(2)) if m else (word, None)
        self._declared(table, kind, line)
        if arg is None:
            return kind, None
        if kind == "none":
            raise self._fail(line, f"@ring event {event}: none({arg}) "
                             "names no object; write none")
        a = next((a for a in probe["args"] if a["name"] == arg), None)
        if a is None:
            raise self._fail(line, f"@ring event {event}: {kind}'s id "
                             f"'{arg}' is not an argument of probe "
                             f"{probe['name']}, which it mirrors")
        if a["pointer"] is not False:
            raise self._fail(line, f"@ring event {event}: {kind}'s id "
                             f"'{arg}' is a {a['type']}; an id is an "
                             "integer argument")
        return kind, arg


def _type_text(words):
    """A type's words as TYPES spells them: one space between words, a
    '*' after a space ("char *"), "const" left out."""
    out = ""
    for w in words:
        if w[1] == "const":
            continue
        if w[1] == "*":
            out = out.rstrip() + " *"
        elif out and not out.endswith(" "):
            out += " " + w[1]
        else:
            out += w[1]
    return out.strip()


def parse_text(text, path, strict=True):
    """The catalog in text (read from path, which messages name); see
    parse_catalog."""
    cat = _Parser(_Tokens(text, path, strict), strict).catalog()
    for p in cat["probes"]:
        del p["end"]
    return cat


def parse_catalog(path, strict=True):
    """Return {"provider": str, "probes": [{name, doc, line, args:[{name,
    type, size, pointer}]}], and "ring": {groups, owners, objects, events}
    when the catalog declares trace ring events (see _Ring)}.  Raises OSError when path cannot be read,
    CatalogError (FILE:LINE: why) for anything the grammar above does not
    take, text that is not UTF-8 included."""
    with open_regular(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise CatalogError(f"{path}: larger than {MAX_BYTES} bytes: not a "
                           "probe catalog")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise CatalogError(f"{path}:{line}: not UTF-8 (byte "
                           f"0x{data[e.start]:02x}); a catalog is UTF-8 "
                           "text") from None
    return parse_text(text, path, strict)


def ctype_name(a):
    """'uint32_t len', 'char *name' for a catalog argument."""
    t = a["type"]
    return f"{t}{a['name']}" if t.endswith("*") else f"{t} {a['name']}"
