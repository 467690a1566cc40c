# SPDX-License-Identifier: BSD-2-Clause
"""words: one wording for each common mistake, across every command.

The words are declared once, in probelib.toolspec (NEAREST, NO_PROBES,
TARGET_*), which the libbpf tools get through specs/gentool's SPEC_*;
this module hands them to probelib's commands: the checker, probekit-list,
probekit-structs and the argparse base (cmdline.Parser).
"""

import argparse

from . import toolspec as spec

# argparse's own words for a missing or doubled target, and ours.
_ARGPARSE_TARGET = {
    "one of the arguments -p/--pid -b/--binary is required":
        spec.TARGET_MISSING % spec.TARGET_BOTH_WAYS,
    "argument -b/--binary: not allowed with argument -p/--pid":
        spec.TARGET_BOTH,
    "argument -p/--pid: not allowed with argument -b/--binary":
        spec.TARGET_BOTH,
}
_REQUIRED = "the following arguments are required: "


def near(name, names, close=False):
    """The tail that names the nearest of names (NEAREST), or "".  With
    close, "" too unless it is at most a quarter of name's length away
    (plus one): a caller with a better hint for a far one says that."""
    best = spec.nearest(name, names)
    if best is None or (close and spec.distance(name, best) >
                        len(name) // 4 + 1):
        return ""
    return spec.NEAREST % best


def nearest_probe(name, names):
    """The tail of a "no USDT probe" line: the nearest of names, or
    NO_PROBES when there are none."""
    return spec.nearest_tail(name, names)


def arg_unknown(probe, name, names):
    """A probe without an argument of that name: the line's words, with
    the nearest of names (the tools' and the wrapper's words)."""
    return spec.ARG_UNKNOWN % (probe, name) + spec.nearest_tail(name, names)


def arg_no_names(path, probe):
    """A name read of a probe whose file names no arguments: bpftrace's
    argN counts from 0."""
    return spec.ARG_NO_NAMES % (path, probe, "arg0")


def target_missing(both_ways=True):
    return spec.TARGET_MISSING % (spec.TARGET_BOTH_WAYS if both_ways
                                  else spec.TARGET_PID)


TARGET_BOTH = spec.TARGET_BOTH


def message(name):
    """specs/limits.toml's [message.NAME]: a printf format (%s) the C,
    Python and shell commands print alike."""
    return spec.messages()[name]


def pid(s):
    """An argparse type: a PID, or PID_INVALID, as every command says it."""
    if s.isdigit() and s.isascii() and int(s, 10) > 0:
        return int(s, 10)
    raise argparse.ArgumentTypeError(message("PID_INVALID") % repr(s)[1:-1])


def usage_words(message):
    """An argparse usage error in probekit's words: a missing -p (first,
    as the libbpf tools name it before any other missing argument) or
    -p and -b together; any other message as it is."""
    if message in _ARGPARSE_TARGET:
        return _ARGPARSE_TARGET[message]
    if message.startswith(_REQUIRED) and "-p/--pid" in \
            message[len(_REQUIRED):].split(", "):
        return target_missing(False)
    return message
