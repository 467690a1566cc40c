# SPDX-License-Identifier: BSD-2-Clause
"""What probekit-check knows about the probes of a file: each probe's
arguments with their sizes and, for the --binary when a catalog is given,
the catalog's types; the file's symbols and DWARF, read when first asked."""

import fnmatch

from . import argspec, dwarf, elf, notes
from .catalog import ctype_name


class Arg:
    def __init__(self, size, signed, ctype=None, pointer=None, spec="",
                 arch=argspec.X86_64, name=None):
        self.size = size
        self.signed = signed
        self.name = name            # its name, from the catalog or the
                                    # binary's probekit note (args.NAME)
        self.ctype = ctype          # catalog type, when there is a catalog
                                    # (or the binary's probekit note)
        self.pointer = pointer      # True/False from the catalog, else None
        self.spec = spec            # e.g. "-4@%eax"
        self.operands = []          # each site's operand, once: "%eax", ...
        self.arch = arch            # the binary's: how to read operands

    def unreadable(self, reader):
        """[why] for each operand of this argument reader cannot read."""
        return [w for w in (argspec.reader_problem(op, reader,
                                                   arch=self.arch)
                            for op in self.operands) if w]

    def may_be_pointer(self):
        if self.pointer is not None:
            return self.pointer
        return self.size == 8 and not self.signed

    def describe(self):
        if self.ctype:
            return f"'{self.ctype}'"
        kind = "signed" if self.signed else "unsigned"
        a = "an" if self.size == 8 else "a"
        return f"{a} {self.size}-byte {kind} integer ({self.spec})"

    def sized(self):
        """describe(), with the size when it does not already say it."""
        return self.describe() + (f" ({self.size} bytes)" if self.ctype else "")


class Probe:
    def __init__(self, provider, name, args, path=None):
        self.provider = provider
        self.name = name
        self.args = args
        self.path = path            # the file (or catalog) it is in

    @property
    def full(self):
        return f"{self.provider}:{self.name}"


class Target:
    """The probes and symbols of one ELF file, merged with the catalog's
    types when the file is the --binary and a catalog was given, else
    with those of the file's own probekit notes (its arguments' names and
    C types, which probekit's header puts in the binary)."""

    def __init__(self, path, catalog=None):
        self.path = path
        self.elf = True
        self.notes = notes.read_probes(path)
        self._syms = None
        self._inlined = None
        self.probes = {}
        cat = {}
        if catalog:
            cat = {(catalog["provider"], p["name"]): p
                   for p in catalog["probes"]}
        try:
            named = notes.read_arg_names(path)
        except Exception:   # a corrupt probekit note: as for none
            named = {}
        for full, a in named.items():
            prov, _, name = full.partition(":")
            cat.setdefault((prov, name), {"args": [
                {"type": t, "name": nm, "pointer": "*" in t}
                for t, nm in a.args]})
        for n in self.notes:
            key = (n.provider, n.name)
            if key in self.probes:
                for a, sa in zip(self.probes[key].args, n.args):
                    if sa.operand not in a.operands:
                        a.operands.append(sa.operand)
                continue
            args = []
            c = cat.get(key)
            items = argspec.split_spec(n.spec)
            for i, a in enumerate(n.args):
                ca = c["args"][i] if c and i < len(c["args"]) else None
                args.append(Arg(a.size, a.signed,
                                ctype_name(ca) if ca else None,
                                ca["pointer"] if ca else None,
                                items[i] if i < len(items) else "", n.arch,
                                ca["name"] if ca else None))
                args[-1].operands.append(a.operand)
            self.probes[key] = Probe(n.provider, n.name, args, path)

    def symbols(self):
        if self._syms is None:
            self._syms = elf.read_symbols(self.path)
        return self._syms

    def inlined(self):
        """{function name: number of inlined copies}, from DWARF; empty
        when the file has no debug information."""
        if self._inlined is None:
            self._inlined, self._params = dwarf.read_dwarf(self.path)
        return self._inlined

    def params(self, func):
        """[(name, size, pointer)] of a function's parameters, from DWARF,
        or None when unknown."""
        self.inlined()
        return self._params.get(func)

    def match(self, provider, name):
        """Probes matching provider (None: any) and name, with * ? wildcards."""
        out = []
        for (p, n), probe in self.probes.items():
            if provider is not None and not fnmatch.fnmatchcase(p, provider):
                continue
            if fnmatch.fnmatchcase(n, name):
                out.append(probe)
        return out



def catalog_target(catalog, path):
    """A Target made from the catalog alone (no ELF): names and types."""
    t = Target.__new__(Target)
    t.path = path
    t.elf = False
    t.notes = []
    t._syms = {}
    t._inlined = {}
    t._params = {}
    t.probes = {}
    for p in catalog["probes"]:
        t.probes[(catalog["provider"], p["name"])] = Probe(
            catalog["provider"], p["name"],
            [Arg(a["size"], a["type"].startswith("int"),
                 ctype_name(a), a["pointer"], name=a["name"])
             for a in p["args"]])
    return t
