# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the firmware role: cards and their desired parameters from facts, reboot reasons, and the RoCE
settings an inbox stack can only keep in firmware."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware import firmware_select
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles

__metaclass__ = type


def _devices(rdma, fabrics):
    """The devices of ``ansible_facts.rdma`` with each port's role (``role:`` selectors): as ``rdma_facts`` wrote them,
    or, with ``fabrics`` (the host's inventory groups) for facts read without them, the default roles."""
    if fabrics is None or not isinstance(rdma, dict):
        return (rdma or {}).get("devices")
    return port_roles.planned(rdma, fabrics).get("devices")


def firmware_cards(rdma, fabrics=None):
    """``ansible_facts.rdma`` -> one entry per ConnectX card ``{pci, devices, functions, board_id, part_number,
    roles}``."""
    return firmware_select.cards(_devices(rdma, fabrics))


def firmware_targets(rdma, entries, infos=None, on_error="raise", fabrics=None):
    """``ansible_facts.rdma`` + ``firmware_mlxconfig`` -> ``[{pci, devices, params, entries}]`` per selected card."""
    try:
        return firmware_select.targets(_devices(rdma, fabrics), entries or [], infos or {})
    except firmware_select.SelectError as exc:
        if on_error == "return":
            return {"error": str(exc)}
        raise AnsibleFilterError(str(exc))


def firmware_reboot_reasons(results, rdma):
    """mlxconfig module results -> ``[{device, pci, card, parameter, from, to}]`` for every pending parameter."""
    return firmware_select.reboot_reasons(results, (rdma or {}).get("devices"))


def firmware_after_reboot(before, results):
    """rdma_reboot_reasons recorded before a reboot + fresh mlxconfig reads -> ``{current: [...], not_applied: [...]}``."""
    return firmware_select.after_reboot(before, results)


def firmware_unmatched(rdma, entries, infos=None, fabrics=None):
    """Selectors of ``firmware_mlxconfig`` that pick no card on this host, as ``firmware_mlxconfig[i].devices: X``."""
    return firmware_select.unmatched_selectors(_devices(rdma, fabrics), entries or [], infos or {})


def firmware_missing_params(targets, reads):
    """``firmware_targets`` + the read results -> ``["mlx5_2 (0000:8c:00.0) has no parameter LINK_TYPE_P1", ...]``."""
    return firmware_select.missing_params(targets, reads)


class FilterModule:
    """hpcnet.rdma firmware filters."""

    def filters(self):
        return {"firmware_cards": firmware_cards, "firmware_targets": firmware_targets,
                "firmware_reboot_reasons": firmware_reboot_reasons, "firmware_after_reboot": firmware_after_reboot,
                "firmware_unmatched": firmware_unmatched, "firmware_missing_params": firmware_missing_params}
