# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installed RDMA stack against the one asked for: probe, version gate, kernel drift guard, DKMS and driver.

Pure Python, no Ansible imports; commands go through a runner (``which(name)``, ``run(argv) -> (rc, out, err)``),
as in :mod:`rdma_stack`. Sources:

* installed stack: ``ofed_info -s`` (:func:`rdma_stack.parse_ofed_info_s`); the DOCA version is the version of the
  installed profile meta-package (``doca-ofed 3.2.1-044000``: ``dpkg-query``/``rpm``), since ``ofed_info`` prints
  the OFED component's version (25.10-...), not DOCA's;
* kernels: the running one from ``uname -r`` (what DKMS, mlnxofedinstall and ``/etc/infiniband/info`` use), the
  installed ones from ``/boot/vmlinuz-<release>``, headers present when ``/lib/modules/<release>/build/include``
  exists (the test DKMS itself makes);
* DKMS: ``dkms status`` (:func:`parse_dkms_status`, the 3.x ``module/version, kernel, arch: state`` and the 2.x
  ``module, version, kernel, arch: state`` forms);
* driver: the loaded mlx5_core's ``<sysfs>/module/mlx5_core/version`` (absent for the distribution's in-tree
  module) against ``modinfo -k <running> -F version mlx5_core`` of the module installed on disk.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

import os
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.stack import device_naming, rdma_stack
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key

VENDOR_PROVIDERS = ("doca", "mlnx_ofed")
DKMS_MODULE = "mlnx-ofed-kernel"

_DKMS3 = re.compile(r"^(?P<module>[^/,\s]+)/(?P<version>[^,\s]+), (?P<kernel>[^,\s]+), (?P<arch>[^:\s]+): (?P<state>\w+)")
_DKMS2 = re.compile(r"^(?P<module>[^/,\s]+), (?P<version>[^,\s]+), (?P<kernel>[^,\s]+), (?P<arch>[^:\s]+): (?P<state>\w+)")
_DKMS_ADDED = re.compile(r"^(?P<module>[^/,\s]+)[/,] ?(?P<version>[^,:\s]+): (?P<state>added)")


def parse_dkms_status(text):
    """``dkms status`` -> ``[{module, version, kernel, arch, state, warning}]``; ``added`` rows have no kernel."""
    rows = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith(("Warning", "Error")):
            continue
        match = _DKMS3.match(line) or _DKMS2.match(line)
        if match:
            row = match.groupdict()
            rest = line[match.end():].strip()
            row["warning"] = rest.strip("() ") or None
            rows.append(row)
            continue
        match = _DKMS_ADDED.match(line)
        if match:
            rows.append(dict(match.groupdict(), kernel=None, arch=None, warning=None))
    return rows


def kernel_guard(running, installed, pinned=None):
    """None when the running kernel may get the vendor's modules, else a message naming the kernels.

    The running kernel must be the newest installed one (a newer one would boot next and find no modules built for
    it), or the one the user pinned. (The headers are the role's kernel phase: it installs them, and says so when it
    cannot.)
    """
    if pinned and running != pinned:
        return ("the running kernel is %s but ofed_kernel pins %s: boot %s first (the vendor's modules are built for "
                "the running kernel)" % (running, pinned, pinned))
    newest = sorted(installed or [running], key=natural_key)[-1]
    if not pinned and newest != running:
        return ("the running kernel is %s but %s is installed and boots next: the modules DKMS builds now would not "
                "load after that reboot. Reboot into %s first, or pin the kernel with ofed_kernel=%s"
                % (running, newest, newest, running))
    return None


def dkms_guard(rows, running, module=DKMS_MODULE, version=None):
    """None when ``module`` is installed for the running kernel, else the message that names the kernels."""
    mine = [r for r in rows if r["module"] == module and (version is None or r["version"] == version)]
    if any(r["kernel"] == running and r["state"] == "installed" for r in mine):
        return None
    built = sorted({"%s (%s)" % (r["kernel"], r["state"]) for r in mine if r["kernel"]})
    return ("DKMS has no %s%s installed for the running kernel %s (%s): the vendor's driver cannot load. Install the "
            "headers of %s and run dkms autoinstall, or boot a kernel it was built for"
            % (module, ("/" + version) if version else "", running,
               ("built for " + ", ".join(built)) if built else "built for no kernel", running))


def wanted_matches(provider, version, installed):
    """Does the installed stack (probe's ``installed``) match the provider/version asked for."""
    if installed.get("provider") != provider:
        return False
    if provider == "inbox" or not version:
        return True
    return installed.get("version") == version or installed.get("doca_version") == version or str(
        installed.get("doca_version") or "").startswith(str(version) + "-")


def plan(provider, version, installed, allow_change):
    """``{action, message}``: ``none`` (as asked), ``install`` (no RDMA stack on the host), ``change`` (another stack,
    or another version, is removed completely first, with consent) or ``refuse`` (no consent)."""
    if wanted_matches(provider, version, installed):
        return {"action": "none", "message": "%s %s is installed" % (provider, version or installed.get("version") or "")}
    have = installed.get("provider")
    if have in (None, "none"):
        return {"action": "install", "message": "installing %s %s" % (provider, version or "")}
    what = ("%s %s" % (have, installed.get("doca_version") or installed.get("version") or "")).strip()
    wanted = ("%s %s" % (provider, version or "")).strip()
    if not allow_change:
        return {"action": "refuse", "message": (
            "this host runs the %s RDMA stack and ofed_provider/version ask for %s. Changing stacks removes the "
            "installed one completely first (as NVIDIA documents: ofed_uninstall.sh --force, DOCA packages purged; "
            "the distribution's RDMA packages for inbox): set ofed_allow_provider_change=true to allow it"
            % (what, wanted))}
    return {"action": "change", "message": "removing %s, then installing %s" % (what, wanted)}


def parse_installer_output(text):
    """mlnxofedinstall's console output -> ``{passed, failed_package, log, errors, activation}``.

    ``Failed to install <pkg> DEB`` + ``See <log>`` (mlnxofedinstall-dkms-deb-fail-01), ``Error: ...`` lines and
    ``Failed to build MLNX_OFED_LINUX for <kernel>`` (add-kernel-support failures), ``Installation passed
    successfully`` and the activation command after ``To load the new driver, run:``.
    """
    lines = (text or "").splitlines()
    out = {"passed": False, "failed_package": None, "log": None, "errors": [], "activation": None}
    for i, line in enumerate(lines):
        stripped = line.strip()
        match = re.match(r"^Failed to install (\S+) (DEB|RPM)$", stripped)
        if match:
            out["failed_package"] = match.group(1)
        match = re.match(r"^See (/\S+\.log)$", stripped)
        if match:
            out["log"] = match.group(1)
        if stripped.startswith(("Error:", "Failed to build", "ERROR:")) or re.match(r"^Failed to ", stripped):
            out["errors"].append(stripped)
        if stripped == "Installation passed successfully":
            out["passed"] = True
        if stripped == "To load the new driver, run:" and i + 1 < len(lines):
            out["activation"] = lines[i + 1].strip()
    return out


def parse_apt_policy(text):
    """``apt-cache policy <name>...`` -> ``{name: candidate version or None}``.

    One block a package: ``<name>:`` at column 0, then ``  Installed: ...`` and ``  Candidate: <version>`` (or
    ``(none)`` when no source offers it). apt prints nothing for a name it has no record of, so such a name is absent
    from the result.
    """
    policy = {}
    name = None
    for line in (text or "").splitlines():
        header = re.match(r"^(\S+):$", line)
        if header:
            name = header.group(1)
            policy[name] = None
            continue
        candidate = re.match(r"^\s+Candidate: (\S+)$", line)
        if candidate and name is not None:
            policy[name] = None if candidate.group(1) == "(none)" else candidate.group(1)
    return policy


def _package_version(runner, name):
    dpkg_query = runner.which("dpkg-query")
    if dpkg_query:
        rc, out, _err = runner.run([dpkg_query, "-W", "-f=${db:Status-Status}\t${Version}", name])
        status, _sep, version = out.strip().partition("\t")
        return version if rc == 0 and status == "installed" and version else None
    rpm = runner.which("rpm")
    if rpm:
        rc, out, _err = runner.run([rpm, "-q", "--qf", "%{VERSION}-%{RELEASE}", name])
        return out.strip() if rc == 0 and out.strip() and " " not in out.strip() else None
    return None


def package_versions(runner, names):
    """``{name: installed version or None}`` for each of ``names`` (dpkg-query, else rpm)."""
    return dict((name, _package_version(runner, name)) for name in names)


def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def probe(runner, sysfs_root="/sys", doca_package="doca-ofed", disk_root="/"):
    """What is installed and loaded; see the module docstring for the source of each value."""
    installed = rdma_stack.probe_stack(runner)
    installed["doca_version"] = _package_version(runner, doca_package) if installed["provider"] == "doca" else None
    uname = runner.which("uname")
    running = runner.run([uname, "-r"])[1].strip() if uname else os.uname()[2]
    boot = os.path.join(disk_root, "boot")
    kernels = sorted((f[len("vmlinuz-"):] for f in (os.listdir(boot) if os.path.isdir(boot) else [])
                      if f.startswith("vmlinuz-")), key=natural_key)
    headers = os.path.isdir(os.path.join(disk_root, "lib/modules", running, "build", "include"))
    dkms = runner.which("dkms")
    dkms_rows = parse_dkms_status(runner.run([dkms, "status"])[1]) if dkms else []
    loaded = _read(os.path.join(sysfs_root, "module", "mlx5_core", "version"))
    loaded_live = os.path.isdir(os.path.join(sysfs_root, "module", "mlx5_core"))
    modinfo = runner.which("modinfo")
    on_disk = None
    if modinfo:
        rc, out, _err = runner.run([modinfo, "-k", running, "-F", "version", "mlx5_core"])
        on_disk = (out.strip() or None) if rc == 0 else None
    return {
        "installed": installed,
        "kernel": {"running": running, "installed": kernels, "newest": kernels[-1] if kernels else running,
                   "headers": headers},
        "dkms": dkms_rows,
        "driver": {"loaded": loaded_live, "loaded_version": loaded, "installed_version": on_disk},
    }


def naming_state(policy, sysfs_root="/sys", rules_file=device_naming.RULES_FILE):
    """``device_naming.state`` of this host: its rules file and the names of its RDMA devices."""
    base = os.path.join(sysfs_root, "class", "infiniband")
    names = sorted(os.listdir(base)) if os.path.isdir(base) else []
    devices = dict((name, os.path.exists(os.path.join(base, name, "device"))) for name in names)
    current = None
    try:
        with open(rules_file) as handle:
            current = handle.read()
    except (IOError, OSError):
        current = None
    return device_naming.state(policy, current, devices)


def driver_pending(probed):
    """None when the loaded driver is the installed vendor stack's, else ``{from, to}``: a reboot (or openibd) loads it."""
    driver = probed["driver"]
    if probed["installed"].get("provider") not in VENDOR_PROVIDERS:
        return None
    if not driver["installed_version"]:
        return None  # nothing vendor-made on disk for this kernel: the DKMS check says why
    if driver["loaded_version"] == driver["installed_version"]:
        return None
    return {"from": driver["loaded_version"] or ("inbox" if driver["loaded"] else "not loaded"),
            "to": driver["installed_version"]}


_SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")
_DOCA_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
_MLNX_OFED_VERSION = re.compile(r"^\d+\.\d+-\d+(\.\d+){1,3}$")
_OPENIB_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _checksum_error(field, value, required=True):
    if not value:
        return ("%s is required: the sha256 of the artifact, as sha256:<64 hex digits> (sha256sum FILE)" % field
                if required else None)
    if not _SHA256.match(str(value)):
        return "%s must be sha256:<64 lowercase hex digits> (got %r)" % (field, value)
    return None


def _controller_file_error(field, value, urls, is_file):
    """A vendor artifact on the controller: an absolute path (a relative one would be looked up in one place by the
    checksum and in another by the copy), of a file that is there when ``is_file`` can tell."""
    value = str(value or "")
    if not value or (urls and re.match(r"^(https?|ftp)://", value)):
        return None
    if not value.startswith("/"):
        return "%s must be %san absolute path of a file on the controller (got %r)" % (
            field, "an http(s) URL or " if urls else "", value)
    if is_file is not None and not is_file(value):
        return "%s: %s is no file on the controller" % (field, value)
    return None


def input_errors(provider, inputs, is_file=None):
    """Every problem with the vendor stack inputs, each naming its field and what it accepts (empty when fine).
    ``is_file``: whether a path is a file on the controller (the filter's os.path.isfile), for the artifacts the role
    copies from there; None checks their form only."""
    errors = []
    if "platform" in inputs and not inputs.get("platform_supported"):
        errors.append("hpcnet.rdma.ofed has no package data for %s; supported: Debian, Ubuntu, RedHat family"
                      % inputs["platform"])
    if provider in VENDOR_PROVIDERS and inputs.get("pkg_mgr") != "apt":
        errors.append("ofed_provider %s: this release installs vendor stacks with apt (Debian, Ubuntu); this host's "
                      "package manager is %s" % (provider, inputs.get("pkg_mgr")))
    if provider == "doca":
        version = str(inputs.get("ofed_doca_version") or "")
        if not _DOCA_VERSION.match(version):
            errors.append("ofed_doca_version is required with ofed_provider=doca: DOCA's version, e.g. 3.2.1 (got %r)"
                          % version)
        elif tuple(int(n) for n in version.split(".")[:2]) < (3, 2):
            errors.append("ofed_doca_version %s: DOCA before 3.2 ships kernel packages prebuilt for one kernel and "
                          "rebuilds them with doca-kernel-support, which this release does not drive; use DOCA 3.2 or "
                          "later (DKMS builds the modules on the host)" % version)
        if inputs.get("ofed_doca_source") == "local_repo":
            if not inputs.get("ofed_doca_local_repo"):
                errors.append("ofed_doca_local_repo is required with ofed_doca_source=local_repo: the URL or "
                              "controller path of the doca-host local-repo package")
            errors.append(_controller_file_error("ofed_doca_local_repo", inputs.get("ofed_doca_local_repo"), True, is_file))
            errors.append(_checksum_error("ofed_doca_local_repo_checksum", inputs.get("ofed_doca_local_repo_checksum")))
        errors.append(_checksum_error("ofed_doca_gpg_key_checksum", inputs.get("ofed_doca_gpg_key_checksum"), False))
    if provider == "mlnx_ofed":
        version = str(inputs.get("ofed_mlnx_ofed_version") or "")
        if not _MLNX_OFED_VERSION.match(version):
            errors.append("ofed_mlnx_ofed_version is required with ofed_provider=mlnx_ofed: the installer's version, "
                          "e.g. 24.10-1.1.4.0 (got %r)" % version)
        errors.append(_controller_file_error("ofed_mlnx_ofed_file", inputs.get("ofed_mlnx_ofed_file"), False, is_file))
        errors.append(_checksum_error("ofed_mlnx_ofed_checksum", inputs.get("ofed_mlnx_ofed_checksum")))
        for flag in inputs.get("ofed_mlnx_ofed_flags") or []:
            if not str(flag).startswith("-") or any(c.isspace() for c in str(flag).split("=", 1)[0]):
                errors.append("ofed_mlnx_ofed_flags: %r is not an installer option (one option per item, e.g. "
                              "--without-fw-update, --with-nvmf)" % (flag,))
    for key, value in (inputs.get("ofed_openib_conf") or {}).items():
        if not _OPENIB_KEY.match(str(key)):
            errors.append("ofed_openib_conf: %r is not an openib.conf variable (upper case, e.g. IPOIB_LOAD)" % (key,))
        elif "\n" in str(value) or isinstance(value, (dict, list)):
            errors.append("ofed_openib_conf.%s: one line of text, e.g. 'yes' or 'no' (got %r)" % (key, value))
    return [e for e in errors if e]
