# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""InfiniBand partitions (P_Keys), opensm's side: ``partitions.conf`` parsed as opensm reads it, the vocabulary the
file and the role share (P_Keys, port GUIDs, the IBTA MTU and rate codes, :class:`PartitionConfigError`), the IPoIB
MTU of a partition and the index of a P_Key in a port's P_Key table. The role's side (its ``partitions`` input
checked, the file rendered) is ib_partitions_render.

Pure Python (no Ansible imports). The grammar is opensm's own, as its parser implements it
(``opensm/osm_prtn_config.c``: ``osm_prtn_config_parse_file``, ``parse_part_conf``, ``parse_name_token``,
``partition_add_flag``, ``parse_group_flag``, ``partition_add_port``, ``mgroup_create``) and as
``doc/partition-config.txt`` / ``man opensm`` (PARTITION CONFIGURATION) document it::

    <Partition Definition> : <members> ;
    Partition Definition:  [PartitionName][=PKey][,indx0][,ipoib][,rate=N][,mtu=N][,sl=N][,scope=N]...
                           [,Q_Key=N][,TClass=N][,FlowLabel=N][,defmember=full|limited|both]
    members:               member [, member] ...       member: ALL | ALL_CAS | ALL_SWITCHES | ALL_ROUTERS | SELF
                           | NONE | <PortGUID>, each optionally =full|=limited|=both;
                           or an mgid line: mgid=<IPv6 multicast GID>[,rate=N][,mtu=N][,sl=N][,scope=N][,Q_Key=N]...

* ``#`` starts a comment to the end of the line; blanks are allowed around every delimiter (``= , : ;``).
* A definition ends at ``;``: it may be continued over several lines after the ``:`` (the header, up to the ``:``,
  must be on one line). An ``mgid=`` entry takes the rest of its line (up to ``;`` or the end of the line) as its
  flags, so members after it on the same line are not members (opensm: "this consumes the line").
* Flag names, keywords and membership values match by prefix as opensm's ``strncmp(word, "keyword", strlen(word))``
  does (``limi`` = ``limited``, ``ALL_S`` = ``ALL_SWITCHES``, ``s`` = ``scope`` before ``sl``); ``mgid`` must be
  spelt out. Keywords are case sensitive.
* The P_Key: only its low 15 bits are used (``Default=0xffff`` is 0x7fff). Without one opensm generates one.
  A name that starts with a digit and has no ``=PKey`` is the P_Key (``0x300 : ALL ;``).
* ``rate``, ``mtu``, ``scope`` are IBTA codes (``mtu=4`` is 2048 bytes), not bytes or Gb/s: :data:`MTU_CODES`,
  :data:`RATE_CODES`. When absent opensm uses mtu 4 (2048), rate 3 (10 Gb/s), sl 0, scope 2 (link local).
* Membership: a member without ``=`` gets the definition's ``defmember`` (limited unless set). ``both`` gives both
  a full and a limited P_Key only with ``allow_both_pkeys TRUE`` in opensm.conf, else it is full.
* A P_Key may be defined more than once: opensm merges the definitions (first name wins). :func:`parse_partitions`
  returns one entry per definition, as written.
* No rule for ``Default=0x7fff``: opensm behaves as if ``Default=0x7fff : ALL=limited, SELF=full ;`` were there;
  no file at all: ``Default=0x7fff : ALL=full ;`` (and the IPoIB broadcast group).

What opensm does with a bad file: on a PARSE ERROR (``no partition definition found``, ``bad partition
definition``, ``bad PortGUID``, printed to stderr and the log) it stops reading the file, and opensm 3.3.23 then
logs ``osm_prtn_make_partitions: Partition configuration in error; retrying with default config``: the whole file
is dropped, every port becomes a **full** member of the default partition 0xffff and every other partition is gone
(the same happens to a file that exists but defines nothing, e.g. only comments). Flags and values it cannot use
are only logged as ``PARSE WARN`` at verbose level and skipped. :func:`parse_partitions` raises
:class:`PartitionConfigError` on both, naming the line: either way the file does not do what it says.
"""

from __future__ import absolute_import, division, print_function

import ipaddress
import re

__metaclass__ = type

DEFAULT_PKEY = 0x7FFF
FULL_BIT = 0x8000
PKEY_MASK = 0x7FFF

# IBTA MTU encoding (PortInfo NeighborMTU / MCMemberRecord MTU), as opensm's partitions.conf takes it (ib_types.h
# IB_MTU_LEN_256 .. IB_MTU_LEN_4096). Bytes -> code.
MTU_CODES = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
# IBTA rate encoding, opensm include/iba/ib_types.h IB_PATH_RECORD_RATE_<n>_GBS (same values in rdma-core
# libibmad/iba_types.h). Gb/s -> code.
RATE_CODES = {
    2.5: 2, 10: 3, 30: 4, 5: 5, 20: 6, 40: 7, 60: 8, 80: 9, 120: 10, 14: 11, 56: 12, 112: 13, 168: 14, 25: 15,
    100: 16, 200: 17, 300: 18, 28: 19, 50: 20, 400: 21, 600: 22,
}
MTU_BYTES = dict((code, size) for size, code in MTU_CODES.items())
RATE_GBPS = dict((code, rate) for rate, code in RATE_CODES.items())
OPENSM_DEFAULT_MTU = 4   # OSM_DEFAULT_MGRP_MTU (2048)
OPENSM_DEFAULT_RATE = 3  # OSM_DEFAULT_MGRP_RATE (10 Gb/s)

SELECTORS = ("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF")
MEMBERSHIPS = ("full", "limited", "both")
IPOIB_MODES = ("datagram", "connected")
IPOIB_HEADER = 4           # IPoIB encapsulation header: datagram-mode netdev MTU = IB MTU - 4
IPOIB_CM_MTU = 65520       # connected mode: the kernel's IPOIB_CM_MTU

# header flags in the order opensm tries them (parse_group_flag, then partition_add_flag); prefix match
_GROUP_FLAGS = ("mtu", "rate", "scope", "Q_Key", "TClass", "sl", "FlowLabel")
_PARTITION_FLAGS = ("ipoib", "indx0", "defmember")
_FLAG_KEYS = {"mtu": "mtu", "rate": "rate", "scope": "scope", "Q_Key": "q_key", "TClass": "tclass", "sl": "sl",
              "FlowLabel": "flow_label"}
_C_UINT_RE = re.compile(r"^(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$")
_GUID_HEX_RE = re.compile(r"^0[xX]([0-9a-fA-F]{1,16})$")
_GUID_COLON_RE = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{4}):([0-9a-fA-F]{4}):([0-9a-fA-F]{4})$")


class PartitionConfigError(Exception):
    """A partitions.conf opensm would refuse (or only half use), or role input that cannot be rendered. ``line``:
    the 1-based line of the file, when there is one."""

    def __init__(self, message, line=None):
        super(PartitionConfigError, self).__init__(message if line is None else "line %d: %s" % (line, message))
        self.line = line


# ---------------------------------------------------------------------------------------------------- helpers

def _c_uint(text):
    """A C ``strtoul(text, &end, 0)`` number that uses all of ``text`` (hex 0x.., octal 0.., decimal), else None."""
    text = (text or "").strip()
    if not _C_UINT_RE.match(text):
        return None
    return int(text, 16) if text[:2] in ("0x", "0X") else int(text, 8) if text.startswith("0") else int(text)


def _prefix_match(word, keywords):
    """The first of ``keywords`` that ``word`` abbreviates (opensm's ``!strncmp(word, kw, strlen(word))``); an empty
    word is no match here (opensm would take it for the first keyword)."""
    for keyword in keywords:
        if word and keyword.startswith(word):
            return keyword
    return None


def _split_token(token):
    """``parse_name_token``: ``name[=value]`` with blanks around both stripped; value None without ``=``."""
    name, sep, value = token.partition("=")
    return name.strip(), (value.strip() if sep else None)


def pkey_base(pkey):
    """The partition a P_Key names: its low 15 bits (0x8002 and 0x0002 -> 0x0002)."""
    return int(pkey) & PKEY_MASK


def int_value(value):
    """An int from an int or a numeric string (``"0x8002"``, ``"2"``); None for anything else (bools too)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return _c_uint(value)
    return None


def guid_value(text):
    """A port GUID as opensm or the kernel writes it (``0x0002c903000e0b72``, ``0002:c903:000e:0b72``, or an int) ->
    int, None when it is no GUID (or 0)."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        value = text
    elif isinstance(text, str):
        text = text.strip()
        match = _GUID_HEX_RE.match(text)
        colon = _GUID_COLON_RE.match(text)
        if match:
            value = int(match.group(1), 16)
        elif colon:
            value = int("".join(colon.groups()), 16)
        else:
            return None
    else:
        return None
    return value if 0 < value < (1 << 64) else None


def format_guid(value):
    return "0x%016x" % value


def mtu_code(mtu_bytes):
    """IB MTU in bytes -> opensm's code (2048 -> 4); PartitionConfigError naming the allowed values otherwise."""
    size = int_value(mtu_bytes)
    if size not in MTU_CODES:
        raise PartitionConfigError("mtu %r is not an IB MTU; allowed (bytes): %s" % (
            mtu_bytes, ", ".join(str(size) for size in sorted(MTU_CODES))))
    return MTU_CODES[size]


def _rate_key(rate):
    if isinstance(rate, bool):
        return None
    try:
        value = float(str(rate).strip()) if isinstance(rate, str) else float(rate)
    except (TypeError, ValueError):
        return None
    return value if value in RATE_CODES else None


def rate_code(rate_gbps):
    """A rate in Gb/s -> opensm's code (40 -> 7, 2.5 -> 2); PartitionConfigError naming the allowed values."""
    key = _rate_key(rate_gbps)
    if key is None:
        raise PartitionConfigError("rate %r is not an IB rate; allowed (Gb/s): %s" % (rate_gbps, _rates_text()))
    return RATE_CODES[key]


def _rates_text():
    return ", ".join("%g" % rate for rate in sorted(RATE_CODES))


# ---------------------------------------------------------------------------------------------------- parser

def _new_partition(lineno):
    return {"name": "", "pkey": None, "ipoib": False, "indx0": False, "rate": None, "mtu": None, "sl": None,
            "scope": [], "q_key": None, "tclass": None, "flow_label": None, "defmember": "limited", "members": [],
            "mgroups": [], "line": lineno}


def _group_flag(flag, value, lineno, target, where):
    """``parse_group_flag``: one of mtu/rate/scope/Q_Key/TClass/sl/FlowLabel into ``target`` (True when it is one)."""
    keyword = _prefix_match(flag, _GROUP_FLAGS)
    if keyword is None:
        return False
    number = _c_uint(value) if value is not None else None
    key = _FLAG_KEYS[keyword]
    if keyword == "mtu":
        if number not in MTU_BYTES:
            hint = " (that is bytes; the code is %d)" % MTU_CODES[number] if number in MTU_CODES else ""
            raise PartitionConfigError("%s: flag 'mtu' needs an IB MTU code, got %r%s; allowed: %s" % (
                where, value, hint, ", ".join("%d=%d" % (c, MTU_BYTES[c]) for c in sorted(MTU_BYTES))), lineno)
    elif keyword == "rate":
        if number not in RATE_GBPS:
            raise PartitionConfigError("%s: flag 'rate' needs an IB rate code, got %r; allowed: %s" % (
                where, value, ", ".join("%d=%g" % (c, RATE_GBPS[c]) for c in sorted(RATE_GBPS))), lineno)
    elif keyword == "scope":
        if number is None or not 1 <= number <= 15:
            raise PartitionConfigError("%s: flag 'scope' needs a multicast scope 1-15 (2 link local, 5 site local, "
                                       "8 organization local, 14 global), got %r" % (where, value), lineno)
        if number not in target["scope"]:
            target["scope"].append(number)
        return True
    elif keyword == "sl":
        if number is None or number > 15:
            raise PartitionConfigError("%s: flag 'sl' needs a service level 0-15, got %r" % (where, value), lineno)
    elif keyword == "FlowLabel":
        if number is None or number > 0xFFFFF:
            raise PartitionConfigError("%s: flag 'FlowLabel' needs 0-0xfffff, got %r" % (where, value), lineno)
    else:  # Q_Key (32 bits), TClass (8 bits)
        limit = 0xFFFFFFFF if keyword == "Q_Key" else 0xFF
        if not number or number > limit:
            raise PartitionConfigError("%s: flag '%s' needs a value 1-0x%x, got %r" % (where, keyword, limit, value),
                                       lineno)
    target[key] = number
    return True


def _parse_header(text, lineno):
    """The partition definition before ``:``: name, P_Key and flags."""
    part = _new_partition(lineno)
    tokens = text.split(",")
    name, pkey_text = _split_token(tokens[0])
    if pkey_text is None and name[:1].isdigit():
        name, pkey_text = "", name
    part["name"] = name
    if pkey_text is not None:
        value = _c_uint(pkey_text)
        if value is None or value > 0xFFFF:
            raise PartitionConfigError("bad partition definition: P_Key %r of %r is not a 16-bit number "
                                       "(0x0001-0xffff)" % (pkey_text, name), lineno)
        if not value & PKEY_MASK:
            raise PartitionConfigError("bad partition definition: P_Key %s of %r has no partition bits (opensm would "
                                       "generate a P_Key); allowed: 0x0001-0x7fff" % (pkey_text, name), lineno)
        part["pkey"] = value & PKEY_MASK
    where = "partition %r" % (name or pkey_text or "")
    for token in tokens[1:]:
        flag, value = _split_token(token)
        if not flag:
            raise PartitionConfigError("%s: bad partition flags (empty flag)" % where, lineno)
        if _group_flag(flag, value, lineno, part, where):
            continue
        keyword = _prefix_match(flag, _PARTITION_FLAGS)
        if keyword == "ipoib":
            part["ipoib"] = True
        elif keyword == "indx0":
            part["indx0"] = True
        elif keyword == "defmember":
            member = _prefix_match(value or "", MEMBERSHIPS)
            if member is None:
                raise PartitionConfigError("%s: flag 'defmember' requires full, limited or both, got %r" % (
                    where, value), lineno)
            part["defmember"] = member
        else:
            raise PartitionConfigError("%s: unrecognized partition flag %r; allowed: ipoib, indx0, defmember=, "
                                       "mtu=, rate=, sl=, scope=, Q_Key=, TClass=, FlowLabel=" % (where, flag), lineno)
    return part


def _parse_mgroup(gid_text, flags_text, part, lineno):
    """``mgroup_create``: an ``mgid=`` entry and its flags (the rest of the line), checked as opensm does."""
    where = "partition %r mgid %r" % (part["name"], gid_text)
    try:
        gid = ipaddress.IPv6Address((gid_text or "").strip())
    except ValueError:
        gid = None
    if gid is None or gid.packed[0] != 0xFF:
        raise PartitionConfigError("%s: gid is not multicast (an IPv6-form GID starting ff..)" % where, lineno)
    group = {"mgid": str(gid), "rate": None, "mtu": None, "sl": None, "scope": [], "q_key": None, "tclass": None,
             "flow_label": None}
    for token in flags_text.split(",") if flags_text.strip() else []:
        flag, value = _split_token(token)
        if not _group_flag(flag, value, lineno, group, where):
            raise PartitionConfigError("%s: unrecognized mgroup flag %r; allowed: mtu=, rate=, sl=, scope=, Q_Key=, "
                                       "TClass=, FlowLabel=" % (where, flag), lineno)
    raw = gid.packed
    if raw[2:4] in (b"\x40\x1b", b"\x60\x1b"):  # IPv4 / IPv6 over IB group: must match the broadcast group
        mpkey = int.from_bytes(raw[4:6], "big")
        broadcast = raw == bytes.fromhex("ff12401bffff00000000000000000000")[:12] + b"\xff" * 4
        if not broadcast and mpkey not in (0, part["pkey"]):
            raise PartitionConfigError("%s: IP MC group specified with invalid pkey 0x%04x for partition pkey "
                                       "0x%04x" % (where, mpkey, part["pkey"] or 0), lineno)
        for key, default in (("rate", OPENSM_DEFAULT_RATE), ("mtu", OPENSM_DEFAULT_MTU)):
            mine = group[key] if group[key] is not None else part[key]
            theirs = part[key] if part[key] is not None else default
            if (mine if mine is not None else default) != theirs:
                raise PartitionConfigError("%s: IP MC group specified with invalid %s (%d): the partition broadcast "
                                           "group %s is %d" % (where, key, mine, key, theirs), lineno)
    part["mgroups"].append(group)


def _parse_member(token, part, lineno):
    """``partition_add_port``: one member; None for an empty entry or NONE."""
    name, flag = _split_token(token)
    if not name or "NONE".startswith(name):
        return None
    membership = part["defmember"]
    if flag is not None:
        membership = _prefix_match(flag, MEMBERSHIPS)
    selector = None
    for keyword in SELECTORS:  # first keyword that ``name`` abbreviates, as opensm checks them
        if keyword.startswith(name):
            selector = keyword
            break
    value = None
    if selector is None:
        value = _c_uint(name)
        if not value or value >= 1 << 64:
            raise PartitionConfigError("bad PortGUID %r in partition %r; allowed: ALL, ALL_CAS, ALL_SWITCHES, "
                                       "ALL_ROUTERS, SELF, NONE or a port GUID (0x...)" % (name, part["name"]), lineno)
        selector = format_guid(value)
    if membership is None:  # opensm: PARSE WARN "unrecognized port flag", then limited
        raise PartitionConfigError("partition %r member %r: unrecognized port flag %r (opensm assumes limited); "
                                   "allowed: full, limited, both" % (part["name"], name, flag), lineno)
    return {"selector": selector, "guid": value, "membership": membership}


def parse_partitions(text):
    """A partitions.conf -> ``[{name, pkey, ipoib, indx0, rate, mtu, sl, scope, q_key, tclass, flow_label,
    defmember, members: [{selector, guid, membership}], mgroups: [...], line}]``, one per definition in file order.

    ``pkey``: the low 15 bits (None: opensm generates one); ``rate``/``mtu``: the IBTA codes as written (None: opensm's
    defaults 3 and 4); ``sl``/``q_key``/``tclass``/``flow_label``: None when not given; ``scope``: the scopes given
    (empty: link local); ``selector``: the keyword (abbreviations expanded) or the GUID as ``0x%016x``, with ``guid``
    its int (None for keywords); ``membership``: the member's own or the definition's ``defmember``; ``line``: where
    the definition starts. Raises :class:`PartitionConfigError` (with ``.line``) on what opensm refuses or skips,
    and on a file that defines no partition.
    """
    partitions = []
    current = None
    for lineno, raw in enumerate((text or "").splitlines(), 1):
        line = raw.split("#", 1)[0]
        while line.strip():
            segment, sep, line = line.partition(";")
            if current is None:
                if ":" not in segment:
                    raise PartitionConfigError("no partition definition found (a definition is "
                                               "'Name=PKey[,flags] : members ;' with the ':' on its first line)",
                                               lineno)
                header, _colon, segment = segment.partition(":")
                current = _parse_header(header, lineno)
                partitions.append(current)
            tokens = segment.split(",")
            for index, token in enumerate(tokens):
                name, value = _split_token(token)
                if name == "mgid":
                    _parse_mgroup(value, ",".join(tokens[index + 1:]), current, lineno)
                    break
                member = _parse_member(token, current, lineno)
                if member is not None:
                    current["members"].append(member)
            if sep:
                current = None
            else:
                line = ""
    if not partitions:
        raise PartitionConfigError("no partition is defined: opensm 3.3.23 treats such a file as an error and falls "
                                   "back to the default partition (all ports full members of 0xffff)")
    return partitions


# ------------------------------------------------------------------------------------------ IPoIB, P_Key table

def ipoib_mtu_limit(partition_mtu_bytes, mode):
    """The largest IPoIB netdev MTU on a partition: datagram mode = IB MTU - 4 (the IPoIB header; 4092 for 4096,
    2044 for 2048), connected mode = 65520 (IPOIB_CM_MTU) whatever the IB MTU."""
    if mode not in IPOIB_MODES:
        raise PartitionConfigError("mode %r is not an IPoIB mode; allowed: %s" % (mode, ", ".join(IPOIB_MODES)))
    size = int_value(partition_mtu_bytes)
    if size not in MTU_CODES:
        raise PartitionConfigError("partition mtu %r is not an IB MTU; allowed (bytes): %s" % (
            partition_mtu_bytes, ", ".join(str(s) for s in sorted(MTU_CODES))))
    return IPOIB_CM_MTU if mode == "connected" else size - IPOIB_HEADER


def parse_smpquery_pkeys(text):
    """``smpquery pkeys <lid> <port>`` -> the whole P_Key table as ints, 0x0000 entries included (so list index =
    table index): ``{"pkeys": [...], "capacity": 64}``."""
    table = {}
    capacity = None
    for line in (text or "").splitlines():
        match = re.match(r"^\s*(\d+):((?:\s+0x[0-9a-fA-F]{4})+)\s*$", line)
        if match:
            start = int(match.group(1))
            for offset, word in enumerate(match.group(2).split()):
                table[start + offset] = int(word, 16)
            continue
        match = re.match(r"^\s*(\d+) pkeys capacity for this port", line)
        if match:
            capacity = int(match.group(1))
    size = max(table) + 1 if table else 0
    return {"pkeys": [table.get(index, 0) for index in range(size)], "capacity": capacity}


def pkey_index(pkeys, pkey):
    """The index of ``pkey``'s partition in a port's P_Key table, None when the port is not in it.

    ``pkeys``: a list by index of hex strings (``["0x800b", "0x7fff"]``, sysfs ``pkeys/<i>`` / rdma_facts) or ints,
    or a map index -> P_Key. 0x8002 and 0x0002 are the same partition: an exact match wins, then a full-member entry,
    then a limited one. 0x0000 entries are empty slots. Note that rdma_facts' ``pkeys`` leaves out 0x0000 entries:
    its list index is the table index only while the table has no hole before the P_Key (opensm fills the table
    from index 0; holes appear when partitions are removed)."""
    want = int_value(pkey)
    if want is None or not 0 < want <= 0xFFFF or not want & PKEY_MASK:
        raise PartitionConfigError("pkey %r is not a P_Key; allowed: 0x0001-0xffff" % (pkey,))
    entries = sorted(pkeys.items()) if isinstance(pkeys, dict) else list(enumerate(pkeys or []))
    found = []
    for index, value in entries:
        number = int_value(value if not isinstance(value, str) else value.strip())
        if number is None and isinstance(value, str):
            try:
                number = int(value.strip(), 16)
            except ValueError:
                number = None
        if not number or pkey_base(number) != pkey_base(want):
            continue
        found.append((number != want, not number & FULL_BIT, int(index)))
    return min(found)[2] if found else None


def member_pkeys(partitions, port_guid):
    """The P_Keys opensm puts in the table of the CA port ``port_guid`` (int or ``0x...``) from a parsed
    partitions.conf (:func:`parse_partitions`), as the table shows them (``0x8002`` for a full member, ``0x0003`` for
    a limited one), sorted. A port is a member of a definition through ALL, ALL_CAS or its port GUID; opensm applies
    members in file order and a later entry for a port replaces the earlier one (``osm_prtn_add_port``: "already in
    partition ... Will overwrite"), across every definition of the same P_Key. ``both`` counts as full (the full
    P_Key is in the table either way). SELF (the master SM's own port) is not counted: which port that is depends on
    the election, not on the file. A file without a 0x7fff definition gives every port but the SM's own a limited
    0x7fff (opensm's implicit ``Default=0x7fff : ALL=limited, SELF=full ;``)."""
    guid = guid_value(port_guid)
    membership = {}
    if not any(part.get("pkey") == DEFAULT_PKEY for part in partitions or []):
        membership[DEFAULT_PKEY] = "limited"
    for part in partitions or []:
        if part.get("pkey") is None:
            continue
        for member in part.get("members") or []:
            if member.get("guid") is not None:
                hit = member["guid"] == guid
            else:
                hit = member.get("selector") in ("ALL", "ALL_CAS")
            if hit:
                membership[part["pkey"]] = member["membership"]
    return sorted("0x%04x" % (pkey | (FULL_BIT if how in ("full", "both") else 0))
                  for pkey, how in membership.items())
