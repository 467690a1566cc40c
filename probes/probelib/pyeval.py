# SPDX-License-Identifier: BSD-2-Clause
"""A small evaluator of Python source, enough to read which probes and
functions a BCC tool names: calls with their literal arguments, through
loops over literal tuples, names assigned a literal once, and argparse
defaults; and the tool's embedded C, at the offsets it has in the file."""

import ast
import re


class PyEval(ast.NodeVisitor):
    """Collect calls with their literal arguments, binding loop variables
    that iterate over literal tuples and names assigned a literal once."""

    def __init__(self):
        self.calls = []         # (node, env)
        self.env = {}
        self.consts = {}
        self.argdefaults = {}   # argparse dest -> literal default
        self.usdt_vars = {}     # name -> the USDT(...) call assigned to it

    def literal(self, node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            return self.consts.get(node.id)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.literal(e) for e in node.elts)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            # args.function: the argparse default, the value the tool
            # runs with unless told otherwise.
            return self.argdefaults.get(node.attr)
        return None

    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = self.literal(node.value)
            if v is not None:
                self.consts[node.targets[0].id] = v
            if isinstance(node.value, ast.Call) and \
                    call_name(node.value) == "USDT":
                self.usdt_vars[node.targets[0].id] = node.value
        self.generic_visit(node)

    def visit_For(self, node):
        seq = self.literal(node.iter)
        if not isinstance(seq, tuple):
            return self.generic_visit(node)
        self.visit(node.iter)
        for item in seq:
            saved = dict(self.env)
            self._bind(node.target, item)
            for st in node.body:
                self.visit(st)
            self.env = saved
        for st in node.orelse:
            self.visit(st)

    def _bind(self, target, value):
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and \
                isinstance(value, tuple) and len(value) == len(target.elts):
            for t, v in zip(target.elts, value):
                self._bind(t, v)

    def visit_Call(self, node):
        self.calls.append((node, dict(self.env)))
        if call_name(node) == "add_argument":
            dest = None
            for k in node.keywords:
                if k.arg == "dest" and isinstance(k.value, ast.Constant):
                    dest = k.value.value
            opts = [a.value for a in node.args if isinstance(a, ast.Constant)
                    and isinstance(a.value, str)]
            if dest is None and opts:
                longs = [o for o in opts if o.startswith("--")]
                dest = (longs or opts)[0].lstrip("-").replace("-", "_")
            for k in node.keywords:
                if k.arg == "default" and dest:
                    v = self.literal(k.value)
                    if v is not None:
                        self.argdefaults[dest] = v
        self.generic_visit(node)


def call_name(node):
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return None


def call_arg(ev, env, node, pos, kw):
    """The literal value of a call argument by keyword or position; the
    string '?' when it is there but not a literal; None when absent."""
    expr = None
    for k in node.keywords:
        if k.arg == kw:
            expr = k.value
    if expr is None and pos is not None and len(node.args) > pos:
        expr = node.args[pos]
    if expr is None:
        return None
    saved = ev.env
    ev.env = env
    v = ev.literal(expr)
    ev.env = saved
    return "?" if v is None else v


def python_c_text(text, tree):
    """The file's text with everything but string literals blanked: the
    embedded BPF C, at its own offsets (so line numbers are the file's)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def off(lineno, col):
        ln = lines[lineno - 1] if lineno - 1 < len(lines) else ""
        # ast columns count UTF-8 bytes.
        return starts[lineno - 1] + len(ln.encode()[:col].decode(errors="replace"))

    keep = bytearray(len(text))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and getattr(node, "end_lineno", None):
            a = off(node.lineno, node.col_offset)
            b = min(off(node.end_lineno, node.end_col_offset), len(text))
            # Keep what is between the Python quotes: that is the C.
            q = re.match(r'[rRbBuUfF]*("""|\'\'\'|"|\')', text[a:b])
            if not q or not text[a:b].endswith(q.group(1)):
                continue
            for k in range(a + q.end(), b - len(q.group(1))):
                keep[k] = 1
    return "".join(ch if keep[i] or ch == "\n" else " "
                   for i, ch in enumerate(text))

