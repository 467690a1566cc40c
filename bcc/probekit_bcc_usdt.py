# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_usdt: the USDT probes of any binary, for the generic tools
(usdtlat, usdtcount).  What they trace is a Scope: -p PID (the process's
executable and every ELF file it maps, for that process only) or -b PATH
(one file, in every process that runs or maps it, now or later).

Files of a process are opened as /proc/PID/root/FILE, so a library that
exists only in the process's mount namespace (a container's) is read and
attached as the process sees it.  Every site is attached as a plain
uprobe at its file offset with the semaphore's file offset
(ref_ctr_offset), so the kernel raises the semaphores, for every process
with -b; see probekit_bcc_probes for why BCC's enable_probe() is not used.

A site's argument is read by C generated per operand, so the sites of a
probe whose operands differ get a BPF function each: this needs no
PT_REGS_IP() switch, whose addresses would differ between the processes
of -b.
"""

import argparse
import fnmatch
import os
import sys

import probekit_bcc_target as proc
from probekit_bcc_args import command, die, escaped
from probekit_bcc_probes import UsdtSite, UsdtProbes, _read_operand
from probelib import toolspec as spec

# The operand kinds probekit_bcc_probes._read_operand() reads.
READ_KINDS = ("const", "reg", "mem", "index")


class Scope:
    """What -p PID or -b PATH selects: the files to read, the PID the
    uprobes are for (-1: every process), and how the output names it."""

    def __init__(self, tool, pid=None, path=None):
        self.tool = tool
        if pid is not None:
            self.target = proc.Target(tool, pid)
            self.pid, self.comm = pid, self.target.comm
            self.where = "PID %d (%s)" % (pid, self.comm)
            self.head = {"pid": pid}
            self.files = _process_files(tool, pid, self)
            return
        self.target = None
        path = os.path.abspath(path)
        try:
            os.stat(path)
        except OSError as e:
            # The libbpf twin's words: the cause, a symlink loop named as one.
            die(tool, "cannot trace %s: %s" % (path, e.strerror))
        if not os.path.isfile(path) or not _is_elf(path):
            die(tool, "%s is not an ELF executable or library" % path)
        proc.check_privilege(tool, -1)
        self.pid, self.comm = -1, os.path.basename(path)
        self.where = "%s (every process)" % path
        self.head = {"pid": None, "binary": path}
        self.files = [(path, path)]
        self.inode = _inode(path)
        self.replaced = False

    def alive(self):
        """With -p, whether the process lives.  With -b, always: but a
        file replacing PATH (a new inode there: a package upgrade's or a
        deploy's rename) is said once, on stderr.  BCC built the argument
        code for the old file's sites and cannot attach to another file,
        so the old file alone stays traced.  Asked every tick of run()'s
        loop: one stat()."""
        if self.target:
            return self.target.alive()
        path = self.head["binary"]
        if not self.replaced and _inode(path) not in (None, self.inode):
            self.replaced = True
            sys.stdout.flush()
            sys.stderr.write("%s: %s\n" % (
                command(self.tool), spec.messages()["REPLACED_NOT_FOLLOWED"]
                % (path, command(self.tool))))
            sys.stderr.flush()
        return True

    def exited(self):
        """With -p, once the process has exited (or its PID is another
        process's): the one line that says so, for a failure it caused
        while the tool read or attached its probes; else None."""
        if self.target is None or not self.target.exiting(proc.EXIT_WAIT_S):
            return None
        return "PID %d (%s) exited while its probes were being attached" % (
            self.pid, self.comm)

    def missing(self, name, names):
        """The tail of a "no probe" error for name: where it was looked
        for, and the nearest of names, the probes there, or that there
        are none (toolspec.nearest_tail(): libbpf's words)."""
        where = "in %s or the files it maps" % self.where if self.target \
            else "in %s" % self.head["binary"]
        return where + spec.nearest_tail(name, names)


def _inode(path):
    """(device, inode) of the regular file at path now, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if os.path.isfile(path) else None


def _is_elf(path):
    from probelib import process
    return process.is_elf(path)


def _process_files(tool, pid, scope):
    """[(name, openable path)] of the executable, then each other
    file-backed ELF mapping of process pid, as /proc/PID/root/NAME."""
    from probelib import process
    try:
        return process.files(pid)
    except process.ProcessError as e:
        die(tool, scope.exited() or str(e))


class Probe:
    """One probe, by provider:name, with its sites: [(openable path,
    SdtProbe note)], over every file of the scope."""

    def __init__(self, full):
        self.full, self.sites = full, []

    def nargs(self):
        return min(len(n.args) for _, n in self.sites)


def find_probes(tool, scope):
    """{provider:name: Probe} of every file of the scope, in file order."""
    from probelib import notes
    found = {}
    for name, path in scope.files:
        try:
            sites = notes.read_probes(path)
        except Exception:   # OSError, ELFError and what a corrupt file raises
            if scope.target is None:
                die(tool, "cannot read the USDT probes of %s" % path)
            continue
        for n in sites:
            if n.offset is None:
                continue
            found.setdefault(n.full, Probe(n.full)).sites.append((path, n))
    # A process that exited meanwhile has no files left to read: say so,
    # not that its probes are missing.
    if scope.exited():
        die(tool, scope.exited())
    return found


def match(pattern, full):
    """Whether provider:name full matches a PATTERN: provider:name with
    fnmatch wildcards in either half, or a bare name glob."""
    provider, _, name = full.partition(":")
    if ":" not in pattern:
        return fnmatch.fnmatchcase(name, pattern)
    pp, _, pn = pattern.partition(":")
    return fnmatch.fnmatchcase(provider, pp) and fnmatch.fnmatchcase(name, pn)


def arg_index(s):
    """N of "argN" (N from 1, as BCC counts), or None."""
    if not s.startswith("arg") or not s[3:].isdigit() or s[3:4] == "0":
        return None
    n = int(s[3:])
    from probelib import notes
    return n if n <= notes.MAX_ARGS else None


def _is_name(s):
    """Whether s may name an argument: a C identifier, not argN."""
    from probelib import notes
    return bool(s) and len(s) <= notes.NAME_MAX and s.isascii() and \
        not s[0].isdigit() and all(c.isalnum() or c == "_" for c in s) \
        and not (s.startswith("arg") and s[3:4].isdigit())


def arg_type(tid):
    """argparse type of an option's argument (usdtlat -k, usdtcount
    -H/-S): tid (when taken), an argument's name (resolved per probe:
    resolve()) or argN, N from 1 as BCC counts.  arg0, which a bpftrace
    user would write, is told that the numbering is BCC's and which name
    it has here: the message of libbpf's usdt_arg_option()."""
    def parse(s):
        if (tid and s == "tid") or arg_index(s) or _is_name(s):
            return s
        from probelib import notes
        choose = "(choose %san argument's name, or arg1 to arg%d)" % (
            "tid, " if tid else "", notes.MAX_ARGS)
        if s == "arg0":
            raise argparse.ArgumentTypeError(
                "'arg0': arguments count from 1 here, as in BCC: bpftrace's "
                "arg0 is arg1, its argN argN+1 " + choose)
        raise argparse.ArgumentTypeError(
            "invalid choice: '%s' %s" % (escaped(s[:64]), choose))
    return parse


_arg_names = {}


def _names_of(path):
    """The probekit notes of the file at path, read once ({} when it has
    none, or they cannot be read: as libbpf's usdt_sites.c)."""
    if path not in _arg_names:
        from probelib import notes
        try:
            _arg_names[path] = notes.read_arg_names(path)
        except Exception:   # OSError, ELFError, NoteError
            _arg_names[path] = {}
    return _arg_names[path]


def resolve(tool, scope, probe, arg, opt, string=False):
    """N (from 1) of arg, a name or argN, at probe, checked as check_arg()
    checks it: a name is looked up in the probekit note of the file of
    the probe's first site, so each probe resolves its own (io__submit's
    len is its fifth argument, io__done's its fourth).  With string (-S),
    an argument the note types as anything but a char * is refused.  Dies
    in one line: libbpf's usdt_arg_resolve() says the same."""
    path = probe.sites[0][0]
    a = _names_of(path).get(probe.full)
    n = arg_index(arg)
    if n is None:
        if a is None:
            shown = dict((p, name) for name, p in scope.files).get(path, path)
            die(tool, spec.ARG_NO_NAMES % (shown, probe.full, "arg1"))
        names = [name for _, name in a.args]
        if arg not in names:
            die(tool, spec.ARG_UNKNOWN % (probe.full, arg) +
                spec.nearest_tail(arg, names))
        n = names.index(arg) + 1
    typed = a is not None and n <= len(a.args)
    from probelib import notes
    if string and typed and not notes.type_is_string(a.args[n - 1][0]):
        die(tool, spec.ARG_NOT_STRING % (len(opt.split("/")[0]), opt, arg,
                                         arg, probe.full, a.args[n - 1][0]))
    check_arg(tool, probe, n, string=string and not typed)
    return n


def check_arg(tool, probe, n, string=False):
    """Die in one line unless every site of probe has an argument n that
    the generated reader can read, and, for string (-S), that may be a
    pointer by probekit-check's rule (probelib.target.Arg)."""
    from probelib import argspec
    from probelib.target import Arg
    if probe.nargs() < n:
        die(tool, "%s has no argument %d (it has %d)"
            % (probe.full, n, probe.nargs()))
    for _, note in probe.sites:
        a = note.args[n - 1]
        if _read_operand(a, "v") is None:
            why = argspec.reader_problem(a.operand, command(tool),
                                         READ_KINDS, a.arch)
            die(tool, "cannot read arg%d of %s: %s; %s"
                % (n, probe.full, why, argspec.operand_fix()))
        arg = Arg(a.size, a.signed, spec="%s%d@%s" % (
            "-" if a.signed else "", a.size, a.operand))
        if string and not arg.may_be_pointer():
            die(tool, "-S arg%d reads a string, but arg%d of %s is %s, not "
                "a pointer" % (n, n, probe.full, arg.describe()))


def functions(probe, prefix, n):
    """Group probe's sites by the C that reads argument n (n None: no
    argument): [(function name, C statement setting s64 v, [sites])]."""
    groups = {}
    for path, note in probe.sites:
        read = _read_operand(note.args[n - 1], "v") if n else ""
        groups.setdefault(read, []).append((path, note))
    return [("%s_%d" % (prefix, i), read, sites)
            for i, (read, sites) in enumerate(groups.items())]


# --gate: some runtimes fire a probe only while another probe's semaphore
# is raised (CPython 3.11's function__entry needs python:line's).  A gate
# is attached with a function that counts nothing, so the kernel raises
# its semaphore as for any site; each of its hits still costs a trap.
GATES_MAX = spec.limits()["USDT_GATES_MAX"]     # specs/limits.toml
GATE_FN = "gate_fn"
GATE_TEXT = "\nint %s(struct pt_regs *ctx)\n{\n    return 0;\n}\n" % GATE_FN


def gate_type(s):
    """--gate's PROBE: provider:name, no wildcards (as libbpf's
    usdt_probe_valid() takes it)."""
    import argparse
    provider, _, name = s.partition(":")
    if not all(x and len(x) < 128 and all(c.isascii() and (c.isalnum() or
                                                            c == "_")
                                           for c in x)
               for x in (provider, name)):
        raise argparse.ArgumentTypeError(
            "'%s' is not a probe: give provider:name, as tplist prints it"
            % escaped(s))
    return s


def add_gate_option(p):
    """--gate, as specs/common.toml declares it."""
    from probekit_bcc_args import add_common
    add_common(p, "gate", types={"probe": gate_type})


def gate_sites(tool, scope, found, gates):
    """(C text, [UsdtSite]) attaching GATE_FN at every site of each
    --gate probe; die in one line when one is not there."""
    if len(gates) > GATES_MAX:
        die(tool, "--gate: at most %d gates" % GATES_MAX)
    sites = []
    for g in gates:
        probe = found.get(g)
        if probe is None:
            die(tool, "no USDT probe %s %s" % (escaped(g),
                                               scope.missing(g, found)))
        sites += usdt_sites(scope, GATE_FN, probe.sites)
    return (GATE_TEXT if sites else ""), sites


def usdt_sites(scope, fn, sites):
    """UsdtSite items attaching BPF function fn at each of sites."""
    return [UsdtSite(note.full, fn, path, note.pc, note.offset,
                     note.semaphore_offset) for path, note in sites]


def usdt_probes(scope, sites):
    """The UsdtProbes that probekit_bcc_load.load() attaches: no argument
    readers of BCC's kind, since each function reads its own."""
    u = UsdtProbes(scope.pid, "#include <uapi/linux/ptrace.h>\n", sites)
    u.where = scope.where
    u.exited = scope.exited
    return u
