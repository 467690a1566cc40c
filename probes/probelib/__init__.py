# SPDX-License-Identifier: BSD-2-Clause
"""probelib: probekit's one Python reader of what its probes are made of,
and the checker built on it.

Readers (used by probekit-check, the bcc/ tools and the tests):
  inputs    paths given by a user, opened only when regular files, and
            names echoed in one-line messages
  elf       ELF files: symbols, virtual address to file offset
  notes     stapsdt notes: probes, sites, semaphores, argument specs
  argspec   argument operands: parsed, and which tracers can read them
  features  what the installed bpftrace and libbpf read, found by trying
            them on a fixture, cached per installed binary
  dwarf     functions' parameters and inlined copies, from DWARF
  catalog   the probe catalog (a DTrace provider file)
  bpftrace  bpftrace scripts: probe blocks, attach points, argument reads
  toolspec  the tool specs (specs/*.toml): options, limits, messages,
            privileges; for specs/gentool, the bcc/ tools and the words
            and privilege lines of probelib's own commands

Shared with the bcc/ tools (nothing outside bcc/ imports from bcc/):
  bcc_compat  uprobes registered as bpftrace and libbpf do, on a BCC
            whose Python cannot (BCC 0.26); for the tools and
            bench/first_bcc.py

The checker (probekit-check, through cli.main):
  installed (how a message names the installed bpftrace and libbpf),
  target, report, ctext, checker, pyeval,
  check_catalog, check_bt, check_bcc, check_libbpf, cli

The package is not named "probekit": tests/lib/probekit.py, the tests' helper
module, has that name, and the tests load probekit-check in-process.
"""
