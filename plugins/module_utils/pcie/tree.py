# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PCIe tree of a host, read from sysfs under a root (``/sys`` on a real host, ``rdma_sysfs_root``): the path of
a PCI function from its root port, the GPUs, the IOMMU mode and the GPU-NIC distance (pure Python, no Ansible
imports; no GPU driver and no ``nvidia-smi`` needed).

Where it reads (the kernel's ABI, Documentation/ABI/testing/sysfs-bus-pci and sysfs-kernel-iommu_groups):

* ``bus/pci/devices/<bdf>`` links to the function's directory under ``devices/pci<domain>:<bus>/`` (the host bridge),
  one directory per PCI function on the way down: ``devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/
  0000:18:00.0`` is root port 15:01.0, a switch's upstream port 16:00.0, its downstream port 17:00.0, the device;
* each function's ``current_link_speed`` (``32.0 GT/s PCIe``; older kernels ``8 GT/s``), ``current_link_width``,
  ``max_link_speed``, ``max_link_width``, its ``config`` (config_space.py: the link registers are the fallback when a
  link file is absent; ACS, ATS and Max_Read_Request_Size come only from there, so they are None for a reader that is
  not root), ``numa_node`` (-1: none), ``vendor``, ``device``, ``class`` and the ``iommu_group`` link;
* ``kernel/iommu_groups/<n>/type``: the group's default domain (kernel 5.11 and later): ``identity`` (DMA goes
  untranslated: passthrough, ``iommu=pt``/``iommu.passthrough=1``), ``DMA`` or ``DMA-FQ`` (translated, strict or with
  a flush queue), ``blocked``, ``unmanaged`` (owned by a user such as VFIO) or ``auto``.

Rules, in one place:

* **A hop** is a PCI function on the path, root port first, the device last (``pcie_path``): ``pci``, ``type`` (the
  PCI Express port type, None unknown), ``speed``/``max_speed`` (GT/s), ``width``/``max_width`` (lanes), ``acs`` (the
  ACS Control bits by lspci name; {} no ACS capability; None unknown) and ``acs_redirect`` (ReqRedir or CmpltRedir
  on). A link joins a downstream-facing port (root port, switch downstream port) and the upstream-facing function below
  it (a switch's upstream port, the device): hops 0-1, 2-3, ... (the port type decides when it is known).
* **The IOMMU mode** of the host (``iommu_mode``): no group in ``kernel/iommu_groups`` is ``off`` (no IOMMU, or
  disabled); a group whose type is ``DMA`` or ``DMA-FQ`` makes it ``translated``; groups that are all ``identity``
  (``blocked``/``unmanaged``/``auto`` groups aside) are ``passthrough``; None when no group says (a kernel before
  5.11 has no ``type`` file).
* **Distance** in ``nvidia-smi topo -m`` terms (NVML's topology levels): PIX, the two functions' paths meet below one
  PCIe switch with no other switch between them; PXB, several switches between them, no host bridge; PHB, they meet
  only at the host bridge (different root ports of one root complex); NODE, different host bridges on one NUMA node
  (the functions' ``numa_node`` equal, -1 on both included: a host without NUMA information); SYS, different NUMA
  nodes (the SMP interconnect). A switch is counted by its upstream port.
* **A GPU** is a function of vendor 0x10de with class 0x0300 (VGA) or 0x0302 (3D controller).
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

import os
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import config_space
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import list_dir, natural_key, read_attr

DISTANCES = ("PIX", "PXB", "PHB", "NODE", "SYS")
NVIDIA = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")
TRANSLATED = ("DMA", "DMA-FQ")
PASSTHROUGH = ("identity",)

BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
HOST_BRIDGE_RE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
_SPEED_RE = re.compile(r"^(\d+(?:\.\d+)?) ?GT/s")


def parse_link_speed(text):
    """``32.0 GT/s PCIe`` (``8 GT/s``, ``2.5 GT/s``) -> 32.0; ``Unknown`` or anything else -> None."""
    match = _SPEED_RE.match((text or "").strip())
    return float(match.group(1)) if match else None


def _int(text):
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def iommu_mode(root="/sys"):
    """``off``, ``passthrough`` or ``translated`` (the rule in the module docstring), or None when unknown."""
    base = os.path.join(root, "kernel", "iommu_groups")
    groups = [g for g in list_dir(base) if g.isdigit()]
    if not groups:
        return "off"
    types = set(read_attr(os.path.join(base, g, "type")) for g in groups)
    if types & set(TRANSLATED):
        return "translated"
    if types & set(PASSTHROUGH):
        return "passthrough"
    return None


def upstream_facing(path):
    """The indexes of the hops of ``path`` that are the upstream end of a link (a switch's upstream port, the device):
    by port type when known, else by place (odd from the root port)."""
    out = []
    for index, hop in enumerate(path):
        kind = hop.get("type")
        if index and (kind not in config_space.DOWNSTREAM_FACING if kind else index % 2 == 1):
            out.append(index)
    return out


def _common(path_a, path_b):
    count = 0
    for hop_a, hop_b in zip(path_a[:-1], path_b[:-1]):
        if hop_a["pci"] != hop_b["pci"]:
            break
        count += 1
    return count


def bridges_between(path_a, path_b):
    """The bridges peer-to-peer traffic between the two paths' devices crosses: from where the paths meet down to each
    device (the devices themselves left out); every bridge of both when they meet only above the root ports."""
    common = _common(path_a, path_b)
    start = common - 1 if common else 0
    out = []
    for hop in path_a[start:-1] + path_b[start:-1]:
        if hop["pci"] not in [h["pci"] for h in out]:
            out.append(hop)
    return out


def distance(a, b):
    """The ``nvidia-smi topo -m`` distance between two read functions (``{host_bridge, numa_node, pcie_path}``)."""
    if a["host_bridge"] != b["host_bridge"]:
        return "NODE" if a.get("numa_node") == b.get("numa_node") else "SYS"
    path_a, path_b = a["pcie_path"], b["pcie_path"]
    common = _common(path_a, path_b)
    if not common:
        return "PHB"
    switches = set()
    for path in (path_a, path_b):
        for index in upstream_facing(path[:-1]):
            if index >= common - 1:
                switches.add(path[index]["pci"])
    return "PIX" if len(switches) <= 1 else "PXB"


def nearest_gpu(device, gpus):
    """``{gpu, distance}``: the GPU nearest ``device`` (ties: the first in PCI order), or None without a GPU."""
    ranked = [(DISTANCES.index(distance(device, gpu)), natural_key(gpu["pci"]), gpu["pci"]) for gpu in gpus]
    if not ranked:
        return None
    rank, _key, pci = min(ranked)
    return {"gpu": pci, "distance": DISTANCES[rank]}


class PcieTree:
    """Reads functions under a sysfs root, each directory once."""

    def __init__(self, root="/sys"):
        self.root = root
        self._real_root = os.path.realpath(root)
        self._hops = {}

    def function_dir(self, pci):
        """The function's real directory under ``devices/``, or None (not present, or a link out of the root)."""
        link = os.path.join(self.root, "bus", "pci", "devices", pci)
        real = os.path.realpath(link)
        if not os.path.isdir(real) or not real.startswith(os.path.join(self._real_root, "devices") + os.sep):
            return None
        return real

    def hop(self, directory):
        """One function as a hop of a path (cached: a bridge is on many paths)."""
        if directory not in self._hops:
            cfg = config_space.read(os.path.join(directory, "config")) or config_space.parse(b"")
            express = cfg["express"] or {}

            def attr(name):
                return read_attr(os.path.join(directory, name))

            speed, max_speed = parse_link_speed(attr("current_link_speed")), parse_link_speed(attr("max_link_speed"))
            width, max_width = _int(attr("current_link_width")), _int(attr("max_link_width"))
            self._hops[directory] = {
                "pci": os.path.basename(directory), "type": express.get("port_type"),
                "speed": speed if speed is not None else express.get("speed"),
                "width": width if width is not None else express.get("width"),
                "max_speed": max_speed if max_speed is not None else express.get("max_speed"),
                "max_width": max_width if max_width is not None else express.get("max_width"),
                "acs": cfg["acs"], "acs_redirect": config_space.acs_redirect(cfg["acs"]),
                "_config": cfg,
            }
        return self._hops[directory]

    def read_function(self, pci):
        """``{pci, host_bridge, numa_node, pcie_path, max_payload, max_read_req, ats, iommu_group, iommu_domain}``
        for one function, or None when sysfs does not have it."""
        directory = self.function_dir(pci)
        if directory is None:
            return None
        parts = os.path.relpath(directory, os.path.join(self._real_root, "devices")).split(os.sep)
        if not parts or not HOST_BRIDGE_RE.match(parts[0]):
            return None
        dirs, current = [], os.path.join(self._real_root, "devices", parts[0])
        for part in parts[1:]:
            current = os.path.join(current, part)
            if BDF_RE.match(part):
                dirs.append(current)
        hops = [self.hop(d) for d in dirs]
        express = hops[-1]["_config"]["express"] or {}
        group_link = os.path.join(directory, "iommu_group")
        group = os.path.basename(os.path.realpath(group_link)) if os.path.islink(group_link) else None
        domain = read_attr(os.path.join(self.root, "kernel", "iommu_groups", group, "type")) if group else None
        return {
            "pci": pci, "host_bridge": parts[0], "numa_node": _int(read_attr(os.path.join(directory, "numa_node"))),
            "pcie_path": [dict((k, v) for k, v in h.items() if not k.startswith("_")) for h in hops],
            "max_payload": express.get("max_payload"), "max_read_req": express.get("max_read_req"),
            "ats": hops[-1]["_config"]["ats_enabled"], "iommu_group": group,
            "iommu_domain": domain,
        }

    def gpu_addresses(self):
        """The PCI addresses of the GPUs (vendor 0x10de, class 0x0300 or 0x0302), in PCI order."""
        base = os.path.join(self.root, "bus", "pci", "devices")
        out = []
        for pci in list_dir(base):
            if (read_attr(os.path.join(base, pci, "vendor")) or "").lower() != NVIDIA:
                continue
            if (read_attr(os.path.join(base, pci, "class")) or "")[:6].lower() in GPU_CLASSES:
                out.append(pci)
        return out


def read(root="/sys", pcis=()):
    """The PCIe view of a host: ``{devices: {pci: function}, gpus: [function], iommu: {mode}}``. Each function as
    ``PcieTree.read_function`` reads it; a GPU's entry also has ``device_id`` (the sysfs ``device`` value,
    ``0x2330``); each of ``pcis``' entries has ``gpu_affinity`` (``nearest_gpu``). A PCI address sysfs does not have
    is left out."""
    tree = PcieTree(root)
    gpus = []
    for pci in tree.gpu_addresses():
        function = tree.read_function(pci)
        if function is not None:
            function["device_id"] = read_attr(os.path.join(root, "bus", "pci", "devices", pci, "device"))
            gpus.append(function)
    devices = {}
    for pci in pcis:
        function = tree.read_function(pci)
        if function is not None:
            function["gpu_affinity"] = nearest_gpu(function, gpus)
            devices[pci] = function
    return {"devices": devices, "gpus": gpus, "iommu": {"mode": iommu_mode(root)}}
