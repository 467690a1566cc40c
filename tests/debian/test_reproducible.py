# SPDX-License-Identifier: BSD-2-Clause
"""Reproducible builds: two package builds of one tree from two
directories (of different lengths, so no path can hide in padding) give
byte-identical .deb files.  The build path must not reach any binary: not
the C objects' DWARF, not the BTF that clang -target bpf embeds in the
libbpf tools' skeletons (Makefile's PREFIX_MAP).

Slow (two whole package builds), so it runs under CI=true (make check in
CI) or when PROBEKIT_DEB=1 asks for it, as tests/debian/test_deb.py does."""

import filecmp
import glob
import os
import subprocess

import pytest

import probekit

pytestmark = [
    pytest.mark.skipif(os.environ.get("CI") != "true" and os.environ.get("PROBEKIT_DEB") != "1",
                       reason="builds the Debian package twice (minutes): "
                              "runs under CI=true, or with PROBEKIT_DEB=1"),
    pytest.mark.needs("dpkg-buildpackage", "dh", "lintian"),
]

BUILD_TIMEOUT = 3600


def build_deb(out):
    p = subprocess.run(["make", "--no-print-directory", f"O={out}", "deb"], cwd=probekit.ROOT,
                       capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    debs = sorted(glob.glob(os.path.join(out, "deb", "probekit_*.deb")))
    assert len(debs) == 1, debs
    return debs[0]


def differing_files(a, b, tmp_path):
    """The paths whose contents differ between two .deb files."""
    trees = []
    for name, deb in (("a", a), ("b", b)):
        d = tmp_path / f"x-{name}"
        subprocess.run(["dpkg-deb", "-R", deb, str(d)], check=True, timeout=probekit.TIMEOUT)
        trees.append(str(d))

    def files(top):
        return {os.path.relpath(os.path.join(d, f), top)
                for d, _, fs in os.walk(top) for f in fs}
    fa, fb = files(trees[0]), files(trees[1])
    # Compared byte by byte: dircmp's shallow compare trusts equal size and
    # mtime, and dpkg clamps every mtime to the changelog's date.
    return sorted((fa ^ fb) | {f for f in fa & fb if not filecmp.cmp(
        os.path.join(trees[0], f), os.path.join(trees[1], f), shallow=False)})


def test_two_directories_build_identical_debs(tmp_path):
    a = build_deb(tmp_path / "one")
    b = build_deb(tmp_path / "second-build-dir")
    with open(a, "rb") as fa, open(b, "rb") as fb:
        same = fa.read() == fb.read()
    assert same, f"the .debs differ in: {differing_files(a, b, tmp_path)}"
