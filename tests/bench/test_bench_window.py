# SPDX-License-Identifier: BSD-2-Clause
"""make bench-window (bench/run --only window, bench/window.py): what the
wrapper's one window costs a hit, beside plain bpftrace.

What timing cannot show is checked here: the wrapper's count of
bench/hitcost.c's site is every pass (its loop starts after the readiness
line, so the window must be open by then, or the sample would be rejected
and the window would look cheap), each sample carries both clocks, and the
whole run writes raw/window.json and only section 9 of RESULTS.md, which
make bench keeps.  Nothing here is timed.
"""

import json
import os
import subprocess

import pytest

import probekit
from bench_runs import BENCH, OLD, bench_run, run_path

pytestmark = pytest.mark.needs("bpftrace")

HITS = 20011            # passes of bench/hitcost.c's loop under count()
OLD9 = "<!-- section 9: bench/window.py; bench/run --only window rewrites it -->\nold\n" \
       "<!-- end of section 9 -->"


@pytest.fixture(scope="module")
def run():
    return bench_run()


def built(need):
    """probekit.BUILD's bench program need, made if missing."""
    path = os.path.join(probekit.BUILD, need)
    if not os.access(path, os.X_OK):
        from bench_runs import make
        make(f"O={probekit.BUILD}", path)
    return path


@pytest.mark.parametrize("variant", ["stock", "nop5"])
def test_window_counts_every_hit(bpf, run, tmp_path, monkeypatch, variant):
    monkeypatch.setattr(run, "HITCOST_TRACED", HITS)
    binary = built(f"bench/hitcost-{variant}")
    rejected = []
    res = run.hitcost_sample(binary, True, str(tmp_path), rejected, window=probekit.BUILD)
    assert res["hits"] == HITS and rejected == []
    assert res["cpu_ns_per_pass"] > 0 and res["ns_per_pass"] > 0


def test_window_whole_run(bpf, tmp_path):
    """bench/run --only window: every configuration's samples in
    raw/window.json, each traced count equal to its passes, and section 9
    of RESULTS.md replaced in place (the rest kept)."""
    for v in ("stock", "nop5"):
        built(f"bench/hitcost-{v}")
    (tmp_path / "RESULTS.md").write_text(f"# head\n\n{OLD9}\n\n## tail\n")
    r = subprocess.run([run_path(), "--build", probekit.BUILD, "--only", "window",
                        "--runs", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    raw = json.loads((tmp_path / "raw" / "window.json").read_text())
    s = raw["samples"]
    assert sorted(s) == sorted(f"{v}-{k}" for v in ("stock", "nop5")
                               for k in ("untraced", "bpftrace", "wrapper"))
    assert all(len(v) == 1 and "cpu_ns_per_pass" in v[0] for v in s.values())
    assert [x["hits"] for k in sorted(s) if not k.endswith("untraced") for x in s[k]] == \
        [raw["passes_traced"]] * 4
    assert raw["script"] == "bench/window.bt" and raw["bpftrace"].startswith("bpftrace")
    text = (tmp_path / "RESULTS.md").read_text()
    assert text.startswith("# head\n\n<!-- section 9") and text.endswith("\n\n## tail\n")
    assert text.count("## 9. ") == 1 and "\nold\n" not in text
    assert "| stock sys/sdt.h, 1-byte nop (int3) | thread CPU time | **" in text


@pytest.mark.needs("gnuplot")
def test_make_bench_writes_or_keeps_section_9(run, tmp_path):
    """make bench rewrites RESULTS.md from its own raw results: section 9
    comes from them when they have it, and is kept, once, after section 8,
    when they do not (an --only window run's)."""
    with open(os.path.join(BENCH, "raw", "results.json")) as f:
        raw = json.load(f)
    with open(os.path.join(BENCH, "raw", "window.json")) as f:
        win = json.load(f)
    raw.pop("window", None)
    (tmp_path / "RESULTS.md").write_text(f"# an older run\n\n{OLD}\n\n{OLD9}\n")
    run.write_outputs(str(tmp_path), raw)
    text = (tmp_path / "RESULTS.md").read_text()
    assert "# an older run" not in text
    assert text.count(OLD9) == 1 and text.endswith(OLD9 + "\n")
    assert text.index("## 7. ") < text.index(OLD) < text.index(OLD9)
    raw["window"] = win
    run.write_outputs(str(tmp_path), raw)
    text = (tmp_path / "RESULTS.md").read_text()
    assert OLD9 not in text and text.count("## 9. ") == 1
    assert text.index(OLD) < text.index("## 9. ")
    assert run.window.render(win).rstrip("\n") in text
