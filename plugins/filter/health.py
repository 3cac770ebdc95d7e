# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the health role: what a host's expected state takes from the fabric (the hosts of its group)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_fabric import VerifyInputError, host_references


def health_fabric_reference(hostvars, hosts, groups, host, spec=None):
    """``hostvars``, the play's hosts, ``groups`` and this host -> ``{rate_gbps: {compute, storage}, width: {compute,
    storage}, mtu: {netdev: MTU}}``: the most common values among the hosts of its fabric group (verify's rule,
    ``verify_fabric.host_references``); None when this host has no RDMA facts (the module then uses its own ports)."""
    def group_of(name):
        return "infiniband" if name in (groups or {}).get("infiniband", []) else "roce"

    entries = {}
    for name in hosts or []:
        try:
            rdma = ((hostvars[name] or {}).get("ansible_facts") or {}).get("rdma")
        except KeyError:
            rdma = None
        if isinstance(rdma, dict) and isinstance(rdma.get("devices"), dict) and group_of(name) == group_of(host):
            entries[name] = {"group": group_of(name), "rdma": rdma}
    if host not in entries:
        return None
    try:
        return host_references(entries, host, spec)
    except VerifyInputError as exc:
        raise AnsibleFilterError("health_fabric_reference: %s" % exc)


class FilterModule:
    """hpcnet.rdma filters of the health role."""

    def filters(self):
        return {"health_fabric_reference": health_fabric_reference}
