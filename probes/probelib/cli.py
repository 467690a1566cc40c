# SPDX-License-Identifier: BSD-2-Clause
"""probekit-check's command line: read the catalog and the binary, check
each file by its kind, report errors and coverage."""

import argparse
import sys

from . import argspec, elf, features, notes, process, words
from .catalog import CatalogError, parse_catalog
from .check_bcc import check_bcc
from .check_bt import check_bpftrace
from .check_catalog import check_catalog
from .check_libbpf import check_libbpf
from .checker import Checker
from .ctext import read_text
from .inputs import one_line, why
from .report import Report
from .target import Target, catalog_target
from .cmdline import Parser
from .version import VersionAction

DESCRIPTION = """probekit-check: check that a binary's USDT probes, the probe catalog and the
scripts and tools that read them agree.

FILE is a bpftrace script (*.bt, or a bpftrace #! line), a BCC tool (Python:
*.py, or a python #! line) or a libbpf BPF program (*.bpf.c, read with the
user-space <tool>.c beside it).  Other files are skipped.

Checks:
 1. catalog against binary: the same probes, argument counts and argument
    sizes and signedness, and argument specs that the installed bpftrace
    and libbpf, and BCC 0.26, can all read;
 2. each file against the binary (and catalog): every usdt probe it names
    exists; every argument it reads exists (bpftrace's arg0.., BCC's
    bpf_usdt_readarg 1.., libbpf's BPF_USDT and bpf_usdt_arg 0..); string
    reads only of pointer arguments; BCC readarg destinations of the
    argument's exact size (else BCC 0.26 returns -1 and leaves the variable
    as it was: checked here, a u32 argument read into a u64); uprobe
    symbols that are real functions, not inlined away, and uprobe argument
    reads within the function's parameters (from DWARF, when present);
    retval only in uretprobes;
 3. field reads through probekit-structs' definitions in bpftrace scripts
    ($v = (struct pk_T *)...; $v->a.b): every member exists in the
    binary's DWARF, -> only through pointers, no bitfield, no str() of a
    char array;
 4. coverage: which probes no file uses (stdout, not an error).

Without --catalog (a binary that is not ours) files are checked against the
binary's stapsdt notes alone: an argument is taken as a possible pointer
only when it is 8 bytes and unsigned.  With or without a catalog, an
argument read whose operand the reader cannot take is an error that names
the reader.  What bpftrace and libbpf read is what the installed ones
read, found by trying them on a fixture (immediate $N, symbol-relative
sym(%rip) and scale-index-base disp(%b,%i,s) operands; how many USDT
arguments bpftrace reads; whether it refuses a whole probe for one
operand it cannot parse; whether its str() takes a char array) and
cached per installed binary in ~/.cache/probekit; a tool that cannot be
tried (not root, no compiler) gets the rules of the oldest release
probekit knows (bpftrace 0.17, libbpf 1.1) and a notice says so.  libbpf
refuses to attach a probe with any operand it cannot parse, read or not.
Given a binary alone (no catalog, no FILE), it lists as notes the
operands that bpftrace or libbpf cannot read.  A message names the
installed bpftrace ($BPFTRACE, else bpftrace on PATH) by its --version
and libbpf by libbpf.so's version, or says "bpftrace" or "libbpf".

A script's __EXE__ probes may live in a shared library: --lib PATH names
one, and --pid PID takes the files a running process maps (through
/proc/PID/root, so a container's library is found), its executable being
the binary unless --binary says otherwise.

Each error is one line, "file:line: probe: what is wrong", on stderr, with
any control character in it escaped (as \\n or \\xNN).  A FILE, --binary,
--lib or --catalog that is not a regular file (a FIFO, a device, a
directory) is an error at once, as are corrupt stapsdt notes (the line
names the note's file offset).  With -j the errors, notes and coverage
are one JSON object on stdout instead (probelib/report.py gives its
keys).  Exit status: 0 when all is well, 1 on any error.
"""

CHECKS = {"bpftrace": check_bpftrace, "bcc": check_bcc,
          "libbpf": check_libbpf}


def file_kind(path, text):
    first = text.split("\n", 1)[0]
    if path.endswith(".bt") or (first.startswith("#!") and "bpftrace" in first):
        return "bpftrace"
    if path.endswith(".bpf.c"):
        return "libbpf"
    if path.endswith(".py") or (first.startswith("#!") and "python" in first):
        return "bcc"
    return None


def coverage(report, catalog, binary, libs, nfiles):
    """The coverage line: how many of the probes the files were checked
    against (the catalog's, else those of the binary and of each --lib or
    --pid file that has probes) some file uses, and which none does."""
    if catalog:
        names = [(binary.path, catalog["provider"], p["name"])
                 for p in catalog["probes"]]
        what = "catalog probes"
    elif binary:
        files = [binary] + [t for t in libs if t.probes]
        names = [(t.path, p, n) for t in files for p, n in sorted(t.probes)]
        what = "probes of " + ", ".join(t.path for t in files)
    else:
        return
    unused = list(dict.fromkeys(f"{p}:{n}" for path, p, n in names
                                if (path, p, n) not in report.used))
    nused = sum(1 for key in names if key in report.used)
    report.coverage(nused, len(names), what, nfiles, unused)


# One-line usage errors, exit 2 (probelib.cmdline).
_Parser = Parser


EXAMPLES = """examples:
  probekit-check --binary build/bin/blktgt --catalog probes/blktgt.d bt/*.bt
                  # what make lint runs: every reader against the binary
  probekit-check --pid 1234 bt/iolatency.bt   # against a running process
  probekit-check -j --binary build/bin/blktgt --catalog probes/blktgt.d bt/*.bt
                  # the same report as JSON
"""


def _arguments(argv):
    ap = _Parser(prog="probekit-check", description=DESCRIPTION,
                 epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", help="the ELF file whose stapsdt notes and "
                                     "symbols the files are checked against")
    ap.add_argument("--catalog", help="the probe catalog (a DTrace provider "
                                      "file), checked against --binary")
    ap.add_argument("--lib", action="append", default=[], metavar="PATH",
                    help="a shared library where the script's __EXE__ "
                         "probes may live (repeatable)")
    ap.add_argument("--pid", type=words.pid, metavar="PID",
                    help="a running process: its executable is the binary "
                         "(unless --binary), and the files it maps are "
                         "searched like --lib")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="also say what could not be checked")
    ap.add_argument("-j", "--json", action="store_true",
                    help="the report as one JSON object on stdout "
                         "(probelib/report.py)")
    ap.add_argument("--version", action=VersionAction)
    ap.add_argument("files", nargs="*", metavar="FILE")
    a = ap.parse_args(argv)
    if not a.binary and not a.catalog and a.pid is None:
        ap.error("give --binary, --catalog or both (or --pid)")
    return a


def _libraries(a):
    """[(name, openable path)] of --lib, then of the --pid process's mapped
    files; with --pid and no --binary, a.binary becomes its executable.
    Raises ProcessError."""
    libs = [(p, p) for p in a.lib]
    if a.pid is not None:
        files = process.files(a.pid)
        if not a.binary:
            a.binary = files[0][1]
        libs += files[1:]
    return libs


def _fail(msg):
    print(f"probekit-check: {one_line(msg)}", file=sys.stderr)


def unreadable(path, e):
    """The one line that says why the ELF file at path cannot be read."""
    if isinstance(e, OSError):
        return f"{path}: {why(e)}"
    if isinstance(e, elf.BadELF):
        return f"{path}: {e}"
    return f"{path}: cannot read as ELF: {e}"


def _load(a, report):
    """(catalog, binary Target) as the arguments name them, the catalog
    checked against the binary; None after printing why they cannot be
    read."""
    catalog = None
    if a.catalog:
        try:
            catalog = parse_catalog(a.catalog)
        except OSError as e:
            _fail(f"{a.catalog}: {why(e)}")
            return None
        except CatalogError as e:
            # FILE:LINE: why, as the checker's other errors are written.
            print(one_line(str(e)), file=sys.stderr)
            return None
    try:
        libs = _libraries(a)
    except process.ProcessError as e:
        _fail(str(e))
        return None
    binary = None
    if a.binary:
        try:
            binary = Target(a.binary, catalog)
        except Exception as e:  # OSError, ELFError and friends
            _fail(unreadable(a.binary, e))
            return None
        if catalog:
            check_catalog(report, catalog, a.catalog, binary)
    elif catalog:
        # No binary: check the files against the catalog's declarations.
        binary = catalog_target(catalog, a.catalog)
    targets = []
    for name, path in libs:
        try:
            t = Target(path)
        except Exception as e:  # OSError, ELFError and friends
            if path in a.lib or isinstance(e, elf.BadELF):
                _fail(unreadable(name, e))
                return None
            continue
        if t.probes or path in a.lib:
            targets.append(t)
    return catalog, binary, targets


def unreadable_notices(report, binary):
    """Without a catalog, the operands of the binary that a reader cannot
    read, one notice per argument: a script reading one gets an error."""
    for (prov, name), p in binary.probes.items():
        for i, arg in enumerate(p.args):
            whys = [w for r in argspec.readers(arg.arch) if r != argspec.BCC
                    for w in arg.unreadable(r)]
            if whys:
                report.notice(f"{prov}:{name}: arg{i}: " + "; ".join(whys)
                              + f"; {argspec.operand_fix()}")


def fallback_notices(report):
    """A notice for each tool whose rules could not be detected here."""
    for tool, got in features.features().items():
        if got["why"]:
            report.notice(f"{tool}: what it reads was not detected "
                          f"({got['why']}); checking with the rules of the "
                          "oldest release probekit knows")


def main(argv=None):
    a = _arguments(argv)
    report = Report(a.verbose, a.json)
    loaded = _load(a, report)
    if loaded is None:
        return 1
    catalog, binary, libs = loaded
    if binary is not None and binary.elf and not catalog and not a.files:
        unreadable_notices(report, binary)
    fallback_notices(report)
    ck = Checker(report, binary, catalog, libs)
    checked = 0
    for path in a.files:
        try:
            text = read_text(path)
        except (OSError, ValueError) as e:
            report.error(path, 1, "-", "cannot read: "
                         + (why(e) if isinstance(e, OSError) else str(e)))
            continue
        kind = file_kind(path, text)
        if kind is None:
            report.note(f"{path}: not a bpftrace script, BCC tool or libbpf "
                        "program; skipped")
            continue
        checked += 1
        CHECKS[kind](ck, path, text)

    report.print_errors()
    coverage(report, catalog, binary, libs, checked)
    return report.finish()
