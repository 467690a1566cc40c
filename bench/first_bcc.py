#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
"""first_bcc.py: the smallest BCC USDT tool, for bench/run's time to first
event.  Attaches to blktgt:io__submit in PID, prints one line at the first
event it receives through a perf buffer, and exits.

Each site is registered with its semaphore's offset, as bcc/'s tools,
bpftrace and libbpf register it (probelib.bcc_compat), not through
BCC's USDT context: BCC 0.26's Python passes libbcc stack garbage for
ref_ctr_offset (0x6 in dmesg's "ref_ctr_offset mismatch"), and the kernel
refuses, with EINVAL, a registration whose offset differs from one already
on the same site of the same file, so this failed whenever another
tracer held io__submit of the same blktgt.

usage: first_bcc.py PID
"""

import os
import sys

if len(sys.argv) != 2 or not sys.argv[1].isdigit() or not 0 < int(sys.argv[1]) < 2**22:
    print("usage: first_bcc.py PID", file=sys.stderr)
    sys.exit(2)

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "probes"))

# After the cheap argument check.
from bcc import BPF  # noqa: E402
from probelib import bcc_compat as compat, notes  # noqa: E402

PROGRAM = """
BPF_PERF_OUTPUT(events);
int on_submit(struct pt_regs *ctx)
{
	u32 one = 1;
	events.perf_submit(ctx, &one, sizeof(one));
	return 0;
}
"""

pid = int(sys.argv[1])
exe = os.readlink(f"/proc/{pid}/exe")
bpf = BPF(text=PROGRAM)
for site in notes.by_name(notes.read_probes(exe))["blktgt:io__submit"]:
    compat.attach_usdt_site(bpf, "on_submit", exe, site.pc, site.offset, pid,
                            site.semaphore_offset)
seen = []
bpf["events"].open_perf_buffer(lambda cpu, data, size: seen.append(1))
while not seen:
    bpf.perf_buffer_poll(timeout=1000)
print("probekit-bench: first event", flush=True)
