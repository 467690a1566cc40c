# SPDX-License-Identifier: BSD-2-Clause
# vm-lib.sh: what the scripts that boot a Debian kernel in qemu (arm64.sh,
# kernel.sh) share, sourced by them: an apt of their own, and the
# initramfs's modules.  The caller defines say and die.

# --- an apt of one's own ---------------------------------------------------------

# Make dir an apt of its own for arch, reading the sources lines given:
# APT_CONFIG (own_apt) is read before anything else, and Dir moves every
# other path apt reads or writes (its configuration parts, lists, archive
# cache, dpkg status and locks) under dir, so nothing of this machine's
# apt or dpkg is read or written.  An empty dpkg status: every dependency
# is downloaded.  Valid-Until as this machine's apt has it (a mirror may
# serve a snapshot, and an old release's Release file may be past it).
own_apt_setup() { # dir, arch, sources lines
	local dir=$1 arch=$2 sources=$3
	mkdir -p "$dir/etc/apt/apt.conf.d" "$dir/etc/apt/preferences.d" \
		"$dir/etc/apt/sources.list.d" "$dir/var/lib/apt/lists/partial" \
		"$dir/var/cache/apt/archives/partial" "$dir/var/lib/dpkg" || return 1
	: >"$dir/var/lib/dpkg/status"
	printf '%s\n' "$sources" >"$dir/etc/apt/sources.list"
	cat >"$dir/apt.conf" <<-EOF
	Dir "$dir/";
	Dir::State::status "$dir/var/lib/dpkg/status";
	APT::Architecture "$arch";
	APT::Architectures { "$arch"; };
	APT::Install-Recommends "false";
	APT::Sandbox::User "root";
	Acquire::Languages "none";
	Acquire::Check-Valid-Until "false";
	EOF
}

own_apt() { # dir, apt-get or apt-cache arguments...
	local dir=$1; shift
	APT_CONFIG=$dir/apt.conf "$@"
}

# The versioned image package a metapackage (linux-image-amd64) depends on.
kernel_package() { # apt dir, metapackage
	own_apt "$1" apt-cache depends "$2" |
		sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n 1
}

# --- the initramfs ----------------------------------------------------------------

# Copy the modules named (with whatever they depend on, in the order
# modules.dep gives, uncompressed) from mods (a /lib/modules/KVER) into
# dir, and write their load order to dir/order.  A module the kernel has
# built in is not in modules.dep, and is skipped.
initrd_modules() { # mods, dir, module names...
	local mods=$1 dir=$2 m dep f
	shift 2
	: >"$dir/.list"
	for m in "$@"; do
		dep=$(grep -E "/$m\.ko(\.xz|\.zst)?:" "$mods/modules.dep") || continue
		for f in $(echo "${dep#*:}" | tr ' ' '\n' | tac) "${dep%%:*}"; do
			grep -qx "$f" "$dir/.list" && continue
			echo "$f" >>"$dir/.list"
			case $f in
			*.xz) xz -dc "$mods/$f" >"$dir/$(basename "${f%.xz}")" ;;
			*.zst) zstd -qdc "$mods/$f" >"$dir/$(basename "${f%.zst}")" ;;
			*) cp "$mods/$f" "$dir/" ;;
			esac || return 1
		done
	done
	sed -e 's|.*/||' -e 's/\.\(xz\|zst\)$//' "$dir/.list" >"$dir/order" &&
		rm -f "$dir/.list"
}

# Pack the directory tree as a gzipped newc cpio archive.
initrd_pack() { # dir, dest
	(cd "$1" && find . | cpio -o -H newc --quiet | gzip -1) >"$2.tmp" &&
		mv "$2.tmp" "$2"
}

# Wait for the emulated machine (qemu's pid) to stop by itself, at most
# seconds; past them kill it and say so (the caller's say()).
vm_wait() { # pid, seconds
	local deadline=$(( $(date +%s) + $2 ))
	while kill -0 "$1" 2>/dev/null; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			kill -KILL "$1"
			say "the machine did not stop within ${2}s; killed"
			break
		fi
		sleep 2
	done
	wait "$1" 2>/dev/null
}
