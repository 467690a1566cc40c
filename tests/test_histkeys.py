# SPDX-License-Identifier: BSD-2-Clause
"""A histogram tool whose map of keys is full drops, counts and says it.

iolatency and iosize keep a histogram per key (-B: per bdev), qdepth one
per bdev, in a map of
--max-keys keys (tools/limits.toml's HIST_KEYS_MAX unless given).  Here
the map holds 2 and the workload touches 3 bdevs one after the other, so
the third bdev's I/Os find no room: both forms must count them, print "97
I/Os dropped (table full)" (in JSON "I/Os": {"dropped": 97}), and still
count the other two bdevs' I/Os exactly.  Both forms drop at the same key
(before this, the BCC form bounded (key, slot) entries, the libbpf form
keys, and neither said what it dropped).  nbdtime's full map, over a real
NBD client, is tested in test_nbdtime.py.
"""

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
    assert f"{DROPPED} I/Os dropped (table full)" in lines, "\n".join(lines)
    if tool == "iosize":
        assert nonzero(hists[("Malloc1",)]) == {(65536, 131071): 37}


@pytest.mark.parametrize("kind", KINDS)
def test_full_key_table_json(bpf, three_bdevs, kind):
    t = Tool(kind, "iosize", three_bdevs.pid, "-B", "-j", "--max-keys",
             KEPT).start()
    run_load(three_bdevs)
    objs = json_objects(t.stop())
    assert len(objs) == 1, objs
    assert objs[0]["I/Os"] == {"dropped": DROPPED}, objs
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
    ("qdepth", (), 1000), ("nbdtime", (), 65), ("nbdtime", ("-L",), 1000)])
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
