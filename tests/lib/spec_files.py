# SPDX-License-Identifier: BSD-2-Clause
"""The tool specs (specs/*.toml) as tests read them, and a scratch spec
they may change."""

import os

import probekit

ROOT = probekit.ROOT
SPECS = os.path.join(ROOT, "specs")
GENTOOL = os.path.join(SPECS, "gentool")

SPEC_TOOLS = sorted(f[:-5] for f in os.listdir(SPECS)
                    if f.endswith(".toml") and f not in
                    ("common.toml", "limits.toml", "privileges.toml"))

SCRATCH = """
[[option]]
long = "scratch-opt"
arg = "N"
type = "positive"
help = "a scratch option (tests/specs/test_toolspec.py)"
"""
