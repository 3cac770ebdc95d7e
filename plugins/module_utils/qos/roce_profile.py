# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roce role's inputs as one profile for one host: the ports it configures, the QoS it asks of each, and every
problem with them, each message naming the variable the user set (pure Python, no Ansible imports).

:func:`profile` is the roce role's one validation path (its preflight asserts that ``errors`` is empty). The rules
that the ``roce_qos`` module enforces on one netdev (ranges, CNP priority outside PFC, no link-level pause with PFC,
DCQCN ranges) are that module's own :func:`roce_qos.validate`, called with the role's variable names; the rules that
only make sense for the whole role (ToS carries the DSCP, the ports exist, the addresses) are here.

Ports by role (``sysfs/port_roles.py``, read through ``port_roles.planned``):

* the compute profile (``roce_dscp``, ``roce_priority``, ...) goes to the ACTIVE Ethernet **compute** ports, in rail
  order; only they are addressed (``roce_addresses``, ``roce_mtu``): they are NCCL's rails;
* the ACTIVE Ethernet **storage** ports get a profile only when ``roce_storage_qos`` asks for one: ``none`` (the
  default: they are not touched), ``compute`` (the compute profile) or a map of the settings that differ from the
  compute profile (``dscp``, ``priority``, ``pfc_priorities``, ...). Their addresses and MTU stay the site's;
* **management** and **unused** ports are never touched;
* ``roce_interfaces`` names the netdevs to configure instead: each gets the profile of its role, and naming a
  management or unused port, or a storage port while ``roce_storage_qos`` is ``none``, is refused;
* compute ports that are InfiniBand (``ports_by_role.link_type_changes`` on a host whose compute link layer is
  Ethernet) are the ``link_type_ports`` the role hands to the firmware as ``LINK_TYPE_P<n>=ETH``.
"""

from __future__ import absolute_import, division, print_function

import json
import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import roce_qos
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles

__metaclass__ = type

# The module's settings under the role's variable names, for roce_qos.validate's messages.
ROLE_NAMES = {"pfc": "roce_pfc_priorities", "ecn": "roce_ecn_priorities", "cnp_dscp": "roce_cnp_dscp",
              "cnp_priority": "roce_cnp_priority", "roce_tos": "roce_tos", "dcqcn": "roce_dcqcn",
              "global_pause": "roce_global_pause", "trust": "roce_trust", "roce_mode": "roce_mode"}
NUMBERS = ("roce_dscp", "roce_priority", "roce_cnp_dscp", "roce_cnp_priority", "roce_tos")
MTU_RANGE = (576, 9978)  # mlx5's netdev MTU range
CIDR = re.compile(r"^(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])){3}/([0-9]|[12][0-9]|3[0-2])$")
STORAGE = "roce_storage_qos"
# roce_storage_qos's keys and the compute input each overrides
STORAGE_KEYS = {"dscp": "roce_dscp", "priority": "roce_priority", "pfc_priorities": "roce_pfc_priorities",
                "ecn_priorities": "roce_ecn_priorities", "cnp_dscp": "roce_cnp_dscp", "cnp_priority": "roce_cnp_priority",
                "tos": "roce_tos", "dcqcn": "roce_dcqcn", "lossless": "roce_lossless", "global_pause": "roce_global_pause",
                "trust": "roce_trust", "mode": "roce_mode"}
STORAGE_CHOICES = ("none", "compute")
DEFAULT_FABRICS = ("roce",)


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
    try:
        return boolean(value.strip() if isinstance(value, str) else value, strict=False)
    except TypeError:
        return bool(value)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def ethernet_netdevs(rdma, active_only=False):
    """Netdevs of the Ethernet ports of the host's RDMA devices (ACTIVE ones only with ``active_only``)."""
    out = []
    for dev in (rdma or {}).get("devices", {}).values():
        for port in dev.get("ports", {}).values():
            if port.get("link_layer") == "Ethernet" and port.get("netdev") and (not active_only or port.get("state") == "ACTIVE"):
                out.append(port["netdev"])
    return sorted(out)


def qos_settings(get, name=lambda var: var):
    """``(settings, errors)`` of one QoS profile: ``get(var)`` gives the value of a compute input (``roce_dscp``,
    ...), ``name(var)`` the name a message gives it. ``settings``: ``{trust, pfc, ecn, dscp2prio, cnp_dscp,
    cnp_priority, dcqcn, tos, mode, global_pause}`` as the ``roce_qos`` module takes them (``dscp2prio`` empty when
    there are errors)."""
    errors = []
    num = dict((var, _number(get(var))) for var in NUMBERS)
    lists = {"roce_pfc_priorities": _priorities(get("roce_pfc_priorities")),
             "roce_ecn_priorities": _priorities(get("roce_ecn_priorities"))}
    booleans = [n for n in NUMBERS if isinstance(num[n], bool)]
    booleans += [n for n, v in sorted(lists.items()) if isinstance(v, list) and any(isinstance(p, bool) for p in v)]
    errors += ["%s takes numbers, not true/false; got %s." % (name(n), str(get(n)).lower()) for n in booleans]
    pfc, ecn = lists["roce_pfc_priorities"], lists["roce_ecn_priorities"]
    lossless = _bool(get("roce_lossless"))

    for var, low, high in (("roce_priority", 0, 7), ("roce_dscp", 0, 63)):
        if var not in booleans:
            errors += [e for e in [roce_qos.int_range_error(name(var), num[var], low, high)] if e]
    dcqcn = get("roce_dcqcn") or {}
    if not isinstance(dcqcn, dict):
        errors.append("%s takes DCQCN parameters by their OFED names, as a mapping; got %r." % (name("roce_dcqcn"), dcqcn))
        dcqcn = {}
    # the module's own rules, on the settings that are not already refused as true/false
    desired = {"pfc": pfc, "ecn": ecn, "dcqcn": dcqcn, "global_pause": _bool(get("roce_global_pause")),
               "cnp_dscp": num["roce_cnp_dscp"], "cnp_priority": num["roce_cnp_priority"], "roce_tos": num["roce_tos"],
               "trust": get("roce_trust"), "roce_mode": get("roce_mode")}
    desired = dict((key, value) for key, value in desired.items() if ROLE_NAMES[key] not in booleans)
    errors += roce_qos.validate(desired, names=dict((key, name(var)) for key, var in ROLE_NAMES.items()))
    if lossless and pfc == []:
        errors.append("%s is empty: a lossless RoCE profile needs PFC on at least one priority (NVIDIA's: roce_priority "
                      "3). To run RoCE without PFC (ECN and DCQCN only), set %s: false."
                      % (name("roce_pfc_priorities"), name("roce_lossless")))
    if not lossless and pfc:
        errors.append("%s is false (RoCE without PFC), but %s enables %s; set %s: [] with it, or %s: true."
                      % (name("roce_lossless"), name("roce_pfc_priorities"), pfc, name("roce_pfc_priorities"),
                         name("roce_lossless")))

    in_range = [n for n, low, high in (("roce_dscp", 0, 63), ("roce_cnp_dscp", 0, 63), ("roce_tos", 0, 255))
                if _is_int(num[n]) and low <= num[n] <= high]
    if len(in_range) == 3:  # the relations between them, once each is in its range
        dscp, tos = num["roce_dscp"], num["roce_tos"]
        if num["roce_cnp_dscp"] == dscp:
            errors.append("%s %s is %s: CNPs and RoCE data need their own DSCPs (NVIDIA: data 26, CNP 48)."
                          % (name("roce_cnp_dscp"), dscp, name("roce_dscp")))
        if tos % 4 not in (1, 2):
            errors.append("%s %s has ECN bits %s (%s); use ECT(0) (DSCP << 2 | 2, %s) so that switches can mark congestion."
                          % (name("roce_tos"), tos, tos % 4, "Not-ECT" if tos % 4 == 0 else "CE, congestion experienced",
                             dscp * 4 + 2))
        if tos // 4 != dscp:
            errors.append("%s %s carries DSCP %s (ToS >> 2), not %s %s; use %s (DSCP << 2 | ECT(0))."
                          % (name("roce_tos"), tos, tos // 4, name("roce_dscp"), dscp, dscp * 4 + 2))
    settings = {"trust": get("roce_trust"), "pfc": pfc if isinstance(pfc, list) else [],
                "ecn": ecn if isinstance(ecn, list) else [], "dscp2prio": {}, "cnp_dscp": num["roce_cnp_dscp"],
                "cnp_priority": num["roce_cnp_priority"], "dcqcn": dcqcn, "tos": num["roce_tos"],
                "mode": get("roce_mode"), "global_pause": desired.get("global_pause", False)}
    if not errors:
        # roce_dscp lands on roce_priority, roce_cnp_dscp on roce_cnp_priority
        settings["dscp2prio"] = {num["roce_dscp"]: num["roce_priority"], num["roce_cnp_dscp"]: num["roce_cnp_priority"]}
    return settings, errors


def _compute_get(inputs):
    defaults = {"roce_pfc_priorities": [], "roce_ecn_priorities": [], "roce_lossless": True, "roce_global_pause": False,
                "roce_trust": "dscp", "roce_mode": "v2"}
    return lambda var: inputs.get(var, defaults.get(var))


def storage_choice(value):
    """``(choice, overrides, errors)`` of ``roce_storage_qos``: choice ``none``, ``compute`` or ``own`` (a map of the
    settings that differ from the compute profile, ``overrides``)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
        return "none", {}, []
    if isinstance(value, str) and value.strip().lower() == "compute":
        return "compute", {}, []
    if not isinstance(value, dict):
        return "none", {}, ["%s takes none (the default: storage ports are not made lossless), compute (the compute "
                            "ports' profile) or a map of the settings of their own profile that differ from the compute "
                            "one (%s); got %s." % (STORAGE, ", ".join(sorted(STORAGE_KEYS)), json.dumps(value, default=str))]
    unknown = sorted(str(key) for key in value if key not in STORAGE_KEYS)
    if unknown:
        return "none", {}, ["%s has no setting %s; allowed: %s (each overrides the compute profile's roce_<setting>, "
                            "roce_mode for mode)." % (STORAGE, ", ".join(unknown), ", ".join(sorted(STORAGE_KEYS)))]
    # the argument spec checks the compute inputs' types; the map's values get the same rules here
    errors = ["%s.%s is null: leave it out to take the compute profile's %s." % (STORAGE, key, STORAGE_KEYS[key])
              for key in sorted(value) if value[key] is None]
    errors += ["%s.%s must be true or false, got %s." % (STORAGE, key, json.dumps(value[key], default=str))
               for key in ("lossless", "global_pause") if value.get(key) is not None and not _is_boolean(value[key])]
    if errors:
        return "none", {}, errors
    return "own", dict(value), []


def _is_boolean(value):
    """True for what Ansible's argument spec takes as a boolean (``yes``, ``off``, ``1``...)."""
    try:
        boolean(value.strip() if isinstance(value, str) else value, strict=True)
    except TypeError:
        return False
    return True


def storage_inputs(inputs, overrides):
    """``(get, name)`` of the storage profile: the compute inputs with ``overrides`` (``roce_storage_qos``'s keys)
    and what follows from them as it follows for the compute inputs (``priority`` gives ``pfc_priorities`` and
    ``ecn_priorities`` ``[priority]``, ``lossless: false`` gives ``pfc_priorities: []``, ``dscp`` gives ``tos`` DSCP
    << 2 | ECT(0)), unless given too. A message names ``roce_storage_qos.<key>`` for what the map sets or implies,
    the compute variable for what the storage profile takes from it."""
    compute = _compute_get(inputs)
    values = dict((var, compute(var)) for var in set(STORAGE_KEYS.values()))
    own = dict((STORAGE_KEYS[key], key) for key in overrides)
    for key, value in overrides.items():
        values[STORAGE_KEYS[key]] = value
    implied = {}
    if "roce_pfc_priorities" not in own:
        if not _bool(values["roce_lossless"]):
            values["roce_pfc_priorities"], implied["roce_pfc_priorities"] = [], "pfc_priorities"
        elif "roce_priority" in own:
            values["roce_pfc_priorities"], implied["roce_pfc_priorities"] = [values["roce_priority"]], "pfc_priorities"
    if "roce_ecn_priorities" not in own and "roce_priority" in own:
        values["roce_ecn_priorities"], implied["roce_ecn_priorities"] = [values["roce_priority"]], "ecn_priorities"
    dscp = _number(values["roce_dscp"])
    if "roce_tos" not in own and "roce_dscp" in own and _is_int(dscp) and 0 <= dscp <= 63:
        values["roce_tos"], implied["roce_tos"] = dscp * 4 + 2, "tos"
    own.update(implied)
    return values.get, lambda var: ("%s.%s" % (STORAGE, own[var])) if var in own else var


def _views_by_role(rdma):
    """``(views in PCI order with their role, ports_by_role)`` of the host's ports."""
    by_port = {}
    for name, dev in (rdma.get("devices") or {}).items():
        for num, port in (dev.get("ports") or {}).items():
            by_port["%s:%s" % (name, num)] = port
    views = port_roles.port_views(rdma)
    for view in views:
        view["role"] = by_port.get(view["id"], {}).get("role") or "compute"
    return views, rdma.get("ports_by_role") or {}


def _in_order(views, ids):
    by_id = dict((view["id"], view) for view in views)
    return [by_id[pid] for pid in ids if pid in by_id]


def _wanted_netdevs(value):
    wanted = _list(value or [])
    if not isinstance(wanted, list) or not all(isinstance(n, str) and n for n in wanted):
        return None
    return sorted(set(wanted), key=wanted.index)


def profile(inputs, rdma, fabrics=None):  # noqa: C901 (one pass over every input, in the order the user reads them)
    """The role's ``roce_*`` inputs and the host's RDMA facts (``fabrics``: its inventory groups, for facts read
    without port roles; default ``roce``) -> ``{netdevs, compute_netdevs, storage_netdevs, ethernet_netdevs, pfc, ecn,
    dscp2prio, qos, link_type_ports, errors}``: ``netdevs`` every netdev the role configures (compute, then storage),
    ``qos`` the settings of each (``{netdev: {role, trust, pfc, ecn, dscp2prio, cnp_dscp, cnp_priority, dcqcn, tos,
    mode, global_pause}}``), ``pfc``/``ecn``/``dscp2prio`` the compute profile's, ``link_type_ports`` the compute
    ports that are InfiniBand (``[{device, port}]``, to become Ethernet)."""
    get = inputs.get
    compute, errors = qos_settings(_compute_get(inputs))
    choice, overrides, storage_errors = storage_choice(get(STORAGE))
    errors += storage_errors
    storage = compute
    if choice == "own":
        storage, own_errors = qos_settings(*storage_inputs(inputs, overrides))
        errors += own_errors
    mtu = _number(get("roce_mtu", 9000))
    if isinstance(mtu, bool):
        errors.append("roce_mtu takes numbers, not true/false; got %s." % str(mtu).lower())
    elif not (_is_int(mtu) and MTU_RANGE[0] <= mtu <= MTU_RANGE[1]):
        errors.append("roce_mtu must be 576-9978 bytes (the mlx5 range; 9000 gives RDMA MTU 4096); got %s." % (mtu,))

    rdma = port_roles.planned(rdma or {}, DEFAULT_FABRICS if fabrics is None else fabrics)
    views, by_role = _views_by_role(rdma)
    ethernet = ethernet_netdevs(rdma)
    eth_views = dict((view["netdev"], view) for view in views if view["link_layer"] == "Ethernet" and view["netdev"])

    def active(role):
        return [view["netdev"] for view in _in_order(views, by_role.get(role) or [])
                if view["link_layer"] == "Ethernet" and view["netdev"] and view["state"] == "ACTIVE"]
    wanted = _wanted_netdevs(get("roce_interfaces"))
    if wanted is None:
        errors.append("roce_interfaces takes netdev names (a list of strings such as enp12s0np0); got %r." % (get("roce_interfaces"),))
        netdevs = []
    elif wanted:
        netdevs = wanted
        unknown = [n for n in netdevs if n not in ethernet]
        if unknown:
            errors.append("roce_interfaces %s are not Ethernet ports of an RDMA device; those here: %s."
                          % (unknown, ", ".join(ethernet) or "none"))
        for netdev in [n for n in netdevs if n in eth_views]:
            role = eth_views[netdev]["role"]
            if role == "management":
                errors.append("roce_interfaces names %s, which carries the management link (role management: a default "
                              "route's interface); the role never changes it. Leave it out of roce_interfaces." % netdev)
            elif role == "unused":
                errors.append("roce_interfaces names %s, whose role is unused (rdma_port_roles); the role never changes "
                              "it. Leave it out of roce_interfaces, or give it the role compute or storage in "
                              "rdma_port_roles." % netdev)
            elif role == "storage" and choice == "none":
                errors.append("roce_interfaces names %s, a storage port (rdma_port_roles), but %s is none (storage ports "
                              "are not made lossless): set %s to compute or to their own settings, or leave it out of "
                              "roce_interfaces." % (netdev, STORAGE, STORAGE))
    else:
        netdevs = active("compute") + (active("storage") if choice != "none" else [])
    compute_netdevs = [n for n in netdevs if n in eth_views and eth_views[n]["role"] == "compute"]
    storage_netdevs = [n for n in netdevs if n in eth_views and eth_views[n]["role"] == "storage"]
    link_type_ports = []
    if by_role.get("compute_link_layer") == "Ethernet":
        link_type_ports = [{"device": view["device"], "port": view["port"]}
                           for view in _in_order(views, by_role.get("link_type_changes") or [])
                           if view["link_layer"] == "InfiniBand"]

    addresses = get("roce_addresses") or {}
    if not isinstance(addresses, dict):
        errors.append("roce_addresses takes an IPv4 address/prefix per netdev, as a mapping ({enp12s0np0: 10.0.1.11/24}); got %r." % (addresses,))
        addresses = {}
    on_storage = [n for n in addresses if n in storage_netdevs]
    if on_storage:
        errors.append("roce_addresses names %s, storage ports: the role addresses only compute ports (the RoCE rails); "
                      "a storage port keeps the addresses and MTU the site gives it." % (on_storage,))
    unconfigured = [n for n in addresses if n not in compute_netdevs and n not in on_storage]
    if unconfigured:
        errors.append("roce_addresses names %s, which roce_interfaces does not configure (%s)." % (unconfigured, ", ".join(compute_netdevs)))
    not_cidr = [a for a in addresses.values() if not CIDR.fullmatch(str(a))]
    if not_cidr:
        errors.append("roce_addresses takes an IPv4 address/prefix per netdev (10.0.1.11/24); got %s." % (not_cidr,))
    if not netdevs and wanted == [] and not link_type_ports and by_role.get("compute_link_layer") != "InfiniBand":
        if not ethernet_netdevs(rdma, active_only=True):
            errors.append("No ACTIVE Ethernet port of an RDMA device on this host; set roce_interfaces.")
        else:
            errors.append("No ACTIVE Ethernet compute port on this host: its ACTIVE Ethernet ports are %s. Give the RoCE "
                          "rails the role compute in rdma_port_roles, or set %s to make the storage ports lossless."
                          % (", ".join("%s (%s)" % (view["netdev"], view["role"]) for view in views
                                       if view["link_layer"] == "Ethernet" and view["netdev"] and view["state"] == "ACTIVE"),
                             STORAGE))

    qos = {}
    for netdev in netdevs:
        role = eth_views.get(netdev, {}).get("role", "compute")
        qos[netdev] = dict(storage if role == "storage" else compute, role=role)
        if errors:
            qos[netdev]["dscp2prio"] = {}
    return {"netdevs": netdevs, "compute_netdevs": compute_netdevs, "storage_netdevs": storage_netdevs,
            "ethernet_netdevs": ethernet, "pfc": compute["pfc"], "ecn": compute["ecn"],
            "dscp2prio": compute["dscp2prio"] if not errors else {}, "qos": qos, "link_type_ports": link_type_ports,
            "errors": errors}


def declared_qos(prof, firmware_settings="apply", backend="auto"):
    """``{netdev: roce_qos module parameters}`` of every netdev the profile configures, as the role's configure and
    drift steps pass them (ECN, CNP and DCQCN only where the role sets them at run time, ``roce_firmware_settings:
    apply``): what the health check compares each netdev with."""
    out = {}
    if prof.get("errors"):
        return out
    for netdev in prof.get("netdevs") or []:
        port = prof["qos"][netdev]
        params = {"backend": backend, "trust": port["trust"], "pfc": port["pfc"], "dscp2prio": port["dscp2prio"],
                  "traffic_class": port["tos"], "roce_tos": port["tos"], "roce_mode": port["mode"],
                  "global_pause": port["global_pause"]}
        if firmware_settings == "apply":
            params.update(ecn=port["ecn"], cnp_dscp=port["cnp_dscp"], cnp_priority=port["cnp_priority"])
            if port.get("dcqcn"):
                params["dcqcn"] = port["dcqcn"]
        out[netdev] = params
    return out


def qos_netdevs(prof, firmware_settings="apply", probe=False):
    """The ``netdevs`` of one ``roce_qos`` call for every netdev the profile configures, in its order: each netdev's
    ``declared_qos`` parameters (the backend is the call's own), or with ``probe`` only what is checked before any
    change (DCQCN, whatever ``roce_firmware_settings``: its ranges depend on the port's line rate)."""
    if prof.get("errors"):
        return []
    if probe:
        out = []
        for netdev in prof.get("netdevs") or []:
            dcqcn = prof["qos"][netdev].get("dcqcn")
            out.append(dict(netdev=netdev, dcqcn=dcqcn) if dcqcn else dict(netdev=netdev))
        return out
    return [dict(dict((key, value) for key, value in params.items() if key != "backend"), netdev=netdev)
            for netdev, params in declared_qos(prof, firmware_settings).items()]
