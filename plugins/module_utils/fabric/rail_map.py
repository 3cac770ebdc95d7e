# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric-wide rail map: which switch port each host's rail reaches, and what is wrong with it (pure Python, no
Ansible imports; runs on the controller).

Input: per host, its compute ports ``[{rail, device, port, peer}]``. The rails are the collection's own
(``sysfs/port_roles``: a compute port's position in PCI order, or verify's ``expect.devices`` order): ``host_ports``
reads them from a host's facts, verify hands its ``Fabric.ports`` the same way. ``peer`` is the port's ``peer`` fact
(``system_name``: the switch, ``port_id``: its port, optionally ``chassis_id``), None when nothing answers.

Output (``build``): ``{rail_map, findings, rail_switches, basis, note}``:

- ``rail_map``: ``{host: {rail: {device, port, switch, switch_port}}}`` (rail as a string, as JSON keeps it;
  ``switch``/``switch_port`` None for a port with no peer);
- ``findings``: verify's finding shape (``host, severity, check, device, port, expected, found, cause, fix``) plus
  ``rail`` and ``peer`` (``switch:switch_port``), keys the fabric report takes. Plain dicts: ``fabric/`` may not import
  ``verify/`` (verify imports this package), so ``finding`` here builds the same keys;
- ``rail_switches``: ``{rail: [switch, ...]}``, the switch group each rail is held to; ``basis``: ``declared``,
  ``inferred`` or ``none`` (not a rail-optimised fabric, see below); ``note``: how the groups were found, in a line.

Rules, in one place:

- **Declared** (``rdma_rail_switches``): a list with one item per rail, rail 0 first; an item is a shell-style glob on
  the switch's LLDP system name (``leaf-r0-*``; case-insensitive, ``fnmatch``), or a list of globs (a rail served by
  switches of several names). Every rail the hosts have needs its item.
- **Inferred**: a switch serves the rail most of the host ports that reach it are on; rail r's group is the switches
  that serve rail r. With one leaf per rail this is "the switch most rail-r ports reach"; it also holds on fabrics of
  several scalable units (rail r of unit 1 on one leaf, of unit 2 on another). A switch reached by two rails equally
  serves neither (a *tie*): each port on it is named, with the counts, since the map cannot tell which cable is wrong
  (two hosts with one crossed pair look the same either way); declaring the rails resolves it. A switch that only one
  port reaches serves that port's rail: a cable on a stray switch is caught only when the rails are declared.
- A fabric is **rail-optimised** when each host's rails reach different switches. When most hosts (of those with two
  or more rails that have a peer) have two rails on one switch (every NIC on one top-of-rack switch, or NICs
  alternating over a pair), the rails are not checked unless declared: ``basis`` is ``none`` and ``note`` says why.
- Findings, each naming host, port (``device:port``), rail and switch port, with the fix:
  ``peer_missing`` (warning): a compute port whose LLDP or subnet manager query found no peer;
  ``rail_map`` (error): a *crossed cable* (rails a and b of one host each on the other's switch: one finding naming
  both ports and both switch ports), a port on another rail's switch (or on a switch of no rail, when declared), a
  port on a switch that serves no one rail (a tie), two host ports on one switch port (a switch port is the
  ``chassis_id`` when the peer gives it, else the system name, and the port id).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
from collections import Counter

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key

VARIABLE = "rdma_rail_switches"
FINDING_KEYS = ("host", "severity", "check", "device", "port", "rail", "peer", "expected", "found", "cause", "fix")
FABRIC = "fabric"
FORMS = ("a list with one item per rail, rail 0 first, each a glob on the switch's LLDP system name or a list of "
         "globs, e.g. [leaf-r0-*, leaf-r1-*]")
LLDP_HINT = ("the switch port's LLDP (Cumulus: the lldpd service, on by default; SONiC: the lldp feature, "
             "`show lldp table`) or, on InfiniBand, the subnet manager's view")


class FabricInputError(ValueError):
    """Bad input; the message names the variable or field and what it accepts."""


def finding(host, severity, check, device, port, rail, peer, expected, found, cause, fix):
    """One finding with verify's keys plus ``rail`` and ``peer`` (the fabric report's optional keys)."""
    return {"host": host, "severity": severity, "check": check, "device": device,
            "port": int(port) if port is not None else None, "rail": rail, "peer": peer,
            "expected": expected, "found": found, "cause": cause, "fix": fix}


# ---------------------------------------------------------------------------------------------------------- input
def validate_rail_switches(value):
    """``rdma_rail_switches`` -> ``[[glob, ...] per rail]`` or None (not declared). Raises FabricInputError naming the
    variable, the item and the allowed forms."""
    if value is None or value == "" or value == []:
        return None
    if not isinstance(value, (list, tuple)):
        raise FabricInputError("%s must be %s; got %s %r." % (VARIABLE, FORMS, type(value).__name__, value))
    out = []
    for rail, item in enumerate(value):
        globs = list(item) if isinstance(item, (list, tuple)) else [item]
        if not globs or not all(isinstance(g, str) and g.strip() for g in globs):
            raise FabricInputError("%s[%d] (rail %d) must be a glob on the switch name (leaf-r%d-*) or a non-empty list "
                                   "of globs; got %r. %s must be %s." % (VARIABLE, rail, rail, rail, item, VARIABLE, FORMS))
        out.append([g.strip() for g in globs])
    return out


def _peer(value, where):
    """A port's peer, checked; ``port_id`` as text (LLDP gives a name, ``swp12``; iblinkinfo a number, 12)."""
    if value is None:
        return None
    port_id = value.get("port_id") if isinstance(value, dict) else None
    if isinstance(port_id, int) and not isinstance(port_id, bool):
        port_id = str(port_id)
    if not isinstance(value, dict) or not (isinstance(value.get("system_name"), str) and value["system_name"]
                                           and isinstance(port_id, str) and port_id):
        raise FabricInputError("%s.peer must be null or a dict with system_name (a string) and port_id (a string, "
                               "or a number on InfiniBand); got %r" % (where, value))
    return dict(value, port_id=port_id)


def validate_hosts(hosts):
    """``{host: [{rail, device, port, peer}]}`` -> the same, checked (rail an integer >= 0, once per host)."""
    if not isinstance(hosts, dict):
        raise FabricInputError("hosts must be a dict host -> [{rail, device, port, peer}]; got %s"
                               % type(hosts).__name__)
    out = {}
    for host, ports in hosts.items():
        if not isinstance(ports, (list, tuple)):
            raise FabricInputError("hosts.%s must be a list of {rail, device, port, peer}; got %s"
                                   % (host, type(ports).__name__))
        seen, checked = set(), []
        for index, entry in enumerate(ports):
            where = "hosts.%s[%d]" % (host, index)
            if not isinstance(entry, dict):
                raise FabricInputError("%s must be a dict {rail, device, port, peer}; got %r" % (where, entry))
            rail, port = entry.get("rail"), entry.get("port")
            if not isinstance(rail, int) or isinstance(rail, bool) or rail < 0 or rail in seen:
                raise FabricInputError("%s.rail must be an integer >= 0, once per host; got %r" % (where, rail))
            if not isinstance(entry.get("device"), str) or not isinstance(port, int) or isinstance(port, bool):
                raise FabricInputError("%s needs device (a string) and port (an integer); got %r" % (where, entry))
            seen.add(rail)
            checked.append({"rail": rail, "device": entry["device"], "port": port,
                            "peer": _peer(entry.get("peer"), where)})
        out[str(host)] = sorted(checked, key=lambda e: e["rail"])
    return out


def host_ports(rdma, fabrics=()):
    """A host's compute ports ``[{rail, device, port, peer}]`` from its ``ansible_facts.rdma`` (roles and rails as
    ``rdma_facts`` wrote them, or their defaults for ``fabrics``; ``port_roles.planned``)."""
    rdma = port_roles.planned(rdma or {}, fabrics)
    devices = rdma.get("devices") or {}
    out = []
    for pid in (rdma.get("ports_by_role") or {}).get("compute") or []:
        name, number = pid.rsplit(":", 1)
        facts = devices[name]["ports"][number]
        out.append({"rail": facts.get("rail"), "device": name, "port": int(number), "peer": facts.get("peer")})
    return out


# ------------------------------------------------------------------------------------------------------ the map
def _where(entry):
    return "%s:%d" % (entry["device"], entry["port"])


def _peer_text(entry):
    peer = entry["peer"]
    return "%s:%s" % (peer["system_name"], peer["port_id"]) if peer else None


def _globs_text(globs):
    return " or ".join(globs)


class _Map:
    """The hosts' ports, each switch's rails, and the rail groups (declared or inferred)."""

    def __init__(self, hosts, declared):
        self.hosts = hosts
        self.order = sorted(hosts, key=natural_key)
        self.declared = declared
        self.rails = sorted(set(e["rail"] for ports in hosts.values() for e in ports))
        self.at_switch = {}          # switch -> Counter(rail)
        for host in self.order:
            for entry in hosts[host]:
                if entry["peer"]:
                    self.at_switch.setdefault(entry["peer"]["system_name"], Counter())[entry["rail"]] += 1
        self.serves = {}             # switch -> its rail, or None on a tie (inferred)
        self.ties = {}               # switch -> the tied rails
        if declared is None:
            for switch, counts in self.at_switch.items():
                top = counts.most_common()
                tied = sorted(r for r, n in top if n == top[0][1])
                self.serves[switch] = tied[0] if len(tied) == 1 else None
                if len(tied) > 1:
                    self.ties[switch] = tied
        self._match = {}

    def matches(self, switch, rail):
        """Declared: the switch name matches rail ``rail``'s globs."""
        key = (switch, rail)
        if key not in self._match:
            globs = self.declared[rail] if rail < len(self.declared) else []
            self._match[key] = any(fnmatch.fnmatchcase(switch.lower(), g.lower()) for g in globs)
        return self._match[key]

    def rail_of(self, switch):
        """The rail a switch serves: the declared rail whose globs match (the first), the inferred one, or None."""
        if self.declared is not None:
            return next((r for r in range(len(self.declared)) if self.matches(switch, r)), None)
        return self.serves.get(switch)

    def on_own_rail(self, entry):
        switch = entry["peer"]["system_name"]
        if self.declared is not None:
            return self.matches(switch, entry["rail"])
        return self.serves.get(switch) == entry["rail"]

    def groups(self):
        out = dict((str(r), []) for r in self.rails)
        for switch in sorted(self.at_switch, key=natural_key):
            if self.declared is not None:
                for rail in self.rails:
                    if self.matches(switch, rail):
                        out[str(rail)].append(switch)
            elif self.serves.get(switch) is not None and str(self.serves[switch]) in out:
                out[str(self.serves[switch])].append(switch)
        return out

    def shared_hosts(self):
        """(hosts with two or more rails on one switch, hosts with two or more rails that have a peer)."""
        shared, counted = [], 0
        for host in self.order:
            switches = [e["peer"]["system_name"] for e in self.hosts[host] if e["peer"]]
            if len(switches) < 2:
                continue
            counted += 1
            if len(set(switches)) < len(switches):
                shared.append(host)
        return shared, counted


def _rail_map(m):
    return dict((host, dict((str(e["rail"]), {
        "device": e["device"], "port": e["port"],
        "switch": e["peer"]["system_name"] if e["peer"] else None,
        "switch_port": e["peer"]["port_id"] if e["peer"] else None}) for e in m.hosts[host])) for host in m.order)


def _missing(m):
    out = []
    for host in m.order:
        for e in m.hosts[host]:
            if e["peer"] is None:
                out.append(finding(
                    host, "warning", "peer_missing", e["device"], e["port"], e["rail"], None,
                    "a peer (switch and switch port) at the other end of rail %d" % e["rail"], "none",
                    "nothing answered on %s (rail %d): no LLDP neighbour on RoCE, no subnet manager view on "
                    "InfiniBand; its rail cannot be checked" % (_where(e), e["rail"]),
                    "check the cable of %s on %s and %s" % (_where(e), host, LLDP_HINT)))
    return out


def _shared_switch_ports(m):
    """Two (or more) host ports on one switch port."""
    by_port = {}
    for host in m.order:
        for e in m.hosts[host]:
            if e["peer"]:
                key = (e["peer"].get("chassis_id") or e["peer"]["system_name"], e["peer"]["port_id"])
                by_port.setdefault(key, []).append((host, e))
    out = []
    for group in by_port.values():
        if len(group) < 2:
            continue
        names = ", ".join("%s %s (rail %d)" % (h, _where(e), e["rail"]) for h, e in group)
        for host, e in group:
            out.append(finding(
                host, "error", "rail_map", e["device"], e["port"], e["rail"], _peer_text(e),
                "one host port per switch port", "%s is the peer of %s" % (_peer_text(e), names),
                "two host ports report the same switch port: a stale LLDP entry after a moved cable, a splitter, or "
                "two switches with the same name and no chassis id",
                "check the cables of %s at %s; give each switch its own hostname" % (names, _peer_text(e))))
    return out


def _expected_text(m, rail):
    if m.declared is not None:
        return "a switch matching %s[%d] (%s)" % (VARIABLE, rail, _globs_text(m.declared[rail]))
    group = m.groups().get(str(rail)) or []
    return "rail %d's switch%s (%s)" % (rail, "es" if len(group) > 1 else "", ", ".join(group) or "none inferred")


def _misplaced(m):
    """Crossed pairs, ports on another rail's switch (or none), ports on tied switches."""
    out = []
    groups = m.groups()
    for host in m.order:
        wrong = [e for e in m.hosts[host] if e["peer"] and not m.on_own_rail(e)]
        by_rail = dict((e["rail"], e) for e in wrong)
        paired = set()
        for e in wrong:
            other_rail = m.rail_of(e["peer"]["system_name"])
            other = by_rail.get(other_rail) if other_rail is not None else None
            if (other is not None and e["rail"] not in paired and other_rail not in paired
                    and m.rail_of(other["peer"]["system_name"]) == e["rail"]):
                paired.update((e["rail"], other_rail))
                out.append(finding(
                    host, "error", "rail_map", e["device"], e["port"], e["rail"], _peer_text(e),
                    "%s (rail %d) on %s, %s (rail %d) on %s" % (_where(e), e["rail"], _expected_text(m, e["rail"]),
                                                                _where(other), other_rail, _expected_text(m, other_rail)),
                    "%s on %s (rail %d's), %s on %s (rail %d's)" % (_where(e), _peer_text(e), other_rail, _where(other),
                                                                    _peer_text(other), e["rail"]),
                    "a crossed cable: rails %d and %d of %s are swapped; every link is up at full rate, but NCCL's "
                    "rail-%d traffic enters rail %d's switch and crosses the spine (or finds no path on a "
                    "rail-isolated fabric)" % (e["rail"], other_rail, host, e["rail"], other_rail),
                    "swap the cables of %s and %s on %s (now at %s and %s)" % (
                        _where(e), _where(other), host, _peer_text(e), _peer_text(other))))
        for e in wrong:
            if e["rail"] in paired:
                continue
            switch = e["peer"]["system_name"]
            if switch in m.ties:
                counts = m.at_switch[switch]
                others = ["%s %s (rail %d)" % (h, _where(x), x["rail"]) for h in m.order for x in m.hosts[h]
                          if x["peer"] and x["peer"]["system_name"] == switch and x["rail"] != e["rail"]]
                out.append(finding(
                    host, "error", "rail_map", e["device"], e["port"], e["rail"], _peer_text(e),
                    "a switch that serves one rail", "%s is reached by %s" % (switch, ", ".join(
                        "%d port(s) of rail %d" % (counts[r], r) for r in m.ties[switch])),
                    "%s serves no one rail: as many ports of rails %s reach it, so the map cannot tell which cable is "
                    "wrong (%s here; also %s)" % (switch, ", ".join(str(r) for r in m.ties[switch]), _where(e),
                                                  ", ".join(others[:4]) + (" ..." if len(others) > 4 else "")),
                    "check the cables named here; declare the rails' switches (%s: %s) so the map knows them"
                    % (VARIABLE, FORMS)))
                continue
            served = m.rail_of(switch)
            on = ("rail %d's switch" % served) if served is not None else "a switch of no rail"
            out.append(finding(
                host, "error", "rail_map", e["device"], e["port"], e["rail"], _peer_text(e),
                _expected_text(m, e["rail"]), "%s (%s)" % (_peer_text(e), on),
                "%s (rail %d) is cabled to %s, %s: NCCL's rail-%d traffic from %s leaves the rail" % (
                    _where(e), e["rail"], switch, on, e["rail"], host),
                "move the cable of %s on %s to a port of %s%s" % (
                    _where(e), host, ", ".join(groups.get(str(e["rail"])) or []) or _expected_text(m, e["rail"]),
                    "" if m.declared is None or served is not None else
                    ", or add %s to %s[%d] if it serves rail %d" % (switch, VARIABLE, e["rail"], e["rail"]))))
    return out


def build(hosts, rail_switches=None):
    """The rail map and its findings (see the module's docstring). ``hosts``: ``{host: [{rail, device, port, peer}]}``;
    ``rail_switches``: ``rdma_rail_switches`` as the user set it. Raises FabricInputError (naming
    ``rdma_rail_switches`` for a bad form, or a rail the hosts have and it does not name)."""
    hosts = validate_hosts(hosts)
    declared = validate_rail_switches(rail_switches)
    m = _Map(hosts, declared)
    if declared is not None and m.rails and m.rails[-1] >= len(declared):
        raise FabricInputError("%s has %d item(s) (rails 0-%d), but the hosts have rails 0-%d: give one item per rail "
                               "(%s)." % (VARIABLE, len(declared), len(declared) - 1, m.rails[-1], FORMS))
    findings = _missing(m) + _shared_switch_ports(m)
    shared, counted = m.shared_hosts()
    if declared is not None:
        basis, note = "declared", "rail r's switches are those matching %s[r]" % VARIABLE
    elif counted and 2 * len(shared) > counted:
        basis = "none"
        note = ("not a rail-optimised fabric: %d of %d hosts have two or more rails on one switch (%s); the rails are "
                "not checked unless declared (%s)" % (len(shared), counted, ", ".join(shared[:3]) +
                                                      (" ..." if len(shared) > 3 else ""), VARIABLE))
    else:
        basis = "inferred"
        note = "each switch serves the rail most of its host ports are on"
        if m.ties:
            tied = sorted(m.ties, key=natural_key)
            note += "; %s serve%s no one rail (a tie)" % (", ".join(tied), "" if len(tied) > 1 else "s")
    if basis != "none":
        findings += _misplaced(m)
    return {"rail_map": _rail_map(m), "findings": findings, "basis": basis, "note": note,
            "rail_switches": m.groups() if basis != "none" else {}}


def switch_ports(rail_map):
    """``{switch: {switch_port: {host, rail, device, port}}}``: the switch ports the compute ports reach, from a
    ``rail_map`` (``build(...)["rail_map"]``), in natural order. What ``switch_intent`` works on."""
    out = {}
    for host in sorted(rail_map, key=natural_key):
        for rail, entry in sorted(rail_map[host].items(), key=lambda item: int(item[0])):
            if entry.get("switch") and entry.get("switch_port"):
                out.setdefault(entry["switch"], {})[entry["switch_port"]] = {
                    "host": host, "rail": int(rail), "device": entry["device"], "port": entry["port"]}
    return dict((s, dict(sorted(out[s].items(), key=lambda item: natural_key(item[0]))))
                for s in sorted(out, key=natural_key))
