# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks of the GPUDirect path inside a host, on what tree.py reads (pure Python, no Ansible imports).

Each returns a list of findings in verify's shape (``host, severity, check, expected, found, cause, fix`` plus
``device`` and ``rail`` where they apply). Plain dicts: ``pcie/`` may not import ``verify/`` (verify will import this
package), so ``finding`` here builds the same keys. Each finding names the bridge by its PCI address.

* ``pcie_link`` (error): each link of a path (a downstream-facing port and the function below it, tree.upstream_facing)
  runs at the lower of its two ends' maximum speed and width. A Gen5 NIC in a Gen4 slot is no finding; a ConnectX-7
  at 16 GT/s x8 under a 32 GT/s x16 port is.
* ``pcie_acs`` (error, with GPUDirect expected): no ACS P2P Request or Completion Redirect on the bridges between a
  GPU and its rail's NIC (tree.bridges_between), unless the NIC has ATS enabled and the bridge ACS Direct Translated
  P2P (DirectTrans): the NIC's translated requests then go straight to the GPU. The fix is the command NVIDIA's NCCL
  troubleshooting guide gives (``setpci -s <bridge> ECAP_ACS+0x6.w=0000``), which lasts until the next boot.
* ``iommu`` (warning): ``translated`` costs GPUDirect throughput on most platforms; passthrough or off is what the
  vendors document. ``exceptions``: globs on the platform's name (DMI product name) where translated is documented.
* ``gpu_affinity`` (warning): a compute rail whose nearest GPU is NODE or SYS (the NIC reaches every GPU only across
  the CPU), naming both.
* ``pcie_max_read_req`` (warning): Max_Read_Request_Size below 4096 bytes on a compute NIC.

A value that cannot be read (None: config space read without root, an old kernel) gives no finding.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

import fnmatch

from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import config_space
from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import tree

CHECKS = ("pcie_link", "pcie_acs", "iommu", "gpu_affinity", "pcie_max_read_req")
MIN_READ_REQ = 4096
FAR = ("NODE", "SYS")
NCCL_ACS_DOC = "NVIDIA's NCCL troubleshooting guide, 'PCI Access Control Services (ACS)'"


def finding(host, severity, check, expected, found, cause, fix, device=None, rail=None):
    """One finding with verify's keys (``device``/``rail`` only when they apply)."""
    out = {"host": host, "severity": severity, "check": check, "expected": expected, "found": found,
           "cause": cause, "fix": fix}
    if device is not None:
        out["device"] = device
    if rail is not None:
        out["rail"] = rail
    return out


def _speed(value):
    return "%gGT/s" % value


def downgraded_links(path):
    """``[(port, below, values)]``: the links of ``path`` (hops root port first) trained below what both ends can do
    (``values``: the ports' and the function's maximum speed and width, the trained speed and width)."""
    out = []
    for index in tree.upstream_facing(path):
        port, below = path[index - 1], path[index]
        values = (port.get("max_speed"), below.get("max_speed"), port.get("max_width"), below.get("max_width"),
                  below.get("speed"), below.get("width"))
        if None in values:
            continue
        if below["speed"] < min(values[0], values[1]) or below["width"] < min(values[2], values[3]):
            out.append((port, below, values))
    return out


def redirecting_bridges(nic, gpu):
    """The bridges between the NIC (its read function) and its GPU whose ACS redirects peer-to-peer requests
    (ReqRedir or CmpltRedir), those with DirectTrans under a NIC with ATS enabled aside."""
    return [bridge for bridge in tree.bridges_between(nic["pcie_path"], gpu["pcie_path"])
            if bridge.get("acs_redirect") and not (bridge["acs"].get("DirectTrans") and nic.get("ats"))]


def hop_flags(nic, gpu=None, gpudirect=True):
    """``{pci: [check]}``: the hops of the NIC's and the GPU's paths a finding names (``pcie_link``: the function
    below a link trained down; ``pcie_acs``: a redirecting bridge between them, with GPUDirect expected)."""
    out = {}
    for path in (nic["pcie_path"], gpu["pcie_path"] if gpu else []):
        for _port, below, _values in downgraded_links(path):
            out.setdefault(below["pci"], []).append("pcie_link")
    if gpu and gpudirect:
        for bridge in redirecting_bridges(nic, gpu):
            out.setdefault(bridge["pci"], []).append("pcie_acs")
    return out


def pcie_link(host, device, path, rail=None):
    """Findings for the links of ``path`` (hops root port first) trained below what both ends can do."""
    out = []
    for port, below, values in downgraded_links(path):
        want_speed, want_width = min(values[0], values[1]), min(values[2], values[3])
        out.append(finding(
            host, "error", "pcie_link", device=device, rail=rail,
            expected="%s x%d on the link %s -> %s (the lower of its ends' maxima: %s x%d and %s x%d)" % (
                _speed(want_speed), want_width, port["pci"], below["pci"], _speed(values[0]), values[2],
                _speed(values[1]), values[3]),
            found="%s x%d" % (_speed(below["speed"]), below["width"]),
            cause="the PCIe link between %s and %s trained below what both ends support (a card not seated, a bad "
                  "riser or slot, the slot's speed or bifurcation set low in the BIOS): the device gets a fraction "
                  "of its bandwidth while its RDMA port still reports full rate" % (port["pci"], below["pci"]),
            fix="compare `lspci -vvv -s %s` LnkCap with LnkSta; check the slot's PCIe speed and bifurcation in the "
                "BIOS, reseat the card (and its riser or cable), then reboot" % below["pci"]))
    return out


def _acs_text(acs):
    return " ".join("%s%s" % (name, "+" if acs.get(name) else "-") for name, _mask in config_space.ACS_BITS)


def pcie_acs(host, device, nic, gpu, rail=None):
    """Findings for ACS redirect on the bridges between the NIC (``nic``: its read function) and its GPU (``gpu``)."""
    out = []
    for bridge in redirecting_bridges(nic, gpu):
        acs = bridge["acs"]
        out.append(finding(
            host, "error", "pcie_acs", device=device, rail=rail,
            expected="ACS ReqRedir- CmpltRedir- on %s (between GPU %s and %s), for GPUDirect RDMA" % (
                bridge["pci"], gpu["pci"], nic["pci"]),
            found="ACSCtl on %s: %s" % (bridge["pci"], _acs_text(acs)),
            cause="ACS redirect on bridge %s sends the NIC's peer-to-peer requests to GPU %s up to the root complex "
                  "(a BIOS or kernel default with the IOMMU on): GPUDirect RDMA bandwidth collapses or NCCL hangs"
                  % (bridge["pci"], gpu["pci"]),
            fix="setpci -s %s ECAP_ACS+0x6.w=0000 (as root; %s), again after every boot; or turn ACS or "
                "IO virtualization off in the BIOS" % (bridge["pci"], NCCL_ACS_DOC)))
    return out


def iommu(host, mode, platform=None, exceptions=()):
    """A finding when the IOMMU translates (``mode`` translated), unless ``platform`` matches an exception glob."""
    if mode != "translated":
        return []
    if platform and any(fnmatch.fnmatch(platform.lower(), str(glob).lower()) for glob in exceptions or ()):
        return []
    return [finding(
        host, "warning", "iommu", expected="IOMMU passthrough or off",
        found="translated (IOMMU groups with DMA domains)",
        cause="the IOMMU translates every DMA address of the GPUs and NICs: GPUDirect RDMA throughput drops and "
              "ACS redirect is turned on by the kernel",
        fix="boot with iommu=pt (AMD, and Intel with intel_iommu=on iommu=pt) or turn the IOMMU off in the BIOS "
            "when no VM or VFIO user needs it; a platform that documents translated mode goes in the exceptions")]


def gpu_affinity(host, device, affinity, rail=None):
    """A finding when the rail's nearest GPU (``{gpu, distance}``) is NODE or SYS away."""
    if not affinity or affinity.get("distance") not in FAR:
        return []
    return [finding(
        host, "warning", "gpu_affinity", device=device, rail=rail,
        expected="a GPU at PIX or PXB (under the same PCIe switch as %s)" % device,
        found="nearest GPU %s at %s" % (affinity["gpu"], affinity["distance"]),
        cause="%s reaches every GPU only across the CPU (%s: %s): GPUDirect RDMA through it is slower than host "
              "memory" % (device, affinity["distance"], "across host bridges" if affinity["distance"] == "NODE"
                          else "across NUMA nodes"),
        fix="move the card to a slot under a GPU's PCIe switch (the platform's slot map), or make the rail's port "
            "one that sits next to a GPU (rdma_port_roles)")]


def pcie_max_read_req(host, device, pci, max_read_req, rail=None):
    """A finding when a compute NIC's Max_Read_Request_Size is below 4096 bytes."""
    if max_read_req is None or max_read_req >= MIN_READ_REQ:
        return []
    return [finding(
        host, "warning", "pcie_max_read_req", device=device, rail=rail,
        expected="MaxReadReq %d bytes on %s" % (MIN_READ_REQ, pci), found="MaxReadReq %d bytes" % max_read_req,
        cause="%s reads host and GPU memory in requests of %d bytes: more requests per transfer, less bandwidth"
              % (pci, max_read_req),
        fix="setpci -s %s CAP_EXP+0x8.w=5000:7000 (Device Control's Max_Read_Request_Size to 4096; as root, until "
            "the next boot)" % pci)]


def host_findings(host, pcie, rails, gpudirect=True, platform=None, iommu_exceptions=()):
    """All the checks for one host. ``pcie``: tree.read's result; ``rails``: ``{rail: (device name, pci)}`` of the
    compute ports. The GPU of a rail is its nearest."""
    out = []
    gpus = dict((g["pci"], g) for g in pcie.get("gpus") or [])
    for gpu in pcie.get("gpus") or []:
        out += pcie_link(host, gpu["pci"], gpu["pcie_path"])
    for rail in sorted(rails):
        name, pci = rails[rail]
        nic = (pcie.get("devices") or {}).get(pci)
        if nic is None:
            continue
        out += pcie_link(host, name, nic["pcie_path"], rail=rail)
        affinity = nic.get("gpu_affinity")
        if gpudirect and affinity and affinity["gpu"] in gpus:
            out += pcie_acs(host, name, nic, gpus[affinity["gpu"]], rail=rail)
        out += gpu_affinity(host, name, affinity, rail=rail)
        out += pcie_max_read_req(host, name, pci, nic.get("max_read_req"), rail=rail)
    if gpudirect:
        out += iommu(host, (pcie.get("iommu") or {}).get("mode"), platform, iommu_exceptions)
    return out
