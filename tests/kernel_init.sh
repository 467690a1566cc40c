#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# kernel_init.sh: process 1 of the emulated x86-64 machine (scripts/kernel.sh
# smoke), once the initramfs has mounted this machine's userland read-only
# as /, the kernel's tree (its image, modules and headers) at /mnt/kernel
# and the output directory at /mnt/out.  It points
# /lib/modules/$(uname -r)/build and source at the kernel's own headers, as
# Debian's linux-headers packages do (BCC compiles against them), runs the
# smoke suite (tests/kernel_smoke.py) on the build the kernel command line
# names (probekit.build=DIR), puts its output, exit status and timings in
# /mnt/out, and powers off (tests/vm_init.sh mounts what tracing needs and
# stops the machine).
out=/mnt/out
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/vm_init.sh"
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

cd "$src/tests" || finish 2
echo "kernel $kver: $(cat /proc/version)" >"$out/smoke.log"
t0=$(now)
if [ -e "$out/run.sh" ]; then
	(cd "$src" && env BUILD="$build" bash "$out/run.sh") >>"$out/smoke.log" 2>&1
else
	k=$(cat "$out/k" 2>/dev/null)
	env BUILD="$build" CI=true PROBEKIT_TEST_TIMEOUT=900 \
		PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PROBEKIT_VM_OUT="$out" \
		/usr/bin/python3 -m pytest -v -p no:cacheprovider -o cache_dir=/tmp \
		kernel_smoke.py ${k:+-k "$k"} >>"$out/smoke.log" 2>&1
fi
rc=$?
echo "suite $(awk -v a="$t0" -v b="$(now)" "BEGIN{print b-a}")" >>"$out/timings"
finish $rc
