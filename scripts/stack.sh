#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# stack.sh: run probekit's suite on another Debian release's userland (its
# bpftrace, BCC, libbpf, compilers, Python, PostgreSQL, Prometheus) on
# this machine's kernel, in a chroot built by debootstrap.
#
#   stack.sh [--wait] NAME [COMMAND]   NAME: a Debian release (trixie, sid, ...)
#   stack.sh --prepare NAME   only build or refresh NAME's chroot and install
#                             the deps there, so that a later run starts at once
#   stack.sh --versions       this system's versions of the stack's parts
#   stack.sh --stamp NAME     the stamp a current NAME chroot carries
#
# The chroot is cached in $PROBEKIT_STACK_CACHE/NAME/root (default
# /var/cache/probekit/stack), outside any source tree, and rebuilt when
# the package list (scripts/deps.sh --list) changes.  Each run
# copies this tree's files (git's tracked and untracked ones, as they are
# in the work tree, uncommitted changes included) to /srv/probekit in the
# chroot and runs COMMAND there (default: make test, which is make deps,
# then the whole suite), with CI and PYTEST_ARGS passed through.  It then
# prints the stack's versions beside the result; its exit status is
# COMMAND's.
#
# One run per stack at a time: a run takes $CACHE/NAME/lock, and a second
# run of the same stack refuses at once (a person who started two by
# mistake hears so, rather than waiting unawares).  --wait makes it wait
# for the lock instead, as CI's run does after its --prepare in the
# background; --prepare always waits.
#
# Every mount (proc, /sys and /dev, the chroot onto itself) is made in a
# private mount namespace of the run's own, so the mounts end with its
# last process: on success, on error, on Ctrl-C and on SIGKILL alike.
# The runner is unshare's parent process; its death sends SIGTERM to the
# inner script (--kill-child), which kills every process it started, so
# nothing is left running in the namespace either.
set -u

CACHE=${PROBEKIT_STACK_CACHE:-/var/cache/probekit/stack}
MIRROR=${PROBEKIT_STACK_MIRROR:-http://deb.debian.org/debian}
SRC=$(cd "$(dirname "$0")/.." && pwd)
# Where the tree's copy sits inside the chroot.
WORK=/srv/probekit

say() { printf 'stack: %s\n' "$*"; }
die() { printf 'stack: %s\n' "$*" >&2; exit 2; }

# kill_tree, run_bg, mount_root, in_root, copy_tree, debootstrap_base,
# apt_update: shared with the clean-room build and arm64.sh.
. "$SRC/scripts/chroot-lib.sh"

usage="usage: scripts/stack.sh NAME [COMMAND], --wait NAME [COMMAND] or --prepare NAME (or: make stack STACK=NAME), NAME a Debian release such as trixie or sid"

# --- the stack's versions, read on the system this runs on -----------------

pkgver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none; }
first() { "$@" 2>/dev/null | head -n 1; }

versions() {
	pg=$(ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sort -V | tail -n 1)
	printf '  %-11s %s\n' \
		debian "$(cat /etc/debian_version 2>/dev/null)" \
		bpftrace "$(first bpftrace --version | sed 's/^bpftrace //')" \
		bcc "$(pkgver python3-bpfcc)" \
		libbpf "$(pkgver libbpf-dev)" \
		bpftool "$(first bpftool version | sed 's/^bpftool //')" \
		clang "$(first clang -dumpversion)" \
		gcc "$(first gcc -dumpfullversion)" \
		python3 "$(first /usr/bin/python3 -V | sed 's/^Python //')" \
		postgresql "$(if [ -n "$pg" ]; then first "$pg" -V | sed 's/^postgres (PostgreSQL) //'; else echo none; fi)" \
		prometheus "$(first prometheus --version | sed -n 's/^prometheus, version \([^ ]*\).*/\1/p')"
}

# The stamp of a chroot of release NAME: it changes when the release or
# the package list does.
stamp() {
	printf '%s\n%s\n' "$1" "$("$SRC/scripts/deps.sh" --list)" | sha256sum | cut -d' ' -f1
}

# --- inside the private mount namespace ---------------------------------------

inner() { # name, command ('' to prepare only)
	local name=$1 cmd=$2 dir=$CACHE/$1 want rc
	trap 'kill_tree; exit 143' TERM INT HUP
	set -m
	want=$(stamp "$name")
	# stamp: the deps of the current list are installed; base: debootstrap
	# finished (a run killed while installing the deps resumes there).
	if [ -e "$dir/stamp" ] && [ "$(cat "$dir/stamp")" != "$want" ]; then
		say "$name: the package list changed; rebuilding the chroot"
		rm -f "$dir/stamp" "$dir/base"
	fi
	debootstrap_base "$name" "$dir"
	mount_root "$dir/root" || die "cannot mount proc, /sys and /dev in $dir/root"
	if [ ! -e "$dir/stamp" ]; then
		apt_update "$name" "$dir"
	fi
	copy_tree "$dir/root$WORK" || die "cannot copy $SRC into $dir/root$WORK"
	if [ ! -e "$dir/stamp" ]; then
		# scripts/deps.sh is make deps; minbase has no make yet.
		say "$name: installing probekit's dependencies (scripts/deps.sh)"
		in_root "$dir/root" "$WORK" scripts/deps.sh ||
			die "make deps failed in the $name chroot"
		echo "$want" >"$dir/stamp"
	fi
	if [ -z "$cmd" ]; then
		say "$name: prepared in $dir/root, on:"
		in_root "$dir/root" "$WORK" 'scripts/stack.sh --versions'
		exit 0
	fi
	say "$name: running '$cmd' in $dir/root$WORK"
	in_root "$dir/root" "$WORK" "$cmd"
	rc=$?
	echo
	say "$name: '$cmd' exited $rc ($([ $rc = 0 ] && echo PASS || echo FAIL)), on:"
	in_root "$dir/root" "$WORK" 'scripts/stack.sh --versions'
	exit $rc
}

# --- outside: check the request, take the lock, enter the namespace ----------

wait=
prepare=
while :; do
	case "${1:-}" in
	--versions) versions; exit 0 ;;
	--stamp) [ $# = 2 ] || die "$usage"; stamp "$2"; exit 0 ;;
	--inner) shift; inner "$@" ;;
	--wait) wait=1; shift ;;
	--prepare) prepare=1; wait=1; shift ;;
	"") die "no stack given; $usage" ;;
	-*) die "unknown option '$1'; $usage" ;;
	*) break ;;
	esac
done

name=$1
cmd=${2:-make test}
if [ -n "$prepare" ]; then
	[ $# = 1 ] || die "--prepare takes a stack and no command; $usage"
	cmd=
fi
[ $# -le 2 ] || die "give COMMAND as one argument (quote it); $usage"
# A release is what debootstrap has a script for (its names and aliases).
case "$name" in
*/*|.*) die "unknown stack '$name'; $usage" ;;
esac
[ -e "/usr/share/debootstrap/scripts/$name" ] || {
	command -v debootstrap >/dev/null || die "debootstrap is not installed; run 'make deps' (or: apt-get install debootstrap)"
	die "unknown stack '$name': debootstrap knows no Debian release of that name; $usage"
}
[ "$(id -u)" = 0 ] || die "the stack runner needs root (debootstrap, chroot, mounts); run it as root"
git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1 || die "$SRC is not a git checkout; the runner copies git's files of it"
mkdir -p "$CACHE/$name" || die "cannot create $CACHE/$name"
exec 9>"$CACHE/$name/lock"
if ! flock -n 9; then
	[ -n "$wait" ] || die "another run of stack $name holds $CACHE/$name/lock; wait for it to end (or give --wait)"
	say "$name: waiting for the run that holds $CACHE/$name/lock"
	flock 9 || die "cannot take $CACHE/$name/lock"
fi
exec unshare --mount --propagation private --kill-child=SIGTERM \
	"$0" --inner "$name" "$cmd"
