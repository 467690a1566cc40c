# SPDX-License-Identifier: BSD-2-Clause
"""probelib.toolspec: read a tool's spec, specs/TOOL.toml, and render
the parts of its command line that both forms and the man page show.

A tool is declared once, in specs/TOOL.toml: its summary and description,
its own options (short, long, argument, help, default, how the usage line
shows it), its examples, its unit, the probes it reads and the keys of
its output.  specs/common.toml declares the options every tool takes and
specs/limits.toml the limits both languages share.  From them come:
  - the libbpf tool's option table, usage, examples and limits
    (specs/gentool writes them into $(O)/gen at build time);
  - the BCC tool's parser (probekit_bcc_spec.py reads the spec at run
    time, through this module);
  - the man page's tool options and examples (specs/gentool --man).

This module reads and renders only; it imports nothing of BCC, so the
generator runs where BCC is not installed.  It sits in probelib, below
both of its users: specs/gentool (the C side, the man pages, the
completions), the bcc/ tools and probelib's own commands (their words
and privilege lines) import it from here, so none of them reaches into
another's folder for it.  The specs sit in specs/ beside probes/, in the
checkout and under PREFIX/share/probekit alike.
"""

import os
import re
import textwrap

try:
    import tomllib
except ImportError:     # Python < 3.11: none here; Debian 12 has 3.11
    tomllib = None

SPEC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__)))), "specs")

# The width --help is wrapped to, and the column option help starts at
# (libbpf/tool_options.c prints the option list with the same column).
WIDTH = 79
EXAMPLE_COL = 40

_OPTION_KEYS = {"short", "long", "arg", "help", "man", "type", "default",
                "max", "usage", "only", "help_binary", "append", "group",
                "requires", "conflicts"}
_SPEC_KEYS = {"tool", "summary", "description", "unit", "binary", "pairs",
              "hists", "units", "probes", "keys", "option", "example", "operands",
              "counts", "values", "retired"}
_EXAMPLE_KEYS = {"args", "what", "man", "bcc"}
_RETIRED_KEYS = {"short", "now", "why"}
# An option's "type": flag (no argument), or how its argument is read.
# Any other name is the tool's own type, which its BCC form hands to the
# parser (probekit_bcc_spec.parser's types) and its libbpf form's option
# callback checks.
_TYPES = {"flag", "positive", "string", "pid", "path"}


class SpecError(Exception):
    """A spec that does not say what a tool is: its file and why."""


def _read(path):
    if tomllib is None:
        raise SpecError("%s: reading it needs Python 3.11 or later "
                        "(tomllib)" % path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise SpecError("%s: no such spec" % path)
    except OSError as e:
        raise SpecError("%s: %s" % (path, e.strerror))
    except tomllib.TOMLDecodeError as e:
        raise SpecError("%s: %s" % (path, e))


def _check_option(path, o, where):
    extra = set(o) - _OPTION_KEYS
    if extra:
        raise SpecError("%s: %s: unknown field(s) %s"
                        % (path, where, ", ".join(sorted(extra))))
    if "long" not in o or "help" not in o:
        raise SpecError("%s: %s: every option needs long and help"
                        % (path, where))
    if not re.fullmatch(r"[a-z][a-z0-9-]*", o["long"]):
        raise SpecError("%s: %s: long %r is not a lower-case name"
                        % (path, where, o["long"]))
    if "short" in o and not re.fullmatch(r"[A-Za-z]", o["short"]):
        raise SpecError("%s: %s: short %r is not one letter"
                        % (path, where, o["short"]))
    t = o.setdefault("type", "string" if "arg" in o else "flag")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", t):
        raise SpecError("%s: %s: type %r is not a name" % (path, where, t))
    if (t == "flag") != ("arg" not in o):
        raise SpecError("%s: %s: an option of type %s %s an arg"
                        % (path, where, t, "takes no" if "arg" in o
                           else "needs"))


def common(spec_dir=SPEC_DIR):
    """specs/common.toml: the options every tool takes, in --help order."""
    path = os.path.join(spec_dir, "common.toml")
    spec = _read(path)
    for i, o in enumerate(spec.get("option", [])):
        _check_option(path, o, "option %d" % (i + 1))
    return spec


def load(tool, spec_dir=SPEC_DIR):
    """specs/TOOL.toml, checked: SpecError says what is wrong."""
    path = os.path.join(spec_dir, tool + ".toml")
    spec = _read(path)
    extra = set(spec) - _SPEC_KEYS
    if extra:
        raise SpecError("%s: unknown field(s) %s"
                        % (path, ", ".join(sorted(extra))))
    for key in ("tool", "summary", "description"):
        if key not in spec:
            raise SpecError("%s: no %s" % (path, key))
    if spec["tool"] != tool:
        raise SpecError("%s: declares tool %r" % (path, spec["tool"]))
    spec.setdefault("option", [])
    spec.setdefault("example", [])
    spec.setdefault("binary", False)
    taken = {}
    for o in common(spec_dir)["option"]:
        if _takes(spec, o):
            taken[o["long"]] = "common"
            if "short" in o:
                taken[o["short"]] = "common"
    for i, o in enumerate(spec["option"]):
        _check_option(path, o, "option %d" % (i + 1))
        for name in (o["long"], o.get("short")):
            if name and name in taken:
                raise SpecError("%s: option %r is declared twice"
                                % (path, name))
            taken[name] = o["long"]
    _check_rules(path, spec)
    spec.setdefault("retired", [])
    for i, r in enumerate(spec["retired"]):
        _check_retired(path, r, "retired %d" % (i + 1), taken, spec)
    for i, e in enumerate(spec["example"]):
        extra = set(e) - _EXAMPLE_KEYS
        if extra or "args" not in e or "what" not in e:
            raise SpecError("%s: example %d needs args and what, and "
                            "only %s" % (path, i + 1,
                                         ", ".join(sorted(_EXAMPLE_KEYS))))
    spec["path"] = path
    return spec


# The cross-option rules an option of a tool may state, each naming
# another of the tool's own options by its long name: "requires" (given
# alone, it is refused) and "conflicts" (given with it, it is refused).
# Both forms refuse with the one line below, after "COMMAND: ", exit 2:
# the libbpf form from spec_rules in TOOL.spec.h (parse_options()), the
# BCC form through probekit_bcc_spec.parser().  The help, the man page
# and the usage error all say the rule from here.
RULES = {"requires": "%s needs %s", "conflicts": "%s cannot go with %s"}


def _check_rules(path, spec):
    own = {o["long"]: o for o in spec["option"]}
    for o in spec["option"]:
        for kind in RULES:
            if kind not in o:
                continue
            other = o[kind]
            if not isinstance(other, str) or other not in own or \
                    other == o["long"]:
                raise SpecError("%s: option %s: %s %r is not the long name "
                                "of another of the tool's own options"
                                % (path, o["long"], kind, other))


def names(o):
    """An option as the usage errors name it: "-W/--width", "--per-io"."""
    long = "--" + o["long"]
    return "-%s/%s" % (o["short"], long) if "short" in o else long


def _name(o):
    """An option as help text names it: "-W", "--per-io"."""
    return "-" + o["short"] if "short" in o else "--" + o["long"]


def option_named(spec, long):
    """The tool's own option whose long name is long."""
    (o,) = [o for o in spec["option"] if o["long"] == long]
    return o


def rules(spec):
    """[(option, other, kind, line)]: every cross-option rule of the
    tool's own options, in --help order, with the line that refuses it."""
    out = []
    for o in spec["option"]:
        for kind, fmt in RULES.items():
            if kind in o:
                other = option_named(spec, o[kind])
                out.append((o, other, kind, fmt % (names(o), names(other))))
    return out


def _check_retired(path, r, where, taken, spec):
    """A [[retired]] short option: one letter that no option of either
    form takes now, "now" the --long that took its place, and "why"."""
    if set(r) != _RETIRED_KEYS or not all(isinstance(v, str)
                                          for v in r.values()):
        raise SpecError("%s: %s needs short, now and why, and only those"
                        % (path, where))
    if not re.fullmatch(r"[A-Za-z]", r["short"]):
        raise SpecError("%s: %s: short %r is not one letter"
                        % (path, where, r["short"]))
    if r["short"] in taken:
        raise SpecError("%s: %s: -%s is an option of the tool; it cannot "
                        "be retired" % (path, where, r["short"]))
    longs = [o["long"] for o in spec["option"]] + [
        o["long"] for o in common(os.path.dirname(path))["option"]
        if _takes(spec, o)]
    if not r["now"].startswith("--") or r["now"][2:] not in longs:
        raise SpecError("%s: %s: now %r is not --LONG of an option the "
                        "tool takes" % (path, where, r["now"]))
    if not r["why"] or "\n" in r["why"]:
        raise SpecError("%s: %s: why must be one line" % (path, where))
    if sum(x["short"] == r["short"] for x in spec["retired"]) > 1:
        raise SpecError("%s: -%s is retired twice" % (path, r["short"]))


# What a tool says, after "COMMAND: ", to a short option it no longer
# takes (a spec's [[retired]], ARCHITECTURE.md, "Conventions"): the old
# letter, the option that took its place, why, and what to write.  The
# libbpf form gets the line in its spec header (specs/gentool), the BCC
# form from probekit_bcc_spec.parser(); both exit 2.
RETIRED = "-%s is not %s any more: %s; write %s"


def retired_line(r):
    """A [[retired]] entry's line, without the command's name."""
    return RETIRED % (r["short"], r["now"], r["why"], r["now"])


def limits(spec_dir=SPEC_DIR):
    """specs/limits.toml: {NAME: value} for every shared limit."""
    path = os.path.join(spec_dir, "limits.toml")
    out = {}
    for name, lim in _read(path).get("limit", {}).items():
        if not isinstance(lim.get("value"), int) or "doc" not in lim:
            raise SpecError("%s: limit %s needs an integer value and a "
                            "doc" % (path, name))
        out[name] = lim["value"]
    return out


def messages(spec_dir=SPEC_DIR):
    """specs/limits.toml's [message.NAME] tables: {NAME: text}, printf
    style (%s), the lines the C, Python and shell tools print alike."""
    path = os.path.join(spec_dir, "limits.toml")
    out = {}
    for name, m in _read(path).get("message", {}).items():
        if not isinstance(m.get("text"), str) or "doc" not in m or \
                '"' in m["text"] or "\\" in m["text"]:
            raise SpecError("%s: message %s needs a text (no \" or \\) "
                            "and a doc" % (path, name))
        out[name] = m["text"]
    return out


def texts(spec_dir=SPEC_DIR):
    """specs/limits.toml's [text.NAME] tables: {NAME: (value, doc)}, the
    messages C and Python share."""
    path = os.path.join(spec_dir, "limits.toml")
    out = {}
    for name, t in _read(path).get("text", {}).items():
        if not isinstance(t.get("value"), str) or "doc" not in t:
            raise SpecError("%s: text %s needs a string value and a doc"
                            % (path, name))
        out[name] = (t["value"], t["doc"])
    return out


def limit_docs(spec_dir=SPEC_DIR):
    """{NAME: (value, doc)} from specs/limits.toml, for the C header."""
    path = os.path.join(spec_dir, "limits.toml")
    return {n: (lim["value"], lim["doc"])
            for n, lim in _read(path).get("limit", {}).items()}


def privileges(spec_dir=SPEC_DIR):
    """specs/privileges.toml, checked: every reader's ways of attaching
    are declared, and every capability they name is numbered."""
    path = os.path.join(spec_dir, "privileges.toml")
    p = _read(path)
    caps = p.get("capability", {})
    for name, kinds in p.get("reader", {}).items():
        for k in kinds:
            if k not in p.get("attach", {}):
                raise SpecError("%s: reader %s: no attach.%s"
                                % (path, name, k))
            for multi in (False, True):
                a = _attach(p, k, multi)
                if a is None:
                    raise SpecError("%s: attach.%s: its multi and single "
                                    "name no attach kind" % (path, k))
                for c in a.get("own", []) + a.get("other", []):
                    if c not in caps:
                        raise SpecError("%s: attach.%s: %s has no number"
                                        % (path, k, c))
    return p


def _attach(p, kind, multi):
    """Attach kind's entry; for one that depends on the libbpf in use
    (libbpf_usdt), its "multi" kind's where that libbpf attaches USDT
    probes with multi-uprobe links (multi), else its "single" kind's."""
    a = p["attach"][kind]
    if "single" in a:
        return p["attach"].get(a["multi" if multi else "single"])
    return a


def multi_differs(reader, spec_dir=SPEC_DIR):
    """Whether what reader needs depends on how the libbpf in use
    attaches USDT probes."""
    return any(needs(reader, o, spec_dir) != needs(reader, o, spec_dir, True)
               for o in (False, True))


def needs(reader, other=False, spec_dir=SPEC_DIR, usdt_multi=False):
    """The capabilities reader needs, without root, to read a process of
    its own user (other: of another user), as [(number, name)], in the
    order privileges.toml names them, another user's last; a capability another one includes
    is left out beside it.  usdt_multi: where the libbpf in use attaches
    USDT probes with multi-uprobe links (privileges.toml's libbpf_usdt)."""
    p = privileges(spec_dir)
    names = []
    kinds = [_attach(p, k, usdt_multi) for k in p["reader"][reader]]
    for c in [c for a in kinds for c in a["own"]] + \
            [c for a in kinds for c in (a["other"] if other else [])]:
        if c not in names:
            names.append(c)
    for key, inc in p.get("includes", {}).items():
        if key in names:
            names = [c for c in names if c not in inc]
    return [(p["capability"][c], c) for c in names]


def and_list(names):
    """"A", "A and B", "A, B and C"."""
    names = list(names)
    return (", ".join(names[:-1]) + " and " + names[-1]
            if len(names) > 1 else "".join(names))


def privilege_line(what, whom, need, lack):
    """The one line that says a privilege is missing (without the tool's
    name), as libbpf/tool_priv.c's privilege_error() prints it: need
    and lack are capability names."""
    return ("%spermission denied: %s needs root, or %s; this process "
            "lacks %s" % (what + ": " if what else "", whom,
                          and_list(need), and_list(lack)))


def _takes(spec, o, form=None):
    """Whether a tool takes common option o: "only" names the kind of
    tool that does ("binary": the tools on any USDT binary; "unit": the
    tools with -m/-u/-n; "libbpf": the libbpf form only, and form None
    counts both forms)."""
    only = o.get("only")
    if only == "binary":
        return spec.get("binary", False)
    if only == "unit":
        return bool(spec.get("unit"))
    if only == "pairs":
        return spec.get("pairs", False)
    if only == "hists":
        return spec.get("hists", False)
    if only == "libbpf":
        return form in (None, "libbpf")
    return True


def common_options(spec, form=None, spec_dir=SPEC_DIR):
    """The common options tool spec takes, in form (None: either)."""
    return [o for o in common(spec_dir)["option"] if _takes(spec, o, form)]


# The line a histogram tool prints under its first histogram's header when
# an interval saw nothing (ARCHITECTURE.md, "Conventions": zero hits print
# the header and an empty result); %s is the spec's "counts".
EMPTY = "0 %s"


def empty_result(spec):
    """The empty result of a histogram tool ("0 I/Os"), or None for a tool
    whose spec declares no "counts" (usdtcount prints its own table)."""
    return EMPTY % spec["counts"] if spec.get("counts") else None


# An empty result's likely cause, where the tool can tell it: the line is
# then the empty result, a colon and the cause, one line still.
# GATED: probes that fire only while another probe is enabled, as
# (probe, the probe whose semaphore gates it) (doc/tracing-your-service.md,
# "Gated probes": CPython 3.11, gh-98894); usdtcount and usdtlat name one
# they trace while its gate is neither traced nor given to --gate.
GATED = (("python:function__entry", "python:line"),)
EMPTY_GATED = "%s: %s fires only with --gate %s"
# usdtlat -k argN read with two sizes at START and DONE (a char * and an
# int32_t): a pointer seldom equals a 4-byte value, so the keys do not
# meet.  ARG_TYPE says one side's operand, as its note gives it.
EMPTY_KEYS = "%s: %s is %s at START, %s at DONE"
ARG_TYPE = "%d bytes %s"    # size, "signed" or "unsigned"
# funclat's function ("bdev_execute()"), which is there (a name that matches
# no symbol is refused at the start: "no function F in EXE") and was not
# called while traced.
EMPTY_UNCALLED = "%s: %s was not called"


def gate_of(probe):
    """The probe GATED says probe needs, or None."""
    return dict(GATED).get(probe)


def empty_gated(empty, probes, gates):
    """empty ("0 pairs") with the cause when one of probes is GATED and
    its gate is neither in probes nor in gates, else empty alone."""
    for p in probes:
        g = gate_of(p)
        if g and g not in probes and g not in gates:
            return EMPTY_GATED % (empty, p, g)
    return empty


def arg_type(size, signed):
    return ARG_TYPE % (size, "signed" if signed else "unsigned")


def hist_noun(spec):
    """What one value of a histogram tool is, plural, as its drop line
    says it ("N I/Os dropped (table full)"): the spec's "values", for a
    tool whose histograms count more than its "counts", else "counts"."""
    return spec.get("values") or spec.get("counts")


# What a tool lost, by kind: the JSON key and the text's words ("N NOUN
# WORDS"), declared here for both forms: bcc/probekit_bcc_drain.py's
# loss_report() and libbpf/tool_drain.c's, through SPEC_LOSSES (specs/
# gentool common).  The first two are libbpf/pair_state.h's enum
# pair_count: STARTs the in-flight table had no room for, or whose thread
# or process exited.  "dropped" is also what a histogram tool's full map
# of keys refused (--max-keys).  "busy" is an io__batch hit of iolatency
# or iosize that found its CPU's batch buffer (libbpf/io_batch.bpf.h)
# held by a run of the same program it had preempted: it read nothing.
# "unreadable" is one whose records could not be read from the service
# (paged out, unmapped).  "bad_count" is said of BATCH_NOUN, not of
# records: an io__batch hit whose record count could not be read or was
# outside 1..IO_BATCH_MAX, so that how many records it lost is unknown.
LOSSES = (("dropped", "dropped (table full)"),
          ("reclaimed", "reclaimed (thread or process exited)"),
          ("busy", "dropped (batch buffer held by a preempted run)"),
          ("unreadable", "dropped (unreadable batch)"),
          ("bad_count", "dropped (count unreadable or out of range)"))
# What "bad_count" counts: io__batch hits ("N batches dropped (...)", JSON
# "batches": {"bad_count": N}).
BATCH_NOUN = "batches"


# One wording for each common mistake, across every command (C through
# specs/gentool common's SPEC_*; the wrapper's shell says the same words).
# A probe name that is not there: the line that says so ends with the
# probe nearest by edit distance (nearest(): the first of equals), or
# NO_PROBES when the file has none.
NEAREST = "; nearest: %s"
NO_PROBES = " (it has none)"
# No -p PID nor -b PATH (%s: TARGET_BOTH_WAYS, or "-p PID" for a command
# that takes only a PID), and both given.
TARGET_MISSING = "no target: give %s"
TARGET_BOTH_WAYS = "-p PID or -b PATH"
TARGET_PID = "-p PID"
TARGET_BOTH = "-p/--pid and -b/--binary exclude each other"
# An argument given by name (usdtlat -k, usdtcount -H/-S, the exporter's
# --pair key), resolved per probe from the probekit note of the probe's
# file (probes/usdt/usdt_notes.h): a name the probe lacks (then NEAREST
# among its arguments' names, or NO_PROBES), a file without names (its
# path, the probe, the first argN: arg1 in the tools, which count from 1
# as BCC does, arg0 in bpftrace), a string read of an
# argument that is no char * (the option's short form as a length and
# the option, "-S/--strings"; the argument twice, the probe, its C type).
ARG_UNKNOWN = "probe %s has no argument %s"
ARG_NO_NAMES = "%s has no argument names for probe %s (it was not built " \
    "with probekit's header); give the argument by number, %s on"
ARG_NOT_STRING = "%.*s %s reads a string, but %s of %s is %s, not a char *"


def distance(a, b):
    """Levenshtein distance, as libbpf/usdt_sites.c's distance()."""
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        diag, row[0] = row[0], i
        for j in range(1, len(b) + 1):
            up = row[j]
            row[j] = min(diag + (a[i - 1] != b[j - 1]), up + 1, row[j - 1] + 1)
            diag = up
    return row[len(b)]


def nearest(name, names):
    """The first of names nearest to name by edit distance, or None."""
    best, dmin = None, None
    for n in names:
        if dmin is not None and abs(len(n) - len(name)) >= dmin:
            continue        # at least that far: the length differs so
        d = distance(name, n)
        if dmin is None or d < dmin:
            best, dmin = n, d
    return best


def nearest_tail(name, names):
    """NEAREST's tail naming the nearest of names, or NO_PROBES."""
    best = nearest(name, names)
    return NEAREST % best if best is not None else NO_PROBES


def value(v, spec_dir=SPEC_DIR):
    """A default or max: a number, or the name of a limit."""
    return limits(spec_dir)[v] if isinstance(v, str) and v.isupper() else v


def help_text(o, spec_dir=SPEC_DIR, spec=None):
    """An option's --help text, with its rules (spec, the tool's, names
    the options they name) and its default when it has them: "with -L:
    units per bucket (default 10)"."""
    h = o["help"]
    if spec and "requires" in o:
        h = "with %s: %s" % (_name(option_named(spec, o["requires"])), h)
    if spec and "conflicts" in o:
        h += " (not with %s)" % _name(option_named(spec, o["conflicts"]))
    if "default" in o:
        h += " (default %s)" % value(o["default"], spec_dir)
    return h


def common_option(name, spec_dir=SPEC_DIR):
    """The common option whose long name is name."""
    (o,) = [o for o in common(spec_dir)["option"] if o["long"] == name]
    return o


def option_usage(o):
    """How the usage line shows option o: its "usage" field when given
    ("" leaves it out, for an option another one's usage shows), else
    [-S] or [--long ARG]."""
    if "usage" in o:
        return o["usage"]
    name = "-" + o["short"] if "short" in o else "--" + o["long"]
    return "[%s%s]" % (name, " " + o["arg"] if "arg" in o else "")


# The common options the usage line shows before the tool's own; the
# rest follow them.
_USAGE_FIRST = ("pid", "binary", "help", "timestamp")
# The usage line's order: the target, [-h], [-T], the tool's own options,
# then the rest of the common ones in common.toml's order.


def usage(spec, command, form="libbpf", spec_dir=SPEC_DIR):
    """The usage line, "usage: COMMAND -p PID [-h] ...", wrapped under
    the command's name, a bracket group never split."""
    opts = common_options(spec, form, spec_dir)
    first = sorted((o for o in opts if o["long"] in _USAGE_FIRST),
                   key=lambda o: _USAGE_FIRST.index(o["long"]))
    rest = [o for o in opts if o["long"] not in _USAGE_FIRST]
    parts = [option_usage(o) for o in first]
    if spec["binary"]:
        parts = ["(-p PID | -b PATH)" if p == "-p PID" else p
                 for p in parts if not p.startswith("[-b")]
    parts += [option_usage(o) for o in spec["option"]]
    parts += [option_usage(o) for o in rest if o.get("only") == "unit"]
    parts += [option_usage(o) for o in rest if o.get("only") != "unit"]
    if spec.get("operands"):
        parts.append(spec["operands"])
    parts.append("[interval [count]]")
    head = "usage: %s " % command
    lines = _wrap_groups([p for p in parts if p], WIDTH - len(head))
    return head + ("\n" + " " * len(head)).join(lines) + "\n"


def _wrap_groups(parts, width):
    lines, cur = [], ""
    for p in parts:
        if cur and len(cur) + 1 + len(p) > width:
            lines.append(cur)
            cur = p
        else:
            cur = cur + " " + p if cur else p
    if cur:
        lines.append(cur)
    return lines


def description(spec, form):
    """The description --help prints under the usage line."""
    engine = "libbpf CO-RE" if form == "libbpf" else "BCC"
    text = " ".join(spec["description"].split())
    first, dot, rest = text.partition(". ")
    text = "%s (%s)%s%s" % (first.rstrip("."), engine, dot or ".", rest)
    return textwrap.fill(text, WIDTH - 7) + "\n"


def examples(spec, command):
    """The lines after "examples:", "    COMMAND ARGS   # what", with the
    comments in one column.  When a line would be wider than WIDTH, each
    example goes on lines of its own and its comment on the next, under
    the column; a newline in ARGS continues the command on a next line."""
    rows = ["%s %s" % (command, e["args"].replace("\n", " \\\n        "))
            for e in spec["example"]]
    # The layout is chosen for the longer name, the BCC form's, so that
    # both forms lay their examples out alike.
    longer = len("probekit-%s-bcc" % spec["tool"]) - len(command)
    col = max([EXAMPLE_COL - 4] + [len(r) + 1 + longer for r in rows]) - longer
    if all("\n" not in r for r in rows) and \
            all(4 + col + longer + 2 + len(e["what"]) <= WIDTH
                for e in spec["example"]):
        return "".join("    %-*s# %s\n" % (col, r, e["what"])
                       for r, e in zip(rows, spec["example"]))
    return "".join("    %s\n%20s# %s\n" % (r, "", e["what"])
                   for r, e in zip(rows, spec["example"]))


# --- roff --------------------------------------------------------------------

def _roff(text):
    """Plain text as roff: hyphens as \\-, a leading dot escaped."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"(?m)^([.'])", r"\\&\1", text)


def _sentence(text):
    text = text.replace("\n", " ")
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def man_options(spec):
    """The man page's entries for the tool's own options."""
    out = []
    for o in spec["option"]:
        names = []
        if "short" in o:
            names.append("\\-" + o["short"])
        names.append(_roff("--" + o["long"]))
        arg = ' " \\fI%s\\fR"' % o["arg"] if "arg" in o else ""
        if len(names) == 2:
            out.append('.TP\n.BR %s ", " %s%s\n' % (names[0], names[1], arg))
        elif arg:
            out.append(".TP\n.BI %s%s\n" % (names[0], ' " %s"' % o["arg"]))
        else:
            out.append(".TP\n.B %s\n" % names[0])
        out.append(man_body(o, spec) + "\n")
        # The letter it had, from the spec's [[retired]], said once.
        for r in spec.get("retired", []):
            if r["now"] == "--" + o["long"]:
                out.append(_roff(_sentence("It was -%s: %s" % (
                    r["short"], r["why"]))) + "\n")
    return "".join(out)


def man_body(o, spec):
    """An option's man page text: its "man" (else its help as a
    sentence), with its rules and its default said as --help says them,
    "With -L: the width ... (default 10).".  A "man" that says its
    default in words of its own (the word "default") is left to."""
    body = (o.get("man") or _roff(_sentence(o["help"]))).rstrip("\n")
    if "default" in o and "default" not in o.get("man", ""):
        tail = " (default %s)" % value(o["default"], os.path.dirname(
            spec["path"]))
        body = body[:-1] + tail + "." if body.endswith(".") \
            else body + tail
    if "conflicts" in o:
        body += "\nNot with\n.BR %s ." % _roff(
            _name(option_named(spec, o["conflicts"])))
    if "requires" in o:
        body = "With\n.BR %s :\n%s" % (
            _roff(_name(option_named(spec, o["requires"]))),
            body[:1].lower() + body[1:])
    return body


def man_examples(spec):
    """The man page's EXAMPLES entries."""
    out = []
    for e in spec["example"]:
        cmd = "probekit-%s%s" % (spec["tool"], "-bcc" if e.get("bcc") else "")
        out.append(".TP\n.B %s %s\n" % (cmd, _roff(
            e["args"].replace("\n", " "))))
        out.append((e.get("man") or _roff(_sentence(e["what"]))).rstrip("\n")
                   + "\n")
    return "".join(out)


MAN_BEGIN = '.\\" toolspec %s: from specs/%s.toml (make tools-doc)\n'
MAN_END = '.\\" toolspec %s end\n'


def man_regions(spec):
    """{region: roff} the man page holds between its markers."""
    return {"options": man_options(spec), "examples": man_examples(spec)}


def man_render(spec, page_text):
    """page_text with each marked region replaced by what the spec says;
    SpecError when a marker is missing."""
    tool = spec["tool"]
    for region, body in man_regions(spec).items():
        begin, end = MAN_BEGIN % (region, tool), MAN_END % region
        i = page_text.find(begin)
        j = page_text.find(end, i + 1)
        if i < 0 or j < 0:
            raise SpecError("man page of %s: no %r ... %r markers"
                            % (tool, begin.strip(), end.strip()))
        page_text = page_text[:i + len(begin)] + body + page_text[j:]
    return page_text
