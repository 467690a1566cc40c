# SPDX-License-Identifier: BSD-2-Clause
"""make and bench/run, as the bench's tests run them: make with only the
variables given (not those of a make test above), and bench/run's
sections on a build."""

import os
import subprocess
import sys

import probekit


def make(*args):
    """Run this repository's make with only our variables: a 'make test'
    above us passes its own command-line variables down in MAKEFLAGS."""
    env = probekit.own_make_env()
    r = subprocess.run(["make", "--no-print-directory", "-C", probekit.ROOT,
                        *args], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=600)
    assert r.returncode == 0, r.stdout.decode(errors="replace")[-4000:]


BENCH = os.path.join(probekit.ROOT, "bench")
sys.path.insert(0, BENCH)


def bench_run():
    """bench/run (no .py) as a module, with the modules it imports."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("bench_run", os.path.join(BENCH, "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    # What bench/run imports when run as a program.
    import batch
    import stacks
    import window
    mod.batch, mod.stacks, mod.window = batch, stacks, window
    return mod


OLD = "<!-- section 8: bench/stacks.py; bench/run --only stacks rewrites it -->\nold\n" \
      "<!-- end of section 8 -->"


def run_path():
    return os.path.join(BENCH, "run")
