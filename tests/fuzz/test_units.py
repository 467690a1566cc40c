# SPDX-License-Identifier: BSD-2-Clause
"""The C unit tests of blktgt's parsers (fuzz/*_unit.c: json.c,
jsonrpc_parse.c, nbd_proto.c), built with ASan and UBSan and run by
`make unit` (mk/unit.mk), here with WERROR=1 as make check's
builds.  Each program asserts exact results itself; this test holds the
target to its exit status and to one summary line per program, every one
with checks run and none failed."""

import os
import re
import subprocess

import probekit

# Every fuzz/NAME_unit.c: each must be in mk/unit.mk's UNIT_TESTS, since
# the target must print a summary for each.
UNITS = sorted(p[:-len(".c")] for p in os.listdir(os.path.join(probekit.ROOT, "fuzz"))
               if p.endswith("_unit.c"))


def test_parser_unit_tests(build):
    assert UNITS, "no fuzz/NAME_unit.c"
    p = subprocess.run(["make", "-s", "--no-print-directory", "-C", probekit.ROOT,
                        f"O={build}", "WERROR=1", "unit"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    summary = re.findall(r"^(\w+): (\d+) checks, (\d+) failed$", p.stdout, re.M)
    assert sorted(name for name, _, _ in summary) == UNITS, p.stdout
    for name, checks, failed in summary:
        assert int(checks) > 0 and int(failed) == 0, p.stdout + p.stderr
