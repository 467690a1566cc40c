# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc: what the bcc/ tools share.

Argument parsing that fails in one line, the checks that turn a PID into a
traceable target, loading a BCC program with clear errors instead of
tracebacks, the output loop ([interval [count]], -d, Ctrl-C, target exit),
and the histogram printers.

Output format (the libbpf versions of these tools print the same):

  log2 histogram, as BCC's print_log2_hist lays it out.  Bucket i (i >= 1)
  holds the values v with slot(v) == i, where slot(v) = 1 for v <= 1 and
  floor(log2(v)) + 1 otherwise (BCC's bpf_log2l()).  Rows run from bucket 1
  to the highest non-empty bucket; row i shows low = 2^(i-1) (0 for i = 1)
  and high = 2^i - 1:

       usecs               : count     distribution
           0 -> 1          : 0        |                                        |
           2 -> 3          : 23       |****************************************|

  printf formats: header "     %-19s : count     distribution", row
  "%10d -> %-10d : %-8d |%-40s|".  When the highest non-empty bucket is
  above 32 the wide form is used: header "               %-29s : count
  distribution", row "%20d -> %-20d : %-8d |%-20s|".

  linear histogram, as libbpf-tools' print_linear_hist lays it out.  Bucket
  i holds the values v with v / width == i, except that the last bucket
  (LINEAR_SLOTS - 1) also holds everything above it.  Rows run from the
  lowest to the highest non-empty bucket; each shows low = i * width:

       usecs         : count     distribution
          10         : 23       |****************************************|

  printf formats: header "     %-13s : count     distribution", row
  "        %-10d : %-8d |%-40s|".

  In both, a row has floor(W * count / max) stars, W = 40 (20 in the wide
  form), max the largest count of that histogram.  An empty histogram
  prints nothing.  A histogram split by key (-B, -O, rpclat's method) is
  preceded by a blank line and "name = value" pairs joined by ", "
  ("bdev = Malloc0, type = read"), sections sorted by their key values
  (strcmp order, field by field);
  histograms that are not split are separated by a blank line.  A tool's
  extra field (funclat's negative) follows its histogram as "name: value".
  With -T a line "HH:MM:SS" precedes each interval's output; successive
  intervals are separated by a blank line.

--json prints one JSON object per interval, on one line:

  {"tool": "iolatency", "pid": 1234,
   "time": "HH:MM:SS",                      (only with -T)
   "histograms": [
     {"name": "latency",                    (what is measured)
      "unit": "usecs",                      (the column header of the text)
      "scale": "log2" | "linear",
      "width": 10,                          (linear only)
      "key": {"bdev": "Malloc0", "type": "read"},   ({} when not split)
      "total": 23,                          (sum of the counts)
      "buckets": [{"low": 0, "high": 1, "count": 0}, ...]}]}

  "buckets" holds exactly the rows the text shows, in the same order; a
  linear bucket's high is low + width - 1, or null for the last, open one.
  Histograms appear in the order the text prints them; empty ones are left
  out.  A tool may add fields to a histogram object (funclat's "negative"),
  and then a histogram is kept while such a field is non-zero.

Behaviour shared by the tools:

  - "Tracing WHAT of PID N (COMM)... Hit Ctrl-C to end." is printed once
    every probe is attached (on stderr with --json, so stdout is only
    JSON): it is the readiness signal scripts and tests wait for;
  - output every interval seconds, count times, else once at the end; -d
    ends the trace after SECS; Ctrl-C or SIGTERM prints what was collected
    and exits 0;
  - when the target exits, what was collected is printed, then on stderr
    "COMMAND: PID N (COMM) exited; tracing ended", exit 0;
  - errors are one line "COMMAND: why" on stderr (COMMAND is
    probekit-TOOL-bcc here, probekit-TOOL for the libbpf twin): exit 2 for usage, 1 for
    anything else (no such PID, a missing privilege, named, no probes,
    BCC cannot compile or load);
    Ctrl-C before tracing starts exits 130.
"""

import argparse
import ctypes as ct
import errno
import json
import os
import signal
import sys
import tempfile
import time
import types

LINEAR_SLOTS = 1000     # buckets of a linear histogram; the last is open
MAX_INFLIGHT = 65536    # in-flight requests a tool remembers (map size)
MAX_KEYS = 16384        # histogram buckets, over all keys (map size)
NAME_LEN = 64           # bdev names (BDEV_NAME_MAX 63 + NUL), RPC methods
TYPE_LEN = 16           # I/O type names: read, write, flush, trim
TICK = 0.1              # how often the loop checks for Ctrl-C and the target

# C shared by the tools' BPF programs.  A USDT string argument is read in
# two steps: bpf_usdt_readarg() of the pointer, which BCC rewrites per probe
# and so must be called in the probe's own function, not in a macro, then
# USER_STR() into a zeroed fixed-size buffer.  bpf_probe_read_user_str stops
# at the NUL, so equal strings give equal map keys (a fixed-size read would
# copy whatever follows the string).
BPF_COMMON = r"""
#include <uapi/linux/ptrace.h>

#define USER_STR(buf, ptr) bpf_probe_read_user_str(buf, sizeof(buf), (void *)(ptr))
"""

UNITS = {"nsecs": 1, "usecs": 1000, "msecs": 1000000}


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, exit 2."""

    def error(self, message):
        self.exit(2, "%s: %s (see --help)\n" % (self.prog, message))


def pid_type(s):
    try:
        pid = int(s, 10)
    except ValueError:
        raise argparse.ArgumentTypeError("invalid PID %r" % s)
    if pid <= 0:
        raise argparse.ArgumentTypeError("invalid PID %r" % s)
    return pid


def positive_int(s):
    try:
        v = int(s, 10)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number: %r" % s)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be positive: %r" % s)
    return v


VERSION_FILE = "VERSION"
_VERSION_CHARS = set("0123456789abcdefghijklmnopqrstuvwxyz"
                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ.+~-")


def version():
    """probekit's version, from its one home, a file VERSION: beside this
    module in an installed copy, else at the root of a checkout (bcc/..).
    (None, why) when there is none; (version, None) otherwise."""
    here = os.path.dirname(os.path.realpath(__file__))
    paths = [os.path.join(here, VERSION_FILE),
             os.path.join(os.path.dirname(here), VERSION_FILE)]
    for path in paths:
        try:
            with open(path, "rb") as f:
                text = f.read(65)
        except FileNotFoundError:
            continue
        except OSError as e:
            return None, "cannot read %s: %s" % (path, e.strerror)
        v = text.decode("ascii", "replace").strip()
        if not v or len(text) > 64 or not set(v) <= _VERSION_CHARS:
            return None, "%s does not hold a version" % path
        return v, None
    return None, "no %s file beside %s or in %s" % (
        VERSION_FILE, os.path.basename(__file__), os.path.dirname(here))


class VersionAction(argparse.Action):
    """--version: "TOOL (probekit) VERSION", exit 0; one line on stderr and
    exit 1 when the version cannot be found."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0,
                         default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        v, why = version()
        if v is None:
            parser.exit(1, "%s: %s\n" % (parser.prog, why))
        sys.stdout.write("%s (probekit) %s\n" % (parser.prog, v))
        parser.exit(0)


def parser(prog, description, examples):
    p = Parser(prog=command(prog), description=description,
               formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog=examples)
    p.add_argument("--version", action=VersionAction,
                   help="print probekit's version and exit")
    p.add_argument("-p", "--pid", type=pid_type, required=True,
                   help="trace this blktgt process")
    p.add_argument("-T", "--timestamp", action="store_true",
                   help="include a timestamp on output")
    p.add_argument("-d", "--duration", type=positive_int, metavar="SECS",
                   help="total duration of the trace, in seconds")
    p.add_argument("-j", "--json", action="store_true",
                   help="print JSON, one object per interval (schema: "
                        "bcc/probekit_bcc.py)")
    p.add_argument("interval", nargs="?", type=positive_int,
                   help="output interval, in seconds")
    p.add_argument("count", nargs="?", type=positive_int,
                   help="number of outputs")
    p.add_argument("--ebpf", action="store_true", help=argparse.SUPPRESS)
    return p


def add_units(p, default):
    """-m/-u (and -n) select the latency unit; default is 'usecs' etc."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("-m", "--milliseconds", dest="unit", action="store_const",
                   const="msecs", help="millisecond histogram")
    g.add_argument("-u", "--microseconds", dest="unit", action="store_const",
                   const="usecs", help="microsecond histogram")
    g.add_argument("-n", "--nanoseconds", dest="unit", action="store_const",
                   const="nsecs", help="nanosecond histogram")
    p.set_defaults(unit=default)


def defines(cflags):
    """The -DNAME=VALUE cflags as #define lines, for --ebpf."""
    return "".join("#define %s %s\n" % tuple(f[2:].split("=", 1))
                   for f in cflags)


def main(fn):
    """Run a tool's main(): Ctrl-C before tracing starts exits 130 and a
    closed stdout (| head) exits quietly, neither with a traceback."""
    try:
        code = fn()
        sys.stdout.flush()
    except KeyboardInterrupt:
        os._exit(130)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os._exit(141)
    sys.exit(code)


def command(tool):
    """The command a bcc/ tool is run as: probekit-TOOL-bcc (README.md,
    "Names"); TOOL alone names it in --json, as its libbpf twin does."""
    return "probekit-%s-bcc" % tool


def die(tool, msg, code=1):
    sys.stdout.flush()
    sys.stderr.write("%s: %s\n" % (command(tool), msg))
    sys.exit(code)


# Capability numbers (linux/capability.h).
CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 19, 21, 38, 39
CAP_NAMES = {CAP_SYS_PTRACE: "CAP_SYS_PTRACE", CAP_SYS_ADMIN: "CAP_SYS_ADMIN",
             CAP_PERFMON: "CAP_PERFMON", CAP_BPF: "CAP_BPF"}


def _status_fields(pid, names):
    """{name: [values]} of the given lines of /proc/PID/status."""
    out = {}
    with open("/proc/%s/status" % pid) as f:
        for ln in f.read(1 << 16).splitlines():
            name, _, value = ln.partition(":")
            if name in names:
                out[name] = value.split()
    return out


def has_capability(cap):
    """Whether this process holds capability cap (effective set)."""
    eff = _status_fields("self", ("CapEff",)).get("CapEff", ["0"])[0]
    return int(eff, 16) >> cap & 1 == 1


def _same_user(pid):
    """Whether process pid runs with only our real uid and gid, so the
    kernel lets us read it without CAP_SYS_PTRACE."""
    try:
        ids = _status_fields(pid, ("Uid", "Gid"))
    except OSError:
        return False
    return (set(ids.get("Uid", ["-1"])[:3]) == {str(os.getuid())}
            and set(ids.get("Gid", ["-1"])[:3]) == {str(os.getgid())})


def _and(names):
    return (", ".join(names[:-1]) + " and " + names[-1]
            if len(names) > 1 else names[0])


def check_privilege(tool, pid):
    """Die in one line naming the capabilities that tracing pid needs and
    this process lacks.  The kernel loads a tracing BPF program only with
    CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN implies both), and lets BCC read
    another user's process (its maps and executable) and open perf events
    on it only with CAP_SYS_PTRACE.  Some kernels also ask CAP_SYS_ADMIN
    for a uprobe; attach() says so when that is what fails."""
    need = [] if has_capability(CAP_SYS_ADMIN) else [CAP_BPF, CAP_PERFMON]
    what = ""
    if not _same_user(pid):
        need.append(CAP_SYS_PTRACE)
        what = " PID %d of another user" % pid
    missing = [CAP_NAMES[c] for c in need if not has_capability(c)]
    if missing:
        die(tool, "tracing%s needs root, or at least %s; this process "
            "lacks %s" % (what, _and([CAP_NAMES[c] for c in
                                      [CAP_BPF, CAP_PERFMON] + need[2:]]),
                          _and(missing)))


class Target:
    """The traced process: its PID, executable and start time, so that a
    recycled PID is not mistaken for the process we attached to."""

    def __init__(self, tool, pid):
        self.tool = tool
        self.pid = pid
        try:
            self.start = self._starttime()
        except FileNotFoundError:
            die(tool, "no process with PID %d" % pid)
        except OSError as e:
            die(tool, "cannot read /proc/%d: %s" % (pid, e.strerror))
        if self.start is None:
            die(tool, "PID %d has exited" % pid)
        check_privilege(tool, pid)
        try:
            self.exe = os.readlink("/proc/%d/exe" % pid)
        except PermissionError:
            die(tool, "cannot read /proc/%d/exe: permission denied "
                "(a process of another container?)" % pid)
        except OSError as e:
            die(tool, "cannot read /proc/%d/exe: %s" % (pid, e.strerror))
        if self.exe.endswith(" (deleted)"):
            die(tool, "PID %d runs a deleted executable (%s); restart it"
                % (pid, self.exe))
        self.comm = os.path.basename(self.exe)

    def _starttime(self):
        """Field 22 of /proc/PID/stat, or None for a zombie."""
        with open("/proc/%d/stat" % self.pid) as f:
            stat = f.read(4096)
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] in ("Z", "X"):
            return None
        return fields[19]

    def alive(self):
        try:
            return self._starttime() == self.start
        except (OSError, ValueError, IndexError):
            return False


# --- USDT probes, attached with the kernel's semaphore counter -----------
#
# A USDT probe with a semaphore fires only while its semaphore is nonzero.
# The kernel raises it when a uprobe is registered with the semaphore's file
# offset (ref_ctr_offset) and lowers it when that uprobe goes away, which
# happens when the tracer's perf fd closes, however the tracer dies.  That
# is the only counting the tools rely on.  BCC 0.26's USDT.enable_probe()
# instead adds one through /proc/PID/mem (a read-modify-write that can race
# the kernel's own update) and takes it back only in its context's
# destructor, which a SIGKILL or os._exit() never runs: the probe then stays
# enabled, and its guarded argument work paid on every call, until the
# target restarts.  So the tools use BCC's USDT context only to read the
# notes (probes, sites, argument specs, semaphore offsets), generate the
# argument readers themselves and attach each site through _uprobe().
#
# The kernel also keeps one uprobe per file and offset, and refuses a second
# registration there whose ref_ctr_offset differs.  bpftrace and libbpf
# pass the semaphore's offset for a USDT probe and 0 for a plain uprobe;
# BCC 0.26's Python declares bpf_attach_uprobe() with six arguments while
# libbcc takes seven, the seventh being ref_ctr_offset, so libbcc reads
# whatever lies on the stack there.  _uprobe() passes the offset the others
# pass, so a bcc/ tool and a bt/ script or libbpf tool can share a probe.

class _UsdtNote(ct.Structure):
    """libbcc's struct bcc_usdt.  BCC's Python binding stops before
    semaphore_offset, which libbcc fills in since 0.17."""
    _fields_ = [("provider", ct.c_char_p), ("name", ct.c_char_p),
                ("bin_path", ct.c_char_p), ("semaphore", ct.c_ulonglong),
                ("num_locations", ct.c_int), ("num_arguments", ct.c_int),
                ("semaphore_offset", ct.c_ulonglong)]


class UsdtSite:
    """One site of a USDT probe: the BPF function to run there, the file
    (bytes), the site's address in it and the semaphore's file offset (0:
    none)."""

    def __init__(self, probe, fn, path, addr, ref_ctr):
        self.probe, self.fn, self.path = probe, fn, path
        self.addr, self.ref_ctr = addr, ref_ctr


class UsdtProbes:
    """The USDT probes a tool traces in process pid: the C that reads their
    arguments (text, to go before the tool's program) and the sites to
    attach."""

    def __init__(self, pid, text, sites):
        self.pid, self.text, self.sites = pid, text, sites


def _usdt_notes(usdt):
    """{"provider:name": its note's fields} of a BCC USDT context."""
    from bcc.libbcc import lib
    notes = {}
    cb_type = ct.CFUNCTYPE(None, ct.POINTER(_UsdtNote))

    def each(p):
        n = types.SimpleNamespace(**{f: getattr(p[0], f)
                                     for f, _ in _UsdtNote._fields_})
        notes.setdefault("%s:%s" % (n.provider.decode(), n.name.decode()), n)

    foreach = lib["bcc_usdt_foreach"]           # a private copy of it
    foreach.restype = None
    foreach.argtypes = [ct.c_void_p, cb_type]
    foreach(usdt.get_context(), cb_type(each))
    return notes


_CTYPES = {(1, False): "u8", (2, False): "u16", (4, False): "u32",
           (8, False): "u64", (1, True): "s8", (2, True): "s16",
           (4, True): "s32", (8, True): "s64"}
# Between reading a pt_regs field and using it: without it clang may merge
# the loads of the sites of a switch into one load at a variable offset
# into ctx, which the verifier refuses.
_BARRIER = '__asm__ __volatile__("" ::: "memory");'


def _read_operand(a, dest):
    """C that stores USDT argument a (a bcc.usdt.USDTProbeArgument) in
    dest, or None when its operand form cannot be read here."""
    from bcc.libbcc import BCC_USDT_ARGUMENT_FLAGS as F
    ctype = _CTYPES[a.size, a.signed]
    if a.valid & F.CONSTANT:
        return "%s = (%s)%dLL;" % (dest, ctype, a.constant)
    if not a.valid & F.BASE_REGISTER_NAME:
        return None
    base = a.base_register_name.decode()
    if base.startswith("xmm") or base == "ip" or a.valid & F.DEREF_IDENT:
        return None
    if not a.valid & F.DEREF_OFFSET:
        return "%s = (%s)ctx->%s; %s" % (dest, ctype, base, _BARRIER)
    addr = "ctx->%s + (%d)" % (base, a.deref_offset)
    if a.valid & F.INDEX_REGISTER_NAME:
        scale = a.scale if a.valid & F.SCALE else 1
        addr += " + ctx->%s * %d" % (a.index_register_name.decode(), scale)
    return ("{ u64 __addr = %s; %s __v = 0; %s "
            "bpf_probe_read_user(&__v, sizeof(__v), (void *)__addr); "
            "%s = __v; }" % (addr, ctype, _BARRIER, dest))


def _readarg_text(fn, probe, locations, pids):
    """C for bpf_usdt_readarg(N, ctx, &x) in function fn: BCC's front end
    rewrites that call into _bpf_readarg_<fn>_<N>(ctx, &x, sizeof(x)).
    locations are bcc.usdt.USDTProbeLocation; pids[i] is the address the
    site of locations[i] has in the process (what PT_REGS_IP() reads
    there).  A variable of another size than the argument reads nothing
    and gets -1, as with BCC's own reader; an operand this cannot read
    fails the compile of a program that reads it, and only then."""
    out = []
    for n in range(1, locations[0].num_arguments + 1):
        args = [loc.get_argument(n - 1) for loc in locations]
        widest = max(args, key=lambda a: a.size)
        ctype = _CTYPES[widest.size, widest.signed]
        name = "_bpf_readarg_%s_%d" % (fn, n)
        reads = [_read_operand(a, "*(%s *)dest" % ctype) for a in args]
        if None in reads:
            out.append('static int %s(struct pt_regs *ctx, void *dest, '
                       'size_t len) __attribute__((unavailable("%s '
                       'argument %d: operand form not supported")));\n'
                       % (name, probe, n))
            continue
        out.append("static __always_inline int %s(struct pt_regs *ctx, "
                   "void *dest, size_t len)\n{\n"
                   "    if (len != sizeof(%s))\n        return -1;\n"
                   % (name, ctype))
        if len(reads) == 1:
            out.append("    %s\n    return 0;\n}\n" % reads[0])
            continue
        out.append("    switch (PT_REGS_IP(ctx)) {\n")
        for ip, read in zip(pids, reads):
            out.append("    case 0x%xULL: %s return 0;\n" % (ip, read))
        out.append("    }\n    return -1;\n}\n")
    return "".join(out)


def _site_address(pid, path, addr):
    """The address in process pid of virtual address addr of the ELF file
    at path, or None."""
    from bcc.libbcc import lib
    f = lib["bcc_resolve_global_addr"]          # a private copy of it
    f.restype = ct.c_int
    f.argtypes = [ct.c_int, ct.c_char_p, ct.c_ulonglong, ct.c_uint8,
                  ct.POINTER(ct.c_ulonglong)]
    out = ct.c_ulonglong()
    if f(pid, path, addr, 0, ct.byref(out)) != 0:
        return None
    return out.value


def usdt_context(tool, target, probes):
    """The UsdtProbes (not a BCC USDT context: the name is what probecheck
    reads) for target's probes [(probe, fn_name)], probes named
    provider:name (blktgt:io__submit).  Nothing is enabled or attached
    yet: load() attaches the sites once the program is loaded."""
    from bcc import USDT
    from bcc.usdt import USDTProbe
    try:
        u = USDT(pid=target.pid)
    except Exception:
        die(tool, "cannot read the USDT probes of PID %d (%s)"
            % (target.pid, target.exe))
    notes = _usdt_notes(u)
    text, sites = [], []
    for probe, fn in probes:
        note = notes.get(probe)
        if note is None:
            die(tool, "PID %d (%s) has no USDT probe %s; is it blktgt "
                "built with USDT=1?" % (target.pid, target.exe, probe))
        p = USDTProbe(u.get_context(), note)
        locations = [p.get_location(i) for i in range(p.num_locations)]
        if any(loc.bin_path != note.bin_path for loc in locations):
            die(tool, "probe %s has sites in more than one file; the "
                "bcc/ tools trace one" % probe)
        ips = [loc.address for loc in locations]
        if len(locations) > 1:
            ips = [_site_address(target.pid, note.bin_path, a) for a in ips]
            if None in ips:
                die(tool, "cannot find the sites of %s in PID %d"
                    % (probe, target.pid))
        text.append(_readarg_text(fn, probe, locations, ips))
        for loc in locations:
            sites.append(UsdtSite(probe, fn, note.bin_path, loc.address,
                                  note.semaphore_offset))
    return UsdtProbes(target.pid, "#include <uapi/linux/ptrace.h>\n"
                      + "".join(text), sites)


_attach7 = None


def _uprobe(bpf, fn_name, path, sym=b"", addr=None, pid=-1, ret=False,
            ref_ctr=0):
    """Attach BPF function fn_name as a uprobe (or uretprobe) the way BCC's
    attach_uprobe() does, but with an explicit ref_ctr_offset."""
    global _attach7
    from bcc import BPF
    from bcc.libbcc import lib
    if _attach7 is None:
        _attach7 = lib["bpf_attach_uprobe"]     # a private copy of it
        _attach7.restype = ct.c_int
        _attach7.argtypes = [ct.c_int, ct.c_int, ct.c_char_p, ct.c_char_p,
                             ct.c_ulonglong, ct.c_int, ct.c_uint]
    path, off = bpf._check_path_symbol(path, sym, addr, pid)
    fn = bpf.load_func(fn_name, BPF.KPROBE)
    ev = bpf._get_uprobe_evname(b"r" if ret else b"p", path, off, pid)
    fd = _attach7(fn.fd, 1 if ret else 0, ev, path, off, pid, ref_ctr)
    if fd < 0:
        err = ct.get_errno()
        raise OSError(err, "Failed to attach BPF to %s: %s"
                      % ("uretprobe" if ret else "uprobe", os.strerror(err)))
    bpf._add_uprobe_fd(ev, fd)


def uprobe(bpf, fn_name, path, sym, pid, ret=False):
    """A uprobe (ret=False) or uretprobe on function sym of the ELF file at
    path, for process pid, registered as bpftrace and libbpf register it."""
    _uprobe(bpf, fn_name.encode(), path.encode(), sym=sym.encode(), pid=pid,
            ret=ret)


def _first_error(log):
    for line in log.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    return None


def load(tool, text, cflags=(), usdt=None):
    """Compile and load a BPF program (and attach its USDT probes).
    What clang and libbcc print (to stdout and stderr) is captured; on
    failure one line says why."""
    from bcc import BPF
    sys.stdout.flush()
    saved = os.dup(1), os.dup(2)
    log = tempfile.TemporaryFile()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    err = None
    try:
        b = BPF(text=(usdt.text if usdt else "") + text,
                cflags=list(cflags))
    except Exception as e:
        err = e
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
    if err is None:
        for s in usdt.sites if usdt else ():
            attach(tool, "USDT probe %s of PID %d" % (s.probe, usdt.pid),
                   _uprobe, b, s.fn.encode(), s.path, addr=s.addr,
                   pid=usdt.pid, ref_ctr=s.ref_ctr)
        return b
    log.seek(0)
    diag = log.read(1 << 20).decode(errors="replace")
    msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
    headers = ("BCC cannot compile: no kernel headers for %s "
               "(run 'make deps')" % os.uname().release)
    if "Unable to find kernel headers" in diag:
        die(tool, headers)
    if "compile" in msg.lower():
        first = _first_error(diag)
        if first and "file not found" in first:
            die(tool, "%s: %s" % (headers, first))
        die(tool, "BCC cannot compile its BPF program: %s"
            % (first or "see 'bcc/%s --ebpf'" % tool))
    if "permitted" in msg or "EPERM" in msg or "denied" in msg:
        die(tool, "BCC cannot load its BPF program: %s (tracing needs "
            "root, or at least CAP_BPF and CAP_PERFMON)" % msg)
    die(tool, "BCC cannot load its BPF program: %s" % (msg or repr(err)))


def attach(tool, what, fn, *args, **kwargs):
    """Run a BPF attach call; turn its exception into one line."""
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    denied = False
    try:
        fn(*args, **kwargs)
    except OSError as e:
        err, denied = e.strerror, e.errno in (errno.EACCES, errno.EPERM)
    except Exception as e:
        err = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
    else:
        err = None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    if denied and not has_capability(CAP_SYS_ADMIN):
        die(tool, "cannot attach to %s: this kernel lets only root "
            "(CAP_SYS_ADMIN) attach uprobes; this process lacks it" % what)
    if err:
        die(tool, "cannot attach to %s: %s" % (what, err))


# --- histograms -----------------------------------------------------------

def _stars(count, vmax, width):
    return "*" * min(width, (width * count) // vmax) if vmax else ""


def log2_rows(slots):
    """(low, high, count) rows of a log2 histogram {slot: count}."""
    idx_max = max((s for s, c in slots.items() if c), default=0)
    rows = []
    for i in range(1, idx_max + 1):
        low, high = (1 << i) >> 1, (1 << i) - 1
        if low == high:
            low -= 1
        rows.append((low, high, slots.get(i, 0)))
    return rows


def linear_rows(slots, width):
    """(low, high, count) rows of a linear histogram {slot: count}; high
    is None for the last, open bucket."""
    nz = [s for s, c in slots.items() if c]
    if not nz:
        return []
    rows = []
    for i in range(min(nz), max(nz) + 1):
        high = None if i >= LINEAR_SLOTS - 1 else i * width + width - 1
        rows.append((i * width, high, slots.get(i, 0)))
    return rows


def format_log2(rows, val_type):
    if not rows:
        return []
    vmax = max(c for _, _, c in rows)
    if len(rows) <= 32:
        out = ["     %-19s : count     distribution" % val_type]
        body, w = "%10d -> %-10d : %-8d |%-*s|", 40
    else:
        out = ["               %-29s : count     distribution" % val_type]
        body, w = "%20d -> %-20d : %-8d |%-*s|", 20
    for low, high, c in rows:
        out.append(body % (low, high, c, w, _stars(c, vmax, w)))
    return out


def format_linear(rows, val_type):
    if not rows:
        return []
    vmax = max(c for _, _, c in rows)
    out = ["     %-13s : count     distribution" % val_type]
    for low, _, c in rows:
        out.append("        %-10d : %-8d |%-*s|"
                   % (low, c, 40, _stars(c, vmax, 40)))
    return out


class Hist:
    """One histogram to print: what it measures, its unit, scale, the key
    it is split by (an ordered list of (name, value)) and {slot: count}."""

    def __init__(self, name, unit, slots, scale="log2", width=None,
                 key=(), extra=None):
        self.name, self.unit, self.slots = name, unit, slots
        self.scale, self.width, self.key = scale, width, list(key)
        self.extra = extra or {}

    def shown(self):
        """Empty histograms are left out, unless an extra field is set."""
        return any(self.slots.values()) or any(self.extra.values())

    def rows(self):
        if self.scale == "log2":
            return log2_rows(self.slots)
        return linear_rows(self.slots, self.width)

    def text(self):
        rows = self.rows()
        if self.scale == "log2":
            return format_log2(rows, self.unit)
        return format_linear(rows, self.unit)

    def json(self):
        rows = self.rows()
        d = {"name": self.name, "unit": self.unit, "scale": self.scale}
        if self.scale == "linear":
            d["width"] = self.width
        d["key"] = dict(self.key)
        d["total"] = sum(c for _, _, c in rows)
        d["buckets"] = [{"low": lo, "high": hi, "count": c}
                        for lo, hi, c in rows]
        d.update(self.extra)
        return d


def split_table(table, fields):
    """Read a BPF hash keyed by a struct {fields..., slot} into
    {(values...): {slot: count}}.  Byte-string fields are decoded."""
    out = {}
    for k, v in table.items():
        vals = []
        for f in fields:
            x = getattr(k, f)
            if isinstance(x, bytes):
                x = x.decode(errors="replace")
            vals.append(x)
        d = out.setdefault(tuple(vals), {})
        d[k.slot] = d.get(k.slot, 0) + v.value
    return out


def keyed_hists(table, fields, labels, name, unit, scale="log2",
                width=None):
    """Hists of a table split by the given key fields, sorted by key;
    labels names each field in the output ("bdev", "type")."""
    groups = split_table(table, fields)
    hists = []
    for vals in sorted(groups):
        hists.append(Hist(name, unit, groups[vals], scale, width,
                          zip(labels, vals)))
    return hists


# --- the output loop ------------------------------------------------------

class Output:
    """Prints one interval's histograms as text or JSON (see the top of
    this file for both formats)."""

    def __init__(self, tool, pid, args):
        self.tool, self.pid = tool, pid
        self.json, self.timestamp = args.json, args.timestamp
        self.n = 0

    def emit(self, hists):
        hists = [h for h in hists if h.shown()]
        stamp = time.strftime("%H:%M:%S")
        if self.json:
            obj = {"tool": self.tool, "pid": self.pid}
            if self.timestamp:
                obj["time"] = stamp
            obj["histograms"] = [h.json() for h in hists]
            print(json.dumps(obj), flush=True)
            return
        lines = []
        if self.n:
            lines.append("")
        if self.timestamp:
            lines.append("%-8s" % stamp)
        for i, h in enumerate(hists):
            if h.key:
                lines.append("")
                lines.append(", ".join("%s = %s" % kv for kv in h.key))
            elif i:
                lines.append("")
            lines += h.text()
            for k, v in h.extra.items():
                lines.append("%s: %s" % (k, v))
        self.n += 1
        if lines:
            print("\n".join(lines), flush=True)


def run(tool, target, args, collect, what):
    """The tool's main loop.  Prints "Tracing ... Hit Ctrl-C to end." (the
    readiness line: the caller has loaded and attached everything), then
    every interval calls collect() -> [Hist] (which clears the maps) and
    prints it.  Ends after count intervals, after -d seconds, on Ctrl-C
    or SIGTERM (printing what was collected, exit 0), or when the target
    exits (the same, plus a line on stderr saying so)."""
    stop = []

    def on_signal(signum, frame):
        stop.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    out = Output(tool, target.pid, args)
    msg = "Tracing %s of PID %d (%s)... Hit Ctrl-C to end." % (
        what, target.pid, target.comm)
    if args.json:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
    else:
        print(msg, flush=True)

    now = time.monotonic()
    end = now + args.duration if args.duration else None
    interval = args.interval
    next_out = now + interval if interval else None
    left = args.count
    gone = False
    while True:
        now = time.monotonic()
        due = [t for t in (end, next_out) if t is not None]
        if stop or (end is not None and now >= end):
            break
        if not target.alive():
            gone = True
            break
        if next_out is not None and now >= next_out:
            out.emit(collect())
            next_out += interval
            if left is not None:
                left -= 1
                if left == 0:
                    return 0
            continue
        time.sleep(min([TICK] + [max(0.0, t - now) for t in due]))
    out.emit(collect())
    if gone:
        sys.stderr.write("%s: PID %d (%s) exited; tracing ended\n"
                         % (command(tool), target.pid, target.comm))
    return 0
