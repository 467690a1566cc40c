#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# arm64.sh: probekit on arm64, from this (x86-64) machine.
#
#   arm64.sh sysroot         build (or reuse) the cached arm64 userland
#   arm64.sh libs            fetch (or reuse) the arm64 libraries alone, for
#                            make ARCH=arm64 only: no root, no qemu, ~30 s
#   arm64.sh root            print the path of the userland, or else of the
#                            libraries (for make ARCH=arm64's --sysroot)
#   arm64.sh smoke [BUILD]   boot it in qemu-system-aarch64 and run the
#                            smoke suite (tests/machines/arm64_smoke.py) on BUILD,
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
# 'libs' is the cheap half, for cross-building alone (CI does it on every
# run): apt, with a configuration, package lists and archive cache of its
# own (APT::Architecture arm64; nothing of this machine's apt or dpkg is
# read or written), downloads LIBS_PACKAGES with what they depend on and
# the arm64 kernel image, and dpkg-deb -x unpacks them into
# $CACHE/libs/root.  No maintainer script runs, so nothing needs arm64
# code to run or root.
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
bpfcc-tools python3-bpfcc python3 python3-pyelftools python3-pytest
busybox-static kmod procps"

# The libraries alone: what make ARCH=arm64 links against (libc6-dev for
# the sysroot's C library, the rest for -lbpf -lelf -lz -lmicrohttpd).
LIBS=$CACHE/libs
LIBS_PACKAGES="libc6-dev libbpf-dev libelf-dev zlib1g-dev libmicrohttpd-dev"

say() { printf 'arm64: %s\n' "$*"; }
die() { printf 'arm64: %s\n' "$*" >&2; exit 2; }

# The programs of this machine that make arm64-smoke runs (sysroot, then
# smoke), each with its Debian package: the one list.  Both steps check
# it whole first, so one line names all that is missing, not one a run.
HOST_TOOLS="debootstrap:debootstrap qemu-aarch64-static:qemu-user-static
qemu-system-aarch64:qemu-system-arm gdb-multiarch:gdb-multiarch cpio:cpio"

need_tools() {
	local t missing="" pkgs=""
	for t in $HOST_TOOLS; do
		command -v "${t%%:*}" >/dev/null && continue
		missing="$missing ${t%%:*}"
		case " $pkgs " in *" ${t#*:} "*) ;; *) pkgs="$pkgs ${t#*:}" ;; esac
	done
	[ -z "$missing" ] || die "not installed:$missing; apt-get install$pkgs (make deps does not: the emulated machine is not part of make test)"
}

usage="usage: scripts/arm64.sh sysroot | libs | root | smoke [BUILD] (or: make arm64-smoke)"

stamp() { # package list
	printf '%s\n%s\n' "$SUITE" "$1" | sha256sum | cut -d' ' -f1
}

# --- inside the private mount namespace ---------------------------------------

# kill_tree and run_bg (in the background and waited for, so that the
# TERM trap runs at once) are the stack runner's.
. "$SRC/scripts/chroot-lib.sh"
. "$SRC/scripts/vm-lib.sh"

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

kernel_image() { # [root]
	ls "${1:-$ROOT}"/boot/vmlinuz-*-arm64 2>/dev/null | sort -V | tail -n 1
}

# The arm64 kernel's BTF, for make ARCH=arm64's vmlinux.h.  The image is a
# gzipped raw Image, not an ELF file, so its .BTF section has no name
# left: find the BTF header (magic 0xeB9F, version 1, a 24-byte header)
# whose type and string sections, as the header sizes them, make the
# largest blob, and write that blob.  bpftool then reads it as raw BTF.
kernel_btf() { # [root]
	python3 - "$(kernel_image "${1:-}")" <<-'PY'
	import gzip, struct, sys
	data = open(sys.argv[1], "rb").read()
	if data[:2] == b"\x1f\x8b":
	    data = gzip.decompress(data)
	best = b""
	at = data.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00")
	while at >= 0:
	    _, _, _, hlen, toff, tlen, soff, slen = struct.unpack_from("<HBBIIIII", data, at)
	    end = at + hlen + max(toff + tlen, soff + slen)
	    if toff + tlen <= soff and end <= len(data) and end - at > len(best):
	        best = data[at:end]
	    at = data.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00", at + 1)
	if not best:
	    sys.exit(1)
	sys.stdout.buffer.write(best)
	PY
}

sysroot_inner() {
	local want
	trap 'kill_tree; binfmt_off; exit 143' TERM INT HUP
	trap 'binfmt_off' EXIT
	want=$(stamp "$PACKAGES")
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
	# The kernel's postinst makes Debian's initramfs, which smoke does not
	# boot (it makes its own); with MODULES=most, mkinitramfs ran modprobe
	# over hundreds of modules through qemu-user for over 15 minutes.
	mkdir -p "$ROOT/etc/initramfs-tools/conf.d"
	echo MODULES=list >"$ROOT/etc/initramfs-tools/conf.d/probekit-arm64"
	say "apt-get install (arm64, through qemu-user): $(echo $PACKAGES)"
	# A run interrupted inside dpkg (the kernel's postinst is minutes long
	# under qemu-user) leaves packages half-configured, and apt-get then
	# refuses everything until they are finished: finish them first.
	{ in_chroot dpkg --configure -a &&
	  in_chroot apt-get update -q &&
	  in_chroot apt-get install -y -q --no-install-recommends $PACKAGES; } \
		>"$CACHE/apt.log" 2>&1 ||
		die "apt-get install failed in $ROOT; see $CACHE/apt.log"
	in_chroot apt-get clean
	# Where the emulated machine mounts the checkout and its output
	# (the root is read-only there).
	mkdir -p "$ROOT/srv/probekit" "$ROOT/srv/out"
	kernel_btf >"$CACHE/vmlinux.btf.tmp" &&
		bpftool btf dump file "$CACHE/vmlinux.btf.tmp" format c >/dev/null &&
		mv "$CACHE/vmlinux.btf.tmp" "$CACHE/vmlinux.btf" ||
		die "no BTF found in $(kernel_image); the libbpf tools cannot be built for arm64"
	echo "$want" >"$CACHE/stamp"
	say "the arm64 userland is ready in $ROOT"
}

# --- the libraries alone ------------------------------------------------------

libs_build() {
	local want apt=$LIBS/apt root=$LIBS/root t0=$SECONDS kpkg deb l
	want=$(stamp "$LIBS_PACKAGES kernel")
	if [ -e "$LIBS/stamp" ] && [ "$(cat "$LIBS/stamp")" = "$want" ]; then
		return 0
	fi
	rm -rf "$apt" "$root" "$LIBS/stamp" "$LIBS/vmlinux.btf" || die "cannot clear $LIBS"
	mkdir -p "$root" &&
	own_apt_setup "$apt" arm64 \
		"deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $SUITE main" ||
		die "cannot create $apt"
	say "apt (arm64, its own lists and cache in $apt): $LIBS_PACKAGES and the kernel image"
	{ own_apt "$apt" apt-get update -q &&
	  own_apt "$apt" apt-get install -q -y --download-only $LIBS_PACKAGES &&
	  kpkg=$(kernel_package "$apt" linux-image-arm64) &&
	  [ -n "$kpkg" ] &&
	  (cd "$apt/var/cache/apt/archives" && own_apt "$apt" apt-get download -q "$kpkg"); } \
		>"$LIBS/apt.log" 2>&1 || die "apt failed; see $LIBS/apt.log"
	# Of the kernel's package, only the image (it carries the BTF).
	for deb in "$apt"/var/cache/apt/archives/*.deb; do
		case $deb in
		*/linux-image-*) dpkg-deb --fsys-tarfile "$deb" |
			tar -x -C "$root" --wildcards './boot/vmlinuz-*' ;;
		*) dpkg-deb -x "$deb" "$root" ;;
		esac || die "cannot unpack $deb"
	done
	# The packages' absolute symbolic links (libz.so ->
	# /lib/aarch64-linux-gnu/libz.so.1...) would resolve on this machine:
	# point them inside the root.
	find "$root" -type l -lname '/*' | while read -r l; do
		ln -sfn "$(realpath -ms --relative-to="$(dirname "$l")" "$root$(readlink "$l")")" "$l"
	done
	kernel_btf "$root" >"$LIBS/vmlinux.btf.tmp" &&
		bpftool btf dump file "$LIBS/vmlinux.btf.tmp" format c >/dev/null &&
		mv "$LIBS/vmlinux.btf.tmp" "$LIBS/vmlinux.btf" ||
		die "no BTF found in $(kernel_image "$root"); the libbpf tools cannot be built for arm64"
	# The downloads are not needed again: a change of LIBS_PACKAGES
	# fetches everything anew.
	rm -rf "$apt"
	echo "$want" >"$LIBS/stamp"
	say "the arm64 libraries are ready in $root ($((SECONDS - t0)) s)"
}

# --- the emulated machine ------------------------------------------------------

KVER_OF() { basename "$1" | sed 's/^vmlinuz-//'; }

# The initramfs: busybox, the modules the root needs (9p over virtio are
# modules in Debian's kernel, with whatever they depend on, in the order
# modules.dep gives), and an /init that mounts the userland read-only as
# /, this checkout at /srv/probekit (read-only) and the run's output
# directory at /srv/out, then hands over to tests/machines/arm64_init.sh.
make_initrd() { # kver, output
	local kver=$1 dest=$2 tmp
	tmp=$(mktemp -d) || return 1
	mkdir -p "$tmp/bin" "$tmp/mod" "$tmp/proc" "$tmp/sys" "$tmp/dev" "$tmp/newroot"
	cp "$ROOT/bin/busybox" "$tmp/bin/busybox" || return 1
	initrd_modules "$ROOT/lib/modules/$kver" "$tmp/mod" \
		virtio_mmio virtio_pci 9pnet_virtio 9p || return 1
	cat >"$tmp/init" <<-'INIT'
	#!/bin/busybox sh
	/bin/busybox mkdir -p /sbin /usr/bin /usr/sbin
	/bin/busybox --install -s
	mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev
	for m in $(cat /mod/order); do insmod /mod/$m 2>/dev/null; done
	o=trans=virtio,version=9p2000.L,msize=512000
	mount -t 9p -o $o,ro,cache=loose root /newroot &&
	mount -t 9p -o $o,ro,cache=loose src /newroot/srv/probekit &&
	mount -t 9p -o $o out /newroot/srv/out || { echo "initramfs: 9p mounts failed"; poweroff -f; }
	umount /proc /sys /dev
	exec switch_root /newroot /srv/probekit/tests/machines/arm64_init.sh
	INIT
	chmod +x "$tmp/init"
	initrd_pack "$tmp" "$dest"
	rm -rf "$tmp"
}

# What binutils' readelf reads from the build's notes: the suite holds
# probekit-list to it.  {what: {"provider:name": {sites, semaphore,
# args: [[operand of each argument] of each site]}}}
expectations() { # build
	python3 - "$1/bin/blktgt" "$1/quickstart/quickstart" <<-'PY'
	import json, re, subprocess, sys
	out = {}
	for what, path in zip(("blktgt", "quickstart"), sys.argv[1:]):
	    text = subprocess.run(["readelf", "-n", "--wide", path], check=True,
	                          capture_output=True, text=True).stdout
	    probes, cur = {}, None
	    for ln in text.splitlines():
	        # --wide puts "Provider: P" at the end of the note's first line.
	        m = re.search(r"\bProvider: (\S+)$", ln)
	        ln = ln.strip()
	        if m:
	            prov = m.group(1)
	        elif ln.startswith("Name: "):
	            cur = probes.setdefault(f"{prov}:{ln.split(': ', 1)[1]}",
	                                    {"sites": 0, "semaphore": False, "args": []})
	            cur["sites"] += 1
	        elif ln.startswith("Location: ") and cur is not None:
	            cur["semaphore"] = int(ln.rsplit("Semaphore: ", 1)[1], 16) != 0
	        elif ln.startswith("Arguments: ") and cur is not None:
	            cur["args"].append(re.findall(r"-?\d+@(?:\[[^\]]*\]|\S+)", ln[11:]))
	    out[what] = probes
	json.dump(out, sys.stdout, indent=1)
	PY
}

# The gdb helpers on the machine's core, here, with gdb-multiarch: the
# threads (2 reactors) and bdevs (Malloc0, Malloc1, Null0) of the blktgt
# the suite aborted.
gdb_check() { # build, core
	local got
	got=$(gdb-multiarch -nx -batch -iex 'set debuginfod enabled off' \
		-iex "source $SRC/gdb/blktgt.py" -iex "set sysroot $ROOT" \
		"$1/bin/blktgt" "$2" -ex blktgt-threads -ex blktgt-bdevs 2>"$OUTDIR/gdb.err")
	printf '%s\n' "$got" >"$OUTDIR/gdb.out"
	[ "$(printf '%s\n' "$got" | grep -c '^reactor ')" = 2 ] &&
	[ "$(printf '%s\n' "$got" | grep -o '^bdev name=[^ ]*' | sort | tr '\n' ' ')" = \
		"bdev name=Malloc0 bdev name=Malloc1 bdev name=Null0 " ]
}

smoke_inner() { # build (relative to the checkout)
	local build=$1 kernel kver initrd rc qpid deadline
	trap 'kill_tree; exit 143' TERM INT HUP
	kernel=$(kernel_image)
	kver=$(KVER_OF "$kernel")
	initrd=$CACHE/initrd-$kver-$(sha256sum "$0" | cut -c1-12).gz
	if [ ! -e "$initrd" ]; then
		rm -f "$CACHE"/initrd-*.gz
		make_initrd "$kver" "$initrd" || die "cannot make the initramfs"
	fi
	OUTDIR=$(mktemp -d /tmp/probekit-arm64.XXXXXX) || die "cannot make an output directory"
	trap 'kill_tree; rm -rf "$OUTDIR"; exit 143' TERM INT HUP
	expectations "$SRC/$build" >"$OUTDIR/expect.json" ||
		die "readelf could not read the notes of $build"
	make -s -C "$SRC" --no-print-directory -f - lint-files >"$OUTDIR/lint" <<-'MK'
	include Makefile
	lint-files: ; @echo $(LINT_FILES)
	MK
	say "booting Debian's arm64 kernel $kver (qemu-system-aarch64 -M virt, emulated)"
	t0=$(date +%s)
	setpriv --pdeathsig KILL qemu-system-aarch64 -M virt -cpu cortex-a57 \
		-smp "${PROBEKIT_ARM64_CPUS:-2}" -m 3072 \
		-display none -monitor none -serial "file:$OUTDIR/console.log" \
		-nic none -no-reboot \
		-kernel "$kernel" -initrd "$initrd" \
		-append "console=ttyAMA0 panic=-1 quiet probekit.build=$build" \
		-virtfs "local,path=$ROOT,mount_tag=root,security_model=none,readonly=on" \
		-virtfs "local,path=$SRC,mount_tag=src,security_model=none,readonly=on" \
		-virtfs "local,path=$OUTDIR,mount_tag=out,security_model=none" \
		</dev/null &
	qpid=$!
	vm_wait "$qpid" "${PROBEKIT_ARM64_TIMEOUT:-3600}"
	cat "$OUTDIR/smoke.log" 2>/dev/null || tail -n 40 "$OUTDIR/console.log"
	rc=$(cat "$OUTDIR/rc" 2>/dev/null || echo 2)
	core=$(ls "$OUTDIR"/core.* 2>/dev/null | head -n 1)
	if [ -n "$core" ] && gdb_check "$SRC/$build" "$core"; then
		say "PASS gdb helpers (gdb-multiarch) on the arm64 core: 2 reactors, bdevs Malloc0 Malloc1 Null0"
	else
		say "FAIL gdb helpers on the arm64 core (${core:-no core}): $(head -c 600 "$OUTDIR/gdb.out" "$OUTDIR/gdb.err" 2>/dev/null)"
		[ "$rc" = 0 ] && rc=1
	fi
	say "timings (s): $(tr '\n' ' ' <"$OUTDIR/timings" 2>/dev/null) whole run $(( $(date +%s) - t0 ))"
	if [ -n "${PROBEKIT_ARM64_KEEP:-}" ]; then
		rm -rf "$PROBEKIT_ARM64_KEEP" && cp -a "$OUTDIR" "$PROBEKIT_ARM64_KEEP"
	fi
	rm -rf "$OUTDIR"
	say "smoke: $([ "$rc" = 0 ] && echo PASS || echo "FAIL ($rc)")"
	exit "$rc"
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
	need_tools
	locked
	exec unshare --mount --propagation private --kill-child=SIGTERM "$0" --sysroot-inner
	;;
--sysroot-inner) sysroot_inner; exit $? ;;
libs)
	mkdir -p "$LIBS" || die "cannot create $LIBS; set PROBEKIT_ARM64_CACHE to a directory of your own"
	exec 9>"$LIBS/lock"
	# Quick, so a second run waits for the first instead of refusing.
	flock -w 900 9 || die "another run has held $LIBS/lock for 15 minutes"
	libs_build
	;;
smoke)
	need_root "smoke"
	need_tools
	[ -e "$CACHE/stamp" ] || die "no arm64 userland in $CACHE; build it with 'scripts/arm64.sh sysroot' (as root)"
	build=${2:-build/arm64}
	build=$(realpath -m --relative-to="$SRC" "$build")
	case $build in ../*|/*) die "the build $build must be inside the checkout $SRC (the machine mounts the checkout)" ;; esac
	readelf -h "$SRC/$build/bin/blktgt" 2>/dev/null | grep -q 'Machine:.*AArch64' ||
		die "$SRC/$build/bin/blktgt is not an arm64 build; run 'make ARCH=arm64 O=$build'"
	locked
	exec unshare --mount --propagation private --kill-child=SIGTERM "$0" --smoke-inner "$build"
	;;
--smoke-inner) smoke_inner "$2" ;;
root)
	# The whole userland when there is one, or else the libraries.
	if [ -e "$CACHE/stamp" ]; then
		echo "$ROOT"
	elif [ -e "$LIBS/stamp" ]; then
		echo "$LIBS/root"
	else
		die "no arm64 libraries in $CACHE; fetch them with 'scripts/arm64.sh libs'"
	fi
	;;
"") die "$usage" ;;
*) die "unknown command '$1'; $usage" ;;
esac
