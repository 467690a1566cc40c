# SPDX-License-Identifier: BSD-2-Clause
"""sdtnotes: the old name of probelib's stapsdt reader, kept for the
tests that still import it (test_nop5.py, test_target_export.py).  New
code imports probelib.notes and probelib.elf."""

from probelib.elf import read_symbols  # noqa: F401
from probelib.notes import SdtArg, SdtProbe, parse_argspec, read_probes  # noqa: F401
