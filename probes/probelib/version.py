# SPDX-License-Identifier: BSD-2-Clause
"""probekit's version for the commands built on probelib: the one line of
VERSION, found from where this package is.  Installed, the package sits in
PREFIX/share/probekit beside VERSION; in a checkout, in probes/, and
VERSION is at the top of the tree."""

import argparse
import os
import re
import sys

_VERSION_RE = re.compile(r"[0-9A-Za-z.+~-]{1,32}\n?")


def probekit_version(prog):
    """The version; a missing or malformed file is one line on stderr and
    exit status 1."""
    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tried = []
    for path in (os.path.join(home, "VERSION"),
                 os.path.join(home, "..", "VERSION")):
        path = os.path.normpath(path)
        tried.append(path)
        try:
            with open(path, "rb") as f:
                text = f.read(64).decode("ascii", "replace")
        except FileNotFoundError:
            continue
        except OSError as e:
            sys.exit(f"{prog}: cannot read {path}: {e.strerror}")
        if not _VERSION_RE.fullmatch(text):
            sys.exit(f"{prog}: {path}: not one line with a version "
                     "such as 0.3.0")
        return text.strip()
    sys.exit(f"{prog}: cannot find probekit's VERSION file "
             f"(looked for {' and '.join(tried)})")


class VersionAction(argparse.Action):
    """--version: "NAME (probekit) VERSION" on stdout, exit 0.  The file
    is read only when asked, so that a broken one breaks nothing else."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0,
                         help="show probekit's version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} (probekit) {probekit_version(parser.prog)}")
        parser.exit(0)
