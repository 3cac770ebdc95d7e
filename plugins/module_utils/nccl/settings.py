# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL's network settings for one host (the contents of /etc/nccl.conf), derived from ``ansible_facts.rdma``: the
HCAs and ports (NCCL_IB_HCA: the host's compute ports in rail order, read through ``port_roles.planned``), the RoCE
v2 GID index, the traffic class, the socket interface, the P_Key, and every problem with the nccl role's inputs (its
one validation path). Storage, management and unused ports never reach nccl.conf. Pure Python; the filter
``hpcnet.rdma.nccl_settings`` is one call of :func:`nccl_settings`."""

from __future__ import absolute_import, division, print_function

import json
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import infiniband
from ansible_collections.hpcnet.rdma.plugins.module_utils.host import host_paths
from ansible_collections.hpcnet.rdma.plugins.module_utils.host.nccl_hca import format_hca_list
from ansible_collections.hpcnet.rdma.plugins.module_utils.host.nccl_socket import IFNAME_LIST_RE, socket_ifname_problem
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import GROUP_LINK_LAYER

__metaclass__ = type


class NcclSettingsError(ValueError):
    """A bad input or a host that cannot carry what is asked; the message names the variable the user set."""


FABRICS = ("auto", "infiniband", "roce")
_NCCL_NAME = re.compile(r"^NCCL_[A-Z0-9_]+$")
# One line of printable text: nccl.conf is NAME=value per line and '#' starts a comment.
_CONF_VALUE = re.compile(r"^[^\x00-\x1f\x7f#]+$")
_COMPUTED = ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_SOCKET_IFNAME", "NCCL_IB_PKEY")


def _conf_value(name, value):
    """Validate one nccl_extra_settings entry and return the text nccl.conf gets (booleans as 1/0, like NCCL's own)."""
    if not _NCCL_NAME.match(str(name)):
        raise NcclSettingsError("nccl_extra_settings key %r is not an NCCL variable (NCCL_ followed by A-Z, 0-9, _)" % (name,))
    if name in _COMPUTED:
        raise NcclSettingsError("nccl_extra_settings must not set %s: it is computed from facts; use the role's own variable" % name)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str) or not value.strip() or not _CONF_VALUE.match(value):
        raise NcclSettingsError("nccl_extra_settings %s must be a string, number or boolean on one line, without '#'; got %r" % (name, value))
    return value.strip()


def _role_ports(rdma, fabrics):
    """``(compute, others)``: the compute ports ``[(device, port, facts, rail)]`` in rail order, and the other ports
    ``[(device, port, facts, role)]`` (storage, management, unused, in PCI order)."""
    planned = port_roles.planned(rdma, fabrics)
    by_role = planned.get("ports_by_role") or {}

    def facts_of(pid):
        name, num = pid.rsplit(":", 1)
        return name, int(num), planned["devices"][name]["ports"][num]

    compute = [facts_of(pid) for pid in by_role.get("compute") or []]
    compute = [(name, num, port, port.get("rail")) for name, num, port in compute]
    others = [facts_of(pid) + (role,) for role in port_roles.ROLES[1:] for pid in by_role.get(role) or []]
    return compute, others


def _resolve_fabric(compute, fabric):
    """Return the fabric to configure: the one asked for, or the one the ACTIVE compute ports show."""
    if fabric != "auto":
        return fabric
    layers = {p.get("link_layer") for _d, _n, p, _r in compute if p.get("state") == "ACTIVE"}
    if "InfiniBand" in layers:
        return "infiniband"
    if "Ethernet" in layers:
        return "roce"
    return None


def nccl_settings(rdma, fabric="auto", socket_ifname=None, traffic_class=None, hca_exact=True, extra=None,
                  network_facts=None, on_error="raise", conf_path=None, partition="", partitions=None,
                  check_pkey_ports=True, require_ports=False, fabrics=None):
    """Compute the contents of /etc/nccl.conf for one host.

    :arg rdma: the ``ansible_facts.rdma`` dictionary returned by ``hpcnet.rdma.rdma_facts``.
    :arg fabric: ``infiniband`` (use the ACTIVE InfiniBand compute ports), ``roce`` (the ACTIVE Ethernet compute ports
        with a RoCE v2 IPv4 GID) or ``auto`` (InfiniBand when any InfiniBand compute port is ACTIVE, else RoCE).
    :arg fabrics: the host's inventory groups (``group_names``): the default port roles when the facts were read
        without them (``port_roles.planned``). None takes ``[fabric]`` (none for ``auto``). Only compute ports, in
        rail order (PCI order), go into NCCL_IB_HCA; the others are ``skipped`` with their role.
    :arg socket_ifname: the out-of-band interface for NCCL_SOCKET_IFNAME (required, non-empty).
    :arg traffic_class: the IB traffic class 0-255 for NCCL_IB_TC (the ToS byte: DSCP << 2), or None to leave it out.
    :arg hca_exact: prefix NCCL_IB_HCA with ``=`` so that ``mlx5_1`` does not also match ``mlx5_10`` .. ``mlx5_17``.
    :arg extra: more ``NCCL_*`` settings: one-line strings, numbers, or booleans (written 1/0).
    :arg network_facts: the host's ``ansible_facts`` with the network subset; when given, ``socket_ifname`` must
        select an interface the host has and that is up, as NCCL matches it (prefix, ``=`` exact, ``^`` exclude).
    :arg conf_path: where the role writes the file (``nccl_conf_path``); when given it must be an absolute path.
    :arg partition: ``nccl_ib_partition``: the name of the partition of ``partitions`` (``infiniband_partitions``)
        whose P_Key table index the ports NCCL uses give ``NCCL_IB_PKEY``. An unknown name is an error; a P_Key
        missing from a port's table is one only with ``check_pkey_ports`` (the SM puts it there when it sweeps).
    :arg require_ports: make "no port qualifies for NCCL_IB_HCA" an error (``nccl_require_ib_hca``).
    :arg on_error: ``raise`` (the default) raises NcclSettingsError; ``return`` returns the plan with the message in
        ``errors`` instead, so that a playbook can fail with that message alone.
    :returns: ``{fabric, ports: [{device, port, link_layer, rate_gbps, gid_index}], skipped: [{device, port, reason}],
        settings: {NAME: value}, errors: [message]}``; ``settings`` keeps the order NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_IB_TC,
        NCCL_SOCKET_IFNAME, then ``extra`` sorted.
    :raises NcclSettingsError: on a bad argument (naming it and the allowed values), when RoCE ports disagree on
        the RoCE v2 GID index (NCCL takes one index for all HCAs), when ``extra`` redefines a computed setting, or
        when a value is not one line of text (a newline would smuggle another setting into nccl.conf).
    """
    if on_error not in ("raise", "return"):
        raise NcclSettingsError("nccl_settings: on_error is %r; allowed values: raise, return" % (on_error,))
    try:
        path_errors = host_paths.errors({"nccl_conf_path": conf_path})
        if path_errors:
            raise NcclSettingsError(path_errors[0])
        plan = _plan(rdma, fabric, socket_ifname, traffic_class, hca_exact, extra, network_facts, fabrics)
        _add_pkey(plan, rdma, partition, partitions, check_pkey_ports)
        if require_ports and not plan["ports"]:
            raise NcclSettingsError(
                "No port qualifies for NCCL_IB_HCA, so NCCL would fall back to TCP sockets. Ports seen: %s. Fix the fabric, "
                "or set nccl_require_ib_hca=false to write a sockets-only configuration."
                % ("; ".join(json.dumps(s) for s in plan["skipped"]) or "none"))
        return plan
    except NcclSettingsError as exc:
        if on_error == "raise":
            raise
        return {"fabric": None, "ports": [], "skipped": [], "settings": {}, "errors": [str(exc)]}


def _add_pkey(plan, rdma, partition, partitions, check_ports):
    """NCCL_IB_PKEY: the P_Key table index of ``partition`` on the plan's ports."""
    if not partition:
        return
    found = infiniband.nccl_pkey(rdma, partitions, partition, plan["ports"])
    if found["error"] and (found["pkey"] is None or check_ports):
        raise NcclSettingsError(found["error"])
    if found["index"] is not None:
        plan["settings"]["NCCL_IB_PKEY"] = found["index"]


def _plan(rdma, fabric, socket_ifname, traffic_class, hca_exact, extra, network_facts, fabrics):
    if not isinstance(rdma, dict) or "devices" not in rdma:
        raise NcclSettingsError("nccl_settings: expected ansible_facts.rdma from hpcnet.rdma.rdma_facts (a dict with 'devices')")
    if fabric not in FABRICS:
        raise NcclSettingsError("nccl_settings: fabric is %r; allowed values: %s" % (fabric, ", ".join(FABRICS)))
    socket_ifname = "" if socket_ifname is None else str(socket_ifname).strip()
    if not socket_ifname:
        raise NcclSettingsError("nccl_socket_ifname is empty and no default IPv4 interface was found; set nccl_socket_ifname to the out-of-band interface")
    if not IFNAME_LIST_RE.match(socket_ifname):
        raise NcclSettingsError("nccl_socket_ifname %r is not an interface list: use names or prefixes separated by commas, "
                                "optionally starting with ^ (exclude) or = (exact), e.g. eth0, =bond0 or ^docker,lo" % (socket_ifname,))
    problem = socket_ifname_problem(socket_ifname, network_facts)
    if problem:
        raise NcclSettingsError(problem)
    if traffic_class is not None and traffic_class != "":
        try:
            value = int(traffic_class)
        except (TypeError, ValueError):
            value = -1
        if isinstance(traffic_class, bool) or not 0 <= value <= 255:
            raise NcclSettingsError("nccl_ib_traffic_class must be an integer 0-255 (the ToS byte, DSCP << 2); got %r" % (traffic_class,))
        traffic_class = value
    else:
        traffic_class = None
    if not isinstance(extra or {}, dict):
        raise NcclSettingsError("nccl_extra_settings takes a mapping of NCCL variables to values ({NCCL_DEBUG: WARN}); got %r"
                                % (extra,))
    extra = {name: _conf_value(name, value) for name, value in (extra or {}).items()}

    if fabrics is None:
        fabrics = [fabric] if fabric in GROUP_LINK_LAYER else []
    elif not isinstance(fabrics, (list, tuple)) or not all(isinstance(group, str) for group in fabrics):
        raise NcclSettingsError("nccl_settings: fabrics must be the host's inventory groups (group_names), a list of "
                                "names; got %r" % (fabrics,))
    compute, others = _role_ports(rdma, fabrics)
    resolved = _resolve_fabric(compute, fabric)
    ports, skipped = [], []
    for device, number, port, rail in compute:
        reason = None
        if resolved is None or port.get("link_layer") != GROUP_LINK_LAYER[resolved]:
            reason = "link layer %s" % port.get("link_layer")
        elif port.get("state") != "ACTIVE":
            reason = "state %s" % port.get("state")
        elif resolved == "roce" and port.get("roce_v2_ipv4_gid_index") is None:
            reason = "no RoCE v2 GID with an IPv4 address"
        if reason:
            skipped.append({"device": device, "port": number, "reason": reason})
            continue
        ports.append({
            "device": device,
            "port": number,
            "rail": rail,
            "link_layer": port.get("link_layer"),
            "rate_gbps": port.get("rate_gbps"),
            "gid_index": port.get("roce_v2_ipv4_gid_index") if resolved == "roce" else None,
        })
    skipped += [{"device": device, "port": number, "reason": "role %s" % role} for device, number, _p, role in others]

    settings = {}
    if ports:
        settings["NCCL_IB_HCA"] = format_hca_list([(p["device"], p["port"]) for p in ports], exact=hca_exact)
    if ports and resolved == "roce":
        indexes = sorted({p["gid_index"] for p in ports})
        if len(indexes) > 1:
            raise NcclSettingsError(
                "NCCL_IB_GID_INDEX takes one GID index for every HCA, but the RoCE v2 IPv4 GID sits at different indexes: %s. "
                "Give the ports the same GID layout (the same IPv4/IPv6 addresses configured on every RoCE netdev)."
                % ", ".join("%s:%d=%d" % (p["device"], p["port"], p["gid_index"]) for p in ports))
        settings["NCCL_IB_GID_INDEX"] = indexes[0]
    if ports and traffic_class is not None:
        settings["NCCL_IB_TC"] = traffic_class
    settings["NCCL_SOCKET_IFNAME"] = socket_ifname
    for name in sorted(extra):
        settings[name] = extra[name]
    return {"fabric": resolved if ports else None, "ports": ports, "skipped": skipped, "settings": settings, "errors": []}
