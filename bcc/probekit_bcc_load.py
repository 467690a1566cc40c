# SPDX-License-Identifier: BSD-2-Clause
"""probekit_bcc_load: compile and load a tool's BPF program with BCC and
attach it, each failure one line that says why instead of a traceback."""

import atexit
import ctypes
import errno
import os
import subprocess
import sys
import tempfile

from probekit_bcc_args import command, die
from probelib import bcc_compat as compat, toolspec as spec

# In-flight requests a tool remembers (map size), name lengths (bdev
# names and RPC methods; I/O type names): specs/limits.toml, as libbpf/'s.
_LIMITS = spec.limits()
MAX_INFLIGHT = _LIMITS["MAX_INFLIGHT"]
NAME_LEN = _LIMITS["NAME_LEN"]
TYPE_LEN = _LIMITS["TYPE_LEN"]


# C shared by the tools' BPF programs.  A USDT string argument is read in
# two steps: bpf_usdt_readarg() of the pointer, which BCC rewrites per probe
# and so must be called in the probe's own function, not in a macro, then
# USER_STR() into a zeroed fixed-size buffer.  bpf_probe_read_user_str stops
# at the NUL, so equal strings give equal map keys (a fixed-size read would
# copy whatever follows the string).
BPF_COMMON = r"""
#include <uapi/linux/ptrace.h>

#define USER_STR(buf, ptr) bpf_probe_read_user_str(buf, sizeof(buf), (void *)(ptr))

/* --max-rate: every probe function starts with hit_count(), which counts
 * its hit per CPU when the tool was loaded to count them, and is nothing
 * otherwise (probekit_bcc.run() sums the CPUs' counts each second).  A
 * function, not a macro: BCC rewrites map calls only outside macros. */
#ifdef COUNT_HITS
BPF_PERCPU_ARRAY(pk_hits, u64, 1);
static __always_inline void hit_count(void)
{
    int zero = 0;
    u64 *n = pk_hits.lookup(&zero);

    if (n)
        (*n)++;
}
#else
static __always_inline void hit_count(void) {}
#endif
"""


# A BPF program whose fetching atomic add is written as assembly.
_FETCH_ADD_PROBE = r"""
from bcc import BPF
BPF(text='''
int probekit_fetch_add(void *ctx)
{
    u64 n = 0, v = 1;
    __asm__ __volatile__("%0 = atomic_fetch_add((u64 *)(%1 + 0), %0)"
                         : "+r"(v) : "r"(&n) : "memory");
    return v;
}
''')
"""


def fetch_add_cflags():
    """["-DFETCH_ADD_ASM"] where BCC's clang assembles BPF's fetching
    atomic add written as assembly, else [] (clang 14's assembler does
    not know it; its __sync_fetch_and_add() does the same).  Found out by
    compiling it in a process of its own: clang's assembler ends the
    process that it fails in."""
    r = subprocess.run([sys.executable, "-c", _FETCH_ADD_PROBE],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return ["-DFETCH_ADD_ASM"] if r.returncode == 0 else []


def _first_error(log):
    for line in log.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    return None


def load(tool, text, cflags=(), usdt=None, count_hits=False):
    """Compile and load a BPF program (and attach its USDT probes).
    What clang and libbcc print (to stdout and stderr) is captured; on
    failure one line says why.  count_hits: hit_count() counts (for
    --max-rate)."""
    from bcc import BPF
    cflags = list(cflags) + (["-DCOUNT_HITS"] if count_hits else [])
    sys.stdout.flush()
    saved = os.dup(1), os.dup(2)
    log = tempfile.TemporaryFile()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    err = None
    try:
        b = BPF(text=(usdt.text if usdt else "") + text,
                cflags=list(cflags))
    except Exception as e:
        err = e
    finally:
        # What libbcc wrote through C stdio but left in its buffer (BCC
        # 0.37's "Unable to find kernel headers" on stdout) goes to the
        # log too, not out at exit.
        ctypes.CDLL(None).fflush(None)
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
    if err is None:
        # Ahead of BCC's own cleanup (atexit runs the last registered
        # first), so that a failed detach is one line and exit 1.
        atexit.register(_detach_at_exit, tool, b)
        for s in usdt.sites if usdt else ():
            attach(tool, "USDT probe %s of %s" % (s.probe, getattr(
                       usdt, "where", "PID %d" % usdt.pid)),
                   compat.attach_usdt_site, b, s.fn, s.path, s.addr,
                   s.offset, usdt.pid, s.ref_ctr,
                   exited=getattr(usdt, "exited", None))
        return b
    log.seek(0)
    diag = log.read(1 << 20).decode(errors="replace")
    msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
    headers = ("BCC cannot compile: no kernel headers for %s "
               "(run 'make deps')" % os.uname().release)
    if "Unable to find kernel headers" in diag:
        die(tool, headers)
    if "compile" in msg.lower():
        first = _first_error(diag)
        if first and "file not found" in first:
            die(tool, "%s: %s" % (headers, first))
        die(tool, "BCC cannot compile its BPF program: %s"
            % (first or "see 'bcc/%s --ebpf'" % tool))
    if "permitted" in msg or "EPERM" in msg or "denied" in msg:
        # The target's check (probekit_bcc_target.check_privilege) found
        # every capability specs/privileges.toml names.
        die(tool, "BCC cannot load its BPF program: %s, though this "
            "process has the capabilities tracing needs (kernel "
            "lockdown, or a security module?)" % msg)
    die(tool, "BCC cannot load its BPF program: %s" % (msg or repr(err)))


def attach(tool, what, fn, *args, exited=None, **kwargs):
    """Run a BPF attach call; turn its exception into one line.  exited:
    None, or a function giving the line for a target that has exited
    meanwhile (the likely cause of a failure), or None."""
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    denied = False
    try:
        fn(*args, **kwargs)
    except OSError as e:
        err, denied = e.strerror, e.errno in (errno.EACCES, errno.EPERM)
    except Exception as e:
        err = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
    else:
        err = None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    if err and exited is not None and exited():
        die(tool, exited())
    if denied:
        die(tool, "cannot attach to %s: %s, though this process has the "
            "capabilities tracing needs (a security module?)" % (what, err))
    if err:
        die(tool, "cannot attach to %s: %s" % (what, err))




def _detach_at_exit(tool, b):
    """BCC's cleanup (it clears its uprobes from tracefs's
    uprobe_events); if it fails, one line saying so, and exit 1 with
    nothing more run, rather than BCC's traceback and exit 0."""
    sys.stdout.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        b.cleanup()
        err = None
    except Exception as e:
        err = str(e).strip() or repr(e)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    if err:
        need = [name for _, name in spec.needs("bcc")]
        sys.stderr.write("%s: cannot detach its probes: %s (clearing them "
                         "from tracefs needs root, or %s)\n"
                         % (command(tool), err, spec.and_list(need)))
        sys.stderr.flush()
        os._exit(1)


def hits(b):
    """Probe hits counted so far by hit_count(), over every CPU."""
    return sum(b["pk_hits"][0])


def detach_all(b):
    """Detach every uprobe and USDT site; the maps stay readable.  The
    kernel drops the semaphores they raised as their perf fds close."""
    for ev in list(b.uprobe_fds):
        b.detach_uprobe_event(ev)
