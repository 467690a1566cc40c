# SPDX-License-Identifier: BSD-2-Clause
"""Services that change under the tracer: a file replaced at the path a
tool traces with -b (a package upgrade's or a deploy's rename: a new
inode at the same path), and an exporter whose target goes away.

The workload is tests/lib/pairs_driver.c, built as "tp": each run fires
pairs:start and pairs:done 101 times and exits.  A file is replaced as a
deploy does it, cp tp tp.new && mv tp.new tp.  The libbpf tools and the
exporter follow it, and say so in one line (specs/limits.toml's
[message.REPLACED_FOLLOWED]): that line is the test's signal that the new
file is attached, and the second run's 101 must add to the first's.  The
BCC twins cannot attach again; they say so once
([message.REPLACED_NOT_FOLLOWED]), and count the old file's 101 only.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

import probekit
from histtools import Gen, json_objects, parse, total
from probekit import TIMEOUT
from exporter_client import Exporter, sample
from pairs import driver  # noqa: F401 (a fixture)

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import toolspec  # noqa: E402

HITS = 101
MSG = toolspec.messages()


@pytest.fixture
def tp(driver, tmp_path):
    """A copy of the driver that only this test runs (-b traces every
    process running the file)."""
    path = str(tmp_path / "tp")
    shutil.copy2(driver, path)
    return path


def run_tp(path, n=HITS):
    """Run the file at path once: n pairs, then its exit."""
    r = subprocess.run([path], input=f"pairs {n}\n", capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert (r.returncode, r.stdout.split()) == (0, ["ready", "ok"]), r


def replace(path):
    """A new file (a new inode) renamed onto path, as a deploy does."""
    shutil.copy2(path, path + ".new")
    os.rename(path + ".new", path)


def said(lines, text):
    return [ln for ln in lines if ln.endswith(": " + text)]


# --- following the file ------------------------------------------------------

@pytest.mark.parametrize("tool", ["usdtcount", "usdtlat"])
def test_libbpf_tools_follow_a_replaced_file(bpf, tp, tool):
    args = ["pairs:start"] if tool == "usdtcount" else \
        ["pairs:start", "pairs:done"]
    t = Gen("libbpf", tool, "-b", tp, *args, "-j").start()
    run_tp(tp)
    replace(tp)
    t.out.wait_for(re.escape(MSG["REPLACED_FOLLOWED"] % tp))
    run_tp(tp)
    lines = t.stop()
    assert len(said(lines, MSG["REPLACED_FOLLOWED"] % tp)) == 1, lines
    (obj,) = json_objects(lines)
    if tool == "usdtcount":
        assert obj["counts"] == [{"probe": "pairs:start",
                                  "count": 2 * HITS}], lines
    else:
        (h,) = obj["histograms"]
        assert sum(b["count"] for b in h["buckets"]) == 2 * HITS, lines


@pytest.mark.parametrize("tool", ["usdtcount", "usdtlat"])
def test_bcc_tools_say_a_replaced_file_once(bpf, tp, tool):
    """BCC builds a probe's argument code for one file: the twin says the
    file was replaced and what to run, once, and counts the old file."""
    args = ["pairs:start"] if tool == "usdtcount" else \
        ["pairs:start", "pairs:done"]
    t = Gen("bcc", tool, "-b", tp, *args).start()
    run_tp(tp)
    replace(tp)
    text = MSG["REPLACED_NOT_FOLLOWED"] % (tp, f"probekit-{tool}-bcc")
    t.out.wait_for(re.escape(text))
    run_tp(tp)
    replace(tp)     # a second replacement is not said again
    run_tp(tp)
    lines = t.stop()
    assert len(said(lines, text)) == 1, lines
    assert sum("was replaced" in ln for ln in lines) == 1, lines
    if tool == "usdtcount":
        rows = [ln.split() for ln in lines]
        assert ["pairs:start", str(HITS)] in rows, lines
    else:
        (h,) = parse(lines)
        assert total(h) == HITS, lines


def test_exporter_follows_a_replaced_file(bpf, build, tp):
    e = Exporter(build, ["-b", tp, "--count", "c=pairs:start",
                         "--pair", "p=pairs:start,pairs:done"])
    try:
        run_tp(tp)
        replace(tp)
        e.out.wait_for(re.escape(MSG["REPLACED_FOLLOWED"] % tp))
        run_tp(tp)
        _, body = e.scrape()
        assert sample(body, 'c_total{probe="pairs:start"}') == 2 * HITS, body
        assert sample(body, "p_seconds_count") == 2 * HITS, body
    finally:
        e.stop()
    assert len(said(e.out.lines, MSG["REPLACED_FOLLOWED"] % tp)) == 1, \
        e.out.lines


# --- a target that goes ------------------------------------------------------

UP = "probekit_exporter_target_up"


def test_exporter_target_up_when_its_process_exits(bpf, build, driver):
    """-p: 1 while the process lives; when it exits, one line and 0, and
    its metrics are still served."""
    p = subprocess.Popen([driver], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        e = Exporter(build, ["-p", str(p.pid), "--count", "c=pairs:start"])
        try:
            _, body = e.scrape()
            assert sample(body, UP) == 1, body
            p.stdin.write(f"pairs {HITS}\n")
            p.stdin.close()
            assert p.stdout.read() == "ok\n"
            p.wait(timeout=TIMEOUT)
            # The line comes once the gauge has fallen: a scrape after it
            # must read 0.
            line = (f"probekit-exporter: PID {p.pid} (pairs_driver) exited; "
                    f"still serving its metrics, with {UP} 0")
            e.out.wait_for("^" + re.escape(line) + "$")
            _, body = e.scrape()
            assert sample(body, UP) == 0, body
            assert sample(body, 'c_total{probe="pairs:start"}') == HITS, body
        finally:
            e.stop()
        assert sum("exited" in ln for ln in e.out.lines) == 1, e.out.lines
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_exporter_target_up_while_a_process_maps_the_file(bpf, build, tp):
    """-b: 1 while some process maps the file, 0 when none does."""
    e = Exporter(build, ["-b", tp, "--count", "c=pairs:start"])
    try:
        _, body = e.scrape()
        assert sample(body, UP) == 0, body
        p = subprocess.Popen([tp], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline() == "ready\n"
            _, body = e.scrape()
            assert sample(body, UP) == 1, body
        finally:
            p.stdin.close()
            p.wait(timeout=TIMEOUT)
        _, body = e.scrape()
        assert sample(body, UP) == 0, body
    finally:
        e.stop()
