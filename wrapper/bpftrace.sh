#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# probekit-bpftrace: run bpftrace scripts against one running process, or
# every process that runs a file.
#
# USAGE: probekit-bpftrace [options] (PID | PATH | -p PID | -b PATH)
#                          SCRIPT [SCRIPT...] [-- ARG...]
#        probekit-bpftrace --list
#
# In each script's attach points __EXE__ becomes the traced file (the
# executable, or the library that holds the probe) and __PID__ becomes the
# PID.  Every probe must exist; the scripts are joined into one program;
# every probe counts over one window, from the readiness line
#   probekit: tracing PID=<pid> (Ctrl-C to end)
# to the end of the trace.  A SCRIPT with no '/' that is not a file here is
# a shipped one (probekit-bpftrace --list).
#
# Options:
#   -p, --pid PID        trace this process (the same as PID first)
#   -b, --binary PATH    trace every process running PATH, later ones too
#       --list           list the shipped scripts, one a line, and exit
#       --dry-run        print the final program and exit 0 (needs neither
#                        bpftrace nor root)
#   -o, --output FILE    write bpftrace's output to FILE (as BPF_OUTFILE=FILE)
#   -d, --duration SECS  end the trace (running END) SECS seconds after the
#                        readiness line
#   -f, --format FORMAT  text (bpftrace's default) or json (one JSON object
#                        a line)
#   -j, --json           the same as -f json
#       --hits           end with one line per probe, "probekit: hits
#                        PROVIDER:NAME N": its hits in the trace's window
#       --max-rate HITS_PER_S
#                        detach (running END) once a second has more probe
#                        hits than HITS_PER_S: a cost guard
#   -h, --help           this text
#       --version        print probekit's version and exit
#
# examples:
#   probekit-bpftrace 1234 bt/iolat.bt            # one script, one process
#   probekit-bpftrace 1234 bt/iolat.bt bt/nbd.bt  # two, joined
#   probekit-bpftrace -d 10 -f json 1234 bt/iosize.bt  # 10 s, as JSON lines
#   probekit-bpftrace /usr/lib/postgresql/15/bin/postgres my.bt
#                                       # every process running that file
#   probekit-bpftrace --dry-run 1234 bt/iolat.bt  # print the program only
#
# The rest (the window, __EXE__ in containers, struct definitions,
# bpftrace's stderr, the environment): probekit-bpftrace(8).

# --- what the wrapper adds to bpftrace, for its maintainers -------------------
#
# bpftrace -p PID for scripts written against a binary, not a path: the
# PID (or PATH), then the scripts; BPF_OUTFILE names an output file.
# What it adds to bpftrace itself:
#
#  - __EXE__ in a usdt:, uprobe: or uretprobe: attach point (or their short
#    forms U:, u:, ur:) becomes the path of PID's executable, read from
#    /proc/PID/exe, quoted so that bpftrace reads one path whatever it
#    holds.  When the executable lacks that probe or symbol but a library
#    mapped by PID has it, that library's path is used for that probe.
#    __PID__ anywhere else becomes PID.  Substitution is literal: no path
#    can inject bpftrace code.  A path with a double quote, a newline or a
#    ':' cannot be written in a bpftrace 0.17 probe, and one with a '*' or
#    a '[' is a wildcard to bpftrace 0.27: such paths are refused.
#    A library (or the executable) mapped from a path that only PID's
#    mount namespace has, as in a container, is used as
#    /proc/PID/root/PATH.
#  - PATH instead of PID (an executable or a shared library): every
#    process that runs that file is traced, those started later too
#    (bpftrace without -p; the kernel raises the probes' semaphores).
#    __EXE__ becomes PATH, and a script that uses __PID__ is refused.
#    Given a PID whose child processes run its executable (a PostgreSQL
#    postmaster and its backends), one line on stderr says so and names
#    the PATH form, which traces them all.
#  - Every __EXE__ probe must resolve.  bpftrace 0.17 silently attaches
#    nothing for a usdt probe or uprobe symbol that does not exist, so a
#    misspelt probe would trace nothing without a word; here it is an error,
#    "no USDT probe X in FILE; nearest: Y" (the tools' words) with Y the
#    probe nearest by edit distance (in FILE, the file that has Y), whatever
#    the other probes.
#  - Several scripts are joined into one program.  bpftrace accepts one BEGIN
#    and one END, so their bodies are merged in script order; C definitions
#    (struct, #include) are moved to the top.
#  - Readiness: the last thing the program's BEGIN prints is exactly
#        probekit: tracing PID=<pid> (Ctrl-C to end)
#    (PATH=<path> for a PATH; with -f json, the "data" of a line
#    {"type": "printf", "data": "probekit: tracing ...\n"})
#    bpftrace prints BEGIN's output once every probe is attached, so a
#    caller that waits for that line never needs a sleep, and whatever the
#    scripts print in BEGIN comes before it (a BEGIN that calls exit()
#    ends the trace before it).
#  - A script with a line "// probekit: structs NAME..." gets the struct
#    definitions and enum name tables probekit-structs made for the traced
#    binary at build time, checked against its build-id (see below).
#  - A SCRIPT that is no file in the current directory and has no '/' is
#    a shipped script: NAME or NAME.bt in probekit's bt/ directory
#    (PREFIX/share/probekit/bt installed), so "iolat" names bt/iolat.bt.
#  - Arguments after -- reach the program as $1, $2, ...
#  - Mistakes are found before bpftrace runs, each reported in one line
#    with a non-zero exit.  bpftrace's own messages about the program name
#    the script's FILE:LINE, not the joined program's "stdin:LINE".  If the
#    process exits before every probe is attached, one line says "PID N
#    exited while the trace was starting", with a non-zero exit.
#  - One window: every probe but BEGIN, END and interval counts over the
#    same interval, from the moment every probe is attached (just before
#    the readiness line) to the end of the trace, whatever ends it: Ctrl-C
#    or any other signal to bpftrace (SIGUSR1, which prints the maps, too:
#    the window does not open again), -d, --max-rate, a script's own
#    exit(), the traced process's exit.  bpftrace attaches and detaches
#    its probes one at a time, 100 ms and more apart at full rate, so
#    without it two probes of one I/O path counted tens of thousands
#    apart.  The window is a map lookup at each hit (bench/RESULTS.md).
#  - Then the wrapper execs bpftrace, so signals (Ctrl-C prints the END
#    output and the maps) and the exit code are bpftrace's own.  Only
#    bpftrace's harmless lines are filtered from its stderr (0.17's
#    "couldn't set RLIMIT_MEMLOCK", a newer one's warning that a kernel
#    without kprobes lists no traceable functions), and the uprobe events
#    BCC leaves in tracefs when the process exits while bpftrace attaches
#    are removed once it has ended.  bpftrace 0.17 can miss a Ctrl-C that
#    arrives while it is printing; a tracepoint:signal:signal_deliver
#    probe on its own PID wakes it up so that it sees the signal.
#
# The long forms of the options:
#   -p, --pid PID        trace this process (the same as PID first)
#   -b, --binary PATH    trace every process running PATH (as PATH first)
#       --dry-run        print the final program and exit 0 (bpftrace and
#                        root are not needed; -n is nanoseconds in the tools)
#   -o, --output FILE    write bpftrace's output to FILE (as BPF_OUTFILE=FILE)
#   -d, --duration SECS  end the trace (running END) SECS seconds after its
#                        window opened, which is when the readiness line is
#                        printed (a 10 ms tick checks the time)
#   -f, --format FORMAT  bpftrace's output format, text (its default) or
#                        json (one JSON object a line)
#   -j, --json           the same as -f json
#       --hits           end the output with one line per probe the scripts
#                        name, "probekit: hits PROVIDER:NAME N": its hits
#                        within the window (below), each counted once
#                        (under -f json, one map @probekit_hits)
#       --max-rate HITS_PER_S
#                        a cost guard: every usdt/uprobe/uretprobe block
#                        counts its hits (those that pass its predicate),
#                        and once a second passes more than HITS_PER_S the
#                        program prints one line "probekit-bpftrace: N
#                        probe hits/s is over --max-rate HITS_PER_S;
#                        detaching" and exit()s: bpftrace detaches, runs
#                        END, prints the maps and exits 0
#   -h, --help           this text
#       --version        print probekit's version and exit
#
# Environment: BPF_OUTFILE (see -o); BPFTRACE, the bpftrace to run (default:
# bpftrace from PATH); PROBEKIT_STRUCTS, the file of generated definitions
# (default: ../share/probekit/structs/EXE.bt from this command's directory);
# PROBEKIT_SCAN, the helper that reads ELF files and joins scripts (default:
# ../libexec/probekit/probekit-scan from this command's directory).
#
# A deleted or replaced executable (/proc/PID/exe ends in " (deleted)") is
# traced through /proc/PID/exe for uprobes; its USDT probes are refused,
# because bpftrace 0.17 resolves them by path and attaches nothing.  A
# deleted or replaced library that holds a probe is refused, saying so.
#
set -u
export LC_ALL=C

PROG=probekit-bpftrace
pid_start=
READY_TEXT='probekit: tracing PID=%d (Ctrl-C to end)'
MAX_DURATION=31536000

# One line, whatever a path or argument in the message holds.  Once the
# process was found, a failure while it is gone is reported as that.
die() {
	local msg="$*"
	if [ -n "$pid_start" ] && target_gone; then
		msg="PID $pid exited while the trace was starting"
	fi
	printf '%s: %s\n' "$PROG" "${msg//[[:cntrl:]]/?}" >&2
	exit 1
}

# A usage error: one line and exit 2, as every probekit command's
# (ARCHITECTURE.md, "Conventions"); die's exit 1 is for the rest.
usage_die() {
	printf '%s: %s\n' "$PROG" "${*//[[:cntrl:]]/?}" >&2
	exit 2
}

usage() {
	sed -n '3,/^$/{s/^# \{0,1\}//;p}' "$0"
}

# A shared limit (specs/limits.toml, where the C and Python tools get it
# too), read from the tree this script's real path is in, as VERSION is.
limit() {
	local f v
	f=$(dirname -- "$(readlink -f -- "$0")")/../specs/limits.toml
	v=$(awk -v n="[limit.$1]" '$0 == n { f = 1; next } /^\[/ { f = 0 }
		f && $1 == "value" { print $3; exit }' "$f" 2>/dev/null)
	[[ $v =~ ^[0-9]{1,18}$ ]] || die "cannot read the limit $1 from $f"
	printf '%s' "$v"
}

# A shared message's printf format (specs/limits.toml's [message.NAME],
# which the C and Python tools print too), read as limit() reads a limit;
# with arguments after NAME, the message they fill in.
message() {
	local f v
	f=$(dirname -- "$(readlink -f -- "$0")")/../specs/limits.toml
	v=$(awk -v n="[message.$1]" '$0 == n { f = 1; next } /^\[/ { f = 0 }
		f && $1 == "text" { sub(/^text = "/, ""); sub(/"$/, ""); print; exit }' "$f" 2>/dev/null)
	[ -n "$v" ] || die "cannot read the message $1 from $f"
	if [ $# -gt 1 ]; then
		# shellcheck disable=SC2059  # the format is specs/limits.toml's
		printf -- "$v" "${@:2}"
	else
		printf '%s' "$v"
	fi
}

# probekit's version: VERSION at the top of the tree this script's real
# path is in, the checkout or PREFIX/share/probekit (make install keeps the
# checkout's tree there), as every probekit command finds it.
print_version() {
	local f v
	f=$(dirname -- "$(readlink -f -- "$0")")/../VERSION
	[ -e "$f" ] || die "cannot find probekit's VERSION file ($f)"
	v=$(head -c 64 -- "$f" 2>/dev/null) && [[ $v =~ ^[0-9A-Za-z.+~-]{1,32}$ ]] ||
		die "$f: not one line with a version such as 0.3.0"
	printf '%s (probekit) %s\n' "$PROG" "$v"
	exit 0
}

# The shipped scripts' directory: bt/ in the tree this command's real path
# is in (the checkout, or PREFIX/share/probekit), into shipped_bt.
shipped_bt=
find_shipped() {
	[ -z "$shipped_bt" ] || return 0
	shipped_bt=$(readlink -f -- "$0") || die "cannot find the real path of $0"
	shipped_bt=${shipped_bt%/*/*}/bt
}

# --list: each shipped script, by the name that runs it, and the first
# sentence of the purpose its header gives (" * NAME.bt<TAB>PURPOSE", and
# the lines after it up to a blank " *").
list_scripts() {
	local f name line purpose on words w
	find_shipped
	for f in "$shipped_bt"/*.bt; do
		[ -f "$f" ] || continue
		name=${f##*/} name=${name%.bt} purpose= on=0
		while IFS= read -r line; do
			if [ $on = 0 ]; then
				[[ $line == " * $name.bt"[[:space:]]* ]] || continue
				on=1 line=${line#" * $name.bt"}
			else
				[[ $line =~ ^\ \*[[:space:]]*$ ]] && break
				line=${line#" *"}
			fi
			purpose+=" ${line//[[:space:]]/ }"
		done < "$f"
		purpose=${purpose%%. *}
		purpose=${purpose%.}
		read -r -a words <<< "$purpose"
		purpose=
		for w in "${words[@]}"; do
			if [ $((${#purpose} + ${#w})) -gt 56 ]; then purpose+=" ..."; break; fi
			purpose+=${purpose:+ }$w
		done
		printf '%-14s %s\n' "$name" "$purpose"
	done
}

# --- command line -----------------------------------------------------------

dry_run=0
format=
outfile=${BPF_OUTFILE-}
duration=
max_rate=
hits=
pid=
scripts=()
args=()

while [ $# -gt 0 ]; do
	case $1 in
	-h|--help) usage; exit 0 ;;
	--version) print_version ;;
	--list) list_scripts; exit 0 ;;
	--dry-run) dry_run=1 ;;
	-n) usage_die "-n is not --dry-run any more: across probekit's commands -n is nanoseconds; write --dry-run" ;;
	-j|--json) format=json ;;
	-p|--pid|-b|--binary)
		[ $# -ge 2 ] && [ -n "$2" ] || usage_die "$1 needs a $( [ "${1#-}" = p ] || [ "$1" = --pid ] && echo PID || echo PATH) (see --help)"
		[ -z "$pid" ] || usage_die "give one target: '$pid' was already given, then $1 $2"
		case $1 in
		-p|--pid) case $2 in *[!0-9]*) usage_die "$1: $(message PID_INVALID "$2"); for a file give -b PATH" ;; esac ;;
		esac
		pid=$2; shift ;;
	-f|--format)
		[ $# -ge 2 ] || usage_die "$1 needs an output format, text or json (see --help)"
		case $2 in
		text|json) format=$2 ;;
		*) usage_die "output format '$2' is not one bpftrace 0.17 prints; give text or json" ;;
		esac
		shift ;;
	-o|--output)
		[ $# -ge 2 ] && [ -n "$2" ] || usage_die "$1 needs a file name (see --help)"
		outfile=$2; shift ;;
	-d|--duration)
		[ $# -ge 2 ] || usage_die "$1 needs a number of seconds (see --help)"
		duration=$2; shift ;;
	--max-rate)
		[ $# -ge 2 ] || usage_die "$1 needs a number of probe hits per second (see --help)"
		max_rate=$2; shift ;;
	--hits) hits=1 ;;
	--) shift; args=("$@"); break ;;
	-?*) usage_die "unknown option '$1' (see --help)" ;;
	*)
		if [ -z "$pid" ]; then pid=$1; else scripts+=("$1"); fi ;;
	esac
	shift
done

[ -n "$pid" ] || usage_die "no PID or PATH given; usage: $PROG [options] PID|PATH SCRIPT... [-- ARG...] (see --help)"
# The first operand: digits are a PID; anything else is the PATH of a file
# whose every process is traced (target_file; pid is then empty).
target_file=
case $pid in
*[!0-9]*)
	target_file=$pid pid=
	if [ ! -e "$target_file" ] && [ -L "$target_file" ]; then
		# A symbolic link that leads to no file: realpath's last words
		# say why, as the other tools do ("Too many levels of symbolic links").
		why=$(realpath -e -- "$target_file" 2>&1 >/dev/null)
		die "'$target_file': ${why##*: }; give the process id, or the path of an executable or shared library"
	fi
	[ -e "$target_file" ] ||
		die "'$target_file' is neither a PID nor an existing file; give the process id, or the path of an executable or shared library"
	[ -f "$target_file" ] ||
		die "'$target_file' is not a regular file; give the path of an executable or shared library"
	[ -r "$target_file" ] || die "'$target_file' is not readable (check its permissions)"
	# Made absolute, not resolved: realpath would turn the
	# /proc/PID/root/... of a container's file into the host's file.
	case $target_file in /*) ;; *) target_file=$PWD/$target_file ;; esac
	case $target_file in
	*%*) die "the path '$target_file' contains '%', which the readiness line cannot print; copy or link the binary to a plain path and run it from there" ;;
	esac ;;
*)
	[ ${#pid} -le 9 ] && [ $((10#$pid)) -gt 0 ] ||
		usage_die "PID '$pid' is out of range; give the process id of the program to trace"
	pid=$((10#$pid)) ;;
esac

if [ -n "$duration" ]; then
	case $duration in
	''|*[!0-9]*) usage_die "duration '$duration' is not a whole number of seconds" ;;
	esac
	[ ${#duration} -le 9 ] && [ $((10#$duration)) -ge 1 ] &&
		[ $((10#$duration)) -le $MAX_DURATION ] ||
		usage_die "duration '$duration' is out of range (1..$MAX_DURATION seconds)"
	duration=$((10#$duration))
fi

# The hit counter is keyed by CPU, so no two CPUs race on one counter, and
# the once-a-second check sums every possible CPU's key.
max_cpu=0
if [ -n "$max_rate" ]; then
	case $max_rate in
	''|*[!0-9]*) usage_die "--max-rate '$max_rate' is not a whole number of probe hits per second" ;;
	esac
	MAX_RATE_LIMIT=$(limit MAX_RATE_LIMIT) || exit 1
	[ ${#max_rate} -le ${#MAX_RATE_LIMIT} ] && [ $((10#$max_rate)) -ge 1 ] &&
		[ $((10#$max_rate)) -le $MAX_RATE_LIMIT ] ||
		usage_die "--max-rate '$max_rate' is out of range (1..$MAX_RATE_LIMIT probe hits per second)"
	max_rate=$((10#$max_rate))
fi
if [ -n "$max_rate" ] || [ -n "$hits" ]; then
	IFS= read -r possible < /sys/devices/system/cpu/possible ||
		die "cannot read /sys/devices/system/cpu/possible, which --max-rate and --hits need"
	max_cpu=${possible##*[-,]}
	case $max_cpu in ''|*[!0-9]*) die "cannot read the CPU count from '$possible'" ;; esac
fi

[ ${#scripts[@]} -gt 0 ] || usage_die "no script given after ${pid:+PID }${pid:-$target_file}; usage: $PROG [options] PID|PATH SCRIPT... (see --help)"
# A SCRIPT that is not a file here but a bare name (no '/') is a shipped
# script: NAME or NAME.bt in the bt/ directory of the tree this command's
# real path is in (the checkout, or PREFIX/share/probekit).  Found only
# when a script needs it: readlink is a process, and every run that names
# its scripts by path would pay for it.
for i in "${!scripts[@]}"; do
	s=${scripts[$i]}
	[ -e "$s" ] && continue
	case $s in */*|'') die "script '$s' does not exist" ;; esac
	find_shipped
	for f in "$shipped_bt/$s" "$shipped_bt/${s%.bt}.bt"; do
		if [ -e "$f" ]; then scripts[$i]=$f; continue 2; fi
	done
	die "script '$s' does not exist: not in the current directory ($PWD), nor as ${s%.bt}.bt in $shipped_bt"
done
for s in "${scripts[@]}"; do
	[ -e "$s" ] || die "script '$s' does not exist"
	[ -f "$s" ] || die "script '$s' is not a regular file"
	[ -r "$s" ] || die "script '$s' is not readable (check its permissions)"
done

# --- the tracer and the privilege to run it ---------------------------------

bpftrace=${BPFTRACE:-bpftrace}
if [ $dry_run = 0 ]; then
	bpftrace=$(command -v -- "$bpftrace") ||
		die "bpftrace is not installed (or not on PATH); install it ('make deps' or apt-get install bpftrace)"
	[ "$EUID" = 0 ] ||
		die "tracing needs root (bpftrace 0.17 runs only as root); run it with sudo"
fi

# The helper that reads ELF files and joins the scripts: built beside this
# command, in ../libexec/probekit/ (PROBEKIT_SCAN names another).
scan=${PROBEKIT_SCAN:-${0%/*}/../libexec/probekit/probekit-scan}
[ -x "$scan" ] ||
	die "its helper '$scan' is missing; build it (make), or run the probekit-bpftrace that make puts in build/bin"

# --- the process ---------------------------------------------------------------

# Checks of the process, skipped when a file is traced (up to pid_start).
if [ -n "$pid" ]; then
[ -d "/proc/$pid" ] || die "$(message NO_PROCESS "$pid")"
# Read status whole, in one go: bash's `read` takes a seekable file in
# chunks and seeks back after each line, and /proc regenerates the text on
# every seek, so a busy process whose State: line changed length between
# two chunks (S (sleeping) / R (running)) misaligned the lines and lost
# Tgid: (3% of reads of a busy process, seen as "no process").
status=
{ status=$(< "/proc/$pid/status"); } 2>/dev/null
tgid=
[[ $status =~ (^|$'\n')Tgid:[[:space:]]*([0-9]+) ]] && tgid=${BASH_REMATCH[2]}
[ -n "$tgid" ] || die "$(message NO_PROCESS "$pid")"
[ "$tgid" = "$pid" ] || die "$pid is a thread of process $tgid; give the process id ($tgid)"

# Fields of /proc/PID/stat after "PID (COMM) ", as words; false if unread.
# (COMM may hold anything, ") " too, but nothing after the last ") " can.)
read_stat() {
	local st
	{ st=$(< "/proc/$pid/stat"); } 2>/dev/null || return 1
	stat_fields=(${st##*') '})
	[ ${#stat_fields[@]} -ge 20 ]
}

# True when the process found here is gone: reaped, a zombie, exiting
# (PF_EXITING, 0x4, in its flags: it may have no memory or files left for
# bpftrace to read), or its PID taken by a later process (its start time,
# field 22, differs).
target_gone() {
	local stat_fields
	read_stat || return 0
	case ${stat_fields[0]} in Z|X|x) return 0 ;; esac
	(( (stat_fields[6] & 4) != 0 )) && return 0
	[ "${stat_fields[19]}" != "$pid_start" ]
}

read_stat || die "$(message NO_PROCESS "$pid")"
pid_start=${stat_fields[19]}
fi

# The executable's path, from probekit-scan's reading of /proc/PID/exe in
# the first line of $1: "exe LEN:PATH" (PATH may hold any byte, a newline
# too, which is refused below), or "exe -" when it could not be read; the
# lines after it go to scanned.  Sets exe, shown_exe and exe_deleted.  It
# comes from a run of probekit-scan the wrapper makes anyway (no readlink).
exe=
take_exe() {
	local t=${1#exe } len
	[ "${t:0:1}" != - ] ||
		die "cannot read /proc/$pid/exe (the process exited, is a zombie or kernel thread, or belongs to another user: run as root)"
	len=${t%%:*}
	[ "${1:0:4}" = 'exe ' ] && [[ $len =~ ^[0-9]{1,4}$ ]] ||
		die "probekit-scan gave no executable path; is it the one built with this wrapper?"
	scanned=${t:${#len}+1+len+1}
	[ -z "$exe" ] || return 0
	exe=${t:${#len}+1:len}
	[ -n "$exe" ] || die "cannot read /proc/$pid/exe"
	shown_exe=${exe//$'\n'/?}
	exe_deleted=0
	[ -n "$pid" ] || return 0
	case $exe in
	*' (deleted)')
		if [ "$(stat -L -c %d:%i -- "/proc/$pid/exe" 2>/dev/null)" != \
		     "$(stat -c %d:%i -- "$exe" 2>/dev/null)" ]; then
			exe_deleted=1
		fi ;;
	*)
		# An executable seen only in the process's mount namespace
		# (a container's, or another file there under the same path)
		# is traced through /proc/PID/root, as its libraries are.
		if ! [ "$exe" -ef "/proc/$pid/exe" ]; then
			if [ "/proc/$pid/root$exe" -ef "/proc/$pid/exe" ]; then
				exe=/proc/$pid/root$exe
				shown_exe=${exe//$'\n'/?}
			else
				chrooted_in_namespace
			fi
		fi ;;
	esac
}

# PID chrooted inside a mount namespace of its own (as scripts/stack.sh's
# chroot is): the kernel writes its files from that namespace's root, not
# from PID's, so they are found neither here nor under /proc/PID/root, and
# bpftrace 0.17 and 0.23 given -p attached its USDT probes nowhere (0
# counted, no error; 0.27 counted right).  Said, rather than traced short;
# from PID's own root (nsenter --mount --root) every path is PID's.
chrooted_in_namespace() {
	local root
	root=$(readlink "/proc/$pid/root" 2>/dev/null) || return 0
	case $root in
	/) ;;
	*)
		[[ $exe == "$root"/* ]] &&
			die "PID $pid runs chrooted inside a mount namespace of its own (in $root there), where bpftrace finds its files by no path it can open (0.17 and 0.23 attach its USDT probes nowhere); trace it from its root: nsenter --target $pid --mount --root probekit-bpftrace ..., with a probekit-bpftrace and a bpftrace that are there" ;;
	esac
}

# The one way a path goes into the program: inside double quotes, where
# bpftrace 0.17 unescapes twice (a backslash is written as four) and a
# newer one (0.27) once (as two).  A double quote or a newline cannot be
# written at all, bpftrace re-splits attach points at ':', and a newer
# bpftrace (0.27) takes '*' and '[...]' in a quoted path as wildcards
# (given -p, it attached a library's uprobe twice, 46 hits for 23), so
# those paths are refused.  '?' is itself to every bpftrace measured.  A path with a backslash asks the installed bpftrace which
# it does (path_unescapes), with KIND (usdt or uprobe) the probes
# the file has.  Sets quoted.
quote_path() { # path, what, [kind]
	local p=$1 what=$2
	case $p in
	*'"'*) die "$what '$p' contains a double quote, which bpftrace cannot express in a probe path; copy or link the binary to a plain path and run it from there" ;;
	*$'\n'*) die "$what contains a newline, which bpftrace cannot express in a probe path; copy or link the binary to a plain path and run it from there" ;;
	*:*) die "$what '$p' contains ':', which bpftrace 0.17 splits probe paths at; copy or link the binary to a plain path and run it from there" ;;
	*[*[]*)
		local c=${p//[!*[]/}
		die "$what '$p' contains '${c:0:1}', which bpftrace 0.27 takes as a wildcard in a probe path (it attaches to every file that matches); copy or link the binary to a plain path and run it from there" ;;
	esac
	case $p in
	*\\*)
		[ $# -lt 3 ] || path_unescapes "$p" "$3"
		if [ "$unescapes" = 2 ]; then
			p=${p//\\/\\\\\\\\}
		else
			p=${p//\\/\\\\}
		fi ;;
	esac
	quoted="\"$p\""
}

# How many times bpftrace unescapes a quoted probe path, 1 or 2, into
# unescapes: 2 when it lists the probes of KIND in FILE named with each
# backslash written four times (bpftrace -l, which attaches nothing), as
# 0.17 does.  Asked once a run, and only for a path with a backslash.
unescapes=
path_unescapes() { # file, kind
	[ -z "$unescapes" ] || return 0
	local p=${1//\\/\\\\\\\\} listed=
	listed=$("$bpftrace" -l "$2:\"$p\":*" 2>/dev/null) || listed=
	if [ -n "$listed" ]; then unescapes=2; else unescapes=1; fi
}

# --- generated struct definitions --------------------------------------------
#
# A script that reads a struct through a pointer asks for its definition
# with a line "// probekit: structs NAME...": a struct, union or enum of the
# traced binary.  probekit-structs writes them at build time to
# share/probekit/structs/EXE.bt beside this command's bin/ directory
# (PROBEKIT_STRUCTS names another file).  That file is prepended, once, as
# if it were the first script, when it was made from the traced executable
# (the same build-id) and provides every NAME; otherwise the offsets could
# be another build's, so it is refused.  Found without a new process: a
# script without the line costs one read by bash.

asked=
for s in "${scripts[@]}"; do
	text=
	IFS= read -r -d '' text < "$s"
	[[ $text == *probekit:*structs* ]] || continue
	while IFS= read -r line; do
		[[ $line =~ ^//[[:space:]]*probekit:[[:space:]]*structs([[:space:]].*)?$ ]] &&
			asked+=" ${BASH_REMATCH[1]}"
	done <<< "$text"
done
if [ -n "$asked" ]; then
	take_exe "$("$scan" build-id "${target_file:-/proc/$pid/exe}" 2>/dev/null)"
	want_id=${scanned#build-id }
	exe_name=${exe% (deleted)}
	sfile=${PROBEKIT_STRUCTS:-${0%/*}/../share/probekit/structs/${exe_name##*/}.bt}
	[ -f "$sfile" ] && [ -r "$sfile" ] ||
		die "the script asks for struct definitions (// probekit: structs), but '$sfile' does not exist; build it (make), or write it with probekit-structs BINARY TYPE... and name it in PROBEKIT_STRUCTS"
	header=$(grep -h -E '^// (build-id|provides):' -- "$sfile")
	[[ $header == *"// build-id: ${want_id:-none}"* ]] ||
		die "'$sfile' was made from another build than $shown_exe (build-id ${want_id:-none}); rebuild it (make), or restart the process from the binary it was made from"
	provided=" ${header//$'\n'/ } "
	read -r -a asked_names <<< "$asked"
	for name in "${asked_names[@]}"; do
		[[ $name =~ ^[A-Za-z_][A-Za-z0-9_]{0,127}$ ]] ||
			die "'$name' in a // probekit: structs line is not a C type name"
		[[ $provided == *" $name "* ]] ||
			die "the script asks for '$name' (// probekit: structs), which '$sfile' does not provide; add it to STRUCTS_TYPES or STRUCTS_ENUMS in mk/structs.mk, or to the probekit-structs command that wrote the file"
	done
	scripts=("$sfile" "${scripts[@]}")
fi

# --- join the scripts ----------------------------------------------------------
#
# probekit-scan joins them (wrapper/join.c): it finds the top-level
# blocks, merges BEGIN and END bodies, hoists C definitions, notes each
# __EXE__ of an attach point as a reference and replaces __PID__ elsewhere
# with PID (so never in a path inserted later).  It prints lines: the
# executable's path ("exe", see take_exe), then "ref N AT KIND SPEC" for each
# reference, its __EXE__ at byte AT of the program, "has N" for each one the
# executable has (the same run reads it; see take_found), the line map
# ("map AT F L": program lines from AT on are script F's from its line L;
# F 0 for the joiner's own lines), which lets bpftrace's "stdin:LINE:..."
# errors name the user's FILE:LINE (see stderr_filter), and "program",
# followed by the program.

# A file's readiness line names it, in a bpftrace format: a backslash
# doubled, '%' refused above, the rest as quote_path allows.
if [ -n "$target_file" ]; then
	quote_path "$target_file" "the path"
	READY_TEXT="probekit: tracing PATH=${target_file//\\/\\\\} (Ctrl-C to end)"
fi
# The window opens at bpftrace's first epoll_wait (wrapper/join.c says
# why): the syscall tracepoints this kernel has for it (arm64 has no
# epoll_wait, only epoll_pwait).  Without any, it opens in BEGIN, and
# each probe counts from its own attach: said once.
gate_open=
for t in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	[ -d "$t/events/syscalls" ] || continue
	for s in sys_enter_epoll_wait sys_enter_epoll_pwait; do
		[ -d "$t/events/syscalls/$s" ] && gate_open+="${gate_open:+ }$s"
	done
	break
done
[ -n "$gate_open" ] || [ $dry_run = 1 ] ||
	printf '%s: this kernel has no epoll_wait syscall tracepoints (is tracefs mounted at /sys/kernel/tracing?); each probe counts from its own attach, so probes of one path may disagree by the hits of the first few milliseconds\n' "$PROG" >&2
hits_form=
[ -n "$hits" ] && hits_form=${format:-text}
# A bpftrace whose -p also filters every probe it cannot filter at attach
# (tracepoints) by the traced PID, as its --help says ("-p, --pid PID
# filter actions and enable USDT probes on PID", 0.24 and later; 0.17 and
# 0.23 say "enable USDT probes on PID"), would keep the window's own
# probes on bpftrace from ever firing.  Such a bpftrace traces a PID
# without -p: the probes of a file then fire in every process that maps
# it, so its blocks keep the PID's hits to themselves (PROBEKIT_ONLY_PID,
# joined into the window's test), and the watcher below ends the trace
# when the process exits, as -p would.  The help's words are read from
# the binary (a grep, about 5 ms), not by running it once more; should a
# later bpftrace reword them, END says that the window never opened,
# rather than printing silent zeros.  --dry-run shows the program as for
# -p (it needs no bpftrace).
only_pid=
if [ -n "$pid" ] && [ $dry_run = 0 ] &&
	grep -q -a -F -- 'filter actions and enable USDT probes on PID' "$bpftrace" 2>/dev/null; then
	only_pid=$pid
fi
joined=$(PROBEKIT_GATE_PID=$$ PROBEKIT_GATE_OPEN=$gate_open PROBEKIT_HITS=$hits_form \
	PROBEKIT_ONLY_PID=$only_pid \
	PROBEKIT_MAX_RATE=$max_rate PROBEKIT_MAX_CPU=$max_cpu "$scan" join "$pid" "$READY_TEXT" "$duration" "${target_file:-/proc/$pid/exe}" "${scripts[@]}") ||
	exit 1
take_exe "$joined"
joined=$scanned

# --- resolve each __EXE__ probe to a file ------------------------------------------
#
# The join above read the executable; only for the probes it lacks does one
# more probekit-scan read the libraries.

# The lines before "program" (none of them is "program"), then the program.
head=${joined%%$'\n'program$'\n'*}
[ "${joined:${#head}:9}" = $'\nprogram\n' ] ||
	die "probekit-scan gave no program; is it the one built with this wrapper?"
marked=${joined:${#head}+9}
ref_kind=() ref_spec=() ref_type=() ref_where=() ref_q=() ref_at=()
ref_reads=() ref_nargs=()
map_at=() map_file=() map_line=()
libs=() gone_libs=() gone_maps=()
want= in_exe=
nrefs=0
head+=$'\n'
while [ -n "$head" ]; do
	line=${head%%$'\n'*}
	head=${head#*$'\n'}
	case $line in
	'ref '*)
		line=${line#ref * }
		nrefs=$((nrefs + 1)) n=$((nrefs))
		ref_at[n]=${line%% *} line=${line#* }
		ref_kind[n]=${line%% *}
		ref_spec[n]=${line#* }
		case ${ref_kind[n]} in
		usdt|U) ref_type[n]=usdt ;;
		*) ref_type[n]=syms ;;
		esac
		# uprobe:__EXE__:ADDRESS needs no symbol.
		[ ${ref_type[n]} = syms ] && [[ ${ref_spec[n]} == [0-9]* ]] && continue
		want+="$n"$'\t'"${ref_type[n]}"$'\t'"${ref_spec[n]}"$'\n' ;;
	'has '*)
		line=${line#has }
		in_exe+="${line%% *} 0 ${line#* }"$'\n' ;;
	'reads '*)
		line=${line#reads }
		ref_reads[${line%% *}]=${line#* } ;;
	'map '*)
		line=${line#map }
		map_at+=("${line%% *}") line=${line#* }
		map_file+=("${line%% *}") map_line+=("${line#* }") ;;
	esac
done

# Set ref_where[N] to WHERE[I] for each line "N I" of FOUND, and drop N
# from $want.  probekit-scan finds them by reading ELF files in order until
# every reference is found: USDT probes from their stapsdt notes, symbols as
# nm --defined-only (and -D) would list them with type T, t, W, i or u
# (functions and anything else in a code section), without a @VERSION
# suffix.  A SPEC is a bpftrace wildcard ('*' its only one); a usdt SPEC without a
# provider matches any provider.
take_found() {
	local where=($1) found=$2 n i rest line
	[ -n "$found" ] || return 0
	while read -r n i na; do
		ref_where[n]=${where[i]} ref_nargs[n]=$na
	done <<< "$found"
	rest=$want want=
	while IFS= read -r line; do
		[ -z "${ref_where[${line%%$'\t'*}]-}" ] && want+=$line$'\n'
	done <<< "${rest%$'\n'}"
}

# Files PID maps, other than its executable, into libs: in map order, only
# those whose inode is the one mapped (so a path the kernel escaped or a file
# replaced since is skipped).  A library deleted or replaced since it was
# mapped goes into gone_libs instead, with one of its mappings (an
# /proc/PID/map_files name, through which it can still be read) in
# gone_maps.
list_libs() {
	local lines line ino path range cand=() inos=() ranges=() got=() i
	mapfile -t lines < <(awk '$6 != "" { r = $1; ino = $5; sub(/^[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +/, ""); if (!seen[$0]++) print ino " " r " " $0 }' \
		"/proc/$pid/maps" 2>/dev/null)
	libs=() gone_libs=() gone_maps=()
	for line in "${lines[@]}"; do
		ino=${line%% *}; line=${line#* }
		range=${line%% *}; path=${line#* }
		case $path in /*) ;; *) continue ;; esac
		[ "$path" = "$exe" ] && continue
		case $path in
		*' (deleted)')
			gone_libs+=("${path% (deleted)}"); gone_maps+=("$range")
			continue ;;
		esac
		# A file seen only in the process's mount namespace (a
		# container's) is read, and traced, through /proc/PID/root.
		[ "$path" -ef "/proc/$pid/root$path" ] || path=/proc/$pid/root$path
		[ -f "$path" ] || continue
		cand+=("$path"); inos+=("$ino"); ranges+=("$range")
	done
	[ ${#cand[@]} -gt 0 ] || return 0
	# One stat for all; one each only if some file went away meanwhile.
	mapfile -t got < <(stat -c %i -- "${cand[@]}" 2>/dev/null)
	for i in "${!cand[@]}"; do
		if [ ${#got[@]} != ${#cand[@]} ]; then
			got[i]=$(stat -c %i -- "${cand[i]}" 2>/dev/null)
		fi
		if [ "${got[i]}" = "${inos[i]}" ]; then
			libs+=("${cand[i]}")
		else
			gone_libs+=("${cand[i]}"); gone_maps+=("${ranges[i]}")
		fi
	done
}

# ref_where[N]: "exe", or the index in libs of the first library that has it.
take_found exe "$in_exe"
if [ -n "$want" ] && [ -n "$pid" ]; then
	list_libs
	if [ ${#libs[@]} -gt 0 ]; then
		found=$("$scan" has "${libs[@]}" <<< "$want") || exit 1
		take_found "${!libs[*]}" "$found"
	fi
fi

# A probe on a file of PID is named as PID sees it, /proc/PID/root/PATH.
# bpftrace -p lists the files PID maps under that name too, and one that
# does so and also resolves the plain PATH (bpftrace 0.27) takes them for
# two files and attaches the probe twice, so that every hit counts
# double; the /proc/PID/root name is one file to every bpftrace (0.17
# reads it as any path).  Sets path.
pid_path() {
	path=$1
	[ -n "$pid" ] || return 0
	case $path in /proc/"$pid"/*) ;; *) path=/proc/$pid/root$path ;; esac
}

# In reference order, so that the first problem is the one reported.
missing= missing_n=
for ((n = 1; n <= nrefs; n++)); do
	kind=${ref_kind[n]} spec=${ref_spec[n]} type=${ref_type[n]}
	if [ $type = syms ] && [[ $spec == [0-9]* ]]; then
		pid_path "$exe"
		quote_path "$path" "the executable${pid:+ of PID $pid}" uprobe
		ref_q[n]=$quoted
		continue
	fi
	where=${ref_where[n]-}
	if [ "$where" = exe ]; then
		if [ $exe_deleted = 1 ]; then
			[ $type = usdt ] &&
				die "the executable of PID $pid was deleted or replaced ($shown_exe); bpftrace 0.17 cannot attach USDT probes to it (it finds them by path and would silently attach nothing): restart the process from an existing file"
			path=/proc/$pid/exe
		else
			path=$exe
		fi
	elif [ -n "$where" ]; then
		path=${libs[where]}
	else
		[ -n "$missing" ] || missing="$kind:__EXE__:$spec" missing_n=$n
		continue
	fi
	pid_path "$path"
	quote_path "$path" "the file of $kind:__EXE__:$spec" "${type/syms/uprobe}"
	ref_q[n]=$quoted
done

if [ -n "$missing" ]; then
	# A library deleted or replaced since the process loaded it may be
	# where the probe is: bpftrace 0.17 finds probes by path, so it cannot
	# attach to that library.  (Only here, on the way to an error, are
	# such libraries read.)
	for i in "${!gone_libs[@]}"; do
		[ -n "$(printf '%s' "$want" | "$scan" has "/proc/$pid/map_files/${gone_maps[i]}")" ] || continue
		die "the library ${gone_libs[i]} that PID $pid loaded was deleted or replaced since, and it holds probes the script names; bpftrace 0.17 cannot attach to a deleted file (it finds probes by path): restart the process to trace it"
	done
	# A USDT probe that no file has is named with the nearest one there
	# is, in the file that has that one, whatever the other probes are;
	# with none near it, the script is likely for another program.
	if [ ${ref_type[missing_n]} = usdt ]; then
		if [ -n "$pid" ]; then
			files=("$exe" "${libs[@]}")
			[ $exe_deleted = 1 ] && files[0]=/proc/$pid/exe
		else
			files=("$target_file")
		fi
		near=$("$scan" nearest "${ref_spec[missing_n]}" "${files[@]}") || exit 1
		if [ -n "$near" ]; then
			i=${near%%$'\t'*} near=${near#*$'\t'}
			near_file=${files[i]}
			[ "$i" = 0 ] && near_file=$shown_exe
			die "no USDT probe ${ref_spec[missing_n]} in $near_file; nearest: ${near%$'\n'}"
		fi
		[ -n "$pid" ] ||
			die "$target_file has no probe ${ref_spec[missing_n]}, nor one named like it; is it the right file, built with probes? (list them: readelf -n $target_file)"
		die "PID $pid ($shown_exe) has none of the script's USDT probes, in its executable or its libraries, nor one named like ${ref_spec[missing_n]}; is it the right process, built with probes?"
	fi
	[ -n "$pid" ] ||
		die "$target_file has no $missing (bpftrace would silently attach nothing); check the name with: nm -D $target_file"
	die "PID $pid ($shown_exe) has no $missing, in its executable or its libraries (bpftrace would silently attach nothing); check the name with: bpftrace -p $pid -l 'usdt:*' or readelf -n"
fi

# FILE:LINE of program line $1, in loc; empty for the wrapper's own lines.
map_line() {
	local x=$1 i=${#map_at[@]}
	loc=
	while ((i-- > 0)); do
		((map_at[i] <= x)) || continue
		[ "${map_file[i]}" = 0 ] && return
		local name=${scripts[map_file[i] - 1]}
		loc="${name//[[:cntrl:]]/?}:$((map_line[i] + x - map_at[i]))"
		return
	done
}

# bpftrace 0.17 refuses an argN that a probe does not have; a newer one
# (0.27) compiles it and reads whatever is there.  The probe's notes say
# how many it has (the fewest of its sites), so both refuse it here.
for ((n = 1; n <= nrefs; n++)); do
	[ -n "${ref_reads[n]-}" ] && [ "${ref_nargs[n]--1}" -ge 0 ] || continue
	((ref_reads[n] < ref_nargs[n])) && continue
	nl=${marked:0:ref_at[n]}
	nl=${nl//[!$'\n']/}
	map_line $((${#nl} + 1))
	if [ "${ref_nargs[n]}" = 0 ]; then has="no arguments"; else has="${ref_nargs[n]} arguments, arg0 to arg$((ref_nargs[n] - 1))"; fi
	die "${loc:+$loc: }probe ${ref_spec[n]} has $has; its block reads arg${ref_reads[n]}"
done

# --- substitute, then run --------------------------------------------------------

# Each reference's __EXE__ becomes its quoted path, cut by offset (which
# is quick whatever the program's size, and no text of a script can pose
# as a reference).
program= at=0
for ((n = 1; n <= nrefs; n++)); do
	program+=${marked:at:ref_at[n]-at}${ref_q[n]}
	at=$((ref_at[n] + 7))
done
program+=${marked:at}

# delete() returns nothing in bpftrace 0.17, which refuses to use its
# value; a newer one (0.27) returns whether the key was there and warns
# "Return value discarded" for each delete() that is a statement, where the
# scripts write it.  When the installed bpftrace warns so (asked once, and
# only for a program with a delete()), each statement that starts a line
# with delete( takes the value into $pk_deleted, which nothing reads.
# Lines stay lines, so FILE:LINE still maps; the columns of that line move.
if [[ $program == *'delete('* ]] &&
	"$bpftrace" --dry-run -e 'BEGIN { @pk[1] = 1; delete(@pk[1]); }' 2>&1 |
	grep -q 'Return value discarded'; then
	kept=$program program=
	while [ -n "$kept" ]; do
		line=${kept%%$'\n'*}
		if [ "$line" = "$kept" ]; then kept=; else kept=${kept#*$'\n'}; line+=$'\n'; fi
		[[ $line =~ ^([[:space:]]*)delete\( ]] &&
			line="${BASH_REMATCH[1]}\$pk_deleted = ${line#"${BASH_REMATCH[1]}"}"
		program+=$line
	done
fi

if [ $dry_run = 1 ]; then
	printf '%s' "$program"
	exit 0
fi

# A PID is traced alone (bpftrace -p).  When children of it run its executable
# (PostgreSQL's backends, a pre-forking server's workers), say so, once,
# and how to trace them all.  Read from each thread's children list and
# compared by inode (/proc/C/exe against /proc/PID/exe), without a fork.
warn_children() {
	local t c kids=() n=0
	for t in "/proc/$pid/task/"*/children; do
		c=
		{ IFS= read -r -d '' c < "$t"; } 2>/dev/null
		kids+=($c)
	done
	for c in "${kids[@]}"; do
		[ "/proc/$c/exe" -ef "/proc/$pid/exe" ] && n=$((n + 1))
	done
	[ $n -gt 0 ] || return 0
	printf '%s: PID %d has %d child process(es) running %s, which tracing PID %d does not see; to trace every process that runs it, later ones too, give its path instead of the PID: %s [options] %s SCRIPT...\n' \
		"$PROG" "$pid" "$n" "$shown_exe" "$pid" "$PROG" "$shown_exe" >&2
}
[ -z "$pid" ] || warn_children

# A PATH traced is the file at that path now: bpftrace attaches to its
# inode, and cannot follow a new file put there later, as a package
# upgrade or a deploy does (cp new && mv new PATH): processes started from
# the new file are not traced, and nothing would say so.  A watcher checks
# the path's inode once a second while bpftrace runs (it is bpftrace's
# child after the exec, and ends with it), and says it once when a new
# file is there (specs/limits.toml's REPLACED_NOT_FOLLOWED, the words the
# BCC tools print too), through bpftrace's own stderr (/proc/$$/fd/2, the
# filter's pipe): it holds no descriptor of the caller's, so a caller that
# reads the trace's output to its end is not kept waiting by it.  A file
# only removed starts no new process, and is not said.
watch_file() {
	local was now fmt
	was=$(stat -L -c %d:%i -- "$target_file" 2>/dev/null) || return 0
	fmt=$(message REPLACED_NOT_FOLLOWED) || return 0
	while kill -0 $$ 2>/dev/null; do
		sleep 1
		now=$(stat -L -c %d:%i -- "$target_file" 2>/dev/null) || continue
		[ "$now" = "$was" ] && continue
		kill -0 $$ 2>/dev/null || return 0
		# shellcheck disable=SC2059
		printf "%s: $fmt\n" "$PROG" "$shown_target" "$PROG" 2>/dev/null >"/proc/$$/fd/2"
		return 0
	done
}
if [ -n "$target_file" ]; then
	shown_target=${target_file//[[:cntrl:]]/?}
	(trap '' INT TERM; watch_file) </dev/null >/dev/null 2>&1 &
fi
# Without -p (only_pid), bpftrace does not end with the process: the
# process's exit ends the trace here, as Ctrl-C would (END, the maps),
# within a second; its probes fire no more meanwhile.
watch_pid() {
	while kill -0 $$ 2>/dev/null; do
		sleep 1
		target_gone || continue
		kill -INT $$ 2>/dev/null
		return 0
	done
}
if [ -n "$only_pid" ]; then
	(trap '' INT TERM; watch_pid) </dev/null >/dev/null 2>&1 &
fi

# bpftrace's own -o buffers the file until it exits; a redirection keeps
# it line-buffered, so the readiness line shows as soon as it is printed.
# No "bash: ...: Permission denied" beside the wrapper's own line.
if [ -n "$outfile" ]; then
	[ -d "$outfile" ] && die "cannot write the output file '$outfile': it is a directory"
	{ exec >"$outfile"; } 2>/dev/null ||
		die "cannot write the output file '$outfile' (check that its directory exists and is writable)"
fi

# --- bpftrace's stderr ---------------------------------------------------------
#
# The filter between bpftrace's stderr and ours.  It drops the harmless
# lines below (HARMLESS), and turns "stdin:LINE[:COLS]" of a message
# about the program into FILE:LINE of the script it came from (by the line
# map; columns are bpftrace's, exact but on a line where __EXE__ or __PID__
# was replaced).  When bpftrace fails because the process went away while
# it was starting, its messages are many and cryptic ("No such process",
# "Error initializing context", attach errors, an uncaught
# MountNSException); the first such message, seen while the process is
# gone, becomes one line "PID N exited while the trace was starting" and
# the rest are dropped.  A message about the program itself (FILE:LINE) is
# always shown as it is.  Once bpftrace has closed its stderr, the filter
# removes the uprobe events it left in tracefs (drop_left_events).

# bpftrace's lines that say nothing a user of these scripts can act on,
# as patterns; every other line is passed on.  bpftrace 0.17 says it
# "couldn't set RLIMIT_MEMLOCK" (a kernel since 5.11 charges BPF memory to
# the cgroup, not to that limit); newer bpftrace warns
# that it "Could not read functions from .../available_filter_functions",
# the kernel's list of traceable functions, which a kernel without
# kprobes has not: that list only matters to kprobe and fentry probes,
# which none of probekit's scripts uses.
HARMLESS=(
	"*couldn't set RLIMIT_MEMLOCK*"
	"WARNING: Could not read functions from */available_filter_functions*"
)

# Remove the uprobe events that BCC made in tracefs for this bpftrace
# (its PID is this script's, $$, since the exec) and left there.  When
# perf_event_open() of a uprobe fails, BCC's bpf_attach_uprobe() makes a
# tracefs event (uprobe_events, named NAME_bcc_PID) and opens that; when
# that fails too it returns without removing the event.  Both fail with
# ESRCH when bpftrace passes -p's PID to a uprobe (newer bpftrace does;
# 0.17 passes -1) and the process has exited meanwhile: every run that
# loses its process while attaching left one event per uprobe until
# reboot.  Once bpftrace is gone no such event has a user; one still
# open while bpftrace's files are being closed is busy (EBUSY), and is
# tried again for up to a second.
drop_left_events() {
	local f ev name left=() try
	for f in /sys/kernel/tracing/uprobe_events /sys/kernel/debug/tracing/uprobe_events; do
		[ -r "$f" ] && break
	done
	[ -r "$f" ] || return 0
	# Lines "p:uprobes/NAME PATH:0xOFFSET".
	while IFS= read -r ev; do
		name=${ev%% *} name=${name#*:}
		[[ $name == uprobes/*_bcc_$$ ]] && left+=("$name")
	done < "$f"
	for name in "${left[@]}"; do
		for try in {1..50}; do
			{ printf -- '-:%s\n' "$name" >> "$f"; } 2>/dev/null && break
			sleep 0.02
		done
	done
}


stderr_filter() {
	local line loc rest first h gone=0
	while IFS= read -r line || [ -n "$line" ]; do
		for h in "${HARMLESS[@]}"; do
			# shellcheck disable=SC2053
			[[ $line == $h ]] && continue 2
		done
		# A message about the program names the script's FILE:LINE, but
		# one about a file of PID (/proc/PID/root/...) that went away
		# with PID is its exit (newer bpftrace checks the file itself).
		if [[ $line =~ ^stdin:([0-9]{1,9})(-([0-9]{1,9}))?(:.*)$ ]] &&
		   ! { [ -n "$pid" ] && [[ $line == *"/proc/$pid/"* ]] && target_gone; }; then
			rest=${BASH_REMATCH[4]}
			map_line "${BASH_REMATCH[1]}"
			if [ -n "$loc" ]; then
				if [ -n "${BASH_REMATCH[3]}" ]; then
					first=$loc
					map_line "${BASH_REMATCH[3]}"
					[ "${loc%:*}" = "${first%:*}" ] && first+="-${loc##*:}"
					loc=$first
				fi
				line=$loc$rest
			fi
			printf '%s\n' "$line"
			continue
		fi
		[ $gone = 1 ] && continue
		if [ -n "$pid" ] && target_gone; then
			gone=1
			printf '%s: PID %d exited while the trace was starting\n' "$PROG" "$pid"
			continue
		fi
		printf '%s\n' "$line"
	done
	drop_left_events
}

# --- run ----------------------------------------------------------------------
#
# The wrapper execs bpftrace, so signals (Ctrl-C prints END and the maps)
# and the exit code are bpftrace's own.  The filter above reads bpftrace's
# stderr in a process of its own, which ignores SIGINT/SIGTERM so that a
# Ctrl-C to the process group ends bpftrace while the filter reads on
# until bpftrace closes stderr.

bt_opts=()
[ -n "$pid" ] && [ -z "$only_pid" ] && bt_opts+=(-p "$pid")
[ -n "$format" ] && bt_opts+=(-f "$format")
# Under -f json, bpftrace still writes the blank lines of its text form
# (two before the maps it prints at exit), which break a reader of JSON
# lines, and 0.27 writes the window's wake-up printf("") as an empty
# printf object: a grep of its own drops both, line by line as they come,
# and ignores SIGINT/SIGTERM, so that Ctrl-C to the process group leaves
# it to pass END's output and the maps on.  env --ignore-signal, not a
# trap: bash 5.3 (Debian unstable) gives a command exec'd from a process
# substitution SIGINT's default back, and bpftrace then died of SIGPIPE
# writing END's output.
if [ "$format" = json ]; then
	exec "$bpftrace" "${bt_opts[@]}" -e "$program" -- "${args[@]}" \
		2> >(trap '' INT TERM; stderr_filter >&2) \
		> >(exec env --ignore-signal=INT --ignore-signal=TERM \
			grep --line-buffered -v -x -e '' -e '{"type": "printf", "data": ""}')
fi
exec "$bpftrace" "${bt_opts[@]}" -e "$program" -- "${args[@]}" \
	2> >(trap '' INT TERM; stderr_filter >&2)
