# SPDX-License-Identifier: BSD-2-Clause
"""What comes from outside, handled once: opening a file a user named, and
echoing a name or path in a one-line message.

Every probelib command opens the files it is given (a binary, a library,
a catalog, a script) through open_regular, so that a FIFO, a device, a
directory or a socket is refused at once instead of blocking in open()
or read() until killed (a FIFO with no writer), or reading forever (a
device that never ends).  The C twin is usdt_open_regular in
probes/usdt/usdt_notes.c."""

import errno
import os
import stat

# What a path that is not a regular file is, as the message names it.
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISSOCK, "a socket"))


class NotRegularFile(OSError):
    """A path that names something other than a regular file; str() is
    the reason alone ("is a FIFO, not a regular file"), as strerror is,
    worded as usdt_open_regular words it."""

    def __init__(self, path, kind):
        super().__init__(None, f"is {kind}, not a regular file", path)

    def __str__(self):
        return self.strerror


def _kind(mode):
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "not a file"


def open_regular(path, mode="rb", encoding=None):
    """The open file at path, for reading, or OSError; NotRegularFile for
    anything but a regular file (or a symbolic link to one).  O_NONBLOCK
    makes opening a FIFO return at once, so fstat can tell what it is; a
    socket cannot be opened at all (ENXIO), so it is told by stat."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ENXIO:
            try:
                st = os.stat(path)
            except OSError:
                raise e from None
            raise NotRegularFile(path, _kind(st.st_mode)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, _kind(st.st_mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, encoding=encoding)
    except BaseException:
        os.close(fd)
        raise


def why(e):
    """An OSError's reason without Python's decoration ("[Errno 2] ...:
    'path'"): the caller names the path."""
    return e.strerror or str(e)


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text):
    """text with every control character escaped (\\n, \\r, \\t, else
    \\xNN, or \\uNNNN for a C1 control), so that a name or path given by a
    user, or read from a file, cannot break a one-line message or send a
    terminal escape sequence."""
    out = []
    for ch in text:
        o = ord(ch)
        if o < 0x20 or o == 0x7f:
            out.append(_ESCAPES.get(ch, f"\\x{o:02x}"))
        elif 0x80 <= o < 0xa0:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    return "".join(out)
