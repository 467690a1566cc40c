#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# arm64.sh: probekit on arm64, from this (x86-64) machine.
#
#   arm64.sh sysroot         build (or reuse) the cached arm64 userland
#   arm64.sh root            print its path (for make ARCH=arm64's --sysroot)
#   arm64.sh smoke [BUILD]   boot it in qemu-system-aarch64 and run the
#                            smoke suite (tests/arm64/smoke.sh) on BUILD,
#                            an arm64 build directory (default build-arm64)
#
# The userland is an arm64 Debian 12 (bookworm) debootstrap, cached in
# $PROBEKIT_ARM64_CACHE (default /var/cache/probekit/arm64), outside any
# source tree.  It is two things at once: the --sysroot that make
# ARCH=arm64 links against (libbpf, libelf, zlib, libmicrohttpd and
# sys/sdt.h, all arm64), and the root file system of the emulated machine
# (Debian's arm64 kernel, bpftrace, BCC, python3).  It is rebuilt when
# its package list (PACKAGES below) changes.
#
# debootstrap runs in two stages: --foreign unpacks on this machine, the
# second stage runs the arm64 maintainer scripts through qemu-user-static.
# For that the kernel's binfmt_misc must know arm64 ELF files; the
# registration (named probekit-aarch64) is made for the build only and
# undone on every way out, and binfmt_misc is mounted only in this run's
# private mount namespace.  dpkg on this machine never gets a foreign
# architecture.
#
# Every mount is made in a private mount namespace of the run's own, so
# mounts end with its last process.  The runner is unshare's parent; its
# death sends SIGTERM to the inner script (--kill-child), which kills
# every process it started (qemu included), so nothing is left running.
set -u

CACHE=${PROBEKIT_ARM64_CACHE:-/var/cache/probekit/arm64}
MIRROR=${PROBEKIT_ARM64_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
ROOT=$CACHE/root
SRC=$(cd "$(dirname "$0")/.." && pwd)
BINFMT=/proc/sys/fs/binfmt_misc
BINFMT_NAME=probekit-aarch64
QEMU_USER=/usr/bin/qemu-aarch64-static

# What the userland holds: the link-time libraries and headers of make
# ARCH=arm64, the kernel, the tracers and what the smoke suite runs.
# linux-headers-arm64 is BCC's: it compiles its programs against the
# running kernel's headers.  busybox-static makes the initramfs.
PACKAGES="libc6-dev libbpf-dev libelf-dev zlib1g-dev libmicrohttpd-dev
systemtap-sdt-dev linux-image-arm64 linux-headers-arm64 bpftrace
bpfcc-tools python3-bpfcc python3 python3-pyelftools busybox-static kmod
procps"

say() { printf 'arm64: %s\n' "$*"; }
die() { printf 'arm64: %s\n' "$*" >&2; exit 2; }

usage="usage: scripts/arm64.sh sysroot | root | smoke [BUILD] (or: make arm64-smoke)"

stamp() {
	printf '%s\n%s\n' "$SUITE" "$PACKAGES" | sha256sum | cut -d' ' -f1
}

# --- inside the private mount namespace ---------------------------------------

descendants() {
	local c
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		echo "$c"
		descendants "$c"
	done
}

kill_tree() {
	local round pids
	for round in 1 2 3 4 5; do
		pids=$(descendants $$)
		[ -n "$pids" ] || return 0
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null
	done
}

# In the background and waited for, so that the TERM trap runs at once.
run_bg() {
	"$@" </dev/null &
	wait $!
}

# binfmt_misc's registrations are the kernel's, not the mount's: the one
# made here outlives this namespace unless it is removed, so every way
# out of sysroot_inner goes through binfmt_off.
binfmt_on() {
	[ -x "$QEMU_USER" ] || die "no $QEMU_USER; apt-get install qemu-user-static"
	if [ ! -e "$BINFMT/register" ]; then
		mount -t binfmt_misc binfmt_misc "$BINFMT" ||
			die "cannot mount binfmt_misc on $BINFMT"
	fi
	[ -e "$BINFMT/$BINFMT_NAME" ] && echo -1 >"$BINFMT/$BINFMT_NAME"
	# The ELF header of an arm64 executable (class 64, little-endian,
	# e_machine 183).  F: the kernel opens the interpreter now, so it
	# works inside the chroot, which has no qemu of its own.
	printf '%s' ":$BINFMT_NAME:M::\\x7fELF\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00:\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff:$QEMU_USER:F" \
		>"$BINFMT/register" || die "cannot register $QEMU_USER with binfmt_misc"
}

binfmt_off() {
	[ -e "$BINFMT/$BINFMT_NAME" ] && echo -1 >"$BINFMT/$BINFMT_NAME"
	return 0
}

in_chroot() { # command...
	run_bg chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

sysroot_inner() {
	local want
	trap 'kill_tree; binfmt_off; exit 143' TERM INT HUP
	trap 'binfmt_off' EXIT
	want=$(stamp)
	if [ -e "$CACHE/stamp" ] && [ "$(cat "$CACHE/stamp")" = "$want" ]; then
		return 0
	fi
	rm -f "$CACHE/stamp"
	if [ ! -e "$CACHE/base" ]; then
		rm -rf --one-file-system "$ROOT" || die "cannot remove $ROOT"
		say "debootstrap --arch=arm64 --foreign $SUITE from $MIRROR"
		run_bg debootstrap --arch=arm64 --foreign --variant=minbase \
			"$SUITE" "$ROOT" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
			die "debootstrap (first stage) failed; see $CACHE/debootstrap.log"
	fi
	binfmt_on
	mount -t proc proc "$ROOT/proc" &&
	mount --rbind /dev "$ROOT/dev" && mount --make-rslave "$ROOT/dev" ||
		die "cannot mount proc and /dev in $ROOT"
	if [ ! -e "$CACHE/base" ]; then
		say "debootstrap second stage, through $QEMU_USER"
		in_chroot /debootstrap/debootstrap --second-stage \
			>>"$CACHE/debootstrap.log" 2>&1 ||
			die "debootstrap (second stage) failed; see $CACHE/debootstrap.log"
		echo "$SUITE" >"$CACHE/base"
	fi
	cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
	say "apt-get install (arm64, through qemu-user): $(echo $PACKAGES)"
	{ in_chroot apt-get update -q &&
	  in_chroot apt-get install -y -q --no-install-recommends $PACKAGES; } \
		>"$CACHE/apt.log" 2>&1 ||
		die "apt-get install failed in $ROOT; see $CACHE/apt.log"
	in_chroot apt-get clean
	echo "$want" >"$CACHE/stamp"
	say "the arm64 userland is ready in $ROOT"
}

# --- outside: check the request, take the lock, enter the namespace ----------

need_root() {
	[ "$(id -u)" = 0 ] || die "$1 needs root (debootstrap, chroot, mounts); run it as root"
}

locked() {
	mkdir -p "$CACHE" || die "cannot create $CACHE"
	exec 9>"$CACHE/lock"
	flock -n 9 || die "another run holds $CACHE/lock; wait for it to end"
}

case "${1:-}" in
sysroot)
	need_root "sysroot"
	command -v debootstrap >/dev/null || die "debootstrap is not installed; apt-get install debootstrap"
	locked
	exec unshare --mount --propagation private --kill-child=SIGTERM "$0" --sysroot-inner
	;;
--sysroot-inner) sysroot_inner; exit $? ;;
root)
	[ -e "$CACHE/stamp" ] || die "no arm64 userland in $CACHE; build it with 'scripts/arm64.sh sysroot' (as root)"
	echo "$ROOT"
	;;
"") die "$usage" ;;
*) die "unknown command '$1'; $usage" ;;
esac
