#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# deps.sh: install, from Debian's packages, everything probekit needs to
# build blktgt, trace it and run its tests; then say what is ready.
#
# Idempotent: packages already installed are not asked for again, and the
# tracefs mount and kernel-header links are made only when missing.
#
# deps.sh --list prints the package list and does nothing else (the stack
# runner, scripts/stack.sh, rebuilds a cached chroot when it changes): the
# names every system installs, then the rules for those chosen per system
# as written (@CLANG@, @ARCH@ unfilled), so that it reads the same on every
# system and architecture, yet changes when a rule does.
set -u

# Every name here exists, unversioned, in each supported Debian release
# (12 and later) on each architecture; the versioned and per-architecture
# packages are chosen below, by asking apt what this system has.
# util-linux-extra has pivot_root, which scripts/stack.sh runs (and
# test_stack runs inside a chroot), since util-linux 2.42 (unstable);
# before, util-linux had it and util-linux-extra other tools.
PKGS="build-essential clang llvm python3 python3-pyparsing python3-pytest
python3-pyelftools systemtap-sdt-dev bpftrace bpfcc-tools python3-bpfcc
libbpf-dev bpftool libelf-dev zlib1g-dev libnbd-bin qemu-utils fio nbdkit
gnuplot-nox procps strace binutils util-linux gdb liblttng-ust-dev
lttng-tools libbabeltrace1 linux-perf debhelper lintian dpkg-dev man-db
libmicrohttpd-dev prometheus postgresql postgresql-client g++ debootstrap git
cscope pkgconf systemd util-linux-extra cmake meson ninja-build"
# Chosen per system: clang's fuzzer runtime (-fsanitize=fuzzer) ships in
# libclang-rt-N-dev for clang N, which Debian has no unversioned name
# for; kernel headers for BCC's fallback come as linux-headers-ARCH.
PER_SYSTEM="libclang-rt-@CLANG@-dev linux-headers-@ARCH@"
# The arm64 readers' tests cross-build and link their fixtures; an arm64
# system builds them with its own gcc.  The cross C library is only a
# Recommends of the cross compiler, which --no-install-recommends leaves
# out (a fresh chroot then fails at link time: no crti.o).
NOT_ON_ARM64="gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
if [ "${1:-}" = --list ]; then
	echo $PKGS
	echo "per system: $PER_SYSTEM"
	echo "not on arm64: $NOT_ON_ARM64"
	exit 0
fi

say() { printf 'deps: %s\n' "$*"; }
die() { printf 'deps: %s\n' "$*" >&2; exit 1; }

# The major version of the clang that is (or would be) installed: the
# clang-N that the clang metapackage depends on.
clang_major() {
	if command -v clang >/dev/null 2>&1; then
		clang --version | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -n 1
	else
		apt-cache depends clang 2>/dev/null | sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -n 1
	fi
}

[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! command -v clang >/dev/null &&
	! apt-cache show clang >/dev/null 2>&1 && apt-get update -q >/dev/null 2>&1
major=$(clang_major)
[ -n "$major" ] || die "cannot tell which clang this system has or would install (is 'clang' known to apt? try: apt-get update)"
arch=$(dpkg --print-architecture)
PKGS="$PKGS $(echo "$PER_SYSTEM" | sed "s/@CLANG@/$major/g; s/@ARCH@/$arch/g")"
[ "$arch" = arm64 ] || PKGS="$PKGS $NOT_ON_ARM64"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' ||
		missing="$missing $p"
done

if [ -n "$missing" ]; then
	[ "$(id -u)" = 0 ] || die "missing packages:$missing; run 'make deps' as root (or: sudo apt-get install$missing)"
	command -v apt-get >/dev/null || die "missing packages:$missing, and this is not a Debian system with apt-get"
	say "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null || die "apt-get update failed; check the package sources"
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $missing >/tmp/probekit-apt.log 2>&1 ||
		die "apt-get install failed; see /tmp/probekit-apt.log"
fi

# bpftrace needs tracefs to detach its probes cleanly.
if [ ! -e /sys/kernel/tracing/uprobe_events ]; then
	if [ "$(id -u)" = 0 ] && mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
		say "mounted tracefs at /sys/kernel/tracing"
	else
		say "tracefs is not mounted at /sys/kernel/tracing and could not be (needs root)"
	fi
fi

# BCC compiles its BPF C at run time against kernel headers.  When the
# running kernel ships none, Debian's generic linux-headers-ARCH is good
# enough for USDT and uprobe programs (they touch no kernel structures):
# point /lib/modules/$(uname -r)/build and source at it.
kver=$(uname -r)
kdir=/lib/modules/$kver
target=$(readlink -f "$kdir/build" 2>/dev/null)
if [ -e "$kdir/build/Makefile" ] && [ "${target#/usr/src/linux-headers-}" != "$target" ] &&
   [ "${target#/usr/src/linux-headers-$kver}" = "$target" ]; then
	headers="fallback from an earlier run: $kdir/build -> $target (for BCC's USDT/uprobe tools only)"
elif [ -e "$kdir/build/Makefile" ]; then
	headers="the running kernel's own ($kdir/build)"
else
	amd=$(ls -d /usr/src/linux-headers-*-"$(dpkg --print-architecture)" 2>/dev/null | sort -V | tail -n 1)
	common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -n 1)
	if [ -n "$amd" ] && [ -n "$common" ] && [ "$(id -u)" = 0 ]; then
		mkdir -p "$kdir"
		ln -sfn "$amd" "$kdir/build"
		ln -sfn "$common" "$kdir/source"
		headers="fallback: $kver has no headers, so $kdir/build -> $amd (for BCC's USDT/uprobe tools only)"
		say "kernel $kver ships no headers; linked $kdir/build -> $amd and source -> $common"
	else
		headers=""
	fi
fi

# What is ready, and what is not.
ok=1
check() { # name, command...
	name=$1; shift
	if "$@" >/dev/null 2>&1; then say "ready:   $name"; else say "MISSING: $name"; ok=0; fi
}
check "C compiler and make"           sh -c 'command -v cc && command -v make'
check "dtrace (systemtap-sdt-dev)"    sh -c 'command -v dtrace && test -f /usr/include/x86_64-linux-gnu/sys/sdt.h -o -f /usr/include/sys/sdt.h'
check "bpftrace"                      command -v bpftrace
check "BCC for /usr/bin/python3"      /usr/bin/python3 -c 'import bcc'
check "pytest for /usr/bin/python3"   /usr/bin/python3 -c 'import pytest'
check "libbpf, bpftool, clang"        sh -c 'test -f /usr/include/bpf/libbpf.h && command -v bpftool && command -v clang'
check "NBD clients (qemu-io, nbdcopy, nbdinfo, fio)" sh -c 'command -v qemu-io && command -v nbdcopy && command -v nbdinfo && command -v fio'
check "tracefs mounted"               test -e /sys/kernel/tracing/uprobe_events
check "BTF (/sys/kernel/btf/vmlinux)" test -r /sys/kernel/btf/vmlinux
if [ -n "$headers" ]; then say "ready:   kernel headers for BCC: $headers"; else say "MISSING: kernel headers for BCC"; ok=0; fi
if [ "$(id -u)" = 0 ]; then
	say "ready:   privilege to trace (root)"
else
	say "MISSING: privilege to trace: run as root (bpftrace runs only as root; the libbpf tools need CAP_BPF and CAP_PERFMON)"
	ok=0
fi
[ $ok = 1 ] && say "all ready" || say "some pieces are missing; see above"
exit 0
