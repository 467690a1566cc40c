#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# kernel_init.sh: process 1 of the emulated x86-64 machine (scripts/kernel.sh
# smoke), once the initramfs has mounted this machine's userland read-only
# as /, the kernel's tree (its image, modules and headers) at /mnt/kernel
# and the output directory at /mnt/out.  It points
# /lib/modules/$(uname -r)/build and source at the kernel's own headers, as
# Debian's linux-headers packages do (BCC compiles against them), runs the
# smoke suite (tests/machines/kernel_smoke.py) on the build the kernel command line
# names (probekit.build=DIR), puts its output, exit status and timings in
# /mnt/out, and powers off (tests/machines/vm_init.sh mounts what tracing needs and
# stops the machine).
out=/mnt/out
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/tests/machines/vm_init.sh"
vm_setup kernel-smoke

kver=$(uname -r)
mount -t tmpfs tmpfs /lib/modules
mkdir -p "/lib/modules/$kver"
ln -s "/mnt/kernel/usr/src/linux-headers-$kver" "/lib/modules/$kver/build"
ln -s "/mnt/kernel/usr/src/linux-headers-${kver%-amd64}-common" "/lib/modules/$kver/source"

build=$(sed -n 's/.*probekit\.build=\([^ ]*\).*/\1/p' /proc/cmdline)
[ -n "$build" ] && [ -x "$build/bin/blktgt" ] || {
	echo "kernel_init: no build at $build" >"$out/smoke.log"
	finish 2
}

# A run that stalls says where: when the suite's log has not grown for
# STALL_S seconds, every task's state, wait channel and kernel stack go
# to $out/stalled.txt (once a stall; scripts/kernel.sh shows it).  Two
# runs of 6.1 stalled in a libbpf tool over the quickstart with the
# machine idle and left nothing to read.
STALL_S=120
watchdog() {
	local size last=-1 still=0 p t
	while sleep 10; do
		size=$(stat -c %s "$out/smoke.log" 2>/dev/null || echo 0)
		if [ "$size" != "$last" ]; then
			last=$size still=0
			continue
		fi
		still=$((still + 10))
		[ "$still" = "$STALL_S" ] || continue
		{
			echo "=== $(now) s after boot: the suite's log still for $STALL_S s"
			for p in /proc/[0-9]*; do
				[ -r "$p/cmdline" ] && [ -s "$p/cmdline" ] || continue
				echo "--- pid ${p#/proc/} $(tr '\0' ' ' <"$p/cmdline" | cut -c1-200)"
				for t in "$p"/task/*; do
					echo "task ${t##*/} $(cat "$t/comm") state $(awk '/^State/{print $2}' "$t/status") wchan $(cat "$t/wchan")"
					cat "$t/stack" 2>/dev/null
				done
			done
		} >>"$out/stalled.txt" 2>&1
	done
}

cd "$src/tests" || finish 2
echo "kernel $kver: $(cat /proc/version)" >"$out/smoke.log"
watchdog &
wd=$!
t0=$(now)
if [ -e "$out/run.sh" ]; then
	(cd "$src" && env BUILD="$build" bash "$out/run.sh") >>"$out/smoke.log" 2>&1
else
	k=$(cat "$out/k" 2>/dev/null)
	env BUILD="$build" CI=true PROBEKIT_TEST_TIMEOUT=900 \
		PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PROBEKIT_VM_OUT="$out" \
		/usr/bin/python3 -m pytest -v -p no:cacheprovider -o cache_dir=/tmp \
		machines/kernel_smoke.py ${k:+-k "$k"} >>"$out/smoke.log" 2>&1
fi
rc=$?
kill "$wd" 2>/dev/null
echo "suite $(awk -v a="$t0" -v b="$(now)" "BEGIN{print b-a}")" >>"$out/timings"
finish $rc
