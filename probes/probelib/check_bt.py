# SPDX-License-Identifier: BSD-2-Clause
"""bpftrace scripts: every usdt probe named exists; every argN read
exists and is within the installed bpftrace's reach (arg0..arg5 for a
uprobe; for a USDT probe as many as it reads, detected); str() only of
pointers;
printf conversions that fit the argument; uprobe functions that are real
and not inlined away, read within their parameters; retval only in
uretprobes."""

from . import argspec, bpftrace, features, installed, words
from .bpftrace import UPROBE_MAX_ARG, usdt_max_arg
from .check_structs import check_struct_reads



def arg_limit(i, last=UPROBE_MAX_ARG, usdt=False):
    """The error for argI beyond the last one bpftrace reads."""
    if usdt:
        return (f"arg{i} exists, but {installed.bpftrace()} reads only "
                f"arg0..arg{last} of a USDT probe; read it with BCC or "
                "libbpf")
    return (f"arg{i} exists, but {installed.bpftrace()} reads only "
            f"arg0..arg{last} on x86_64 (\"x86_64 doesn't support arg{i}\"); "
            "read it with BCC or libbpf")


def check_bpftrace(ck, path, text):
    script = bpftrace.parse(text)
    for block in script.blocks:
        check_bt_block(ck, path, script, block)
    check_struct_reads(ck, path, script)


def check_bt_block(ck, path, script, block):
    """Check one probe block: resolve its attach points, then what its
    predicate and action read against each."""
    targets = []            # (kind, what _resolve found)
    for ap in block.points:
        t = _resolve(ck, path, script.line(ap.off), ap)
        if t is not None:
            targets.append(t)
    first = block.points[0].shown if block.points else ""
    for kind, found in targets:
        if kind in ("usdt", "uprobe") and block.retval is not None:
            if kind == "uprobe":
                label = f"uprobe:{found[1]}" if found else first
            else:
                label = found[0].full if found else first
            ck.report.error(path, script.line(block.retval), label,
                            f"retval is only set in a uretprobe, not in a {kind}")
        if kind == "uprobe" and found:
            _uprobe_reads(ck, path, script, block, *found)
        elif kind == "uretprobe":
            label = f"uretprobe:{found[1]}" if found else first
            for r in block.reads:
                if r.direct:
                    ck.report.error(path, script.line(r.off), label,
                                    f"{r.form} in a uretprobe: arguments are "
                                    "gone at return; read them at entry")
        elif kind == "usdt":
            for probe in found:
                _usdt_reads(ck, path, script, block, probe)


def _resolve(ck, path, line, ap):
    """(kind, [Probe]) for a usdt point, (kind, (Target, function) or None)
    for a uprobe or uretprobe; None for a point that is not checked (an
    error is reported where it is malformed)."""
    parts = ap.parts
    if ap.kind is None:
        return None
    if ap.kind == "usdt":
        if len(parts) == 4:
            tgt, prov, name = parts[1], parts[2], parts[3]
        elif len(parts) == 3:
            tgt, prov, name = parts[1], None, parts[2]
            if ck.catalog and tgt == ck.catalog["provider"]:
                ck.report.error(path, line, f"{tgt}:{name}",
                                f"'{ap.text}' reads '{tgt}' as a file path; "
                                f"write usdt::{tgt}:{name} or "
                                f"usdt:__EXE__:{tgt}:{name}")
                return None
        else:
            ck.report.error(path, line, ap.text,
                            "usdt attach point needs usdt:PATH:PROVIDER:PROBE")
            return None
        _, found = ck.probes(path, line, tgt.strip('"'), prov or None, name,
                             ap.text)
        return "usdt", found
    if len(parts) < 3:
        ck.report.error(path, line, ap.text,
                        f"{ap.kind} attach point needs {ap.kind}:PATH:FUNCTION "
                        f"(PATH may be __EXE__)")
        return None
    tgt, sym = parts[1].strip('"'), parts[-1]
    if len(parts) == 4:
        sym = parts[3]      # uprobe:PATH:LANG:FUNCTION
        if parts[2] not in ("c", ""):
            return None
    return ap.kind, ck.function(path, line, tgt, sym, ap.kind)


def _uprobe_reads(ck, path, script, block, t, sym):
    """argN of a uprobe: within bpftrace's reach and the function's
    parameters (from DWARF, when known); str() only of a pointer."""
    params = t.params(sym)
    what = f"uprobe:{sym}"
    for r in block.reads:
        if r.index > UPROBE_MAX_ARG and r.direct and \
                (params is None or r.index < len(params)):
            ck.report.error(path, script.line(r.off), what,
                            arg_limit(r.index))
    for r in (block.reads if params is not None else ()):
        line = script.line(r.off)
        if r.index >= len(params) and r.direct:
            n = len(params)
            ck.report.error(path, line, what,
                            f"{r.form} out of range: {sym}() takes "
                            f"{n} argument{'s' if n != 1 else ''}"
                            + (f", arg0..arg{n - 1}" if n else ""))
        elif r.string and r.index < len(params) and not params[r.index][2]:
            p = params[r.index]
            ck.report.error(path, line, what,
                            f"{r.form} reads a string, but arg{r.index} "
                            f"of {sym}() is '{p[0]}' "
                            f"({p[1]} bytes), not a pointer")


def _usdt_reads(ck, path, script, block, probe):
    """argN of a USDT probe within its arguments and bpftrace's reach;
    str() and printf %s only of pointers, printf %d not of strings.  A
    bpftrace that refuses a whole probe for one operand it cannot parse
    (detected) fails on any such operand, read or not."""
    if features.bpftrace()["whole_probe"]:
        read = {r.index for r in block.reads if r.direct}
        for i, a in enumerate(probe.args):
            if i not in read:
                ck.readable(path, script.line(block.points[0].off), probe, a,
                            argspec.BPFTRACE, f"attaching fails: arg{i}")
    for r in block.reads:
        line = script.line(r.off)
        # A read of argN itself (argN, str(argN)): in range, within
        # bpftrace's reach, of an operand bpftrace reads.  str($x) was
        # checked so where $x = argN.
        if r.direct:
            if 0 <= r.index < len(probe.args):
                ck.readable(path, line, probe, probe.args[r.index],
                            argspec.BPFTRACE, r.form)
            last = usdt_max_arg()
            if ck.arg_in_range(path, line, probe, r.index, r.form, 0, "arg") \
                    and r.index > last:
                ck.report.error(path, line, probe.full,
                                arg_limit(r.index, last, usdt=True))
        if r.string and r.index < len(probe.args):
            ck.string_read(path, line, probe, probe.args[r.index], r.index,
                           r.form)
    for r, name in block.named:
        _named_read(ck, path, script, probe, r, name)
    names = [a.name for a in probe.args]
    for off, conv, expr in block.printfs:
        m = bpftrace.ARG_EXPR.fullmatch(expr)
        named = bpftrace.ARGS_NAME.fullmatch(expr)
        if m and int(m.group(1)) < len(probe.args):
            arg = probe.args[int(m.group(1))]
        elif named and named.group(1) in names:
            # args.NAME: the argument of that name (a name the probe
            # lacks was reported above).
            arg = probe.args[names.index(named.group(1))]
        else:
            continue
        if conv == "s" and arg.pointer is False:
            ck.report.error(path, script.line(off), probe.full,
                            f"printf %s of {expr}, which is the integer "
                            f"{arg.ctype}; use %d")
        elif conv == "s":
            ck.report.error(path, script.line(off), probe.full,
                            f"printf %s of {expr}, an integer to "
                            f"bpftrace; use str({expr})")
        elif conv in "diu" and arg.ctype and arg.ctype.startswith("char *"):
            ck.report.error(path, script.line(off), probe.full,
                            f"printf %{conv} of {expr}, which is the "
                            f"string {arg.ctype}; use %s and str({expr})")


def _named_read(ck, path, script, probe, r, name):
    """args.NAME in a usdt block (probekit-bpftrace reads it as the argN
    of that name, per probe): the probe must name its arguments (in the
    binary's probekit note, or the catalog) and have one of that name,
    which is then checked as argN is; str(args.NAME) only of a pointer."""
    line = script.line(r.off)
    names = [a.name for a in probe.args]
    if probe.args and None in names:
        ck.report.error(path, line, probe.full, words.arg_no_names(
            probe.path, probe.full))
        return
    if name not in names:
        ck.report.error(path, line, probe.full,
                        words.arg_unknown(probe.full, name, names))
        return
    i = names.index(name)
    ck.readable(path, line, probe, probe.args[i], argspec.BPFTRACE, r.form)
    last = usdt_max_arg()
    if i > last:
        ck.report.error(path, line, probe.full,
                        f"{r.form} is arg{i}: " + arg_limit(i, last, usdt=True))
    if r.string:
        ck.string_read(path, line, probe, probe.args[i], i, r.form)
