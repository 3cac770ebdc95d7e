"""The running kernel and the RDMA driver a simulated host boots with: the model behind vendor stacks.

A real host runs the kernel its boot loader picked (the newest installed one) and loads the mlx5/IB modules found
for that kernel: the vendor's DKMS-built ones under /lib/modules/<release>/updates/dkms when they exist, else the
distribution's in-tree ones. Installing a stack changes nothing until the driver is reloaded (a reboot, or
``/etc/init.d/openibd restart``). The simulated host does the same, at every build of its tree (a boot or a
driver reload):

* **running kernel**: ``/run/simhost/kernel-release`` (beside the tree, on the tmpfs, so it changes only at a
  reboot, not at a driver reload). Written at the first build of a boot: the newest ``/boot/vmlinuz-<release>``
  (natural version order, as GRUB's default entry), or the container's real release when /boot holds none.
  ``uname`` (the stand-in in /usr/local/bin) prints it for ``-r``/``-a``, so DKMS, mlnxofedinstall, /etc/infiniband/info
  and the product see one kernel.
* **driver**: ``<disk>/lib/modules/<running>/updates/dkms/mlx5_core.ko`` present -> the vendor driver: its
  MODULE_VERSION read from the module's .modinfo (``version=`` as modinfo reads it), the provider from the
  installed ``/usr/bin/ofed_info`` (``OFED-internal`` -> doca, ``MLNX_OFED_LINUX`` -> mlnx_ofed). Otherwise the
  profile's stack (inbox, or the vendor stack a profile declares as pre-installed).

``$SIMHOST_DISK_ROOT`` (default ``/``) is where /boot, /lib/modules and /usr/bin are read, for tests.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_OFED_INFO_S = re.compile(rb"echo ((OFED-internal|MLNX_OFED_LINUX)-([0-9A-Za-z.\-_]+):)")
_VERSION = re.compile(rb"(?:^|\x00)version=([^\x00]+)\x00")


def disk_root() -> Path:
    return Path(os.environ.get("SIMHOST_DISK_ROOT", "/"))


def _natural(release: str):
    return [(0, int(tok), "") if tok.isdigit() else (1, 0, tok) for tok in re.findall(r"\d+|[^\d]+", release)]


def installed_kernels(disk: Path | None = None) -> list:
    boot = (disk or disk_root()) / "boot"
    found = [p.name[len("vmlinuz-"):] for p in boot.glob("vmlinuz-*")] if boot.is_dir() else []
    return sorted(found, key=_natural)


def kernel_file(root) -> Path:
    return Path(root).parent / "kernel-release"


def running_kernel(root) -> str:
    """The release this boot runs; chosen at the first build of a boot and kept until the next one."""
    path = kernel_file(root)
    try:
        release = path.read_text().strip()
        if release:
            return release
    except OSError:
        pass
    kernels = installed_kernels()
    release = kernels[-1] if kernels else os.uname().release
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(release + "\n")
    except OSError:
        pass
    return release


def module_version(ko: Path) -> str | None:
    try:
        match = _VERSION.search(ko.read_bytes())
    except OSError:
        return None
    return match.group(1).decode() if match else None


def boot_stack(stack: dict, release: str, disk: Path | None = None) -> dict:
    """The stack whose driver this boot loads (see the module docstring)."""
    disk = disk or disk_root()
    version = module_version(disk / "lib/modules" / release / "updates/dkms/mlx5_core.ko")
    if not version:
        return stack
    try:
        match = _OFED_INFO_S.search((disk / "usr/bin/ofed_info").read_bytes())
    except OSError:
        match = None
    if match:
        line, prefix, ofed = (g.decode() for g in match.groups())
        provider = "doca" if prefix == "OFED-internal" else "mlnx_ofed"
    else:
        line, provider, ofed = None, "mlnx_ofed", version
    return {"provider": provider, "version": ofed, "ofed_info_s": line, "module_version": version}
