# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which ports the infiniband role serves, read through the port roles (``sysfs/port_roles.py``): the InfiniBand
ports it configures (compute and storage ports, never management or unused ones), the subnet each is on, and the
Ethernet ports it turns into InfiniBand ports (``infiniband_link_type_devices``). Pure Python, no Ansible imports.

Rules, in one place:

* The role serves the InfiniBand ports whose role is ``compute`` or ``storage``: opensm instances, IPoIB parents,
  partition members of a host selector and the wait for ACTIVE ports take these, never a ``management`` or ``unused``
  port, and never an Ethernet port (an Ethernet storage port of a VPI card stays Ethernet and is not waited for).
* Subnets: compute port of rail N is on subnet ``rail N`` (one switch fabric per rail, rail N of every host on
  subnet N); the K-th InfiniBand storage port of a host (PCI order) is on subnet ``storage K``.
* ``infiniband_link_type_devices: auto`` turns the compute ports that are not InfiniBand (``ports_by_role``'s
  ``link_type_changes``, when the compute link layer is InfiniBand), never a port whose netdev is in
  ``keep_netdevs`` (the management link). The explicit form (a list of selectors as ``rdma_port_roles`` takes them:
  RDMA device, ``dev:port``, netdev, PCI address, ...) turns the Ethernet ports it names, and refuses one that is not
  a compute port: a storage, management or unused port stays Ethernet unless ``rdma_port_roles`` makes it compute.
"""

from __future__ import absolute_import, division, print_function

import json

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key

__metaclass__ = type

SERVED_ROLES = ("compute", "storage")
DEFAULT_FABRICS = ("infiniband",)
LINK_TYPE_VARIABLE = "infiniband_link_type_devices"


def planned(rdma, fabrics=None):
    """The facts with every port's role and rail (``port_roles.planned``); ``fabrics`` defaults to the infiniband
    group (the facts ``rdma_facts`` read carry their roles, whatever ``fabrics`` says)."""
    return port_roles.planned(rdma or {}, DEFAULT_FABRICS if fabrics is None else fabrics)


def _port(rdma, pid):
    name, num = pid.rsplit(":", 1)
    return ((rdma.get("devices", {}).get(name) or {}).get("ports") or {}).get(num) or {}


def _wanted(devices, name, pid):
    return not devices or name in devices or pid in devices


def ib_ports(rdma, devices=None, fabrics=None):
    """The InfiniBand ports the role serves: ``[{device, port, role, rail, subnet, guid, netdev, state, lid, sm_lid,
    pkeys, pkey_indexes}]``, compute ports in rail order then storage ports. ``rail`` is the compute rail (None for a
    storage port), ``subnet`` ``rail N`` or ``storage K``. ``devices`` (RDMA device names or ``dev:port``) narrows
    them."""
    rdma = planned(rdma, fabrics)
    by_role = rdma.get("ports_by_role") or {}
    out = []
    for role in SERVED_ROLES:
        index = 0
        for pid in by_role.get(role) or []:
            name, num = pid.rsplit(":", 1)
            port = _port(rdma, pid)
            if port.get("link_layer") != "InfiniBand":
                continue
            rail = port.get("rail") if role == "compute" else None
            subnet = ("rail %s" % rail) if role == "compute" else ("storage %d" % index)
            index += 1
            if not _wanted(devices, name, pid):
                continue
            out.append({"device": name, "port": int(num), "role": role, "rail": rail, "subnet": subnet,
                        "guid": port.get("port_guid"), "netdev": port.get("netdev"), "state": port.get("state"),
                        "lid": port.get("lid"), "sm_lid": port.get("sm_lid"), "pkeys": port.get("pkeys") or [],
                        "pkey_indexes": port.get("pkey_indexes") or {}})
    return out


def subnet_text(subnet):
    """``rail 0`` -> ``subnet 0 (rail 0)``; ``storage 1`` -> ``storage subnet 1 (the hosts' InfiniBand storage port
    1)``: how a message names the subnet of an opensm instance."""
    kind, _sep, number = str(subnet).partition(" ")
    if kind == "storage":
        return "storage subnet %s (the hosts' InfiniBand storage port %s)" % (number, number)
    return "subnet %s (rail %s)" % (number, number)


def subnet_key(subnet):
    """Sort key of a subnet label: the rails first, in number order, then the storage subnets."""
    return (str(subnet).startswith("storage"), natural_key(subnet))


def _selectors(devices):
    """``infiniband_link_type_devices`` as a list of selector strings, or None when it is not one."""
    if isinstance(devices, str):
        return [part.strip() for part in devices.split(",") if part.strip()]
    if isinstance(devices, (list, tuple)) and all(isinstance(item, str) and item.strip() for item in devices):
        return [item.strip() for item in devices]
    return None


def _refusal(view, role):
    where = "%s (%s%s)" % (view["id"], view["netdev"] or "no netdev", ", " + view["pci"] if view["pci"] else "")
    if role == "management":
        why = ("carries the management link (role management: a default route's interface, which rdma_port_roles "
               "cannot make compute), so it stays Ethernet: leave it out of %s" % LINK_TYPE_VARIABLE)
    elif role == "storage":
        why = ("is a storage port (its role in rdma_port_roles, or by default an Ethernet port that is up with an "
               "address of its own), so it stays Ethernet: leave it out of %s, or give it the role compute in "
               "rdma_port_roles ({role: compute, devices: [%s]}) to turn it" % (LINK_TYPE_VARIABLE, view["id"]))
    else:
        why = ("has the role %s in rdma_port_roles, so it stays Ethernet: leave it out of %s, or give it the role "
               "compute in rdma_port_roles to turn it" % (role, LINK_TYPE_VARIABLE))
    return "%s names %s, which %s. The role turns only compute ports into InfiniBand." % (LINK_TYPE_VARIABLE, where, why)


def link_type_plan(rdma, devices, keep_netdevs=None, fabrics=None):
    """``(ports, errors)``: the Ethernet ports the role turns into InfiniBand ports, ``[{device, port, netdev}]`` in
    PCI order, and one message per port ``devices`` names that is not a compute port (see the module docstring)."""
    rdma = planned(rdma, fabrics)
    keep = set(name for name in (keep_netdevs or []) if name)
    views = [view for view in port_roles.port_views(rdma) if view["link_layer"] == "Ethernet"]
    roles = dict((view["id"], _port(rdma, view["id"]).get("role") or "compute") for view in views)
    out, errors = [], []
    if devices == "auto":
        by_role = rdma.get("ports_by_role") or {}
        changes = set(by_role.get("link_type_changes") or []) if by_role.get("compute_link_layer") == "InfiniBand" else set()
        picked = [view for view in views if view["id"] in changes and view["netdev"] not in keep]
    else:
        selectors = _selectors(devices if devices is not None else [])
        if selectors is None:
            message = ("%s must be auto or a list of the RDMA devices (mlx5_1, or mlx5_1:1 for one port), netdevs or "
                       "PCI addresses of the ports to turn into InfiniBand; got %s"
                       % (LINK_TYPE_VARIABLE, json.dumps(devices, default=str)))
            return [], [message]
        picked = [view for view in views if any(port_roles.selector_matches(sel, view) for sel in selectors)]
        errors = [_refusal(view, roles[view["id"]]) for view in picked if roles[view["id"]] != "compute"]
        picked = [view for view in picked if roles[view["id"]] == "compute"]
    for view in picked:
        out.append({"device": view["device"], "port": view["port"], "netdev": view["netdev"]})
    return out, errors
