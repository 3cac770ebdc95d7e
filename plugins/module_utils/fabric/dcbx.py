# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The IEEE 802.1Qaz (DCBX) TLVs a switch advertises, decoded from the bytes lldpd keeps as unknown TLVs.

lldpd decodes none of the 802.1Qaz TLVs: it keeps each organizationally specific TLV it does not know with its OUI,
subtype and information string, and ``lldpcli`` prints the information string (after OUI and subtype) as
upper-case hex octets joined by commas (``08,08``), in every output format. This module turns those octets into the
switch's lossless settings.

The TLVs (OUI 00-80-C2; IEEE 802.1Q-2018 annex D.2.9-D.2.11, first in 802.1Qaz-2011), the information string after
OUI and subtype, most significant bit first:

* subtype 9, ETS Configuration (21 octets)::

      octet 0      Willing (bit 7) | CBS (bit 6) | reserved (bits 5-3) | Max TCs (bits 2-0, 0 means 8)
      octets 1-4   Priority Assignment Table: 8 x 4 bits, priority 0 in the high nibble of octet 1
      octets 5-12  TC Bandwidth Table: percent of TC 0..7
      octets 13-20 TSA Assignment Table: TC 0..7 (0 strict priority, 1 credit-based shaper, 2 ETS, 255 vendor)

* subtype 10, ETS Recommendation (21 octets): octet 0 reserved, then the same three tables;
* subtype 11, PFC Configuration (2 octets)::

      octet 0      Willing (bit 7) | MBC (bit 6) | reserved (bits 5-4) | PFC cap (bits 3-0)
      octet 1      PFC Enable: bit n set = PFC on priority n

* subtype 12, Application Priority (1 + 3n octets): octet 0 reserved, then n entries of::

      octet 0      Priority (bits 7-5) | reserved (bits 4-3) | Sel (bits 2-0)
      octets 1-2   Protocol ID (an Ethertype, a well-known port or, with Sel 5, a DSCP value)

The decoded ``dcbx`` (the public shape of the facts, ``None`` when the switch sends none of these TLVs)::

    {pfc: {willing, mbc, cap, enabled: [priorities]} | None,
     app: [{selector, selector_name, protocol, priority}],
     ets: {willing, cbs, max_tcs, prio_tc, tc_bw, tc_tsa, reco_prio_tc, reco_tc_bw, reco_tc_tsa} | None,
     problems: [text]}

ETS names follow the host side's (iproute2 ``dcb ets``: ``prio_tc``, ``tc_bw``, ``tc_tsa`` with TSA names
``strict``/``cbs``/``ets``/``vendor``), so that the switch's settings compare with the host's key by key.
A malformed or truncated TLV never raises: what can be read is kept and the defect is a line in ``problems``.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

OUI_8021 = "00,80,C2"
SUBTYPE_ETS_CONFIG = 9
SUBTYPE_ETS_RECO = 10
SUBTYPE_PFC = 11
SUBTYPE_APP = 12
SUBTYPES = (SUBTYPE_ETS_CONFIG, SUBTYPE_ETS_RECO, SUBTYPE_PFC, SUBTYPE_APP)
TLV_NAMES = {
    SUBTYPE_ETS_CONFIG: "ETS Configuration", SUBTYPE_ETS_RECO: "ETS Recommendation",
    SUBTYPE_PFC: "PFC Configuration", SUBTYPE_APP: "Application Priority",
}
NUM_PRIOS = 8
NUM_TCS = 8
ETS_LEN = 21
PFC_LEN = 2

# Transmission Selection Algorithm (802.1Q-2018 table 8-6), named as iproute2 dcb and the kernel's dcbnl.h name them
TSA_NAMES = {0: "strict", 1: "cbs", 2: "ets", 255: "vendor"}

# APP selector field (802.1Q-2018 table D-9; 1-4 from 802.1Qaz-2011, 5 DSCP from 802.1Q-2014)
SEL_ETHERTYPE = 1
SEL_TCP_SCTP = 2
SEL_UDP_DCCP = 3
SEL_TCP_SCTP_UDP_DCCP = 4
SEL_DSCP = 5
SELECTOR_NAMES = {
    SEL_ETHERTYPE: "ethertype", SEL_TCP_SCTP: "tcp_sctp", SEL_UDP_DCCP: "udp_dccp",
    SEL_TCP_SCTP_UDP_DCCP: "tcp_sctp_udp_dccp", SEL_DSCP: "dscp",
}
# the selectors under which a UDP port (RoCE v2's 4791) is mapped
UDP_SELECTORS = (SEL_UDP_DCCP, SEL_TCP_SCTP_UDP_DCCP)
ROCE_V2_UDP_PORT = 4791

_HEX_OCTET = re.compile(r"^[0-9A-Fa-f]{1,2}$")


def parse_octets(text):
    """``"08,08"`` (lldpcli's form of an information string) -> ``(bytearray, problem)``; ``problem`` is None or a
    sentence. An empty string is zero octets."""
    text = (text or "").strip()
    if not text:
        return bytearray(), None
    out = bytearray()
    for part in text.split(","):
        part = part.strip()
        if not _HEX_OCTET.match(part):
            return out, "octet %r is not hexadecimal" % part
        out.append(int(part, 16))
    return out, None


def _tlv_label(subtype):
    return "%s TLV (OUI 00-80-C2, subtype %d)" % (TLV_NAMES.get(subtype, "unknown"), subtype)


def _short(subtype, data, need):
    return "%s: %d octets, %d expected; not decoded" % (_tlv_label(subtype), len(data), need)


def _nibbles(data):
    """The 4 octets of a Priority Assignment Table -> the TC of priority 0..7."""
    out = []
    for octet in data[:4]:
        out.extend([octet >> 4, octet & 0x0F])
    return out


def _tsa_name(value):
    return TSA_NAMES.get(value, "reserved(%d)" % value)


def _ets_tables(data):
    """Octets 1-20 of an ETS TLV -> (prio_tc, tc_bw, tc_tsa)."""
    return _nibbles(data[1:5]), list(data[5:13]), [_tsa_name(v) for v in data[13:21]]


def decode_ets_config(data):
    """ETS Configuration (subtype 9) -> ``({willing, cbs, max_tcs, prio_tc, tc_bw, tc_tsa}, problems)``; None when
    shorter than its 21 octets."""
    if len(data) < ETS_LEN:
        return None, [_short(SUBTYPE_ETS_CONFIG, data, ETS_LEN)]
    prio_tc, tc_bw, tc_tsa = _ets_tables(data)
    max_tcs = data[0] & 0x07
    ets = {"willing": bool(data[0] & 0x80), "cbs": bool(data[0] & 0x40), "max_tcs": max_tcs or 8,
           "prio_tc": prio_tc, "tc_bw": tc_bw, "tc_tsa": tc_tsa}
    return ets, _ets_problems(SUBTYPE_ETS_CONFIG, prio_tc, tc_bw, tc_tsa)


def decode_ets_reco(data):
    """ETS Recommendation (subtype 10) -> ``({reco_prio_tc, reco_tc_bw, reco_tc_tsa}, problems)``."""
    if len(data) < ETS_LEN:
        return None, [_short(SUBTYPE_ETS_RECO, data, ETS_LEN)]
    prio_tc, tc_bw, tc_tsa = _ets_tables(data)
    reco = {"reco_prio_tc": prio_tc, "reco_tc_bw": tc_bw, "reco_tc_tsa": tc_tsa}
    return reco, _ets_problems(SUBTYPE_ETS_RECO, prio_tc, tc_bw, tc_tsa)


def _ets_problems(subtype, prio_tc, tc_bw, tc_tsa):
    """What 802.1Q forbids in the tables: a TC number above 7 (reserved), ETS shares that do not add up to 100."""
    problems = []
    bad = [p for p, tc in enumerate(prio_tc) if tc >= NUM_TCS]
    if bad:
        problems.append("%s: priorities %s assigned to a reserved TC" % (_tlv_label(subtype), bad))
    ets_share = sum(bw for bw, tsa in zip(tc_bw, tc_tsa) if tsa == "ets")
    if "ets" in tc_tsa and ets_share != 100:
        problems.append("%s: the ETS bandwidth shares add up to %d%%, not 100%%" % (_tlv_label(subtype), ets_share))
    return problems


def decode_pfc(data):
    """PFC Configuration (subtype 11) -> ``({willing, mbc, cap, enabled}, problems)``."""
    if len(data) < PFC_LEN:
        return None, [_short(SUBTYPE_PFC, data, PFC_LEN)]
    pfc = {"willing": bool(data[0] & 0x80), "mbc": bool(data[0] & 0x40), "cap": data[0] & 0x0F,
           "enabled": [p for p in range(NUM_PRIOS) if data[1] & (1 << p)]}
    problems = []
    if pfc["cap"] and len(pfc["enabled"]) > pfc["cap"]:
        problems.append("%s: PFC on %d priorities, more than the %d the switch says it can"
                        % (_tlv_label(SUBTYPE_PFC), len(pfc["enabled"]), pfc["cap"]))
    return pfc, problems


def decode_app(data):
    """Application Priority (subtype 12) -> ``([{selector, selector_name, protocol, priority}], problems)``; the
    complete entries of a truncated table are kept."""
    if len(data) < 1:
        return [], [_short(SUBTYPE_APP, data, 1)]
    problems = []
    body = data[1:]
    if len(body) % 3:
        problems.append("%s: %d octets after the reserved one, not a whole number of 3-octet entries; the last %d "
                        "ignored" % (_tlv_label(SUBTYPE_APP), len(body), len(body) % 3))
    entries = []
    for i in range(0, len(body) - len(body) % 3, 3):
        selector = body[i] & 0x07
        entry = {"selector": selector, "selector_name": SELECTOR_NAMES.get(selector, "reserved"),
                 "protocol": (body[i + 1] << 8) | body[i + 2], "priority": body[i] >> 5}
        if selector not in SELECTOR_NAMES:
            problems.append("%s: entry %d has the reserved selector %d" % (_tlv_label(SUBTYPE_APP), i // 3, selector))
        elif selector == SEL_DSCP and entry["protocol"] > 63:
            problems.append("%s: entry %d maps DSCP %d (above 63)" % (_tlv_label(SUBTYPE_APP), i // 3,
                                                                      entry["protocol"]))
        entries.append(entry)
    return entries, problems


_DECODERS = {SUBTYPE_ETS_CONFIG: decode_ets_config, SUBTYPE_ETS_RECO: decode_ets_reco,
             SUBTYPE_PFC: decode_pfc, SUBTYPE_APP: decode_app}


def is_dcbx_tlv(oui, subtype):
    """True for an IEEE 802.1Qaz TLV: OUI 00-80-C2 (any case, ``,``/``-``/``:`` separated), subtype 9-12."""
    norm = re.sub(r"[-:]", ",", str(oui or "")).upper()
    return norm == OUI_8021 and to_int(subtype) in SUBTYPES


def to_int(text):
    """A decimal field as lldpcli prints it (``" 11"``) -> int, or None when it is none (lldp.py reads MFS with it)."""
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def decode(tlvs):
    """The 802.1Qaz TLVs among ``tlvs`` (each ``{oui, subtype, value}`` as lldpcli prints them, ``len`` optional)
    -> the ``dcbx`` dict, or None when there is none of them. Never raises on bad input: each defect is a line in
    ``problems`` (a repeated TLV: the first one counts, as 802.1Q allows one of each per LLDPDU)."""
    dcbx = {"pfc": None, "app": [], "ets": None, "problems": []}
    seen = set()
    for tlv in tlvs or ():
        if not isinstance(tlv, dict) or not is_dcbx_tlv(tlv.get("oui"), tlv.get("subtype")):
            continue
        subtype = to_int(tlv.get("subtype"))
        if subtype in seen:
            dcbx["problems"].append("%s sent more than once; the first one is used" % _tlv_label(subtype))
            continue
        seen.add(subtype)
        data, problem = parse_octets(tlv.get("value"))
        if problem:
            dcbx["problems"].append("%s: %s; not decoded" % (_tlv_label(subtype), problem))
            continue
        length = to_int(tlv.get("len"))
        if length is not None and length != len(data):
            dcbx["problems"].append("%s: lldpcli says %d octets and prints %d" % (_tlv_label(subtype), length,
                                                                                  len(data)))
        decoded, problems = _DECODERS[subtype](data)
        dcbx["problems"].extend(problems)
        if subtype == SUBTYPE_PFC:
            dcbx["pfc"] = decoded
        elif subtype == SUBTYPE_APP:
            dcbx["app"] = decoded
        elif decoded is not None:
            ets = dcbx["ets"] or {}
            ets.update(decoded)
            dcbx["ets"] = ets
    return dcbx if seen else None


def app_priorities(dcbx, selectors, protocol):
    """The priorities the switch's APP table gives ``protocol`` under any of ``selectors`` (sorted, no repeats):
    ``app_priorities(dcbx, [SEL_DSCP], 26)``, ``app_priorities(dcbx, UDP_SELECTORS, ROCE_V2_UDP_PORT)``."""
    if not dcbx:
        return []
    return sorted(set(e["priority"] for e in dcbx.get("app") or () if e.get("selector") in selectors
                      and e.get("protocol") == protocol))
