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

# Kill every descendant of this shell, parents before their children, and
# again until none is left (a process may fork while this walks).
kill_tree() {
	local round pids p
	for round in 1 2 3 4 5; do
		pids=$(descendants $$)
		[ -n "$pids" ] || return 0
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null
	done
}

descendants() {
	local c
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		echo "$c"
		descendants "$c"
	done
}

# Run "$@" in the background and wait, so that the TERM trap runs at once
# (bash defers traps while it waits for a foreground command).  inner()
# turns job control on: without it, a shell starts a background command
# with SIGINT ignored, and a script there (scripts/demo.sh) could never
# catch the SIGINT of a Ctrl-C.  With it the command has a process group
# of its own, so it gets stdin from /dev/null (a read of the terminal
# would stop it).
run_bg() {
	"$@" 9>&- </dev/null &
	wait $!
}

# Mount what tracing needs under root.  The chroot's root becomes a mount
# point (a bind mount onto itself), so that tests which make mount
# namespaces of their own (unshare -m) can change its propagation.
mount_root() {
	local root=$1
	mount --bind "$root" "$root" &&
	mount --make-private "$root" &&
	mount -t proc proc "$root/proc" &&
	mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys" &&
	mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev" &&
	cp /etc/resolv.conf "$root/etc/resolv.conf"
}

# Run a shell command in the chroot, in dir, with a clean environment, in
# a mount namespace of its own whose root is the chroot (pivot_root, then
# the old root detached), not a chroot(2) in this one.  A process there
# that makes a mount namespace of its own (unshare -m, as the tests do)
# then still sees the chroot as /: in a namespace copied from one where
# the chroot is only a directory, /proc/PID/exe and the like would name
# the host's paths.
in_root() { # root, dir, command
	local root=$1 dir=$2 cmd=$3
	run_bg unshare --mount --propagation private /bin/sh -c '
		cd "$1" && mkdir -p .probekit-oldroot &&
			pivot_root . .probekit-oldroot || exit 125
		shift
		exec /usr/bin/env -i "$@"' sh "$root" HOME=/root LANG=C.UTF-8 \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		TERM="${TERM:-dumb}" ${CI+CI="$CI"} ${PYTEST_ARGS+PYTEST_ARGS="$PYTEST_ARGS"} \
		/bin/sh -c 'umount -l /.probekit-oldroot && cd "$1" && eval "$2"' sh "$dir" "$cmd"
}

# Copy the tree: git's tracked files that still exist and its untracked
# ones that are not ignored, as they are in the work tree; then make the
# copy a git checkout of its own with those files committed, as the tests
# and make deb read a checkout's tracked files.
copy_tree() { # destination
	rm -rf "$1" && mkdir -p "$1" || return 1
	git -C "$SRC" ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do
		[ -e "$SRC/$f" ] || [ -L "$SRC/$f" ] && printf '%s\0' "$f"
	done | sort -zu | tar -C "$SRC" --null -T - -cf - | tar -C "$1" -xf - &&
	git -C "$1" init -q && git -C "$1" add -A &&
	git -C "$1" -c user.name=probekit -c user.email=probekit@localhost \
		commit -q -m "$(git -C "$SRC" describe --always --dirty) as run by scripts/stack.sh"
}

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
	if [ ! -e "$dir/base" ]; then
		rm -rf --one-file-system "$dir/root" || die "cannot remove $dir/root"
		say "$name: debootstrap --variant=minbase $name from $MIRROR"
		run_bg debootstrap --variant=minbase "$name" "$dir/root" "$MIRROR" \
			>"$dir/debootstrap.log" 2>&1 ||
			die "debootstrap of $name failed; see $dir/debootstrap.log"
		echo "$name" >"$dir/base"
	fi
	mount_root "$dir/root" || die "cannot mount proc, /sys and /dev in $dir/root"
	if [ ! -e "$dir/stamp" ]; then
		# An archive whose Release file is past its Valid-Until date
		# (sid's, here) needs apt told to accept it.
		if ! in_root "$dir/root" / 'apt-get update -q' >"$dir/apt.log" 2>&1; then
			grep -q 'Valid-Until\|is expired' "$dir/apt.log" ||
				die "apt-get update failed in the $name chroot; see $dir/apt.log"
			echo 'Acquire::Check-Valid-Until "false";' \
				>"$dir/root/etc/apt/apt.conf.d/99probekit-valid-until"
			say "$name: its Release file is past Valid-Until; apt told to accept it"
		fi
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
