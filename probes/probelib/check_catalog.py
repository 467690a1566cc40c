# SPDX-License-Identifier: BSD-2-Clause
"""Check 1: the catalog against the binary.  The same probes, argument
counts, sizes and signedness, and argument specs that the installed
bpftrace and libbpf, and BCC 0.26, can all read (argspec)."""

import re

from . import installed

from .argspec import spec_problems, split_spec
from .catalog import ctype_name
from .inputs import open_regular
from .bpftrace import usdt_max_arg
from .report import near


def check_catalog(report, catalog, catalog_path, binary):
    with open_regular(catalog_path, "r", encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"\bprovider\s+\w+", text)
    prov_line = text.count("\n", 0, m.start()) + 1 if m else 1
    provider = catalog["provider"]
    sites = {}
    for n in binary.notes:
        sites.setdefault((n.provider, n.name), []).append(n)
    want = {(provider, p["name"]): p for p in catalog["probes"]}
    extra = [k for k in sites if k not in want]
    for key, p in want.items():
        full = f"{provider}:{p['name']}"
        if key not in sites:
            hint = near(p["name"], [n for pr, n in extra if pr == provider],
                        close=True)
            sig = [a["size"] for a in p["args"]]
            same = [n for pr, n in extra if pr == provider and
                    [a.size for a in sites[(pr, n)][0].args] == sig]
            if not hint and len(same) == 1:
                hint = f" (renamed from {same[0]}?)"
            report.error(catalog_path, p["line"], full,
                         f"in the catalog but not in {binary.path}{hint}")
            continue
        specs = {}
        for s in sites[key]:
            specs.setdefault(s.spec, s)
        sizes = {tuple(a.size for a in s.args) for s in specs.values()}
        if len(sizes) > 1:
            report.error(catalog_path, p["line"], full,
                         "its sites in the binary disagree on argument sizes: "
                         + " | ".join(sorted(specs)))
        for spec, s in specs.items():
            if len(s.args) != len(p["args"]):
                report.error(catalog_path, p["line"], full,
                             f"{len(p['args'])} arguments in the catalog but "
                             f"{len(s.args)} in the binary ('{spec}')")
                continue
            items = split_spec(spec)
            for i, (a, c) in enumerate(zip(s.args, p["args"])):
                what = f"arg{i} '{c['type']} {c['name']}'"
                if a.size != c["size"]:
                    report.error(catalog_path, p["line"], full,
                                 f"{what} is {c['size']} bytes in the catalog "
                                 f"but {a.size} in the binary ('{items[i]}')")
                    continue
                signed = c["type"].startswith("int")
                if a.signed != signed:
                    report.error(catalog_path, p["line"], full,
                                 f"{what} is {'signed' if signed else 'unsigned'} "
                                 f"in the catalog but not in the binary ('{items[i]}')")
            for i, why in spec_problems(spec, s.arch):
                report.error(catalog_path, p["line"], full, f"arg{i}: {why}")
        last = usdt_max_arg()
        if len(p["args"]) > last + 1:
            late = ", ".join(f"arg{i} '{ctype_name(a)}'" for i, a in
                             enumerate(p["args"]) if i > last)
            report.notice(f"{catalog_path}:{p['line']}: {full}: {late}: "
                          f"beyond {installed.bpftrace()}'s arg0..arg{last}; "
                          "only BCC and libbpf can read it")
    for key in extra:
        full = f"{key[0]}:{key[1]}"
        missing = [p for p in catalog["probes"]
                   if (provider, p["name"]) not in sites]
        hint = near(key[1], [p["name"] for p in missing], close=True)
        sig = [a.size for a in sites[key][0].args]
        same = [p["name"] for p in missing
                if [a["size"] for a in p["args"]] == sig]
        if not hint and key[0] == provider and len(same) == 1:
            hint = f" (renamed to {same[0]}?)"
        report.error(catalog_path, prov_line, full,
                     f"in {binary.path} but not in the catalog{hint}")

