# SPDX-License-Identifier: BSD-2-Clause
"""How much work each libbpf tool's programs give the kernel's verifier.

The verifier walks every path of a program before it runs; the
instructions it processed are what a tool waits for before it is ready,
and they depend on the compiler as much as on the source.  clang 19 and
21 once turned the exporter's branch-free bucket code back into
branches (BPF has no conditional move): its io__batch program made the
verifier walk 184,427 instructions, and the exporter took 2.3 s to load
where it takes about 20 ms (libbpf/pk_bits.h, PK_OPAQUE()).  Nothing
failed; it was only slow.  So every program of every object this build
made is loaded here, on this kernel, and its count bounded: a fixed
count for a given compiler and kernel, not a time.  make stack-check
runs this with each Debian release's clang.

The bound is BUDGET instructions a program.  The largest today is
iolatency's io_batch, 3,743-6,919 with clang 14, 19 and 21 on Linux
6.18; BUDGET leaves that room to grow threefold, and stays an order of
magnitude under what went wrong (and 40 times under the kernel's limit,
1,000,000)."""

import glob
import os
import re
import subprocess

import pytest

import probekit

pytestmark = [pytest.mark.needs("bpftool", "unshare"), pytest.mark.usefixtures("bpf")]

BUDGET = 25_000

OBJ = os.path.join(probekit.BUILD, "obj", "libbpf")
# Where bpftool pins what it loads: a bpffs of a private mount namespace,
# gone with it however the load ends.
PIN = "/sys/fs/bpf/probekit-verifier-cost"

BEGIN = re.compile(r"^libbpf: prog '(\w+)': -- BEGIN PROG LOAD LOG --$", re.M)
PROCESSED = re.compile(r"^processed (\d+) insns \(limit \d+\)", re.M)


def sources():
    return sorted(os.path.basename(p)[:-len(".bpf.c")]
                  for p in glob.glob(os.path.join(probekit.ROOT, "libbpf", "*.bpf.c")))


def test_every_tool_object_built():
    """One object a source: none is left out of the walk below."""
    built = sorted(os.path.basename(p)[:-len(".bpf.o")]
                   for p in glob.glob(os.path.join(OBJ, "*.bpf.o")))
    assert built == sources() and len(built) >= 9


def verifier_walks(obj):
    """{program: instructions processed} for each program of obj, loaded
    (not attached) by bpftool with the verifier's log (-d)."""
    script = (f'mount -t bpf bpf /sys/fs/bpf && mkdir {PIN} && '
              f'bpftool -d prog loadall "$0" {PIN} && echo "pinned:" $(ls {PIN})')
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        script, obj], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=probekit.TIMEOUT)
    log = p.stdout.decode(errors="replace")
    tail = "\n".join(log.splitlines()[-15:])
    assert p.returncode == 0, f"bpftool could not load {obj}:\n{tail}"
    # Each program's log runs from its BEGIN line to the next one's.
    starts = list(BEGIN.finditer(log))
    walks = {}
    for m, nxt in zip(starts, starts[1:] + [None]):
        part = log[m.end():nxt.start() if nxt else len(log)]
        counts = PROCESSED.findall(part)
        assert len(counts) == 1, f"{obj}: prog {m.group(1)}: no 'processed' line:\n{part[-2000:]}"
        walks[m.group(1)] = int(counts[0])
    # bpftool pinned one file a program loaded: each has its count.
    pinned = re.findall(r"^pinned:(.*)$", log, re.M)
    assert len(pinned) == 1 and sorted(pinned[0].split()) == sorted(walks), (pinned, sorted(walks))
    return walks


@pytest.mark.parametrize("tool", sources())
def test_verifier_walk_within_budget(tool):
    walks = verifier_walks(os.path.join(OBJ, f"{tool}.bpf.o"))
    assert walks, f"{tool}: bpftool's log named no program"
    over = {prog: n for prog, n in walks.items() if n > BUDGET}
    assert not over, (f"{tool}: the verifier walked {over} instructions, over the "
                      f"budget of {BUDGET} a program: look at what the compiler made "
                      "of the code (llvm-objdump -d) for branches it brought back")
    assert all(n > 0 for n in walks.values())
