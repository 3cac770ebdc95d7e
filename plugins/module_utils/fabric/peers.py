# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each port's peer in the facts: what ``rdma_facts`` adds with ``peers: true`` to the facts read the one way
(``sysfs.facts.read``), and the summary's line of them.

:func:`attach` reads the peers of every port of ``ansible_facts.rdma`` with as few tool runs as the fabric allows:

* RoCE (link layer Ethernet): one ``lldpcli -f json0 show neighbors details`` (``lldp.read_peers``) for the netdevs
  of all the host's Ethernet RDMA ports; a port whose netdev is a bond (``mlx5_bond_*``) takes the peer of the first
  of its lower netdevs (in name order) that hears one, since lldpd hears on the bond's members;
* InfiniBand: one ``iblinkinfo`` partial scan per port whose physical link is up (``ib_peers.read_peers``), found
  by its ``port_guid``; a port with no link has no peer and costs no run.

Every port gets ``peer`` (the peer dict of ``lldp.py`` or ``ib_peers.py``, None when nothing answers), and the facts
get ``peers``: ``{lldp: {state, reason}, infiniband: {state, reason}, problems: [text]}``. Each source's ``state``
is its reader's (``ok``, ``lldpd_not_installed``, ``lldpd_not_running``, ``lldpcli_failed``;
``infiniband_diags_not_installed``, ``iblinkinfo_failed``) or ``no_ports`` when the host has no port of that link
layer to ask about (nothing is run). A missing or failing tool is a state and a reason, never an error: the read
changes nothing and runs the same in check mode.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import ib_peers, lldp
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.facts import ports as port_ids
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import SysfsError
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.routes import Topology

__metaclass__ = type

STATE_NO_PORTS = "no_ports"
# the states that say nothing went wrong (the summary gives a reason for the others)
QUIET_STATES = (lldp.STATE_OK, STATE_NO_PORTS)
# the roles whose peers the summary shows (the "every compute and storage port")
SUMMARY_ROLES = ("compute", "storage")


def _port_facts(rdma):
    """``[(device, port number as in the facts, port facts)]`` in device order."""
    devices = rdma.get("devices") or {}
    out = []
    for pid in port_ids(rdma):
        name, num = pid.rsplit(":", 1)
        out.append((name, num, devices[name]["ports"][num]))
    return out


def _lowers(rdma):
    """A function netdev -> its lower netdevs (bond members, ``lower_*`` links) under the facts' sysfs root; none
    when the root cannot be read."""
    try:
        topology = Topology(rdma.get("sysfs_root") or "/sys")
    except SysfsError:
        return lambda netdev: []

    def lowers(netdev):
        try:
            return topology.lowers(netdev)
        except SysfsError:
            return []
    return lowers


def lldp_names(rdma):
    """``{(device, port): [netdev, its lower netdevs...]}`` of the Ethernet ports that have a netdev: the names
    whose LLDP neighbour is the port's peer, the first that hears one wins."""
    lowers = _lowers(rdma)
    out = {}
    for name, num, port in _port_facts(rdma):
        if port.get("link_layer") == "Ethernet" and port.get("netdev"):
            out[(name, num)] = [port["netdev"]] + [n for n in lowers(port["netdev"]) if n != port["netdev"]]
    return out


def ib_ports(rdma):
    """``[(device, port, port_guid)]`` of the InfiniBand ports with a physical link and a port GUID (what
    ``ib_peers.read_peers`` runs iblinkinfo on)."""
    return [(name, int(num), port["port_guid"]) for name, num, port in _port_facts(rdma)
            if port.get("link_layer") == "InfiniBand" and port.get("phys_state") == "LinkUp" and port.get("port_guid")]


def _source(read):
    return {"state": read["state"], "reason": read["reason"]}


def attach(rdma, runner):
    """Read the peers of the ports of ``rdma`` (``ansible_facts.rdma`` as ``sysfs.facts.read`` returns it) through
    ``runner`` and write them into it: each port's ``peer``, and ``rdma["peers"]`` (see the module's docstring).
    Returns ``rdma``."""
    names = lldp_names(rdma)
    ib = ib_ports(rdma)
    problems = []
    if names:
        wanted = []
        for candidates in names.values():
            wanted.extend(n for n in candidates if n not in wanted)
        heard = lldp.read_peers(runner, wanted)
        lldp_state = _source(heard)
        problems.extend(heard["problems"])
    else:
        heard = {"peers": {}}
        lldp_state = {"state": STATE_NO_PORTS, "reason": "no Ethernet RDMA port with a netdev: LLDP is not read"}
    if ib:
        seen = ib_peers.read_peers(runner, ib)
        ib_state = _source(seen)
        problems.extend(seen["problems"])
    else:
        seen = {"peers": {}}
        ib_state = {"state": STATE_NO_PORTS,
                    "reason": "no InfiniBand port with a physical link: iblinkinfo is not run"}
    for name, num, port in _port_facts(rdma):
        peer = None
        for netdev in names.get((name, num), ()):
            peer = heard["peers"].get(netdev)
            if peer is not None:
                break
        if port.get("link_layer") == "InfiniBand":
            peer = (seen["peers"].get(name) or {}).get(int(num))
        port["peer"] = peer
    rdma["peers"] = {"lldp": lldp_state, "infiniband": ib_state, "problems": problems}
    return rdma


def summary(rdma):
    """The summary's line of the peers: each compute and storage port (``ports_by_role`` order) ``dev:port ->
    switch:port`` or ``no peer``, then the reason of each source that did not read (lldpd not running...). None
    when the facts carry no peers (read without ``peers: true``)."""
    rdma = rdma or {}
    status = rdma.get("peers")
    if not isinstance(status, dict):
        return None
    devices = rdma.get("devices") or {}
    by_role = rdma.get("ports_by_role") or {}
    parts = []
    for role in SUMMARY_ROLES:
        for pid in by_role.get(role) or []:
            name, num = pid.rsplit(":", 1)
            peer = ((devices.get(name) or {}).get("ports") or {}).get(num, {}).get("peer")
            parts.append("%s %s" % (pid, "-> %s:%s" % (peer.get("system_name"), peer.get("port_id")) if peer
                                    else "no peer"))
    text = ", ".join(parts) if parts else "no compute or storage port"
    for source in ("lldp", "infiniband"):
        state = status.get(source) or {}
        if state.get("state") not in QUIET_STATES:
            text += "; %s" % (state.get("reason") or state.get("state"))
    return text
