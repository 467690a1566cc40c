#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The installed package, run in the clean room (scripts/cleanroom.sh build)
# from /, with only the system's PATH: every command of the package answers
# --version with probekit's version, and the installed wrapper and iops.bt
# count a blktgt's 23 null reads.  tests/debian/test_cleanroom.py checks the lines
# this prints.
set -u
IOS=23
version=$(cat /usr/share/probekit/VERSION)
n=0
good=0
for c in $(dpkg -L probekit | grep '^/usr/bin/'); do
	n=$((n + 1))
	if "$c" --version 2>&1 | grep -q -F "$version"; then
		good=$((good + 1))
	else
		echo "smoke: $c --version does not say $version"
	fi
done
echo "smoke: $good of $n commands answer --version with $version"

tmp=$(mktemp -d)
blktgt -R 2 -s "$tmp/rpc.sock" -l 127.0.0.1:0 >"$tmp/blktgt.out" 2>&1 &
tpid=$!
# Readiness: blktgt's running line, and the wrapper's tracing line.
wait_for() { # file, text
	i=0
	until grep -q -F "$2" "$1"; do
		i=$((i + 1))
		[ $i -lt 6000 ] || { echo "smoke: no '$2' in $1:"; cat "$1"; return 1; }
		sleep 0.01
	done
}
status=1
if wait_for "$tmp/blktgt.out" "blktgt: running pid=$tpid" &&
	blktgt-rpc -s "$tmp/rpc.sock" bdev_null_create Null0 64 4096 >/dev/null; then
	probekit-bpftrace "$tpid" iops.bt >"$tmp/trace.out" 2>&1 &
	bpid=$!
	if wait_for "$tmp/trace.out" "probekit: tracing PID=$tpid" &&
		blktgt-rpc -s "$tmp/rpc.sock" workload_run -b Null0 -w randread -o 4096 \
			-q 4 -n $IOS >/dev/null; then
		kill -INT $bpid
		wait $bpid && status=0
	fi
	kill -INT $bpid 2>/dev/null
	wait $bpid 2>/dev/null
	grep '^@iops_total' "$tmp/trace.out" | sed 's/^/smoke: /'
	[ $status = 0 ] || cat "$tmp/trace.out"
fi
kill -TERM $tpid
wait $tpid
rm -rf "$tmp"
exit $status
