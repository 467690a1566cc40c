# SPDX-License-Identifier: BSD-2-Clause
"""A histogram tool whose map of keys is full drops, counts and says it.

iolatency and iosize keep a histogram per key (-B: per bdev), qdepth one
per bdev, in a map of
--max-keys keys (specs/limits.toml's HIST_KEYS_MAX unless given).  Here
the map holds 2 and the workload touches 3 bdevs one after the other, so
the third bdev's I/Os find no room: both forms must count them, print "97
I/Os dropped (table full)" (in JSON "I/Os": {"dropped": 97, "busy": 0,
"unreadable": 0}: no batch found its buffer busy or was unreadable), and
still count the other two bdevs' I/Os exactly.  Both forms drop at the same key
(before this, the BCC form bounded (key, slot) entries, the libbpf form
keys, and neither said what it dropped).  nbdtime's full map, over a real
NBD client, is tested in test_nbdtime.py; rpclat's, a histogram per RPC
method, over blktgt's own JSON-RPC client, below.
"""

import re

import pytest

from histtools import KINDS, Tool, by_key, json_objects, nonzero, parse, \
    run_tool, total, workload

pytestmark = pytest.mark.needs("py:bcc")

# (bdev, pattern, I/O size, I/Os), run in this order; --max-keys 2 keeps
# the first two bdevs' histograms and drops every I/O of the third.
LOAD = (("Malloc0", "read", 4096, 23), ("Malloc1", "write", 65536, 37),
        ("Malloc2", "read", 512, 97))
KEPT, DROPPED = 2, 97


@pytest.fixture
def three_bdevs(target):
    for name, *_ in LOAD:
        target.rpc("bdev_malloc_create", name=name, size_mb=16,
                   block_size=512)
    return target


def run_load(target):
    for bdev, pattern, size, n in LOAD:
        workload(target, bdev, pattern, size, 2, n)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("tool,opts", [
    ("iolatency", ("-B",)), ("iolatency", ("-B", "--per-io")),
    ("iosize", ("-B",)), ("iosize", ("-B", "--per-io")),
    ("qdepth", ())])       # a histogram per bdev always
def test_full_key_table_counts_drops(bpf, three_bdevs, kind, tool, opts):
    t = Tool(kind, tool, three_bdevs.pid, "--max-keys", KEPT, *opts,
             tidy=True).start()
    run_load(three_bdevs)
    lines = t.stop()
    hists = by_key(parse(lines), "bdev")
    assert {k: total(h) for k, h in hists.items()} == {
        ("Malloc0",): 23, ("Malloc1",): 37}, "\n".join(lines)
    # Table full only: no drop for another reason (batch buffer busy).
    assert [ln for ln in lines if "dropped" in ln] == [
        f"{DROPPED} I/Os dropped (table full)"], "\n".join(lines)
    if tool == "iosize":
        assert nonzero(hists[("Malloc1",)]) == {(65536, 131071): 37}


@pytest.mark.parametrize("kind", KINDS)
def test_full_key_table_json(bpf, three_bdevs, kind):
    t = Tool(kind, "iosize", three_bdevs.pid, "-B", "-j", "--max-keys",
             KEPT).start()
    run_load(three_bdevs)
    objs = json_objects(t.stop())
    assert len(objs) == 1, objs
    assert objs[0]["I/Os"] == {"dropped": DROPPED, "busy": 0,
                               "unreadable": 0}, objs
    assert objs[0]["batches"] == {"bad_count": 0}, objs
    assert sorted((h["key"]["bdev"], h["total"])
                  for h in objs[0]["histograms"]) == [
        ("Malloc0", 23), ("Malloc1", 37)], objs


@pytest.mark.parametrize("kind", KINDS)
def test_room_left_says_nothing(bpf, three_bdevs, kind):
    """With room for every key, nothing is dropped and the text has no
    drop line; JSON says 0."""
    t = Tool(kind, "iosize", three_bdevs.pid, "-B", "--max-keys",
             len(LOAD)).start()
    run_load(three_bdevs)
    lines = t.stop()
    assert {k: total(h) for k, h in by_key(parse(lines), "bdev").items()} \
        == {(b,): n for b, _, _, n in LOAD}
    assert not any("dropped" in ln for ln in lines), "\n".join(lines)


@pytest.mark.parametrize("tool,opts,slots", [
    ("iolatency", (), 65), ("iolatency", ("-L",), 1000), ("iosize", (), 65),
    ("qdepth", (), 1000), ("nbdtime", (), 65), ("nbdtime", ("-L",), 1000),
    ("rpclat", (), 65)])
def test_bcc_table_holds_every_slot_of_every_key(tool, opts, slots):
    """A BCC form's dist holds a count per (key, slot): sized for
    --max-keys keys of every slot (65 log2, 1000 linear: -L, qdepth), it
    never fills before the keys do, so only the key bound drops, and
    counts (nbdtime's dist had 16,384 entries, 16 keys' worth with -L)."""
    rc, lines = run_tool("bcc", tool, "-p", "1", "--ebpf", "--max-keys", "7",
                         *opts)
    assert rc == 0, lines
    assert "#define HIST_KEYS 7" in lines, lines
    assert f"#define MAX_KEYS {7 * slots}" in lines, lines


# --- rpclat: a histogram per RPC method ----------------------------------------

# (method, calls), made in this order, one after the other; --max-keys 2
# keeps the first two methods' histograms and drops every call of the
# third.  blktgt names a method it does not know "unknown" in its probes
# (test_target_rpc.py), so only its own methods make keys: three of them
# fill a bound of 2.
RPC_LOAD = (("bdev_list", 23), ("target_stats", 37), ("export_list", 97))


def run_rpcs(target):
    for method, n in RPC_LOAD:
        for _ in range(n):
            target.rpc(method)


def drop_lines(lines):
    """The lines that say what a tool dropped or reclaimed."""
    return [ln for ln in lines if " dropped " in ln or " reclaimed " in ln]


@pytest.mark.parametrize("kind", KINDS)
def test_rpclat_full_key_table_counts_drops(bpf, target, kind):
    """rpclat's map of histograms keeps --max-keys methods: 23 bdev_list
    and 37 target_stats calls are timed, the 97 export_list calls after
    them find no room, and are counted as RPCs, not as STARTs (each was
    timed; its latency had no histogram to go to).  Before, the libbpf
    form counted them in a map of 1024 methods and never printed the
    count, and the BCC form had 16,384 (method, slot) entries and counted
    nothing."""
    t = Tool(kind, "rpclat", target.pid, "--max-keys", KEPT,
             tidy=True).start()
    run_rpcs(target)
    lines = t.stop()
    hists = by_key(parse(lines), "method")
    assert {k: total(h) for k, h in hists.items()} == {
        ("bdev_list",): 23, ("target_stats",): 37}, "\n".join(lines)
    assert drop_lines(lines) == [f"{DROPPED} RPCs dropped (table full)"], \
        "\n".join(lines)


@pytest.mark.parametrize("kind", KINDS)
def test_rpclat_full_key_table_json(bpf, target, kind):
    t = Tool(kind, "rpclat", target.pid, "-j", "--max-keys", KEPT).start()
    run_rpcs(target)
    objs = json_objects(t.stop())
    assert len(objs) == 1, objs
    assert objs[0]["RPCs"] == {"dropped": DROPPED}, objs
    assert objs[0]["starts"] == {"dropped": 0, "reclaimed": 0}, objs
    assert sorted((h["key"]["method"], h["total"])
                  for h in objs[0]["histograms"]) == [
        ("bdev_list", 23), ("target_stats", 37)], objs


def test_rpclat_twins_drop_alike(bpf, target):
    """Both forms at once, one workload: the same keys, units, counts and
    drop line (latencies differ from form to form, so not the rows)."""
    tools = [Tool(kind, "rpclat", target.pid, "-m", "--max-keys", KEPT
                  ).start() for kind in KINDS]
    run_rpcs(target)
    outs = [t.stop() for t in tools]
    summary = [([(h["key"], h["unit"], h["scale"], total(h))
                 for h in parse(lines)], drop_lines(lines))
               for lines in outs]
    assert summary[0] == summary[1] == (
        [({"method": "bdev_list"}, "msecs", "log2", 23),
         ({"method": "target_stats"}, "msecs", "log2", 37)],
        [f"{DROPPED} RPCs dropped (table full)"]), outs


@pytest.mark.parametrize("tool,opts", [
    ("iolatency", ()), ("iolatency", ("--per-io",)), ("iosize", ()),
    ("iosize", ("--per-io",)), ("qdepth", ()), ("nbdtime", ()),
    ("rpclat", ())])
def test_bcc_counts_through_hist_count(tool, opts):
    """BCC 0.26 turns dist.atomic_increment(key) into a lookup, then on a
    miss an insert with BPF_NOEXIST whose refusal it ignores: when two
    CPUs bring the same new (key, slot) at once, one count is lost and
    nothing says so.  Every histogram tool counts through HIST_KEYS_C's
    hist_count(), which looks up again after a refused insert and counts
    a value dist has no room for.  (A race of two CPUs cannot be
    provoked on demand, so the program text is what is checked; the
    exact counts of every test above go through it.)"""
    rc, lines = run_tool("bcc", tool, "-p", "1", "--ebpf", *opts)
    assert rc == 0, lines
    text = "\n".join(lines)
    assert not re.search(r"\w\.atomic_increment\(\w", text), text
    assert "hist_count(&key);" in text


def test_bcc_usdtcount_hist_counts_through_lookup_or_try_init(blktgt_bin):
    """usdtcount -H's map of (probe, slot) counts, the same race."""
    rc, lines = run_tool("bcc", "usdtcount", "-b", blktgt_bin, "--ebpf",
                         "-H", "arg3", "blktgt:io__done")
    assert rc == 0, lines
    text = "\n".join(lines)
    assert "hist.atomic_increment(hk)" not in text, text
    assert "hist.lookup_or_try_init(&hk, &zero)" in text, text
