# SPDX-License-Identifier: BSD-2-Clause
"""A tracer held at its first attach to a process (tests/lib/attach_pause.c,
an LD_PRELOAD library; conftest.py's attach_pause fixture builds it), so
that a test can end the process exactly while the tracer attaches: its
notes read and its programs loaded, no probe attached yet.

    hold = Hold(attach_pause, pid)
    tool = subprocess.Popen(cmd, env=dict(os.environ, **hold.env),
                            pass_fds=hold.pass_fds, ...)
    hold.wait()          # the tracer is about to attach
    ...                  # kill and reap the process
    hold.release()       # the attach runs now
"""

import socket

from probekit import TIMEOUT


class Hold:
    def __init__(self, lib, pid, at=1):
        self._mine, self._theirs = socket.socketpair()
        fd = self._theirs.fileno()
        self.env = {"LD_PRELOAD": lib, "PROBEKIT_PAUSE_PID": str(pid),
                    "PROBEKIT_PAUSE_AT": str(at), "PROBEKIT_PAUSE_FD": str(fd)}
        self.pass_fds = (fd,)

    def wait(self):
        """Return once the tracer is held; fail if it ended before its
        attach (its end closes the socket)."""
        self._theirs.close()
        self._mine.settimeout(TIMEOUT)
        assert self._mine.recv(1) == b"p", "the tracer ended before its attach"

    def release(self):
        self._mine.sendall(b"g")
        self._mine.close()
