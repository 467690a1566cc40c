# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_drain: what the bcc/ tools take from their maps each
interval without losing a hit (DrainedHash, drain, Delta), the
histogram tools' bound on their keys (HIST_KEYS_C), and what a tool lost,
said after its histograms (loss_report, PairReport, HistReport), as
libbpf/tool_drain.c does for the libbpf twins (doc/output.md, "What
was lost")."""

import errno
import os
import sys
import time

from probekit_bcc_args import command
from probekit_bcc_hist import LINEAR_SLOTS, LOG2_SLOTS, Hist
from probelib import toolspec as spec


# Which table of each DrainedHash pair (NAME_a, NAME_b) the probes add
# into this interval: user space flips drain_gen (DrainedHash.take()), and
# a probe reads it once per hit, with drain_gen_now().
DRAIN_GEN_C = r"""
BPF_ARRAY(drain_gen, u32, 1);

/* int, not u32: without kernel headers (no u32) BCC 0.26 crashes on a
 * function returning an unknown type, instead of saying what is missing. */
static __always_inline int drain_gen_now(void)
{
    u32 zero = 0, *g = drain_gen.lookup(&zero);

    return g && *g;
}
"""

# How long to wait for the probes where membarrier() cannot (nohz_full).
DRAINED_HASH_WAIT_MS = spec.limits()["DRAINED_HASH_WAIT_MS"]
# membarrier(2)'s number, which Python has no name for; an architecture
# not here takes the fallback, and says so.
_NR_MEMBARRIER = {"x86_64": 324, "aarch64": 283, "riscv64": 283,
                  "loongarch64": 283, "ppc64le": 365, "s390x": 356,
                  "i686": 375, "armv7l": 389}
_MEMBARRIER_CMD_GLOBAL = 1
_membarrier_warned = [False]


def _wait_for_probes(tool):
    """Return once no probe can still hold the old table: BPF programs of
    uprobes and tracepoints run inside rcu_read_lock(), and
    membarrier(MEMBARRIER_CMD_GLOBAL) returns after an RCU grace period
    (kernel/sched/membarrier.c).  With nohz_full CPUs it is refused
    (EINVAL): then wait DRAINED_HASH_WAIT_MS, and say so once, as
    libbpf/tool_drain.c does."""
    import ctypes as ct
    import platform
    nr = _NR_MEMBARRIER.get(platform.machine())
    err = errno.ENOSYS
    if nr is not None:
        libc = ct.CDLL(None, use_errno=True)
        if libc.syscall(nr, _MEMBARRIER_CMD_GLOBAL, 0, 0) == 0:
            return
        err = ct.get_errno()
    if not _membarrier_warned[0]:
        sys.stdout.flush()
        sys.stderr.write("%s: membarrier(MEMBARRIER_CMD_GLOBAL) failed (%s; "
                         "nohz_full CPUs?): waiting %d ms at each "
                         "interval's end instead, so a hit still running "
                         "then could be lost uncounted\n"
                         % (command(tool), os.strerror(err),
                            DRAINED_HASH_WAIT_MS))
        _membarrier_warned[0] = True
    time.sleep(DRAINED_HASH_WAIT_MS / 1000.0)


class DrainedHash:
    """A hash the probes fill and each interval empties, double-buffered
    so that no hit is lost to the emptying, as libbpf/histogram.bpf.h's
    DRAINED_HASH: NAME_a and NAME_b in the BPF C (with DRAIN_GEN_C), the
    probes adding into the one drain_gen_now() names.  take() flips
    drain_gen, waits until every probe that may still hold the old table
    has returned (_wait_for_probes), then reads the old table, which no
    probe writes any more, and empties it and the old tables of also
    (hashes that go with it, as hist_keys does with dist).  Each table
    holds the bound of one interval.  drain() takes one of these."""

    def __init__(self, bpf, tool, name, also=()):
        self.gen, self.tool, self.cur = bpf["drain_gen"], tool, 0
        self.pairs = [(bpf[n + "_a"], bpf[n + "_b"]) for n in (name, *also)]

    def open_window(self):
        """Once every probe is attached: what the probes added while they
        attached, one after another (a probe attached first counting
        alone), is emptied, so that every probe counts from one
        instant."""
        self.take_all()

    def take_all(self):
        """The old table's items of each pair (name's, then also's)."""
        old, self.cur = self.cur, 1 - self.cur
        self.gen[0] = self.gen.Leaf(self.cur)
        _wait_for_probes(self.tool)
        items = [pair[old].items() for pair in self.pairs]
        for pair in self.pairs:
            pair[old].clear()
        return items

    def take(self):
        return self.take_all()[0]


def drain(table):
    """Every (key, value) of one interval of a DrainedHash, exact: the
    probes add into the other table meanwhile.  Reading, then clearing,
    lost every count added in between (some 1,300 of 10,000,019 I/Os in
    3 s of 1 s intervals, iosize), and the kernel's lookup-and-delete
    still lost a count added into an entry just deleted (1 of
    4,242,968).  A scalar key comes back as an int, and values as ints
    (a u64 leaf is one)."""
    return [(getattr(k, "value", k), getattr(v, "value", v))
            for k, v in table.take()]


class Delta:
    """What a BPF map of u64 counters gained since the last take(), as
    {key(k): count} (the nonzero ones): an array, or a hash sized for
    every key it can hold (usdtcount -H) and so never deleted from.  An
    array has no delete, clear() after a read zeroes what the probes
    added in between, and a hash's delete races a probe that has looked
    the entry up and adds into it after (1 of 1,000,003 lost under
    load).  So the map is never written here: its running totals only
    grow, and each interval prints the difference from the previous
    read, which loses nothing (the sum of every interval is the last
    read).  key turns a map key into a hashable one."""

    def __init__(self, table, key=lambda k: k.value):
        self.table, self.key, self.seen = table, key, {}

    def take(self):
        out = {}
        for k, v in self.table.items():
            i, total = self.key(k), v.value
            d = total - self.seen.get(i, 0)
            if d:
                out[i] = d
                self.seen[i] = total
        return out


def split_table(table, fields):
    """Take a BPF hash keyed by a struct {fields..., slot} (drain()) into
    {(values...): {slot: count}}.  Byte-string fields are decoded."""
    out = {}
    for k, v in drain(table):
        vals = []
        for f in fields:
            x = getattr(k, f)
            if isinstance(x, bytes):
                x = x.decode(errors="replace")
            vals.append(x)
        d = out.setdefault(tuple(vals), {})
        d[k.slot] = d.get(k.slot, 0) + v
    return out


def keyed_hists(table, fields, labels, name, unit, scale="log2",
                width=None):
    """Hists of a table split by the given key fields, sorted by key;
    labels names each field in the output ("bdev", "type").  An empty
    table gives one Hist without counts, for the empty result's header
    (Output.emit)."""
    groups = split_table(table, fields)
    hists = []
    for vals in sorted(groups):
        hists.append(Hist(name, unit, groups[vals], scale, width,
                          zip(labels, vals)))
    return hists or [Hist(name, unit, {}, scale, width)]


# What a tool lost, by kind (enum pair_count's order, then io__batch's):
# the JSON key, and the text's words; declared once for both forms.
LOSSES = spec.LOSSES
_LOSS = {key: i for i, (key, _) in enumerate(LOSSES)}
PAIR_LOSSES = (_LOSS["dropped"], _LOSS["reclaimed"])    # enum pair_count
# IO_BATCH_BUF_C's io_batch_lost, by slot.
BATCH_LOST = (_LOSS["busy"], _LOSS["unreadable"], _LOSS["bad_count"])
HIST_LOSSES = (_LOSS["dropped"],) + BATCH_LOST[:2]      # HistReport's, of NOUN
BATCH_LOSSES = BATCH_LOST[2:]                           # of spec.BATCH_NOUN


def loss_report(json_out, obj_or_lines, noun, counts, kinds=PAIR_LOSSES):
    """Say what a tool lost in one interval, as its output ends, counts[i]
    of kind kinds[i] of LOSSES (by default the first len(counts) of
    enum pair_count's): in text "N NOUN dropped (table full)" and "N NOUN
    reclaimed (thread or process exited)", each only when N > 0; in JSON,
    always, "NOUN": {"dropped": N[, "reclaimed": M]}.  PairReport says it
    of "starts", usdtcount -S of "strings", HistReport of the histogram
    tools' noun; libbpf/tool_drain.c's loss_report() prints the same."""
    shown = {}
    for k, n in zip(kinds, counts):
        key, what = LOSSES[k]
        shown[key] = n
        if n and not json_out:
            obj_or_lines.append("%d %s %s" % (n, noun, what))
    if json_out:
        obj_or_lines[noun] = shown


class PairReport:
    """Output.trailer of a pair tool: the STARTs lost since the last
    interval, as doc/output.md shows them; the counts are BPF's
    (probekit_bcc_pairs.C_TEXT's pair_counts) plus what the Sweeper
    reclaimed."""

    def __init__(self, bpf, sweeper):
        self.counts, self.sweeper = bpf["pair_counts"], sweeper
        self.seen = [0] * len(PAIR_LOSSES)

    def __call__(self, json_out, obj_or_lines):
        self.sweeper.sweep()
        totals = [sum(self.counts[i]) for i in range(len(PAIR_LOSSES))]
        totals[1] += self.sweeper.reclaimed
        n = [t - s for t, s in zip(totals, self.seen)]
        self.seen = totals
        loss_report(json_out, obj_or_lines, "starts", n)


# A histogram tool's bound on its keys (--max-keys), in BPF C: dist holds
# a count per (key, slot), so bounding dist would drop at a number of
# (key, slot) entries; hist_keys holds each key once, with slot 0, and
# bounds the keys as libbpf/histogram.bpf.h's map of whole histograms
# does, so both forms drop the same values.  The tool's struct hist_key
# has a u64 slot; HIST_KEYS is --max-keys (hist_cflags()).
HIST_KEYS_C = DRAIN_GEN_C + r"""
BPF_F_TABLE("hash", struct hist_key, u64, dist_a, MAX_KEYS, BPF_F_NO_PREALLOC);
BPF_F_TABLE("hash", struct hist_key, u64, dist_b, MAX_KEYS, BPF_F_NO_PREALLOC);
BPF_HASH(hist_keys_a, struct hist_key, u8, HIST_KEYS);
BPF_HASH(hist_keys_b, struct hist_key, u8, HIST_KEYS);
BPF_ARRAY(hist_dropped, u64, 1);

/* n values dropped, which HistReport says. */
static __always_inline void hist_drop(u64 n)
{
    u32 zero = 0;
    u64 *d = hist_dropped.lookup(&zero);

    if (d)
        __sync_fetch_and_add(d, n);
}

/* Whether key's histogram has room in generation gen (drain_gen_now()):
 * its key is kept, or is new and fits; else the value is dropped, and
 * counted. */
static __always_inline int hist_room(struct hist_key *key, u32 gen)
{
    u64 slot = key->slot;
    u8 one = 1;
    int ok;

    key->slot = 0;
    if (gen)
        ok = hist_keys_b.lookup(key) != 0 ||
             hist_keys_b.insert(key, &one) == 0 ||
             hist_keys_b.lookup(key) != 0;
    else
        ok = hist_keys_a.lookup(key) != 0 ||
             hist_keys_a.insert(key, &one) == 0 ||
             hist_keys_a.lookup(key) != 0;
    key->slot = slot;
    if (!ok)
        hist_drop(1);
    return ok;
}

/* Count one value in this interval's dist (dist_a or dist_b: a
 * DrainedHash, with hist_keys) when its key has room.  Not
 * dist.atomic_increment(): BCC 0.26 makes that a lookup, then on a miss
 * an update with BPF_NOEXIST whose failure it ignores, so when two CPUs
 * bring the same new (key, slot) at once the second's count is lost,
 * unsaid.  lookup_or_try_init() looks up again after a refused insert;
 * NULL then means dist had no room (it is sized never to fill first),
 * and the value is counted dropped. */
static __always_inline void hist_count(struct hist_key *key)
{
    u64 zero = 0, *n;
    u32 gen = drain_gen_now();

    if (!hist_room(key, gen))
        return;
    if (gen)
        n = dist_b.lookup_or_try_init(key, &zero);
    else
        n = dist_a.lookup_or_try_init(key, &zero);
    if (n) {
        __sync_fetch_and_add(n, 1);
        return;
    }
    hist_drop(1);
}
"""


def hist_cflags(max_keys, linear=False):
    """HIST_KEYS_C's defines: the keys kept, and dist's size, room for
    every slot of every key kept (so dist never fills first)."""
    slots = LINEAR_SLOTS if linear else LOG2_SLOTS
    return ["-DHIST_KEYS=%d" % max_keys, "-DMAX_KEYS=%d" % (max_keys * slots)]


class HistReport:
    """Output.trailer's part for a histogram tool: the values HIST_KEYS_C
    dropped since the last interval, as libbpf/tool_drain.c's
    hist_report() says them ("N I/Os dropped (table full)"); with batch
    not None (a tool that reads io__batch), also what its io__batch hits
    could not read, by reason (IO_BATCH_BUF_C's io_batch_lost, read when
    batch is true; all 0 in a mode that reads no batch): records of
    batches that found the CPU's buffer held by a preempted run (LOSSES'
    "busy"), records that could not be read ("unreadable"), and hits whose
    count could not be read or was out of range ("bad_count", said of
    spec.BATCH_NOUN).  With merges (a tool that labels io__batch's
    records by bdev), also what its name table merges, as the last hit
    said (IO_BATCH_BUF_C's io_batch_merged), once a hit has: each of
    MESSAGES' BDEVS_NAME_CUT and BDEVS_OTHER when not 0, in JSON
    "bdevs_merged": {"name_cut": N, "table_full": M}."""

    def __init__(self, bpf, noun, batch=None, merges=False):
        self.dropped, self.noun = bpf["hist_dropped"], noun
        self.lost = bpf["io_batch_lost"] if batch else None
        self.kinds = HIST_LOSSES if batch is not None else HIST_LOSSES[:1]
        self.batch = batch is not None
        self.seen = [0] * (1 + len(BATCH_LOST))
        self.merged = bpf["io_batch_merged"] if merges else None

    def __call__(self, json_out, obj_or_lines):
        totals = [self.dropped[0].value] + [
            self.lost[i].value if self.lost is not None else 0
            for i in range(len(BATCH_LOST))]
        n = [t - s for t, s in zip(totals, self.seen)]
        self.seen = totals
        loss_report(json_out, obj_or_lines, self.noun, n, self.kinds)
        if self.batch:
            loss_report(json_out, obj_or_lines, spec.BATCH_NOUN,
                        n[len(self.kinds):], BATCH_LOSSES)
        if self.merged is not None:
            merges_report(json_out, obj_or_lines,
                          [self.merged[i].value for i in range(3)])


def merges_report(json_out, obj_or_lines, merged):
    """HistReport's merges: merged is io_batch_merged's bdevs_cut,
    bdevs_other and whether a hit passed them; libbpf/tool_drain.c's
    merges_report() prints the same."""
    cut, other, known = merged
    if not known:
        return
    if json_out:
        obj_or_lines["bdevs_merged"] = {"name_cut": cut, "table_full": other}
        return
    msgs, lim = spec.messages(), spec.limits()
    if cut:
        obj_or_lines.append(msgs["BDEVS_NAME_CUT"] % (
            cut, lim["BDEV_NAME_LEN"] - 1))
    if other:
        obj_or_lines.append(msgs["BDEVS_OTHER"] % (
            other, lim["BDEV_INDEX_MAX"] - 1))
