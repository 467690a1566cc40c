# SPDX-License-Identifier: BSD-2-Clause
"""BCC tools (Python with embedded BPF C): every probe a tool enables
exists and its fn_name is a function of the program; every
bpf_usdt_readarg() reads an argument that exists, into a variable of its
exact size (else BCC 0.26 returns -1 and leaves the variable as it was),
and a pointer when it reads a string; uprobe functions are real and not
inlined away, PT_REGS_PARMn within their parameters, PT_REGS_RC only in a
uretprobe.

The check runs in three phases: read_tool() finds what the Python names
(programs, USDT contexts, enabled probes, uprobes); resolve them against
the binary; then check the C of each BPF function against what it is
attached to."""

import ast
import os
import re
from dataclasses import dataclass, field

from .ctext import (CText, c_calls, c_type_size, line_of, mask_c_like,
                    read_text, to_int)
from .pyeval import PyEval, call_arg, call_name, python_c_text

# Helpers that enable USDT probes from a list of (probe, fn_name) pairs,
# the probe named "provider:name", in the traced process (the --binary):
# the helper's name and the position of that list among its arguments.
# probekit's own bcc/ tools use usdt_context (bcc/probekit_bcc_probes.py).
# Any other call given such a list as the keyword argument probes= is read
# the same way, so a project's own helper needs no entry here if it takes
# the list by that name.
PAIR_HELPERS = {"usdt_context": 2}

_UPROBE_CALLS = ("attach_uprobe", "attach_uretprobe")


@dataclass
class BccTool:
    """What a tool's Python names.  enables: (line, target, provider,
    probe, fn_name); uprobes: (line, target, sym, sym_re, fn_name, kind)."""
    path: str
    c_sources: list                 # (path, masked C)
    usdt_paths: dict = field(default_factory=dict)
    enables: list = field(default_factory=list)
    uprobes: list = field(default_factory=list)


def check_bcc(ck, path, text):
    tool = read_tool(ck, path, text)
    if tool is None:
        return
    funcs = {}              # fn name -> (source path, CText)
    for cpath, masked in tool.c_sources:
        ct = CText(masked)
        for fname in ct.funcs:
            funcs.setdefault(fname, (cpath, ct))
    attached = _resolve_enables(ck, tool, funcs)
    uprobe_fns, uprobe_syms = _resolve_uprobes(ck, tool, funcs)
    for cpath, masked in tool.c_sources:
        _check_c(ck, cpath, masked, attached, uprobe_fns, uprobe_syms)


def read_tool(ck, path, text):
    """The BccTool of a tool's text, or None when it is not Python."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        ck.report.error(path, e.lineno or 1, "-", f"not valid Python: {e.msg}")
        return None
    ev = PyEval()
    ev.visit(tree)
    tool = BccTool(path, [(path, mask_c_like(python_c_text(text, tree)))])
    for node, env in ev.calls:
        name = call_name(node)
        handler = _CALLS.get(name)
        if handler is None and (name in PAIR_HELPERS or any(
                k.arg == "probes" for k in node.keywords)):
            handler = _on_pairs
        if handler is None and (name in _UPROBE_CALLS or any(
                isinstance(a, ast.Attribute) and a.attr in _UPROBE_CALLS
                for a in node.args)):
            handler = _on_uprobe
        if handler is not None:
            handler(ck, tool, ev, env, node, name)
    return tool


def _on_bpf(ck, tool, ev, env, node, name):
    src = call_arg(ev, env, node, None, "src_file")
    if isinstance(src, str) and src != "?":
        cpath = os.path.join(os.path.dirname(tool.path), src)
        try:
            tool.c_sources.append((cpath, mask_c_like(read_text(cpath))))
        except (OSError, ValueError) as e:
            ck.report.error(tool.path, node.lineno, "-",
                            f"cannot read src_file {src}: {e}")


def _on_usdt(ck, tool, ev, env, node, name):
    p = call_arg(ev, env, node, None, "path")
    if isinstance(p, str) and p != "?":
        tool.usdt_paths[id(node)] = p


def _on_enable(ck, tool, ev, env, node, name):
    probe = call_arg(ev, env, node, 0, "probe")
    fn = call_arg(ev, env, node, 1, "fn_name")
    if not isinstance(probe, str) or probe == "?" or \
            not isinstance(fn, str) or fn == "?":
        ck.report.error(tool.path, node.lineno, "-",
                        f"{name}: probe and fn_name must be string "
                        "literals (or loop over literals) for "
                        "probecheck to check them")
        return
    # USDT(path="...") names the binary; USDT(pid=...) the process's.
    recv = node.func.value if isinstance(node.func, ast.Attribute) else None
    ctx = ev.usdt_vars.get(recv.id) if isinstance(recv, ast.Name) else None
    tgt = tool.usdt_paths.get(id(ctx), "") if ctx is not None else ""
    prov, _, pname = probe.rpartition(":")
    tool.enables.append((node.lineno, tgt, prov or None, pname, fn))


def _on_pairs(ck, tool, ev, env, node, name):
    pairs = call_arg(ev, env, node, PAIR_HELPERS.get(name), "probes")
    if not isinstance(pairs, tuple) or not all(
            isinstance(p, tuple) and len(p) == 2 and
            all(isinstance(x, str) for x in p) for p in pairs):
        ck.report.error(tool.path, node.lineno, "-",
                        f"{name}: probes must be a literal list "
                        "of (probe, fn_name) pairs for probecheck to "
                        "check them")
        return
    for probe, fn in pairs:
        prov, _, pname = probe.rpartition(":")
        tool.enables.append((node.lineno, "", prov or None, pname, fn))


def _on_uprobe(ck, tool, ev, env, node, name):
    if name not in _UPROBE_CALLS:
        # A wrapper given b.attach_uprobe and its keyword arguments.
        name = [a.attr for a in node.args if isinstance(a, ast.Attribute)
                and a.attr in _UPROBE_CALLS][0]
    sym = call_arg(ev, env, node, None, "sym")
    sym_re = call_arg(ev, env, node, None, "sym_re")
    fn = call_arg(ev, env, node, None, "fn_name")
    tgt = call_arg(ev, env, node, None, "name")
    tgt = tgt if isinstance(tgt, str) and tgt != "?" else ""
    kind = "uprobe" if name == "attach_uprobe" else "uretprobe"
    tool.uprobes.append((node.lineno, tgt, sym, sym_re, fn, kind))


_CALLS = {"BPF": _on_bpf, "USDT": _on_usdt, "enable_probe": _on_enable,
          "enable_probe_or_bail": _on_enable}


def _resolve_enables(ck, tool, funcs):
    """{fn name: [Probe]} of the enabled probes, each checked to exist."""
    attached = {}
    for line, tgt, prov, pname, fn in tool.enables:
        _, found = ck.probes(tool.path, line, tgt, prov, pname,
                             f"{prov + ':' if prov else ''}{pname}")
        if fn not in funcs:
            ck.report.error(tool.path, line,
                            found[0].full if found else pname,
                            f"fn_name '{fn}' is not a function of the BPF program")
        attached.setdefault(fn, []).extend(found)
    return attached


def _resolve_uprobes(ck, tool, funcs):
    """({fn name: {uprobe, uretprobe}}, {fn name: [(Target, function)]})
    of the uprobes, each function checked to be one a uprobe sees."""
    uprobe_fns, uprobe_syms = {}, {}
    path = tool.path
    for line, tgt, sym, sym_re, fn, kind in tool.uprobes:
        if isinstance(sym, str) and sym != "?":
            found = ck.function(path, line, tgt, sym, kind)
            if found and kind == "uprobe" and isinstance(fn, str):
                uprobe_syms.setdefault(fn, []).append(found)
        elif isinstance(sym_re, str) and sym_re != "?":
            t = ck.resolve(path, line, f"{kind}:{sym_re}", tgt)
            if t and not any(re.match(sym_re, s) for s in t.symbols()):
                ck.report.error(path, line, f"{kind}:{sym_re}",
                                f"sym_re '{sym_re}' matches no symbol of {t.path}")
        else:
            ck.report.note(f"{path}:{line}: attach_{kind}: sym is not a "
                           "literal or an argparse default; not checked")
        if isinstance(fn, str):
            if fn not in funcs:
                ck.report.error(path, line, f"{kind}:{sym}",
                                f"fn_name '{fn}' is not a function of the BPF program")
            uprobe_fns.setdefault(fn, set()).add(kind)
    return uprobe_fns, uprobe_syms


def _check_c(ck, cpath, masked, attached, uprobe_fns, uprobe_syms):
    """Phase 3: the C of each BPF function against what it is attached
    to: its USDT readargs, PT_REGS_PARMn and PT_REGS_RC."""
    ct = CText(masked)
    for fname, (_, _, b0, b1, _) in ct.funcs.items():
        for call in ("bpf_usdt_readarg_p", "bpf_usdt_readarg"):
            for off, args in c_calls(masked, call, b0, b1):
                if call == "bpf_usdt_readarg" and \
                        masked.startswith("bpf_usdt_readarg_p", off):
                    continue
                _bcc_readarg(ck, cpath, masked, ct, fname, off, call,
                             args, attached.get(fname))
        for t, sym in uprobe_syms.get(fname, ()):
            params = t.params(sym)
            if params is None:
                continue
            for m in re.finditer(r"\bPT_REGS_PARM(\d)\s*\(", masked[b0:b1]):
                n = int(m.group(1))
                if n > len(params):
                    ck.report.error(
                        cpath, line_of(masked, b0 + m.start()),
                        f"uprobe:{sym}",
                        f"PT_REGS_PARM{n} out of range: {sym}() takes "
                        f"{len(params)} argument"
                        f"{'s' if len(params) != 1 else ''}")
        if "uretprobe" not in uprobe_fns.get(fname, {"uretprobe"}):
            m = re.search(r"\bPT_REGS_RC\s*\(", masked[b0:b1])
            if m:
                ck.report.error(cpath, line_of(masked, b0 + m.start()),
                                f"uprobe:{fname}",
                                "PT_REGS_RC in a function attached only "
                                "as a uprobe; the return value is set in "
                                "a uretprobe")


def _bcc_readarg(ck, cpath, masked, ct, fname, off, call, args, probes):
    line = line_of(masked, off)
    n = to_int(args[0]) if args else None
    if n is None or len(args) < 3:
        return
    form = f"{call}({n})"
    if probes is None:
        ck.report.error(cpath, line, fname,
                        f"{form} in {fname}(), which no enable_probe attaches "
                        "to a USDT probe (BCC generates readarg only for "
                        "the fn_name of a probe)")
        return
    dest = args[2]
    size = None
    dtype = None
    is_ptr_read = call == "bpf_usdt_readarg_p"
    m = re.fullmatch(r"&\s*([A-Za-z_][\w.>\s-]*)", dest)
    if m and not is_ptr_read:
        var = re.sub(r"\s+", "", m.group(1))
        dtype = ct.var_type(fname, var)
        if dtype and not dtype.endswith("[]"):
            size = c_type_size(dtype)
        # A value later passed to bpf_probe_read*() is used as a pointer.
        f = ct.funcs[fname]
        rest = masked[off:f[3]]
        base = re.escape(var.split(".")[0].split("->")[0]) if "." not in var \
            and "->" not in var else re.escape(var).replace(r"\.", r"\s*\.\s*")
        # (directly, or through a macro with STR in its name).
        if re.search(r"\b(?:bpf_probe_read\w*|\w*(?:STR|str)\w*)\s*\([^;]*\b"
                     + base + r"\b", rest):
            is_ptr_read = True
    for probe in probes:
        arg = ck.arg_in_range(cpath, line, probe, n - 1, form, 1, "",
                              " (BCC counts from 1)")
        if arg is None:
            continue
        if is_ptr_read:
            ck.string_read(cpath, line, probe, arg, n - 1, form)
        if size is not None and size != arg.size:
            ck.report.error(cpath, line, probe.full,
                            f"{form} into '{dtype} {var}' ({size} bytes) but "
                            f"arg{n - 1} is {arg.sized()}: "
                            "BCC returns -1 and leaves the variable unset")
