# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each RDMA port's role (compute, storage, management, unused) and rail, from ``rdma_port_roles`` and the facts
(pure Python, no Ansible imports). ``rdma_facts`` writes them into every port (``role``, ``rail``) and into
``ansible_facts.rdma.ports_by_role``; every role reads them from there.

Rules, in one place:

* ``rdma_port_roles`` is a list of ``{role, devices}``; later entries win for a port, as in ``firmware_mlxconfig``.
  ``devices`` are selectors: ``all``, a PCI address (a function, or ``bus:dev`` for the card), an RDMA device name
  (``mlx5_0``, ``ibp24s0``), ``dev:port``, a netdev name, a part number (the card's VPD ``PN``), a PSID
  (``board_id``) or a link layer (``InfiniBand``, ``Ethernet``: the port's link layer as read). A selector that
  matches no port of the host is refused, but for ``all`` and the link layers (an inventory-wide entry may name a
  link layer a host does not have).
* Without an entry for a port, its role follows the host's inventory groups (``infiniband``, ``roce``): on a host in
  one group, ports of that group's link layer are ``compute``; a port of the other link layer is ``storage`` when it
  is up and carries an address of its own (ACTIVE with a GID of an IP address: the kernel fills a RoCE port's GID
  table from its netdev's addresses; an ACTIVE InfiniBand port is up on a subnet an SM serves), and otherwise
  ``unused`` (only ``rdma_port_roles`` makes it ``compute``, which asks the fabric's role to turn a VPI port into its
  link layer: a link-type change, applied by a reboot). On a host in both groups, InfiniBand
  ports are ``compute`` and Ethernet ports ``storage``. On a host in neither, every port is ``compute``.
* The port whose netdev carries the management link (a default route's interface, or an interface under it) is
  ``management`` by default and is never ``compute``.
* ``compute`` ports all have one *compute link layer*: the group's on a host in one group (ports of the other link
  layer are link-type changes), the link layer they have otherwise. Two are refused when ``rdma_port_roles`` makes
  them (a host in neither group keeps every port compute, with no compute link layer).
* The **rail** of a compute port is its position among the host's compute ports in PCI order (address, then port):
  0 .. n-1, whatever the devices are called. Other ports have no rail.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

import ipaddress
import json
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.pci import PCI_RE, canonical_pci, pci_matches
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key

ROLES = ("compute", "storage", "management", "unused")
ROLE_SELECTOR = "role:"
LINK_LAYERS = ("InfiniBand", "Ethernet")
# inventory groups of the two fabrics and the link layer of their compute ports (facts.GROUP_LINK_LAYER reads this)
GROUP_LINK_LAYER = {"infiniband": "InfiniBand", "roce": "Ethernet"}
VARIABLE = "rdma_port_roles"


class PortRoleError(Exception):
    """``rdma_port_roles`` cannot be applied to this host; the message names the variable and the entry."""


def _dumps(value):
    return json.dumps(value, default=str)


def _has_address(port):
    for gid in port.get("gids") or []:
        text = gid.get("gid") if isinstance(gid, dict) else None
        try:
            address = ipaddress.ip_address(text) if text else None
        except ValueError:
            continue
        if address is None:
            continue
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None or not (address.is_link_local or address.is_unspecified):
            return True
    return False


def port_views(rdma):
    """The host's ports as selectors see them, in PCI order (ports without a PCI address after, by name)."""
    views = []
    for name, dev in ((rdma or {}).get("devices") or {}).items():
        pci = canonical_pci(dev.get("pci_address"))
        for num, port in (dev.get("ports") or {}).items():
            views.append({
                "id": "%s:%s" % (name, num), "device": name, "port": int(num), "pci": pci,
                "board_id": dev.get("board_id"), "part_number": dev.get("part_number"), "netdev": port.get("netdev"),
                "link_layer": port.get("link_layer"), "state": port.get("state"),
                "up": port.get("state") == "ACTIVE" and (port.get("link_layer") == "InfiniBand" or _has_address(port)),
            })
    views.sort(key=lambda view: (view["pci"] is None, view["pci"] or "", natural_key(view["device"]), view["port"]))
    return views


def selector_matches(selector, view):
    """True when one ``rdma_port_roles`` selector picks the port ``view``."""
    text = selector.strip()
    if text.lower() == "all":
        return True
    if text in LINK_LAYERS:
        return view["link_layer"] == text
    if PCI_RE.match(text):
        return pci_matches(text, view["pci"])
    if text in (view["device"], view["id"]) or (view["netdev"] and text == view["netdev"]):
        return True
    if view["board_id"] and text.upper() == str(view["board_id"]).upper():
        return True
    part = view["part_number"]
    # with or without the _Ax suffix the tools print (MCX755106AS-HEAT_Ax)
    return bool(part) and re.sub(r"_A[A-Z0-9]*$", "", text.upper()) == re.sub(r"_A[A-Z0-9]*$", "", part.upper())


def selectors_of(entry):
    """An entry's ``devices`` as a list of selectors (a comma-separated string, as Ansible reads a list option, is
    split); the same for ``rdma_port_roles`` and ``firmware_mlxconfig`` entries."""
    devices = entry.get("devices")
    if isinstance(devices, str):
        return [part.strip() for part in devices.split(",")]
    return devices if isinstance(devices, list) else [devices]


def entry_errors(entries):
    """Errors of the shape of ``rdma_port_roles`` itself (no facts needed)."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        return ["%s must be a list of {role, devices}, got %s." % (VARIABLE, _dumps(entries))]
    errors = []
    for index, entry in enumerate(entries):
        where = "%s[%d]" % (VARIABLE, index)
        if not isinstance(entry, dict) or set(entry) != {"role", "devices"}:
            errors.append("%s must be a map with keys role and devices, got %s." % (where, _dumps(entry)))
            continue
        if entry["role"] not in ROLES:
            errors.append("%s.role must be one of %s, got %s." % (where, ", ".join(ROLES), _dumps(entry["role"])))
        selectors = selectors_of(entry)
        if not selectors or any(not isinstance(sel, str) or not sel.strip() for sel in selectors):
            errors.append("%s.devices must be all, a link layer (InfiniBand, Ethernet), PCI addresses, RDMA device "
                          "names (dev or dev:port), netdev names, part numbers or PSIDs (strings), got %s."
                          % (where, _dumps(entry["devices"])))
    return errors


def _default_role(view, fabrics, management):
    if view["netdev"] and view["netdev"] in management:
        return "management"
    lls = [GROUP_LINK_LAYER[group] for group in fabrics]
    if not lls:
        return "compute"
    if len(lls) == 2:
        return "compute" if view["link_layer"] == "InfiniBand" else "storage"
    if view["link_layer"] == lls[0]:
        return "compute"
    # nothing turns a port of the other link layer into the group's unless the user makes it compute: a storage port
    # that is down or not yet addressed must not become a rail (nor a link-type change with a reboot)
    return "storage" if view["up"] else "unused"


def assign(rdma, entries=None, fabrics=(), management_netdevs=()):
    """``(roles, plan)``: ``roles`` maps ``dev:port`` to ``{role, rail, entry}`` (entry: the index of the
    ``rdma_port_roles`` entry that set it, or None for the default); ``plan`` is ``ports_by_role``: ``{compute:
    [dev:port in rail order], storage, management, unused, compute_link_layer, link_type_changes: [dev:port of a
    compute port that has another link layer]}``. Raises :class:`PortRoleError` with every problem of this host."""
    errors = entry_errors(entries)
    if errors:
        raise PortRoleError(" ".join(errors))
    fabrics = [group for group in GROUP_LINK_LAYER if group in (fabrics or [])]
    management = set(name for name in (management_netdevs or []) if name)
    views = port_views(rdma)
    roles = dict((view["id"], {"role": _default_role(view, fabrics, management), "rail": None, "entry": None})
                 for view in views)
    ids = ", ".join("%s (%s %s%s)" % (view["id"], view["pci"] or "no PCI address", view["link_layer"],
                                      (" " + view["netdev"]) if view["netdev"] else "") for view in views) or "none"
    cards = sorted(set("%s %s" % (view["part_number"] or "no part number", view["board_id"] or "no PSID") for view in views))
    ids += "; part numbers and PSIDs: %s" % (", ".join(cards) or "none")
    for index, entry in enumerate(entries or []):
        for selector in selectors_of(entry):
            picked = [view for view in views if selector_matches(selector, view)]
            if not picked and selector.strip().lower() != "all" and selector.strip() not in LINK_LAYERS:
                errors.append("%s[%d].devices: %s matches no RDMA port of this host (ports: %s)."
                              % (VARIABLE, index, selector, ids))
            for view in picked:
                roles[view["id"]].update(role=entry["role"], entry=index)
    compute = [view for view in views if roles[view["id"]]["role"] == "compute"]
    for view in compute:
        if view["netdev"] in management:
            errors.append("%s[%s] makes %s compute, but its netdev %s carries the management link (a default "
                          "route); give it the role management, or move the management link."
                          % (VARIABLE, roles[view["id"]]["entry"], view["id"], view["netdev"]))
    if fabrics and len(fabrics) == 1:
        compute_ll = GROUP_LINK_LAYER[fabrics[0]]
    else:
        found = sorted(set(view["link_layer"] for view in compute if view["link_layer"]))
        compute_ll = found[0] if len(found) == 1 else None
        if len(found) > 1 and entries:  # the defaults give two only on a host in neither group: no rails to tell
            errors.append("%s gives compute ports of two link layers (%s); NCCL's rails must be one fabric: make "
                          "the ports of one link layer storage or unused." % (VARIABLE, ", ".join(
                              "%s %s" % (view["id"], view["link_layer"]) for view in compute)))
    if errors:
        raise PortRoleError(" ".join(errors))
    for rail, view in enumerate(compute):
        roles[view["id"]]["rail"] = rail
    plan = dict((role, [view["id"] for view in views if roles[view["id"]]["role"] == role]) for role in ROLES)
    plan["compute_link_layer"] = compute_ll
    plan["link_type_changes"] = [view["id"] for view in compute if compute_ll and view["link_layer"] != compute_ll]
    return roles, plan


def annotate(rdma, entries=None, fabrics=(), management_netdevs=()):
    """Write ``role`` and ``rail`` into every port of ``rdma`` (the facts dict, in place) and set
    ``rdma["ports_by_role"]``; returns ``rdma``."""
    roles, plan = assign(rdma, entries, fabrics, management_netdevs)
    for name, dev in (rdma.get("devices") or {}).items():
        for num, port in (dev.get("ports") or {}).items():
            got = roles.get("%s:%s" % (name, num), {})
            port["role"], port["rail"] = got.get("role"), got.get("rail")
    rdma["ports_by_role"] = plan
    return rdma


def rail_count_errors(counts, allow_uneven=False):
    """Hosts of one fabric group with different numbers of compute rails: ``counts`` maps ``group -> {host: rails}``.
    Returns ``(errors by host, warnings)``: every host of such a group gets the message (nothing changes on any of
    them), unless ``allow_uneven`` (``rdma_allow_uneven_rails``, a play-wide setting) makes it a warning. The message
    names the hosts whose count differs from the group's most common one, or every count when none is most common."""
    errors, warnings = {}, []
    for group in sorted(counts):
        hosts = counts[group]
        tally = {}
        for value in hosts.values():
            tally[value] = tally.get(value, 0) + 1
        if len(tally) < 2:
            continue
        ranked = sorted(tally.items(), key=lambda item: -item[1])
        if ranked[0][1] > ranked[1][1]:
            usual = ranked[0][0]
            odd = ", ".join("%s has %d" % (host, hosts[host]) for host in sorted(hosts) if hosts[host] != usual)
            what = "%s compute rails where the other hosts of the %s group have %d" % (odd, group, usual)
        else:
            what = "the hosts of the %s group have different numbers of compute rails (%s)" % (
                group, ", ".join("%s %d" % (host, hosts[host]) for host in sorted(hosts)))
        text = ("%s: NCCL pairs rail r of one host with rail r of the others. Check the cables and rdma_port_roles, or "
                "set rdma_allow_uneven_rails=true for the play (group_vars/all or -e) if the fabric is built that way."
                % what)
        if allow_uneven:
            warnings.append(text)
            continue
        for host in hosts:
            errors.setdefault(host, []).append(text)
    return errors, warnings


def planned(rdma, fabrics=()):
    """``rdma`` with every port's ``role`` and ``rail`` and ``ports_by_role``: as ``rdma_facts`` wrote them, or (facts
    read without them, hand-written facts) the defaults for ``fabrics`` computed on a copy (no management link known,
    no ``rdma_port_roles``). What every consumer reads the roles through."""
    if isinstance((rdma or {}).get("ports_by_role"), dict):
        return rdma
    copied = dict(rdma or {})
    copied["devices"] = dict((name, dict(dev, ports=dict((num, dict(port)) for num, port in (dev.get("ports") or {}).items())))
                             for name, dev in ((rdma or {}).get("devices") or {}).items())
    return annotate(copied, None, fabrics, ())
