# SPDX-License-Identifier: BSD-2-Clause
# chroot-lib.sh: the chroot primitives of the scripts that run a Debian
# userland on this kernel (stack.sh, cleanroom.sh, arm64.sh), sourced by
# them.  The caller sets SRC (the checkout), MIRROR (for debootstrap) and
# defines say and die; in_root and mount_root are meant for a private
# mount namespace of the caller's own (unshare --mount), so that every
# mount ends with its last process.

# --- processes -----------------------------------------------------------------

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
# (bash defers traps while it waits for a foreground command).  stack.sh
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

# --- the chroot's making ---------------------------------------------------------

# debootstrap --variant=minbase of release name into dir/root, unless
# dir/base says an earlier run finished it (a run killed while installing
# later packages resumes after it).
debootstrap_base() { # name, dir
	local name=$1 dir=$2
	if [ ! -e "$dir/base" ]; then
		rm -rf --one-file-system "$dir/root" || die "cannot remove $dir/root"
		say "$name: debootstrap --variant=minbase $name from $MIRROR"
		run_bg debootstrap --variant=minbase "$name" "$dir/root" "$MIRROR" \
			>"$dir/debootstrap.log" 2>&1 ||
			die "debootstrap of $name failed; see $dir/debootstrap.log"
		echo "$name" >"$dir/base"
	fi
}

# apt-get update in dir/root.  An archive whose Release file is past its
# Valid-Until date (sid's, here) needs apt told to accept it.
apt_update() { # name, dir
	local name=$1 dir=$2
	if ! in_root "$dir/root" / 'apt-get update -q' >"$dir/apt.log" 2>&1; then
		grep -q 'Valid-Until\|is expired' "$dir/apt.log" ||
			die "apt-get update failed in the $name chroot; see $dir/apt.log"
		echo 'Acquire::Check-Valid-Until "false";' \
			>"$dir/root/etc/apt/apt.conf.d/99probekit-valid-until"
		say "$name: its Release file is past Valid-Until; apt told to accept it"
	fi
}
