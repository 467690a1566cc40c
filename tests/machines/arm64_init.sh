#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# arm64_init.sh: process 1 of the emulated arm64 machine (scripts/arm64.sh
# smoke), once the initramfs has mounted the arm64 userland read-only as
# / and this checkout at /srv/probekit.  It
# runs the smoke suite (tests/machines/arm64_smoke.py) on the build the kernel
# command line names (probekit.build=DIR, relative to the checkout), puts
# its output, exit status and timings in /srv/out, and powers off
# (tests/machines/vm_init.sh mounts what tracing needs and stops the machine).
out=/srv/out
src=/srv/probekit
. "$src/tests/machines/vm_init.sh"
vm_setup arm64-smoke

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
	PYTHONDONTWRITEBYTECODE=1 PROBEKIT_VM_OUT="$out" \
	PROBEKIT_ARM64_EXPECT="$out/expect.json" \
	PROBEKIT_ARM64_LINT="$(cat "$out/lint")" \
	python3 -m pytest -v -p no:cacheprovider -o cache_dir=/tmp machines/arm64_smoke.py \
	>"$out/smoke.log" 2>&1
rc=$?
echo "suite $(awk -v a="$t0" -v b="$(now)" "BEGIN{print b-a}")" >>"$out/timings"
finish $rc
