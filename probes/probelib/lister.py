# SPDX-License-Identifier: BSD-2-Clause
"""probekit-list: every USDT probe of a binary, or of a process and each
ELF file it maps, with what a user needs before tracing one: each
argument's spec under bpftrace's number (arg0..) and BCC's (arg1..),
whether bpftrace 0.17 and libbpf 1.1 can read it, the semaphore's value
in the process now (nonzero: someone traces the probe), and with a
catalog the argument names, types and the probe's documentation.

Output, one block per file that has matching probes:

  FILE
    provider:name  N site(s)  semaphore: V (traced now) | 0 (not traced)
                                         | yes | none (always on)
      doc: TEXT                                  (with --catalog)
      argI/argJ  SPEC  bpftrace: yes|no  libbpf: yes|no  [TYPE NAME]
        bpftrace 0.17 cannot read SPEC: why       (one line per "no")

I counts from 0 (bpftrace), J from 1 (BCC).  When a probe's sites differ
in an argument's operand, SPEC is the first site's, followed by "(+K
other operands)", and yes means every site's operand can be read.
"""

import argparse
import fnmatch
import sys

from . import argspec, notes, process
from .inputs import one_line, open_regular, why
from .catalog import CatalogError, parse_catalog
from .cmdline import Parser
from .version import VersionAction

READERS = (argspec.BPFTRACE, "libbpf 1.1")
MAX_PATTERN = 256

DESCRIPTION = """probekit-list: the USDT probes of a binary, or of a process
and every file it maps, with their arguments, which readers can read them,
and whether each probe is being traced now.

  probekit-list (-p PID | PATH) [PATTERN] [--catalog FILE.d]

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
    if not site.semaphore:
        return "none (always on)"
    if pid is None:
        return "yes"
    addr = process.address(pid, name, site.semaphore_offset)
    v = process.read_u16(pid, addr) if addr is not None else None
    if v is None:
        return "unreadable"
    return f"{v} (traced now)" if v else "0 (not traced)"


def _arg_lines(sites, i, cat_arg):
    ops = []
    for s in sites:
        if i < len(s.args) and s.args[i].operand not in ops:
            ops.append(s.args[i].operand)
    spec = next(f"{'-' if s.args[i].signed else ''}{s.args[i].size}@"
                f"{s.args[i].operand}" for s in sites if i < len(s.args))
    if len(ops) > 1:
        spec += f" (+{len(ops) - 1} other operand{'s' * (len(ops) > 2)})"
    whys = []
    verdict = []
    for r in READERS:
        probs = [argspec.reader_problem(op, r) for op in ops]
        probs = [p for p in probs if p]
        verdict.append(f"{r.split()[0]}: {'no' if probs else 'yes'}")
        whys += probs
    line = f"      arg{i}/arg{i + 1}  {spec}  " + "  ".join(verdict)
    if cat_arg:
        line += f"  {cat_arg['type']}{' ' if cat_arg['name'] else ''}" \
                f"{cat_arg['name']}"
    return [line] + ["        " + w for w in whys]


def listing(files, pattern, pid=None, catalog=None):
    """The text lines of the listing of files [(name, openable path)]
    (see the top of this file), and the number of probes listed."""
    cat = {}
    if catalog:
        cat = {f"{catalog['provider']}:{p['name']}": p
               for p in catalog["probes"]}
    lines, n = [], 0
    for name, path in files:
        try:
            found = notes.by_name(notes.read_probes(path))
        except notes.NoteError as e:
            # Corrupt notes in any file fail the listing: the file is ELF
            # and has probes, and which of them are real cannot be told.
            raise notes.NoteError(f"{name}: {e}") from None
        except Exception:   # OSError, ELFError and what a corrupt file raises
            if len(files) == 1:
                raise
            continue
        block = []
        for full, sites in found.items():
            if not _match(pattern, full):
                continue
            n += 1
            c = cat.get(full)
            block.append(f"  {full}  {len(sites)} site"
                         f"{'s' * (len(sites) > 1)}  semaphore: "
                         + _semaphore(pid, name, sites[0]))
            if c and c["doc"]:
                block.append(f"      doc: {c['doc']}")
            nargs = max(len(s.args) for s in sites)
            for i in range(nargs):
                ca = c["args"][i] if c and i < len(c["args"]) else None
                block += _arg_lines(sites, i, ca)
        if block:
            lines += [name] + block
    return lines, n


EXAMPLES = """examples:
  probekit-list build/bin/blktgt          # every probe of a binary
  probekit-list -p 1234 'blktgt:io__*'    # a process's, by pattern
  probekit-list -p 1234 --catalog probes/blktgt.d   # with argument names
"""


def main(argv=None):
    p = _Parser(prog="probekit-list", description=DESCRIPTION,
                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=VersionAction)
    p.add_argument("-p", "--pid", type=int, metavar="PID",
                   help="list the probes of this process and its libraries")
    p.add_argument("--catalog", metavar="FILE.d",
                   help="add argument names, types and docs from a catalog")
    p.add_argument("words", nargs="*", metavar="[PATH] [PATTERN]")
    args = p.parse_args(argv)
    words = list(args.words)
    if args.pid is None:
        if not words:
            p.error("give -p PID or a PATH")
        path = words.pop(0)
    if len(words) > 1:
        p.error("at most one PATTERN")
    pattern = words[0] if words else None
    if pattern is not None and len(pattern) > MAX_PATTERN:
        p.error(f"PATTERN is longer than {MAX_PATTERN} characters")
    if args.pid is not None and args.pid <= 0:
        p.error(f"invalid PID {args.pid}")

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
        lines, n = listing(files, pattern, args.pid, catalog)
    except process.ProcessError as e:
        return fail(str(e))
    except OSError as e:
        return fail(f"{path}: {why(e)}")
    except notes.NoteError as e:
        return fail(str(e))
    except Exception as e:  # a corrupt ELF file
        return fail(f"cannot read the USDT notes of {path}: {e}")
    if not n:
        what = f"matches {pattern}" if pattern else "at all"
        return fail(f"no USDT probe {what} in {where}")
    try:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return 0
    return 0
