# SPDX-License-Identifier: BSD-2-Clause
"""LTTng-UST for the bench: a private session daemon, a snapshot-mode
session with bench/lttngcost.c's event enabled, lttngcost runs, and an
exact count of the events a snapshot holds.

    with LttngSession(lttngcost_binary) as s:
        s.run(events)                 # {"events", "enabled", "ns_per_event", ...}
        s.run(events, enabled=False)  # the event disabled in the session
        s.count_recorded()            # events in a snapshot taken now

Why it runs everything as the user nobody: as root, lttng-sessiond is the
machine's one system-wide daemon (/var/run/lttng, shared with any other
LTTng user here); as an ordinary user it is a private daemon whose sockets
and traces live under LTTNG_HOME, a temporary directory of its own.  It is
started before the traced program, since liblttng-ust's constructor waits
LTTNG_UST_REGISTER_TIMEOUT (3 s by default) for a daemon that is not
there, and stopped by its PID on exit, consumer daemons included: nothing
is left running, and the temporary directory is removed.

The count reads the snapshot's CTF with libbabeltrace (Debian's
libbabeltrace1, which lttng-tools' own 'lttng view' uses), through ctypes.
"""

import ctypes
import glob
import os
import pwd
import re
import select
import shutil
import signal
import subprocess
import tempfile

USER = "nobody"
SESSION = "probekit-bench"
CHANNEL = "bench"
EVENT = "probekit_bench:bdev_io_submit"
TIMEOUT = 120
# How long the traced program's constructor waits for the daemon's
# enablers: long enough for a loaded machine, and still bounded.
REGISTER_TIMEOUT_MS = 60000


class LttngError(Exception):
    pass


def _children(pid):
    """Every descendant of pid (the consumer daemons it forked)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                for c in f.read().split():
                    out.append(int(c))
                    out.extend(_children(int(c)))
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def _wait_gone(pidfds, timeout):
    """Wait until every process behind pidfds has exited; False on timeout."""
    pending = list(pidfds)
    while pending:
        ready, _, _ = select.select(pending, [], [], timeout)
        if not ready:
            return False
        pending = [fd for fd in pending if fd not in ready]
    return True


class LttngSession:
    def __init__(self, lttngcost):
        self.binary = lttngcost
        self.pw = pwd.getpwnam(USER)
        self.dir = None
        self.pid = None

    def _cred(self):
        return {"user": self.pw.pw_uid, "group": self.pw.pw_gid, "extra_groups": []}

    def _env(self):
        return dict(os.environ, LTTNG_HOME=self.dir, HOME=self.dir,
                    LTTNG_UST_REGISTER_TIMEOUT=str(REGISTER_TIMEOUT_MS))

    def lttng(self, *args):
        r = subprocess.run(["lttng", *args], env=self._env(), cwd=self.dir,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=TIMEOUT, **self._cred())
        if r.returncode != 0:
            raise LttngError(f"lttng {' '.join(args)} exited {r.returncode}: "
                             f"{r.stdout.decode(errors='replace').strip()[-500:]}")
        return r.stdout.decode(errors="replace")

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="probekit-lttng-")
        try:
            os.chown(self.dir, self.pw.pw_uid, self.pw.pw_gid)
            prog = os.path.join(self.dir, "lttngcost")
            shutil.copy(self.binary, prog)
            self.binary = prog
            self._start_daemon()
            self.lttng("create", SESSION, "--snapshot", *self._ctf1_format())
            self.lttng("enable-channel", "--userspace", CHANNEL)
            self.lttng("enable-event", "--userspace", "--channel", CHANNEL, EVENT)
            self.lttng("start")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _ctf1_format(self):
        """The option that asks for a CTF 1.8 trace, which libbabeltrace 1
        (the count's reader) reads, where this lttng offers a choice of
        formats: LTTng 2.15+ writes CTF 2 unless told (Debian unstable's
        2.16), earlier releases know only CTF 1.8 and no such option."""
        if "--trace-format" in self.lttng("create", "--list-options").split():
            return ["--trace-format=ctf-1.8"]
        return []

    def _start_daemon(self):
        # --background returns once the daemon takes commands: the
        # readiness signal, with its PID in the pid file it writes.
        log = os.path.join(self.dir, "sessiond.log")
        with open(log, "wb") as f:
            r = subprocess.run(["lttng-sessiond", "--background", "--no-kernel"],
                               env=self._env(), cwd=self.dir, stdin=subprocess.DEVNULL,
                               stdout=f, stderr=subprocess.STDOUT, timeout=TIMEOUT,
                               **self._cred())
        if r.returncode != 0:
            with open(log, errors="replace") as f:
                raise LttngError(f"lttng-sessiond exited {r.returncode}: {f.read()[-500:]}")
        with open(os.path.join(self.dir, ".lttng", "lttng-sessiond.pid")) as f:
            self.pid = int(f.read().strip())

    def run(self, events, enabled=True):
        """One lttngcost run of events events, with the session's event
        enabled or disabled; its figures, checked against what was asked."""
        if not enabled:
            self.lttng("disable-event", "--userspace", "--channel", CHANNEL, EVENT)
        try:
            r = subprocess.run([self.binary, "-n", str(events)], env=self._env(),
                               cwd=self.dir, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=TIMEOUT, **self._cred())
        finally:
            if not enabled:
                self.lttng("enable-event", "--userspace", "--channel", CHANNEL, EVENT)
        text = r.stdout.decode(errors="replace")
        m = re.search(r"^lttngcost: events=(\d+) enabled=([01]) ns_per_event=([0-9.]+)"
                      r" cpu_ns_per_event=([0-9.]+)$", text, re.M)
        if r.returncode != 0 or not m:
            raise LttngError(f"lttngcost exited {r.returncode}: {text[-1000:]}")
        if int(m.group(1)) != events or int(m.group(2)) != int(enabled):
            raise LttngError(f"lttngcost ran with the event {'dis' if enabled else 'en'}"
                             f"abled, not as the session has it: {m.group(0)}")
        return {"events": events, "enabled": enabled,
                "ns_per_event": float(m.group(3)), "cpu_ns_per_event": float(m.group(4))}

    def count_recorded(self):
        """Stop the session, take a snapshot, and count the EVENT records
        in it: (count, sum of their object fields).  The session is
        started again afterwards."""
        self.lttng("stop")
        out = os.path.join(self.dir, "snapshot")
        self.lttng("snapshot", "record", "--session", SESSION, out)
        self.lttng("start")
        return count_ctf_events(out, EVENT)

    def close(self):
        """Stop the daemon and its consumers by PID, wait until they are
        gone, and remove the directory."""
        try:
            if self.pid is not None:
                pids = [self.pid] + _children(self.pid)
                fds = []
                for p in pids:
                    try:
                        fds.append(os.pidfd_open(p))
                    except ProcessLookupError:
                        pass
                try:
                    os.kill(self.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                gone = _wait_gone(fds, TIMEOUT)
                if not gone:
                    for fd in fds:
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                    _wait_gone(fds, TIMEOUT)
                for fd in fds:
                    os.close(fd)
                self.pid = None
                if not gone:
                    raise LttngError(f"lttng-sessiond did not stop within {TIMEOUT}s")
        finally:
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None


def count_ctf_events(path, name):
    """(number of events called name, sum of their 'object' field) in
    the CTF traces under path."""
    bt = ctypes.CDLL("libbabeltrace.so.1", mode=ctypes.RTLD_GLOBAL)
    ctf = ctypes.CDLL("libbabeltrace-ctf.so.1", mode=ctypes.RTLD_GLOBAL)
    vp = ctypes.c_void_p
    bt.bt_context_create.restype = vp
    bt.bt_context_add_trace.argtypes = [vp, ctypes.c_char_p, ctypes.c_char_p, vp, vp, vp]
    bt.bt_context_put.argtypes = [vp]
    bt.bt_iter_next.argtypes = [vp]
    ctf.bt_ctf_iter_create.restype = vp
    ctf.bt_ctf_iter_create.argtypes = [vp, vp, vp]
    ctf.bt_ctf_iter_destroy.argtypes = [vp]
    ctf.bt_ctf_iter_read_event.restype = vp
    ctf.bt_ctf_iter_read_event.argtypes = [vp]
    ctf.bt_ctf_get_iter.restype = vp
    ctf.bt_ctf_get_iter.argtypes = [vp]
    ctf.bt_ctf_event_name.restype = ctypes.c_char_p
    ctf.bt_ctf_event_name.argtypes = [vp]
    ctf.bt_ctf_get_top_level_scope.restype = vp
    ctf.bt_ctf_get_top_level_scope.argtypes = [vp, ctypes.c_int]
    ctf.bt_ctf_get_field.restype = vp
    ctf.bt_ctf_get_field.argtypes = [vp, vp, ctypes.c_char_p]
    ctf.bt_ctf_get_uint64.restype = ctypes.c_uint64
    ctf.bt_ctf_get_uint64.argtypes = [vp]
    BT_EVENT_FIELDS = 5

    ctx = bt.bt_context_create()
    try:
        traces = [os.path.dirname(m) for m in
                  glob.glob(os.path.join(path, "**", "metadata"), recursive=True)]
        if not traces:
            raise LttngError(f"no CTF trace under {path}")
        for t in traces:
            if bt.bt_context_add_trace(ctx, t.encode(), b"ctf", None, None, None) < 0:
                raise LttngError(f"libbabeltrace cannot open the trace {t}")
        it = ctf.bt_ctf_iter_create(ctx, None, None)
        if not it:
            raise LttngError(f"libbabeltrace: no iterator over {path}")
        n = total = 0
        try:
            while True:
                ev = ctf.bt_ctf_iter_read_event(it)
                if not ev:
                    break
                if ctf.bt_ctf_event_name(ev) == name.encode():
                    scope = ctf.bt_ctf_get_top_level_scope(ev, BT_EVENT_FIELDS)
                    total += ctf.bt_ctf_get_uint64(ctf.bt_ctf_get_field(ev, scope, b"object"))
                    n += 1
                if bt.bt_iter_next(ctf.bt_ctf_get_iter(it)) < 0:
                    break
        finally:
            ctf.bt_ctf_iter_destroy(it)
    finally:
        bt.bt_context_put(ctx)
    return n, total
