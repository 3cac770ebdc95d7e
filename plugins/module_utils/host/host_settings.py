# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host settings that both RDMA fabrics need (pure Python, no Ansible imports).

* :func:`memlock_setting`: the locked-memory limit in the two forms the host keeps it in, ``limits.conf`` (KiB or
  ``unlimited``, ``man 5 limits.conf``) and the systemd manager's ``DefaultLimitMEMLOCK=`` (bytes with a base-1024
  suffix, or ``infinity``, ``man 5 systemd-system.conf`` / ``systemd.exec``).
* :func:`module_name_problems`: kernel module names that modprobe and modules-load.d take safely (no path
  separators, no regular-expression metacharacters).
* :func:`profile`: the rdma_host role's inputs as one host's settings, with every problem (its one validation path).
* :func:`peermem_failure`: why ``modprobe nvidia_peermem`` failed and what fixes it, from modprobe's stderr and the
  kernel log.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

import json
import re

from ansible.module_utils.parsing.convert_bool import boolean

UNLIMITED = "unlimited"
# Largest value that still means a finite limit (RLIM_INFINITY is 2**64 - 1 bytes); KiB * 1024 must stay below it.
MAX_MEMLOCK_KIB = (2 ** 64 - 1) // 1024 - 1

# What modprobe and modules-load.d accept as a module name, without path separators or regex metacharacters.
MODULE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")

_KIB_RE = re.compile(r"^[1-9][0-9]*$")


class HostSettingsError(ValueError):
    """An input the host settings cannot express; the message names the input and what it accepts."""


def memlock_setting(value, name="rdma_host_memlock"):
    """Return ``{"value", "limits", "systemd", "kib"}`` for a memlock limit given as ``unlimited`` or KiB.

    ``value`` is what the report shows (``unlimited`` or the number of KiB), ``limits`` the limits.conf item value,
    ``systemd`` the ``DefaultLimitMEMLOCK=`` value (``infinity`` or ``<KiB>K``) and ``kib`` the number (``None`` when
    unlimited). Booleans, zero, negative, fractional and suffixed values are refused.
    """
    if isinstance(value, bool) or value is None:
        raise HostSettingsError("%s must be 'unlimited' or a number of KiB (a positive integer); got %r." % (name, value))
    text = str(value).strip()
    if text.lower() == UNLIMITED:
        return {"value": UNLIMITED, "limits": UNLIMITED, "systemd": "infinity", "kib": None}
    if not _KIB_RE.match(text) or int(text) > MAX_MEMLOCK_KIB:
        raise HostSettingsError(
            "%s must be 'unlimited' or a number of KiB (a positive integer, as limits.conf counts memlock); got %r."
            % (name, value))
    kib = int(text)
    return {"value": kib, "limits": str(kib), "systemd": "%dK" % kib, "kib": kib}


def module_name_problems(names, name="rdma_host_modules"):
    """Return one message per entry of ``names`` that is not a kernel module name (empty when all are)."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        return ["%s must be a list of kernel module names; got %s." % (name, json.dumps(names, default=str))]
    bad = [n for n in names if not isinstance(n, str) or not MODULE_NAME_RE.match(n)]
    if not bad:
        return []
    return ["%s takes kernel module names (letters, digits, '_' and '-', as in ib_uverbs); got %s."
            % (name, json.dumps(bad, default=str))]


GDR_MODES = ("true", "false", "auto")


def profile(inputs, gpu_driver_present):
    """The rdma_host role's inputs as this host's settings, with every problem (the role's one validation path).

    ``inputs``: ``rdma_host_memlock``, ``rdma_host_modules`` (a list, or "a,b" as Ansible converts it),
    ``rdma_host_ipoib`` and ``rdma_host_gdr`` (true, false, auto); ``gpu_driver_present``: whether the NVIDIA GPU
    driver's module is loaded. Returns ``{memlock, modules, gdr, gpu_driver, peermem_wanted, gdr_state, errors}``:
    ``modules`` with ``ib_ipoib`` added for IPoIB, ``gdr_state`` until the gdr phase has run (``off``,
    ``no_gpu_driver``: asked for without a driver, or ``not_checked``)."""
    errors = []
    try:
        memlock = memlock_setting(inputs.get("rdma_host_memlock"), "rdma_host_memlock")
    except HostSettingsError as exc:
        memlock = {"value": None, "limits": None, "systemd": None, "kib": None}
        errors.append(str(exc))
    modules = inputs.get("rdma_host_modules", [])
    modules = [m.strip() for m in modules.split(",") if m.strip()] if isinstance(modules, str) else modules
    problems = module_name_problems(modules)
    errors += problems
    modules = [] if problems else list(modules)
    if boolean(inputs.get("rdma_host_ipoib", False), strict=False):
        modules.append("ib_ipoib")
    modules = sorted(set(modules), key=modules.index)
    gdr = str(inputs.get("rdma_host_gdr", "auto")).strip().lower()
    if gdr not in GDR_MODES:
        errors.append("rdma_host_gdr (rdma_gdr) must be true, false or auto; got %s." % (inputs.get("rdma_host_gdr"),))
    present = bool(gpu_driver_present)
    state = ("no_gpu_driver" if gdr == "true" and not present
             else "not_checked" if gdr in ("true", "auto") and present else "off")
    return {"memlock": memlock, "modules": modules, "gdr": gdr, "gpu_driver": "present" if present else "absent",
            "peermem_wanted": gdr in ("true", "auto") and present, "gdr_state": state, "errors": errors}


# Kernel log lines about the peer-memory client (nvidia_peermem, or nv_peer_mem before it) and their timestamps.
_KERNEL_LINE_RE = re.compile(r"peermem|peer_mem|peer[ -]memory", re.IGNORECASE)
_TIMESTAMP_RE = re.compile(r"^\[[^\]]*\]\s*")
# The lines of modprobe's output worth showing (not a container's own chatter around it).
_STDERR_LINE_RE = re.compile(r"modprobe: |failed to load|^insmod ")

# Why a load fails, first match wins: (cause, pattern over modprobe's lines and the kernel's, reason, kind of fix).
_FAILURES = (
    ("symbol_version_mismatch", re.compile(r"disagrees about version of symbol"),
     "nvidia_peermem was built against another ib_core than the one loaded (its symbol versions do not match): the "
     "GPU driver was installed before MLNX_OFED / DOCA-OFED, or the RDMA stack was upgraded under it.", "reinstall"),
    ("bad_parameter", re.compile(r"invalid \S+ param value|unknown parameter '"),
     "an nvidia_peermem option (/etc/modprobe.d) has a value the module refuses.", "params"),
    ("unknown_symbol", re.compile(r"Unknown symbol in module"),
     "the loaded ib_core does not export the peer-memory API (ib_register_peer_memory_client) the module was built "
     "for: it was built against an MLNX_OFED / DOCA-OFED that is no longer the one loaded.", "reinstall"),
    ("no_peer_memory_support", re.compile(r"could not insert '\S+': Invalid argument"),
     "nvidia_peermem was built without the MLNX_OFED / DOCA-OFED peer-memory headers (the GPU driver was built "
     "before the RDMA stack, or against the inbox one), so it refuses to load (-EINVAL).", "reinstall"),
    ("not_found", re.compile(r"FATAL: Module \S+ not found"),
     "the GPU driver's nvidia_peermem module is not installed for the running kernel.", "install"),
    ("key_rejected", re.compile(r"Key was rejected by service"),
     "Secure Boot refused the module: it is not signed with a key the kernel trusts.", "sign"),
    ("exec_format", re.compile(r"Exec format error"),
     "the module was built for another kernel or architecture.", "reinstall"),
)
_FIXES = {
    "reinstall": "reinstall (rebuild) the NVIDIA GPU driver after the RDMA stack, for %(release)s kernel "
                 "(%(rebuild)s), so that nvidia_peermem is built against the ib_core that is loaded; then reload the "
                 "driver or reboot and run the role again. Or use DMA-BUF instead (kernel 5.12 or later, the GPU "
                 "driver's open kernel modules 515 or later) and set rdma_gdr=false.",
    "install": "install the GPU driver's kernel modules for %(release)s kernel (%(rebuild)s), or use DMA-BUF and set "
               "rdma_gdr=false.",
    "sign": "sign the GPU driver's modules with a key enrolled in the MOK list (mokutil --import), or use DMA-BUF "
            "and set rdma_gdr=false.",
    "params": "correct or remove the nvidia_peermem options in /etc/modprobe.d, then run the role again.",
}


def peermem_kernel_lines(dmesg, limit=8):
    """Return the last ``limit`` distinct kernel log lines about nvidia_peermem / peer memory, without timestamps."""
    lines = []
    for line in str(dmesg or "").splitlines():
        if _KERNEL_LINE_RE.search(line):
            text = _TIMESTAMP_RE.sub("", line.strip())
            if text in lines:
                lines.remove(text)
            lines.append(text)
    return lines[-limit:]


def peermem_failure(stderr, dmesg="", release=None, rebuild=None):
    """Classify a failed ``modprobe nvidia_peermem``; return ``{"cause", "reason", "fix", "evidence", "msg"}``.

    ``stderr`` is modprobe's error output (hpcnet.rdma.kernel_modules' ``msg``), ``dmesg`` the kernel log (or only
    its lines about the module), ``release`` the running kernel release and ``rebuild`` how this platform rebuilds
    the GPU driver, both for the fix text.
    """
    kernel = peermem_kernel_lines(dmesg)
    stderr_lines = [line.strip() for line in str(stderr or "").splitlines() if _STDERR_LINE_RE.search(line)]
    text = "\n".join(stderr_lines + kernel)
    cause, reason, fix_kind = "unknown", (
        "modprobe nvidia_peermem failed for a reason this role does not recognise."), "reinstall"
    for name, regex, why, fix in _FAILURES:
        if regex.search(text):
            cause, reason, fix_kind = name, why, fix
            break
    fix = _FIXES[fix_kind] % {"release": ("the %s" % release) if release else "the running",
                              "rebuild": rebuild or "the driver's DKMS package, or the NVIDIA .run installer"}
    evidence = stderr_lines[-3:] + kernel
    msg = "nvidia_peermem did not load: %s Fix: %s%s" % (
        reason, fix[0].upper() + fix[1:],
        (" Evidence: %s" % " | ".join(evidence)) if evidence else "")
    return {"cause": cause, "reason": reason, "fix": fix, "evidence": evidence, "msg": msg}
