# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the roce role: its inputs as one profile for one host, with every problem, and the settings an inbox
stack keeps only in firmware as firmware_mlxconfig entries."""

from __future__ import absolute_import, division, print_function

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import roce_profile as _profile
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.roce_qos import firmware_params
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import card_port

__metaclass__ = type


def roce_profile(inputs, rdma):
    """The role's ``roce_*`` inputs + ``ansible_facts.rdma`` -> ``{netdevs, ethernet_netdevs, pfc, ecn, dscp2prio,
    errors}``."""
    return _profile.profile(inputs or {}, rdma or {})


def roce_firmware_mlxconfig(rdma, netdevs, ecn=None, cnp_dscp=None, cnp_priority=None, dcqcn=None):
    """``firmware_mlxconfig`` entries for the RoCE ports among ``netdevs`` whose stack has no OFED ``ecn/`` tree
    (inbox kernels): ECN priorities, CNP DSCP / priority and DCQCN parameters as ``_P<n>`` firmware parameters."""
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
        params = firmware_params(card_port(pci, info.get("rdma_port") or 1), want)
        if params:
            out.append({"devices": [device], "params": params})
    return out


class FilterModule:
    """hpcnet.rdma roce filters."""

    def filters(self):
        return {"roce_profile": roce_profile, "roce_firmware_mlxconfig": roce_firmware_mlxconfig}
