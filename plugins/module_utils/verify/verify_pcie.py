# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUDirect path inside each host, in verify (check ``pcie``; pure Python, no Ansible imports).

``host_pcie(fabric, host)`` reads the host's facts as ``rdma_facts`` writes them with ``pcie: true``
(``pcie/facts.view``) and returns ``{rails, findings}``, or None for facts read without it (the check is skipped):

- ``findings``: ``pcie/checks.host_findings`` over the host's compute ports (its rails, ``Fabric.ports``), with
  GPUDirect RDMA expected where the host's plan expects it (``expect.gdr``, as the ``gdr`` check): ``pcie_link``,
  ``pcie_acs``, ``iommu``, ``gpu_affinity``, ``pcie_max_read_req``;
- ``rails``: the report's ``pcie`` entry of the host, rail (a string) -> ``{device, gpu, distance, path, gpu_path}``:
  the rail's RDMA device, its nearest GPU and their distance (``nvidia-smi topo -m`` terms), the hops of the NIC's and
  of the GPU's paths from their root ports (``pci, type, speed, width, max_speed, max_width, acs_redirect``) with
  ``flags``, the checks that name a hop (``pcie/checks.hop_flags``). A rail whose device has no PCI function in sysfs
  has ``gpu``, ``distance`` null and an empty path.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import checks
from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import facts as pcie_facts

HOP_KEYS = ("pci", "type", "speed", "width", "max_speed", "max_width", "acs_redirect")


def _hops(path, flags):
    return [dict(dict((k, hop.get(k)) for k in HOP_KEYS), flags=flags.get(hop["pci"], [])) for hop in path or []]


def host_pcie(fabric, host):
    """See the module's docstring."""
    h = fabric.hosts[host]
    pcie = pcie_facts.view(h["rdma"])
    if pcie is None:
        return None
    devices = h["rdma"].get("devices") or {}
    rails = {}
    for ref in fabric.ports[host]:
        if ref.present:
            rails[ref.rail] = (ref.device, (devices.get(ref.device) or {}).get("pci_address"))
    findings = checks.host_findings(host, pcie, rails, gpudirect=h["gdr"])
    gpus = dict((g["pci"], g) for g in pcie["gpus"])
    out = {}
    for rail, (device, pci) in sorted(rails.items()):
        nic = pcie["devices"].get(pci)
        affinity = (nic or {}).get("gpu_affinity") or {}
        gpu = gpus.get(affinity.get("gpu"))
        flags = checks.hop_flags(nic, gpu, h["gdr"]) if nic else {}
        out[str(rail)] = {"device": device, "gpu": affinity.get("gpu"), "distance": affinity.get("distance"),
                          "path": _hops((nic or {}).get("pcie_path"), flags),
                          "gpu_path": _hops((gpu or {}).get("pcie_path"), flags)}
    return {"rails": out, "findings": findings}
