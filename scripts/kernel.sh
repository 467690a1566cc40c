#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# kernel.sh: probekit on the kernels Debian ships, in qemu.
#
#   kernel.sh fetch RELEASE          download (or reuse) RELEASE's kernel
#                                    image and headers
#   kernel.sh smoke RELEASE [BUILD]  boot that kernel in qemu-system-x86_64
#                                    and run the smoke suite
#                                    (tests/machines/kernel_smoke.py) on BUILD, this
#                                    machine's build (default build)
#
# RELEASE is bullseye (Linux 5.10), bookworm (6.1) or trixie (6.12): each
# one's own linux-image-amd64.  Its packages (the versioned image, and
# the headers BCC compiles against: linux-headers-KVER-amd64 and
# -common) are kept in $PROBEKIT_KERNEL_CACHE (default
# /var/cache/probekit/kernels), the .debs and their unpacked tree, so a
# rerun needs no network: bullseye is near the end of its life.
#
# The machine runs this machine's own userland (Debian 12): its / shared
# read-only over 9p, the build at its own path in it, the kernel's tree
# (modules and headers) and a writable output directory shared beside
# it.  The initramfs is busybox with the kernel's 9p modules; its /init
# mounts all that and hands over to tests/machines/kernel_init.sh.  There is no
# KVM here: qemu emulates the CPU (TCG).
#
# PROBEKIT_KERNEL_K=EXPR runs the suite's items that pytest -k EXPR
# selects; PROBEKIT_KERNEL_RUN=COMMAND runs that shell command in the
# machine instead of the suite; PROBEKIT_KERNEL_KEEP=DIR keeps the run's
# output directory (console, suite log, timings) there.
#
# Every mount is made in the machine, none here.  qemu dies with this
# script (--pdeathsig), and the script kills it on every way out, so
# nothing is left running.
set -u

CACHE=${PROBEKIT_KERNEL_CACHE:-/var/cache/probekit/kernels}
MIRROR=${PROBEKIT_KERNEL_MIRROR:-http://deb.debian.org/debian}
SRC=$(cd "$(dirname "$0")/.." && pwd)
RELEASES="bullseye bookworm trixie"

say() { printf 'kernel: %s\n' "$*"; }
die() { printf 'kernel: %s\n' "$*" >&2; exit 2; }

usage="usage: scripts/kernel.sh fetch RELEASE | smoke RELEASE [BUILD] (or: make kernel-smoke KERNEL=RELEASE), RELEASE one of: $RELEASES"

. "$SRC/scripts/chroot-lib.sh"
. "$SRC/scripts/vm-lib.sh"

release_ok() {
	case " $RELEASES " in *" $1 "*) return 0 ;; esac
	die "unknown release '$1'; $usage"
}

# --- the kernel's packages ----------------------------------------------------------

fetch() { # release
	local rel=$1 dir=$CACHE/$1 apt=$CACHE/$1/apt kpkg kver deb
	if [ -e "$dir/stamp" ]; then
		return 0
	fi
	rm -rf "$apt" "$dir/root" "$dir/debs" || die "cannot clear $dir"
	mkdir -p "$dir/root" "$dir/debs" &&
	own_apt_setup "$apt" amd64 \
		"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $rel main" ||
		die "cannot create $apt"
	say "apt ($rel, its own lists and cache in $apt): the kernel image and its headers"
	{ own_apt "$apt" apt-get update -q &&
	  kpkg=$(kernel_package "$apt" linux-image-amd64) && [ -n "$kpkg" ] &&
	  kver=${kpkg#linux-image-} &&
	  (cd "$dir/debs" && own_apt "$apt" apt-get download -q "$kpkg" \
		"linux-headers-$kver" "linux-headers-${kver%-amd64}-common"); } \
		>"$dir/apt.log" 2>&1 || die "apt failed; see $dir/apt.log"
	for deb in "$dir"/debs/*.deb; do
		dpkg-deb -x "$deb" "$dir/root" || die "cannot unpack $deb"
	done
	# The headers' absolute symbolic links would resolve on this machine
	# (and in the machine, whose / is this one's): point them inside the
	# tree.
	find "$dir/root" -type l -lname '/*' | while read -r l; do
		ln -sfn "$(realpath -ms --relative-to="$(dirname "$l")" "$dir/root$(readlink "$l")")" "$l"
	done
	# trixie's packages are merged-/usr: their modules are in /usr/lib.
	[ -e "$dir/root/lib" ] || ln -s usr/lib "$dir/root/lib"
	# modules.dep is made by the image's postinst, which does not run here.
	depmod -b "$dir/root" "$kver" || die "depmod failed on $dir/root"
	rm -rf "$apt"
	echo "$kver" >"$dir/stamp"
	say "$rel's kernel $kver is ready in $dir"
}

# --- the machine -----------------------------------------------------------------

# The initramfs: busybox, the kernel's 9p modules, and an /init that
# mounts this machine's / read-only as the root, a tmpfs on /mnt with the
# kernel's tree (read-only) at /mnt/kernel and the run's output directory
# at /mnt/out, then hands over to the checkout's tests/machines/kernel_init.sh.
make_initrd() { # release, kver, output
	local tmp
	tmp=$(mktemp -d) || return 1
	mkdir -p "$tmp/bin" "$tmp/mod" "$tmp/proc" "$tmp/sys" "$tmp/dev" "$tmp/newroot"
	cp /bin/busybox "$tmp/bin/busybox" || return 1
	initrd_modules "$CACHE/$1/root/lib/modules/$2" "$tmp/mod" \
		virtio_pci 9pnet_virtio 9p || return 1
	cat >"$tmp/init" <<-'INIT'
	#!/bin/busybox sh
	/bin/busybox mkdir -p /sbin /usr/bin /usr/sbin
	/bin/busybox --install -s
	mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev
	for m in $(cat /mod/order); do insmod /mod/$m 2>/dev/null; done
	src=$(sed -n 's/.*probekit\.src=\([^ ]*\).*/\1/p' /proc/cmdline)
	o=trans=virtio,version=9p2000.L,msize=512000
	mount -t 9p -o $o,ro,cache=loose root /newroot &&
	mount -t tmpfs tmpfs /newroot/mnt && mkdir /newroot/mnt/kernel /newroot/mnt/out &&
	mount -t 9p -o $o,ro,cache=loose kernel /newroot/mnt/kernel &&
	mount -t 9p -o $o out /newroot/mnt/out || { echo "initramfs: 9p mounts failed"; poweroff -f; }
	umount /proc /sys /dev
	exec switch_root /newroot "$src/tests/machines/kernel_init.sh"
	INIT
	chmod +x "$tmp/init"
	initrd_pack "$tmp" "$3"
	rm -rf "$tmp"
}

smoke_inner() { # release, build (absolute)
	local rel=$1 build=$2 kver kernel initrd rc qpid deadline t0 out
	trap 'kill_tree; exit 143' TERM INT HUP
	kver=$(cat "$CACHE/$rel/stamp")
	kernel=$CACHE/$rel/root/boot/vmlinuz-$kver
	initrd=$CACHE/$rel/initrd-$(cat "$0" "$SRC/scripts/vm-lib.sh" /bin/busybox | sha256sum | cut -c1-12).gz
	if [ ! -e "$initrd" ]; then
		rm -f "$CACHE/$rel"/initrd-*.gz
		make_initrd "$rel" "$kver" "$initrd" || die "cannot make the initramfs"
	fi
	out=$(mktemp -d /tmp/probekit-kernel.XXXXXX) || die "cannot make an output directory"
	trap 'kill_tree; rm -rf "$out"; exit 143' TERM INT HUP
	# For a run of part of the suite (a pytest -k expression), or of a
	# command of one's own instead (its output is the run's).
	[ -n "${PROBEKIT_KERNEL_K:-}" ] && printf '%s\n' "$PROBEKIT_KERNEL_K" >"$out/k"
	[ -n "${PROBEKIT_KERNEL_RUN:-}" ] && printf '%s\n' "$PROBEKIT_KERNEL_RUN" >"$out/run.sh"
	say "booting Debian $rel's kernel $kver (qemu-system-x86_64, emulated: no KVM)"
	t0=$(date +%s)
	# One CPU unless asked: with two, trixie's kernel once stopped on an
	# int3 oops in its own __schedule (the kernel patching its code while
	# the other emulated CPU ran it; doc/supported-systems.md).
	setpriv --pdeathsig KILL qemu-system-x86_64 -M pc -cpu max \
		-smp "${PROBEKIT_KERNEL_CPUS:-1}" -m 3072 \
		-display none -monitor none -serial "file:$out/console.log" \
		-nic none -no-reboot \
		-kernel "$kernel" -initrd "$initrd" \
		-append "console=ttyS0 panic=-1 quiet probekit.src=$SRC probekit.build=$build" \
		-virtfs "local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap" \
		-virtfs "local,path=$CACHE/$rel/root,mount_tag=kernel,security_model=none,readonly=on" \
		-virtfs "local,path=$out,mount_tag=out,security_model=none" \
		</dev/null &
	qpid=$!
	vm_wait "$qpid" "${PROBEKIT_KERNEL_TIMEOUT:-3600}"
	cat "$out/smoke.log" 2>/dev/null || tail -n 40 "$out/console.log"
	if [ -s "$out/stalled.txt" ]; then
		say "the suite's log stood still (a slow item, or a stall): every task's kernel stack then:"
		cat "$out/stalled.txt"
	fi
	rc=$(cat "$out/rc" 2>/dev/null || echo 2)
	say "timings (s): $(tr '\n' ' ' <"$out/timings" 2>/dev/null) whole run $(( $(date +%s) - t0 ))"
	if [ -n "${PROBEKIT_KERNEL_KEEP:-}" ]; then
		rm -rf "$PROBEKIT_KERNEL_KEEP" && cp -a "$out" "$PROBEKIT_KERNEL_KEEP"
	fi
	rm -rf "$out"
	say "smoke on $rel ($kver): $([ "$rc" = 0 ] && echo PASS || echo "FAIL ($rc)")"
	exit "$rc"
}

# --- outside: check the request, take the lock -------------------------------------

# One run at a time on this machine, whatever its release: a fetch is
# short, and one emulated machine takes both of its CPUs.
locked() {
	mkdir -p "$CACHE" || die "cannot create $CACHE"
	exec 9>"$CACHE/lock"
	flock -w 3600 9 || die "another run has held $CACHE/lock for an hour"
}

# What the machine needs beyond make deps, installed when missing, as
# make deps installs the rest: command:package.
NEEDS="qemu-system-x86_64:qemu-system-x86 cpio:cpio busybox:busybox-static depmod:kmod"

need_packages() {
	local c missing=
	for c in $NEEDS; do
		command -v "${c%%:*}" >/dev/null || missing="$missing ${c#*:}"
	done
	[ -z "$missing" ] && return 0
	say "installing$missing (apt-get)"
	apt-get install -y -q --no-install-recommends $missing >"$CACHE/apt-get.log" 2>&1 ||
		die "apt-get install$missing failed; see $CACHE/apt-get.log"
}

case "${1:-}" in
releases) echo $RELEASES ;;
fetch)
	[ $# = 2 ] || die "$usage"
	release_ok "$2"
	locked
	need_packages
	fetch "$2"
	;;
smoke)
	[ $# = 2 ] || [ $# = 3 ] || die "$usage"
	release_ok "$2"
	build=$(realpath -m "${3:-$SRC/build}")
	[ -x "$build/bin/blktgt" ] || die "no build in $build; run make first"
	[ "$(id -u)" = 0 ] || die "smoke needs root (it installs what it lacks, and the machine's suite traces)"
	locked
	need_packages
	fetch "$2"
	smoke_inner "$2" "$build"
	;;
"") die "$usage" ;;
*) die "unknown command '$1'; $usage" ;;
esac
