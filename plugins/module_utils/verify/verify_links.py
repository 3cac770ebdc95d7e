# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The other end of every cable, in verify: the fabric-wide rail map, each InfiniBand link from both ends, and each
RoCE link's lossless agreement with its switch (pure Python, no Ansible imports; runs on the controller).

``links(fabric, rail_switches)`` reads each host's ports as the spec checks do (``Fabric.all_ports``: compute ports
by rail, storage ports) with the ``peer`` fact of each (``rdma_facts`` with ``peers: true``), and returns
``{rail_map, rail_switches, basis, note, findings}``:

- the rail map and its findings (``peer_missing``, ``rail_map``) are ``fabric/rail_map.build`` over the compute
  ports; a host whose peers were not read (lldpd not installed or not running, iblinkinfo missing or failing) gets
  one ``peer_missing`` warning naming the reason, not one per port (its ports are in the map without a switch);
- ``ib_link_width``: an InfiniBand compute or storage port whose switch end runs another width or speed than the
  HCA's end (both as iblinkinfo reads them from the subnet). iblinkinfo's ``Could be`` note (the link below what
  both ends' LinkWidthSupported/LinkSpeedSupported allow) stays in the peer fact, not judged yet: the test bed's
  ibsim claims 12X and QDR supported on every port, so no simulated link could pass such a check;
- ``switch_dcbx``, ``switch_pfc``, ``switch_app``, ``switch_mtu``: each RoCE compute or storage port with a peer
  against the profile the roce role declares for its netdev (``roce_declared_qos``: PFC priorities, DSCP map, ToS,
  CNP) and its declared MTU (``expect.netdev_mtu``, else the netdev's own), through ``fabric/switch_intent.agreement``.
  A host without a declared profile (the roce role did not run there) is not compared.

Hosts whose facts carry no peers (read without ``peers: true``) are left out; ``basis`` is then ``none`` for lack of
data and ``note`` says so.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import rail_map, switch_intent
from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric.peers import QUIET_STATES

# which source of peers answers for a port of each link layer (the facts' ``peers`` keys)
SOURCE = {"Ethernet": "lldp", "InfiniBand": "infiniband"}
SOURCE_FIX = {
    "lldp": "install and start lldpd on the host (the distribution's lldpd package; it listens on every netdev) and "
            "let the switch send LLDP: %s" % rail_map.LLDP_HINT,
    "infiniband": "install infiniband-diags on the host (iblinkinfo) and check that a subnet manager answers",
}


def _unread(status):
    """``{source: reason}`` of the peer sources that did not read on a host (``no_ports`` and ``ok`` are fine)."""
    out = {}
    for source in ("lldp", "infiniband"):
        entry = (status or {}).get(source) or {}
        if entry.get("state") not in QUIET_STATES:
            out[source] = entry.get("reason") or entry.get("state") or "not read"
    return out


def _unread_finding(host, source, reason):
    what = "LLDP neighbours" if source == "lldp" else "the subnet manager's view (iblinkinfo)"
    return rail_map.finding(host, "warning", "peer_missing", None, None, None, None,
                            "%s of the host's ports" % what, "not read",
                            "%s: %s; the host's links cannot be checked from the switch side" % (what, reason),
                            SOURCE_FIX[source])


def _ib_width(host, ref, peer):
    """ib_link_width findings of one InfiniBand port and its switch peer."""
    switch = "%s:%s" % (peer.get("system_name"), peer.get("port_id"))
    ends = ((peer.get("width"), peer.get("hca_width"), "width"), (peer.get("speed"), peer.get("hca_speed"), "speed"))
    for far, near, what in ends:
        if far and near and far != near:
            return [rail_map.finding(
                host, "error", "ib_link_width", ref.device, ref.port, ref.rail, switch,
                "the switch port's %s equal to the HCA port's (%s)" % (what, near), "%s on %s" % (far, switch),
                "the two ends of %s:%d disagree on the link's %s: %s on the switch, %s on the HCA" % (
                    ref.device, ref.port, what, far, near),
                "reseat or replace the cable of %s:%d on %s (%s), then check both ends with `iblinkinfo -C %s -P %d`"
                % (ref.device, ref.port, host, switch, ref.device, ref.port))]
    return []


def links(fabric, rail_switches=None):
    """See the module's docstring. ``fabric``: verify's ``Fabric``; ``rail_switches``: ``rdma_rail_switches``.
    Raises ``rail_map.FabricInputError`` for a bad ``rdma_rail_switches``."""
    findings, ports_by_host, left_out, quiet = [], {}, [], set()
    for name in fabric.order:
        host = fabric.hosts[name]
        status = host["rdma"].get("peers")
        if not isinstance(status, dict):
            left_out.append(name)
            continue
        unread = _unread(status)
        for source, reason in sorted(unread.items()):
            if any(ref.present and SOURCE.get(ref.get("link_layer")) == source for ref in fabric.all_ports[name]):
                findings.append(_unread_finding(name, source, reason))
        declared = host.get("roce_declared_qos") or {}
        rails = []
        for ref in fabric.all_ports[name]:
            if not ref.present:
                continue
            source = SOURCE.get(ref.get("link_layer"))
            peer = ref.get("peer")
            if ref.role == "compute":
                rails.append({"rail": ref.rail, "device": ref.device, "port": ref.port, "peer": peer})
                if source in unread:
                    quiet.add((name, ref.device, ref.port))
            if not peer:
                continue
            if source == "infiniband":
                findings.extend(_ib_width(name, ref, peer))
            elif ref.get("netdev") in declared:
                netdev = ref.get("netdev")
                mtu = (host.get("netdev_mtu") or {}).get(netdev) or \
                    ((host["rdma"].get("netdevs") or {}).get(netdev) or {}).get("mtu")
                profile = switch_intent.declared_profile(declared[netdev], mtu)
                if profile is not None:
                    findings.extend(switch_intent.agreement(name, ref.device, ref.port, peer, profile, ref.rail))
        ports_by_host[name] = rails
    built = rail_map.build(ports_by_host, rail_switches)
    note = built["note"]
    if left_out:
        named = ", ".join(left_out[:3]) + (" ..." if len(left_out) > 3 else "")
        note += "; %d host(s) read without peers left out (%s)" % (len(left_out), named)
    # a port whose source did not read has the host's one warning, not a peer_missing of its own
    mapped = [f for f in built["findings"]
              if not (f["check"] == "peer_missing" and (f["host"], f["device"], f["port"]) in quiet)]
    return {"rail_map": built["rail_map"], "rail_switches": built["rail_switches"], "basis": built["basis"],
            "note": note, "findings": mapped + findings}
