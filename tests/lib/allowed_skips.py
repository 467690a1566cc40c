# SPDX-License-Identifier: BSD-2-Clause
"""The skips a strict run of the suite allows, each with its reason: the
one list of them.

The suite is strict when CI=true is in its environment, and the
project's runners set it themselves: make check (and so make test, the
README's test command, and make stack-check in the chroots) and .ci/run.
In a strict run, a test that needs a program make deps installs, or BPF
tracing the kernel must offer, fails rather than skips (conftest.py),
and any skip of a test not listed here becomes a failure.  A plain
pytest run (a developer running one file by hand) is not strict: it may
skip for a missing program, and its summary says so.

Every run ends with the number of skips and their reasons
(conftest.py's terminal summary); 'python3 tests/lib/allowed_skips.py'
prints this list (.ci/run does at its end).
"""

import os

# True when a skip must be on ALLOWED or fail.
STRICT = os.environ.get("CI") == "true"

# pytest node id prefix (relative to tests/) -> why it may skip.
ALLOWED = {
    "scripts/test_arm64.py::test_emulated_smoke":
        "the emulated arm64 machine takes about an hour: it runs in make "
        "arm64-smoke (PROBEKIT_ARM64=1), not in make check",
    "twins/test_usdt_pairs.py::test_gate_python_function_entry":
        "needs a CPython whose function__entry fires only while python:line "
        "is enabled (3.11, gh-98894); 3.12 dropped both probes, so Debian 13 "
        "and unstable have none; --gate itself runs on every stack in "
        "test_gate_raises_a_semaphore_without_counting",
    "twins/test_usdt_pairs.py::test_gated_probe_without_its_gate_says_so":
        "needs the same CPython 3.11 probes (3.12 dropped them): the empty "
        "result's cause, a gated probe traced without its gate, is said for "
        "any probe of toolspec's GATED table, which only 3.11 has here",
    "target/test_trace_blktgt.py::test_tsc_calibration_is_refreshed":
        "the TSC is x86-64's: skips only on another architecture",
    "target/test_trace_blktgt.py::test_kill9_then_dump[tsc]":
        "the TSC is x86-64's: skips only on another architecture",
    "target/test_trace_blktgt.py::test_bpftrace_lines_merge_with_the_ring[tsc]":
        "the TSC is x86-64's: skips only on another architecture",
}


def allowed(nodeid):
    """The reason nodeid may skip, or None."""
    for prefix, why in ALLOWED.items():
        if nodeid == prefix or nodeid.startswith((prefix + "[", prefix + "::")):
            return why
    return None


def require(why):
    """A test cannot run here, for a reason make deps or the kernel must
    remove: it fails in a strict run, and skips, saying why, elsewhere."""
    import pytest
    if STRICT:
        pytest.fail(f"required under CI=true (make check): {why}", pytrace=False)
    pytest.skip(why)


def main():
    print(f"tests/lib/allowed_skips.py: {len(ALLOWED)} skips allowed under "
          "CI=true (make check, .ci/run); any other skip fails:")
    for prefix, why in ALLOWED.items():
        print(f"  {prefix}: {why}")


if __name__ == "__main__":
    main()
