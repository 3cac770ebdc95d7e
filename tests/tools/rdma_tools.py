# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test helper, not shipped: parsers of the text of RDMA vendor tools (ibv_devinfo, ibstat, show_gids, ibdev2netdev).

Pure Python (no Ansible imports): each function takes the tool's text and returns plain dicts/lists.
They follow the tools' grammar rather than one sample: tabs or spaces, `-v` GID lines with or without a
GID type suffix, compressed or full GIDs, `ibwarn:`/`ibpanic:`/`iberror:` noise, padded states, PCI
domains, VFs, bonds, the `ibv_devinfo -l` list form and the `ibstat <ca> <port>` single-port form.
Lines that fit no rule are ignored, never raised on.
"""

from __future__ import absolute_import, division, print_function

import ipaddress
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gid_ipv4

__metaclass__ = type

NOISE_RE = re.compile(r"^\s*(ibwarn|ibpanic|iberror|ibdebug):\s*(.*)$")
GID_LINE_RE = re.compile(r"^GID\[\s*(\d+)\]:\s*(\S+?)(?:,\s*(.+?))?\s*$")
VALUE_NUM_RE = re.compile(r"^(.*?)\s*\((-?\d+)\)$")
IPV4_RE = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def _int(text, default=None):
    try:
        return int(str(text).strip(), 0)
    except (TypeError, ValueError):
        return default


def normalize_gid(text):
    """Any GID text (full 8-group, compressed, IPv4-mapped) -> 8 zero-padded lowercase groups; None if invalid."""
    try:
        packed = ipaddress.IPv6Address(text.strip()).packed
    except (ValueError, AttributeError):
        return None
    return ":".join("%02x%02x" % (packed[i], packed[i + 1]) for i in range(0, 16, 2))


def _gid_type(text):
    """'RoCE v2' -> 'RoCE v2'; 'RoCE v1', 'IB/RoCE v1', 'v1' -> 'IB/RoCE v1'; else None."""
    if not text:
        return None
    low = text.strip().lower()
    if low.endswith("v2"):
        return "RoCE v2"
    if low.endswith("v1") or low == "ib":
        return "IB/RoCE v1"
    return None


def _indent(line):
    expanded = line.expandtabs(8)
    return len(expanded) - len(expanded.lstrip(" "))


# ------------------------------------------------------------------------------------------ ibv_devinfo
def _devinfo_value(key, value):
    """Decode one ibv_devinfo value into (extra keys) dict."""
    out = {key: value}
    m = VALUE_NUM_RE.match(value)
    if key in ("state", "phys_state") and m:
        out = {key: m.group(1), key + "_num": int(m.group(2))}
    elif key in ("max_mtu", "active_mtu") and m:
        out = {key: _int(m.group(1)), key + "_enum": int(m.group(2))}
    elif key == "transport" and m:
        out = {key: m.group(1)}
    elif key == "active_width" and m:
        out = {key: m.group(1), "active_width_enum": int(m.group(2))}
    elif key == "active_speed" and m:
        speed = re.match(r"^([\d.]+)\s*Gbps", m.group(1))
        out = {key: m.group(1), "active_speed_enum": int(m.group(2)),
               "active_speed_gbps": float(speed.group(1)) if speed else None}
    elif key in ("phys_port_cnt", "vendor_part_id", "sm_lid", "port_lid", "gid_tbl_len", "pkey_tbl_len",
                 "sm_sl", "subnet_timeout", "max_qp", "max_cq", "max_mr", "max_pd", "num_comp_vectors"):
        out = {key: _int(value, value)}
    elif key == "port_lmc":
        out = {key: _int(value, value)}
    return out


def parse_ibv_devinfo(text):
    """Parse `ibv_devinfo` (plain, -v, -d, -i) or `ibv_devinfo -l`.

    Returns {"devices": {hca_id: {...device keys..., "ports": {port_num: {...}}, "flags": {key: [..]}}},
    "messages": [noise lines]}. Port dicts hold state/state_num, max_mtu/active_mtu (bytes), sm_lid,
    port_lid, port_lmc, link_layer and with -v active_width ("4X"), active_speed_gbps, phys_state and
    gids: [{index, gid (8 groups), type ("IB/RoCE v1"|"RoCE v2"|None), ipv4}]. A port block with no
    preceding hca_id (a partial paste) goes under the device key "".
    """
    devices = {}
    messages = []
    dev = port = None
    flag_list = None
    in_list = False
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        noise = NOISE_RE.match(line)
        if noise:
            messages.append(line.strip())
            continue
        stripped = line.strip()
        m = re.match(r"^(\d+) HCA(?:s|\(s\))? found:$", stripped)
        if m:
            in_list = True
            continue
        if in_list and _indent(line) > 0 and re.match(r"^\S+$", stripped):
            devices.setdefault(stripped, {"hca_id": stripped, "ports": {}, "flags": {}})
            continue
        m = re.match(r"^hca_id:\s*(\S+)$", stripped)
        if m:
            in_list = False
            dev = devices.setdefault(m.group(1), {"hca_id": m.group(1), "ports": {}, "flags": {}})
            port = flag_list = None
            continue
        m = re.match(r"^port:\s*(\d+)$", stripped)
        if m:
            if dev is None:
                dev = devices.setdefault("", {"hca_id": None, "ports": {}, "flags": {}})
            port = dev["ports"].setdefault(int(m.group(1)), {"port": int(m.group(1)), "gids": []})
            flag_list = None
            continue
        m = GID_LINE_RE.match(stripped)
        if m and port is not None:
            gid = normalize_gid(m.group(2))
            port["gids"].append({"index": int(m.group(1)), "gid": gid, "type": _gid_type(m.group(3)),
                                 "ipv4": gid_ipv4(gid) if gid else None})
            continue
        if dev is None:
            continue
        m = re.match(r"^([A-Za-z_][\w ]*?):\s*(.*)$", stripped)
        if _indent(line) >= 40 or not m:
            # a flag/capability list item (5 tabs deep), e.g. "BAD_PKEY_CNTR" or "Unknown flags: 0x..."
            if flag_list is not None:
                flag_list.append(stripped)
            continue
        key, value = m.group(1).strip(), m.group(2).strip()
        target = port if port is not None else dev
        if not value:
            flag_list = dev["flags"].setdefault(key, [])
            continue
        flag_list = dev["flags"].setdefault(key, []) if key in ("device_cap_flags", "device_cap_flags_ex") else None
        target.update(_devinfo_value(key, value))
    return {"devices": devices, "messages": messages}


# ------------------------------------------------------------------------------------------------ ibstat
IBSTAT_KEYS = {
    "ca type": "ca_type", "number of ports": "num_ports", "firmware version": "fw_ver",
    "hardware version": "hw_ver", "node guid": "node_guid", "system image guid": "sys_image_guid",
    "state": "state", "physical state": "phys_state", "rate": "rate", "base lid": "base_lid", "lmc": "lmc",
    "sm lid": "sm_lid", "capability mask": "cap_mask", "port guid": "port_guid", "link layer": "link_layer",
}


def parse_ibstat(text):
    """Parse `ibstat`, `ibstat <ca>`, `ibstat <ca> <port>` (and `ibstat -l`).

    Returns {"devices": {ca: {node_type, ca_type, num_ports, fw_ver, hw_ver, node_guid, sys_image_guid,
    ports: {n: {state, phys_state, rate (Gb/s, float), rate_fdr10, base_lid, lmc, sm_lid, cap_mask (int),
    port_guid ("0x" + 16 hex), link_layer}}}}, "messages": [ibwarn/ibpanic/iberror lines]}.
    """
    devices = {}
    messages = []
    dev = port = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        if NOISE_RE.match(line):
            messages.append(line)
            continue
        m = re.match(r"^(CA|Switch|Router|iWARP RNIC|\?\?\?):?\s+'([^']+)'$", line)
        if m:
            dev = devices.setdefault(m.group(2), {"name": m.group(2), "node_type": m.group(1), "ports": {}})
            port = None
            continue
        m = re.match(r"^Port (\d+):$", line)
        if m and dev is not None:
            port = dev["ports"].setdefault(int(m.group(1)), {"port": int(m.group(1))})
            continue
        m = re.match(r"^([A-Za-z][A-Za-z ]*?):\s*(.*)$", line)
        if not m or dev is None:
            if re.match(r"^\S+$", line) and dev is None:   # `ibstat -l`: one CA name per line
                devices.setdefault(line, {"name": line, "node_type": None, "ports": {}})
            continue
        label, value = m.group(1).strip().lower(), m.group(2).strip()
        if label.endswith(" type") and label not in IBSTAT_KEYS:
            label = "ca type"
        key = IBSTAT_KEYS.get(label)
        if key is None:
            continue
        if key in ("num_ports", "base_lid", "lmc", "sm_lid"):
            val = _int(value, value)
        elif key == "cap_mask":
            val = _int(value, value)
        elif key == "rate":
            rm = re.match(r"^([\d.]+)(\s*\(FDR10\))?", value)
            val = float(rm.group(1)) if rm else value
            if port is not None:
                port["rate_fdr10"] = bool(rm and rm.group(2))
        elif key in ("node_guid", "sys_image_guid", "port_guid"):
            val = "0x%016x" % int(value, 16) if re.match(r"^0x[0-9a-fA-F]+$", value) else value
        else:
            val = value
        port_key = key in ("state", "phys_state", "rate", "base_lid", "lmc", "sm_lid", "cap_mask", "port_guid", "link_layer")
        (port if port is not None and port_key else dev)[key] = val
    return {"devices": devices, "messages": messages}


# --------------------------------------------------------------------------------------------- show_gids
def parse_show_gids(text):
    """Parse MLNX `show_gids`. Returns {"gids": [{device, port, index, gid, ipv4, version ("v1"/"v2"),
    type ("IB/RoCE v1"/"RoCE v2"/None), netdev}], "n_gids_found": int or None}."""
    gids = []
    found = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("DEV") or line.startswith("---"):
            continue
        m = re.match(r"^n_gids_found=(\d+)$", line)
        if m:
            found = int(m.group(1))
            continue
        tokens = line.split()
        if len(tokens) < 4 or not tokens[1].isdigit() or not tokens[2].isdigit():
            continue
        gid = normalize_gid(tokens[3])
        if gid is None:
            continue
        rest = tokens[4:]
        ipv4 = rest.pop(0) if rest and IPV4_RE.match(rest[0]) else None
        version = rest.pop(0) if rest and re.match(r"^[vV]\d$", rest[0]) else None
        netdev = rest.pop(0) if rest else None
        gids.append({"device": tokens[0], "port": int(tokens[1]), "index": int(tokens[2]), "gid": gid,
                     "ipv4": ipv4 or gid_ipv4(gid), "version": version.lower() if version else None,
                     "type": _gid_type(version), "netdev": netdev})
    return {"gids": gids, "n_gids_found": found}


# ------------------------------------------------------------------------------------------ ibdev2netdev
IBDEV2NETDEV_V_RE = re.compile(
    r"^(?P<pci>\S+) (?P<device>\S+) \((?P<hca_type>\S+) - (?P<part>[^)]*?)\s*\) ?(?P<description>.*?)\s*"
    r" fw (?P<fw_ver>\S+) port (?P<port>\d+) \((?P<port_state>[^)]*?)\s*\) ==> (?P<netdev>\S+)"
    r"(?: \((?P<link>[^)]*)\))?\s*$")
IBDEV2NETDEV_RE = re.compile(r"^(?P<device>\S+) port (?P<port>\d+) <?==> (?P<netdev>\S+)(?: \((?P<link>[^)]*)\))?\s*$")


def parse_ibdev2netdev(text):
    """Parse `ibdev2netdev` and `ibdev2netdev -v`. Returns a list of {device, port, netdev, link_state
    ("Up"/"Down"/"NA"/None)}; -v lines add pci_address, hca_type ("MT4129"), part_number (None for "NA"),
    description, fw_ver, port_state ("ACTIVE", padding removed)."""
    out = []
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        m = IBDEV2NETDEV_V_RE.match(line)
        if m:
            part = m.group("part").strip()
            out.append({"device": m.group("device"), "port": int(m.group("port")), "netdev": m.group("netdev"),
                        "link_state": m.group("link"), "pci_address": m.group("pci"),
                        "hca_type": m.group("hca_type"), "part_number": None if part in ("", "NA") else part,
                        "description": m.group("description").strip() or None, "fw_ver": m.group("fw_ver"),
                        "port_state": m.group("port_state").strip()})
            continue
        m = IBDEV2NETDEV_RE.match(line.strip())
        if m:
            out.append({"device": m.group("device"), "port": int(m.group("port")), "netdev": m.group("netdev"),
                        "link_state": m.group("link")})
    return out
