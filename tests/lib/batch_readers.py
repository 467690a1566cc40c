# SPDX-License-Identifier: BSD-2-Clause
"""Every reader of io__batch, by name, and the scratch buffer they share."""

import json
import os
import re
import subprocess
import sys

import probekit
from histtools import Tool, by_key, parse, total
from probekit import ROOT, Trace


# --- the readers, by name -------------------------------------------------------------------

class HistTool:
    """A libbpf or bcc/ histogram tool split per bdev (-B)."""

    def __init__(self, kind, name, per_io, *opts):
        self.args = (kind, name, "-B", *opts) + (("--per-io",) if per_io else ())

    def start(self, pid):
        kind, name, *opts = self.args
        self.tool = Tool(kind, name, pid, *opts).start()
        return self

    def stop(self):
        self.lines = self.tool.stop()
        return {k[0]: total(h)
                for k, h in by_key(parse(self.lines), "bdev").items()}


BT_HEAD = re.compile(r"^@(\w+)\[([^,\]]*)(?:, [^\]]*)?\]:\s*$")
BT_BUCKET = re.compile(r"^\[[^\]]*[\])]\s+(\d+) \|")
BT_VALUE = re.compile(r"^@(\w+)\[([^,\]]*)(?:, [^\]]*)?\]: (\d+)$")


class BtScript:
    """A bt/ script; its histograms (or, for iops, its @iops_total
    counters) summed per bdev, the first key."""

    def __init__(self, script):
        self.script = script

    def start(self, pid):
        self.trace = Trace(pid, [os.path.join(ROOT, "bt", self.script)]).start()
        return self

    def stop(self):
        lines = self.trace.stop()
        assert self.trace.proc.returncode == 0, "\n".join(lines)
        assert not any("ERROR" in l or "WARNING" in l for l in lines), \
            "\n".join(lines)
        self.lines = lines
        out, key = {}, None
        for line in lines:
            m = BT_VALUE.match(line)
            if m and m.group(1) == "iops_total":
                out[m.group(2)] = out.get(m.group(2), 0) + int(m.group(3))
                continue
            m = BT_HEAD.match(line)
            if m:
                key = m.group(2)
                continue
            b = BT_BUCKET.match(line)
            if b and key is not None:
                out[key] = out.get(key, 0) + int(b.group(1))
            elif not b:
                key = None
        return out


READERS = {}
for _kind in ("libbpf", "bcc"):
    for _name in ("iolatency", "iosize"):
        for _per_io in (False, True):
            READERS[f"{_kind}-{_name}-{'per-io' if _per_io else 'batch'}"] = \
                (lambda k=_kind, n=_name, p=_per_io: HistTool(k, n, p))
for _per_io, _batch in (("iolat.bt", "iolat_batch.bt"),
                        ("iosize.bt", "iosize_batch.bt"),
                        ("iops.bt", "iops_batch.bt")):
    READERS[_per_io] = lambda s=_per_io: BtScript(s)
    READERS[_batch] = lambda s=_batch: BtScript(s)


# --- the scratch buffer they share --------------------------------------------

SCRATCH = "io_batch_scratch"


def bpftool(*args):
    p = subprocess.run(["bpftool", "-j", *args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stdout.decode(errors="replace")
    return json.loads(p.stdout) if p.stdout.strip() else None


def scratch_map(pid):
    """The io_batch_scratch map process pid holds, a libbpf tool or a bcc/
    one's Python (its fdinfo names the maps' ids; the kernel keeps 15
    characters of a map's name)."""
    found = []
    fds = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fds):
        try:
            with open(os.path.join(fds, fd)) as f:
                info = dict(ln.split(":", 1) for ln in f.read().splitlines()
                            if ":" in ln)
        except FileNotFoundError:
            continue
        if "map_id" not in info:
            continue
        m = bpftool("map", "show", "id", info["map_id"].strip())
        if SCRATCH.startswith(m["name"]) and m["type"] == "percpu_array":
            found.append(m)
    assert len(found) == 1, found
    return found[0]


def set_busy(m, busy):
    """Every CPU's buffer marked taken (busy 1) or free (0): the flag,
    a u64, ends the value; bpftool gives each CPU the same value."""
    value = bytes(m["bytes_value"] - 8) + busy.to_bytes(8, sys.byteorder)
    bpftool("map", "update", "id", str(m["id"]), "key", "hex", "00", "00",
            "00", "00", "value", "hex", *(f"{b:02x}" for b in value))
