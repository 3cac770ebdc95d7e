# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the infiniband role: the host's plan (ports, opensm instances, partitions.conf, IPoIB netdevs) and the
link type handed to the firmware role."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import infiniband, opensm
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import card_port

__metaclass__ = type


def infiniband_plan(rdma, partitions=None, default_partition=None, ipoib=None, sm=False, sm_priority=0,
                    sm_devices=None, hosts=None, host_index=None, ipoib_addresses=None, link_type_devices=None,
                    keep_netdevs=None, fabrics=None):
    """``ansible_facts.rdma`` and the role's inputs -> ``{ports, link_type_ports, sm, partitions, partitions_conf,
    ipoib, errors}`` (module_utils/infiniband/infiniband.py); input errors are returned in ``errors``, never raised.
    ``fabrics``: the host's inventory groups, for the port roles of facts read without them."""
    if not isinstance(rdma, dict) or "devices" not in rdma:
        raise AnsibleFilterError("infiniband_plan: expected ansible_facts.rdma from hpcnet.rdma.rdma_facts")
    if ipoib_addresses is None:
        ipoib_addresses = infiniband.ipoib_hardware_addresses(rdma)
    return infiniband.plan(rdma, partitions if partitions is not None else [], default_partition, ipoib, sm,
                           sm_priority, sm_devices or [], hosts or {}, host_index,
                           infiniband.enhanced_ipoib_netdevs(ipoib_addresses),
                           link_type_devices or [], keep_netdevs or [], fabrics)


def infiniband_link_type_mlxconfig(rdma, ports=None, devices=None, keep_netdevs=None, fabrics=None):
    """Ports (``[{device, port}]``; or, when None, the Ethernet ports that ``devices`` selects, as the plan's
    ``link_type_ports``: compute ports only, the plan refuses the others) -> firmware_mlxconfig entries setting their
    card port to InfiniBand: ``LINK_TYPE_P<n>=IB`` with n = the PCI function of the device + 1 (function N-1 drives
    card port N)."""
    if ports is None:
        ports = infiniband.ethernet_ports(rdma or {}, devices or [], keep_netdevs or [], fabrics)
    out = []
    for port in ports or []:
        dev = ((rdma or {}).get("devices") or {}).get(port.get("device")) or {}
        port_number = card_port(dev.get("pci_address"))
        if port_number is None:
            raise AnsibleFilterError("infiniband_link_type_mlxconfig: %s has no PCI address in the RDMA facts, so "
                                     "its card port cannot be named" % port.get("device"))
        out.append({"devices": [port["device"]],
                    "params": {"LINK_TYPE_P%d" % port_number: "IB"}})
    return out


def infiniband_sminfo(text):
    """``sminfo`` output -> ``{lid, guid, activity_count, priority, state, state_name}`` or ``{error}``."""
    return infiniband.parse_sminfo(text)


def infiniband_partitions_change(old_text, new_text):
    """``none``, ``reload`` or ``restart``: what running opensm instances need to take a new partitions.conf."""
    return infiniband.partitions_change(old_text, new_text)


def infiniband_ports_waiting(rdma, ports):
    """The RDMA facts read now and the plan's ports -> the ports not yet ACTIVE with a LID or still without a P_Key
    of their ``member_pkeys``: ``[{port, state, lid, active, missing_pkeys}]``."""
    return infiniband.ports_waiting(rdma, ports)


def infiniband_waiting_message(waiting, timeout):
    """``infiniband_ports_waiting``'s ports still waited for after ``timeout`` seconds -> the role's failure message."""
    return infiniband.waiting_message(waiting, timeout)


def infiniband_sm_units(instances, distro_units, files):
    """The plan's ``sm``, the distribution's opensm units and the registered writes of the opensm files ->
    ``{daemon_reload, units: [{name, state, enabled, guid}]}`` (module_utils/infiniband/opensm.py)."""
    return opensm.units(instances, distro_units, files)


def infiniband_sm_actions(instances, files, started, partitions_old, partitions_new):
    """The plan's ``sm`` and the registered results of sm_instances.yml -> what each running opensm instance needs
    to take this run's configuration: ``[{guid, state: restarted|reloaded}]``."""
    return opensm.actions(instances, files, started, partitions_old, partitions_new)


class FilterModule:
    """hpcnet.rdma infiniband filters."""

    def filters(self):
        return {"infiniband_plan": infiniband_plan, "infiniband_link_type_mlxconfig": infiniband_link_type_mlxconfig,
                "infiniband_sminfo": infiniband_sminfo,
                "infiniband_partitions_change": infiniband_partitions_change,
                "infiniband_ports_waiting": infiniband_ports_waiting,
                "infiniband_waiting_message": infiniband_waiting_message,
                "infiniband_sm_units": infiniband_sm_units, "infiniband_sm_actions": infiniband_sm_actions}
