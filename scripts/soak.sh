#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# soak.sh: run tests again and again beside busy loops, as a loaded CI
# machine runs them, and count the runs that failed.
#
# USAGE: soak.sh [-n RUNS] [-j HOGS] [-k EXPR] TESTFILE...
#
#   -n RUNS   how many times to run the tests (default 50)
#   -j HOGS   busy loops beside them (default: one per CPU)
#   -k EXPR   pytest's -k, to pick tests within the files
#
# A test that passes 49 times in 50 blocks one landing in 50: this is how
# a flake is found before CI finds it.  Each failed run's output is kept in
# a directory printed at the end; the exit status is 0 only if no run
# failed.  The busy loops are this script's children, bounded by timeout(1)
# and stopped by PID on any exit.
set -u

runs=50 hogs=$(nproc) expr=
while getopts n:j:k:h opt; do
	case $opt in
	n) runs=$OPTARG ;;
	j) hogs=$OPTARG ;;
	k) expr=$OPTARG ;;
	h) sed -n '3,/^$/{s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) echo "soak.sh: try -h" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ $runs =~ ^[1-9][0-9]{0,4}$ ]] || { echo "soak.sh: -n wants 1..99999 runs, not '$runs'" >&2; exit 2; }
[[ $hogs =~ ^[0-9]{1,3}$ ]] || { echo "soak.sh: -j wants 0..999 busy loops, not '$hogs'" >&2; exit 2; }
[ $# -gt 0 ] || { echo "soak.sh: no test file given (try -h)" >&2; exit 2; }

hog_pids=()
stop_hogs() { [ ${#hog_pids[@]} -eq 0 ] || kill "${hog_pids[@]}" 2>/dev/null; }
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < hogs; i++)); do
	timeout 86400 sh -c 'while :; do :; done' &
	hog_pids+=($!)
done

logs=$(mktemp -d /tmp/probekit-soak.XXXXXX)
pytest=(/usr/bin/python3 -m pytest -q -x "$@")
[ -n "$expr" ] && pytest+=(-k "$expr")
failed=0
for ((i = 1; i <= runs; i++)); do
	if "${pytest[@]}" >"$logs/run$i.log" 2>&1; then
		echo "soak: run $i: $(tail -n 1 "$logs/run$i.log" | tr -d '=')"
		rm -f "$logs/run$i.log"
	else
		failed=$((failed + 1))
		echo "soak: run $i failed: $(grep -m1 -E '^(FAILED|ERROR) ' "$logs/run$i.log" || tail -n 1 "$logs/run$i.log")"
	fi
done
if [ $failed = 0 ]; then
	rmdir "$logs"
	echo "soak: 0 of $runs runs failed beside $hogs busy loops"
	exit 0
fi
echo "soak: $failed of $runs runs failed beside $hogs busy loops (their logs: $logs)"
exit 1
