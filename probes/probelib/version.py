# SPDX-License-Identifier: BSD-2-Clause
"""probekit's version for the commands built on probelib: the one line of
VERSION at the top of the tree this package is in (probes/probelib in a
checkout; make install keeps that tree in PREFIX/share/probekit)."""

import argparse
import os
import re
import sys

_VERSION_RE = re.compile(r"[0-9A-Za-z.+~-]{1,32}\n?")


def probekit_version(prog):
    """The version; a missing or malformed file is one line on stderr and
    exit status 1."""
    path = os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "VERSION"))
    try:
        with open(path, "rb") as f:
            text = f.read(64).decode("ascii", "replace")
    except FileNotFoundError:
        sys.exit(f"{prog}: cannot find probekit's VERSION file ({path})")
    except OSError as e:
        sys.exit(f"{prog}: cannot read {path}: {e.strerror}")
    if not _VERSION_RE.fullmatch(text):
        sys.exit(f"{prog}: {path}: not one line with a version "
                 "such as 0.3.0")
    return text.strip()


class VersionAction(argparse.Action):
    """--version: "NAME (probekit) VERSION" on stdout, exit 0.  The file
    is read only when asked, so that a broken one breaks nothing else."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0,
                         help="show probekit's version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} (probekit) {probekit_version(parser.prog)}")
        parser.exit(0)
