# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_pairs: the in-flight table of a bcc/ tool that pairs a
START with its DONE, kept honest as libbpf/pair_state.bpf.h keeps the
libbpf twins' (libbpf/pair_state.h says what is counted and why): a START
that finds the table full is dropped and counted; the STARTs of a thread
or process that exits are reclaimed and counted.  The counts reach the
output through probekit_bcc.PairReport.

A tool's BPF text includes C_TEXT (after probekit_bcc_load.BPF_COMMON),
keys its table by a struct that starts with u32 tgid, u32 tid, and:
  - inserts a START only when pair_mark(tgid) returns 0, then passes the
    update's result to pair_inserted();
  - defines RAW_TRACEPOINT_PROBE(sched_process_exit) that returns
    unless pair_tgids has the tgid, deletes the exiting thread's key
    (thread-keyed tables; pair_count(PAIR_RECLAIMED) when there was one)
    and ends with pair_exit(PAIR_GROUP_DEAD(ctx), tgid, BY_THREAD).
User space compiles with cflags() and hands a Sweeper to probekit_bcc.run().

How a process's death is seen, measured here on BCC 0.26 and Linux 6.18:
the raw tracepoint (no tracefs, which is mode 0700: a user with CAP_BPF
and CAP_PERFMON, or CAP_SYS_ADMIN alone, cannot read it) passes the task
and, from Linux 6.16, group_dead as ctx->args[1]; cflags() detects it in
the tracepoint's format when tracefs is readable, else in the kernel's
BTF (readable by all), as libbpf/tool_attach.c does.  BCC's task_struct comes from
its kernel headers (6.1 here), whose layout is not the running kernel's,
so task->signal->live cannot be read reliably; and bpf_for_each_map_elem()
takes the map itself, which BCC 0.26 passes only to the map methods it
rewrites, so BPF cannot walk the table either.  BPF therefore notes the
death and its time in pair_dead, and the Sweeper, from the output loop
every tick, deletes the dead process's entries that are older than its
death: an entry of a later process given the same PID is newer, so PID
reuse cannot lose it.  Without group_dead, the Sweeper treats a process
as dead when /proc has no entry for it.
"""

import os
import time

import probekit_bcc_args as cli
from probelib import toolspec

# Processes with STARTs in a table at once, and --max-inflight's largest:
# specs/limits.toml, as libbpf/pair_state.h's.
PAIR_TGIDS_MAX = toolspec.limits()["PAIR_TGIDS_MAX"]
PAIR_INFLIGHT_LIMIT = toolspec.limits()["PAIR_INFLIGHT_LIMIT"]
PAIR_DROPPED, PAIR_RECLAIMED = 0, 1     # enum pair_count
EXIT_FORMATS = ("/sys/kernel/tracing/events/sched/sched_process_exit/format",
                "/sys/kernel/debug/tracing/events/sched/sched_process_exit/"
                "format")

C_TEXT = r"""
#define PAIR_DROPPED 0
#define PAIR_RECLAIMED 1
BPF_PERCPU_ARRAY(pair_counts, u64, 2);
BPF_HASH(pair_tgids, u32, u8, PAIR_TGIDS_MAX);  /* processes with STARTs */
BPF_HASH(pair_dead, u32, u64, PAIR_TGIDS_MAX);  /* tgid -> death, ns */

static __always_inline void pair_count(int what)
{
    u64 *n = pair_counts.lookup(&what);

    /* Atomic though per CPU: libbpf/pair_state.bpf.h's pair_count(). */
    if (n)
        __sync_fetch_and_add(n, 1);
}

/* 0 when tgid may insert a START; else it is dropped, and counted (any
 * refusal: a START of a process left unmarked would never be reclaimed). */
static __always_inline int pair_mark(u32 tgid)
{
    u8 one = 1;
    int err;

    if (pair_tgids.lookup(&tgid))
        return 0;
    err = pair_tgids.update(&tgid, &one);
    if (err) {
        pair_count(PAIR_DROPPED);
        return err;
    }
    return 0;
}

/* An update of the in-flight table returned err: count any refusal, a
 * full table's (-E2BIG preallocated, -ENOMEM otherwise) or a bucket
 * locked by a program this CPU interrupted (-EBUSY): the START is as
 * lost either way. */
static __always_inline void pair_inserted(int err)
{
    if (err)
        pair_count(PAIR_DROPPED);
}

/* Whether the exiting thread is its process's last: the raw
 * tracepoint's own argument, or, without one, never (the Sweeper looks
 * in /proc).  args[1] is read only when the kernel passes it: an access
 * past its arguments fails the attach. */
#ifdef HAVE_GROUP_DEAD
#define PAIR_GROUP_DEAD(ctx) ((ctx)->args[1] != 0)
#else
#define PAIR_GROUP_DEAD(ctx) 0
#endif

/* A thread of tgid has exited, the last one when group_dead: then the
 * Sweeper deletes what the process left (BPF cannot walk the table). */
static __always_inline void pair_exit(int group_dead, u32 tgid, int by_thread)
{
    u64 now = bpf_ktime_get_ns();

    if (!group_dead)
        return;
    if (!by_thread)
        pair_dead.update(&tgid, &now);
    pair_tgids.delete(&tgid);
}
"""


def _group_dead_in_btf():
    """Whether the kernel's BTF says the raw tracepoint passes group_dead:
    its prototype btf_trace_sched_process_exit is (void *, struct
    task_struct *[, bool group_dead]).  Read through libbpf, which BCC
    itself links; False when no BTF or prototype can be read."""
    import ctypes

    class BtfType(ctypes.Structure):
        _fields_ = [("name_off", ctypes.c_uint32), ("info", ctypes.c_uint32),
                    ("type", ctypes.c_uint32)]

    BTF_KIND_PTR, BTF_KIND_TYPEDEF, BTF_KIND_FUNC_PROTO = 2, 8, 13
    try:
        lib = ctypes.CDLL("libbpf.so.1")
    except OSError:
        return False
    lib.btf__load_vmlinux_btf.restype = ctypes.c_void_p
    lib.btf__free.argtypes = [ctypes.c_void_p]
    lib.btf__find_by_name_kind.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                           ctypes.c_uint32]
    lib.btf__type_by_id.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.btf__type_by_id.restype = ctypes.POINTER(BtfType)
    btf = lib.btf__load_vmlinux_btf()
    if not btf:
        return False
    try:
        tid = lib.btf__find_by_name_kind(
            btf, b"btf_trace_sched_process_exit", BTF_KIND_TYPEDEF)
        for kind in (BTF_KIND_TYPEDEF, BTF_KIND_PTR, BTF_KIND_FUNC_PROTO):
            t = lib.btf__type_by_id(btf, tid) if tid > 0 else None
            if not t or (t[0].info >> 24) & 0x1f != kind:
                return False
            tid = t[0].type
        return t[0].info & 0xffff >= 3
    finally:
        lib.btf__free(btf)


def group_dead():
    """Whether this kernel's sched_process_exit passes group_dead."""
    for path in EXIT_FORMATS:
        try:
            with open(path) as f:
                return " group_dead;" in f.read(1 << 16)
        except OSError:
            continue
    return _group_dead_in_btf()


def cflags(max_inflight):
    return ["-DMAX_INFLIGHT=%d" % max_inflight,
            "-DPAIR_TGIDS_MAX=%d" % PAIR_TGIDS_MAX] + \
        (["-DHAVE_GROUP_DEAD"] if group_dead() else [])


def add_option(p):
    """--max-inflight, as specs/common.toml declares it."""
    cli.add_common(p, "max-inflight")


class Sweeper:
    """Deletes the in-flight entries of dead processes (see the top of
    this file); counts them as reclaimed.  table is the in-flight hash,
    its keys starting with tgid, its values a START's time in ns (when()
    reads it from a value otherwise).  A tool with several such tables
    names the others in more, as (table, when) pairs."""

    def __init__(self, bpf, table, when=lambda v: v.value, more=()):
        self.bpf, self.table, self.when = bpf, bpf[table], when
        self.tables = [(self.table, when)] + [(bpf[t], w) for t, w in more]
        self.dead, self.tgids = bpf["pair_dead"], bpf["pair_tgids"]
        self.by_proc = not group_dead()
        self.reclaimed = 0

    def _gone(self):
        """{tgid: death ns} of processes seen dead from user space."""
        now = time.monotonic_ns()      # bpf_ktime_get_ns()'s clock
        out = {}
        for k in list(self.tgids.keys()):
            if not os.path.exists("/proc/%d" % k.value):
                out[k.value] = now
                try:
                    del self.tgids[k]
                except KeyError:
                    pass
        return out

    def settle(self, pid, timeout=5.0):
        """Wait until every thread of the traced process pid has exited:
        /proc shows its leader a zombie while other threads still run
        their exit, and the last one's RAW_TRACEPOINT_PROBE is what tells
        the Sweeper the process is dead.  A pidfd turns readable only once
        the whole thread group has exited (libbpf's twin polls the same).
        """
        import select
        if not pid:
            return          # -b PATH: no one process
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return          # reaped already (so exited), or no pidfd
        try:
            select.select([fd], [], [], timeout)
        finally:
            os.close(fd)

    def sweep(self):
        dead = {k.value: v.value for k, v in self.dead.items()}
        if self.by_proc:
            dead.update(self._gone())
        if not dead:
            return
        for table, when in self.tables:
            for k, v in list(table.items()):
                death = dead.get(k.tgid)
                if death is not None and when(v) <= death:
                    try:
                        del table[k]
                        self.reclaimed += 1
                    except KeyError:
                        pass        # its DONE came meanwhile
        for tgid, death in dead.items():
            k = self.dead.Key(tgid)
            v = self.dead.get(k)
            if v is not None and v.value == death:
                del self.dead[k]
