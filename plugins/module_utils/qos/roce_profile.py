# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roce role's inputs as one profile for one host: the ports it configures, the QoS it asks of each, and every
problem with them, each message naming the variable the user set (pure Python, no Ansible imports).

:func:`profile` is the roce role's one validation path (its preflight asserts that ``errors`` is empty). The rules
that the ``roce_qos`` module enforces on one netdev (ranges, CNP priority outside PFC, no link-level pause with PFC,
DCQCN ranges) are that module's own :func:`roce_qos.validate`, called with the role's variable names; the rules that
only make sense for the whole role (ToS carries the DSCP, the ports exist, the addresses) are here.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import roce_qos

__metaclass__ = type

# The module's settings under the role's variable names, for roce_qos.validate's messages.
ROLE_NAMES = {"pfc": "roce_pfc_priorities", "ecn": "roce_ecn_priorities", "cnp_dscp": "roce_cnp_dscp",
              "cnp_priority": "roce_cnp_priority", "roce_tos": "roce_tos", "dcqcn": "roce_dcqcn",
              "global_pause": "roce_global_pause", "trust": "roce_trust", "roce_mode": "roce_mode"}
NUMBERS = ("roce_dscp", "roce_priority", "roce_cnp_dscp", "roce_cnp_priority", "roce_tos", "roce_mtu")
MTU_RANGE = (576, 9978)  # mlx5's netdev MTU range
CIDR = re.compile(r"^(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])){3}/([0-9]|[12][0-9]|3[0-2])$")


def _number(value):
    """An int from an int or a decimal string (extra vars arrive as strings); anything else as it is."""
    if isinstance(value, str) and re.match(r"^-?[0-9]+$", value.strip()):
        return int(value)
    return value


def _list(value):
    """A list input as the argument spec takes it: a list, "3,4" (Ansible converts that form), or one value; a
    mapping is returned as it is (the caller refuses it)."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return value if isinstance(value, dict) else [value]


def _priorities(value):
    """The priority list, numbers de-duplicated and sorted; a list with anything else is returned as it is."""
    items = _list(value)
    if not isinstance(items, list):
        return items
    items = [_number(item) for item in items]
    if all(isinstance(item, int) and not isinstance(item, bool) for item in items):
        return sorted(set(items))
    return items


def _bool(value):
    """Ansible's truth for a boolean input given as a bool or a string (``"no"`` is false; the argument spec refuses
    what is neither)."""
    return boolean(value.strip() if isinstance(value, str) else value, strict=False)


def ethernet_netdevs(rdma, active_only=False):
    """Netdevs of the Ethernet ports of the host's RDMA devices (ACTIVE ones only with ``active_only``)."""
    out = []
    for dev in (rdma or {}).get("devices", {}).values():
        for port in dev.get("ports", {}).values():
            if port.get("link_layer") == "Ethernet" and port.get("netdev") and (not active_only or port.get("state") == "ACTIVE"):
                out.append(port["netdev"])
    return sorted(out)


def profile(inputs, rdma):
    """``{netdevs, ethernet_netdevs, pfc, ecn, dscp2prio, errors}`` from the role's ``roce_*`` inputs and the host's
    RDMA facts. ``netdevs`` are ``roce_interfaces`` or, when that is empty, every ACTIVE Ethernet port's netdev."""
    get = inputs.get
    errors = []
    num = dict((name, _number(get(name))) for name in NUMBERS)
    lists = {"roce_pfc_priorities": _priorities(get("roce_pfc_priorities", [])),
             "roce_ecn_priorities": _priorities(get("roce_ecn_priorities", []))}
    booleans = [n for n in NUMBERS if isinstance(num[n], bool)]
    booleans += [n for n, v in sorted(lists.items()) if isinstance(v, list) and any(isinstance(p, bool) for p in v)]
    errors += ["%s takes numbers, not true/false; got %s." % (n, str(get(n)).lower()) for n in booleans]
    pfc, ecn = lists["roce_pfc_priorities"], lists["roce_ecn_priorities"]
    lossless = _bool(get("roce_lossless", True))

    for name, low, high in (("roce_priority", 0, 7), ("roce_dscp", 0, 63)):
        if name not in booleans:
            errors += [e for e in [roce_qos.int_range_error(name, num[name], low, high)] if e]
    dcqcn = get("roce_dcqcn") or {}
    if not isinstance(dcqcn, dict):
        errors.append("roce_dcqcn takes DCQCN parameters by their OFED names, as a mapping; got %r." % (dcqcn,))
        dcqcn = {}
    # the module's own rules, on the settings that are not already refused as true/false
    desired = {"pfc": pfc, "ecn": ecn, "dcqcn": dcqcn, "global_pause": _bool(get("roce_global_pause", False)),
               "cnp_dscp": num["roce_cnp_dscp"], "cnp_priority": num["roce_cnp_priority"], "roce_tos": num["roce_tos"]}
    desired = dict((key, value) for key, value in desired.items() if ROLE_NAMES[key] not in booleans)
    errors += roce_qos.validate(desired, names=ROLE_NAMES)
    if lossless and pfc == []:
        errors.append("roce_pfc_priorities is empty: a lossless RoCE profile needs PFC on at least one priority "
                      "(NVIDIA's: roce_priority 3). To run RoCE without PFC (ECN and DCQCN only), set roce_lossless: false.")
    if not lossless and pfc:
        errors.append("roce_lossless is false (RoCE without PFC), but roce_pfc_priorities enables %s; set roce_pfc_priorities: [] "
                      "with it, or roce_lossless: true." % (pfc,))

    in_range = [(n, low, high) for n, low, high in (("roce_dscp", 0, 63), ("roce_cnp_dscp", 0, 63), ("roce_tos", 0, 255))
                if isinstance(num[n], int) and not isinstance(num[n], bool) and low <= num[n] <= high]
    if len(in_range) == 3:  # the relations between them, once each is in its range
        dscp, tos = num["roce_dscp"], num["roce_tos"]
        if num["roce_cnp_dscp"] == dscp:
            errors.append("roce_cnp_dscp %s is roce_dscp: CNPs and RoCE data need their own DSCPs (NVIDIA: data 26, CNP 48)." % dscp)
        if tos % 4 not in (1, 2):
            errors.append("roce_tos %s has ECN bits %s (%s); use ECT(0) (DSCP << 2 | 2, %s) so that switches can mark congestion."
                          % (tos, tos % 4, "Not-ECT" if tos % 4 == 0 else "CE, congestion experienced", dscp * 4 + 2))
        if tos // 4 != dscp:
            errors.append("roce_tos %s carries DSCP %s (ToS >> 2), not roce_dscp %s; use %s (DSCP << 2 | ECT(0))."
                          % (tos, tos // 4, dscp, dscp * 4 + 2))
    mtu = num["roce_mtu"]
    if "roce_mtu" not in booleans and not (isinstance(mtu, int) and MTU_RANGE[0] <= mtu <= MTU_RANGE[1]):
        errors.append("roce_mtu must be 576-9978 bytes (the mlx5 range; 9000 gives RDMA MTU 4096); got %s." % (mtu,))

    ethernet = ethernet_netdevs(rdma)
    wanted = _list(get("roce_interfaces") or [])
    if not isinstance(wanted, list) or not all(isinstance(n, str) and n for n in wanted):
        errors.append("roce_interfaces takes netdev names (a list of strings such as enp12s0np0); got %r." % (get("roce_interfaces"),))
        wanted = None
    netdevs = (sorted(set(wanted), key=wanted.index) if wanted else ethernet_netdevs(rdma, active_only=True)) if wanted is not None else []
    unknown = [n for n in netdevs if n not in ethernet]
    if unknown:
        errors.append("roce_interfaces %s are not Ethernet ports of an RDMA device; those here: %s."
                      % (unknown, ", ".join(ethernet) or "none"))
    addresses = get("roce_addresses") or {}
    if not isinstance(addresses, dict):
        errors.append("roce_addresses takes an IPv4 address/prefix per netdev, as a mapping ({enp12s0np0: 10.0.1.11/24}); got %r." % (addresses,))
        addresses = {}
    unconfigured = [n for n in addresses if n not in netdevs]
    if unconfigured:
        errors.append("roce_addresses names %s, which roce_interfaces does not configure (%s)." % (unconfigured, ", ".join(netdevs)))
    not_cidr = [a for a in addresses.values() if not CIDR.fullmatch(str(a))]
    if not_cidr:
        errors.append("roce_addresses takes an IPv4 address/prefix per netdev (10.0.1.11/24); got %s." % (not_cidr,))
    if not netdevs and wanted is not None:
        errors.append("No ACTIVE Ethernet port of an RDMA device on this host; set roce_interfaces.")

    dscp2prio = {}
    if not errors:
        # roce_dscp lands on roce_priority, roce_cnp_dscp on roce_cnp_priority
        dscp2prio = {num["roce_dscp"]: num["roce_priority"], num["roce_cnp_dscp"]: num["roce_cnp_priority"]}
    return {"netdevs": netdevs, "ethernet_netdevs": ethernet, "pfc": pfc if isinstance(pfc, list) else [],
            "ecn": ecn if isinstance(ecn, list) else [], "dscp2prio": dscp2prio, "errors": errors}
