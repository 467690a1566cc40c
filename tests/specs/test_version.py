# SPDX-License-Identifier: BSD-2-Clause
"""Every probekit command answers --version with probekit's version.

The version has one home, the one line of VERSION at the top of the tree.
The C programs are given it at build time (mk/version.mk); the scripts read
it at run time from ../VERSION beside their real directory: the top of the
checkout, or PREFIX/share/probekit, where make install keeps the checkout's
tree and links PREFIX/bin/NAME to the script.  The answer is "NAME (probekit) VERSION" on stdout, nothing on stderr, exit 0.

To cover another command, add one line to COMMANDS.
"""

import os
import shutil
import subprocess

import pytest

import probekit
from histtools import TOOLS
from probekit import PYTHON, ROOT


def built(name):
    return os.path.join(probekit.BUILD, "bin", name)


def script(*path):
    return [PYTHON, os.path.join(ROOT, *path)]


# (NAME, argv that runs it): NAME is what the command calls itself.
COMMANDS = [
    ("blktgt", [built("blktgt")]),
    *[(f"probekit-{t}", [built(f"probekit-{t}")]) for t in TOOLS + ["nbdtime"]],
    *[(f"probekit-{t}-bcc", [built(f"probekit-{t}-bcc")]) for t in TOOLS + ["nbdtime"]],
    ("blktgt-trace", [built("blktgt-trace")]),
    ("blktgt-rpc", [built("blktgt-rpc")]),
    ("probekit-check", [built("probekit-check")]),
    ("probekit-list", [built("probekit-list")]),
    *[(f"probekit-{t}-bcc", [built(f"probekit-{t}-bcc")])
      for t in ("usdtlat", "usdtcount")],
    ("probekit-gencatalog", [built("probekit-gencatalog")]),
    ("probekit-structs", [built("probekit-structs")]),
    ("probekit-bpftrace", [built("probekit-bpftrace")]),
]


def version():
    with open(os.path.join(ROOT, "VERSION")) as f:
        return f.read().strip()


def run(argv):
    """(rc, stdout lines, stderr lines)."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=probekit.TIMEOUT)
    return (p.returncode, p.stdout.decode().splitlines(),
            p.stderr.decode().splitlines())


def test_version_file():
    with open(os.path.join(ROOT, "VERSION")) as f:
        assert f.read() == "0.3.0\n"


@pytest.mark.parametrize("name,argv", COMMANDS,
                         ids=[os.path.relpath(a[-1], ROOT) for _, a in COMMANDS])
def test_version(name, argv):
    assert os.path.exists(argv[-1]), f"{argv[-1]} is not built"
    assert run(argv + ["--version"]) == (
        0, [f"{name} (probekit) {version()}"], [])


def test_blktgt_short_version():
    assert run([built("blktgt"), "-V"]) == (
        0, [f"blktgt (probekit) {version()}"], [])


# --- --version beside the other options ----------------------------------

@pytest.mark.parametrize("tool", TOOLS)
def test_libbpf_version_among_options(tool):
    """Options are taken in order: --version after valid ones answers,
    after a bad one the usage error wins.  -V is no option of these tools
    (nor of their bcc/ twins), and --version takes no argument."""
    cmd = f"probekit-{tool}"
    want = (0, [f"{cmd} (probekit) {version()}"], [])
    assert run([built(cmd), "-p", "1", "-T", "--version"]) == want
    assert run([built(cmd), "--version", "-p", "1"]) == want
    assert run([built(cmd), "-p", "1x", "--version"]) == (
        2, [], [f"{cmd}: -p/--pid: invalid PID '1x' (see --help)"])
    assert run([built(cmd), "-V"]) == (
        2, [], [f"{cmd}: unrecognized option '-V' (see --help)"])
    assert run([built(cmd), "--version=1"]) == (
        2, [], [f"{cmd}: option '--version' takes no argument "
                "(see --help)"])


def test_blktgt_version_among_options():
    b = built("blktgt")
    assert run([b, "-R", "0", "-V"]) == (
        2, [], ["blktgt: -R 0: expected a number of reactor threads, 1..64 "
                "(try -h)"])
    assert run([b, "--version=1"]) == (
        2, [], ["blktgt: unknown option --version=1 (try -h)"])
    assert run([b, "--no-such-option"]) == (
        2, [], ["blktgt: unknown option --no-such-option (try -h)"])


# --- where the scripts find VERSION --------------------------------------

SCRIPTS = [("blktgt-trace", ("target", "blktgt-trace")),
           ("blktgt-rpc", ("target", "rpc.py")),
           ("probekit-gencatalog", ("probes", "gencatalog"))]


def with_probelib(script):
    """Put the probelib package where script finds it, as make install
    lays the tree out: beside a script in probes/, else in ../probes/.
    Each script reads VERSION through probelib.version, its one reader."""
    here = os.path.dirname(script)
    home = here if "gencatalog" in os.path.basename(script) else \
        os.path.join(os.path.dirname(here), "probes")
    shutil.copytree(os.path.join(ROOT, "probes", "probelib"),
                    os.path.join(home, "probelib"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    # probelib.privilege reads specs/privileges.toml through
    # probelib.toolspec: specs/ beside probes/, as make install lays it.
    top = os.path.dirname(home)
    shutil.copytree(os.path.join(ROOT, "specs"), os.path.join(top, "specs"),
                    ignore=lambda d, names: [n for n in names
                                             if not n.endswith(".toml")],
                    dirs_exist_ok=True)


@pytest.mark.parametrize("name,path", SCRIPTS, ids=[n for n, _ in SCRIPTS])
def test_script_installed_layout(name, path, tmp_path):
    """Installed, PREFIX/bin/NAME links to the script in
    PREFIX/share/probekit/DIR/, which reads PREFIX/share/probekit/VERSION
    through its real path (not PREFIX/VERSION beside bin/)."""
    data = tmp_path / "share" / "probekit"
    os.makedirs(tmp_path / "bin")
    os.makedirs(data / path[0])
    shutil.copy(os.path.join(ROOT, *path), data.joinpath(*path))
    with_probelib(str(data.joinpath(*path)))
    os.symlink(os.path.join("..", "share", "probekit", *path), tmp_path / "bin" / name)
    (data / "VERSION").write_text("9.8.7\n")
    (tmp_path / "VERSION").write_text("1.2.3\n")
    assert run([PYTHON, str(tmp_path / "bin" / name), "--version"]) == (
        0, [f"{name} (probekit) 9.8.7"], [])


@pytest.mark.parametrize("name,path", SCRIPTS, ids=[n for n, _ in SCRIPTS])
def test_script_without_version_file(name, path, tmp_path):
    """No VERSION: one line saying where it looked, exit 1."""
    os.makedirs(tmp_path / "tree" / "sub")
    tool = tmp_path / "tree" / "sub" / name
    shutil.copy(os.path.join(ROOT, *path), tool)
    with_probelib(str(tool))
    rc, out, err = run([PYTHON, str(tool), "--version"])
    assert (rc, out, len(err)) == (1, [], 1), (rc, out, err)
    assert err[0] == (
        f"{name}: cannot find probekit's VERSION file ({tmp_path}/tree/VERSION)")


def test_script_bad_version_file(tmp_path):
    """A VERSION that is not one version line is refused, not printed."""
    os.makedirs(tmp_path / "target")
    tool = tmp_path / "target" / "rpc.py"
    shutil.copy(os.path.join(ROOT, "target", "rpc.py"), tool)
    with_probelib(str(tool))
    (tmp_path / "VERSION").write_text("0.3.0\n\"; rm -rf /\n")
    assert run([PYTHON, str(tool), "--version"]) == (
        1, [], [f"blktgt-rpc: {tmp_path}/VERSION: not one line with a version "
                "such as 0.3.0"])
