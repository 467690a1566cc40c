# SPDX-License-Identifier: BSD-2-Clause
"""make install and make uninstall, and a project of one's own built from
an install alone: examples/quickstart against a staged install (DESTDIR),
traced through the installed wrapper and checked by the installed
probekit-check, from /, with no checkout directory on PATH."""

import contextlib
import os
import re
import shutil
import subprocess

import pytest

import probekit
from installs import (PREFIX, check_commands, clean_env, commands, install,
                      make)
from installs import inst  # noqa: F401 (a fixture)

QUICKSTART = os.path.join(probekit.ROOT, "examples", "quickstart")
REQUESTS = 23


def test_every_command_installed_and_finds_its_version(inst):
    stage = os.path.dirname(os.path.dirname(inst.rstrip("/")))
    check_commands(os.path.join(inst, "bin"), lambda real: real.startswith(stage + "/"))


def test_blktgt_keeps_its_symbols(inst):
    """uprobe tools, the gdb helpers and probekit-structs read them."""
    p = subprocess.run(["readelf", "-S", "-W", os.path.join(inst, "bin", "blktgt")],
                       capture_output=True, text=True, check=True)
    for section in (".symtab", ".debug_info", ".note.stapsdt", ".debug_gdb_scripts"):
        assert f" {section} " in p.stdout, section


def test_shared_files_installed(inst):
    data = os.path.join(inst, "share", "probekit")
    for f in ("VERSION", "probekit.mk", "probes/gencatalog", "probes/blktgt.d",
              "probes/probelib/__init__.py", "probes/usdt/registers",
              "bcc/probekit_bcc_hist.py",
              # The specs, and their reader in probelib, where the bcc/
              # tools and probelib's commands find them.
              "probes/probelib/toolspec.py", "probes/probelib/bcc_compat.py",
              "specs/common.toml",
              "specs/limits.toml", "specs/privileges.toml", "specs/iosize.toml",
              "structs/blktgt.bt", "gdb/blktgt.py"):
        assert os.path.isfile(os.path.join(data, f)), f
    bts = sorted(os.listdir(os.path.join(probekit.ROOT, "bt")))
    assert sorted(os.listdir(os.path.join(data, "bt"))) == [b for b in bts if b.endswith(".bt")]
    # gdb loads OBJFILE-gdb.py from its auto-load directory by the
    # objfile's path; with PREFIX=/usr that is gdb's own directory.
    assert os.path.isfile(os.path.join(inst, "share", "gdb", "auto-load",
                                       PREFIX.lstrip("/"), "bin", "blktgt-gdb.py"))


def test_bt_scripts_carry_no_interpreter_line():
    """They name __EXE__, which only probekit-bpftrace resolves: they are
    read by the wrapper, never executed, so no #! and no execute bit."""
    p = subprocess.run(["git", "ls-files", "-s", "bt/*.bt", "examples/*.bt"],
                       cwd=probekit.ROOT, capture_output=True, text=True, check=True)
    rows = p.stdout.splitlines()
    assert len(rows) >= 12
    for row in rows:
        mode, _, _, path = row.split(None, 3)
        assert mode == "100644", f"{path} is executable"
        with open(os.path.join(probekit.ROOT, path)) as f:
            assert not f.readline().startswith("#!"), f"{path} has a #! line"


def test_uninstall_leaves_nothing(tmp_path):
    stage = tmp_path / "stage"
    install(stage)
    p = make("uninstall", f"DESTDIR={stage}", f"PREFIX={PREFIX}")
    assert p.returncode == 0, p.stderr
    left = [os.path.join(d, f) for d, _, files in os.walk(stage) for f in files]
    left += [os.path.join(d, x) for d, dirs, _ in os.walk(stage) for x in dirs
             if os.path.islink(os.path.join(d, x))]
    assert left == []


def test_uninstall_without_install_says_so(tmp_path):
    p = make("uninstall", f"DESTDIR={tmp_path}", f"PREFIX={PREFIX}")
    err = p.stderr.strip().splitlines()
    assert p.returncode != 0
    assert "no probekit install" in err[0] and "PREFIX" in err[0], p.stderr
    # make's own trailer (make[N] when the suite itself runs under make).
    assert all(re.match(r"make(\[\d+\])?: \*\*\*", e) for e in err[1:]), p.stderr


def test_relative_prefix_refused(tmp_path):
    p = make("install", "PREFIX=usr", f"DESTDIR={tmp_path}")
    assert p.returncode != 0 and "PREFIX 'usr' is not an absolute path" in p.stderr
    assert os.listdir(tmp_path) == []


def copy_quickstart(tmp_path):
    """The example as a project of its own, away from the checkout."""
    project = str(tmp_path / "quickstart")
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns("build"))
    return project


def build_quickstart(inst, project, out, usdt):
    p = subprocess.run(["make", "-C", project, f"PROBEKIT_PREFIX={inst}", f"O={out}",
                        f"USDT={usdt}"], env=clean_env(), capture_output=True, text=True,
                       timeout=probekit.TIMEOUT * 5)
    assert p.returncode == 0, p.stdout + p.stderr
    prog = os.path.join(out, "quickstart")
    assert os.access(prog, os.X_OK)
    return prog


@pytest.fixture(scope="module")
def quickstart(inst, tmp_path_factory):
    """(project, program): the example copied and built once, with probes
    (USDT=1), from the module's install, for the tests that only run it."""
    tmp = tmp_path_factory.mktemp("quickstart")
    project = copy_quickstart(tmp)
    return project, build_quickstart(inst, project, tmp / "usdt1", 1)


@contextlib.contextmanager
def running_quickstart(prog, env):
    """(process, its output) once the program says its probes are in; on
    leaving, its input is closed and it must exit 0."""
    qs = subprocess.Popen([prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, cwd="/", env=env)
    out = probekit.LineReader(qs.stdout)
    try:
        out.wait_for(rf"quickstart: pid {qs.pid}, probes compiled in")
        yield qs, out
    finally:
        qs.stdin.close()
        assert qs.wait(timeout=probekit.TIMEOUT) == 0


# examples/quickstart/quickstart.d's probes, as readelf lists them.
QUICKSTART_PROBES = ["request__batch", "request__done", "request__start"]


def stapsdt_probes(path):
    p = subprocess.run(["readelf", "-n", "-W", path], capture_output=True, text=True,
                       check=True)
    return sorted(re.findall(r"^\s+Name: (\S+)$", p.stdout, re.M))


@pytest.mark.needs("dtrace", "readelf")
def test_quickstart_builds_from_install_usdt_1_and_0(inst, quickstart, tmp_path):
    project, on = quickstart
    off = build_quickstart(inst, project, tmp_path / "usdt0", 0)
    assert stapsdt_probes(on) == QUICKSTART_PROBES
    assert stapsdt_probes(off) == []
    # The installed header put the catalog's argument names and types in
    # the program: the installed probekit-list shows them with no .d file.
    p = subprocess.run([os.path.join(inst, "bin", "probekit-list"), on,
                        "quickstart:request__start"], cwd="/", env=clean_env(),
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert [ln.split("  ")[-1] for ln in p.stdout.splitlines()
            if ln.startswith("      arg")] == ["uint64_t id", "uint32_t size"], p.stdout
    for prog, mode in ((on, "probes compiled in"), (off, "built without probes")):
        p = subprocess.run([prog], input="5\n", capture_output=True, text=True,
                           timeout=probekit.TIMEOUT)
        assert p.returncode == 0 and p.stdout.splitlines()[1:] == ["done 5"], p.stdout
        assert mode in p.stdout


def test_quickstart_refuses_a_missing_install(tmp_path):
    p = subprocess.run(["make", "-C", QUICKSTART, f"PROBEKIT_PREFIX={tmp_path}",
                        f"O={tmp_path}/out"], capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode != 0
    assert f"no {tmp_path}/share/probekit/probekit.mk: install probekit" in p.stderr
    assert not (tmp_path / "out").exists()


def pkg_config_env(inst):
    """pkg-config searching only the staged install, as it searches
    /usr/share/pkgconfig for the Debian package."""
    return dict(clean_env(), PKG_CONFIG_LIBDIR=os.path.join(inst, "share", "pkgconfig"),
                PKG_CONFIG_PATH="")


@pytest.mark.needs("pkg-config")
def test_probekit_pc_names_the_fragment_generator_and_headers(inst):
    env = pkg_config_env(inst)
    got = {}
    for var in ("probekit_mk", "gencatalog", "includedir"):
        p = subprocess.run(["pkg-config", "--define-prefix", f"--variable={var}", "probekit"],
                           env=env, capture_output=True, text=True, timeout=probekit.TIMEOUT)
        assert p.returncode == 0, p.stderr
        got[var] = p.stdout.strip()
    data = os.path.join(inst, "share", "probekit")
    assert got == {"probekit_mk": os.path.join(data, "probekit.mk"),
                   "gencatalog": os.path.join(data, "probes", "gencatalog"),
                   "includedir": os.path.join(data, "probes", "nop5")}
    assert os.access(got["gencatalog"], os.X_OK)
    assert os.path.isfile(os.path.join(got["includedir"], "sys", "sdt.h"))
    p = subprocess.run(["pkg-config", "--modversion", "probekit"], env=env,
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    version = open(os.path.join(probekit.ROOT, "VERSION")).read().strip()
    assert p.stdout == f"{version}\n", p.stderr


@pytest.mark.needs("pkg-config", "dtrace", "readelf")
def test_quickstart_finds_probekit_through_pkg_config(inst, tmp_path):
    """No argument: the Makefile asks pkg-config; the program is built
    hardened by default, as probekit's own programs are."""
    from elf_hardening import hardening_problems
    project = copy_quickstart(tmp_path)
    p = subprocess.run(["make", "-C", project, f"O={tmp_path}/out"], env=pkg_config_env(inst),
                       capture_output=True, text=True, timeout=probekit.TIMEOUT * 5)
    assert p.returncode == 0, p.stdout + p.stderr
    prog = os.path.join(tmp_path, "out", "quickstart")
    assert stapsdt_probes(prog) == QUICKSTART_PROBES
    assert hardening_problems(prog) == []
    p = subprocess.run([prog], input="7\n", capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0 and p.stdout.splitlines()[1:] == ["done 7"], p.stdout


@pytest.mark.needs("pkg-config")
def test_quickstart_without_probekit_says_where_it_looked(tmp_path):
    env = dict(clean_env(), PKG_CONFIG_LIBDIR=str(tmp_path), PKG_CONFIG_PATH="")
    p = subprocess.run(["make", "-C", QUICKSTART, f"O={tmp_path}/out"], env=env,
                       capture_output=True, text=True, timeout=probekit.TIMEOUT)
    assert p.returncode != 0
    assert ("pkg-config finds no probekit: install its Debian package, or name a "
            "make install prefix with PROBEKIT_PREFIX=DIR") in p.stderr
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """A make install PREFIX=DIR, not staged: Meson reads probekit.pc's
    variables as written (pkg-config without --define-prefix), so it needs
    the install where its PREFIX says."""
    inst = str(tmp_path_factory.mktemp("prefix"))
    p = make("install", f"PREFIX={inst}")
    assert p.returncode == 0, p.stdout + p.stderr
    return inst


@pytest.mark.needs("pkg-config", "dtrace", "readelf", "cmake", "meson", "ninja")
@pytest.mark.parametrize("route", ["cmake", "meson"])
def test_quickstart_builds_with_cmake_and_meson(prefix, tmp_path, route):
    """The quickstart's CMakeLists.txt (find_package(probekit) from the
    prefix) and meson.build (pkg-config), with probes and without: the
    program has the catalog's probes, or none, is hardened, and runs."""
    from elf_hardening import hardening_problems
    project = copy_quickstart(tmp_path)
    inst = prefix
    env = pkg_config_env(inst)
    for usdt, probes in ((True, QUICKSTART_PROBES), (False, [])):
        out = tmp_path / f"{route}-{int(usdt)}"
        if route == "cmake":
            steps = [["cmake", "-S", project, "-B", str(out), f"-DCMAKE_PREFIX_PATH={inst}",
                      f"-DPROBEKIT_USDT={'ON' if usdt else 'OFF'}"],
                     ["cmake", "--build", str(out)]]
        else:
            steps = [["meson", "setup", str(out), project, f"-Dusdt={str(usdt).lower()}"],
                     ["meson", "compile", "-C", str(out)]]
        for argv in steps:
            p = subprocess.run(argv, env=env, capture_output=True, text=True,
                               timeout=probekit.TIMEOUT * 5)
            assert p.returncode == 0, (argv, p.stdout + p.stderr)
        prog = str(out / "quickstart")
        assert stapsdt_probes(prog) == probes
        assert hardening_problems(prog) == []
        p = subprocess.run([prog], input="7\n", capture_output=True, text=True,
                           timeout=probekit.TIMEOUT)
        assert p.returncode == 0 and p.stdout.splitlines()[1:] == ["done 7"], p.stdout


def expected_sum(first_id, n):
    """What quickstart.c's request_sum() totals over requests first_id.."""
    total = 0
    for i in range(n):
        rid, size = first_id + i, i % 64 + 1
        total += sum((rid + k) * k for k in range(1, size + 1))
    return total


@pytest.mark.needs("dtrace", "readelf", "bpftrace")
def test_quickstart_traced_and_checked_from_install(inst, quickstart, bpf):
    project, prog = quickstart
    env = clean_env()
    trace = None
    with running_quickstart(prog, env) as (qs, out):
        try:
            # Requests before the trace are not counted: ids 1..REQUESTS.
            qs.stdin.write(f"{REQUESTS}\n".encode())
            qs.stdin.flush()
            out.wait_for(rf"^done {REQUESTS}$")
            trace = subprocess.Popen([os.path.join(inst, "bin", "probekit-bpftrace"), str(qs.pid),
                                      os.path.join(project, "bt", "requests.bt")],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     cwd="/", env=env, start_new_session=True)
            tout = probekit.LineReader(trace.stdout)
            tout.wait_for(re.escape(f"probekit: tracing PID={qs.pid}"))
            qs.stdin.write(f"{REQUESTS}\n".encode())
            qs.stdin.flush()
            out.wait_until(lambda lines: lines.count(f"done {REQUESTS}") == 2)
            probekit.interrupt(trace, "trace")
            lines = tout.drain(10)
            assert trace.returncode == 0, lines
            assert f"@requests: {REQUESTS}" in lines, lines
            assert f"@sum: {expected_sum(REQUESTS + 1, REQUESTS)}" in lines, lines
        finally:
            if trace and trace.poll() is None:
                probekit.interrupt(trace, "trace")

    p = subprocess.run([os.path.join(inst, "bin", "probekit-check"), "--binary", prog,
                        "--catalog", os.path.join(project, "quickstart.d"),
                        os.path.join(project, "bt", "requests.bt"),
                        os.path.join(project, "bt", "batch.bt")],
                       cwd="/", env=env, capture_output=True, text=True,
                       timeout=probekit.TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "3 of 3 catalog probes used by 2 files" in p.stdout + p.stderr


BATCH_REQUESTS = (211, 23)      # one line each
SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def waited_1ms(lines):
    """Batches in batch.bt's @wait_us rows from [512, 1K) up: every one
    whose oldest record waited 1 ms (1000 us) or more is among them."""
    n = 0
    for line in lines:
        m = re.match(r"^\[(\d+)([KMG]?)[,\]].*?\s(\d+) \|", line)
        if m and int(m.group(1)) * SCALE[m.group(2)] >= 512:
            n += int(m.group(3))
    return n


@pytest.mark.needs("dtrace", "readelf", "bpftrace")
def test_quickstart_batch_probe_traced_from_install(inst, quickstart, tmp_path, bpf):
    """bt/batch.bt reads request__batch's records through the struct
    probekit-structs made from the program's DWARF, from an install: every
    request of a line reaches it before "done" (the batch is flushed before
    the program waits for input), with each sum as request__done gives it."""
    project, prog = quickstart
    structs = tmp_path / "quickstart.structs.bt"
    env = clean_env()
    with open(structs, "w") as f:
        subprocess.run([os.path.join(inst, "bin", "probekit-structs"), prog, "qs_rec"],
                       stdout=f, env=env, check=True, timeout=probekit.TIMEOUT)
    trace = None
    with running_quickstart(prog, env) as (qs, out):
        try:
            trace = subprocess.Popen([os.path.join(inst, "bin", "probekit-bpftrace"), str(qs.pid),
                                      os.path.join(project, "bt", "batch.bt")],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd="/",
                                     env=dict(env, PROBEKIT_STRUCTS=str(structs)),
                                     start_new_session=True)
            tout = probekit.LineReader(trace.stdout)
            tout.wait_for(re.escape(f"probekit: tracing PID={qs.pid}"))
            for n in BATCH_REQUESTS:
                qs.stdin.write(f"{n}\n".encode())
                qs.stdin.flush()
                out.wait_for(rf"^done {n}$")
            probekit.interrupt(trace, "trace")
            lines = tout.drain(10)
            assert trace.returncode == 0, lines
            total = sum(BATCH_REQUESTS)
            # bpftrace compiles the script without a warning (a signed
            # count against an unsigned loop index drew one).
            assert [l for l in lines if "WARNING" in l] == [], lines
            assert f"@requests: {total}" in lines, lines
            assert f"@sum: {expected_sum(1, 211) + expected_sum(212, 23)}" in lines, lines
            # 211 = 3 * 64 + 19, then 23: five hits, and at most one more
            # for each batch the age bound fired, which the program does only
            # once its oldest record has waited 1 ms: counted from @wait_us,
            # not from how often a loaded machine took the CPU away.  A
            # flush that fires early (every record, a bound in us) fails.
            hits = [int(l.split()[1]) for l in lines if l.startswith("@batches: ")]
            assert len(hits) == 1 and 5 <= hits[0] <= 5 + waited_1ms(lines), lines
        finally:
            if trace and trace.poll() is None:
                probekit.interrupt(trace, "trace")


# --- man pages ---------------------------------------------------------------

MAN_DIR = os.path.join(probekit.ROOT, "man")
SECTIONS = ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES", "OVERHEAD", "SEE ALSO")


def pages():
    """man/*.8; none without man/ (test_every_command_has_a_man_page then
    names every command that lacks one)."""
    if not os.path.isdir(MAN_DIR):
        return []
    return sorted(f for f in os.listdir(MAN_DIR) if f.endswith(".8"))


def render(path):
    """man's plain-text rendering and its warnings, as Debian's man-db
    renders the page (ASCII, so that \\- stays a plain hyphen)."""
    env = dict(os.environ, LC_ALL="C", LANG="C", MANROFFSEQ="", MANWIDTH="80")
    p = subprocess.run(["man", "--warnings", "-l", path], env=env, capture_output=True,
                       text=True, timeout=probekit.TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def sections(text):
    """{SECTION: body} of a rendered page."""
    out, cur = {}, None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.upper() == line and "(8)" not in line:
            cur = line.strip()
            out[cur] = ""
        elif cur:
            out[cur] += line + "\n"
    return out


def page_names():
    """{command: page file} from each page's NAME line."""
    out = {}
    for page in pages():
        _, text, _ = render(os.path.join(MAN_DIR, page))
        name = sections(text).get("NAME", "")
        for cmd in name.split(" - ", 1)[0].replace(",", " ").split():
            out[cmd] = page
    return out


def help_options(cmd):
    """Every option the command's --help (or -h) prints: the ones that open
    a line of the option list, before the description column."""
    for flag in ("--help", "-h"):
        p = subprocess.run([cmd, flag], capture_output=True, text=True, cwd="/",
                           timeout=probekit.TIMEOUT)
        if p.returncode == 0:
            break
    assert p.returncode == 0, f"{cmd}: neither --help nor -h works: {p.stderr}"
    text = p.stdout
    if text.startswith("#!"):
        text = ""
    opts = set()
    for line in text.splitlines():
        line = re.sub(r"^#\s?", "", line)
        if not re.match(r"^\s+-", line):
            continue
        head = re.split(r"(?<=\S)\s{2,}", line.strip(), maxsplit=1)[0]
        opts |= set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", head))
    return opts


@pytest.mark.needs("man")
@pytest.mark.parametrize("page", pages())
def test_man_page_renders_without_warnings(page):
    rc, text, err = render(os.path.join(MAN_DIR, page))
    assert rc == 0 and err == "", err
    have = sections(text)
    assert [s for s in SECTIONS if s not in have] == [], sorted(have)
    with open(os.path.join(MAN_DIR, page)) as f:
        assert "SPDX-License-Identifier" in f.readline()


@pytest.mark.needs("man")
def test_every_command_has_a_man_page():
    assert commands(), f"{probekit.BUILD}/bin is not built; run the suite with 'make test'"
    names = page_names()
    missing = [c for c in commands() if c not in names]
    assert missing == [], f"no man page names {missing}"


@pytest.mark.needs("man")
@pytest.mark.parametrize("cmd", commands())
def test_man_page_options_name_every_help_option(cmd):
    page = page_names().get(cmd)
    assert page, f"no man page for {cmd}"
    opts = help_options(os.path.join(probekit.BUILD, "bin", cmd))
    assert "--version" in opts or "-V" in opts, opts
    _, text, _ = render(os.path.join(MAN_DIR, page))
    body = sections(text)["OPTIONS"]
    missing = sorted(o for o in opts if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", body))
    assert missing == [], f"{page} OPTIONS lacks {missing} from {cmd} --help"


@pytest.mark.needs("man")
def test_installed_man_pages_found_by_man(inst):
    env = dict(os.environ, LC_ALL="C", MANWIDTH="80")
    for cmd in commands():
        p = subprocess.run(["man", "-M", os.path.join(inst, "share", "man"), "8", cmd],
                           env=env, capture_output=True, text=True, timeout=probekit.TIMEOUT)
        assert p.returncode == 0 and cmd in p.stdout, (cmd, p.stderr)


# --- shipped scripts by name -------------------------------------------------

def test_installed_wrapper_finds_a_shipped_script_by_name(inst, tmp_path):
    """From a directory with no such file, "iolat.bt" and "iolat" are
    PREFIX/share/probekit/bt/iolat.bt; a file of that name in the current
    directory comes first; a name found nowhere says where it looked."""
    wrapper = os.path.join(inst, "bin", "probekit-bpftrace")
    shipped = os.path.join(inst, "share", "probekit", "bt", "iolat.bt")
    here = tmp_path / "here"
    here.mkdir()
    target = probekit.Target(os.path.join(inst, "bin", "blktgt"), tmp_path)
    target.start()
    try:
        def dry(script):
            p = subprocess.run([wrapper, "--dry-run", str(target.pid), script], cwd=here,
                               env=clean_env(), capture_output=True, text=True,
                               timeout=probekit.TIMEOUT)
            # The window's probes on bpftrace itself name the wrapper's
            # own PID (bpftrace's, after exec), which differs from run to
            # run.
            out = re.sub(r"^(tracepoint:(?:signal|syscalls):\w+ /pid == )\d+/", r"\1N/",
                         p.stdout, flags=re.M)
            return p.returncode, out, p.stderr

        rc, by_path, err = dry(shipped)
        assert rc == 0 and "probekit: tracing PID=" in by_path, err
        assert dry("iolat.bt") == (0, by_path, "")
        assert dry("iolat") == (0, by_path, "")

        (here / "iolat.bt").write_text(open(os.path.join(probekit.ROOT, "bt", "iops.bt")).read())
        rc, local, err = dry("iolat.bt")
        assert rc == 0 and local != by_path, err
        iops = dry(os.path.join(inst, "share", "probekit", "bt", "iops.bt"))[1]
        assert local.replace("// from iolat.bt", "// from iops.bt") == iops

        rc, out, err = dry("nosuch")
        assert (rc, out) == (1, "")
        assert err == (f"probekit-bpftrace: script 'nosuch' does not exist: not in the current "
                       f"directory ({here}), nor as nosuch.bt in "
                       f"{os.path.join(inst, 'share', 'probekit', 'bt')}\n")
        rc, out, err = dry("sub/iolat.bt")
        assert (rc, err) == (1, "probekit-bpftrace: script 'sub/iolat.bt' does not exist\n")
    finally:
        target.stop()
