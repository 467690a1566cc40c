# SPDX-License-Identifier: BSD-2-Clause
"""The probe catalog: a DTrace provider file, as systemtap's dtrace reads
it, with the types probekit allows.  probekit's one reader of it:
probekit-gencatalog makes headers and docs from what it returns, and
probekit-check checks binaries and scripts against it."""

import re

from .inputs import open_regular
from .notes import MAX_ARGS

# The C types the catalog may use, with their size in bytes and whether
# they are pointers.  Anything else is refused: argument sizes must be
# fixed, so every reader (bpftrace, BCC, libbpf) agrees on them.
TYPES = {
    "int8_t": (1, False), "uint8_t": (1, False),
    "int16_t": (2, False), "uint16_t": (2, False),
    "int32_t": (4, False), "uint32_t": (4, False),
    "int64_t": (8, False), "uint64_t": (8, False),
    "char *": (8, True), "void *": (8, True),
}

_PROVIDER = re.compile(r"\bprovider\s+([A-Za-z_]\w*)\s*\{")
_PROBE = re.compile(r"\bprobe\s+([A-Za-z_]\w*)\s*\(([^)]*)\)\s*;")
_COMMENT = re.compile(r"/\*(.*?)\*/", re.S)


# Words that end a C type, not name an argument ("unsigned int").
_C_TYPE_WORDS = {"int", "long", "short", "char", "signed", "unsigned",
                 "bool", "float", "double", "void"}


class CatalogError(Exception):
    pass


def _norm_type(t):
    t = re.sub(r"\s+", " ", t.strip())
    t = re.sub(r"\s*\*\s*", " *", t)
    t = t.replace("const ", "")
    return t


def parse_catalog(path, strict=True):
    """Return {"provider": str, "probes": [{name, doc, line, args:[{name,
    type, size, pointer}]}]}.  Raises CatalogError with file:line.
    strict=False reads another project's provider file (PostgreSQL's
    probes.d: its own type names, arguments without names): an argument
    probekit's rules refuse keeps its text as its type, its name if it
    has one, and size and pointer None."""
    with open_regular(path, "r", encoding="utf-8") as f:
        text = f.read()
    m = _PROVIDER.search(text)
    if not m:
        raise CatalogError(f"{path}: no 'provider NAME {{' block")
    provider = m.group(1)
    probes = []
    seen = set()
    last_end = m.end()
    for pm in _PROBE.finditer(text, m.end()):
        line = text.count("\n", 0, pm.start()) + 1
        name = pm.group(1)
        if name in seen:
            raise CatalogError(f"{path}:{line}: probe {name} declared twice")
        seen.add(name)
        # The documentation is the last comment between the previous probe
        # and this one.
        docs = _COMMENT.findall(text, last_end, pm.start())
        doc = ""
        if docs:
            doc = " ".join(docs[-1].split()).strip()
            if doc.startswith("---"):
                doc = ""
        last_end = pm.end()
        args = []
        raw = pm.group(2).strip()
        if raw and raw != "void":
            for i, a in enumerate(raw.split(",")):
                am = re.match(r"^(.*?)([A-Za-z_]\w*)\s*$", a.strip())
                if not strict and (not am or not am.group(1).strip() or
                                   _norm_type(am.group(1)) not in TYPES):
                    named = am and am.group(1).strip() and \
                        am.group(2) not in _C_TYPE_WORDS
                    args.append({"name": am.group(2) if named else "",
                                 "type": _norm_type(am.group(1) if named
                                                    else a),
                                 "size": None, "pointer": None})
                    continue
                if not am or not am.group(1).strip():
                    raise CatalogError(
                        f"{path}:{line}: probe {name}: argument {i} "
                        f"'{a.strip()}' needs a type and a name")
                t = _norm_type(am.group(1))
                if t not in TYPES:
                    raise CatalogError(
                        f"{path}:{line}: probe {name}: argument "
                        f"'{am.group(2)}' has type '{t}'; use one of "
                        + ", ".join(TYPES))
                size, ptr = TYPES[t]
                args.append({"name": am.group(2), "type": t,
                             "size": size, "pointer": ptr})
        if len(args) > MAX_ARGS:
            raise CatalogError(f"{path}:{line}: probe {name} has "
                               f"{len(args)} arguments; sys/sdt.h allows "
                               f"{MAX_ARGS}")
        probes.append({"name": name, "doc": doc, "line": line, "args": args})
    if not probes:
        raise CatalogError(f"{path}: provider {provider} declares no probes")
    return {"provider": provider, "probes": probes}


def ctype_name(a):
    """'uint32_t len', 'char *name' for a catalog argument."""
    t = a["type"]
    return f"{t}{a['name']}" if t.endswith("*") else f"{t} {a['name']}"
