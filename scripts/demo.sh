#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# demo.sh: a guided tour of probekit on a running blktgt.
#
# USAGE: scripts/demo.sh BLKTGT   (make demo runs: scripts/demo.sh build/bin/blktgt)
#
# Starts blktgt (private RPC socket, ephemeral NBD port) with a RAM bdev, an
# export and a workload running through that export, then traces it with
# the bt/ scripts through build/bin/probekit-bpftrace:
#   1. states.bt while the export is paused and resumed,
#   2. iops.bt for a few one-second intervals,
#   3. iolat_batch.bt, a latency histogram of every I/O, from io__batch.
# Then it stops everything it started.  Ctrl-C at any point does the same.
# It waits for readiness lines (blktgt's "running", the wrapper's
# "probekit: tracing"), never for a fixed time.
#
# Needs root and bpftrace (make deps).  Durations, in seconds:
#   DEMO_IOPS_SECONDS      how long iops.bt prints (default 3)
#   DEMO_IOLAT_SECONDS     how long iolat_batch.bt collects (default 2)
#   DEMO_WORKLOAD_SECONDS  the workload's upper bound (default 600); the
#                          demo's end stops it earlier

set -u

PYTHON=/usr/bin/python3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
READY_TIMEOUT=60

die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

seconds() { # name value default
	local v=${2:-$3}
	case $v in ''|*[!0-9]*) die "$1='$v' is not a whole number of seconds" ;; esac
	[ ${#v} -le 4 ] && [ $((10#$v)) -ge 1 ] || die "$1='$v' is out of range (1..9999)"
	printf '%d' $((10#$v))
}
IOPS_S=$(seconds DEMO_IOPS_SECONDS "${DEMO_IOPS_SECONDS-}" 3) || exit 1
IOLAT_S=$(seconds DEMO_IOLAT_SECONDS "${DEMO_IOLAT_SECONDS-}" 2) || exit 1
WORKLOAD_S=$(seconds DEMO_WORKLOAD_SECONDS "${DEMO_WORKLOAD_SECONDS-}" 600) || exit 1

[ $# -eq 1 ] || die "usage: scripts/demo.sh BLKTGT (e.g. build/bin/blktgt; 'make demo' builds it)"
BIN=$1
[ -x "$BIN" ] || die "'$BIN' is not an executable; build it first ('make')"
# The commands built beside it (README.md, "Names").
WRAPPER=$(dirname -- "$BIN")/probekit-bpftrace
RPC_PY=$(dirname -- "$BIN")/blktgt-rpc
[ "$(id -u)" = 0 ] || die "tracing needs root; run 'sudo make demo'"
command -v bpftrace >/dev/null || die "bpftrace is not installed; run 'make deps'"
[ -e /sys/kernel/tracing/uprobe_events ] ||
	die "tracefs is not mounted at /sys/kernel/tracing; run 'make deps'"

# Each background job gets its own process group, so a Ctrl-C reaches this
# script alone and the trap below stops the others in order.
set -m

work=$(mktemp -d /tmp/probekit-demo.XXXXXX) || die "cannot create a temporary directory"
RPC_SOCK=$work/rpc.sock
tgt_pid= trace_pid= load_pid= drain_pid=

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold= plain=; fi
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
note() { printf '   %s\n' "$*"; }
rpc() { "$PYTHON" "$RPC_PY" -s "$RPC_SOCK" "$@"; }

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# Wait (bounded) until process $1 exits.
wait_gone() {
	local i
	for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
		alive "$1" || return 0
		sleep 0.1
	done
	return 1
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if alive "$trace_pid"; then kill -INT "$trace_pid"; wait "$trace_pid" 2>/dev/null; fi
	if alive "$tgt_pid"; then
		# Interrupted between pause and resume, the export still holds the
		# workload's I/O, and blktgt's shutdown waits for it forever: resume
		# first (an error here only means there was nothing to resume).
		rpc export_resume e0 >/dev/null 2>&1
		rpc target_shutdown >/dev/null 2>&1 || kill -TERM "$tgt_pid"
		wait_gone "$tgt_pid" || { note "blktgt did not stop; killing it" >&7; kill -KILL "$tgt_pid"; }
		wait "$tgt_pid" 2>/dev/null
	fi
	if alive "$load_pid"; then kill -TERM "$load_pid"; fi
	[ -n "$load_pid" ] && wait "$load_pid" 2>/dev/null
	if alive "$drain_pid"; then kill -TERM "$drain_pid"; fi
	[ -n "$drain_pid" ] && wait "$drain_pid" 2>/dev/null
	rm -rf -- "$work"
	exit "$rc"
}
# A trap runs with the redirections of the command it interrupts (say,
# "rpc ... >/dev/null"), so its words go to the demo's own stdout, kept as 7.
exec 7>&1
trap cleanup EXIT
trap 'note "interrupted; stopping everything" >&7; exit 130' INT
trap 'note "terminated; stopping everything" >&7; exit 143' TERM

# Read lines from fd $1 until one matches the extended regex $2, waiting
# at most READY_TIMEOUT for each; the line is left in $matched.  Lines are
# echoed when $3 is "echo".
matched=
wait_line() {
	local fd=$1 rx=$2 mode=${3:-} line
	while IFS= read -r -t "$READY_TIMEOUT" line <&"$fd"; do
		[ "$mode" = echo ] && printf '%s\n' "$line"
		if [[ $line =~ $rx ]]; then matched=$line; return 0; fi
	done
	return 1
}

# --- 1. the target ------------------------------------------------------------

say "Starting blktgt"
note "A storage target: 2 reactor threads, a JSON-RPC socket of its own and"
note "an NBD server on a free port.  It prints one line once it is running."
mkfifo "$work/tgt.out"
"$BIN" -R 2 -s "$RPC_SOCK" -l 127.0.0.1:0 -U "$work/nbd.sock" >"$work/tgt.out" 2>&1 &
tgt_pid=$!
exec 3<"$work/tgt.out"
wait_line 3 '^blktgt: running pid=' echo || die "blktgt did not start; see above"
# From here on blktgt's own messages go to a log, so the tour stays readable.
cat <&3 >"$work/blktgt.log" &
drain_pid=$!
exec 3<&-

say "Creating a RAM bdev and exporting it"
rpc bdev_malloc_create -b m0 64 4096 >/dev/null || die "bdev_malloc_create failed"
rpc export_create e0 m0 >/dev/null || die "export_create failed"
note "bdev m0: 64 MiB in RAM, 4 KiB blocks; export e0 serves it over NBD."
note "Starting the built-in workload generator on e0: random 4 KiB reads and"
note "writes, 8 in flight, until the end of the demo (at most $WORKLOAD_S s).  It"
note "goes through the export, so pausing the export holds its I/O."
"$PYTHON" "$RPC_PY" -s "$RPC_SOCK" workload_run -e e0 -w randrw -o 4096 -q 8 \
	-T "$WORKLOAD_S" >"$work/workload.json" 2>&1 &
load_pid=$!

# --- 2. state transitions ------------------------------------------------------

say "Tracing state transitions (bt/states.bt)"
note "The wrapper finds blktgt's executable from its PID, puts it into the"
note "script's probes and runs bpftrace.  Its first line says the probes are"
note "attached.  Now the export is paused, then resumed: each change starts,"
note "runs on every reactor thread, and completes."
mkfifo "$work/trace.out"
"$WRAPPER" "$tgt_pid" "$ROOT/bt/states.bt" >"$work/trace.out" 2>&1 &
trace_pid=$!
exec 4<"$work/trace.out"
wait_line 4 '^probekit: tracing' echo || die "the trace did not start; see above"
rpc export_pause e0 >/dev/null || die "export_pause failed"
rpc export_resume e0 >/dev/null || die "export_resume failed"
wait_line 4 ' change-done +e0 +ACTIVE ' echo || die "the resume was not traced"
kill -INT "$trace_pid"
while IFS= read -r line <&4; do printf '%s\n' "$line"; done
wait "$trace_pid"
rc=$?
trace_pid=
exec 4<&-
[ $rc = 0 ] || die "states.bt ended with status $rc"
note "Each line is one probe firing in blktgt; the state names come from the"
note "probes' own arguments, made from include/blktgt_states.h."

# --- 3. I/O per second --------------------------------------------------------------

say "I/O per second (bt/iops.bt, $IOPS_S s)"
note "Completed I/Os per second for each bdev and I/O type, counted in the"
note "kernel at every io__done probe; the last line is the partial second."
note "The seconds alternate between two maps, @iops_a and @iops_b, so no map"
note "is cleared while the probe counts into it: the lines add up to the total."
note "Each hit stops the reactor for a trap, so these are rates while traced."
"$WRAPPER" -d "$IOPS_S" "$tgt_pid" "$ROOT/bt/iops.bt" &
trace_pid=$!
wait "$trace_pid" || die "iops.bt failed"
trace_pid=

# --- 4. latency ---------------------------------------------------------------

say "I/O latency (bt/iolat_batch.bt, $IOLAT_S s)"
note "Time from submit to completion of each I/O, in microseconds, as blktgt"
note "stamped them: one io__batch probe hit carries up to 256 completed I/Os,"
note "so every I/O is read, exactly, for a fraction of the cost."
note "Per-I/O probes (bt/iolat.bt) cost two traps an I/O, about 1 us each"
note "here, and a histogram built from them holds that cost as latency."
"$WRAPPER" -d "$IOLAT_S" "$tgt_pid" "$ROOT/bt/iolat_batch.bt" &
trace_pid=$!
wait "$trace_pid" || die "iolat_batch.bt failed"
trace_pid=

# --- 5. done ---------------------------------------------------------------------

say "Stopping"
note "target_shutdown stops the workload, deletes the export and the bdev, and"
note "ends blktgt; the workload reports what it did:"
rpc target_shutdown >/dev/null || die "target_shutdown failed"
wait "$tgt_pid"
rc=$?
tgt_pid=
[ $rc = 0 ] || die "blktgt exited with status $rc; its log: $(tail -n 5 "$work/blktgt.log")"
wait "$load_pid"
rc=$?
load_pid=
if [ $rc = 0 ]; then
	"$PYTHON" - "$work/workload.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"   {r['ios']} I/Os ({r['reads']} reads, {r['writes']} writes), {r['iops']} IOPS")
EOF
else
	# The expected end: "workload_run: error -125: workload stopped early
	# by shutdown after N I/Os".
	grep -q 'stopped early by shutdown after [0-9]* I/Os' "$work/workload.json" ||
		die "workload_run failed: $(cat "$work/workload.json")"
	note "$(sed -n 's/.*\(stopped early by shutdown after [0-9]* I\/Os\).*/workload \1/p' "$work/workload.json")"
fi
note "blktgt shut down cleanly (exit 0); nothing the demo started is running."
