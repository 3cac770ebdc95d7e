# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The switch side of each RoCE link: what every switch port a compute port reaches should be set to, rendered for
the switch automation users run (NVIDIA Cumulus NVUE, SONiC ``config apply-patch``), and whether the switch agrees
with the host, from what it advertises over LLDP (pure Python, no Ansible imports; the collection applies nothing to
switches).

The **profile** of a link is plain data (the roce role's, as ``link_profile`` reads it from one netdev's settings of
``qos/roce_profile``): ``{dscp, priority, lossless, ecn, cnp_dscp, cnp_priority, mtu, trust}``: RoCE data DSCP and
its priority, the priorities with PFC (``roce_pfc_priorities``; empty: RoCE without PFC), with ECN, the CNPs' DSCP and
priority, the host netdev's MTU (IP MTU, as Linux counts it), the trust (``dscp`` or ``pcp``).

**Intent** (``intent``): ``{switch: {dscp_to_priority, lossless, ecn, cnp_priority, trust, conflicts, ports:
{switch_port: {host, rail, device, port, lossless, ecn, mtu}}}}``. The DSCP map, lossless and ECN priorities are
switch-wide on both systems (NVUE ``default-global``, SONiC's ``AZURE`` maps), the PFC list and MTU per port.

**Renderings**, checked against the vendors' documented forms:

- NVUE (``render_nvue``): ``nv set qos roce mode lossless``, the ``default-global`` DSCP (or PCP) map, PFC
  switch priorities, egress queue (traffic class) and ECN, the ports' MTU and 802.1Qaz TLVs (``lldp dcbx-pfc-tlv``,
  ``application-tlv udp-port 4791``), ``nv config apply``;
- SONiC (``render_sonic``): an RFC 6902 patch of config_db for ``config apply-patch``: ``DSCP_TO_TC_MAP`` entries
  (traffic class = priority, as SONiC's stock maps keep TC n on queue n and PFC priority n), ``PORT_QOS_MAP``
  ``pfc_enable``, ``WRED_PROFILE`` ``ecn`` and each lossless queue's ``wred_profile``, ``PORT`` ``mtu``; ``add``
  replaces an existing member (RFC 6902 4.1). With ``notes``: **SONiC's default trap**: the stock ``qos_config.j2``
  (sonic-buildimage ``files/build_templates``) maps DSCP 3 and 4 to the lossless TCs 3 and 4, 5 to 2, 8 to 0, 46 to
  5, 48 to 6 and every other DSCP to the lossy TC 1: NVIDIA's RoCE DSCP 26 lands on TC 1, dropped under congestion,
  while every host check passes; the patch carries the map entry. Also noted: a lossless priority other than 3 or 4
  needs a lossless buffer profile SONiC's stock buffers do not have; SONiC advertises a port's *alias* as its LLDP
  port id (lldpmgrd), while config_db keys are port names (``show interfaces alias``: pass ``port_names``); GCU's
  field validators refuse some ``WRED_PROFILE`` changes on some ASICs (the patch sets ``ecn_all``, the stock value).

**Agreement of one link** (``agreement``; checks ``switch_dcbx``, ``switch_pfc``, ``switch_app``, ``switch_mtu``), from
the peer's ``dcbx`` (``{pfc: {willing, enabled}, app: [{selector, protocol, priority}], ets}``) and ``mfs``:

- no DCBX TLVs: ``switch_dcbx`` warning, "unknown", with how to turn them on; PFC and APP are then not judged;
- ``switch_pfc``: PFC enabled on every lossless priority of the profile (error per missing priority list);
- ``switch_app``: APP selector 5 (DSCP) entries map the RoCE DSCP to the RoCE priority; a selector 3 or 4 entry for UDP
  port 4791 (RoCE v2), where advertised, too. An APP table with DSCP entries but none for the RoCE DSCP is an error
  (the switch classifies RoCE by a map that leaves it out); no DSCP entry and no UDP 4791 entry: a warning;
- ``switch_mtu``: the 802.3 maximum frame size counts the whole frame; a host MTU M needs
  ``M + 18`` (Ethernet header 14, FCS 4), ``M + 22`` with an 802.1Q tag (trust ``pcp``: priority-tagged frames);
  no MFS TLV: a warning.
Each finding names the switch and port (``peer``) and what to set there in NVUE and SONiC terms.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric.rail_map import FabricInputError, finding, switch_ports
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key

PROFILE_KEYS = ("dscp", "priority", "lossless", "ecn", "cnp_dscp", "cnp_priority", "mtu", "trust")
TRUSTS = ("dscp", "pcp")
ROCE_UDP_PORT = 4791
SELECTOR_DSCP = 5
SELECTORS_UDP = (3, 4)          # 802.1Qaz APP: 3 UDP/DCCP port, 4 TCP/SCTP/UDP/DCCP port
ETHERNET_OVERHEAD = 18          # header 14 + FCS 4
VLAN_TAG = 4
# sonic-buildimage files/build_templates/qos_config.j2, DSCP_TO_TC_MAP AZURE: every DSCP not listed goes to TC 1
SONIC_STOCK_DSCP_TC = {3: 3, 4: 4, 5: 2, 8: 0, 46: 5, 48: 6}
SONIC_STOCK_LOSSY_TC = 1
SONIC_STOCK_LOSSLESS = (3, 4)
# NVIDIA's firmware defaults for CNP (mlxconfig CNP_DSCP_P1 48, CNP_802P_PRIO_P1 6)
CNP_DEFAULT = {"dscp": 48, "priority": 6}
SONIC_DSCP_MAP = "AZURE"
SONIC_WRED_PROFILE = "AZURE_LOSSLESS"
NVUE_TLV_NOTE = "# lldp TLV switches take on/off up to Cumulus Linux 5.14, enabled/disabled from 5.15"


# --------------------------------------------------------------------------------------------------- the profile
def _prio(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 7


def validate_profile(profile, where="profile"):
    """The link profile, checked -> a normalised copy (sorted priority lists). Raises FabricInputError naming the key."""
    if not isinstance(profile, dict):
        raise FabricInputError("%s must be a dict {%s}; got %s" % (where, ", ".join(PROFILE_KEYS),
                                                                   type(profile).__name__))
    unknown = sorted(str(k) for k in profile if k not in PROFILE_KEYS)
    if unknown:
        raise FabricInputError("%s: unknown key(s) %s; allowed: %s" % (where, ", ".join(unknown), ", ".join(PROFILE_KEYS)))
    out = {"trust": profile.get("trust", "dscp")}
    for key in ("dscp", "cnp_dscp"):
        value = profile.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 63:
            raise FabricInputError("%s.%s must be a DSCP 0-63; got %r" % (where, key, value))
        out[key] = value
    for key in ("priority", "cnp_priority"):
        if not _prio(profile.get(key)):
            raise FabricInputError("%s.%s must be a priority 0-7; got %r" % (where, key, profile.get(key)))
        out[key] = profile[key]
    for key in ("lossless", "ecn"):
        value = profile.get(key, [])
        if not isinstance(value, (list, tuple)) or not all(_prio(p) for p in value):
            raise FabricInputError("%s.%s must be a list of priorities 0-7; got %r" % (where, key, value))
        out[key] = sorted(set(value))
    mtu = profile.get("mtu")
    if not isinstance(mtu, int) or isinstance(mtu, bool) or mtu < 68:
        raise FabricInputError("%s.mtu must be the host netdev's MTU in bytes; got %r" % (where, mtu))
    out["mtu"] = mtu
    if out["trust"] not in TRUSTS:
        raise FabricInputError("%s.trust must be one of %s; got %r" % (where, ", ".join(TRUSTS), out["trust"]))
    return out


def link_profile(qos, mtu):
    """A link profile from one netdev's settings as ``qos/roce_profile.profile`` gives them (``{trust, pfc, ecn,
    dscp2prio, cnp_dscp, cnp_priority, tos, ...}``: the RoCE DSCP is ``tos >> 2``) and the netdev's MTU."""
    dscp = int(qos["tos"]) >> 2
    return validate_profile({"dscp": dscp, "priority": dict((int(k), v) for k, v in qos["dscp2prio"].items())[dscp],
                             "lossless": list(qos.get("pfc") or []), "ecn": list(qos.get("ecn") or []),
                             "cnp_dscp": qos["cnp_dscp"], "cnp_priority": qos["cnp_priority"], "mtu": mtu,
                             "trust": qos.get("trust") or "dscp"})


def declared_profile(params, mtu):
    """A link profile from the roce role's declared ``roce_qos`` parameters of one netdev (``roce_declared_qos``:
    ``roce_tos`` for the ToS) and its MTU, or None when they do not make one. The CNP settings are not compared with
    the switch (its APP and PFC TLVs do not carry them): where the role leaves them to the firmware (no ``cnp_*``
    parameter), NVIDIA's firmware defaults stand in (``CNP_DEFAULT``)."""
    try:
        qos = dict(params, tos=params["roce_tos"], cnp_dscp=params.get("cnp_dscp", CNP_DEFAULT["dscp"]),
                   cnp_priority=params.get("cnp_priority", CNP_DEFAULT["priority"]))
        return link_profile(qos, int(mtu))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def frame_size(profile):
    """The 802.3 maximum frame size a link needs for the host's MTU (see the module's docstring)."""
    return profile["mtu"] + ETHERNET_OVERHEAD + (VLAN_TAG if profile["trust"] == "pcp" else 0)


# ---------------------------------------------------------------------------------------------------- the intent
def intent(rail_map, profile, host_profiles=None, switch_mtu=None):
    """The expected settings of every switch port a compute port reaches (see the module's docstring). ``rail_map``:
    ``rail_map.build(...)["rail_map"]``; ``profile``: the link profile of every host, ``host_profiles`` ``{host:
    profile}`` where a host differs; ``switch_mtu``: the MTU to give the switch ports (default: the host's, the
    least that fits; a site running 9216 gives it)."""
    default = validate_profile(profile)
    own = dict((h, validate_profile(p, "host_profiles.%s" % h)) for h, p in (host_profiles or {}).items())
    if switch_mtu is not None and (not isinstance(switch_mtu, int) or isinstance(switch_mtu, bool)):
        raise FabricInputError("switch_mtu must be an MTU in bytes or null; got %r" % (switch_mtu,))
    out = {}
    for switch, ports in switch_ports(rail_map).items():
        spec = {"dscp_to_priority": {}, "lossless": set(), "ecn": set(), "cnp_priority": None, "trust": None,
                "conflicts": [], "ports": {}}
        for switch_port, link in ports.items():
            prof = own.get(link["host"], default)
            for dscp, prio in ((prof["dscp"], prof["priority"]), (prof["cnp_dscp"], prof["cnp_priority"])):
                have = spec["dscp_to_priority"].setdefault(dscp, prio)
                if have != prio:
                    spec["conflicts"].append("DSCP %d: priority %d for %s, %d for another host on %s" % (
                        dscp, prio, link["host"], have, switch))
            for key in ("cnp_priority", "trust"):
                if spec[key] not in (None, prof[key]):
                    spec["conflicts"].append("%s: %s for %s, %s for another host" % (key, prof[key], link["host"], spec[key]))
                spec[key] = spec[key] if spec[key] is not None else prof[key]
            spec["lossless"].update(prof["lossless"])
            spec["ecn"].update(prof["ecn"])
            spec["ports"][switch_port] = dict(link, lossless=prof["lossless"], ecn=prof["ecn"],
                                              mtu=switch_mtu if switch_mtu is not None else prof["mtu"])
        spec["lossless"], spec["ecn"] = sorted(spec["lossless"]), sorted(spec["ecn"])
        spec["dscp_to_priority"] = dict(sorted(spec["dscp_to_priority"].items()))
        out[switch] = spec
    return out


# ------------------------------------------------------------------------------------------------------- NVUE
def _ports_by(spec, key):
    """[(value, "swp1,swp2")] of the ports grouped by ``key``'s value, in port order."""
    groups = {}
    for port, entry in spec["ports"].items():
        value = tuple(entry[key]) if isinstance(entry[key], list) else entry[key]
        groups.setdefault(value, []).append(port)
    return [(value, ",".join(ports)) for value, ports in groups.items()]


def render_nvue(switch, spec):
    """NVUE commands for one switch of ``intent`` (a text, one command a line, comments with ``#``)."""
    lines = ["# %s: RoCE %s for %s host port(s) (hpcnet.rdma switch intent)" % (
        switch, "lossless" if spec["lossless"] else "lossy (ECN only)", len(spec["ports"]))]
    lines += ["# CONFLICT: %s" % c for c in spec["conflicts"]]
    lines.append("nv set qos roce mode %s" % ("lossless" if spec["lossless"] else "lossy"))
    if spec["trust"] == "pcp":
        lines.append("nv set qos mapping default-global trust l2")
        prios = sorted(set(spec["dscp_to_priority"].values()))
        lines += ["nv set qos mapping default-global pcp %d switch-priority %d" % (p, p) for p in prios]
    else:
        lines.append("nv set qos mapping default-global trust both")
        lines += ["nv set qos mapping default-global dscp %d switch-priority %d" % (d, p)
                  for d, p in spec["dscp_to_priority"].items()]
    if spec["lossless"]:
        lines.append("nv set qos pfc default-global switch-priority %s" % ",".join(str(p) for p in spec["lossless"]))
    for prio in sorted(set(spec["lossless"]) | set(spec["ecn"]) | {spec["cnp_priority"]}):
        lines.append("nv set qos egress-queue-mapping default-global switch-priority %d traffic-class %d" % (prio, prio))
    lines += ["nv set qos congestion-control default-global traffic-class %d ecn enable" % p for p in spec["ecn"]]
    for mtu, ports in _ports_by(spec, "mtu"):
        lines.append("nv set interface %s link mtu %d" % (ports, mtu))
    every = ",".join(spec["ports"])
    lines.append(NVUE_TLV_NOTE)
    if spec["lossless"]:
        lines.append("nv set interface %s lldp dcbx-pfc-tlv on" % every)
    lines.append("nv set interface %s lldp application-tlv udp-port %d" % (every, ROCE_UDP_PORT))
    lines.append("nv config apply")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------------ SONiC
def _pointer(*parts):
    """An RFC 6901 JSON pointer (``~`` -> ``~0``, ``/`` -> ``~1`` in each part)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def sonic_stock_tc(dscp):
    """The traffic class SONiC's stock ``DSCP_TO_TC_MAP AZURE`` gives ``dscp``."""
    return SONIC_STOCK_DSCP_TC.get(dscp, SONIC_STOCK_LOSSY_TC)


def render_sonic(switch, spec, port_names=None, dscp_map=SONIC_DSCP_MAP, wred_profile=SONIC_WRED_PROFILE):
    """``{patch, notes}`` for one switch of ``intent``: ``patch`` the RFC 6902 operations for ``config apply-patch``
    (``sonic_patch_text`` writes the file), ``notes`` what the patch cannot say. ``port_names``: ``{LLDP port id
    (alias): config_db port name}`` of this switch; without it the LLDP port ids are used as they are."""
    names = port_names or {}
    patch, notes = [], []
    for dscp, prio in spec["dscp_to_priority"].items():
        patch.append({"op": "add", "path": _pointer("DSCP_TO_TC_MAP", dscp_map, dscp), "value": str(prio)})
        if dscp_map == SONIC_DSCP_MAP and sonic_stock_tc(dscp) != prio:
            notes.append("SONiC's stock %s map (qos_config.j2) sends DSCP %d to TC %d%s, not %d: without the "
                         "/DSCP_TO_TC_MAP/%s/%d entry of this patch the hosts' traffic on DSCP %d is %s under "
                         "congestion while every host check passes" % (
                             dscp_map, dscp, sonic_stock_tc(dscp),
                             " (lossy)" if sonic_stock_tc(dscp) not in SONIC_STOCK_LOSSLESS else "", prio, dscp_map,
                             dscp, dscp, "dropped" if prio in spec["lossless"] else "queued in the wrong class"))
    for port, entry in spec["ports"].items():
        name = names.get(port, port)
        if entry["lossless"]:
            patch.append({"op": "add", "path": _pointer("PORT_QOS_MAP", name, "pfc_enable"),
                          "value": ",".join(str(p) for p in entry["lossless"])})
    if spec["ecn"]:
        patch.append({"op": "add", "path": _pointer("WRED_PROFILE", wred_profile, "ecn"), "value": "ecn_all"})
        for port, entry in spec["ports"].items():
            for prio in entry["ecn"]:
                patch.append({"op": "add", "path": _pointer("QUEUE", "%s|%d" % (names.get(port, port), prio),
                                                            "wred_profile"), "value": wred_profile})
    for port, entry in spec["ports"].items():
        patch.append({"op": "add", "path": _pointer("PORT", names.get(port, port), "mtu"), "value": str(entry["mtu"])})
    odd = [p for p in spec["lossless"] if p not in SONIC_STOCK_LOSSLESS]
    if odd:
        notes.append("priority %s is not one of SONiC's stock lossless priorities (3, 4): it also needs a lossless "
                     "buffer profile (BUFFER_PG) and PFC_PRIORITY_TO_PRIORITY_GROUP_MAP entry, which are per platform "
                     "and not in this patch" % ", ".join(str(p) for p in odd))
    if port_names is None:
        notes.append("SONiC's LLDP sends a port's alias as its port id (lldpmgrd); the patch uses %s's LLDP port ids "
                     "%s as config_db port names: map them with `show interfaces alias` (port_names) if they differ"
                     % (switch, ", ".join(list(spec["ports"])[:3])))
    if spec["ecn"]:
        notes.append("GCU's field validators allow only some %s changes per ASIC; the patch sets ecn to ecn_all, the "
                     "stock value, so it changes nothing there on a stock switch" % wred_profile)
    notes += ["CONFLICT: %s" % c for c in spec["conflicts"]]
    return {"patch": patch, "notes": notes}


def sonic_patch_text(patch):
    """The patch as the file ``config apply-patch <file>`` reads (JSON, two-space indent, newline at the end)."""
    return json.dumps(patch, indent=2) + "\n"


# ------------------------------------------------------------------------------------------- one link's agreement
def _fix_pfc(switch, port, prios):
    text = ",".join(str(p) for p in prios)
    return ("on %s: NVUE `nv set qos roce mode lossless` and `nv set qos pfc default-global switch-priority %s` (a "
            "port in another PFC profile keeps that one: `nv show interface %s qos roce status`), `nv config apply`; "
            "SONiC: config apply-patch with {\"op\": \"add\", \"path\": \"/PORT_QOS_MAP/%s/pfc_enable\", \"value\": "
            "\"%s\"} (the config_db name of the port); then `nv set interface %s lldp dcbx-pfc-tlv on` so it shows"
            % (switch, text, port, port, text, port))


def _fix_dscp(switch, dscp, prio):
    return ("on %s: NVUE `nv set qos mapping default-global dscp %d switch-priority %d`, `nv config apply`; SONiC: "
            "config apply-patch with {\"op\": \"add\", \"path\": \"/DSCP_TO_TC_MAP/%s/%d\", \"value\": \"%d\"} (stock "
            "SONiC maps DSCP %d to TC %d)" % (switch, dscp, prio, SONIC_DSCP_MAP, dscp, prio, dscp, sonic_stock_tc(dscp)))


def _fix_mtu(switch, port, mtu):
    return ("on %s: NVUE `nv set interface %s link mtu %d` (or more, e.g. 9216), `nv config apply`; SONiC: config "
            "apply-patch with {\"op\": \"add\", \"path\": \"/PORT/%s/mtu\", \"value\": \"%d\"} (or more, up to 9216); "
            "or lower the host's roce_mtu" % (switch, port, mtu, port, mtu))


def _dcbx_fix(switch, port):
    return ("turn on the switch's IEEE 802.1Qaz TLVs on %s %s: NVUE `nv set interface %s lldp dcbx-pfc-tlv on`, `nv "
            "set interface %s lldp application-tlv udp-port %d`, `nv config apply`; SONiC's lldpd sends none: compare "
            "the switch's PORT_QOS_MAP and DSCP_TO_TC_MAP with the switch intent instead"
            % (switch, port, port, port, ROCE_UDP_PORT))


def agreement(host, device, port, peer, profile, rail=None):
    """Findings of one RoCE link (host ``device:port``, its ``peer`` fact, the link ``profile``): ``switch_dcbx``,
    ``switch_pfc``, ``switch_app``, ``switch_mtu``; none when the switch agrees. No peer: nothing (``peer_missing``
    is the rail map's)."""
    if not peer:
        return []
    prof = validate_profile(profile)
    switch, sport = peer.get("system_name"), peer.get("port_id")
    where = "%s:%s" % (switch, sport)

    def make(severity, check, expected, found, cause, fix):
        return finding(host, severity, check, device, port, rail, where, expected, found, cause, fix)
    out = []
    dcbx = peer.get("dcbx")
    if not dcbx:
        out.append(make("warning", "switch_dcbx", "the switch's IEEE 802.1Qaz TLVs (PFC, APP) over LLDP", "none",
                        "%s sends no DCBX TLVs on %s: whether it is lossless on priority %s for DSCP %d is unknown, "
                        "never a pass" % (switch, sport, ",".join(str(p) for p in prof["lossless"]) or "(none)",
                                          prof["dscp"]), _dcbx_fix(switch, sport)))
    else:
        out += _pfc(make, prof, dcbx.get("pfc"), switch, sport)
        out += _app(make, prof, dcbx.get("app"), switch, sport)
    out += _mtu(make, prof, peer.get("mfs"), switch, sport)
    return out


def _pfc(make, prof, pfc, switch, sport):
    if not prof["lossless"]:
        return []
    if not isinstance(pfc, dict):
        return [make("warning", "switch_pfc", "PFC on priority %s" % ",".join(str(p) for p in prof["lossless"]),
                     "no PFC TLV", "%s sends DCBX TLVs but no PFC configuration TLV on %s: its PFC is unknown"
                     % (switch, sport), "on %s: NVUE `nv set interface %s lldp dcbx-pfc-tlv on`" % (switch, sport))]
    enabled = sorted(set(pfc.get("enabled") or []))
    missing = [p for p in prof["lossless"] if p not in enabled]
    if not missing:
        return []
    return [make("error", "switch_pfc", "PFC on priority %s" % ",".join(str(p) for p in prof["lossless"]),
                 "PFC on %s" % (",".join(str(p) for p in enabled) or "no priority"),
                 "%s %s has no PFC on priority %s, where the host sends lossless RoCE (DSCP %d on priority %d): the "
                 "switch drops it under congestion instead of pausing the host" % (
                     switch, sport, ",".join(str(p) for p in missing), prof["dscp"], prof["priority"]),
                 _fix_pfc(switch, sport, prof["lossless"]))]


def _app(make, prof, app, switch, sport):
    entries = [e for e in (app or []) if isinstance(e, dict)]
    dscp = [e for e in entries if e.get("selector") == SELECTOR_DSCP]
    udp = [e for e in entries if e.get("selector") in SELECTORS_UDP and e.get("protocol") == ROCE_UDP_PORT]
    out = []
    want = "DSCP %d -> priority %d" % (prof["dscp"], prof["priority"])
    mine = [e for e in dscp if e.get("protocol") == prof["dscp"]]
    wrong = [e for e in mine if e.get("priority") != prof["priority"]]
    if wrong or (dscp and not mine):
        found = ("DSCP %d -> priority %s" % (prof["dscp"], ",".join(str(e.get("priority")) for e in wrong)) if wrong
                 else "DSCP entries for %s only" % ",".join(str(e.get("protocol")) for e in dscp[:8]))
        out.append(make("error", "switch_app", want, found,
                        "%s classifies DSCP %d on %s to %s: the host's RoCE leaves priority %d there%s" % (
                            switch, prof["dscp"], sport, "priority %s" % wrong[0].get("priority") if wrong
                            else "a priority its APP table does not give (its default)", prof["priority"],
                            " and is not lossless" if prof["lossless"] else ""),
                        _fix_dscp(switch, prof["dscp"], prof["priority"])))
    bad_udp = [e for e in udp if e.get("priority") != prof["priority"]]
    if bad_udp:
        out.append(make("error", "switch_app", "UDP %d (RoCE v2) -> priority %d" % (ROCE_UDP_PORT, prof["priority"]),
                        "UDP %d -> priority %s" % (ROCE_UDP_PORT, bad_udp[0].get("priority")),
                        "%s advertises RoCE v2 (UDP %d) on priority %s, the host sends it on %d" % (
                            switch, ROCE_UDP_PORT, bad_udp[0].get("priority"), prof["priority"]),
                        "on %s: NVUE `nv set qos pfc default-global switch-priority %d` and `nv set qos mapping "
                        "default-global dscp %d switch-priority %d` (the RoCE APP TLV follows the RoCE priority, `nv "
                        "show qos roce`); or set the host's roce_priority to %s" % (
                            switch, prof["priority"], prof["dscp"], prof["priority"], bad_udp[0].get("priority"))))
    if not dscp and not udp:
        out.append(make("warning", "switch_app", want, "no DSCP or UDP %d entry in the APP TLV" % ROCE_UDP_PORT,
                        "%s advertises no APP entry for RoCE on %s: its DSCP map is unknown" % (switch, sport),
                        "on %s: NVUE `nv set interface %s lldp application-tlv udp-port %d`; check the DSCP map: %s"
                        % (switch, sport, ROCE_UDP_PORT, _fix_dscp(switch, prof["dscp"], prof["priority"]))))
    return out


def _mtu(make, prof, mfs, switch, sport):
    need = frame_size(prof)
    rule = "frames of %d bytes (MTU %d + %d%s)" % (need, prof["mtu"], need - prof["mtu"],
                                                   ": header, 802.1Q tag, FCS" if prof["trust"] == "pcp"
                                                   else ": header 14, FCS 4")
    if not isinstance(mfs, int) or isinstance(mfs, bool):
        return [make("warning", "switch_mtu", rule, "no maximum frame size TLV",
                     "%s sends no IEEE 802.3 maximum frame size TLV on %s: whether it fits MTU %d is unknown"
                     % (switch, sport, prof["mtu"]),
                     "check the MTU of %s %s (NVUE `nv show interface %s link`; SONiC `show interfaces status`)"
                     % (switch, sport, sport))]
    if mfs >= need:
        return []
    return [make("error", "switch_mtu", rule, "maximum frame size %d" % mfs,
                 "%s %s takes frames up to %d bytes: the host's full-size RoCE frames (MTU %d) are dropped there"
                 % (switch, sport, mfs, prof["mtu"]), _fix_mtu(switch, sport, prof["mtu"]))]


def intent_for_report(spec_by_switch):
    """``intent(...)`` with JSON-safe keys (DSCPs as strings), for the report JSON."""
    out = {}
    for switch in sorted(spec_by_switch, key=natural_key):
        spec = dict(spec_by_switch[switch])
        spec["dscp_to_priority"] = dict((str(d), p) for d, p in spec["dscp_to_priority"].items())
        out[switch] = spec
    return out
