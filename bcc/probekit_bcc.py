# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc: the bcc/ tools' output: the histogram printers and the
output loop ([interval [count]], -d, Ctrl-C, target exit).  What else the
tools share has a module each: probekit_bcc_args (options, errors,
--version), probekit_bcc_target (the traced process), probekit_bcc_probes
(its USDT probes and functions), probekit_bcc_load (compile, load,
attach), with probelib.bcc_compat (BCC versions' workarounds) below.

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

  An interval in which every histogram is empty (zero hits) prints the
  header of the tool's first histogram, narrow form, and a line saying
  nothing was counted, "0 " and the spec's "counts" (toolspec.EMPTY):

       usecs               : count     distribution
  0 I/Os

  With -T a line "HH:MM:SS" precedes each interval's output; successive
  intervals are separated by a blank line.

  A tool that pairs a START with its DONE (usdtlat) then reports the
  STARTs it lost in that interval, each line only when N > 0:

  N starts dropped (table full)
  N starts reclaimed (thread or process exited)

  A dropped START found the in-flight table full (--max-inflight raises
  it), so a DONE went unmatched and the histogram misses that pair; a
  reclaimed one belonged to a thread or process that exited, so its DONE
  can never come.  probekit_bcc_pairs and libbpf/pair_state.h say more.

  A tool with a histogram per key (iolatency, iosize, qdepth, nbdtime,
  rpclat)
  keeps --max-keys keys per interval; a value whose key finds the map full
  is dropped, and said after the histograms (and any lost STARTs) when
  N > 0, in the noun of the tool's spec (toolspec.hist_noun(); "I/Os",
  nbdtime's "values", rpclat's "RPCs"):

  N I/Os dropped (table full)

  iolatency and iosize, which read io__batch, then say what they could
  not read of it (probekit_bcc_probes' IO_BATCH_BUF_C), no table being
  full, each when N > 0: the records of batches that found the CPU's
  batch buffer held by a run they preempted (a kernel that preempts
  "full" or "lazy"); the records of batches whose memory could not be
  read (a service's batch paged out or unmapped); and hits (batches, not
  records) whose count could not be read or was out of range, so that
  how many records they lost is unknown:

  N I/Os dropped (batch buffer held by a preempted run)
  N I/Os dropped (unreadable batch)
  N batches dropped (count unreadable or out of range)

  The words of each such line are toolspec.LOSSES'.

  With -B, iolatency and iosize label a record by its bdev's name in
  io__batch's name table, where a name is cut to 31 characters and the
  live bdevs past its 255 slots share "(other)"; the last batch says how
  many bdevs each merges (include/io_batch.h), and each count that is not
  0 ends the output in one line (specs/limits.toml's [message.BDEVS_*]):

  N bdevs share a label with another (bdev names cut to 31 characters)
  N bdevs labelled (other) (past 255 live bdevs in the name table)

--json prints one JSON object per interval, on one line:

  {"tool": "iolatency", "pid": 1234,
   "ts": "2026-11-28T21:50:02.123+00:00",   (always: when the interval
                                            ended, local time, RFC 3339)
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
  out, so zero hits give "histograms": [].  A tool may add fields to a
  histogram object (funclat's "negative"), and then a histogram is kept
  while such a field is non-zero.  A pair tool adds, always, after
  "histograms":

   "starts": {"dropped": N, "reclaimed": M}   (this interval's, as above)

  and a tool with a histogram per key (--max-keys) adds, always, after
  those, of the values whose key found the map full (text: "N I/Os
  dropped (table full)", only when N > 0):

   "I/Os": {"dropped": N}                    (this interval's)

  and iolatency and iosize, always, what they could not read of batches
  (as above; all 0 with --per-io):

   "I/Os": {"dropped": N, "busy": M, "unreadable": K},
   "batches": {"bad_count": B}

  and, with -B in batch mode, once a batch has said it, how many live
  bdevs share a label (as below):

   "bdevs_merged": {"name_cut": N, "table_full": M}

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

import datetime
import errno
import json
import os
import signal
import sys
import time

import probekit_bcc_load as loader
from probekit_bcc_args import EARLY_SIGINT, command
from probelib import toolspec as spec

LINEAR_SLOTS = 1000     # buckets of a linear histogram; the last is open
LOG2_SLOTS = 65         # bpf_log2l()'s values, 0 to 64
TICK = 0.1              # how often the loop checks for Ctrl-C and the target
MAX_RATE_WINDOW = 1.0   # --max-rate: seconds the hit rate is measured over


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


def header(scale, val_type, wide=False):
    """A histogram's header line; wide: the log2 form for over 32 rows."""
    if scale == "linear":
        return "     %-13s : count     distribution" % val_type
    if wide:
        return "               %-29s : count     distribution" % val_type
    return "     %-19s : count     distribution" % val_type


def format_log2(rows, val_type):
    if not rows:
        return []
    vmax = max(c for _, _, c in rows)
    out = [header("log2", val_type, wide=len(rows) > 32)]
    if len(rows) <= 32:
        body, w = "%10d -> %-10d : %-8d |%-*s|", 40
    else:
        body, w = "%20d -> %-20d : %-8d |%-*s|", 20
    for low, high, c in rows:
        out.append(body % (low, high, c, w, _stars(c, vmax, w)))
    return out


def format_linear(rows, val_type):
    if not rows:
        return []
    vmax = max(c for _, _, c in rows)
    out = [header("linear", val_type)]
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


# --- the output loop ------------------------------------------------------

def iso_stamp():
    """Now as RFC 3339 local time with milliseconds and the zone's offset,
    "2026-11-28T21:50:02.123+00:00" (libbpf/histogram.c's iso_stamp())."""
    return datetime.datetime.now().astimezone().isoformat(
        timespec="milliseconds")


class Output:
    """Prints one interval's histograms as text or JSON (see the top of
    this file for both formats)."""

    def __init__(self, tool, pid, args, head=None):
        self.tool = tool
        self.head = head if head is not None else {"pid": pid}
        self.json, self.timestamp = args.json, args.timestamp
        # "0 I/Os", from the spec (probekit_bcc_spec.parser): see emit().
        self.empty = getattr(args, "empty", None)
        self.n = 0
        # None, or called with the interval's JSON object or text lines
        # once the histograms are in, to add its own (PairReport).
        self.trailer = None

    def start(self):
        """The JSON object's leading fields, or the text's leading lines,
        of one interval."""
        if self.json:
            obj = {"tool": self.tool}
            obj.update(self.head)
            obj["ts"] = iso_stamp()
            return obj
        lines = []
        if self.n:
            lines.append("")
        if self.timestamp:
            lines.append("%-8s" % time.strftime("%H:%M:%S"))
        self.n += 1
        return lines

    def finish(self, obj_or_lines):
        if self.trailer:
            self.trailer(self.json, obj_or_lines)
        if self.json:
            print(json.dumps(obj_or_lines), flush=True)
        elif obj_or_lines:
            print("\n".join(obj_or_lines), flush=True)

    def emit(self, hists):
        """Print hists, leaving out the empty ones.  When none is left,
        the text is the first one's header and the line self.empty (an
        interval that saw nothing says so), the JSON an empty
        "histograms" list: so a collector returns at least one Hist, one
        without counts when it read none."""
        first = hists[:1]
        hists = [h for h in hists if h.shown()]
        if self.json:
            obj = self.start()
            obj["histograms"] = [h.json() for h in hists]
            self.finish(obj)
            return
        lines = self.start()
        for i, h in enumerate(hists):
            if h.key:
                lines.append("")
                lines.append(", ".join("%s = %s" % kv for kv in h.key))
            elif i:
                lines.append("")
            lines += h.text()
            for k, v in h.extra.items():
                lines.append("%s: %s" % (k, v))
        if not hists and self.empty:
            lines += [header(h.scale, h.unit) for h in first] + [self.empty]
        self.finish(lines)


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
    interval, as the top of this file shows them; the counts are BPF's
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


def run(tool, target, args, collect, what, bpf=None, out=None, ready=None,
        pairs=None, hists=False, batch=None, merges=False):
    """The tool's main loop.  Prints "Tracing ... Hit Ctrl-C to end." (the
    readiness line: the caller has loaded and attached everything; ready
    replaces its text), then every interval calls collect() (which takes
    what the maps gained: drain(), Delta) and prints what it
    returns through out.emit() (by default
    an Output, printing [Hist]).  Ends after count intervals, after -d seconds, on Ctrl-C
    or SIGTERM (printing what was collected, exit 0), or when the target
    exits (the same, plus a line on stderr saying so).  With --max-rate,
    bpf (loaded with count_hits) is checked every MAX_RATE_WINDOW seconds;
    past the budget it is detached first, so the histograms are final and
    the target stops paying at once, then they are printed with one line
    on stderr saying why tracing ended, exit 0 (the guard did what was
    asked), as the libbpf tools do.  pairs: a pair tool's
    probekit_bcc_pairs.Sweeper, run every tick and reported after each
    interval's histograms (PairReport).  hists: true for a histogram
    tool, whose HIST_KEYS_C drops are reported after them (HistReport) as
    values of args.hist_noun (the spec's, "I/Os"); batch, for one that
    reads io__batch (iolatency, iosize), whether this run does (not with
    --per-io): its busy drops are reported too (0 when it does not);
    merges, whether this run labels io__batch's records by bdev (-B): what
    the name table merges is reported too."""
    stop = []

    def on_signal(signum, frame):
        stop.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    if EARLY_SIGINT:            # Ctrl-C came before tracing started
        sys.stdout.flush()
        os._exit(130)

    if out is None:
        out = Output(tool, target.pid, args)
    trailers = []
    if pairs is not None:
        trailers.append(PairReport(bpf, pairs))
    if hists:
        trailers.append(HistReport(bpf, args.hist_noun, batch, merges))
    if trailers:
        out.trailer = lambda j, o: [t(j, o) for t in trailers]
    msg = ready or "Tracing %s of PID %d (%s)... Hit Ctrl-C to end." % (
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
    budget = getattr(args, "max_rate", None)
    check = now + MAX_RATE_WINDOW if budget else None
    last_check, last_hits = now, 0
    while True:
        now = time.monotonic()
        due = [t for t in (end, next_out, check) if t is not None]
        if stop or (end is not None and now >= end):
            break
        if check is not None and now >= check:
            hits = loader.hits(bpf)
            rate = (hits - last_hits) / (now - last_check)
            if rate > budget:
                loader.detach_all(bpf)
                total = loader.hits(bpf)
                out.emit(collect())
                sys.stdout.flush()
                sys.stderr.write("%s: %.0f probe hits/s is over --max-rate %d; "
                                 "detached after %d hits\n"
                                 % (command(tool), rate, budget, total))
                return 0
            last_check, last_hits = now, hits
            check = now + MAX_RATE_WINDOW
            continue
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
        if pairs is not None:
            pairs.sweep()
        time.sleep(min([TICK] + [max(0.0, t - now) for t in due]))
    if gone and pairs is not None:
        pairs.settle(target.pid)    # its last thread's exit, first
    out.emit(collect())
    if gone:
        sys.stderr.write("%s: PID %d (%s) exited; tracing ended\n"
                         % (command(tool), target.pid, target.comm))
    return 0

