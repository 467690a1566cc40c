# SPDX-License-Identifier: BSD-2-Clause
"""cmdline: the argparse base every probekit Python command uses
(probes/*, bcc/*, target/rpc.py, target/blktgt-trace), so that they keep
one set of conventions (ARCHITECTURE.md, "Conventions"):

  - a usage error is one line, "PROG: why (see --help)", exit 2, its
    control characters escaped (probelib.inputs.one_line);
  - an unknown option is named first, before any missing required
    argument (argparse alone would complain of the missing -p and never
    mention the misspelt option that was meant to be it);
  - a short option the command no longer takes (retire()) is refused
    with the line that names its new spelling, exit 2;
  - --version comes from probelib.version, the one reader of VERSION.

A command finds this package by its own real path: probes/ sits beside
bcc/ and target/ in the checkout and under PREFIX/share/probekit.
"""

import argparse
import re
import sys

from probelib.inputs import one_line
from probelib.version import VersionAction, probekit_version  # noqa: F401

__all__ = ["Parser", "VersionAction", "probekit_version"]

# An argument that looks like a negative number is a value, not an option.
_NUMBER = re.compile(r"-\d")


class Parser(argparse.ArgumentParser):
    """argparse with probekit's one-line usage errors."""

    def retire(self, letter, line):
        """Refuse -LETTER, which this command no longer takes, with
        "PROG: LINE" (a line that says what to write instead), exit 2.
        The BCC tools take LINE from their spec (toolspec.RETIRED)."""
        if not hasattr(self, "_retired"):
            self._retired = {}
        self._retired["-" + letter] = line

    def error(self, message):
        # A missing or doubled -p/-b in the words every command uses
        # (probelib.words); a control character in what the user typed
        # cannot break the line.
        from probelib.words import usage_words
        self.exit(2, "%s: %s (see --help)\n" % (self.prog,
                                                 one_line(usage_words(message))))

    def _takes_value(self, opt):
        action = self._option_string_actions.get(opt)
        return action is not None and action.nargs != 0

    def _known(self, arg):
        """Whether arg (an option, perhaps with =VALUE or bundled short
        flags) names an option this parser has, as argparse would read
        it, abbreviations of long options included."""
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            return any(o == name or (self.allow_abbrev and o.startswith(name))
                       for o in self._option_string_actions
                       if o.startswith("--"))
        return arg[:2] in self._option_string_actions

    def _bundled_unknown(self, arg):
        """The first unknown letter of bundled short flags ("-jq": "-q"),
        as getopt names it, or None; the letters after one that takes a
        value are that value."""
        if arg.startswith("--") or "=" in arg:
            return None
        for letter in arg[1:]:
            opt = "-" + letter
            if opt not in self._option_string_actions:
                return opt
            if self._takes_value(opt):
                return None
        return None

    def unknown_option(self, args):
        """The first word of args that is an option this parser lacks,
        or None.  The values of options that take one are skipped; so is
        everything after "--"."""
        skip = False
        for arg in args:
            if skip:
                skip = False
                continue
            if arg == "--":
                return None
            if not arg.startswith("-") or arg == "-" or _NUMBER.match(arg):
                if self._subparsers is not None:
                    return None     # the rest is the subcommand's
                continue
            if not self._known(arg):
                return arg
            bad = self._bundled_unknown(arg)
            if bad:
                return bad
            skip = "=" not in arg and (
                arg.startswith("--") or len(arg) == 2) and \
                self._takes_value(arg)
        return None

    def _refuse_unknown_option(self, args):
        words = sys.argv[1:] if args is None else list(args)
        if "-h" not in words and "--help" not in words:
            bad = self.unknown_option(words)
            if bad is not None and bad[:2] in getattr(self, "_retired", {}):
                self.exit(2, "%s: %s\n" % (self.prog,
                                           self._retired[bad[:2]]))
            if bad is not None:
                self.error("unrecognized option '%s'" % bad.split("=", 1)[0])
        return words

    def parse_known_args(self, args=None, namespace=None):
        return super().parse_known_args(self._refuse_unknown_option(args), namespace)

    # Python 3.13's argparse no longer goes through parse_known_args for
    # the intermixed form (usdtcount's, usdtlat's), so it checks too.
    def parse_known_intermixed_args(self, args=None, namespace=None):
        return super().parse_known_intermixed_args(self._refuse_unknown_option(args),
                                                   namespace)
