# SPDX-License-Identifier: BSD-2-Clause
"""Shared fixtures: the built binaries and a running blktgt."""

import os
import subprocess
import sys

import pytest

# The helpers every test shares (tests/lib/): probekit, histtools, ...
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import allowed_skips  # noqa: E402
import probekit  # noqa: E402


@pytest.fixture(scope="session")
def build():
    """The build directory made by 'make test' (BUILD=...)."""
    return probekit.BUILD


@pytest.fixture(scope="session")
def blktgt_bin():
    path = os.path.join(probekit.BUILD, "bin", "blktgt")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built; run the suite with 'make test'")
    return path


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(*names): programs (or py:MODULE) "
                            "the test runs; missing ones skip it, naming their "
                            "Debian package (fail under CI=true: make check)")


_missing_cache = {}


def pytest_runtest_setup(item):
    names = [n for m in item.iter_markers("needs") for n in m.args]
    if not names:
        return
    key = tuple(sorted(set(names)))
    if key not in _missing_cache:
        _missing_cache[key] = probekit.missing(key)
    why = _missing_cache[key]
    if why:
        allowed_skips.require(why)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In a strict run (allowed_skips.STRICT), a skip of a test that
    allowed_skips.ALLOWED does not list is a failure, whatever skipped
    it: a marker, pytest.skip() in a test or a fixture."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and allowed_skips.STRICT and not hasattr(rep, "wasxfail") \
            and not allowed_skips.allowed(item.nodeid):
        rep.outcome = "failed"
        rep.longrepr = (f"skipped under CI=true, and not on "
                        f"tests/lib/allowed_skips.py's list: {skip_reason(rep)}")


def skip_reason(rep):
    """A skipped report's reason, without pytest's "Skipped: " prefix."""
    lr = rep.longrepr
    why = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    return why[len("Skipped: "):] if why.startswith("Skipped: ") else why


def pytest_terminal_summary(terminalreporter):
    """Every run ends with its skips: how many, each reason once with its
    count, and whether the run was strict."""
    tr = terminalreporter
    skipped = tr.stats.get("skipped", [])
    by_reason = {}
    for rep in skipped:
        nodeid = getattr(rep, "nodeid", "")
        why = skip_reason(rep)
        allowed = allowed_skips.allowed(nodeid)
        key = why + (f" [allowed: {allowed}]" if allowed else "")
        by_reason[key] = by_reason.get(key, 0) + 1
    mode = ("strict (CI=true): a skip not on tests/lib/allowed_skips.py's "
            "list fails" if allowed_skips.STRICT else
            "not strict (CI is not true): a missing program or BPF skips "
            "here; make check fails them")
    tr.write_sep("=", f"{len(skipped)} skipped; {mode}")
    for why, n in sorted(by_reason.items()):
        tr.write_line(f"{n} skipped: {why}")


@pytest.fixture(autouse=True)
def no_uprobe_event_left(tmp_path_factory):
    """No test leaves a uprobe event in tracefs on a file of this run
    (its tmp directories): the kernel keeps one until reboot."""
    base = tmp_path_factory.getbasetemp()
    before = set(probekit.uprobe_events(base))
    yield
    left = [e for e in probekit.uprobe_events(base) if e not in before]
    assert not left, f"uprobe events left in tracefs: {left}"


@pytest.fixture
def bpf():
    """Tests that attach probes take this: they fail under CI=true (make
    check) when tracing is impossible, and skip with the reason elsewhere."""
    why = probekit.bpf_unavailable()
    if why:
        allowed_skips.require(f"BPF tracing is unavailable: {why}")


@pytest.fixture
def target(blktgt_bin, tmp_path):
    """A running blktgt with a private RPC socket and an ephemeral NBD port;
    stopped (and checked for a clean exit) at the end of the test."""
    t = probekit.Target(blktgt_bin, tmp_path)
    t.start()
    yield t
    t.stop()


@pytest.fixture
def funcs_driver(tmp_path):
    """tests/lib/funcs_driver.c, running (probekit.FuncsDriver); it must exit
    0 when its stdin closes at the end."""
    d = probekit.FuncsDriver(tmp_path)
    yield d
    d.close()


@pytest.fixture(scope="module")
def operands(tmp_path_factory):
    """tests/lib/operands.c built by gcc -O2: USDT sites of every operand kind
    gcc emits (test_features and test_probecheck_any read them)."""
    exe = str(tmp_path_factory.mktemp("operands") / "operands")
    r = subprocess.run(["gcc", "-O2", "-o", exe,
                        os.path.join(probekit.ROOT, "tests", "lib", "operands.c")],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.fixture(scope="session")
def attach_pause(tmp_path_factory):
    """tests/lib/attach_pause.c built: the LD_PRELOAD library attach_hold.Hold
    holds a tracer with at its first attach to a process."""
    so = str(tmp_path_factory.mktemp("attach_pause") / "attach_pause.so")
    r = subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra",
                        "-Werror", "-o", so,
                        os.path.join(probekit.ROOT, "tests", "lib", "attach_pause.c"),
                        "-ldl"],
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert r.returncode == 0, r.stderr
    return so
