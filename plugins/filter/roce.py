# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the roce role: its inputs as one profile for one host (its ports by role), with every problem, and what
it asks of the firmware as firmware_mlxconfig entries: the settings an inbox stack keeps only in firmware, and the link
type of the compute ports that are InfiniBand."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import roce_profile as _profile
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.roce_qos import firmware_params
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import card_port

__metaclass__ = type


def roce_profile(inputs, rdma, fabrics=None):
    """The role's ``roce_*`` inputs + ``ansible_facts.rdma`` (+ the host's inventory groups, for facts read without
    port roles) -> ``{netdevs, compute_netdevs, storage_netdevs, ethernet_netdevs, pfc, ecn, dscp2prio, qos,
    link_type_ports, errors}``."""
    return _profile.profile(inputs or {}, rdma or {}, fabrics)


def roce_firmware_mlxconfig(rdma, netdevs, ecn=None, cnp_dscp=None, cnp_priority=None, dcqcn=None, qos=None,
                            link_type_ports=None):
    """``firmware_mlxconfig`` entries for the RoCE ports among ``netdevs`` whose stack has no OFED ``ecn/`` tree
    (inbox kernels): ECN priorities, CNP DSCP / priority and DCQCN parameters as ``_P<n>`` firmware parameters. ``qos``
    (the profile's ``{netdev: {ecn, cnp_dscp, cnp_priority, dcqcn}}``) gives each netdev its own; then one entry
    ``LINK_TYPE_P<n>=ETH`` per port of ``link_type_ports`` (``[{device, port}]`` or ``dev:port``: compute ports that
    are InfiniBand, to become Ethernet)."""
    want = {"ecn": ecn, "cnp_dscp": cnp_dscp, "cnp_priority": cnp_priority, "dcqcn": dcqcn or None}
    out = []
    facts_netdevs = (rdma or {}).get("netdevs") or {}
    devices = (rdma or {}).get("devices") or {}
    for netdev in netdevs or []:
        info = facts_netdevs.get(netdev) or {}
        device = info.get("rdma_device")
        if not device or info.get("ecn") is not None:
            continue
        pci = (devices.get(device) or {}).get("pci_address") or ""
        mine = dict(want)
        if qos and netdev in qos:
            own = qos[netdev]
            mine = {"ecn": own.get("ecn"), "cnp_dscp": own.get("cnp_dscp"), "cnp_priority": own.get("cnp_priority"),
                    "dcqcn": own.get("dcqcn") or None}
        params = firmware_params(card_port(pci, info.get("rdma_port") or 1), mine)
        if params:
            out.append({"devices": [device], "params": params})
    for port in link_type_ports or []:
        name = port.rsplit(":", 1)[0] if isinstance(port, str) else port.get("device")
        pci = (devices.get(name) or {}).get("pci_address")
        card = card_port(pci)
        if card is None:
            raise AnsibleFilterError("roce_firmware_mlxconfig: %s has no PCI address in the RDMA facts, so its card "
                                     "port cannot be named" % name)
        out.append({"devices": [name], "params": {"LINK_TYPE_P%d" % card: "ETH"}})
    return out


def roce_declared_qos(prof, firmware_settings="apply", backend="auto"):
    """The profile (``roce_profile``) as ``{netdev: roce_qos parameters}``: what the health check compares with."""
    return _profile.declared_qos(prof or {}, firmware_settings, backend)


def roce_qos_netdevs(prof, firmware_settings="apply", probe=False):
    """The profile (``roce_profile``) as the ``netdevs`` of one ``roce_qos`` call: ``[{netdev, settings...}]``."""
    return _profile.qos_netdevs(prof or {}, firmware_settings, probe)


class FilterModule:
    """hpcnet.rdma roce filters."""

    def filters(self):
        return {"roce_profile": roce_profile, "roce_firmware_mlxconfig": roce_firmware_mlxconfig,
                "roce_declared_qos": roce_declared_qos, "roce_qos_netdevs": roce_qos_netdevs}
