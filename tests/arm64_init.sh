#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# arm64_init.sh: process 1 of the emulated arm64 machine (scripts/arm64.sh
# smoke), once the initramfs has mounted the arm64 userland read-only as
# / and this checkout at /srv/probekit.  It makes what tracing needs,
# runs the smoke suite (tests/arm64_smoke.py) on the build the kernel
# command line names (probekit.build=DIR, relative to the checkout), puts
# its output, exit status and timings in /srv/out, and powers off.
# Nothing here reaches a network: the machine has no network device, only
# loopback.

out=/srv/out
src=/srv/probekit
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8

now() { cut -d' ' -f1 /proc/uptime; }

finish() {
	echo "$1" >"$out/rc"
	sync
	echo o >/proc/sysrq-trigger
	sleep 60
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
# devtmpfs has no /dev/fd: systemd or udev makes it elsewhere, and none
# runs here.  bash's process substitution (the wrapper's stderr filter,
# 2> >(...)) opens /dev/fd/N, so make it and its three names by hand.
ln -sfn /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mount -t devpts devpts /dev/pts
for d in /tmp /run /var/tmp /root /dev/shm; do
	mount -t tmpfs tmpfs "$d" 2>/dev/null
done
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpf /sys/fs/bpf
busybox ip link set lo up
hostname arm64-smoke
echo "boot $(now)" >>"$out/timings"

build=$(sed -n 's/.*probekit\.build=\([^ ]*\).*/\1/p' /proc/cmdline)
[ -n "$build" ] && [ -x "$src/$build/bin/blktgt" ] || {
	echo "arm64_init: no arm64 build at $src/$build" >"$out/smoke.log"
	finish 2
}
ulimit -c unlimited
echo "$out/core.%p" >/proc/sys/kernel/core_pattern

cd "$src/tests" || finish 2
t0=$(now)
env BUILD="$src/$build" CI=true PROBEKIT_TEST_TIMEOUT=900 \
	PYTHONDONTWRITEBYTECODE=1 PROBEKIT_ARM64_OUT="$out" \
	PROBEKIT_ARM64_EXPECT="$out/expect.json" \
	PROBEKIT_ARM64_LINT="$(cat "$out/lint")" \
	python3 -m pytest -v -p no:cacheprovider -o cache_dir=/tmp arm64_smoke.py \
	>"$out/smoke.log" 2>&1
rc=$?
echo "suite $(awk -v a="$t0" -v b="$(now)" "BEGIN{print b-a}")" >>"$out/timings"
finish $rc
