# SPDX-License-Identifier: BSD-2-Clause
"""What probekit-check and probekit-list take the installed bpftrace and
libbpf to read (probelib/features.py) is what they read: checked here
against bpftrace on a program gcc built (tests/lib/operands.c), not the
detector's own fixture; and the detection's cache is kept per installed
tool, renewed when the tool changes, and bounded."""

import json
import os
import subprocess
import sys

import pytest

import probekit
from probekit import TIMEOUT

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import argspec, features  # noqa: E402

CHECK = os.path.join(probekit.BUILD, "bin", "probekit-check")
LIST = os.path.join(probekit.BUILD, "bin", "probekit-list")
PROBES = os.path.join(probekit.ROOT, "probes")


# operands.c, run with no argument: pick(a, 1) reads a[1] == 2 through a
# scale-index-base operand and counter == 7 through a symbol-relative
# one; konst's argument is the immediate 5.
# The last field is the kind of the probe's other operand: a bpftrace
# that refuses a whole probe for one operand it cannot read (detected)
# reads neither of pick's when it cannot read one.
LIVE = {"index": ("pick", 0, 2, "sym"), "sym": ("pick", 1, 7, "index"),
        "const": ("konst", 0, 5, None)}


@pytest.mark.needs("gcc", "bpftrace")
@pytest.mark.parametrize("kind", sorted(LIVE))
def test_bpftrace_reads_what_was_detected(operands, kind):
    """bpftrace prints the value the compiler put in an operand of this
    kind exactly when the detection says it reads the kind (and the
    probe's other operand, when it refuses whole probes)."""
    probe, i, value, other = LIVE[kind]
    got = features.bpftrace()
    want = kind in got["kinds"] and not (
        got["whole_probe"] and other and other not in got["kinds"])
    r = subprocess.run(
        ["bpftrace", "-c", operands, "-e",
         f'usdt:{operands}:probekit:{probe} {{ printf("v %d\\n", arg{i}); }}'],
        capture_output=True, text=True, timeout=TIMEOUT)
    reads = r.returncode == 0 and f"v {value}" in r.stdout.splitlines()
    assert reads == want, (got, r.stdout, r.stderr)


def detect(cache, env=None):
    """features' answer in a fresh process, with cache as its cache."""
    r = subprocess.run([sys.executable, "-m", "probelib.features"],
                       cwd=PROBES, capture_output=True, text=True,
                       timeout=TIMEOUT * 4,
                       env={**os.environ, "PROBEKIT_CACHE_DIR": str(cache),
                            **(env or {})})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def cached(cache):
    return sorted(p.name for p in cache.iterdir()
                  if p.name.startswith("features-"))


@pytest.mark.needs("gcc", "bpftrace")
def test_cache_per_installed_tool(tmp_path):
    """One answer per installed bpftrace: a second run reuses it, another
    bpftrace (a wrapper script), and the same one changed, detect anew;
    at most CACHE_KEEP answers stay, the newest."""
    cache = tmp_path / "cache"
    first = detect(cache)
    assert first["bpftrace"]["why"] is None, first
    assert len(cached(cache)) == 1
    f = cache / cached(cache)[0]
    stamp = f.stat().st_mtime_ns
    assert detect(cache) == first and f.stat().st_mtime_ns == stamp
    wrap = tmp_path / "bpftrace"
    wrap.write_text('#!/bin/sh\nexec bpftrace "$@"\n')
    wrap.chmod(0o755)
    assert detect(cache, {"BPFTRACE": str(wrap)}) == first
    assert len(cached(cache)) == 2
    os.utime(wrap, ns=(stamp - 10**9, stamp - 10**9))
    # Stale answers from other tools, older than every real one.
    for n in range(features.CACHE_KEEP + 3):
        old = cache / f"features-old{n:02d}.json"
        old.write_text("{}")
        os.utime(old, ns=(10**9 * n, 10**9 * n))
    assert detect(cache, {"BPFTRACE": str(wrap)}) == first
    kept = cached(cache)
    assert len(kept) == features.CACHE_KEEP, kept
    assert f.name in kept and "features-old00.json" not in kept


@pytest.mark.needs("gcc")
def test_undetected_tool_is_said(operands, tmp_path):
    """With no bpftrace to try, probekit-check says so and checks with the
    oldest release's rules (a symbol-relative operand is refused)."""
    bt = tmp_path / "ops.bt"
    bt.write_text("usdt:__EXE__:probekit:pick { @c = arg1; }\n")
    r = subprocess.run([CHECK, "--binary", operands, str(bt)],
                       capture_output=True, text=True, timeout=TIMEOUT * 4,
                       env={**os.environ, "BPFTRACE": "/nonexistent/bpftrace",
                            "PROBEKIT_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert ("probekit-check: note: bpftrace: what it reads was not detected "
            "(no bpftrace to try); checking with the rules of the oldest "
            "release probekit knows") in r.stdout.splitlines(), r.stdout
    assert r.stderr.splitlines() == [
        f"{bt}:1: probekit:pick: arg1: bpftrace cannot read counter(%rip): "
        "a symbol-relative %rip operand; " + argspec.operand_fix(),
        "probekit-check: 1 error"], r.stderr


@pytest.mark.needs("gcc")
def test_list_says_what_libbpf_reads(operands):
    """probekit-list's libbpf column is the installed libbpf's answer."""
    r = subprocess.run([LIST, "-j", operands], capture_output=True,
                       text=True, timeout=TIMEOUT * 4)
    assert r.returncode == 0, r.stderr
    args = {p["probe"]: p["args"] for p in
            json.loads(r.stdout)["files"][0]["probes"]}
    lb = features.libbpf()["kinds"]
    assert [a["readers"]["libbpf"] for a in args["probekit:pick"]] == \
        ["index" in lb, "sym" in lb]
    assert [a["readers"]["libbpf"] for a in args["probekit:konst"]] == \
        ["const" in lb]
