# SPDX-License-Identifier: BSD-2-Clause
"""Reporting: errors as "file:line: probe: what", notes, and the coverage
of the catalog's probes; as text, or with --json as one object:

  {"findings": [
     {"severity": "note", "file": null, "line": null, "probe": null,
      "message": "..."},                       (what the text's notes say)
     {"severity": "error", "file": "bt/x.bt", "line": 12,
      "probe": "usdt:...", "message": "..."}, ...],
   "coverage": {"used": 26, "total": 27, "of": "catalog probes",
                "files": 9, "unused": ["blktgt:io__batch"]},
   "errors": 1}

Notes come first, in the order they were found, then the errors, sorted
as the text sorts them.  "coverage" is null when there was nothing to
count against (no catalog and no binary); "info" findings are -v's notes.
The strings are as found, not escaped into one line: JSON escapes them."""

import json
import sys

from .inputs import one_line


class Report:
    def __init__(self, verbose=False, json_out=False):
        self.errors = []
        self.verbose = verbose
        self.json = json_out
        self.used = set()           # (file's path, provider, name)
        self.findings = []          # --json: the notes, as found
        self.covered = None         # --json: the coverage's counts

    def error(self, path, line, probe, what):
        # Escaped whole: a path, probe or name in it came from outside.
        self.errors.append((path, line,
                            one_line(f"{path}:{line}: {probe}: {what}"),
                            {"severity": "error", "file": path,
                             "line": line, "probe": probe,
                             "message": what}))

    def _order(self):
        order = {}
        for p, _, _, _ in self.errors:
            order.setdefault(p, len(order))
        return sorted(self.errors, key=lambda x: (order[x[0]], x[1]))

    def sorted(self):
        """By file, in the order files were first named, then by line."""
        return [e for _, _, e, _ in self._order()]

    def _finding(self, severity, what):
        self.findings.append({"severity": severity, "file": None,
                              "line": None, "probe": None, "message": what})

    def notice(self, what):
        """Worth knowing, not an error: printed on stdout."""
        if self.json:
            self._finding("note", what)
        else:
            print(f"probekit-check: note: {one_line(what)}")

    def note(self, what):
        if not self.verbose:
            return
        if self.json:
            self._finding("info", what)
        else:
            print(f"probekit-check: {one_line(what)}")

    def coverage(self, used, total, what, nfiles, unused):
        """The coverage line: used of the total probes (what they are)
        some of nfiles files read; unused names the others."""
        if self.json:
            self.covered = {"used": used, "total": total, "of": what,
                            "files": nfiles, "unused": unused}
            return
        print(one_line(
            f"probekit-check: coverage: {used} of {total} {what} used by "
            f"{nfiles} file{'s' if nfiles != 1 else ''}"
            + (f"; not used: {', '.join(unused)}" if unused else "")))

    def print_errors(self):
        """The errors, sorted, on stderr (with --json: in finish())."""
        if not self.json:
            for e in self.sorted():
                print(e, file=sys.stderr)

    def finish(self):
        """The errors' count (stderr), or with --json the whole report
        (stdout).  Returns the exit status: 1 on any error."""
        n = len(self.errors)
        if self.json:
            obj = {"findings": self.findings
                   + [f for _, _, _, f in self._order()],
                   "coverage": self.covered, "errors": n}
            sys.stdout.write(json.dumps(obj, indent=1) + "\n")
            return 1 if n else 0
        if n:
            print(f"probekit-check: {n} error{'s' if n != 1 else ''}",
                  file=sys.stderr)
            return 1
        return 0


def near(name, names, close=False):
    """"; nearest: NAME", the nearest of names by edit distance, or ""
    (probelib.words.near(): one wording across commands)."""
    from .words import near as words_near
    return words_near(name, names, close)
