# SPDX-License-Identifier: BSD-2-Clause
"""Reporting: errors as "file:line: probe: what", notes, and the coverage
of the catalog's probes."""

import difflib

from .inputs import one_line


class Report:
    def __init__(self, verbose=False):
        self.errors = []
        self.verbose = verbose
        self.used = set()           # (file's path, provider, name)

    def error(self, path, line, probe, what):
        # Escaped whole: a path, probe or name in it came from outside.
        self.errors.append((path, line,
                            one_line(f"{path}:{line}: {probe}: {what}")))

    def sorted(self):
        """By file, in the order files were first named, then by line."""
        order = {}
        for p, _, _ in self.errors:
            order.setdefault(p, len(order))
        return [e for _, _, e in sorted(self.errors,
                                         key=lambda x: (order[x[0]], x[1]))]

    def notice(self, what):
        """Worth knowing, not an error: printed on stdout."""
        print(f"probekit-check: note: {one_line(what)}")

    def note(self, what):
        if self.verbose:
            print(f"probekit-check: {one_line(what)}")


def near(name, names):
    m = difflib.get_close_matches(name, list(names), n=1, cutoff=0.75)
    return f" (did you mean {m[0]}?)" if m else ""

