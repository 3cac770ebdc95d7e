# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the health role: what a host's expected state takes from the fabric (the hosts of its group)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_fabric import (
    VerifyInputError, every_host_references, host_references)


def _group_of(groups, name):
    return "infiniband" if name in (groups or {}).get("infiniband", []) else "roce"


def _fabric_entries(hostvars, hosts, groups, group=None):
    """{name: {group, rdma}} of the hosts with RDMA facts (of ``group`` when given): one hostvars lookup a host."""
    entries = {}
    for name in hosts or []:
        if group is not None and _group_of(groups, name) != group:
            continue
        try:
            rdma = ((hostvars[name] or {}).get("ansible_facts") or {}).get("rdma")
        except KeyError:
            rdma = None
        if isinstance(rdma, dict) and isinstance(rdma.get("devices"), dict):
            entries[name] = {"group": _group_of(groups, name), "rdma": rdma}
    return entries


def health_fabric_reference(hostvars, hosts, groups, host, spec=None):
    """``hostvars``, the play's hosts, ``groups`` and this host -> ``{rate_gbps: {compute, storage}, width: {compute,
    storage}, mtu: {netdev: MTU}}``: the most common values among the hosts of its fabric group (verify's rule,
    ``verify_fabric.host_references``); None when this host has no RDMA facts (the module then uses its own ports).
    For every host of a play, ``health_fabric_references`` once does the same work in O(hosts)."""
    entries = _fabric_entries(hostvars, hosts, groups, _group_of(groups, host))
    if host not in entries:
        return None
    try:
        return host_references(entries, host, spec)
    except VerifyInputError as exc:
        raise AnsibleFilterError("health_fabric_reference: %s" % exc)


def health_fabric_references(hostvars, hosts, groups, spec=None):
    """``health_fabric_reference`` of every host of the play at once: ``{host: reference}`` (a host without RDMA
    facts is left out). A host's task that reads every host's hostvars costs the play O(hosts^2) lookups; this is
    O(hosts), run once for the play."""
    try:
        return every_host_references(_fabric_entries(hostvars, hosts, groups), spec)
    except VerifyInputError as exc:
        raise AnsibleFilterError("health_fabric_references: %s" % exc)


class FilterModule:
    """hpcnet.rdma filters of the health role."""

    def filters(self):
        return {"health_fabric_reference": health_fabric_reference,
                "health_fabric_references": health_fabric_references}
