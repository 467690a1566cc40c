# SPDX-License-Identifier: BSD-2-Clause
"""probelib.bcc_compat: register uprobes the way bpftrace and libbpf do,
on a BCC whose Python cannot.  The bcc/ tools attach through it
(probekit_bcc_load, probekit_bcc_probes), and so does bench/first_bcc.py,
the smallest BCC USDT program, so that the bench times the same attach:
it sits in probelib, below both, and imports BCC only when called.

The kernel keeps one uprobe per file and offset, and refuses a second
registration there whose ref_ctr_offset (the semaphore's file offset)
differs.  bpftrace and libbpf pass the semaphore's offset for a USDT probe
and 0 for a plain uprobe.  BCC 0.26's Python declares bpf_attach_uprobe()
with six arguments while libbcc takes seven, the seventh being
ref_ctr_offset, so libbcc reads whatever lies on the stack there; and its
attach_uprobe() has no way to pass a semaphore's offset.  Where that is so,
this module calls libbcc's function through a private seven-argument
declaration, with the offset the others pass, and files the result with
BCC as its attach_uprobe() would (through BCC's private methods, which is
why the workaround checks that they are there).

What BCC can do is found out from BCC itself rather than assumed from its
version: a binding of seven arguments means BCC passes ref_ctr_offset
itself (0 for a plain uprobe), and an attach_uprobe() that takes
ref_ctr_offset can register a USDT site with its semaphore.  Where BCC
does, this module steps aside and calls BCC.  The version is named when
neither way is open.
"""

import ctypes as ct
import inspect
import os

# What the workaround needs of BCC: the binding it replaces has this many
# arguments (BCC 0.26), and BCC has these private methods.
KNOWN_BINDING_ARGS = 6
_PRIVATE = ("_get_uprobe_evname", "_add_uprobe_fd", "load_func")

_attach7 = None


def bcc_version():
    import bcc
    return getattr(bcc, "__version__", "of unknown version")


def binding_args():
    """How many arguments BCC's Python declares bpf_attach_uprobe with."""
    from bcc.libbcc import lib
    return len(lib.bpf_attach_uprobe.argtypes or ())


def bcc_takes_ref_ctr():
    """Whether BCC's attach_uprobe() can register a semaphore's offset."""
    from bcc import BPF
    return "ref_ctr_offset" in inspect.signature(BPF.attach_uprobe).parameters


def attach_uprobe(bpf, fn_name, path, sym, offset, pid, ret=False):
    """A plain uprobe (or uretprobe) on function sym, at file offset offset
    of the ELF file at path, registered with ref_ctr_offset 0."""
    if binding_args() > KNOWN_BINDING_ARGS:
        f = bpf.attach_uretprobe if ret else bpf.attach_uprobe
        f(name=path.encode(), sym=sym.encode(), fn_name=fn_name.encode(),
          pid=pid)
        return
    _attach_with_ref_ctr(bpf, fn_name, path, offset, pid, ret, 0)


def attach_usdt_site(bpf, fn_name, path, addr, offset, pid, ref_ctr):
    """A USDT site, at virtual address addr and file offset offset of the
    ELF file at path, registered with its semaphore's offset ref_ctr."""
    if bcc_takes_ref_ctr():
        bpf.attach_uprobe(name=path.encode(), addr=addr,
                          fn_name=fn_name.encode(), pid=pid,
                          ref_ctr_offset=ref_ctr)
        return
    _attach_with_ref_ctr(bpf, fn_name, path, offset, pid, False, ref_ctr)


def _attach_with_ref_ctr(bpf, fn_name, path, offset, pid, ret, ref_ctr):
    """libbcc's bpf_attach_uprobe() with all seven arguments, filed with
    BCC so that its cleanup detaches it.  Raises OSError on failure, and
    RuntimeError when this BCC is not one the workaround knows."""
    global _attach7
    from bcc import BPF
    from bcc.libbcc import lib
    n = binding_args()
    missing = [m for m in _PRIVATE if not hasattr(bpf, m)]
    if n != KNOWN_BINDING_ARGS or missing:
        raise RuntimeError(
            "BCC %s declares bpf_attach_uprobe with %d arguments%s; the "
            "bcc/ tools know BCC 0.26's %d, or a BCC that takes "
            "ref_ctr_offset itself" % (
                bcc_version(), n,
                " and lacks " + ", ".join(missing) if missing else "",
                KNOWN_BINDING_ARGS))
    if _attach7 is None:
        _attach7 = lib["bpf_attach_uprobe"]     # a private copy of it
        _attach7.restype = ct.c_int
        _attach7.argtypes = [ct.c_int, ct.c_int, ct.c_char_p, ct.c_char_p,
                             ct.c_ulonglong, ct.c_int, ct.c_uint]
    bpath = path.encode()
    fn = bpf.load_func(fn_name.encode(), BPF.KPROBE)
    ev = bpf._get_uprobe_evname(b"r" if ret else b"p", bpath, offset, pid)
    fd = _attach7(fn.fd, 1 if ret else 0, ev, bpath, offset, pid, ref_ctr)
    if fd < 0:
        err = ct.get_errno()
        raise OSError(err, "Failed to attach BPF to %s: %s"
                      % ("uretprobe" if ret else "uprobe", os.strerror(err)))
    bpf._add_uprobe_fd(ev, fd)
