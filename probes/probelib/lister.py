# SPDX-License-Identifier: BSD-2-Clause
"""probekit-list: every USDT probe of a binary, or of a process and each
ELF file it maps, with what a user needs before tracing one: each
argument's spec under bpftrace's number (arg0..) and BCC's (arg1..),
whether the installed bpftrace and libbpf can read it (what they read is
detected by trying them: features.py), the semaphore's value
in the process now (nonzero: someone traces the probe), and the argument
names and types: from --catalog FILE.d when given (with the probe's
documentation), else from the file's own probekit note (a binary built
with probekit-gencatalog's header carries one; probelib/notes.py).

Output, one block per file that has matching probes:

  FILE
    provider:name  N site(s)  semaphore: V (traced now) | 0 (not traced)
                                         | yes | none (always on)
      doc: TEXT                                  (with --catalog)
      argI/argJ  SPEC  bpftrace: yes|no  libbpf: yes|no  [TYPE NAME]
                              (TYPE NAME: from --catalog or the file's note)
        bpftrace X.Y cannot read SPEC: why        (one line per "no")

I counts from 0 (bpftrace), J from 1 (BCC).  When a probe's sites differ
in an argument's operand, SPEC is the first site's, followed by "(+K
other operands)", and yes means every site's operand can be read.
"""

import argparse
import fnmatch
import json
import sys

from . import argspec, elf, features, notes, process
from . import words as voice
from .inputs import one_line, open_regular, why
from .catalog import CatalogError, parse_catalog
from .cmdline import Parser
from .version import VersionAction

READERS = (argspec.BPFTRACE, argspec.LIBBPF)
MAX_PATTERN = 256

DESCRIPTION = """probekit-list: the USDT probes of a binary, or of a process
and every file it maps, with their arguments, which readers can read them,
and whether each probe is being traced now.

  probekit-list (-p PID | -b PATH | PATH) [PATTERN] [--catalog FILE.d] [-j]

PATTERN is provider:name with wildcards (postgresql:query__*), or a bare
name glob.  Exit status: 0, 1 when nothing matches or a file cannot be
read (one line on stderr), 2 for a usage error.
"""


# One-line usage errors, exit 2 (probelib.cmdline).
_Parser = Parser


def _match(pattern, full):
    if pattern is None:
        return True
    provider, _, name = full.partition(":")
    if ":" not in pattern:
        return fnmatch.fnmatchcase(name, pattern)
    pp, _, pn = pattern.partition(":")
    return fnmatch.fnmatchcase(provider, pp) and fnmatch.fnmatchcase(name, pn)


def _semaphore(pid, name, site):
    """The semaphore as the text shows it, and as --json gives it: None
    (no semaphore), True (one, no process to read), the value, or
    "unreadable"."""
    if not site.semaphore:
        return "none (always on)", None
    if pid is None:
        return "yes", True
    addr = process.address(pid, name, site.semaphore_offset)
    v = process.read_u16(pid, addr) if addr is not None else None
    if v is None:
        return "unreadable", "unreadable"
    return (f"{v} (traced now)" if v else "0 (not traced)"), v


def _arg(sites, i, cat_arg):
    """Argument i of a probe's sites, as a --json record."""
    ops = []
    for s in sites:
        if i < len(s.args) and s.args[i].operand not in ops:
            ops.append(s.args[i].operand)
    spec = next(f"{'-' if s.args[i].signed else ''}{s.args[i].size}@"
                f"{s.args[i].operand}" for s in sites if i < len(s.args))
    readers, problems = {}, []
    for r in READERS:
        probs = [argspec.reader_problem(op, r, arch=sites[0].arch)
                 for op in ops]
        probs = [p for p in probs if p]
        readers[r.split()[0]] = not probs
        problems += probs
    rec = {"bpftrace": f"arg{i}", "bcc": f"arg{i + 1}", "spec": spec,
           "other_operands": len(ops) - 1, "readers": readers,
           "problems": problems}
    if cat_arg:
        rec["type"], rec["name"] = cat_arg["type"], cat_arg["name"]
    return rec


def _arg_lines(a):
    spec = a["spec"]
    k = a["other_operands"]
    if k:
        spec += f" (+{k} other operand{'s' * (k > 1)})"
    verdict = "  ".join(f"{r}: {'yes' if ok else 'no'}"
                        for r, ok in a["readers"].items())
    line = f"      {a['bpftrace']}/{a['bcc']}  {spec}  {verdict}"
    if "type" in a:
        line += f"  {a['type']}{' ' if a['name'] else ''}{a['name']}"
    return [line] + ["        " + w for w in a["problems"]]


def records(files, pattern, pid=None, catalog=None):
    """The listing of files [(name, openable path)] as records, one per
    file with matching probes: {"file", "probes": [{"probe", "sites",
    "semaphore", "semaphore_text", ["doc",] "args": [...]}]}."""
    cat = {}
    if catalog:
        cat = {f"{catalog['provider']}:{p['name']}": p
               for p in catalog["probes"]}
    out = []
    for name, path in files:
        try:
            found = notes.by_name(notes.read_probes(path))
            named = notes.read_arg_names(path) if found else {}
        except elf.BadELF as e:
            # A corrupt ELF file or corrupt notes fail the listing: the
            # file is ELF, and which of its probes are real cannot be told.
            raise elf.BadELF(f"{name}: {e}") from None
        except Exception:   # OSError, ELFError and what a corrupt file raises
            if len(files) == 1:
                raise
            continue
        probes = []
        for full, sites in found.items():
            if not _match(pattern, full):
                continue
            c = cat.get(full)
            if c is None and full in named:
                # The binary's own probekit note: names and types with no
                # catalog at hand.
                c = {"doc": "", "args": [{"type": t, "name": n}
                                         for t, n in named[full].args]}
            text, value = _semaphore(pid, name, sites[0])
            rec = {"probe": full, "sites": len(sites), "semaphore": value,
                   "semaphore_text": text}
            if c and c["doc"]:
                rec["doc"] = c["doc"]
            nargs = max(len(s.args) for s in sites)
            rec["args"] = [_arg(sites, i, c["args"][i] if c and
                                i < len(c["args"]) else None)
                           for i in range(nargs)]
            probes.append(rec)
        if probes:
            out.append({"file": name, "probes": probes})
    return out


def text_lines(recs):
    """The records as the text listing (see the top of this file)."""
    lines = []
    for f in recs:
        lines.append(f["file"])
        for p in f["probes"]:
            n = p["sites"]
            lines.append(f"  {p['probe']}  {n} site{'s' * (n > 1)}  "
                         f"semaphore: {p['semaphore_text']}")
            if "doc" in p:
                lines.append(f"      doc: {p['doc']}")
            for a in p["args"]:
                lines += _arg_lines(a)
    return lines


def listing(files, pattern, pid=None, catalog=None):
    """The text lines of the listing of files [(name, openable path)]
    (see the top of this file), and the number of probes listed."""
    recs = records(files, pattern, pid, catalog)
    return text_lines(recs), sum(len(f["probes"]) for f in recs)


EXAMPLES = """examples:
  probekit-list build/bin/blktgt          # every probe of a binary
  probekit-list -p 1234 'blktgt:io__*'    # a process's, by pattern
  probekit-list -p 1234 --catalog probes/blktgt.d   # with argument names
  probekit-list -j -b build/bin/blktgt 'io__*'       # as JSON
"""


def main(argv=None):
    p = _Parser(prog="probekit-list", description=DESCRIPTION,
                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=VersionAction)
    p.add_argument("-p", "--pid", type=voice.pid, metavar="PID",
                   help="list the probes of this process and its libraries")
    p.add_argument("-b", "--binary", metavar="PATH",
                   help="list the probes of this file (the same as PATH "
                   "first)")
    p.add_argument("--catalog", metavar="FILE.d",
                   help="add argument names, types and docs from a catalog")
    p.add_argument("-j", "--json", action="store_true",
                   help="print JSON: {\"files\": [{\"file\", \"probes\": "
                   "[...]}]}, the same fields as the text")
    p.add_argument("words", nargs="*", metavar="[PATH] [PATTERN]")
    args = p.parse_args(argv)
    words = list(args.words)
    if args.binary is not None:
        if args.pid is not None:
            p.error(voice.TARGET_BOTH)
        path = args.binary
    elif args.pid is None:
        if not words:
            p.error(voice.target_missing())
        path = words.pop(0)
    if len(words) > 1:
        p.error("at most one PATTERN")
    pattern = words[0] if words else None
    if pattern is not None and len(pattern) > MAX_PATTERN:
        p.error(f"PATTERN is longer than {MAX_PATTERN} characters")

    def fail(msg):
        sys.stderr.write(f"probekit-list: {one_line(msg)}\n")
        return 1

    catalog = None
    if args.catalog:
        try:
            catalog = parse_catalog(args.catalog, strict=False)
        except OSError as e:
            return fail(f"cannot read catalog {args.catalog}: {why(e)}")
        except CatalogError as e:
            return fail(f"bad catalog: {e}")
    try:
        if args.pid is not None:
            files = process.files(args.pid)
            where = f"PID {args.pid} or the files it maps"
            path = files[0][0] if files else where
        else:
            with open_regular(path) as f:
                if f.read(len(process.ELF_MAGIC)) != process.ELF_MAGIC:
                    return fail(f"{path} is not an ELF file (or cannot "
                                "be read)")
            files, where = [(path, path)], path
        recs = records(files, pattern, args.pid, catalog)
        n = sum(len(f["probes"]) for f in recs)
    except process.ProcessError as e:
        return fail(str(e))
    except OSError as e:
        return fail(f"{path}: {why(e)}")
    except elf.BadELF as e:
        return fail(str(e))
    except Exception as e:  # a corrupt ELF file
        return fail(f"cannot read the USDT notes of {path}: {e}")
    for tool, got in features.features().items():
        if got["why"] and tool in [r.split()[0] for r in READERS]:
            sys.stderr.write(f"probekit-list: note: {tool}: what it reads "
                             f"was not detected ({one_line(got['why'])}); "
                             "its column is the oldest release's\n")
    if not n and pattern:
        # A misspelt PATTERN: named with the nearest probe, as every
        # command names it (probelib.words).
        names = [r["probe"] for f in records(files, None, args.pid, catalog)
                 for r in f["probes"]]
        return fail(f"no USDT probe matches {pattern} in {where}"
                    f"{voice.nearest_probe(pattern, names)}")
    if not n:
        return fail(f"no USDT probe at all in {where}")
    try:
        if args.json:
            sys.stdout.write(json.dumps({"files": recs}, indent=1) + "\n")
        else:
            sys.stdout.write("\n".join(text_lines(recs)) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return 0
    return 0
