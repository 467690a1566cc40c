# SPDX-License-Identifier: BSD-2-Clause
"""What each reader needs, per way of attaching (doc/privileges.md's
table, declared once in specs/privileges.toml), held to what the tools
say and do: each runs as user 65534 with exactly the table's
capabilities (setpriv, ambient, as systemd's AmbientCapabilities= would
give them) and either works, with exact counts, or prints one line that
names what it needs and what it lacks, and exits 1.  The lines are
written out here, not read from the declaration, so that a wrong
declaration fails too.  test_libbpf.py and test_bcc.py hold the blktgt
tools' other cells."""

import os
import pathlib
import shutil
import tempfile

import pytest

import histtools
import probekit
from histtools import NOBODY, Tool, as_nobody, command, parse, total
from histtools import nobody_target, usdt_multi  # noqa: F401 (fixtures)
from histtools import fixed_workload

pytestmark = pytest.mark.needs("setpriv", "py:bcc")

def refused(cmd, caps):
    """cmd run as user 65534 with caps: (rc, lines), strict UTF-8."""
    return histtools.run(as_nobody(*caps) + cmd, errors="strict")


def line(tool, what, whom, need, lack):
    return (f"{tool}: {what + ': ' if what else ''}permission denied: "
            f"{whom} needs root, or {need}; this process lacks {lack}")


# --- libbpf: the generic tools (multi-uprobe links) ---------------------------

USDT_ARGS = {"usdtcount": ["blktgt:io__submit"],
             "usdtlat": ["blktgt:io__submit", "blktgt:io__done"]}


@pytest.mark.parametrize("tool", sorted(USDT_ARGS))
def test_generic_tools_need_bpf_and_perfmon(bpf, nobody_target, tool):
    """usdtcount and usdtlat attach multi-uprobe links: without
    capabilities the line names CAP_BPF and CAP_PERFMON (it named
    CAP_SYS_ADMIN, which they do not need)."""
    pid = nobody_target.pid
    rc, lines = refused(command("libbpf", tool, pid, *USDT_ARGS[tool]), ())
    assert (rc, lines) == (1, [line(
        f"probekit-{tool}", "cannot load BPF programs", f"tracing PID {pid}",
        "CAP_BPF and CAP_PERFMON", "CAP_BPF and CAP_PERFMON")])


def test_usdtlat_bpf_perfmon_are_enough(bpf, nobody_target):
    """usdtlat's multi-uprobe links and its raw tracepoint
    sched_process_exit (no tracefs) work with CAP_BPF and CAP_PERFMON
    alone: keyed by request id (arg1), it pairs every I/O of the fixed
    workload, 23 + 37 + 97."""
    t = Tool("libbpf", "usdtlat", nobody_target.pid, "-k", "arg1",
             *USDT_ARGS["usdtlat"], wrap=as_nobody("bpf", "perfmon")).start()
    with open(f"/proc/{t.proc.pid}/status") as f:
        assert f"Uid:\t{NOBODY}\t" in f.read()
    fixed_workload(nobody_target)
    hists = parse(t.stop())
    assert sum(total(h) for h in hists) == 157, hists


# --- libbpf: the blktgt tools (libbpf's own USDT attach) ---------------------

def test_blktgt_tools_name_what_their_usdt_attach_needs(bpf, nobody_target,
                                                       usdt_multi):
    """iosize attaches its USDT probes through libbpf, whose links are
    multi-uprobe ones (CAP_BPF and CAP_PERFMON) or uprobe perf events
    (CAP_SYS_ADMIN): without capabilities its line names what the libbpf
    in use needs (it named CAP_SYS_ADMIN under libbpf 1.5, where CAP_BPF
    and CAP_PERFMON do); with exactly those it counts every I/O of the
    fixed workload, 23 + 37 + 97."""
    pid = nobody_target.pid
    need = ("CAP_BPF and CAP_PERFMON" if usdt_multi else "CAP_SYS_ADMIN")
    rc, lines = refused(command("libbpf", "iosize", pid, "--per-io"), ())
    assert (rc, lines) == (1, [line(
        "probekit-iosize", "cannot load BPF programs", f"tracing PID {pid}",
        need, need)])
    caps = ("bpf", "perfmon") if usdt_multi else ("sys_admin",)
    t = Tool("libbpf", "iosize", nobody_target.pid, "--per-io", tidy=True,
             wrap=as_nobody(*caps)).start()
    fixed_workload(nobody_target)
    assert sum(total(h) for h in parse(t.stop())) == 157
    if not usdt_multi:
        # CAP_BPF and CAP_PERFMON load the programs; the uprobe perf
        # event is refused, and the line names what it needs.
        rc, lines = refused(command("libbpf", "iosize", pid, "--per-io"),
                            ("bpf", "perfmon"))
        assert (rc, lines) == (1, [line(
            "probekit-iosize", "cannot attach to USDT probe "
            f"blktgt:io__submit of PID {pid}", f"tracing PID {pid}",
            "CAP_SYS_ADMIN", "CAP_SYS_ADMIN")])


# --- nbdtime: USDT and syscall tracepoints (tracefs) ------------------------

SAD = "CAP_SYS_ADMIN and CAP_DAC_READ_SEARCH"
BPD = "CAP_BPF, CAP_PERFMON and CAP_DAC_READ_SEARCH"
TRACEPOINT = "cannot attach to tracepoint syscalls/sys_enter_recvfrom"


def nbdtime_needs(kind, usdt_multi):
    """What nbdtime needs: its USDT probe's attach (libbpf's: CAP_BPF and
    CAP_PERFMON where it makes multi-uprobe links, else CAP_SYS_ADMIN;
    BCC's: CAP_SYS_ADMIN), and its tracepoints' CAP_PERFMON and
    CAP_DAC_READ_SEARCH (tracefs, mode 0700)."""
    return BPD if kind == "libbpf" and usdt_multi else SAD


@pytest.mark.parametrize("kind", histtools.KINDS)
@pytest.mark.parametrize("caps", [(), ("bpf", "perfmon"), ("sys_admin",)])
def test_nbdtime_needs_dac_read_search(bpf, nobody_target, usdt_multi, kind,
                                       caps):
    """nbdtime finds its syscall tracepoints through tracefs (mode 0700):
    CAP_SYS_ADMIN alone got a bare 'Permission denied' (libbpf) or a
    'mount tracefs' hint (BCC); now one line names what the first refused
    step needs and this process lacks.  libbpf's first refusal is the
    load without capabilities, then with CAP_BPF and CAP_PERFMON the USDT
    probe where libbpf attaches a uprobe perf event (1.1), or the
    tracepoint where it makes a multi-uprobe link (1.5, 1.7), which those
    two allow (its line then named CAP_SYS_ADMIN, which it does not
    need); BCC checks first, before it attaches anything."""
    pid = nobody_target.pid
    need = nbdtime_needs(kind, usdt_multi)
    if kind == "bcc":
        what = ""
        lack = {(): SAD, ("bpf", "perfmon"): SAD,
                ("sys_admin",): "CAP_DAC_READ_SEARCH"}[caps]
    elif not caps:
        what, lack = "cannot load BPF programs", need
    elif caps == ("sys_admin",):
        what, lack = TRACEPOINT, "CAP_DAC_READ_SEARCH"
    elif usdt_multi:
        what, lack = TRACEPOINT, "CAP_DAC_READ_SEARCH"
    else:
        what = f"cannot attach to USDT probe blktgt:io__submit of PID {pid}"
        lack = SAD
    rc, lines = refused(command(kind, "nbdtime", pid, "-d", "1"), caps)
    tool = "probekit-nbdtime" + ("-bcc" if kind == "bcc" else "")
    assert (rc, lines) == (1, [line(tool, what, f"tracing PID {pid}", need,
                                    lack)])


@pytest.mark.parametrize("kind", histtools.KINDS)
def test_nbdtime_named_caps_are_enough(bpf, nobody_target, usdt_multi, kind):
    """With the capabilities its line names nbdtime attaches every probe
    and tracepoint, says it is tracing, and exits 0 at Ctrl-C: CAP_BPF,
    CAP_PERFMON and CAP_DAC_READ_SEARCH where libbpf makes multi-uprobe
    links, without CAP_SYS_ADMIN."""
    names = {"CAP_BPF": "bpf", "CAP_PERFMON": "perfmon",
             "CAP_SYS_ADMIN": "sys_admin",
             "CAP_DAC_READ_SEARCH": "dac_read_search"}
    need = nbdtime_needs(kind, usdt_multi).replace(" and ", ", ").split(", ")
    t = Tool(kind, "nbdtime", nobody_target.pid, tidy=True,
             wrap=as_nobody(*(names[c] for c in need))).start()
    lines = t.stop()
    assert not [ln for ln in lines if "ermission" in ln], lines


# --- BCC: uprobe perf events, cleared from tracefs at exit --------------------

def test_bcc_sys_admin_alone_is_refused(bpf, nobody_target):
    """BCC clears its uprobes from tracefs's uprobe_events at exit:
    with CAP_SYS_ADMIN alone it traced, then printed a traceback and
    exited 0.  Now it is refused before it attaches, in one line."""
    pid = nobody_target.pid
    rc, lines = refused(command("bcc", "iosize", pid, "-d", "1"),
                        ("sys_admin",))
    assert (rc, lines) == (1, [line(
        "probekit-iosize-bcc", "", f"tracing PID {pid}",
        "CAP_SYS_ADMIN and CAP_DAC_READ_SEARCH", "CAP_DAC_READ_SEARCH")])


@pytest.mark.parametrize("tool,args", [("iosize", ()),
                                       ("usdtcount", ("blktgt:io__submit",))])
def test_bcc_table_caps_are_enough(bpf, nobody_target, tool, args):
    """CAP_SYS_ADMIN and CAP_DAC_READ_SEARCH: exact counts, 23 + 37 + 97
    I/Os, no traceback, exit 0 (Tool.wait checks both)."""
    t = Tool("bcc", tool, nobody_target.pid, *args, tidy=True,
             wrap=as_nobody("sys_admin", "dac_read_search")).start()
    fixed_workload(nobody_target)
    lines = t.stop()
    if tool == "usdtcount":
        assert [ln.split() for ln in lines if ln.startswith("blktgt:")] \
            == [["blktgt:io__submit", "157"]], lines
    else:
        assert sum(total(h) for h in parse(lines)) == 157, lines


# --- the readers that are not tracers -----------------------------------------

def bin_path(name):
    return os.path.join(probekit.BUILD, "bin", name)


@pytest.fixture
def rooted(blktgt_bin):
    """A blktgt run by root, its RPC socket in a directory user 65534 may
    enter (pytest's tmp_path is mode 0700), as /var/tmp/blktgt.sock is."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="probekit-priv-"))
    d.chmod(0o755)
    t = probekit.Target(blktgt_bin, d)
    try:
        t.start()
        yield t
        t.stop()
    finally:
        if t.proc and t.proc.poll() is None:
            t.proc.kill()
            t.proc.wait()
        shutil.rmtree(d)


def commands(t):
    return {"probekit-list": [bin_path("probekit-list"), "-p", str(t.pid)],
            "blktgt-trace": [bin_path("blktgt-trace"), "-p", str(t.pid)],
            "blktgt-rpc": [bin_path("blktgt-rpc"), "-s", t.rpc_sock,
                           "bdev_list"]}


def test_readers_of_another_users_process(bpf, rooted):
    """probekit-list -p, blktgt-trace -p and blktgt-rpc on root's blktgt
    as user 65534: each said a bare 'Permission denied'; now each line
    says what is refused, what it needs and what this process lacks."""
    t, cmds = rooted, commands(rooted)
    want = {
        "probekit-list": line(
            "probekit-list", f"cannot read /proc/{t.pid}/exe",
            "reading another user's process", "CAP_SYS_PTRACE",
            "CAP_SYS_PTRACE"),
        "blktgt-trace": line(
            "blktgt-trace", f"/dev/shm/blktgt_trace.pid{t.pid}: cannot open",
            "reading another user's trace ring", "CAP_DAC_READ_SEARCH",
            "CAP_DAC_READ_SEARCH"),
        "blktgt-rpc": line(
            "blktgt-rpc", f"bdev_list: {t.rpc_sock}",
            "connecting to another user's socket", "CAP_DAC_OVERRIDE",
            "CAP_DAC_OVERRIDE"),
    }
    got = {name: refused(cmd, ()) for name, cmd in cmds.items()}
    assert got == {name: (1, [w]) for name, w in want.items()}


def test_what_the_readers_ask_is_enough(bpf, rooted):
    """With the one capability each line names, each reader works on
    root's blktgt: probekit-list lists its probes (their semaphores
    unreadable without CAP_DAC_READ_SEARCH, as the table says),
    blktgt-trace dumps the ring's header, blktgt-rpc gets the (empty)
    bdev list."""
    t, cmds = rooted, commands(rooted)
    rc, lines = refused(cmds["probekit-list"], ("sys_ptrace",))
    # Not root, it cannot try the installed tracers on its fixture
    # (probelib/features.py), and says so in a note, one per tracer.
    notes = [l for l in lines if l.startswith("probekit-list: note: ")]
    assert all("not detected" in n for n in notes), notes
    lines = [l for l in lines if l not in notes]
    assert rc == 0 and lines[0] == os.path.realpath(t.binary), lines
    assert "  blktgt:io__submit  1 site  semaphore: unreadable" in lines
    rc, lines = refused(cmds["blktgt-trace"], ("dac_read_search",))
    assert rc == 0 and lines[0].startswith(
        f"# blktgt trace /dev/shm/blktgt_trace.pid{t.pid}: pid {t.pid} "
        "(running)"), lines
    rc, lines = refused(cmds["blktgt-rpc"], ("dac_override",))
    assert (rc, lines) == (0, ["[]"])
