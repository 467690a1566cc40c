# SPDX-License-Identifier: BSD-2-Clause
"""The probe catalog is the single source of truth: the USDT=1 binary has
exactly its probes with matching argument sizes, the USDT=0 binary has no
probe at all, and a probe really fires under bpftrace."""

import importlib.machinery
import importlib.util
import os
import subprocess
import sys

import probekit

sys.path.insert(0, os.path.join(probekit.ROOT, "probes"))
from probelib import notes as sdtnotes  # noqa: E402
from probelib.catalog import parse_catalog  # noqa: E402


def _load_gencatalog():
    # The generator is a script without a .py suffix; load it as a module.
    path = os.path.join(probekit.ROOT, "probes", "gencatalog")
    loader = importlib.machinery.SourceFileLoader("gencatalog", path)
    spec = importlib.util.spec_from_loader("gencatalog", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


gencatalog = _load_gencatalog()

CATALOG = os.path.join(probekit.ROOT, "probes", "blktgt.d")


def catalog():
    return parse_catalog(CATALOG)


def test_notes_match_catalog(blktgt_bin):
    cat = catalog()
    notes = sdtnotes.read_probes(blktgt_bin)
    assert notes, "USDT=1 binary has no .note.stapsdt probes"
    by_name = {}
    for n in notes:
        assert n.provider == cat["provider"], n
        by_name.setdefault(n.name, []).append(n)
    want = {p["name"]: p for p in cat["probes"]}
    assert sorted(by_name) == sorted(want), (
        f"missing from binary: {sorted(set(want) - set(by_name))}; "
        f"not in catalog: {sorted(set(by_name) - set(want))}")
    for name, sites in by_name.items():
        args = want[name]["args"]
        for site in sites:
            assert len(site.args) == len(args), (name, site.spec)
            for a, c in zip(site.args, args):
                assert a.size == c["size"], (name, site.spec, c)
            # Every probe carries a semaphore, so _ENABLED() works.
            assert site.semaphore != 0, (name, "has no semaphore")


def test_usdt0_has_no_notes(build):
    path = os.path.join(build, "nousdt", "bin", "blktgt")
    assert os.access(path, os.X_OK), f"{path} missing; 'make test' builds it"
    out = subprocess.run(["readelf", "-S", path], capture_output=True,
                         text=True, check=True).stdout
    assert ".note.stapsdt" not in out
    assert ".probes" not in out
    assert sdtnotes.read_probes(path) == []


def test_disabled_header_never_evaluates_arguments(tmp_path):
    """USDT=0: arguments are type-checked but not evaluated."""
    hdr = tmp_path / "blktgt_probes.h"
    subprocess.run([probekit.PYTHON, os.path.join(probekit.ROOT, "probes", "gencatalog"),
                    "--disabled-header", CATALOG, "-o", str(hdr)], check=True)
    src = tmp_path / "t.c"
    src.write_text('#include "blktgt_probes.h"\n#include <stdio.h>\n'
                   "static int n;\nstatic int bump(void) { return ++n; }\n"
                   "int main(void) {\n"
                   '  BLKTGT_TARGET_STATE(bump(), "x");\n'
                   "  if (BLKTGT_TARGET_STATE_ENABLED()) bump();\n"
                   '  printf("%d\\n", n);\n  return 0;\n}\n')
    exe = tmp_path / "t"
    subprocess.run(["cc", "-Wall", "-Werror", "-I", str(tmp_path), str(src),
                    "-o", str(exe)], check=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True,
                          check=True).stdout.strip() == "0"
    # A wrongly typed argument is a compile error, even in USDT=0.
    src.write_text('#include "blktgt_probes.h"\nstruct s { int x; };\n'
                   "int main(void) { struct s v = {0};\n"
                   "  BLKTGT_TARGET_STATE(v, \"x\"); return 0; }\n")
    r = subprocess.run(["cc", "-I", str(tmp_path), str(src), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode != 0


def test_probe_fires_under_bpftrace(target, bpf):
    """Attach to rpc__request by PID, make exactly 7 RPC calls, count 7."""
    proc, out = probekit.bpftrace_program(
        target.pid,
        'BEGIN { printf("READY\\n"); } '
        'usdt::blktgt:rpc__request { @calls[str(arg1)] = count(); }')
    for _ in range(7):
        target.rpc("target_stats")
    lines = probekit.stop_bpftrace(proc, out)
    assert "@calls[target_stats]: 7" in lines, lines


def test_probe_table_is_generated_from_catalog():
    """probes/README.md's table is the catalog's; 'make probes-doc' remakes it."""
    doc = os.path.join(probekit.ROOT, "probes", "README.md")
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    assert gencatalog.update_doc(text, catalog()) == text, (
        "probes/README.md's probe table differs from probes/blktgt.d; "
        "run 'make probes-doc'")
