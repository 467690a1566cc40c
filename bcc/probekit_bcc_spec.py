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

# A spec option's "type": how its argument is parsed (flags take none).
_TYPES = {"pid": cli.pid_type, "positive": cli.positive_int, "string": str,
          "path": str}


def _bounded(name, limit):
    """positive_int at most limit, as the libbpf twin's positive_arg()."""
    def parse(s):
        v = cli.positive_int(s)
        if v > limit:
            raise argparse.ArgumentTypeError(
                "want at most %d, got '%s'" % (limit, s))
        return v
    parse.__name__ = name
    return parse


def _add(p, o, spec, limits, required=False):
    names = (["-" + o["short"]] if "short" in o else []) + ["--" + o["long"]]
    kw = {"help": spec_mod.help_text(o).replace("\n", " "),
          "dest": o["long"].replace("-", "_")}
    if o["type"] == "flag":
        kw["action"] = "store_true"
    else:
        kw["metavar"] = o["arg"]
        kw["type"] = _TYPES[o["type"]]
        if "max" in o:
            limit = limits[o["max"]] if isinstance(o["max"], str) \
                else o["max"]
            kw["type"] = _bounded(o["long"], limit)
        if "default" in o:
            kw["default"] = o["default"]
    if required:
        kw["required"] = True
    p.add_argument(*names, **kw)


def parser(tool):
    """The argparse parser of probekit-TOOL-bcc, from tools/TOOL.toml.
    A spec that cannot be read is one line and exit 1."""
    try:
        spec = spec_mod.load(tool)
        commons = spec_mod.common_options(spec, "bcc")
        limits = spec_mod.limits()
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
            unit = o["long"][:1] + "secs"
            suffix = " (default)" if unit == spec["unit"] else ""
            units.add_argument("-" + o["short"], "--" + o["long"],
                               dest="unit", action="store_const", const=unit,
                               help=spec_mod.help_text(o) + suffix)
        elif o["long"] in ("pid", "binary") and target:
            _add(target, o, spec, limits)
        else:
            _add(p, o, spec, limits, required=o["long"] == "pid")
    if units:
        p.set_defaults(unit=spec["unit"])
    for o in spec["option"]:
        _add(p, o, spec, limits)
    cli.add_interval(p)
    p.add_argument("--ebpf", action="store_true", help=argparse.SUPPRESS)
    return p
