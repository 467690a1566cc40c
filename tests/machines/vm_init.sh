# SPDX-License-Identifier: BSD-2-Clause
# vm_init.sh: what process 1 of an emulated machine (tests/machines/arm64_init.sh,
# tests/machines/kernel_init.sh) does first, sourced by it once the initramfs has
# mounted its root: the file systems tracing needs, and a way to stop.
# The caller sets out (the output directory shared with the host).
# Nothing here reaches a network: the machine has no network device, only
# loopback.

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8

now() { cut -d' ' -f1 /proc/uptime; }

finish() {
	echo "$1" >"$out/rc"
	sync
	echo o >/proc/sysrq-trigger
	sleep 60
}

vm_setup() { # hostname
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev 2>/dev/null
	mkdir -p /dev/pts /dev/shm
	# devtmpfs has no /dev/fd: systemd or udev makes it elsewhere, and
	# none runs here.  bash's process substitution (the wrapper's stderr
	# filter, 2> >(...)) opens /dev/fd/N, so make it and its three names
	# by hand.
	ln -sfn /proc/self/fd /dev/fd
	ln -sf /proc/self/fd/0 /dev/stdin
	ln -sf /proc/self/fd/1 /dev/stdout
	ln -sf /proc/self/fd/2 /dev/stderr
	mount -t devpts devpts /dev/pts
	for d in /tmp /run /var/tmp /root /dev/shm; do
		mount -t tmpfs tmpfs "$d" 2>/dev/null
	done
	mount -t tracefs tracefs /sys/kernel/tracing
	mount -t debugfs debugfs /sys/kernel/debug
	mount -t bpf bpf /sys/fs/bpf
	busybox ip link set lo up
	hostname "$1"
	echo "boot $(now)" >>"$out/timings"
}
