# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_spec: a bcc/ tool's command line, made at run time from
its spec (tools/TOOL.toml, tools/common.toml) through probekit_spec, the
same declarations tools/gentool turns into the libbpf twin's option
table.  The usage line and the examples are rendered by the same code
for both forms, so only the command's name differs between their --help.
"""

import argparse

import probekit_bcc_args as cli
import probekit_spec as spec_mod

def parser(tool, types=None):
    """The argparse parser of probekit-TOOL-bcc, from tools/TOOL.toml;
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
    p = cli.Parser(prog=cmd, usage=usage,
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
    for o in spec["option"]:
        into = p
        if "group" in o:
            into = groups.setdefault(o["group"],
                                     p.add_mutually_exclusive_group())
        cli.add_spec_option(into, o, types=types)
    for r in spec["retired"]:
        p.retire(r["short"], spec_mod.retired_line(r))
    if not spec.get("operands"):
        cli.add_interval(p)
    p.add_argument("--ebpf", action="store_true", help=argparse.SUPPRESS)
    return p
