# SPDX-License-Identifier: BSD-2-Clause
"""blktgt's lifecycle: the target__state sequence from NONE to SHUTDOWN
seen by bpftrace (which starts blktgt itself, so nothing is missed), a
clean exit 0 on SIGTERM, SIGINT and target_shutdown, start-up failures,
and the command line's refusals."""

import os
import re
import signal
import subprocess

import pytest

import probekit

STATES = ["NONE", "INIT", "THREADS", "RPC", "LISTEN", "CONFIG", "RUNNING", "SHUTDOWN"]


def states_h_order():
    """The states as include/blktgt_states.h lists them: the one home of the enum."""
    with open(os.path.join(probekit.ROOT, "include", "blktgt_states.h")) as f:
        text = f.read()
    block = text[text.index("#define TARGET_STATE_LIST"):]
    block = block[:block.index("\n\n")]
    return re.findall(r'X\(TARGET_\w+, "(\w+)"\)', block)


def test_states_h_matches():
    assert states_h_order() == STATES


def traced_run(blktgt_bin, tmp_path, args, stop, threads=3):
    """Run blktgt under bpftrace -c; stop(pid, sock) ends it.  Returns the
    events in time order and every output line."""
    sock = str(tmp_path / "rpc.sock")
    b = blktgt_bin
    prog = r'''
usdt:%(b)s:blktgt:target__state { printf("%%llu state %%d %%s\n", nsecs, arg0, str(arg1)); }
usdt:%(b)s:blktgt:thread__start { printf("%%llu thread_start %%d %%s\n", nsecs, arg0, str(arg1)); }
usdt:%(b)s:blktgt:thread__stop { printf("%%llu thread_stop %%d %%s\n", nsecs, arg0, str(arg1)); }
BEGIN { printf("READY\n"); }
''' % {"b": b}
    cmd = " ".join([b, "-R", str(threads), "-s", sock] + list(args))
    proc = subprocess.Popen(["bpftrace", "-e", prog, "-c", cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    out = probekit.LineReader(proc.stdout)
    try:
        out.wait_for("READY")
        pid = None
        if stop is not None:
            pid = int(out.wait_for(r"blktgt: running pid=(\d+)").group(1))
            stop(pid, sock)
        proc.wait(timeout=probekit.TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = out.drain(10)
    # Anchored at the end: blktgt's own output shares the pipe.
    events = sorted((int(m.group(1)), m.group(2)) for m in
                    (re.search(r"(\d+) ((?:state|thread_start|thread_stop) \d+ \w+)$", ln)
                     for ln in lines) if m)
    return [e for _, e in events], lines


def check_full_run(events, lines, threads=3):
    text = "\n".join(lines)
    states = [e.split()[2] for e in events if e.startswith("state ")]
    assert states == STATES, text
    assert [int(e.split()[1]) for e in events if e.startswith("state ")] == \
        list(range(len(STATES)))
    starts = sorted(e for e in events if e.startswith("thread_start"))
    stops = sorted(e for e in events if e.startswith("thread_stop"))
    assert starts == [f"thread_start {i} reactor_{i}" for i in range(threads)], text
    assert stops == [f"thread_stop {i} reactor_{i}" for i in range(threads)], text
    # Reactors start before RUNNING and stop after SHUTDOWN.
    running = events.index("state 6 RUNNING")
    shutdown = events.index("state 7 SHUTDOWN")
    assert all(events.index(s) < running for s in starts)
    assert all(events.index(s) > shutdown for s in stops)
    assert "blktgt: info: exiting cleanly" in lines, text


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "target_shutdown"])
def test_state_sequence_to_shutdown(blktgt_bin, tmp_path, bpf, how):
    def stop(pid, sock):
        if how == "target_shutdown":
            assert probekit.rpc_call(sock, "target_shutdown") is True
        else:
            os.kill(pid, getattr(signal, how))
    events, lines = traced_run(blktgt_bin, tmp_path, ["-l", "127.0.0.1:0"], stop)
    check_full_run(events, lines)


def test_failed_start_still_shuts_down(blktgt_bin, tmp_path, bpf):
    """An RPC socket that cannot be made: the target goes from RPC straight
    to SHUTDOWN, its reactors stop, and it exits 1 with the reason."""
    events, lines = traced_run(blktgt_bin, tmp_path,
                               ["-l", "none", "-s", str(tmp_path / "no" / "dir.sock")],
                               stop=None, threads=2)
    states = [e.split()[2] for e in events if e.startswith("state ")]
    assert states == ["NONE", "INIT", "THREADS", "RPC", "SHUTDOWN"], lines
    assert len([e for e in events if e.startswith("thread_stop")]) == 2
    assert any("RPC socket" in ln and "No such file or directory" in ln for ln in lines)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_exits_cleanly(blktgt_bin, tmp_path, sig):
    t = probekit.Target(blktgt_bin, tmp_path).start()
    t.rpc("bdev_malloc_create", name="m", size_mb=4, block_size=512)
    t.rpc("export_create", name="e", bdev="m")
    assert t.stop(sig=sig) == 0
    assert not os.path.exists(t.rpc_sock)


def test_target_shutdown_rpc(blktgt_bin, tmp_path):
    t = probekit.Target(blktgt_bin, tmp_path).start()
    t.rpc("bdev_null_create", name="n", size_mb=4, block_size=512)
    assert t.rpc("target_shutdown") is True
    assert t.proc.wait(timeout=probekit.TIMEOUT) == 0
    lines = t.out.drain(5)
    assert "blktgt: info: bdev n deleted" in lines
    assert not os.path.exists(t.rpc_sock)


def test_running_line(blktgt_bin, tmp_path):
    sock = str(tmp_path / "r.sock")
    p = subprocess.Popen([blktgt_bin, "-R", "1", "-s", sock, "-l", "none"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The first and only line on stdout.
        line = p.stdout.readline().decode()
        assert line == f"blktgt: running pid={p.pid} rpc={sock} nbd=- unix=-\n"
        # One reactor: workloads run on reactor 0 beside the RPC server.
        r = probekit.rpc_call(sock, "target_stats")
        assert (r["state"], r["threads"]) == ("RUNNING", 1)
        probekit.rpc_call(sock, "bdev_null_create", {"name": "n", "size_mb": 1,
                                                     "block_size": 512})
        r = probekit.rpc_call(sock, "workload_run", {"bdev": "n", "pattern": "randread",
                                                     "io_size": 512, "queue_depth": 4,
                                                     "count": 101})
        assert r["ios"] == 101
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=probekit.TIMEOUT) == 0
    assert p.stdout.read() == b""


@pytest.mark.parametrize("args, text", [
    (["-R", "0"], "-R 0: expected a number of reactor threads, 1..64"),
    (["-R", "65"], "-R 65: expected"),
    (["-R", "2x"], "-R 2x: expected"),
    (["-R", ""], "-R : expected"),
    (["--reactors", "0"], "-R 0: expected a number of reactor threads, 1..64"),
    (["-l", "localhost"], "-l localhost: expected HOST:PORT"),
    (["-l", "127.0.0.1:65536"], "-l 127.0.0.1:65536: expected"),
    (["-l", "127.0.0.1:-1"], "expected HOST:PORT"),
    (["-l", ":80"], "-l: host must be"),
    (["--listen", "localhost"], "-l localhost: expected HOST:PORT"),
    (["-s", "x" * 200], "a socket path must be 1..107 bytes"),
    (["-U", ""], "a socket path must be"),
    (["-i", "86401"], "-i 86401: expected seconds, 0..86400 (0: no limit)"),
    (["-i", "1s"], "-i 1s: expected seconds"),
    (["--stall-timeout", "1s"], "-i 1s: expected seconds"),
    (["-q"], "unknown option -q"),
    (["-R"], "-R needs an argument"),
    (["extra"], "unexpected argument 'extra'"),
])
def test_bad_command_line(blktgt_bin, args, text):
    p = subprocess.run([blktgt_bin, *args], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("blktgt: ") and text in lines[0], p.stderr


# blktgt's letters before each meant one thing across probekit's commands
# (ARCHITECTURE.md, "Conventions"): (old, its argument, the line that
# refuses it, the new spelling with that argument).
OLD_LETTERS = [
    ("-t", "2", "-t THREADS is now -R N (--reactors); -t is blktgt-rpc's timeout",
     ["-R", "2"], ["--reactors", "2"]),
    ("-L", "127.0.0.1:0", "-L HOST:PORT is now -l HOST:PORT (--listen), as in "
     "probekit-exporter; -L is the tools' --linear",
     ["-l", "127.0.0.1:0"], ["--listen", "none"]),
    ("-H", "3", "-H SECONDS is now -i SECONDS (--stall-timeout); -H is "
     "probekit-usdtcount's --histogram", ["-i", "3"], ["--stall-timeout", "0"]),
]


@pytest.mark.parametrize("old, arg, line, new, long", OLD_LETTERS,
                         ids=[o[0] for o in OLD_LETTERS])
def test_old_letter_is_refused_naming_the_new_one(blktgt_bin, tmp_path, old, arg,
                                                  line, new, long):
    """An old command line is refused, never read another way: one line
    naming the new spelling, exit 2, no socket made; with or without its
    argument, after valid options too.  The spelling it names parses."""
    sock = str(tmp_path / "rpc.sock")
    # -h last: were the old letter read, the run would still end at once.
    for args in ([old], [old, arg, "-h"], ["-s", sock, old + arg, "-h"]):
        p = subprocess.run([blktgt_bin, *args], capture_output=True, text=True,
                           timeout=probekit.TIMEOUT)
        assert (p.returncode, p.stdout, p.stderr) == (
            2, "", f"blktgt: {line} (try -h)\n"), args
        assert not os.path.exists(sock)
    for args in (new, long):
        p = subprocess.run([blktgt_bin, *args, "-h"], capture_output=True, text=True,
                           timeout=probekit.TIMEOUT)
        assert (p.returncode, p.stderr) == (0, ""), args
        assert p.stdout.startswith("usage: blktgt ")


def test_help(blktgt_bin):
    p = subprocess.run([blktgt_bin, "-h"], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0
    assert p.stdout.startswith("usage: blktgt [-R N]")
    # -i bounds both control paths that an idle client could hold open.
    assert ("  -i, --stall-timeout SECONDS\n"
            "                            close NBD clients still negotiating, and RPC\n"
            "                            clients that sent part of a request, after this\n"
            "                            long (default 10; 0: no limit)\n") in p.stdout


def test_missing_config_file(blktgt_bin, tmp_path):
    p = subprocess.run([blktgt_bin, "-l", "none", "-s", str(tmp_path / "s"), "-c",
                        str(tmp_path / "nope.json")], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 1
    assert "nope.json: No such file or directory" in p.stderr


def test_signal_during_config_exits_cleanly(blktgt_bin, tmp_path):
    """SIGTERM while -c is still applying a call (a long workload): the
    call is cut short, the target never reaches RUNNING, and exits 0."""
    cfg = tmp_path / "cfg.json"
    cfg.write_text('[{"method": "bdev_null_create", "params": {"name": "n", "size_mb": 4, '
                   '"block_size": 512}}, {"method": "workload_run", "params": {"bdev": "n", '
                   '"pattern": "read", "io_size": 512, "queue_depth": 1, "seconds": 3600}}]')
    sock = str(tmp_path / "rpc.sock")
    p = subprocess.Popen([blktgt_bin, "-s", sock, "-l", "none", "-c", str(cfg)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The RPC server answers during CONFIG: wait until the workload runs.
        stats = None
        while stats is None or stats["workloads"] == 0:
            assert p.poll() is None
            try:
                stats = probekit.rpc_call(sock, "target_stats")
            except (FileNotFoundError, ConnectionRefusedError):
                continue
        assert stats["state"] == "CONFIG"
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=probekit.TIMEOUT) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.stdout.read() == b""
    assert b"exiting cleanly" in p.stderr.read()


def test_unread_stderr_does_not_stall_the_target(blktgt_bin, tmp_path):
    """Nobody reads blktgt's stderr while it logs ~800 KiB: its reactors
    must go on (a blocked write(2) stalled them before), lines that do not
    fit the log queue are dropped and counted, and every line is either
    written or counted."""
    sock = str(tmp_path / "rpc.sock")
    bdev_line = re.compile(r"blktgt: info: bdev \d{4}n{59} (created|deleted)\b")
    note = re.compile(r"blktgt: warning: (\d+) log lines dropped: stderr was not being read$")

    def accounted(lines):
        """Flood lines written, plus those counted as dropped."""
        return sum(1 for ln in lines if bdev_line.match(ln)) + \
            sum(int(m.group(1)) for m in map(note.match, lines) if m)

    proc = subprocess.Popen([blktgt_bin, "-l", "none", "-s", sock],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        probekit.LineReader(proc.stdout).wait_for(r"^blktgt: running ")
        pairs = 0
        for batch in range(40):
            calls = []
            for i in range(100):
                name = f"{batch:02d}{i:02d}" + "n" * 59         # 63 bytes
                calls += [("bdev_null_create", {"name": name, "size_mb": 1,
                                                "block_size": 512}),
                          ("bdev_delete", {"name": name})]
            replies = probekit.rpc_batch(sock, calls)
            assert all("result" in r for r in replies.values()), replies
            pairs += 100
        assert probekit.rpc_call(sock, "target_stats")["state"] == "RUNNING"
        err = probekit.LineReader(proc.stderr)      # only now: read stderr
        # Every flood line is written or counted, exactly; then the queue
        # is empty and the shutdown lines cannot be dropped.
        err.wait_until(lambda lines: accounted(lines) >= 2 * pairs)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=probekit.TIMEOUT) == 0
        lines = err.drain()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert accounted(lines) == 2 * pairs
    assert any(note.match(ln) for ln in lines), lines[-5:]
    assert lines[-2:] == ["blktgt: info: Terminated: shutting down",
                          "blktgt: info: exiting cleanly"]


# --- reactors: the pass hook and the thread rules ---------------------------

@pytest.fixture
def debug_target(blktgt_bin, tmp_path, monkeypatch):
    """A blktgt with 3 reactors and the test-only debug_* methods."""
    monkeypatch.setenv("BLKTGT_DEBUG_RPC", "1")
    t = probekit.Target(blktgt_bin, tmp_path, threads=3).start()
    yield t
    t.stop()


def test_debug_methods_need_the_environment(target):
    with pytest.raises(probekit.RpcError) as ei:
        target.rpc("debug_pass_hook", reactor=1)
    assert ei.value.code == -32601


def test_pass_hook_runs_once_per_pass_on_its_reactor(debug_target):
    """A hook added on a reactor runs exactly once per loop pass of that
    reactor, whether the pass slept or not, and never on another one: the
    reactor reads its pass count and the hook's run count in one message."""
    t = debug_target
    assert t.rpc("debug_pass_hook", reactor=1) == {"reactor": 1, "passes": 0,
                                                   "hook_runs": 0}
    # A query may run in the same pass as the one before it (a busy
    # reactor runs every message it has before it sleeps), so passes grow
    # by 0 or more; ask until 23 have gone by.
    last = 0
    while last < 23:
        r = t.rpc("debug_pass_hook", reactor=1)
        assert r["hook_runs"] == r["passes"] >= last, r
        last = r["passes"]
    # Reactor 2 starts its own count later, and neither counts the
    # other's passes; reactor 0 (serving every one of these requests)
    # has no hook.
    assert t.rpc("debug_pass_hook", reactor=2) == {"reactor": 2, "passes": 0,
                                                   "hook_runs": 0}
    last = 0
    while last < 5:
        r = t.rpc("debug_pass_hook", reactor=2)
        assert r["hook_runs"] == r["passes"] >= last, r
        last = r["passes"]
    r = t.rpc("debug_pass_hook", reactor=1)
    assert r["hook_runs"] == r["passes"] >= 23, r
    assert t.rpc("debug_pass_hook", reactor=0, add=False) == {
        "reactor": 0, "passes": 0, "hook_runs": 0}


@pytest.fixture
def no_core():
    """A deliberate abort leaves no core file behind."""
    import resource
    old = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, old[1]))
    yield
    resource.setrlimit(resource.RLIMIT_CORE, old)


@pytest.mark.parametrize("rule,line", [
    ("off_reactor", "blktgt: error: thread rule broken in reactor_for_each_thread(): it runs on "
     "a reactor thread only; called on a thread that is not a reactor"),
    ("not_reactor_0", "blktgt: error: thread rule broken in export_lookup(): it runs on "
     "reactor_0 only; called on reactor_2"),
    ("foreign_fd", "blktgt: error: thread rule broken in reactor_fd_modify(): what "
     "reactor_0 added is used by reactor_0 only; called on reactor_2"),
], ids=lambda v: v if " " not in v else "")
def test_broken_thread_rule_aborts_with_one_line(blktgt_bin, tmp_path, monkeypatch,
                                                 no_core, rule, line):
    """Breaking a thread rule on purpose stops the target at once with
    SIGABRT and one line naming the function, the rule and the thread,
    instead of corrupting another thread's state."""
    monkeypatch.setenv("BLKTGT_DEBUG_RPC", "1")
    t = probekit.Target(blktgt_bin, tmp_path, threads=3).start()
    try:
        with pytest.raises(Exception):      # no reply: the target is gone
            t.rpc("debug_break_rule", rule=rule)
        assert t.proc.wait(timeout=probekit.TIMEOUT) == -signal.SIGABRT
        lines = t.out.drain(5)
        assert [ln for ln in lines if "thread rule" in ln] == [line], lines
    finally:
        t.stop(expect_rc=None)
        t.remove_trace_file()
