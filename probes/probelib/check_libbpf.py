# SPDX-License-Identifier: BSD-2-Clause
"""libbpf programs (*.bpf.c, read with the user-space <tool>.c beside
them): every USDT probe a program is attached to exists (from its SEC()
or the user space's attach calls); BPF_USDT() parameters and
bpf_usdt_arg() reads fit the probe's arguments; uprobe functions are real
and not inlined away, and BPF_UPROBE() takes no more parameters than the
function has."""

import os
import re

from . import argspec
from .ctext import (CText, c_calls, c_params, c_type_size, line_of,
                    mask_c_like, match_close, read_text, split_top, to_int)

_SEC_PROG = re.compile(r'\bSEC\s*\(\s*"([^"]*)"\s*\)')


def check_libbpf(ck, path, text):
    masked = mask_c_like(text)
    ct = CText(masked)
    user = path[:-len(".bpf.c")] + ".c"
    attach, func_names = _user_space(ck, user)
    for line, sec, fname in _programs(text, masked, ct):
        kind, _, rest = sec.partition("/")
        kind = kind.split(".")[0]
        if kind == "usdt":
            _usdt_program(ck, path, masked, ct, line, sec, fname,
                          attach.get(fname, []))
        elif kind in ("uprobe", "uretprobe") and rest:
            _uprobe_program(ck, path, masked, ct, line, kind, rest, fname)
    for line, sym in func_names:
        ck.function(user, line, "", sym, "uprobe")


def _programs(text, masked, ct):
    """[(line, section, function)] of the programs: each SEC("...")
    followed by the function it marks."""
    progs = []
    for m in _SEC_PROG.finditer(masked):
        raw = text[m.start(1):m.end(1)]
        # The function defined right after the SEC().
        best = None
        for fname, f in ct.funcs.items():
            if f[0] >= m.end() and (best is None or f[0] < ct.funcs[best][0]):
                best = fname
        if best is None or re.search(r"[;{}=]", masked[m.end():ct.funcs[best][0]]):
            continue        # a map or the license, not a program
        progs.append((line_of(masked, m.start()), raw, best))
    return progs


def _user_space(ck, user):
    """What the user-space file says about attaching: {program: [(user
    path, line, target, provider, probe)]} of its USDT attach calls, and
    [(line, function)] its uprobes attach to."""
    attach, func_names = {}, []
    if not os.path.exists(user):
        return attach, func_names
    try:
        user_text = read_text(user)
    except (OSError, ValueError) as e:
        ck.report.error(user, 1, "-", f"cannot read: {e}")
        return attach, func_names
    um = mask_c_like(user_text)
    defaults = {}       # .field = "literal" initializers
    for dm in re.finditer(r"\.([A-Za-z_]\w*)\s*=\s*\"", um):
        k = dm.end() - 1
        e = um.find('"', k + 1)
        if e > k:
            defaults.setdefault(dm.group(1), user_text[k + 1:e])
    # bpf_program__attach_usdt(skel->progs.X, pid, path, "prov", "name",
    # opts) or a tool's wrapper around it: a call whose name says usdt
    # (or uprobe), given a skeleton program and string literals.
    for m in re.finditer(r"\b(\w*(?:usdt|uprobe)\w*)\s*\(", um):
        prog, lits = _attach_call(user_text, um, m, defaults)
        if prog is None:
            continue
        line = line_of(um, m.start())
        if "usdt" in m.group(1):
            if len(lits) < 2:
                ck.report.error(user, line, prog,
                                f"{m.group(1)}(): provider and probe must "
                                "be string literals for probecheck to "
                                "check them")
                continue
            tgt = lits[-3] if len(lits) >= 3 else ""
            attach.setdefault(prog, []).append(
                (user, line, tgt, lits[-2], lits[-1]))
        elif lits:
            func_names.append((line, lits[-1]))
    for m in re.finditer(r"\.func_name\s*=", um):
        sm = re.match(r'\s*"([^"]*)"', user_text[m.end():])
        if sm:
            func_names.append((line_of(um, m.start()), sm.group(1)))
    return attach, func_names


def _attach_call(user_text, um, m, defaults):
    """(skeleton program, [string arguments]) of the attach call matched
    by m; program None when it is given none.  A uprobe's env.func counts
    as the string its options' initializer gives it."""
    popen = m.end() - 1
    pclose = match_close(um, popen, "(", ")")
    prog = None
    lits = []
    for poff, piece in split_top(um[popen + 1:pclose - 1]):
        pm = re.search(r"progs\s*(?:\.|->)\s*([A-Za-z_]\w*)", piece)
        if pm and prog is None:
            prog = pm.group(1)
            continue
        t = piece.strip()
        if prog and len(t) >= 2 and t[0] == '"' and t[-1] == '"':
            k = popen + 1 + poff + piece.index('"')
            lits.append(user_text[k + 1:k + len(t) - 1])
        elif prog and "uprobe" in m.group(1):
            fm = re.fullmatch(r"[A-Za-z_]\w*\s*(?:\.|->)\s*([A-Za-z_]\w*)", t)
            if fm and fm.group(1) in defaults:
                lits.append(defaults[fm.group(1)])
    return prog, lits


def _usdt_program(ck, path, masked, ct, line, sec, fname, attached):
    """A SEC("usdt...") program: the probes it names or is attached to,
    then its argument reads against them."""
    rest = sec.partition("/")[2]
    refs = []
    if rest:
        parts = rest.rsplit(":", 2)
        if len(parts) != 3:
            ck.report.error(path, line, sec,
                            'SEC("usdt/PATH:PROVIDER:PROBE") expected')
            return
        refs.append((path, line, parts[0], parts[1], parts[2]))
    refs += attached
    if not refs:
        ck.report.note(f"{path}:{line}: {fname}: SEC(\"usdt\") attached "
                       "nowhere probecheck can see; not checked")
    probes = []
    for rpath, rline, tgt, prov, name in refs:
        _, found = ck.probes(rpath, rline, tgt, prov, name, f"{prov}:{name}")
        probes += found
        # libbpf parses every argument spec at attach time and refuses
        # the whole probe when one does not parse, read or not.
        for p in found:
            for i, a in enumerate(p.args):
                ck.readable(rpath, rline, p, a, argspec.LIBBPF,
                            f"attaching fails: arg{i}")
    _libbpf_usdt(ck, path, masked, ct, fname, ct.funcs[fname], probes)


def _uprobe_program(ck, path, masked, ct, line, kind, rest, fname):
    """A SEC("uprobe/PATH:FUNCTION") program: a real function, and no
    more BPF_UPROBE() parameters than it has."""
    f = ct.funcs[fname]
    tgt, _, sym = rest.rpartition(":")
    found = ck.function(path, line, tgt, sym, kind)
    params = found[0].params(found[1]) if found else None
    if kind == "uprobe" and params is not None and \
            f[4] in ("BPF_KPROBE", "BPF_UPROBE"):
        n = len(c_params(f[1]))
        if n > len(params):
            ck.report.error(path, line_of(masked, f[0]),
                            f"uprobe:{found[1]}",
                            f"{f[4]}({fname}) takes {n} arguments "
                            f"but {found[1]}() has {len(params)}")


def _libbpf_usdt(ck, path, masked, ct, fname, f, probes):
    defline = line_of(masked, f[0])
    params = c_params(f[1]) if f[4] == "BPF_USDT" else {}
    for probe in probes:
        if f[4] == "BPF_USDT":
            n = len(params)
            if n > len(probe.args):
                ck.report.error(path, defline, probe.full,
                                f"BPF_USDT({fname}) takes {n} arguments but "
                                f"the probe has {len(probe.args)}")
            for i, (pname, ptype) in enumerate(params.items()):
                if i >= len(probe.args):
                    break
                arg = probe.args[i]
                if "*" in ptype and not arg.may_be_pointer():
                    ck.report.error(path, defline, probe.full,
                                    f"BPF_USDT({fname}) takes '{ptype} {pname}' "
                                    f"as arg{i}, {arg.describe()}, which is not "
                                    "a pointer")
                    continue
                sz = c_type_size(ptype)
                if sz is not None and sz < arg.size:
                    ck.report.error(path, defline, probe.full,
                                    f"BPF_USDT({fname}) takes '{ptype} {pname}' "
                                    f"({sz} bytes) as arg{i}, {arg.sized()}: "
                                    "it is truncated")
        for off, args in c_calls(masked, "bpf_usdt_arg", f[2], f[3]):
            n = to_int(args[1]) if len(args) > 1 else None
            if n is not None:
                ck.arg_in_range(path, line_of(masked, off), probe, n,
                                f"bpf_usdt_arg(ctx, {n})", 0, "",
                                " (libbpf counts from 0)")

