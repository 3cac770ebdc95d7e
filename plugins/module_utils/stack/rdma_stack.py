# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Detect the RDMA user-space stack (DOCA-OFED, MLNX_OFED, inbox rdma-core) and the memlock limit.

Pure Python, no Ansible imports. Commands are run through a small *runner* object so that the probe can be
tested with mocks:

* ``runner.which(name)`` returns the absolute path of an executable on PATH, or None;
* ``runner.run(argv)`` runs an argv list (never a shell string) with ``LC_ALL=C`` and returns ``(rc, stdout, stderr)``.

How the provider is decided (first match wins):

1. ``ofed_info -s`` is on PATH and prints a recognised version line (see :func:`parse_ofed_info_s`):
   ``OFED-internal-<ver>:`` -> ``doca``; ``MLNX_OFED_LINUX-<ver>:`` -> ``mlnx_ofed``.
2. The distribution's ``rdma-core`` package is installed (``dpkg-query`` or ``rpm``, as argv) -> ``inbox`` with the
   package's upstream version (``44.0`` for Debian's ``44.0-2``).
3. ``libibverbs.so.1`` exists in a standard library directory -> ``inbox`` with version None.
4. Otherwise ``none``.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

import glob
import re
import resource

PROVIDERS = ("doca", "mlnx_ofed", "inbox", "none")

# ofed_info -s prints one line "<PREFIX>-<version>:".
#  * DOCA-OFED / DOCA-Host (doca-ofed, doca-roce, doca-all profiles, DOCA >= 2.x) print "OFED-internal-24.07-0.3.5.0.110:".
#  * MLNX_OFED (standalone installer, up to its last 24.10 LTS) prints "MLNX_OFED_LINUX-5.0-2.1.8.0:", also for
#    the 23.x/24.x releases, so the provider is decided by the prefix, never by the version number.
_OFED_INFO_RE = re.compile(r"^(?P<prefix>MLNX_OFED_LINUX|OFED-internal)-(?P<version>\d[0-9A-Za-z.\-_]*?):?$")
_PREFIX_PROVIDER = {"MLNX_OFED_LINUX": "mlnx_ofed", "OFED-internal": "doca"}

LIBIBVERBS_GLOBS = (
    "/usr/lib/*/libibverbs.so.1",
    "/usr/lib64/libibverbs.so.1",
    "/usr/lib/libibverbs.so.1",
    "/lib/*/libibverbs.so.1",
    "/lib64/libibverbs.so.1",
)


class StackParseError(ValueError):
    """ofed_info -s printed something that is not a known version line."""


def parse_ofed_info_s(text):
    """Parse the output of ``ofed_info -s`` into ``{"provider": ..., "version": ...}``.

    ``MLNX_OFED_LINUX-5.0-2.1.8.0:`` -> ``{"provider": "mlnx_ofed", "version": "5.0-2.1.8.0"}``;
    ``OFED-internal-24.07-0.3.5.0.110:`` -> ``{"provider": "doca", "version": "24.07-0.3.5.0.110"}``.
    The first non-empty line is used; anything else raises StackParseError.
    """
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        raise StackParseError("ofed_info -s printed nothing")
    match = _OFED_INFO_RE.match(lines[0])
    if not match:
        raise StackParseError("ofed_info -s printed %r; expected 'MLNX_OFED_LINUX-<version>:' or 'OFED-internal-<version>:'" % lines[0])
    return {"provider": _PREFIX_PROVIDER[match.group("prefix")], "version": match.group("version")}


def upstream_version(package_version):
    """Strip the epoch and the distribution revision: ``1:44.0-2`` -> ``44.0``; ``48.0`` -> ``48.0``."""
    version = package_version.strip()
    if ":" in version:
        version = version.split(":", 1)[1]
    if "-" in version:
        version = version.rsplit("-", 1)[0]
    return version or None


def _rdma_core_package_version(runner):
    """Version of the installed distro ``rdma-core`` package, or None."""
    dpkg_query = runner.which("dpkg-query")
    if dpkg_query:
        rc, out, _err = runner.run([dpkg_query, "-W", "-f=${db:Status-Status}\t${Version}", "rdma-core"])
        if rc == 0:
            status, _sep, version = out.strip().partition("\t")
            if status == "installed" and version:
                return upstream_version(version)
    rpm = runner.which("rpm")
    if rpm:
        rc, out, _err = runner.run([rpm, "-q", "--qf", "%{VERSION}", "rdma-core"])
        if rc == 0 and out.strip() and " " not in out.strip():
            return out.strip()
    return None


def _libibverbs_present(globs=LIBIBVERBS_GLOBS):
    return any(glob.glob(pattern) for pattern in globs)


def probe_stack(runner, libibverbs_present=_libibverbs_present):
    """Return ``{"provider", "version", "ofed_info"}`` for this host (see the module docstring for the order).

    ``ofed_info`` is the raw first line that ``ofed_info -s`` printed, or None when the tool is absent or failed.
    """
    raw = None
    ofed_info = runner.which("ofed_info")
    if ofed_info:
        rc, out, _err = runner.run([ofed_info, "-s"])
        if rc == 0:
            lines = [line.strip() for line in out.splitlines() if line.strip()]
            raw = lines[0] if lines else None
            try:
                parsed = parse_ofed_info_s(out)
            except StackParseError:
                parsed = None
            if parsed:
                parsed["ofed_info"] = raw
                return parsed
    version = _rdma_core_package_version(runner)
    if version:
        return {"provider": "inbox", "version": version, "ofed_info": raw}
    if libibverbs_present():
        return {"provider": "inbox", "version": None, "ofed_info": raw}
    return {"provider": "none", "version": None, "ofed_info": raw}


def _limit(value):
    return "unlimited" if value == resource.RLIM_INFINITY else int(value)


def memlock_limits():
    """RLIMIT_MEMLOCK of the calling process as ``{"soft": bytes|"unlimited", "hard": bytes|"unlimited"}``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return {"soft": _limit(soft), "hard": _limit(hard)}
