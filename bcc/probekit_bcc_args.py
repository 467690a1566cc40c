# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_args: the bcc/ tools' command line.  Options shared by
every tool, parsed so that a usage error is one line (exit 2); --version;
the one-line error exit every module uses; and main(), which turns Ctrl-C
before tracing and a closed stdout into exit codes, not tracebacks.

Errors are one line "COMMAND: why" on stderr (COMMAND is probekit-TOOL-bcc
here, probekit-TOOL for the libbpf twin): exit 2 for usage, 1 for anything
else; Ctrl-C before tracing starts exits 130.
"""

import argparse
import os
import signal
import sys

# probes/: the probelib package, probekit's one Python reader and the
# argparse base every probekit command shares (probelib.cmdline).  It
# sits beside bcc/ in the checkout and under PREFIX/share/probekit alike,
# so this module's real path finds it, for every bcc/ module.
PROBES_DIR = os.path.join(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__))), "probes")
if PROBES_DIR not in sys.path:
    sys.path.insert(0, PROBES_DIR)

from probelib import cmdline, toolspec  # noqa: E402

UNITS = {"nsecs": 1, "usecs": 1000, "msecs": 1000000}


# One-line usage errors, exit 2; an unknown option named first.
Parser = cmdline.Parser


def pid_type(s):
    """A PID, or specs/limits.toml's PID_INVALID, as every command says it."""
    if s.isdigit() and s.isascii() and int(s, 10) > 0:
        return int(s, 10)
    raise argparse.ArgumentTypeError(
        toolspec.messages()["PID_INVALID"] % escaped(s))


def positive_int(s):
    try:
        v = int(s, 10)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number: %r" % s)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be positive: %r" % s)
    return v


VERSION_FILE = "VERSION"
_VERSION_CHARS = set("0123456789abcdefghijklmnopqrstuvwxyz"
                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ.+~-")


# --max-rate's largest budget: specs/limits.toml, as libbpf/'s.
MAX_RATE_LIMIT = toolspec.limits()["MAX_RATE_LIMIT"]


def version():
    """probekit's version, from its one home, the file VERSION at the top
    of the tree this module's real path is in (bcc/..: the checkout, or
    PREFIX/share/probekit, where make install keeps that tree).  (None,
    why) when there is none; (version, None) otherwise."""
    path = os.path.join(os.path.dirname(os.path.dirname(
        os.path.realpath(__file__))), VERSION_FILE)
    try:
        with open(path, "rb") as f:
            text = f.read(65)
    except FileNotFoundError:
        return None, "no %s file at %s" % (VERSION_FILE, path)
    except OSError as e:
        return None, "cannot read %s: %s" % (path, e.strerror)
    v = text.decode("ascii", "replace").strip()
    if not v or len(text) > 64 or not set(v) <= _VERSION_CHARS:
        return None, "%s does not hold a version" % path
    return v, None


class VersionAction(argparse.Action):
    """--version: "TOOL (probekit) VERSION", exit 0; one line on stderr and
    exit 1 when the version cannot be found."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0,
                         default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        v, why = version()
        if v is None:
            parser.exit(1, "%s: %s\n" % (parser.prog, why))
        sys.stdout.write("%s (probekit) %s\n" % (parser.prog, v))
        parser.exit(0)


# A spec option's "type": how its argument is parsed (flags take none).
_TYPES = {"pid": pid_type, "positive": positive_int, "string": str,
          "path": str}


def _bounded(limit):
    """positive_int at most limit, as the libbpf twin's positive_arg()."""
    def parse(s):
        v = positive_int(s)
        if v > limit:
            raise argparse.ArgumentTypeError(
                "want at most %d, got '%s'" % (limit, s))
        return v
    return parse


def add_spec_option(p, o, required=False, help=None, types=None, spec=None,
                    late_default=False):
    """Add option o, as a spec declares it (specs/README.md), to p (a
    parser or a group): its names, argument, type (a tool's own from
    types, {name: function}), bound, default and whether it repeats.
    spec, the tool's, lets the help say o's rules; late_default leaves
    the default None (probekit_bcc_spec's parser sets it after its
    rules)."""
    names = (["-" + o["short"]] if "short" in o else []) + ["--" + o["long"]]
    kw = {"help": (help or toolspec.help_text(o, spec=spec)).replace("\n", " "),
          "dest": o["long"].replace("-", "_")}
    if o["type"] == "flag":
        kw["action"] = "store_true"
    else:
        kw["metavar"] = o["arg"]
        kw["type"] = dict(_TYPES, **(types or {}))[o["type"]]
        if "max" in o:
            kw["type"] = _bounded(toolspec.value(o["max"]))
        if "default" in o and not late_default:
            kw["default"] = toolspec.value(o["default"])
    if o.get("append"):
        kw["action"], kw["default"] = "append", []
    if required:
        kw["required"] = True
    p.add_argument(*names, **kw)


def add_common(p, name, **kw):
    """Add the common option --name (specs/common.toml) to p."""
    add_spec_option(p, toolspec.common_option(name), **kw)


def parser(prog, description, examples, target=True):
    """The shared options (specs/common.toml).  target=False leaves out
    -p and the positional [interval [count]], for a tool that selects its
    target itself and has positionals of its own before them
    (add_interval())."""
    p = Parser(prog=command(prog), description=description,
               formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog=examples)
    p.add_argument("--version", action=VersionAction,
                   help=toolspec.common_option("version")["help"])
    if target:
        add_common(p, "pid", required=True)
    for name in ("timestamp", "duration", "json", "max-rate"):
        add_common(p, name)
    if target:
        add_interval(p)
    p.add_argument("--ebpf", action="store_true", help=argparse.SUPPRESS)
    return p


def add_interval(p):
    """The positional [interval [count]]."""
    p.add_argument("interval", nargs="?", type=positive_int,
                   help="output interval, in seconds")
    p.add_argument("count", nargs="?", type=positive_int,
                   help="number of outputs")


def add_units(p, default):
    """-m/-u (and -n) select the latency unit; default is 'usecs' etc."""
    g = p.add_mutually_exclusive_group()
    for name in ("milliseconds", "microseconds", "nanoseconds"):
        o = toolspec.common_option(name)
        unit = o["short"] + "secs"
        g.add_argument("-" + o["short"], "--" + name, dest="unit",
                       action="store_const", const=unit,
                       help=o["help"] + (" (default)" if unit == default
                                         else ""))
    p.set_defaults(unit=default)


def defines(cflags):
    """The -DNAME=VALUE cflags as #define lines, for --ebpf; a bare
    -DNAME (probekit_bcc_pairs' HAVE_GROUP_DEAD) is 1, as for the
    compiler."""
    return "".join("#define %s %s\n" % tuple((f[2:] + "=1").split("=")[:2])
                   for f in cflags)


# Ctrl-C before tracing starts: recorded here, acted on by
# probekit_bcc.run() before it says "Tracing".  Not a KeyboardInterrupt:
# one raised while Python runs a finalizer (BCC's and pyelftools' objects
# have them) is printed and dropped, and the tool then traced on, deaf to
# the Ctrl-C it had already been sent.
EARLY_SIGINT = []


def _early_sigint(signum, frame):
    EARLY_SIGINT.append(signum)


def main(fn):
    """Run a tool's main(): Ctrl-C before tracing starts exits 130 and a
    closed stdout (| head) exits quietly, neither with a traceback."""
    signal.signal(signal.SIGINT, _early_sigint)
    try:
        code = fn()
        sys.stdout.flush()
    except KeyboardInterrupt:
        os._exit(130)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os._exit(141)
    sys.exit(code)


def command(tool):
    """The command a bcc/ tool is run as: probekit-TOOL-bcc (README.md,
    "Names"); TOOL alone names it in --json, as its libbpf twin does."""
    return "probekit-%s-bcc" % tool


def escaped(s):
    """s as an error line may echo it: control characters (a newline in
    a probe name) as \\n, \\t or \\xHH, so the error stays one line, as
    libbpf/tool_options.c's escaped() writes them."""
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
    return "".join(named.get(c) or ("\\x%02x" % ord(c) if ord(c) < 0x20 or
                                    ord(c) == 0x7f else c) for c in s)


def die(tool, msg, code=1):
    sys.stdout.flush()
    sys.stderr.write("%s: %s\n" % (command(tool), msg))
    sys.exit(code)


