# SPDX-License-Identifier: BSD-2-Clause
"""gdb helpers for blktgt: the same view of a live process (gdb -p PID) and
of a core (gdb BINARY CORE).

  blktgt-threads   each reactor: index, name, thread, queued messages, what it runs
  blktgt-bdevs     each bdev: name, kind, size, block size, openers, I/O in flight
  blktgt-exports   each export: bdev, state overall and per reactor, clients
  blktgt-conns     each NBD connection: peer, export, state, requests in flight
  blktgt-ios       each I/O in flight: bdev, type, offset, length, state, age

Every command prints one line per object, "KIND key=value ...", then one
"# N KIND" line; a value with spaces or quotes is a JSON string.  Pretty-
printers cover struct reactor, bdev, export, nbd_conn and bdev_io.

State is read through gdb.Value from blktgt's variables, found by name and
checked by type, so a field moved or renamed in the C code is followed or
reported, never misread.  The NBD server's per-reactor state is found by its
type (struct nbd_thread) wherever it lives, so it survives nbd.c being
split.  A missing symbol, a stripped binary, no process, or a core from
another build ends the command with one line saying so.

Load it with "source gdb/blktgt.py", or let gdb load the copy blktgt
carries in its .debug_gdb_scripts section (README.md, "Debugging with gdb").
"""

import json
import re
import struct
import time

import gdb
import gdb.printing

NAME_MAX = 64           # bound on any string read from the target
LIST_MAX = 1 << 20      # bound on any list walked (a core may be corrupt)
QUEUED_SHOWN = 4        # queued message functions named per reactor
PT_NOTE, PT_PHDR, NT_GNU_BUILD_ID = 4, 6, 3


class Problem(Exception):
    """Something this command cannot show; the message says what to do."""


# --- finding blktgt's state ---------------------------------------------

def _tag(t):
    """The struct tag behind a type: arrays and pointers stripped."""
    t = t.strip_typedefs()
    while t.code in (gdb.TYPE_CODE_ARRAY, gdb.TYPE_CODE_PTR):
        t = t.target().strip_typedefs()
    return t.tag if t.code == gdb.TYPE_CODE_STRUCT else str(t)


def _type(name):
    try:
        return gdb.lookup_type(name)
    except gdb.error:
        raise Problem(f"no type '{name}' in the debug info: this is not "
                      "blktgt, or a stripped or older build; load the "
                      "unstripped blktgt that made the process or core "
                      "(gdb BINARY CORE)") from None


def _symbols(name):
    syms = []
    s = gdb.lookup_global_symbol(name)
    if s is not None:
        syms.append(s)
    syms += gdb.lookup_static_symbols(name)
    return [s for s in syms if s.is_variable]


def _var(name, tag):
    """The variable `name` (global or file-static) whose type is, or is an
    array of or pointer to, `tag` (a struct tag or a scalar type name)."""
    syms = _symbols(name)
    for s in syms:
        if _tag(s.type) == tag:
            return s.value()
    if syms:
        raise Problem(f"symbol '{name}' is not of type {tag} "
                      f"({syms[0].type}): a blktgt this script does not know")
    raise Problem(f"no symbol '{name}' ({tag}): this is not blktgt, or a "
                  "stripped build; load the unstripped blktgt binary")


_by_type_cache = {}


def _var_of_type(tag, hint):
    """The one variable whose type is an array of struct `tag`: tried by
    the name `hint` first, then searched for by type, so a move to another
    file or a new name is followed."""
    key = (gdb.current_progspace().filename, tag)
    if key in _by_type_cache:
        return _by_type_cache[key].value()
    _type("struct " + tag)
    found = [s for s in _symbols(hint) if _tag(s.type) == tag]
    if not found:
        text = gdb.execute(f"info variables -q -t {tag}", to_string=True)
        for m in re.finditer(r"struct %s\s+\**(\w+)\s*(\[|;)" % re.escape(tag), text):
            found += [s for s in _symbols(m.group(1)) if _tag(s.type) == tag]
    if len(found) != 1:
        raise Problem(f"{'no' if not found else 'more than one'} variable of "
                      f"type struct {tag}: a blktgt this script does not know")
    _by_type_cache[key] = found[0]
    return found[0].value()


def _str(v):
    """A char array or pointer as text, bounded, up to its first NUL."""
    try:
        t = v.type.strip_typedefs()
        if t.code == gdb.TYPE_CODE_ARRAY:
            n = min(t.sizeof, NAME_MAX)
            raw = bytes(gdb.selected_inferior().read_memory(v.address, n))
        else:
            if int(v) == 0:
                return "-"
            raw = v.string(encoding="latin-1", length=NAME_MAX).encode("latin-1")
        return raw.split(b"\0")[0].decode("utf-8", "replace")
    except gdb.error:
        return "?"


def _enum(v, prefix):
    """An enum value as its name without prefix, e.g. PAUSED."""
    s = str(v)
    return s[len(prefix):] if s.startswith(prefix) else s


def _fn(v):
    """A function pointer as the function's name."""
    addr = int(v)
    if addr == 0:
        return "-"
    b = gdb.block_for_pc(addr)
    while b is not None and b.function is None:
        b = b.superblock
    if b is not None and b.function is not None:
        return b.function.name
    return hex(addr)


def _walk(head, link="next", what="list"):
    """The nodes of a NULL-terminated list, bounded and cycle-safe."""
    seen = set()
    p = head
    while int(p) != 0:
        a = int(p)
        if a in seen or len(seen) >= LIST_MAX:
            raise Problem(f"the {what} loops or is longer than {LIST_MAX}: "
                          "corrupt memory, or a core from another build")
        seen.add(a)
        yield p
        p = p.dereference()[link]


def _fmt(kind, fields):
    out = [kind]
    for k, v in fields:
        v = "-" if v is None else str(v)
        if v == "" or re.search(r'[\s"=]', v):
            v = json.dumps(v)
        out.append(f"{k}={v}")
    return " ".join(out)


def _emit(kind, rows, plural):
    for r in rows:
        gdb.write(_fmt(kind, r) + "\n")
    gdb.write(f"# {len(rows)} {plural}\n")


# --- checks before reading anything -------------------------------------

def _read(addr, n):
    return bytes(gdb.selected_inferior().read_memory(addr, n))


def _build_id_in_memory():
    """The executable's build-id as the process or core holds it, found
    from the auxiliary vector (AT_PHDR, AT_PHNUM) and its PT_NOTE segments,
    so it does not depend on the binary gdb loaded; None when it cannot be
    read (a core without the executable's first page)."""
    aux = dict(re.findall(r"^\d+\s+(AT_PHDR|AT_PHNUM)\s.*\s(0x[0-9a-f]+|\d+)$",
                          gdb.execute("info auxv", to_string=True), re.M))
    try:
        phdr, phnum = int(aux["AT_PHDR"], 0), int(aux["AT_PHNUM"], 0)
        if not 0 < phnum <= 64:
            return None
        ph = [struct.unpack_from("<IIQQQQQQ", _read(phdr + 56 * i, 56))
              for i in range(phnum)]
        base = next(phdr - p[3] for p in ph if p[0] == PT_PHDR)
        for p in ph:
            if p[0] != PT_NOTE:
                continue
            notes, off = _read(base + p[3], min(p[5], 4096)), 0
            while off + 12 <= len(notes):
                namesz, descsz, ntype = struct.unpack_from("<III", notes, off)
                name_end = off + 12 + namesz
                desc = off + 12 + (namesz + 3) // 4 * 4
                if ntype == NT_GNU_BUILD_ID and notes[off + 12:name_end] == b"GNU\0":
                    return notes[desc:desc + descsz].hex()
                off = desc + (descsz + 3) // 4 * 4
    except (KeyError, StopIteration, ValueError, gdb.error, struct.error):
        return None
    return None


def check_target():
    """Raise Problem unless a blktgt process or core, matching the loaded
    binary and its debug info, is there to read."""
    inf = gdb.selected_inferior()
    if inf.pid == 0 or not inf.threads():
        raise Problem("no process or core: attach with gdb -p PID, or open a "
                      "core with gdb BINARY CORE")
    if not gdb.current_progspace().filename:
        raise Problem("gdb has no executable for this process (was the binary "
                      "rebuilt or deleted since it started?): name it, "
                      "gdb BINARY -p PID")
    exe = gdb.lookup_objfile(gdb.current_progspace().filename)
    want = exe.build_id if exe is not None else None
    have = _build_id_in_memory()
    if want and have and want != have:
        raise Problem(f"the {'core' if _is_core() else 'process'} was made by "
                      f"another build (build-id {have}) than "
                      f"{exe.filename} ({want}): load the binary that made it")
    _type("struct reactor")
    reactors, n = _reactors_raw()
    if not 0 < n <= reactors.type.range()[1] + 1:
        raise Problem(f"nreactors reads {n}: blktgt has not started its "
                      "reactors yet, or this is not a blktgt core")
    for i in range(n):
        r = reactors[i]
        if int(r) == 0 or int(r["index"]) != i:
            raise Problem(f"reactor {i} reads as garbage: a core from another "
                          "build, or corrupt memory")


def _is_core():
    return gdb.selected_inferior().connection.type == "core" \
        if getattr(gdb.selected_inferior(), "connection", None) else False


def _reactors_raw():
    return _var("reactors", "reactor"), int(_var("nreactors", "unsigned int"))


def reactor_list():
    reactors, n = _reactors_raw()
    return [reactors[i].dereference() for i in range(n)]


# --- threads --------------------------------------------------------------

LOOP_FN = "reactor_loop"
LOOP_HELPERS = {"run_messages", "run_deferred", "run_pass_hooks"}


def _thread_reactor(thread):
    """The reactor a thread runs (its thread-local `reactor_cur`, once
    called `self`), or None."""
    thread.switch()
    s = gdb.lookup_global_symbol("reactor_cur") or gdb.lookup_static_symbol("self")
    if s is None or _tag(s.type) != "reactor":
        raise Problem("no thread-local 'reactor_cur' (struct reactor *): a "
                      "blktgt this script does not know")
    try:
        v = s.value(gdb.newest_frame())
    except gdb.error:
        return None
    return int(v) or None


def _activity(thread):
    """(what the reactor's loop is running, innermost function), from the
    thread's stack: the blktgt functions between reactor_loop and the
    innermost frame, outermost first."""
    thread.switch()
    chain, inner = [], None
    f = gdb.newest_frame()
    while f is not None:
        name = f.name() or "??"
        if inner is None:
            inner = name
        if name == LOOP_FN:
            break
        fn = f.function()
        if fn is not None and fn.symtab is not None and \
                fn.symtab.objfile.filename == gdb.current_progspace().filename \
                and name not in LOOP_HELPERS:
            chain.append(name)
        try:
            f = f.older()
        except gdb.error:
            break
    chain.reverse()
    return ">".join(chain[:6]) or None, inner


def _queued(r):
    stub = int(r["stub"].address)
    fns = []
    for m in _walk(r["tail"], what=f"message queue of {_str(r['name'])}"):
        if int(m) != stub:
            fns.append(_fn(m["fn"]))
    return fns


def thread_rows():
    inf = gdb.selected_inferior()
    keep = gdb.selected_thread()
    by_reactor = {}
    try:
        for t in inf.threads():
            a = _thread_reactor(t)
            if a is not None:
                by_reactor[a] = (t, *_activity(t))
    finally:
        if keep is not None:
            keep.switch()
    rows = []
    for r in reactor_list():
        t, running, inner = by_reactor.get(int(r.address), (None, None, None))
        q = _queued(r)
        # sleeping: it announced an epoll_wait with no timeout (nothing
        # to do); otherwise it is in a loop pass.
        state = "no-thread" if t is None else "sleeping" if int(r["sleeping"]) else "running"
        rows.append([("index", int(r["index"])), ("name", _str(r["name"])),
                     ("lwp", t.ptid[1] if t else None), ("state", state),
                     ("queued", len(q)), ("next", ",".join(q[:QUEUED_SHOWN]) or None),
                     ("msgs_run", int(r["msgs"])), ("running", running), ("at", inner)])
    return rows


# --- bdevs, exports, connections ----------------------------------------

def bdev_list():
    return [b.dereference() for b in _walk(_var("bdevs", "bdev"), what="bdev list")]


def export_list():
    return [e.dereference() for e in _walk(_var("exports", "export"), what="export list")]


def conn_list():
    """Every NBD connection: those negotiating (reactor 0's list) and those
    transmitting (their owner reactor's list)."""
    threads = _var_of_type("nbd_thread", "threads")
    _, n = _reactors_raw()
    out = []
    for i in range(n):
        out += [c.dereference() for c in
                _walk(threads[i]["conns"], what=f"connection list of reactor {i}")]
    return out


def bdev_rows(ios):
    exports = export_list()
    rows = []
    for b in bdev_list():
        addr = int(b.address)
        clients = sum(int(e["refs"]) for e in exports if int(e["bdev"]) == addr)
        size = int(b["num_blocks"]) * int(b["block_size"])
        rows.append([("name", _str(b["name"])), ("kind", _str(b["type"])),
                     ("size", size), ("block_size", int(b["block_size"])),
                     ("exports", int(b["exports"])), ("users", int(b["users"])),
                     ("clients", clients),
                     ("inflight", sum(1 for io in ios if io["bdev"] == addr))])
    return rows


def export_rows():
    _, n = _reactors_raw()
    conns = conn_list()
    rows = []
    for e in export_list():
        addr = int(e.address)
        row = [("name", _str(e["name"])), ("bdev", _str(e["bdev"]["name"])),
               ("state", _enum(e["state"], "EXPORT_")),
               ("changing", int(e["changing"])), ("deleting", int(e["deleting"])),
               ("clients", int(e["refs"])),
               ("conns", ",".join(str(int(c["id"])) for c in conns
                                  if int(c["exp"]) == addr) or None)]
        for i in range(n):
            t = e["per"][i]
            held = sum(1 for _ in _walk(t["held_head"], what="held I/O list"))
            row.append((f"r{i}", f"{_enum(t['state'], 'EXPORT_')}/inflight:"
                        f"{int(t['inflight'])}/held:{held}"))
        rows.append(row)
    return rows


def conn_rows():
    rows = []
    for c in conn_list():
        state = _enum(c["state"], "CONN_")
        neg = _enum(c["neg"]["state"], "NBD_PROTO_NEG_") if state in \
            ("NEGOTIATING", "HANDOFF") else None
        rows.append([("id", int(c["id"])), ("peer", _str(c["peer"])),
                     ("reactor", int(c["owner_idx"])), ("state", state),
                     ("negotiation", neg),
                     ("export", _str(c["exp"]["name"]) if int(c["exp"]) else None),
                     ("requests", int(c["requests"])),
                     ("inflight", int(c["nreqs"])),
                     ("io_inflight", int(c["io_inflight"])),
                     ("rx_blocked", int(c["rx_blocked"]))])
    return rows


# --- I/O in flight ------------------------------------------------------

def _frame_ios(fn_names, var="io"):
    """bdev_io pointers that the local `var` of frames of the named
    functions holds, on any thread: I/O being executed or completed right
    now, or the rest of a completion batch being drained."""
    out = []
    keep = gdb.selected_thread()
    try:
        for t in gdb.selected_inferior().threads():
            t.switch()
            f = gdb.newest_frame()
            while f is not None:
                if f.name() in fn_names:
                    try:
                        v = f.read_var(var)
                        if not v.is_optimized_out and int(v):
                            out.append((v, f.name(), t))
                    except (gdb.error, ValueError):
                        pass
                try:
                    f = f.older()
                except gdb.error:
                    break
    finally:
        if keep is not None:
            keep.switch()
    return out


def _now_ns(candidates):
    """CLOCK_MONOTONIC now for a live process (this machine's clock); for a
    core, which holds no clock, the newest timestamp blktgt recorded."""
    if not _is_core():
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC), "live"
    best = max(candidates, default=0)
    h = _trace_header()
    if h is not None:
        try:
            cal = h["cal"][int(h["cal_last"]) & 1]
            best = max(best, int(cal["mono_ns"]))
        except gdb.error:
            pass
    return best, "core-newest-recorded"


def _trace_header():
    """trace.c's file header pointer (the ring's clock pairs), or None."""
    for s in _symbols("trace"):
        t = s.type.strip_typedefs()
        if t.code == gdb.TYPE_CODE_STRUCT and "hdr" in [f.name for f in t.fields()] \
                and _tag(t["hdr"].type) == "trace_file_header":
            h = s.value()["hdr"]
            return h if int(h) else None
    return None


def io_list():
    """Every I/O in flight, as dicts: held by a paused export, queued for
    completion on its reactor or in a delay bdev, or in a frame executing
    or completing it."""
    ios, seen = [], set()
    io_ptr = _type("struct bdev_io").pointer()

    def add(p, state, reactor):
        a = int(p)
        if a in seen:
            return
        seen.add(a)
        io = p.cast(io_ptr).dereference()
        cb = _fn(io["cb"])
        owner = _fn(io["user_cb"]) if cb == "export_io_done" else cb
        ctx = io["user_ctx"] if cb == "export_io_done" else io["cb_ctx"]
        ios.append({"addr": a, "io": io, "state": state, "reactor": reactor,
                    "bdev": int(io["bdev"]), "owner": owner, "ctx": ctx})

    _, n = _reactors_raw()
    for e in export_list():
        for i in range(n):
            for p in _walk(e["per"][i]["held_head"], what="held I/O list"):
                add(p, "held", i)
    bthreads = _var_of_type("bdev_thread", "threads")
    for i in range(n):
        for p in _walk(bthreads[i]["done_head"], what="completion list"):
            add(p, "completing", i)
    # A delay bdev keeps its I/O on a per-reactor queue of its own until
    # the I/O is due; nothing else points to it meanwhile.
    dthreads = _var_of_type("delay_thread", "threads")
    for i in range(n):
        for p in _walk(dthreads[i]["head"], what="delay queue"):
            add(p, "delayed", i)
    for p, fname, t in _frame_ios(("bdev_submit", "bdev_io_complete")):
        add(p, "executing" if fname == "bdev_submit" else "completing", None)
    # drain_completions() takes its reactor's whole list before it calls
    # back, so the rest of that batch is reachable only from its `next`.
    for head, _, _ in _frame_ios(("drain_completions",), "next"):
        for p in _walk(head, what="completion batch"):
            add(p, "completing", None)
    return ios


def _owner_detail(d):
    """What the owner's context says: the NBD request or workload slot."""
    ctx = d["ctx"]
    if int(ctx) == 0:
        return [], None
    try:
        if d["owner"] == "req_io_done":
            r = ctx.cast(_type("struct nbd_req").pointer()).dereference()
            return [("conn", int(r["conn"]["id"])), ("handle", int(r["handle"]))], None
        if d["owner"] == "job_io_done":
            s = ctx.cast(_type("struct slot").pointer()).dereference()
            return [("job", int(s["job"]["id"]))], int(s["start_ns"])
    except (Problem, gdb.error):
        pass
    return [], None


def io_rows():
    ios = io_list()
    details = []
    for d in ios:
        extra, started = _owner_detail(d)
        if started is None and d["state"] != "held":
            started = int(d["io"]["submit_ns"])
        details.append((extra, started))
    now, source = _now_ns([s for _, s in details if s])
    bdev_names = {int(b.address): _str(b["name"]) for b in bdev_list()}
    rows = []
    for d, (extra, started) in zip(ios, details):
        io = d["io"]
        rows.append([("bdev", bdev_names.get(d["bdev"], hex(d["bdev"]))),
                     ("type", _enum(io["type"], "BDEV_IO_").lower()),
                     ("offset", int(io["offset"])), ("len", int(io["len"])),
                     ("state", d["state"]), ("reactor", d["reactor"]),
                     ("id", hex(int(io["id"])) if d["state"] != "held" else None),
                     ("age_us", (now - started) // 1000 if started and now >= started
                      else None),
                     ("owner", d["owner"]), *extra, ("addr", hex(d["addr"]))])
    return rows, now, source


# --- commands -------------------------------------------------------------

class _Command(gdb.Command):
    """Base: check the target, run, and turn every failure into one line."""

    def __init__(self, name):
        super().__init__(name, gdb.COMMAND_DATA)
        self.cmd = name

    def invoke(self, arg, from_tty):
        if arg.strip():
            raise gdb.GdbError(f"{self.cmd}: takes no arguments")
        try:
            check_target()
            self.run()
        except Problem as e:
            raise gdb.GdbError(f"{self.cmd}: {e}") from None
        except gdb.MemoryError as e:
            raise gdb.GdbError(f"{self.cmd}: {e}: the core is truncated or from "
                               "another build, or memory is corrupt") from None
        except gdb.error as e:
            raise gdb.GdbError(f"{self.cmd}: {e}") from None


class Threads(_Command):
    """One line per reactor: index, name, thread (lwp), state (sleeping:
    waiting in epoll_wait for work, running: in a loop pass, or
    no-thread), queued messages and the first few of
    their functions, messages run so far, what its loop is running (the
    blktgt functions below reactor_loop, outermost first) and the innermost
    function of its thread."""

    def __init__(self):
        super().__init__("blktgt-threads")

    def run(self):
        _emit("reactor", thread_rows(), "reactors")


class Bdevs(_Command):
    """One line per bdev: name, kind, size and block size in bytes, its
    openers (exports built on it, users: running workloads and flushes,
    NBD clients of those exports), and its I/O in flight."""

    def __init__(self):
        super().__init__("blktgt-bdevs")

    def run(self):
        _emit("bdev", bdev_rows(io_list()), "bdevs")


class Exports(_Command):
    """One line per export: name, bdev, state, whether a change is under
    way, clients and their connection ids, and on each reactor rN its view
    of the state, I/O in flight and I/O held while paused."""

    def __init__(self):
        super().__init__("blktgt-exports")

    def run(self):
        _emit("export", export_rows(), "exports")


class Conns(_Command):
    """One line per NBD connection: id, peer, owner reactor, state
    (NEGOTIATING with its negotiation step, HANDOFF, TRANSMITTING,
    DRAINING, DEAD), export, requests received, requests in flight, I/O in
    flight, and whether reading is paused for too much in flight."""

    def __init__(self):
        super().__init__("blktgt-conns")

    def run(self):
        _emit("conn", conn_rows(), "connections")


class Ios(_Command):
    """One line per I/O in flight: bdev, type, offset, len, state (held by
    a paused export, executing, completing), reactor, id and age in
    microseconds (none for held I/O that has no start time), the owner's
    completion function and what it tells (NBD conn and handle, workload
    job).  A first "clock" line says what age is measured against: this
    machine's CLOCK_MONOTONIC for a live process; for a core, which holds
    no clock, the newest timestamp found in it, so ages are lower bounds."""

    def __init__(self):
        super().__init__("blktgt-ios")

    def run(self):
        rows, now, source = io_rows()
        gdb.write(_fmt("clock", [("now_ns", now), ("source", source)]) + "\n")
        _emit("io", rows, "ios")


# --- pretty-printers ------------------------------------------------------

class _Printer:
    def __init__(self, val):
        self.val = val

    def children(self):
        for f in self.val.type.strip_typedefs().fields():
            if f.name is not None:
                yield f.name, self.val[f.name]


class ReactorPrinter(_Printer):
    def to_string(self):
        v = self.val
        return f"reactor {int(v['index'])} {_str(v['name'])} (msgs run {int(v['msgs'])})"


class BdevPrinter(_Printer):
    def to_string(self):
        v = self.val
        return (f"bdev {_str(v['name'])} {_str(v['type'])} "
                f"{int(v['num_blocks']) * int(v['block_size'])} bytes "
                f"bs {int(v['block_size'])}")


class ExportPrinter(_Printer):
    def to_string(self):
        v = self.val
        return (f"export {_str(v['name'])} of {_str(v['bdev']['name'])} "
                f"{_enum(v['state'], 'EXPORT_')} clients {int(v['refs'])}")

    def children(self):
        try:
            _, n = _reactors_raw()
        except (Problem, gdb.error):
            n = self.val["per"].type.range()[1] + 1
        for f in self.val.type.strip_typedefs().fields():
            if f.name == "per":
                # Only the reactors that exist, not all REACTOR_MAX.
                for i in range(n):
                    yield f"per[{i}]", self.val["per"][i]
            elif f.name is not None:
                yield f.name, self.val[f.name]


class ConnPrinter(_Printer):
    def to_string(self):
        v = self.val
        exp = _str(v["exp"]["name"]) if int(v["exp"]) else "-"
        return (f"nbd_conn {int(v['id'])} {_str(v['peer'])} "
                f"{_enum(v['state'], 'CONN_')} export {exp} "
                f"in flight {int(v['nreqs'])}")


class IoPrinter(_Printer):
    def to_string(self):
        v = self.val
        bdev = _str(v["bdev"]["name"]) if int(v["bdev"]) else "-"
        return (f"bdev_io {_enum(v['type'], 'BDEV_IO_').lower()} "
                f"{int(v['len'])}@{int(v['offset'])} on {bdev}")


def _printers():
    pp = gdb.printing.RegexpCollectionPrettyPrinter("blktgt")
    pp.add_printer("reactor", "^reactor$", ReactorPrinter)
    pp.add_printer("bdev", "^bdev$", BdevPrinter)
    pp.add_printer("export", "^export$", ExportPrinter)
    pp.add_printer("nbd_conn", "^nbd_conn$", ConnPrinter)
    pp.add_printer("bdev_io", "^bdev_io$", IoPrinter)
    return pp


def register(objfile=None):
    for c in (Threads, Bdevs, Exports, Conns, Ios):
        c()
    gdb.printing.register_pretty_printer(objfile, _printers(), replace=True)


register(gdb.current_objfile())
