# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_hist: the bcc/ tools' histograms and their output, text
and JSON, one interval at a time (as libbpf/histogram.c prints them;
doc/output.md is the format both follow)."""

import datetime
import json
import time

LINEAR_SLOTS = 1000     # buckets of a linear histogram; the last is open
LOG2_SLOTS = 65         # bpf_log2l()'s values, 0 to 64


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


def iso_stamp():
    """Now as RFC 3339 local time with milliseconds and the zone's offset,
    "2026-11-28T21:50:02.123+00:00" (libbpf/histogram.c's iso_stamp())."""
    return datetime.datetime.now().astimezone().isoformat(
        timespec="milliseconds")


class Output:
    """Prints one interval's histograms as text or JSON (doc/output.md
    has both formats)."""

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
