#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
"""first_bcc.py: the smallest BCC USDT tool, for bench/run's time to first
event.  Attaches to blktgt:io__submit in PID, prints one line at the first
event it receives through a perf buffer, and exits.

usage: first_bcc.py PID
"""

import sys

if len(sys.argv) != 2 or not sys.argv[1].isdigit() or not 0 < int(sys.argv[1]) < 2**22:
    print("usage: first_bcc.py PID", file=sys.stderr)
    sys.exit(2)

from bcc import BPF, USDT  # noqa: E402  (after the cheap argument check)

PROGRAM = """
BPF_PERF_OUTPUT(events);
int on_submit(struct pt_regs *ctx)
{
	u32 one = 1;
	events.perf_submit(ctx, &one, sizeof(one));
	return 0;
}
"""

usdt = USDT(pid=int(sys.argv[1]))
usdt.enable_probe(probe="io__submit", fn_name="on_submit")
bpf = BPF(text=PROGRAM, usdt_contexts=[usdt])
seen = []
bpf["events"].open_perf_buffer(lambda cpu, data, size: seen.append(1))
while not seen:
    bpf.perf_buffer_poll(timeout=1000)
print("probekit-bench: first event", flush=True)
