# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""InfiniBand partitions, the role's side: its ``partitions`` input checked (:func:`check_partitions`), rendered to
opensm's ``partitions.conf`` (:func:`render_partitions`: the default partition first, mtu and rate as IBTA codes,
broad selectors before single ports) and a parsed file turned back into the role's form
(:func:`to_role_partition`) to compare the file on disk with the wanted partitions.

Pure Python (no Ansible imports). The grammar, the P_Key/GUID/MTU/rate vocabulary and
:class:`~ib_partitions.PartitionConfigError` are ib_partitions'.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband.ib_partitions import (
    DEFAULT_PKEY, MEMBERSHIPS, MTU_BYTES, RATE_GBPS, SELECTORS, PartitionConfigError, format_guid, guid_value,
    int_value, mtu_code, pkey_base, rate_code,
)

__metaclass__ = type

PKEY_MIN, PKEY_MAX = 0x0001, 0x7FFE  # what the role manages; 0x7fff is the default partition
BROAD_SELECTORS = ("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.+-]*$")
# the first lines of every rendered file (kept word for word: a changed header would rewrite every host's file)
HEADER = (
    "# opensm partitions.conf, written by hpcnet.rdma (ib_partitions.render_partitions): edits are overwritten.",
    "# Grammar: opensm doc/partition-config.txt; mtu and rate are IBTA codes (mtu=5 is 4096 bytes, rate=7 is 40 Gb/s).",
)
DEFAULT_PARTITION = {"name": "Default", "pkey": DEFAULT_PKEY, "ipoib": True,
                     "members": [{"selector": "ALL", "membership": "full"}]}


# ---------------------------------------------------------------------------------------------------- role input

def _partition_errors(part, where):
    """Field errors of one role partition (shape, mtu, rate, sl, members); P_Key range is the caller's."""
    errors = []
    if part.get("ipoib") not in (None, True, False):
        errors.append("%s: ipoib must be true or false, got %r" % (where, part.get("ipoib")))
    for key, code in (("mtu", mtu_code), ("rate", rate_code)):  # bytes / Gb/s that have no IBTA code
        if part.get(key) is not None:
            try:
                code(part[key])
            except PartitionConfigError as exc:
                errors.append("%s: %s" % (where, exc))
    sl = part.get("sl")
    if sl is not None and (int_value(sl) is None or not 0 <= int_value(sl) <= 15):
        errors.append("%s: sl %r is not a service level; allowed: 0-15" % (where, sl))
    members = part.get("members", [])
    if not isinstance(members, list):
        return errors + ["%s: members must be a list of {selector, membership}, got %r" % (where, members)]
    seen = set()
    for index, member in enumerate(members):
        at = "%s members[%d]" % (where, index)
        if not isinstance(member, dict) or "selector" not in member:
            errors.append("%s: must be a map {selector, membership}, got %r" % (at, member))
            continue
        selector = _selector(member["selector"])
        if selector is None:
            errors.append("%s: selector %r is not one of %s or a port GUID (0x0002c903000e0b72 or "
                          "0002:c903:000e:0b72)" % (at, member["selector"], ", ".join(SELECTORS)))
        elif selector in seen:
            errors.append("%s: selector %s is listed twice (opensm would keep the last)" % (at, selector))
        seen.add(selector)
        if member.get("membership") not in MEMBERSHIPS:
            errors.append("%s: membership %r; allowed: %s" % (at, member.get("membership"), ", ".join(MEMBERSHIPS)))
    return errors


def _selector(value):
    """A role selector -> the keyword or ``0x%016x`` GUID, None when it is neither."""
    if isinstance(value, str) and value.strip() in SELECTORS:
        return value.strip()
    guid = guid_value(value)
    return format_guid(guid) if guid is not None else None


def _where(index, part):
    name = part.get("name") if isinstance(part, dict) else None
    return "partitions[%d] (%s)" % (index, name) if name else "partitions[%d]" % index


def check_partitions(partitions):
    """Input errors of the role's ``partitions`` list, each naming the partition and the field and the allowed
    values: P_Key outside 0x0001-0x7ffe (its full-membership bit 0x8000 aside; 0x7fff, the default partition, is
    managed by the role itself), P_Keys used twice (also 0x0002 and 0x8002: one partition), names used twice or not
    of ``[A-Za-z_][A-Za-z0-9_.+-]*``, mtu, rate, sl, members (selector, membership)."""
    if not isinstance(partitions, list):
        return ["partitions must be a list of {name, pkey, ipoib, mtu, rate, sl, members}, got %s" %
                type(partitions).__name__]
    errors = []
    names, pkeys = {}, {}
    for index, part in enumerate(partitions):
        where = _where(index, part)
        if not isinstance(part, dict):
            errors.append("%s: must be a map {name, pkey, ipoib, mtu, rate, sl, members}, got %r" % (where, part))
            continue
        unknown = sorted(set(part) - {"name", "pkey", "ipoib", "mtu", "rate", "sl", "members"})
        if unknown:
            errors.append("%s: unknown keys %s; allowed: name, pkey, ipoib, mtu, rate, sl, members" % (
                where, ", ".join(unknown)))
        name = part.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            errors.append("%s: name %r must be a word of letters, digits and _ . + - (not starting with a digit; "
                          "no blanks, ',', ':', ';', '=', '#')" % (where, name))
        elif name in names:
            errors.append("%s: name %r is already used by partitions[%d]" % (where, name, names[name]))
        else:
            names[name] = index
        pkey = int_value(part.get("pkey"))
        if pkey is None or not 0 <= pkey <= 0xFFFF:
            errors.append("%s: pkey %r is not a P_Key; allowed: 0x0001-0x7ffe (optionally with the full-membership "
                          "bit, 0x8001-0xfffe)" % (where, part.get("pkey")))
        elif pkey_base(pkey) == DEFAULT_PKEY:
            errors.append("%s: pkey 0x%04x is the default partition (0x7fff), which the role manages itself; "
                          "allowed: 0x0001-0x7ffe" % (where, pkey))
        elif not PKEY_MIN <= pkey_base(pkey) <= PKEY_MAX:
            errors.append("%s: pkey 0x%04x is outside 0x0001-0x7ffe (0x0000 and 0x8000 are no partition)" % (
                where, pkey))
        elif pkey_base(pkey) in pkeys:
            errors.append("%s: pkey 0x%04x is the partition of partitions[%d] (P_Keys that differ only in the "
                          "full-membership bit 0x8000 are one partition)" % (where, pkey, pkeys[pkey_base(pkey)]))
        else:
            pkeys[pkey_base(pkey)] = index
        errors.extend(_partition_errors(part, where))
    return errors


# ---------------------------------------------------------------------------------------------------- renderer

def _render_line(part):
    head = "%s=0x%04x" % (part["name"], pkey_base(int_value(part["pkey"])))
    if part.get("ipoib"):
        head += ",ipoib"
    if part.get("mtu") is not None:
        head += ",mtu=%d" % mtu_code(part["mtu"])
    if part.get("rate") is not None:
        head += ",rate=%d" % rate_code(part["rate"])
    if part.get("sl") is not None:
        head += ",sl=%d" % int_value(part["sl"])
    # opensm applies members in order and a later entry for a port overrides an earlier one (ALL_CAS=limited after
    # a host's GUID=full leaves that host limited): the broad selectors go first, so that a port named explicitly
    # (its GUID, SELF) keeps the membership given for it
    ordered = sorted(part.get("members", []), key=lambda member: _selector(member["selector"]) not in BROAD_SELECTORS)
    members = ", ".join("%s=%s" % (_selector(member["selector"]), member["membership"]) for member in ordered)
    return "%s : %s ;" % (head, members) if members else "%s : ;" % head


def render_partitions(partitions, default="builtin"):
    """The role's partitions -> partitions.conf text: the header comment, then one definition a line, the default
    partition (P_Key 0x7fff) first and the others by P_Key. ``mtu`` (bytes) and ``rate`` (Gb/s) are written as
    opensm's codes, the P_Key as its low 15 bits, GUIDs as ``0x%016x``, every member with its membership.
    Without a 0x7fff entry in ``partitions``, ``default`` (by default DEFAULT_PARTITION) is written
    (``Default=0x7fff,ipoib : ALL=full ;``, opensm's behaviour without a file; pass None to write none, and opensm
    then makes every port but its own a limited member). Raises :class:`PartitionConfigError` on input
    :func:`check_partitions` would report (0x7fff allowed)."""
    errors = []
    if default == "builtin":
        default = dict(DEFAULT_PARTITION, members=[dict(m) for m in DEFAULT_PARTITION["members"]])
    if not isinstance(partitions, list):
        raise PartitionConfigError("partitions must be a list, got %s" % type(partitions).__name__)
    parts = list(partitions)
    if default is not None and not any(isinstance(p, dict) and int_value(p.get("pkey")) is not None
                                       and pkey_base(int_value(p["pkey"])) == DEFAULT_PKEY for p in parts):
        parts.insert(0, default)
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            errors.append("%s: must be a map, got %r" % (_where(index, part), part))
            continue
        errors.extend(error for error in check_partitions([part])
                      if "which the role manages itself" not in error)
    seen, names = {}, set()
    for part in parts:
        if not isinstance(part, dict):
            continue
        pkey = int_value(part.get("pkey"))
        if pkey is not None and pkey_base(pkey) in seen:
            errors.append("partition %r: pkey 0x%04x is the partition of %r" % (
                part.get("name"), pkey, seen[pkey_base(pkey)]))
        elif pkey is not None:
            seen[pkey_base(pkey)] = part.get("name")
        if part.get("name") in names:
            errors.append("partition %r: name is used twice" % (part.get("name"),))
        names.add(part.get("name"))
    if errors:
        raise PartitionConfigError("; ".join(errors))
    parts.sort(key=lambda p: (pkey_base(int_value(p["pkey"])) != DEFAULT_PKEY, pkey_base(int_value(p["pkey"]))))
    return "\n".join(list(HEADER) + [_render_line(part) for part in parts]) + "\n"


def to_role_partition(parsed):
    """A :func:`parse_partitions` entry -> the role's form (mtu in bytes, rate in Gb/s), for comparing a file on
    disk with the wanted partitions."""
    return {
        "name": parsed["name"], "pkey": parsed["pkey"], "ipoib": parsed["ipoib"],
        "mtu": MTU_BYTES.get(parsed["mtu"]) if parsed["mtu"] is not None else None,
        "rate": RATE_GBPS.get(parsed["rate"]) if parsed["rate"] is not None else None,
        "sl": parsed["sl"],
        "members": [{"selector": m["selector"], "membership": m["membership"]} for m in parsed["members"]],
    }
