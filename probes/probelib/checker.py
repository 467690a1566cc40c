# SPDX-License-Identifier: BSD-2-Clause
"""The checks every file kind shares: resolving the file a script names,
finding the probes and functions it means there, and judging one argument
read."""

import fnmatch
import os
import re

from . import argspec
from .report import near
from .target import Target


class Checker:
    def __init__(self, report, binary, catalog, libs=()):
        self.report = report
        self.binary = binary            # Target or None
        self.catalog = catalog
        self.foreign = {}               # path -> Target
        # Targets where the binary's own probes may also live: --lib, or
        # the files a --pid process maps.  A script's __EXE__ probe that
        # the binary lacks is looked up in them, in order.
        self.libs = list(libs)

    # -- resolving a probe's or a uprobe's target file ---------------------

    def resolve(self, path, line, what, target):
        """The Target a script means by target, or None (error reported)."""
        # The wrapper's __EXE__ and __PID__, bpftrace's $1 and -p, a
        # tool's /proc/PID/exe: all mean the traced process's binary.
        if target in ("", "__EXE__") or target.startswith("$") or \
                "__PID__" in target or re.fullmatch(r"/proc/[^/]+/exe", target):
            if self.binary is None:
                self.report.error(path, line, what,
                                  f"target '{target}' needs --binary")
            return self.binary
        if self.binary is not None:
            try:
                if os.path.samefile(target, self.binary.path):
                    return self.binary
            except OSError:
                pass
        if target in self.foreign:
            return self.foreign[target]
        if not os.path.exists(target):
            self.report.error(path, line, what,
                              f"target '{target}' does not exist; use __EXE__ "
                              "(bpftrace) or the binary's path")
            self.foreign[target] = None
            return None
        try:
            t = Target(target)
        except Exception as e:  # pyelftools raises several kinds
            self.report.error(path, line, what,
                              f"cannot read '{target}' as ELF: {e}")
            t = None
        self.foreign[target] = t
        return t

    def probes(self, path, line, target, provider, name, form):
        """The probes a reference names; reports a missing one."""
        t = self.resolve(path, line, f"{provider or '*'}:{name}", target)
        if t is None:
            return None, []
        found = t.match(provider, name)
        shown = f"{provider}:{name}" if provider else name
        if not found and t is self.binary:
            for lib in self.libs:
                found = lib.match(provider, name)
                if found:
                    self._used(lib, found)
                    return lib, found
        if not found:
            names = [n for tt in [t] + (self.libs if t is self.binary else [])
                     for (p, n) in tt.probes
                     if provider is None or p == provider]
            hint = near(name, names)
            if any(ch in name + (provider or "") for ch in "*?["):
                what = f"no probe matches '{form}'"
            else:
                what = f"no such probe '{form}'"
            where = t.path
            if t is self.binary and self.libs:
                where += " or " + ", ".join(lib.path for lib in self.libs)
            self.report.error(path, line, shown, f"{what} in {where}{hint}")
        self._used(t, found)
        return t, found

    def _used(self, t, found):
        for p in found:
            self.report.used.add((t.path, p.provider, p.name))

    def function(self, path, line, target, sym, kind):
        """Check that sym (maybe with wildcards or +offset) is a function
        of the target, present under its own name and not inlined away."""
        what = f"{kind}:{sym}"
        t = self.resolve(path, line, what, target)
        if t is None:
            return
        if not t.elf:
            self.report.note(f"{path}:{line}: {what}: no --binary; symbol "
                             "not checked")
            return
        sym = re.sub(r"\+(0x[0-9a-fA-F]+|\d+)$", "", sym)
        if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", sym):
            return      # a raw address: nothing to check by name
        syms = t.symbols()
        funcs = {n for n, (_, _, ty) in syms.items()
                 if ty in ("STT_FUNC", "STT_GNU_IFUNC")}
        if any(ch in sym for ch in "*?["):
            if not [n for n in funcs if fnmatch.fnmatchcase(n, sym)]:
                self.report.error(path, line, what,
                                  f"no function matches '{sym}' in {t.path}")
            return
        if sym in syms and sym not in funcs:
            self.report.error(path, line, what,
                              f"'{sym}' is a data object in {t.path}, "
                              "not a function")
            return
        if sym not in funcs:
            clones = sorted(n for n in funcs if n.startswith(sym + "."))
            if clones:
                self.report.error(path, line, what,
                                  f"'{sym}' exists only as the compiler's "
                                  f"clone {', '.join(clones)} in {t.path} "
                                  "(inlined or specialized away); mark it "
                                  "noinline")
            else:
                self.report.error(path, line, what,
                                  f"no function '{sym}' in the symbol table "
                                  f"of {t.path}{near(sym, funcs)}")
            return
        copies = t.inlined().get(sym, 0)
        if copies:
            self.report.error(path, line, what,
                              f"'{sym}' is also inlined into {copies} "
                              f"call site(s) in {t.path}, which a uprobe "
                              "never sees; mark it noinline")
        return t, sym

    # -- checks on one argument read ----------------------------------------

    def arg_in_range(self, path, line, probe, idx, form, first, label="",
                     note=""):
        """idx is 0-based; form is how the file wrote the read; first and
        label say how the tool numbers arguments (arg0.., 1.., 0..)."""
        n = len(probe.args)
        if 0 <= idx < n:
            return probe.args[idx]
        if n == 0:
            have = "the probe has no arguments"
        else:
            have = (f"the probe has {n} argument{'s' if n != 1 else ''}, "
                    f"{label}{first}..{label}{n - 1 + first}{note}")
        self.report.error(path, line, probe.full,
                          f"{form} out of range: {have}")
        return None

    def readable(self, path, line, probe, arg, reader, form):
        """An error for each operand of arg (at any site of the probe)
        that reader (a key of argspec.READERS) cannot read: it would
        read garbage or refuse the probe."""
        for why in arg.unreadable(reader):
            self.report.error(path, line, probe.full,
                              f"{form}: {why}; {argspec.operand_fix()}")

    def string_read(self, path, line, probe, arg, idx, form):
        if not arg.may_be_pointer():
            self.report.error(path, line, probe.full,
                              f"{form} reads a string, but arg{idx} is "
                              f"{arg.describe()}, not a pointer")

