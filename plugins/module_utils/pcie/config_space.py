# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A PCI function's configuration space, as the kernel shows it in sysfs (``/sys/bus/pci/devices/<bdf>/config``),
parsed (pure Python, no Ansible imports).

The layout is the PCI Express Base Specification's (checked against pciutils' ``lib/header.h``, ``ls-caps.c`` and
``ls-ecaps.c``, whose names lspci prints):

* the header (0x00-0x3f): vendor and device id, the Status register's Capabilities List bit (0x06, bit 4), the header
  type (0x0e, low 7 bits: 0 a function, 1 a PCI-to-PCI bridge) and the first capability pointer (0x34);
* the capability list (0x40-0xff): each entry an id byte, a next pointer (its low 2 bits reserved) and the
  capability's registers; the PCI Express capability (id 0x10): its Capabilities register (+0x02: version, device/port
  type), Device Capabilities (+0x04: Max_Payload_Size Supported), Device Control (+0x08: Max_Payload_Size bits 7:5,
  Max_Read_Request_Size bits 14:12, each ``128 << code`` bytes), Link Capabilities (+0x0c: Max Link Speed bits 3:0,
  Maximum Link Width bits 9:4), Link Status (+0x12: the same fields as negotiated), Link Capabilities 2 (+0x2c: the
  Supported Link Speeds vector, bits 7:1; zero before PCIe 3.0);
* the extended capabilities (0x100-0xfff, PCI Express only): each a 32-bit header (id bits 15:0, version 19:16, next
  offset 31:20); Access Control Services (id 0x0d: ACS Capability +0x04, ACS Control +0x06) and Address Translation
  Service (id 0x0f: ATS Control +0x06, bit 15 Enable).

Link speed codes (Max Link Speed, Current Link Speed) index the Supported Link Speeds vector: 1 2.5 GT/s, 2 5 GT/s,
3 8 GT/s, 4 16 GT/s, 5 32 GT/s, 6 64 GT/s. Speeds are numbers in GT/s (``32.0``), widths numbers of lanes (``16``).

**Truncated reads.** sysfs gives an unprivileged reader the first 64 bytes only (the header), root 256 bytes (no
extended space: conventional PCI, or no ECAM) or 4096. What lies beyond the bytes read is unknown and reads ``None``,
never an exception: ``express`` is None when the capability list cannot be read; ``acs`` and ``ats_enabled`` are None
when the extended space cannot be read. A capability that is known to be absent reads as absent: ``acs`` is ``{}`` (no
ACS capability: nothing redirected), ``ats_enabled`` False.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

HEADER_SIZE = 64
LEGACY_SIZE = 256
EXTENDED_SIZE = 4096

CAP_ID_EXP = 0x10
ECAP_ID_ACS = 0x0D
ECAP_ID_ATS = 0x0F

# link speed code -> GT/s (PCI Express Base Specification, Link Capabilities 2's Supported Link Speeds vector)
SPEEDS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}

# Device/Port Type (PCI Express Capabilities register bits 7:4)
PORT_TYPES = {
    0x0: "endpoint", 0x1: "legacy_endpoint", 0x4: "root_port", 0x5: "upstream_port", 0x6: "downstream_port",
    0x7: "pcie_to_pci_bridge", 0x8: "pci_to_pcie_bridge", 0x9: "rc_integrated_endpoint", 0xA: "rc_event_collector",
}
# the ports that face away from the root complex: their link is the one to the function below them
DOWNSTREAM_FACING = ("root_port", "downstream_port", "pci_to_pcie_bridge")
# functions without a link of their own
NO_LINK = ("rc_integrated_endpoint", "rc_event_collector")

# ACS Capability / Control bits, by the names lspci prints (ACSCap:, ACSCtl:)
ACS_BITS = (("SrcValid", 0x0001), ("TransBlk", 0x0002), ("ReqRedir", 0x0004), ("CmpltRedir", 0x0008),
            ("UpstreamFwd", 0x0010), ("EgressCtrl", 0x0020), ("DirectTrans", 0x0040))
ACS_REDIRECT = ("ReqRedir", "CmpltRedir")


def _u16(data, offset):
    return data[offset] | (data[offset + 1] << 8) if offset + 2 <= len(data) else None


def _u32(data, offset):
    if offset + 4 > len(data):
        return None
    return data[offset] | (data[offset + 1] << 8) | (data[offset + 2] << 16) | (data[offset + 3] << 24)


def acs_bits(word):
    """An ACS Capability or Control register as ``{lspci name: bool}``."""
    return dict((name, bool(word & mask)) for name, mask in ACS_BITS)


def acs_redirect(acs):
    """True when ACS P2P Request or Completion Redirect is on, False when not (or no ACS), None when unknown."""
    if acs is None:
        return None
    return any(acs.get(name) for name in ACS_REDIRECT)


def capabilities(data):
    """``{capability id: offset}`` of the capability list (the first of each id), or None when it cannot be read
    (fewer than 256 bytes: the list lies past the header). A looped or out-of-range chain ends the walk."""
    data = bytes(data or b"")
    if len(data) < LEGACY_SIZE:
        return None
    if not _u16(data, 0x06) & 0x10:   # Status: Capabilities List
        return {}
    found, seen, pos = {}, set(), data[0x34] & 0xFC
    while pos and pos >= HEADER_SIZE and pos not in seen and pos + 2 <= LEGACY_SIZE:
        seen.add(pos)
        found.setdefault(data[pos], pos)
        pos = data[pos + 1] & 0xFC
    return found


def extended_capabilities(data):
    """``{extended capability id: offset}`` (the first of each id), or None when the extended space was not read
    (fewer than 4096 bytes). An all-zero or all-ones first header means none."""
    data = bytes(data or b"")
    if len(data) < EXTENDED_SIZE:
        return None
    found, seen, pos = {}, set(), LEGACY_SIZE
    while pos >= LEGACY_SIZE and pos not in seen and pos + 4 <= EXTENDED_SIZE:
        seen.add(pos)
        header = _u32(data, pos)
        if header in (0, 0xFFFFFFFF):
            break
        found.setdefault(header & 0xFFFF, pos)
        pos = (header >> 20) & 0xFFC
    return found


def _express(data, pos):
    flags = _u16(data, pos + 0x02)
    port_type = PORT_TYPES.get((flags >> 4) & 0xF, "unknown")
    devcap, devctl = _u32(data, pos + 0x04), _u16(data, pos + 0x08)
    out = {
        "version": flags & 0xF, "port_type": port_type,
        "max_payload_supported": 128 << (devcap & 0x7) if devcap is not None else None,
        "max_payload": 128 << ((devctl >> 5) & 0x7) if devctl is not None else None,
        "max_read_req": 128 << ((devctl >> 12) & 0x7) if devctl is not None else None,
        "max_speed": None, "max_width": None, "speed": None, "width": None, "supported_speeds": None,
    }
    if port_type in NO_LINK:
        return out
    lnkcap, lnksta = _u32(data, pos + 0x0C), _u16(data, pos + 0x12)
    if lnkcap is not None:
        out["max_speed"], out["max_width"] = SPEEDS.get(lnkcap & 0xF), (lnkcap >> 4) & 0x3F
    if lnksta is not None:
        out["speed"], out["width"] = SPEEDS.get(lnksta & 0xF), (lnksta >> 4) & 0x3F
    lnkcap2 = _u32(data, pos + 0x2C) if (flags & 0xF) >= 2 else None
    if lnkcap2:
        out["supported_speeds"] = [SPEEDS[code] for code in sorted(SPEEDS) if lnkcap2 & (1 << code)]
    return out


def parse(data):
    """The config space bytes ``data`` -> ``{size, vendor, device, header_type, express, acs, acs_cap, ats_enabled}``.

    ``express`` (None unknown, {} when the function has no PCI Express capability): ``port_type``, ``version``,
    ``max_payload_supported``, ``max_payload``, ``max_read_req`` (bytes), ``max_speed``/``speed`` (GT/s),
    ``max_width``/``width`` (lanes), ``supported_speeds``. ``acs``/``acs_cap``: the ACS Control / Capability bits by
    lspci name ({} no ACS capability, None unknown); ``ats_enabled``: True, False (disabled or absent) or None."""
    data = bytes(data or b"")
    out = {"size": len(data), "vendor": _u16(data, 0x00), "device": _u16(data, 0x02),
           "header_type": data[0x0E] & 0x7F if len(data) > 0x0E else None,
           "express": None, "acs": None, "acs_cap": None, "ats_enabled": None}
    caps = capabilities(data)
    if caps is None:
        return out
    out["express"] = _express(data, caps[CAP_ID_EXP]) if CAP_ID_EXP in caps else {}
    if not out["express"]:   # extended capabilities belong to PCI Express functions
        return out
    ecaps = extended_capabilities(data)
    if ecaps is None:
        return out
    if ECAP_ID_ACS in ecaps:
        out["acs_cap"] = acs_bits(_u16(data, ecaps[ECAP_ID_ACS] + 0x04))
        out["acs"] = acs_bits(_u16(data, ecaps[ECAP_ID_ACS] + 0x06))
    else:
        out["acs_cap"], out["acs"] = {}, {}
    out["ats_enabled"] = bool(_u16(data, ecaps[ECAP_ID_ATS] + 0x06) & 0x8000) if ECAP_ID_ATS in ecaps else False
    return out


def read(path):
    """The parsed config space of the sysfs ``config`` file at ``path``, or None when it cannot be read at all."""
    try:
        with open(path, "rb") as handle:
            return parse(handle.read(EXTENDED_SIZE))
    except OSError:
        return None
