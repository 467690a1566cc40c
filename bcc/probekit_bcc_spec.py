# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_spec: a bcc/ tool's command line, made at run time from
its spec (specs/TOOL.toml, specs/common.toml) through toolspec, the
same declarations specs/gentool turns into the libbpf twin's option
table.  The usage line and the examples are rendered by the same code
for both forms, so only the command's name differs between their --help.
"""

import argparse

import probekit_bcc_args as cli
from probelib import toolspec as spec_mod


class _Parser(cli.Parser):
    """The parser of a tool whose spec states cross-option rules
    (toolspec.RULES): after parsing, an option given without the one
    it requires, or with one it conflicts with, is the rule's line, exit
    2; then the options the rules name get their defaults, which argparse
    left None so that an option given could be told from one not."""

    rules = ()          # [(dest, other dest, conflicts, line)]
    late = {}           # {dest: default}

    def _held(self, args):
        def given(dest):
            v = getattr(args, dest)
            return v is not None and v is not False and v != []
        for dest, other, conflicts, line in self.rules:
            if given(dest) and given(other) == conflicts:
                self.error(line)
        for dest, v in self.late.items():
            if getattr(args, dest) is None:
                setattr(args, dest, v)
        return args

    def parse_args(self, args=None, namespace=None):
        return self._held(super().parse_args(args, namespace))

    def parse_intermixed_args(self, args=None, namespace=None):
        return self._held(super().parse_intermixed_args(args, namespace))


def _dest(o):
    return o["long"].replace("-", "_")

def parser(tool, types=None):
    """The argparse parser of probekit-TOOL-bcc, from specs/TOOL.toml;
    types ({name: function}) reads the arguments of the tool's own option
    types.  A tool with operands adds them, then cli.add_interval(); for
    the others the parser ends with [interval [count]].  A spec that
    cannot be read is one line and exit 1."""
    try:
        spec = spec_mod.load(tool)
        commons = spec_mod.common_options(spec, "bcc")
    except spec_mod.SpecError as e:
        cli.die(tool, str(e))
    cmd = cli.command(tool)
    usage = spec_mod.usage(spec, cmd, "bcc")[len("usage: "):]
    p = _Parser(prog=cmd, usage=usage,
                   description=spec_mod.description(spec, "bcc"),
                   formatter_class=argparse.RawDescriptionHelpFormatter,
                   epilog="examples:\n" + spec_mod.examples(spec, cmd),
                   add_help=False)
    units = p.add_mutually_exclusive_group() if spec.get("unit") else None
    target = p.add_mutually_exclusive_group(required=True) \
        if spec["binary"] else None
    for o in commons:
        if o["long"] == "help":
            p.add_argument("-h", "--help", action="help",
                           help=spec_mod.help_text(o))
        elif o["long"] == "version":
            p.add_argument("--version", action=cli.VersionAction,
                           help=spec_mod.help_text(o))
        elif o.get("only") == "unit":
            unit = o["short"] + "secs"
            suffix = " (default)" if unit == spec["unit"] else ""
            units.add_argument("-" + o["short"], "--" + o["long"],
                               dest="unit", action="store_const", const=unit,
                               help=spec_mod.help_text(o) + suffix)
        elif o["long"] in ("pid", "binary") and target:
            cli.add_spec_option(target, o, help=o.get("help_binary"),
                                types=types)
        else:
            cli.add_spec_option(p, o, required=o["long"] == "pid",
                                types=types)
    if units:
        p.set_defaults(unit=spec["unit"])
    # Not an option: what probekit_bcc.Output prints when nothing was seen.
    p.set_defaults(empty=spec_mod.empty_result(spec))
    # Nor this: what probekit_bcc.run's drop line calls one value ("I/Os").
    p.set_defaults(hist_noun=spec_mod.hist_noun(spec)
                   if spec.get("hists") else None)
    groups = {}     # "group": options that exclude each other
    rules = spec_mod.rules(spec)
    ruled = {x["long"] for o, other, _, _ in rules for x in (o, other)}
    for o in spec["option"]:
        into = p
        if "group" in o:
            into = groups.setdefault(o["group"],
                                     p.add_mutually_exclusive_group())
        cli.add_spec_option(into, o, types=types, spec=spec,
                            late_default=o["long"] in ruled)
    p.rules = [(_dest(o), _dest(other), kind == "conflicts", line)
               for o, other, kind, line in rules]
    p.late = {_dest(o): spec_mod.value(o["default"]) for o in spec["option"]
              if o["long"] in ruled and "default" in o}
    for r in spec["retired"]:
        p.retire(r["short"], spec_mod.retired_line(r))
    if not spec.get("operands"):
        cli.add_interval(p)
    p.add_argument("--ebpf", action="store_true", help=argparse.SUPPRESS)
    return p
