# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUDirect path in the facts: what ``rdma_facts`` adds with ``pcie: true`` to the facts read the one way
(``sysfs.facts.read``), and the view the checks take back from them (pure Python, no Ansible imports).

:func:`attach` reads the PCIe tree (``tree.read``) under the facts' sysfs root for the RDMA devices' PCI functions
(each device's ``pci_address``, the target of its sysfs ``device`` link) and writes:

* on every RDMA device: ``pcie_path`` (tree.py's hops, root port first), ``max_read_req``, ``max_payload``, ``ats``,
  ``iommu_group``, ``iommu_domain`` and ``gpu_affinity`` (``{gpu, distance}``, the nearest GPU; None without a GPU);
  all None for a device without a PCI function in sysfs (no ``device`` link, a virtual device);
* ``gpus``: ``[{pci, numa_node, device_id, pcie_path}]`` in PCI order (vendor 0x10de, display or 3D class);
* ``iommu``: ``{mode}`` (off, passthrough, translated; None unknown).

A value sysfs does not give (config space read without root, a truncated read) is None, never an error; a sysfs that
cannot be read at all gives every device the Nones, no GPU and an unknown IOMMU mode.

:func:`view` turns those facts back into ``tree.read``'s shape, the input of ``checks.host_findings``; None for facts
read without ``pcie: true``.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import tree
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import SysfsError

# what each RDMA device gets, from tree.read's function of its PCI address
DEVICE_KEYS = ("pcie_path", "max_read_req", "max_payload", "ats", "iommu_group", "iommu_domain", "gpu_affinity")
GPU_KEYS = ("pci", "numa_node", "device_id", "pcie_path")
EMPTY = {"devices": {}, "gpus": [], "iommu": {"mode": None}}


def attach(rdma, root=None):
    """Write the PCIe facts into ``rdma`` (``ansible_facts.rdma`` as ``sysfs.facts.read`` returns it; see the module's
    docstring), read under ``root`` (default: the facts' ``sysfs_root``). Returns ``rdma``."""
    devices = rdma.get("devices") or {}
    pcis = sorted(set(d["pci_address"] for d in devices.values() if d.get("pci_address")))
    try:
        pcie = tree.read(root or rdma.get("sysfs_root") or "/sys", pcis)
    except (OSError, SysfsError):
        pcie = EMPTY
    for dev in devices.values():
        function = pcie["devices"].get(dev.get("pci_address")) or {}
        for key in DEVICE_KEYS:
            dev[key] = function.get(key)
    rdma["gpus"] = [dict((k, gpu.get(k)) for k in GPU_KEYS) for gpu in pcie["gpus"]]
    rdma["iommu"] = dict(pcie["iommu"])
    return rdma


def view(rdma):
    """``{devices: {pci: function}, gpus, iommu}`` (tree.read's shape) from facts read with ``pcie: true``; None
    when they were read without it."""
    rdma = rdma or {}
    if not isinstance(rdma.get("iommu"), dict) or not isinstance(rdma.get("gpus"), list):
        return None
    devices = {}
    for dev in (rdma.get("devices") or {}).values():
        if dev.get("pci_address") and dev.get("pcie_path"):
            devices[dev["pci_address"]] = dict(dict((k, dev.get(k)) for k in DEVICE_KEYS), pci=dev["pci_address"])
    return {"devices": devices, "gpus": rdma["gpus"], "iommu": rdma["iommu"]}
