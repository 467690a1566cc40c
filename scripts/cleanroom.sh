#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# cleanroom.sh: build probekit's Debian package where only its declared
# dependencies are, and follow its shipped guide where only the package is.
#
#   cleanroom.sh build OUT        build the .deb from this tree's files in a
#                                 minimal Debian chroot holding only
#                                 build-essential and debian/control's
#                                 Build-Depends (dpkg-buildpackage), leave
#                                 it in OUT, then install it there (dpkg -i,
#                                 apt-get -f install for its Depends) and
#                                 run tests/machines/cleanroom_smoke.sh on the
#                                 installed commands, from /
#   cleanroom.sh run DEB SCRIPT   in a minimal chroot with nothing of
#                                 probekit's, DEB in /root (HOME, the
#                                 working directory), run the bash SCRIPT
#                                 there (tests/debian/test_cleanroom.py gives it the
#                                 shipped guide's code blocks, word for word)
#   cleanroom.sh --stamp          the stamp a current build chroot carries
#
# The release is this machine's (/etc/os-release).  The chroots are
# layers in $PROBEKIT_STACK_CACHE/cleanroom (default
# /var/cache/probekit/stack): base/root, debootstrap --variant=minbase
# with apt's lists; build/upper, an overlayfs upper directory over it with
# build-essential and the Build-Depends, remade when the release or the
# Build-Depends change.  Each run mounts a throwaway overlay over them, so
# nothing a run installs or builds reaches the next one; downloaded
# packages are kept in archives/ and not fetched twice.
#
# Mounts and processes are scripts/stack.sh's way (scripts/chroot-lib.sh):
# a private mount namespace of the run's own, and the inner script killed
# with the runner, so no mount outlives a run, however it ends.
set -u

CACHE=${PROBEKIT_STACK_CACHE:-/var/cache/probekit/stack}/cleanroom
MIRROR=${PROBEKIT_STACK_MIRROR:-http://deb.debian.org/debian}
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=/srv/probekit

say() { printf 'cleanroom: %s\n' "$*"; }
die() { printf 'cleanroom: %s\n' "$*" >&2; exit 2; }

. "$SRC/scripts/chroot-lib.sh"

usage="usage: scripts/cleanroom.sh build OUT | run DEB SCRIPT (as root)"

release() { . /etc/os-release && echo "${VERSION_CODENAME:-}"; }

# Build-Depends, as debian/control declares them (the field and its
# continuation lines).
build_depends() {
	awk '/^Build-Depends:/ { f = 1; print; next }
	     f && /^[ \t]/ { print; next }
	     { f = 0 }' "$SRC/debian/control"
}

stamp() {
	printf '%s\n%s\n' "$(release)" "$(build_depends)" | sha256sum | cut -d' ' -f1
}

# apt without questions: the runs have no terminal.  Assume-Yes stands for
# the user's "Y" at apt's prompt.
APT_ENV='DEBIAN_FRONTEND=noninteractive APT_CONFIG=/etc/apt/probekit-cleanroom.conf'

# --- inside the private mount namespace ---------------------------------------

# An overlay of the given lower directories (top first, colon-separated)
# at dir/root, with dir/upper taking the writes, and what tracing and apt
# need mounted under it.
overlay() { # lower, dir
	local lower=$1 dir=$2
	mkdir -p "$dir/upper" "$dir/work" "$dir/root" &&
	mount -t overlay overlay -o "lowerdir=$lower,upperdir=$dir/upper,workdir=$dir/work" \
		"$dir/root" &&
	mount_root "$dir/root" &&
	mkdir -p "$CACHE/archives/partial" &&
	mount --bind "$CACHE/archives" "$dir/root/var/cache/apt/archives" &&
	printf '%s\n' 'APT::Get::Assume-Yes "true";' 'APT::Keep-Downloaded-Packages "true";' \
		>"$dir/root/etc/apt/probekit-cleanroom.conf" &&
	# No fsync for each unpacked file: the chroot is thrown away, and dpkg
	# unpacks a few hundred packages in each run.
	mkdir -p "$dir/root/etc/dpkg/dpkg.cfg.d" &&
	echo force-unsafe-io >"$dir/root/etc/dpkg/dpkg.cfg.d/probekit-cleanroom"
}

# The overlay and the bind mount of it onto itself (mount_root) are two
# mounts at dir/root.
unmount() { # dir
	while mountpoint -q "$1/root"; do
		umount -R "$1/root" || return 1
	done
}

# base: minbase of this release, with apt's lists.  build/layer: on it,
# build-essential and the Build-Depends, installed the Debian way
# (apt-get build-dep on a directory holding debian/control).
prepare() {
	local rel want
	rel=$(release)
	[ -n "$rel" ] || die "/etc/os-release names no release (VERSION_CODENAME); the clean room is made of this machine's release"
	mkdir -p "$CACHE/base" "$CACHE/build" || die "cannot create $CACHE"
	if [ ! -e "$CACHE/base/base" ] || [ ! -e "$CACHE/base/updated" ]; then
		rm -f "$CACHE/base/updated" "$CACHE/build/stamp"
		debootstrap_base "$rel" "$CACHE/base"
		mount_root "$CACHE/base/root" || die "cannot mount proc, /sys and /dev in $CACHE/base/root"
		apt_update "$rel" "$CACHE/base"
		unmount "$CACHE/base" || die "cannot unmount $CACHE/base/root"
		touch "$CACHE/base/updated"
	fi
	want=$(stamp)
	[ -e "$CACHE/build/stamp" ] && [ "$(cat "$CACHE/build/stamp")" = "$want" ] && return 0
	say "$rel: installing build-essential and the Build-Depends of debian/control"
	rm -f "$CACHE/build/stamp"
	rm -rf --one-file-system "$CACHE/build/upper" "$CACHE/build/work" ||
		die "cannot remove $CACHE/build/upper"
	overlay "$CACHE/base/root" "$CACHE/build" ||
		die "cannot mount the build layer's overlay at $CACHE/build/root"
	mkdir -p "$CACHE/build/root/tmp/probekit-control/debian" &&
	cp "$SRC/debian/control" "$SRC/debian/changelog" "$CACHE/build/root/tmp/probekit-control/debian/" ||
		die "cannot copy debian/control into the build layer"
	in_root "$CACHE/build/root" /tmp/probekit-control \
		"$APT_ENV apt-get install -q build-essential && $APT_ENV apt-get build-dep -q ./" \
		>"$CACHE/build/apt.log" 2>&1 ||
		die "cannot install the Build-Depends; see $CACHE/build/apt.log"
	rm -rf "$CACHE/build/root/tmp/probekit-control"
	unmount "$CACHE/build" || die "cannot unmount $CACHE/build/root"
	echo "$want" >"$CACHE/build/stamp"
}

# A throwaway overlay for one run, over the given layers.
RUN=
begin_run() { # lower
	RUN=$(mktemp -d "$CACHE/run.XXXXXX") || die "cannot make a run directory in $CACHE"
	trap 'kill_tree; unmount "$RUN"; rm -rf --one-file-system "$RUN"; exit 143' TERM INT HUP
	overlay "$1" "$RUN" || die "cannot mount the run's overlay at $RUN/root"
}

end_run() {
	unmount "$RUN"
	rm -rf --one-file-system "$RUN"
}

build_inner() { # out
	local out=$1 rc debs
	prepare
	begin_run "$CACHE/build/upper:$CACHE/base/root"
	copy_tree "$RUN/root$WORK" || die "cannot copy $SRC into the chroot"
	say "dpkg-buildpackage -us -uc -b in $(release) with only build-essential and the Build-Depends"
	in_root "$RUN/root" "$WORK" 'dpkg-buildpackage -us -uc -b' >"$out/build.log" 2>&1 ||
		{ tail -n 30 "$out/build.log"; end_run; die "dpkg-buildpackage failed in the clean room; see $out/build.log"; }
	debs=$(ls "$RUN/root$WORK"/../probekit_*.deb)
	cp $debs "$out/" || die "cannot copy the package to $out"
	say "built $(basename "$debs"); installing it (dpkg -i, then apt-get -f install for its Depends)"
	in_root "$RUN/root" / "dpkg -i $(dirname $WORK)/$(basename "$debs"); $APT_ENV apt-get -q update && $APT_ENV apt-get -q -f --no-install-recommends install" \
		>"$out/install.log" 2>&1 ||
		{ tail -n 30 "$out/install.log"; end_run; die "the package does not install in the clean room; see $out/install.log"; }
	in_root "$RUN/root" / "sh $WORK/tests/machines/cleanroom_smoke.sh"
	rc=$?
	end_run
	return $rc
}

run_inner() { # deb, script
	local rc
	prepare
	begin_run "$CACHE/base/root"
	cp "$1" "$RUN/root/root/" && cp "$2" "$RUN/root/tmp/cleanroom-script.sh" ||
		die "cannot copy $1 and $2 into the chroot"
	in_root "$RUN/root" / "$APT_ENV apt-get -q update" >"$RUN/update.log" 2>&1 ||
		{ cat "$RUN/update.log"; end_run; die "apt-get update failed in the chroot"; }
	in_root "$RUN/root" /root "$APT_ENV bash -e /tmp/cleanroom-script.sh"
	rc=$?
	end_run
	return $rc
}

# --- outside: check the request, take the lock, enter the namespace ----------

case "${1:-}" in
--stamp) stamp; exit 0 ;;
--build-inner) set -m; build_inner "$2"; exit $? ;;
--run-inner) set -m; run_inner "$2" "$3"; exit $? ;;
build)
	[ $# = 2 ] || die "give the output directory; $usage"
	out=$(realpath -m "$2")
	;;
run)
	[ $# = 3 ] || die "give the package and the script; $usage"
	[ -f "$2" ] || die "no package '$2'; $usage"
	[ -f "$3" ] || die "no script '$3'; $usage"
	;;
"") die "$usage" ;;
*) die "unknown command '$1'; $usage" ;;
esac

[ "$(id -u)" = 0 ] || die "the clean room needs root (debootstrap, chroot, mounts); run it as root"
command -v debootstrap >/dev/null || die "debootstrap is not installed; run 'make deps' (or: apt-get install debootstrap)"
mkdir -p "$CACHE" || die "cannot create $CACHE"
exec 9>"$CACHE/lock"
flock -n 9 || die "another run of the clean room holds $CACHE/lock; wait for it to end"
# Runs killed before they could clean up left their directories (their
# mounts ended with their namespaces).
rm -rf --one-file-system "$CACHE"/run.* 2>/dev/null
case $1 in
build)
	git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1 || die "$SRC is not a git checkout; the clean room copies git's files of it"
	mkdir -p "$out" || die "cannot create $out"
	exec unshare --mount --propagation private --kill-child=SIGTERM "$0" --build-inner "$out"
	;;
run)
	exec unshare --mount --propagation private --kill-child=SIGTERM "$0" --run-inner \
		"$(realpath "$2")" "$(realpath "$3")"
	;;
esac
