# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_probes: what a bcc/ tool attaches to in the traced process,
read with probelib, probekit's one reader of ELF files and their USDT
notes: USDT probes (their sites, argument specs and semaphores) and
functions.

A USDT probe with a semaphore fires only while its semaphore is nonzero.
The kernel raises it when a uprobe is registered with the semaphore's file
offset (ref_ctr_offset) and lowers it when that uprobe goes away, which
happens when the tracer's perf fd closes, however the tracer dies.  That
is the only counting the tools rely on.  BCC 0.26's USDT.enable_probe()
instead adds one through /proc/PID/mem (a read-modify-write that can race
the kernel's own update) and takes it back only in its context's
destructor, which a SIGKILL or os._exit() never runs: the probe then stays
enabled, and its guarded argument work paid on every call, until the
target restarts.  So the tools use no BCC USDT context: they read the
notes here, generate the argument readers themselves, and attach each
site with its semaphore's offset (probekit_bcc_load.load()).

probelib's ELF and note readers are imported by name where they are used,
so that --version and a usage error load none of them.
"""

import errno
import os
import sys

from probekit_bcc_args import command, die
from probelib import bcc_compat as compat, toolspec as spec


class UsdtSite:
    """One site of a USDT probe: the BPF function to run there, the file,
    the site's virtual address and file offset in it, and the semaphore's
    file offset (0: none)."""

    def __init__(self, probe, fn, path, addr, offset, ref_ctr):
        self.probe, self.fn, self.path = probe, fn, path
        self.addr, self.offset, self.ref_ctr = addr, offset, ref_ctr


class UsdtProbes:
    """The USDT probes a tool traces in process pid: the C that reads their
    arguments (text, to go before the tool's program) and the sites to
    attach."""

    def __init__(self, pid, text, sites, nargs=None):
        self.pid, self.text, self.sites = pid, text, sites
        # {probe: the fewest arguments a site of it passes}
        self.nargs = nargs or {}


_CTYPES = {(1, False): "u8", (2, False): "u16", (4, False): "u32",
           (8, False): "u64", (1, True): "s8", (2, True): "s16",
           (4, True): "s32", (8, True): "s64"}
# Between reading a pt_regs field and using it: without it clang may merge
# the loads of the sites of a switch into one load at a variable offset
# into ctx, which the verifier refuses.
_BARRIER = '__asm__ __volatile__("" ::: "memory");'


def _read_operand(arg, dest):
    """C that stores USDT argument arg (a probelib SdtArg) in dest, or None
    when its operand form cannot be read here: a symbol-relative or
    %rip-relative operand, or a register pt_regs does not hold."""
    from probelib import argspec
    op = argspec.parse_operand(arg.operand, arg.arch)
    ctype = _CTYPES[arg.size, arg.signed]
    if op.kind == "const":
        return "%s = (%s)%dLL;" % (dest, ctype, op.value)
    if op.kind not in ("reg", "mem", "index"):
        return None
    base = argspec.pt_regs_field(arg.arch, op.base)
    if base is None:
        return None
    if op.kind == "reg":
        return "%s = (%s)ctx->%s; %s" % (dest, ctype, base, _BARRIER)
    addr = "ctx->%s + (%d)" % (base, op.disp)
    if op.kind == "index":
        index = argspec.pt_regs_field(arg.arch, op.index)
        if index is None:
            return None
        addr += " + ctx->%s * %d" % (index, op.scale)
    return ("{ u64 __addr = %s; %s __v = 0; %s "
            "bpf_probe_read_user(&__v, sizeof(__v), (void *)__addr); "
            "%s = __v; }" % (addr, ctype, _BARRIER, dest))


def _readarg_text(fn, probe, sites, ips):
    """C for bpf_usdt_readarg(N, ctx, &x) in function fn: BCC's front end
    rewrites that call into _bpf_readarg_<fn>_<N>(ctx, &x, sizeof(x)).
    sites are the probe's SdtProbe notes; ips[i] is the address the site
    of sites[i] has in the process (what PT_REGS_IP() reads there).  A
    variable of another size than the argument reads nothing and gets -1,
    as with BCC's own reader; an operand this cannot read fails the
    compile of a program that reads it, and only then."""
    out = []
    for n in range(1, len(sites[0].args) + 1):
        args = [s.args[n - 1] if n <= len(s.args) else None for s in sites]
        widest = max((a for a in args if a), key=lambda a: a.size)
        ctype = _CTYPES[widest.size, widest.signed]
        name = "_bpf_readarg_%s_%d" % (fn, n)
        reads = [_read_operand(a, "*(%s *)dest" % ctype) if a else None
                 for a in args]
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
        for ip, read in zip(ips, reads):
            out.append("    case 0x%xULL: %s return 0;\n" % (ip, read))
        out.append("    }\n    return -1;\n}\n")
    return "".join(out)


def usdt_context(tool, target, probes):
    """The UsdtProbes (the name is what probecheck reads, see its
    PAIR_HELPERS) for target's probes [(probe, fn_name)], probes named
    provider:name (blktgt:io__submit), read from the target's executable.
    Nothing is attached yet: load() attaches the sites once the program is
    loaded."""
    from probelib import notes
    try:
        found = notes.by_name(notes.read_probes(target.exe))
    except Exception:   # OSError, ELFError and what a corrupt file raises
        die(tool, "cannot read the USDT probes of PID %d (%s)"
            % (target.pid, target.exe))
    text, sites, nargs = [], [], {}
    for probe, fn in probes:
        locs = found.get(probe)
        if not locs:
            die(tool, "PID %d (%s) has no USDT probe %s; is it blktgt "
                "built with USDT=1?" % (target.pid, target.exe, probe))
        if None in (s.offset for s in locs):
            die(tool, "cannot find the sites of %s in PID %d"
                % (probe, target.pid))
        ips = [s.pc for s in locs]
        if len(locs) > 1:
            ips = [target.address(s.offset) for s in locs]
            if None in ips:
                die(tool, "cannot find the sites of %s in PID %d"
                    % (probe, target.pid))
        text.append(_readarg_text(fn, probe, locs, ips))
        nargs[probe] = min(len(s.args) for s in locs)
        for s in locs:
            sites.append(UsdtSite(probe, fn, target.exe, s.pc, s.offset,
                                  s.semaphore_offset))
    return UsdtProbes(target.pid, "#include <uapi/linux/ptrace.h>\n"
                      + "".join(text), sites, nargs)


def has_function(path, name):
    """Whether the ELF file at path has a function called name."""
    from probelib import elf
    try:
        return elf.function_offset(path, name) is not None
    except Exception:   # OSError, ELFError and what a corrupt file raises
        return False


def uprobe(bpf, fn_name, path, sym, pid, ret=False):
    """A uprobe (ret=False) or uretprobe on function sym of the ELF file at
    path, for process pid, registered as bpftrace and libbpf register it."""
    from probelib import elf
    offset = elf.function_offset(path, sym)
    if offset is None:
        raise OSError(0, "no function %s in %s" % (sym, path))
    compat.attach_uprobe(bpf, fn_name, path, sym, offset, pid, ret)


def mode_text(text, per_io):
    """The part of an I/O tool's program that its mode loads: what comes
    before its io__batch function (per I/O), or all but its io__submit
    and io__done functions (batches).  Those read arguments of probes
    the mode does not attach, whose readers usdt_context() does not
    define, and clang 16 and later refuse a call to an undeclared
    function (an implicit declaration was a warning before)."""
    batch = text.index("/* blktgt:io__batch")
    return text[:batch] if per_io else \
        text[:text.index("/* blktgt:io__submit")] + text[batch:]


# bpf(2)'s number, which Python has no name for; on an architecture not
# here the probe below is not made, and a kernel without the exchange
# refuses the batch program in one line instead (probekit_bcc_load).
_NR_BPF = {"x86_64": 321, "aarch64": 280, "riscv64": 280, "loongarch64": 280,
           "ppc64le": 361, "s390x": 351, "i686": 357, "armv7l": 386}
_BPF_PROG_LOAD = 5
_BPF_PROG_TYPE_SOCKET_FILTER = 1
# r1 = 0; *(u64 *)(r10 - 8) = r1; r1 = 1;
# r1 = atomic_xchg((u64 *)(r10 - 8), r1); r0 = 0; exit
_XCHG_PROG = ((0xb7, 0x01, 0, 0), (0x7b, 0x1a, -8, 0), (0xb7, 0x01, 0, 1),
              (0xdb, 0x1a, -8, 0xe1), (0xb7, 0x00, 0, 0), (0x95, 0x00, 0, 0))


def kernel_has_atomic_xchg():
    """Whether this kernel's verifier takes BPF's atomic exchange
    (BPF_XCHG, Linux 5.12), which IO_BATCH_BUF_C claims a CPU's batch
    buffer with (__sync_lock_test_and_set): a six-instruction program is
    loaded and closed, as bpftool feature probe does.  5.10 refuses such
    an instruction with EINVAL; any other failure (no privilege, an
    architecture not in _NR_BPF) answers yes, and the tool's own load
    then says what is wrong."""
    import ctypes as ct
    import platform
    import struct
    nr = _NR_BPF.get(platform.machine())
    if nr is None:
        return True
    insns = b"".join(struct.pack("<BBhi", *i) for i in _XCHG_PROG)
    code = ct.create_string_buffer(insns, len(insns))
    lic = ct.create_string_buffer(b"GPL")
    # union bpf_attr's prog-load fields: prog_type, insn_cnt, insns,
    # license; the rest zero.
    attr = ct.create_string_buffer(128)
    struct.pack_into("<IIQQ", attr, 0, _BPF_PROG_TYPE_SOCKET_FILTER,
                     len(_XCHG_PROG), ct.addressof(code), ct.addressof(lic))
    libc = ct.CDLL(None, use_errno=True)
    libc.syscall.restype = ct.c_long
    fd = libc.syscall(ct.c_long(nr), ct.c_long(_BPF_PROG_LOAD), attr,
                      ct.c_uint(len(attr)))
    if fd >= 0:
        os.close(fd)
        return True
    return ct.get_errno() != errno.EINVAL


# Said when an io__batch tool reads per I/O because of the kernel, as
# libbpf/tool_attach.c's say_batch_fallback() says it of bpf_loop().
BATCH_FALLBACK = "kernel lacks BPF atomic exchange (Linux 5.12): reading as --per-io does"


def batch_or_per_io(tool, args):
    """An io__batch tool's mode: args.per_io set, and said in one line on
    stderr, when this kernel cannot load the batch reader
    (kernel_has_atomic_xchg)."""
    if args.per_io or getattr(args, "ebpf", False) or kernel_has_atomic_xchg():
        return
    sys.stdout.flush()
    sys.stderr.write("%s: %s\n" % (command(tool), BATCH_FALLBACK))
    args.per_io = True


# io__batch's fixed sizes, from specs/limits.toml as include/io_batch.h's;
# the record itself comes from the traced binary's DWARF (io_batch_c).
IO_BATCH_MAX = spec.limits()["IO_BATCH_MAX"]
BDEV_NAME_LEN = spec.limits()["BDEV_NAME_LEN"]
BDEV_INDEX_MAX = spec.limits()["BDEV_INDEX_MAX"]
# The arguments of an io__batch that passes the merge counts, its last,
# bdevs_merged (include/io_batch.h); a service's site may pass only the
# first five.
IO_BATCH_MERGES_NARGS = 6


def io_batch_merges_cflags(usdt, by_bdev):
    """IO_BATCH_BUF_C's define for io_batch_merges(): on when the tool
    labels records by bdev and every io__batch site passes the counts."""
    on = by_bdev and usdt.nargs.get("blktgt:io__batch", 0) >= \
        IO_BATCH_MERGES_NARGS
    return ["-DIO_BATCH_MERGES=%d" % on]


# io__batch's records, copied with one read into a per-CPU buffer (a batch
# is larger than the BPF stack) that one run owns at a time: a uprobe's
# program is preemptible on a kernel that preempts "full" or "lazy", and
# the kernel makes no recursion check there (libbpf/io_batch.bpf.h, whose
# map and flag these are, by the same names).  Needs io_batch_c()'s
# struct: the histogram tools' only.
IO_BATCH_BUF_C = r"""
struct io_batch_buf {
    struct pk_io_rec recs[IO_BATCH_MAX];
    u64 busy;   /* nonzero from io_batch_take() to io_batch_release() */
};
BPF_PERCPU_ARRAY(io_batch_scratch, struct io_batch_buf, 1);
/* What hits could not read, by reason (libbpf's blktgt_io.bpf.h's
 * hist_busy, hist_unreadable, hist_bad_count), which HistReport says
 * apart from hist_dropped's, whose reason is a full table: by slot, the
 * records of hits that found the buffer another run's; records whose
 * read failed; hits (not records) whose count could not be read or was
 * out of range (io_batch_bad()). */
enum { IO_BATCH_BUSY, IO_BATCH_UNREADABLE, IO_BATCH_BAD_COUNT, IO_BATCH_NLOST };
BPF_ARRAY(io_batch_lost, u64, IO_BATCH_NLOST);

static __always_inline void io_batch_lose(u32 why, u64 n)
{
    u64 *c = io_batch_lost.lookup(&why);

    if (c)
        __sync_fetch_and_add(c, n);
}

/* A hit whose record count (the caller's) is not in 1..IO_BATCH_MAX, or
 * could not be read (bpf_usdt_readarg() leaves it 0): it is counted, as
 * its records, how many unknown, cannot be. */
static __always_inline void io_batch_bad(void)
{
    io_batch_lose(IO_BATCH_BAD_COUNT, 1);
}

/* This CPU's buffer, holding the batch's n records (1..IO_BATCH_MAX)
 * read from recs, owned by this run until io_batch_release(); NULL when
 * they cannot be read, and the n records are counted dropped: in
 * slot IO_BATCH_BUSY when a run this one preempted owns the buffer,
 * else (the read failed) in IO_BATCH_UNREADABLE. */
static __always_inline struct io_batch_buf *io_batch_take(u64 n, u64 recs)
{
    u32 zero = 0;
    struct io_batch_buf *b = io_batch_scratch.lookup(&zero);

    if (!b) {
        io_batch_lose(IO_BATCH_UNREADABLE, n);
        return 0;
    }
    /* One instruction: of two runs on this CPU exactly one sees 0. */
    if (__sync_lock_test_and_set(&b->busy, 1)) {
        io_batch_lose(IO_BATCH_BUSY, n);
        return 0;
    }
    if (bpf_probe_read_user(b->recs, n * sizeof(struct pk_io_rec),
                            (void *)recs)) {
        b->busy = 0;
        io_batch_lose(IO_BATCH_UNREADABLE, n);
        return 0;
    }
    return b;
}

/* What io__batch's name table merges, as the last hit that passed them
 * said (libbpf's blktgt_io.bpf.h's hist_bdevs_merged), by slot:
 * bdevs_cut, bdevs_other, then 1 once a hit has; HistReport says them.
 * Read only with IO_BATCH_MERGES (io_batch_merges_cflags()). */
enum { IO_BATCH_MERGE_CUT, IO_BATCH_MERGE_OTHER, IO_BATCH_MERGE_KNOWN,
       IO_BATCH_MERGE_SLOTS };
BPF_ARRAY(io_batch_merged, s64, IO_BATCH_MERGE_SLOTS);

/* Keep bdevs_merged (bdevs_cut | bdevs_other << 32), which the probe's
 * function read (under #if IO_BATCH_MERGES, in that function: BCC's
 * rewrite of bpf_usdt_readarg() takes its name, and refuses the call
 * inside a macro). */
static __always_inline void io_batch_merges(u64 merged)
{
    u32 k;
    s64 *v;

    k = IO_BATCH_MERGE_CUT;
    v = io_batch_merged.lookup(&k);
    if (v)
        *v = (u32)merged;
    k = IO_BATCH_MERGE_OTHER;
    v = io_batch_merged.lookup(&k);
    if (v)
        *v = merged >> 32;
    k = IO_BATCH_MERGE_KNOWN;
    v = io_batch_merged.lookup(&k);
    if (v)
        *v = 1;
}

/* The index after i in a walk of a batch's n records:
 *     for (u64 i = 0; i < n; i = io_batch_next(i))
 * The empty asm makes i opaque to clang, so that it cannot count the
 * loop down from n in a register of its own with a pointer stepping
 * through the records, as LLVM 14 (BCC 0.26's) does.  A verifier that
 * keeps the count at [0, 255] on the "not zero" side of "count == 0"
 * (6.1's; 6.18 loaded that loop) never sees the count end, walks the
 * pointer past the buffer and refuses the program ("invalid access to
 * map value", Permission denied).  Counted up and
 * compared with n, i is a constant in each pass the verifier walks, and
 * n's bound (1..IO_BATCH_MAX) ends the walk. */
static __always_inline u64 io_batch_next(u64 i)
{
    i++;
    __asm__ __volatile__("" : "+r"(i));
    return i;
}

/* After the run's last read of b's records. */
static __always_inline void io_batch_release(struct io_batch_buf *b)
{
    __asm__ __volatile__("" ::: "memory");
    *(volatile u64 *)&b->busy = 0;
}
"""


def io_batch_c(tool, target):
    """C that reads io__batch's records: struct pk_io_rec, made from the
    DWARF of target's executable by the generator probekit-structs uses,
    and io_type_name(dst, type), which writes an I/O type's name as
    io__submit's type_name would give it.  Those names are enum
    bdev_io_type's, lowercased without their common prefix, as
    include/blktgt_states.h spells them (BDEV_IO_READ, "read")."""
    from probelib import cdefs, dwarf
    try:
        types = dwarf.Types(target.exe)
    except dwarf.NoDebugInfo:
        die(tool, "%s has no debug information (DWARF) to read io__batch's "
            "records with; use --per-io" % target.exe)
    except Exception:   # OSError, ELFError and what a corrupt file raises
        die(tool, "cannot read the DWARF of PID %d (%s)"
            % (target.pid, target.exe))
    try:
        struct = cdefs.struct_defs(types, ["io_rec"])
        enum = cdefs.find(types, "bdev_io_type", ("enum",))
        if enum is None:
            raise cdefs.DefsError("no enum 'bdev_io_type'")
        names = [(n, v) for n, v in enum.values if not n.endswith("_COUNT")]
    except cdefs.DefsError as e:
        die(tool, "%s: %s; use --per-io" % (target.exe, e))
    finally:
        types.close()
    prefix = os.path.commonprefix([n for n, _ in names])
    cases = "".join('    case %d: __builtin_memcpy(dst, "%s", %d); break;\n'
                    % (v, n[len(prefix):].lower(), len(n) - len(prefix) + 1)
                    for n, v in names)
    return (struct + "\nstatic __always_inline void io_type_name(char *dst, "
            "u32 type)\n{\n    switch (type) {\n" + cases +
            '    default: __builtin_memcpy(dst, "?", 2); break;\n    }\n}\n')

