# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI addresses as the selectors of the inputs write them, and the part number in a card's PCI VPD (pure Python).

A selector ``0000:0c:00.0`` (a function) or ``0c:00`` (a card: every function of bus 0c, device 00; the domain
defaults to 0000) picks what the tools print as ``0000:0c:00.0``. The part number is the ``PN`` keyword of the VPD-R
resource of ``<pci>/vpd`` (PCI Local Bus Specification 3.0, section 6.4 and appendix I: large resource tags 0x82
identifier string, 0x90 VPD-R, 0x91 VPD-W, 0x78 end), which is what ``mlxconfig``/``lspci -vv`` show as
``Part number``/``[PN]``.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

import re

PCI_RE = re.compile(r"^(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?$")

# VPD is at most 32 KiB; a ConnectX card's is a few hundred bytes.
VPD_MAX = 32768
_VPD_ID, _VPD_R, _VPD_W, _VPD_END = 0x82, 0x90, 0x91, 0x78


def canonical_pci(pci):
    """A PCI function address as the tools print it (``0000:0c:00.0``: domain added, lower case), or None for
    anything else (no function, not a PCI address)."""
    match = PCI_RE.match(pci.strip()) if isinstance(pci, str) else None
    if not match or match.group(4) is None:
        return None
    return "%s:%s:%s.%s" % ((match.group(1) or "0000").lower(), match.group(2).lower(), match.group(3).lower(),
                            match.group(4))


def pci_matches(selector, pci):
    """True when the selector (a function, or without ``.F`` the card) picks the canonical function ``pci``."""
    match = PCI_RE.match(selector)
    if not match or not pci:
        return False
    want_domain = (match.group(1) or "0000").lower()
    domain, bus, rest = pci.lower().split(":")
    slot, function = rest.split(".")
    if (want_domain, match.group(2).lower(), match.group(3).lower()) != (domain, bus, slot):
        return False
    return match.group(4) is None or match.group(4) == function


def vpd_part_number(data):
    """The ``PN`` keyword of the VPD-R resource in ``data`` (bytes of ``<pci>/vpd``), stripped, or None when the
    VPD is empty, malformed or has no part number."""
    pos = 0
    data = bytes(data or b"")[:VPD_MAX]
    while pos + 3 <= len(data):
        tag = data[pos]
        if tag == _VPD_END or not tag & 0x80:
            return None
        length = data[pos + 1] | (data[pos + 2] << 8)
        body = data[pos + 3:pos + 3 + length]
        if len(body) < length:
            return None
        if tag == _VPD_R:
            return _keyword(body, b"PN")
        pos += 3 + length
    return None


def _keyword(body, name):
    pos = 0
    while pos + 3 <= len(body):
        key, size = body[pos:pos + 2], body[pos + 2]
        value = body[pos + 3:pos + 3 + size]
        if key == name:
            text = value.decode("ascii", "replace").strip().strip("\x00").strip()
            return text or None
        pos += 3 + size
    return None


def read_part_number(pci_dir):
    """The part number from ``<pci_dir>/vpd``, or None (no VPD, not readable: VPD reads need root)."""
    if not pci_dir:
        return None
    try:
        with open("%s/vpd" % pci_dir, "rb") as handle:
            return vpd_part_number(handle.read(VPD_MAX))
    except OSError:
        return None
