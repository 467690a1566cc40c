# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_loop: the bcc/ tools' main loop ([interval [count]], -d,
--max-rate, Ctrl-C, the target's exit), as libbpf/tool_loop.c is the
libbpf twins' (doc/output.md, "Behaviour every tool shares")."""

import os
import signal
import sys
import time

import probekit_bcc_load as loader
from probekit_bcc_args import EARLY_SIGINT, command
from probekit_bcc_drain import HistReport, PairReport
from probekit_bcc_hist import Output

TICK = 0.1              # how often the loop checks for Ctrl-C and the target
MAX_RATE_WINDOW = 1.0   # --max-rate: seconds the hit rate is measured over


def run(tool, target, args, collect, what, bpf=None, out=None, ready=None,
        pairs=None, hists=False, batch=None, merges=False):
    """The tool's main loop.  Prints "Tracing ... Hit Ctrl-C to end." (the
    readiness line: the caller has loaded and attached everything; ready
    replaces its text), then every interval calls collect() (which takes
    what the maps gained: drain(), Delta) and prints what it
    returns through out.emit() (by default
    an Output, printing [Hist]).  Ends after count intervals, after -d seconds, on Ctrl-C
    or SIGTERM (printing what was collected, exit 0), or when the target
    exits (the same, plus a line on stderr saying so).  With --max-rate,
    bpf (loaded with count_hits) is checked every MAX_RATE_WINDOW seconds;
    past the budget it is detached first, so the histograms are final and
    the target stops paying at once, then they are printed with one line
    on stderr saying why tracing ended, exit 0 (the guard did what was
    asked), as the libbpf tools do.  pairs: a pair tool's
    probekit_bcc_pairs.Sweeper, run every tick and reported after each
    interval's histograms (PairReport).  hists: true for a histogram
    tool, whose HIST_KEYS_C drops are reported after them (HistReport) as
    values of args.hist_noun (the spec's, "I/Os"); batch, for one that
    reads io__batch (iolatency, iosize), whether this run does (not with
    --per-io): its busy drops are reported too (0 when it does not);
    merges, whether this run labels io__batch's records by bdev (-B): what
    the name table merges is reported too."""
    stop = []

    def on_signal(signum, frame):
        stop.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    if EARLY_SIGINT:            # Ctrl-C came before tracing started
        sys.stdout.flush()
        os._exit(130)

    if out is None:
        out = Output(tool, target.pid, args)
    trailers = []
    if pairs is not None:
        trailers.append(PairReport(bpf, pairs))
    if hists:
        trailers.append(HistReport(bpf, args.hist_noun, batch, merges))
    if trailers:
        out.trailer = lambda j, o: [t(j, o) for t in trailers]
    msg = ready or "Tracing %s of PID %d (%s)... Hit Ctrl-C to end." % (
        what, target.pid, target.comm)
    if args.json:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
    else:
        print(msg, flush=True)

    now = time.monotonic()
    end = now + args.duration if args.duration else None
    interval = args.interval
    next_out = now + interval if interval else None
    left = args.count
    gone = False
    budget = getattr(args, "max_rate", None)
    check = now + MAX_RATE_WINDOW if budget else None
    last_check, last_hits = now, 0
    while True:
        now = time.monotonic()
        due = [t for t in (end, next_out, check) if t is not None]
        if stop or (end is not None and now >= end):
            break
        if check is not None and now >= check:
            hits = loader.hits(bpf)
            rate = (hits - last_hits) / (now - last_check)
            if rate > budget:
                loader.detach_all(bpf)
                total = loader.hits(bpf)
                out.emit(collect())
                sys.stdout.flush()
                sys.stderr.write("%s: %.0f probe hits/s is over --max-rate %d; "
                                 "detached after %d hits\n"
                                 % (command(tool), rate, budget, total))
                return 0
            last_check, last_hits = now, hits
            check = now + MAX_RATE_WINDOW
            continue
        if not target.alive():
            gone = True
            break
        if next_out is not None and now >= next_out:
            out.emit(collect())
            next_out += interval
            if left is not None:
                left -= 1
                if left == 0:
                    return 0
            continue
        if pairs is not None:
            pairs.sweep()
        time.sleep(min([TICK] + [max(0.0, t - now) for t in due]))
    if gone and pairs is not None:
        pairs.settle(target.pid)    # its last thread's exit, first
    out.emit(collect())
    if gone:
        sys.stderr.write("%s: PID %d (%s) exited; tracing ended\n"
                         % (command(tool), target.pid, target.comm))
    return 0
