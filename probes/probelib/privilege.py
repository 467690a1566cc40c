# SPDX-License-Identifier: BSD-2-Clause
"""probelib.privilege: the one line that says what a refused read of
another user's process needs and this process lacks, as
specs/privileges.toml states it (through probelib.toolspec, which the
libbpf and BCC tools' lines come from too).  probekit-list,
blktgt-trace and blktgt-rpc use it."""

import errno

from . import toolspec as spec

DENIED = (errno.EACCES, errno.EPERM)


def _effective_caps():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def _holds(name, caps, p):
    nums = p["capability"]
    return bool(caps >> nums[name] & 1) or any(
        name in inc and caps >> nums[key] & 1
        for key, inc in p.get("includes", {}).items())


def explain(reader, what, whom, err):
    """what, then why err (an OSError) refused it: for a lack of
    privilege, what reader (a name in privileges.toml's [reader]) needs
    to read whom (another user's process, socket...) and what this
    process lacks; else the error's own text."""
    if err.errno not in DENIED:
        return "%s: %s" % (what, err.strerror or err)
    p = spec.privileges()
    caps = _effective_caps()
    need = [name for _, name in spec.needs(reader, True)]
    lack = [name for name in need if not _holds(name, caps, p)]
    if not lack:
        return ("%s: permission denied, though this process has %s (a "
                "process of another container, or a security module?)"
                % (what, spec.and_list(need)))
    return spec.privilege_line(what, whom, need, lack)
