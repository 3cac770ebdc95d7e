"""Host profiles: load, validate and expand them into a concrete per-host description.

A profile is a YAML (in the repository) or JSON (inside the containers, which have no PyYAML) mapping.
``expand(profile, host_index)`` validates it and returns a fully resolved dict in which every device and
port has all its values (GUIDs, MACs, LIDs, IPv4 addresses, netdev names, GID table) computed for that
host, so that two hosts built from the same profile never share a GUID, LID or IPv4 address.
See tests/simhost/README.md for the schema.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path

from . import firmware as fw
from . import naming
from .sysfs import PHYS_STATES, PORT_STATES, RATE_RE  # the kernel's port state names and rate format

PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"

PROVIDERS = ("inbox", "mlnx_ofed", "doca", "none")
LINK_LAYERS = ("InfiniBand", "Ethernet")
GID_TYPES = ("IB/RoCE v1", "RoCE v2")
GID_SOURCES = ("link_local", "ipv4", "ipv6", "ib_default")
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
IBDEV_RE = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")
PCI_RE = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
MELLANOX_OUI = "a088c2"

DEFAULT_MODULES = ["mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "ib_umad", "rdma_cm", "iw_cm", "ib_cm", "rdma_ucm", "ib_ipoib"]


class ProfileError(ValueError):
    """A profile is invalid; the message names the profile and the field."""


def _err(where: str, msg: str) -> ProfileError:
    return ProfileError(f"{where}: {msg}")


def profile_path(name: str) -> Path:
    return PROFILES_DIR / f"{name}.yml"


def list_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yml"))


def load(name_or_path: str) -> dict:
    """Load a profile by name (profiles/<name>.yml) or by path (.yml/.yaml needs PyYAML, .json does not)."""
    path = Path(name_or_path)
    if not path.suffix:
        path = profile_path(name_or_path)
        if not path.exists():
            raise ProfileError(f"profile {name_or_path!r}: no such profile; known profiles: {', '.join(list_profiles())}")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
    else:
        try:
            import yaml  # pylint: disable=import-outside-toplevel
        except ImportError as exc:  # containers have no PyYAML: they use the JSON copy
            raise ProfileError(f"{path}: reading YAML needs PyYAML; pass the JSON copy instead") from exc
        data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a profile must be a mapping, got {type(data).__name__}")
    return data


# ---------------------------------------------------------------------------------------------- checks
def _get(d: dict, key: str, where: str, types, default=None, required=False, choices=None):
    if key not in d or d[key] is None:
        if required:
            raise _err(where, f"missing required field {key!r}")
        return default
    val = d[key]
    if types is int and isinstance(val, bool):
        raise _err(f"{where}.{key}", f"must be an integer, got {val!r}")
    if not isinstance(val, types):
        tname = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise _err(f"{where}.{key}", f"must be {tname}, got {type(val).__name__} {val!r}")
    if choices is not None and val not in choices:
        raise _err(f"{where}.{key}", f"{val!r} is not one of: {', '.join(str(c) for c in choices)}")
    return val


def _int_or_hex(d: dict, key: str, where: str, default=None, lo=0, hi=None):
    val = d.get(key, default)
    if val is None:
        return None
    if isinstance(val, str):
        try:
            val = int(val, 0)
        except ValueError:
            raise _err(f"{where}.{key}", f"must be an integer (decimal or 0x hex), got {val!r}") from None
    if isinstance(val, bool) or not isinstance(val, int):
        raise _err(f"{where}.{key}", f"must be an integer, got {val!r}")
    if val < lo or (hi is not None and val > hi):
        raise _err(f"{where}.{key}", f"{val} is out of range {lo}..{hi}")
    return val


KNOWN_TOP = {"name", "description", "stack", "kernel_modules", "guid_seed", "lid_host_stride", "ipv4_host_stride",
             "device_defaults", "port_defaults", "devices", "oob_netdevs", "host_index", "real_netdevs",
             "mstflint_layout", "gpu", "modules_available", "ipoib_enhanced",
             "ib_fabric", "rail_subnets", "rdma_naming"}  # ib_fabric: simhost/fabric.py; rdma_naming: simhost/naming.py
KNOWN_DEV = {"name", "pci", "pci_device_id", "hca_type", "fw_ver", "board_id", "hw_rev", "part_number", "description",
             "node_guid", "sys_image_guid", "node_desc", "numa_node", "ports", "pcie", "vpi", "firmware", "acpi_index"}
KNOWN_PORT = {"port", "link_layer", "state", "phys_state", "rate", "lid", "sm_lid", "sm_sl", "lmc", "cap_mask", "netdev",
              "mtu", "ipv4", "ipv6", "gids", "gid_tbl_len", "pkey_tbl_len", "mac", "counters", "hw_counters", "ib", "eth"}
# a port of a VPI card: the values of each link layer (the firmware's LINK_TYPE_P<n> picks one at boot)
VPI_IB_FIELDS = {"state", "phys_state", "rate", "lid", "sm_lid", "sm_sl", "lmc", "cap_mask", "netdev", "mtu", "gids",
                 "gid_tbl_len", "pkey_tbl_len", "counters", "hw_counters", "ipv4"}
VPI_ETH_FIELDS = {"state", "phys_state", "rate", "cap_mask", "netdev", "mtu", "ipv4", "ipv6", "mac", "gids",
                  "gid_tbl_len", "pkey_tbl_len", "counters", "hw_counters"}
# column layout of the simulated mstconfig: "current" (20-wide fields, headers over the values, as newer mstflint and
# the captures qos-firmware/mstconfig-set-01, rdma-outputs/mlxconfig-query-01) or "legacy16" (16-wide fields, values at
# column 45: mstflint <= 4.21, e.g. Debian 12's package; captures qos-firmware/mstconfig-query-01, mstconfig-set-02)
MSTFLINT_LAYOUTS = ("current", "legacy16")


def _unknown(d: dict, known: set, where: str) -> None:
    extra = sorted(set(d) - known)
    if extra:
        raise _err(where, f"unknown field(s) {', '.join(extra)}; allowed: {', '.join(sorted(known))}")


def _guid_hex(val, where: str) -> str:
    """Accept 0x58a2e1030082940e, 58a2:e103:0082:940e or an int; return 16 lowercase hex digits."""
    if isinstance(val, int) and not isinstance(val, bool):
        num = val
    elif isinstance(val, str):
        s = val.lower().replace(":", "")
        s = s[2:] if s.startswith("0x") else s
        if not re.fullmatch(r"[0-9a-f]{16}", s):
            raise _err(where, f"{val!r} is not a 64-bit GUID (0x + 16 hex digits or 4 groups xxxx:xxxx:xxxx:xxxx)")
        num = int(s, 16)
    else:
        raise _err(where, f"{val!r} is not a GUID")
    return f"{num:016x}"


def _pci_netdev_name(pci: str, port_index: int, link_layer: str, multi_function: bool) -> str:
    """systemd predictable name of a PCI netdev (enp<bus>s<slot>[f<fn>]np<port> / ibp<bus>s<slot>[f<fn>])."""
    dom, bus, slot, fn = PCI_RE.match(pci).groups()
    prefix = "ib" if link_layer == "InfiniBand" else "en"
    name = prefix + ("" if dom == "0000" else f"P{int(dom, 16)}") + f"p{int(bus, 16)}s{int(slot, 16)}"
    if multi_function:
        name += f"f{int(fn)}"
    if link_layer == "Ethernet":
        name += f"np{port_index}"
    return name


def _mac_to_link_local(mac: str) -> str:
    b = [int(x, 16) for x in mac.split(":")]
    eui = [b[0] ^ 0x02, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]]
    return "fe80:0000:0000:0000:" + ":".join(f"{eui[i]:02x}{eui[i + 1]:02x}" for i in range(0, 8, 2))


def gid_from_ipv6(addr: str) -> str:
    """8-group, zero-padded GID text as the kernel prints it (%pI6)."""
    packed = ipaddress.IPv6Address(addr).packed
    return ":".join(f"{packed[i]:02x}{packed[i + 1]:02x}" for i in range(0, 16, 2))


def _bump_ipv4(iface: str, offset: int, where: str) -> str:
    try:
        net = ipaddress.IPv4Interface(iface)
    except ValueError:
        raise _err(where, f"{iface!r} is not an IPv4 address with prefix (e.g. 10.0.1.11/24)") from None
    addr = net.ip + offset
    if addr not in net.network or addr in (net.network.network_address, net.network.broadcast_address):
        raise _err(where, f"{iface} + host offset {offset} falls outside {net.network}")
    return f"{addr}/{net.network.prefixlen}"


def _rail_subnets(profile: dict, top: str) -> dict:
    """``rail_subnets``: {from: to} IPv4 networks of one prefix length. A port whose address lies in ``from`` gets
    the same host part in ``to``: a test bed puts one profile's rails on subnets of its own (Docker takes a subnet
    for one network at a time, so two scenarios on the same rails' subnets cannot run side by side)."""
    raw = _get(profile, "rail_subnets", top, dict, default={})
    out = {}
    for old, new in raw.items():
        where = f"{top}.rail_subnets[{old!r}]"
        try:
            frm, to = ipaddress.IPv4Network(str(old)), ipaddress.IPv4Network(str(new))
        except ValueError:
            raise _err(where, f"{old!r}: {new!r} is not a pair of IPv4 networks (e.g. 10.0.1.0/24: 10.0.11.0/24)") from None
        if frm.prefixlen != to.prefixlen:
            raise _err(where, f"{frm} and {to} differ in prefix length")
        out[frm] = to
    return out


def _move_rail(iface: str, rail_subnets: dict) -> str:
    addr = ipaddress.IPv4Interface(iface)
    to = rail_subnets.get(addr.network)
    if to is None:
        return iface
    return f"{to.network_address + (int(addr.ip) - int(addr.network.network_address))}/{to.prefixlen}"


def _down_rate(link_layer: str) -> str:
    """What the kernel's rate file shows for a port whose link is not up (the width/speed mlx5 reports then)."""
    return "10 Gb/sec (4X SDR)" if link_layer == "InfiniBand" else "40 Gb/sec (4X QDR)"


def _fw_value(param, value, where: str):
    """A profile's firmware value as the tool would take it on its command line (``ETH``, ``True``, 2, ...)."""
    if param.array and isinstance(value, list):
        if len(value) != param.array:
            raise _err(where, f"an array of {param.array} values, got {len(value)}")
        return [_fw_value(param, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise _err(where, f"{value} is negative; firmware values are 0 or more")
    if not isinstance(value, (str, int)):
        raise _err(where, f"must be a symbol (IB, ETH, True, ...) or a number, got {type(value).__name__} {value!r}")
    try:
        number = fw.parse_value(param, value)[0]
    except fw.FwError as exc:
        raise _err(where, f"{value!r}: {exc} (what mlxconfig answers to it)") from None
    return [number] * param.array if param.array else number


def _resolve_port(ctx: dict, p: dict, pi: int, num: int, where_of, register: bool) -> dict:  # noqa: C901
    """One port of a device with link layer p["link_layer"] (a port of a VPI card: once per link layer).
    ``where_of(field)`` names where a field came from (``devices[0].ports[1]`` or ``...ports[1].eth``); ``register``
    counts the netdev name as taken (only the link layer the port boots with)."""
    host_index, pci, fn, seen_netdev = ctx["host_index"], ctx["pci"], ctx["fn"], ctx["seen_netdev"]
    node_guid, mac_base = ctx["node_guid"], ctx["mac_base"]
    ll = _get(p, "link_layer", where_of("link_layer"), str, required=True, choices=LINK_LAYERS)
    state = _get(p, "state", where_of("state"), str, default="ACTIVE", choices=tuple(PORT_STATES))
    phys = _get(p, "phys_state", where_of("phys_state"), str, default="LinkUp" if state == "ACTIVE" else "Polling",
                choices=tuple(PHYS_STATES))
    if state == "ACTIVE" and phys != "LinkUp":
        raise _err(f"{where_of('phys_state')}.phys_state", f"an ACTIVE port must be LinkUp, got {phys}")
    rate = _get(p, "rate", where_of("rate"), str, default=_down_rate(ll) if phys != "LinkUp" else "400 Gb/sec (4X NDR)")
    if not RATE_RE.match(rate):
        raise _err(f"{where_of('rate')}.rate", f"{rate!r} is not a kernel rate string like '400 Gb/sec (4X NDR)'")
    is_ib = ll == "InfiniBand"
    up = state == "ACTIVE"
    lid = _int_or_hex(p, "lid", where_of("lid"), default=0, hi=0xBFFF) if is_ib else 0
    sm_lid = _int_or_hex(p, "sm_lid", where_of("sm_lid"), default=0, hi=0xBFFF) if is_ib else 0
    if is_ib and up and (not lid or not sm_lid):
        raise _err(f"{where_of('lid')}.lid", "an ACTIVE InfiniBand port needs a non-zero lid and sm_lid")
    if is_ib and lid:
        lid += host_index * ctx["lid_stride"]
        if lid > 0xBFFF:
            raise _err(f"{where_of('lid')}.lid", f"lid + host offset {lid:#x} leaves the unicast LID range")
    # mlx5 has one port per PCI function: the physical port index (phys_port_name p<N>) is the function number
    netdev = p.get("netdev") or _pci_netdev_name(pci, fn + num - 1, ll, ctx["multi_function"])
    if not NAME_RE.match(netdev) or (register and netdev in seen_netdev):
        raise _err(f"{where_of('netdev')}.netdev", f"{netdev!r} is not a valid, unique interface name (max 15 chars)")
    if register:
        seen_netdev.add(netdev)
    mac = p.get("mac") or ":".join(mac_base[i:i + 2] for i in range(0, 12, 2))
    if not re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", mac):
        raise _err(f"{where_of('mac')}.mac", f"{mac!r} is not a lowercase MAC address")
    if pi and not p.get("mac"):
        mac = mac[:-2] + f"{(int(mac[-2:], 16) + pi) & 0xFF:02x}"
    port_guid = node_guid if pi == 0 else f"{int(node_guid, 16) + pi:016x}"
    mtu = _int_or_hex(p, "mtu", where_of("mtu"), default=(2044 if is_ib else 9000), lo=68, hi=65520)
    ipv4 = p.get("ipv4")
    if ipv4 is not None:
        ipv4 = _move_rail(_bump_ipv4(str(ipv4), host_index * ctx["ip_stride"], f"{where_of('ipv4')}.ipv4"),
                          ctx["rail_subnets"])
    ipv6 = p.get("ipv6")
    if ipv6 is not None:
        try:
            ipv6 = str(ipaddress.IPv6Interface(ipv6).ip + host_index)
        except ValueError:
            raise _err(f"{where_of('ipv6')}.ipv6", f"{ipv6!r} is not an IPv6 address") from None
    cap_mask = _int_or_hex(p, "cap_mask", where_of("cap_mask"), default=(0xA751E848 if is_ib else 0x00010000),
                           hi=0xFFFFFFFF)
    gid_tbl_len = _int_or_hex(p, "gid_tbl_len", where_of("gid_tbl_len"), default=(8 if is_ib else 256), lo=1, hi=1024)
    pkey_tbl_len = _int_or_hex(p, "pkey_tbl_len", where_of("pkey_tbl_len"), default=(128 if is_ib else 1), lo=1,
                               hi=1024)
    if is_ib:
        default_gids = [{"index": 0, "source": "ib_default", "type": "IB/RoCE v1"}]
    else:
        default_gids = [{"index": 0, "source": "link_local", "type": "IB/RoCE v1"},
                        {"index": 1, "source": "link_local", "type": "RoCE v2"}]
        if ipv4:
            default_gids += [{"index": 2, "source": "ipv4", "type": "IB/RoCE v1"},
                             {"index": 3, "source": "ipv4", "type": "RoCE v2"}]
    gwhere_base = where_of("gids")
    gids_in = _get(p, "gids", gwhere_base, list, default=default_gids)
    gids = {}
    for gi, g in enumerate(gids_in):
        gwhere = f"{gwhere_base}.gids[{gi}]"
        if not isinstance(g, dict):
            raise _err(gwhere, "must be a mapping {index, source, type}")
        _unknown(g, {"index", "source", "type", "address"}, gwhere)
        idx = _int_or_hex(g, "index", gwhere, lo=0, hi=gid_tbl_len - 1)
        if idx is None or idx in gids:
            raise _err(f"{gwhere}.index", f"missing or duplicate GID index {idx!r}")
        src = _get(g, "source", gwhere, str, required=True, choices=GID_SOURCES)
        gtype = _get(g, "type", gwhere, str, default="IB/RoCE v1", choices=GID_TYPES)
        if is_ib and (src != "ib_default" or gtype != "IB/RoCE v1"):
            raise _err(gwhere, "an InfiniBand port only has ib_default GIDs of type IB/RoCE v1")
        if not is_ib and src == "ib_default":
            raise _err(f"{gwhere}.source", "ib_default is for InfiniBand ports; use link_local/ipv4/ipv6")
        if src == "ib_default":
            text = "fe80:0000:0000:0000:" + ":".join(port_guid[i:i + 4] for i in range(0, 16, 4))
        elif src == "link_local":
            text = _mac_to_link_local(mac)
        elif src == "ipv4":
            if not ipv4:
                raise _err(f"{gwhere}.source", "source ipv4 needs the port's ipv4 field")
            text = gid_from_ipv6("::ffff:" + ipv4.split("/", 1)[0])
        else:
            addr = g.get("address") or ipv6
            if not addr:
                raise _err(f"{gwhere}.address", "source ipv6 needs an address (or the port's ipv6 field)")
            text = gid_from_ipv6(str(addr))
        gids[idx] = {"gid": text, "type": gtype, "ndev": None if is_ib else netdev}
    counters = _get(p, "counters", where_of("counters"), dict, default={})
    hw_counters = _get(p, "hw_counters", where_of("hw_counters"), dict, default={})
    for cname, cval in list(counters.items()) + list(hw_counters.items()):
        if isinstance(cval, bool) or not isinstance(cval, int) or cval < 0:
            raise _err(f"{where_of('counters')}.counters.{cname}", f"must be a non-negative integer, got {cval!r}")
    return {
        "port": num, "link_layer": ll, "state": state, "phys_state": phys, "rate": rate,
        "lid": lid, "sm_lid": sm_lid, "sm_sl": _int_or_hex(p, "sm_sl", where_of("sm_sl"), default=0, hi=15),
        "lmc": _int_or_hex(p, "lmc", where_of("lmc"), default=0, hi=7), "cap_mask": cap_mask,
        "netdev": netdev, "mac": mac, "mtu": mtu, "ipv4": ipv4, "ipv6": ipv6, "port_guid": port_guid,
        "gid_tbl_len": gid_tbl_len, "pkey_tbl_len": pkey_tbl_len, "gids": gids,
        "counters": counters, "hw_counters": hw_counters,
    }


def _gids_layer(gids) -> str | None:
    """The link layer a GID list is for: InfiniBand when every source is ib_default, else Ethernet (None: no list)."""
    if not isinstance(gids, list) or not gids:
        return None
    sources = {g.get("source") for g in gids if isinstance(g, dict)}
    return "InfiniBand" if sources == {"ib_default"} else "Ethernet"


def _cards(devices_in: list, dev_defaults: dict, top: str) -> dict:
    """The cards (PCI functions of one bus:device) of the profile: ``{slot: {functions, vpi, firmware,
    link_layers}}``; validates the card-level fields (``vpi``, ``firmware``) and names the field in errors.
    ``device_defaults.firmware`` applies to every card, under the card's own ``firmware`` values."""
    cards: dict = {}
    fw_default = dev_defaults.get("firmware")
    for di, dev_in in enumerate(devices_in):
        if not isinstance(dev_in, dict) or not isinstance(dev_in.get("pci"), str):
            continue
        pci = dev_in["pci"].lower()
        match = PCI_RE.match(pci)
        if not match:
            continue
        card = cards.setdefault(pci.rsplit(".", 1)[0], {"functions": [], "vpi": None, "fw_in": []})
        ports = {**dev_defaults, **dev_in}.get("ports")
        card["functions"].append((int(match.group(4)), di, pci, len(ports) if isinstance(ports, list) else 0))
        where = f"{top}.devices[{di}]"
        vpi = _get({**dev_defaults, **dev_in}, "vpi", where, bool, default=False)
        if card["vpi"] is None:
            card["vpi"], card["vpi_from"] = vpi, di
        elif card["vpi"] != vpi:
            raise _err(f"{where}.vpi", f"{vpi} differs from devices[{card['vpi_from']}] of the same card "
                       f"{pci.rsplit('.', 1)[0]} (a card is VPI or not)")
        if "firmware" in dev_in:
            card["fw_in"].append((di, dev_in["firmware"]))
        if fw_default is not None and len(card["functions"]) == 1:
            card["fw_in"].insert(0, ("defaults", fw_default))
    for slot, card in cards.items():
        card["functions"].sort()
        nports = sum(f[3] for f in card["functions"])
        names = {name: param for name, param, _port in fw.param_table(nports, card["vpi"])}
        merged: dict = {"defaults": {}, "next_boot": {}, "max_vfs": None}
        origin: dict = {}
        for di, fw_in in card["fw_in"]:
            where = f"{top}.device_defaults.firmware" if di == "defaults" else f"{top}.devices[{di}].firmware"
            if not isinstance(fw_in, dict):
                raise _err(where, "must be a mapping {defaults, next_boot, max_vfs}")
            _unknown(fw_in, {"defaults", "next_boot", "max_vfs"}, where)
            if "max_vfs" in fw_in:
                max_vfs = _int_or_hex(fw_in, "max_vfs", where, hi=0xFFFF)
                if origin.get("max_vfs", "defaults") != "defaults" and merged["max_vfs"] not in (None, max_vfs):
                    raise _err(f"{where}.max_vfs", f"differs from devices[{origin['max_vfs']}] of the same card {slot}")
                merged["max_vfs"], origin["max_vfs"] = max_vfs, di
            for section in ("defaults", "next_boot"):
                for name, value in _get(fw_in, section, where, dict, default={}).items():
                    vwhere = f"{where}.{section}.{name}"
                    if name not in names:
                        raise _err(vwhere, f"not a parameter of this card ({nports} port(s), "
                                   f"{'VPI' if card['vpi'] else 'not VPI: no LINK_TYPE_P<n>'}); parameters: "
                                   f"{', '.join(sorted({p.name + ('_P<n>' if p.scope == 'port' else '') for p in names.values()}))}")
                    value = _fw_value(names[name], value, vwhere)
                    if origin.get((section, name), "defaults") != "defaults" and merged[section][name] != value:
                        raise _err(vwhere, f"differs from devices[{origin[(section, name)]}] of the same card {slot}")
                    merged[section][name], origin[(section, name)] = value, di
        if merged["max_vfs"] is None:
            merged["max_vfs"] = fw.DEFAULT_MAX_VFS
        for section in ("defaults", "next_boot"):
            if merged[section].get("NUM_OF_VFS", 0) > merged["max_vfs"]:
                src = origin[(section, "NUM_OF_VFS")]
                raise _err(f"{top}.{'device_defaults' if src == 'defaults' else f'devices[{src}]'}.firmware.{section}.NUM_OF_VFS",
                           f"{merged[section]['NUM_OF_VFS']} is more than the card's max_vfs {merged['max_vfs']}")
        card["firmware"] = merged
        card["link_layers"], n = {}, 0
        for _fn, _di, pci, count in card["functions"]:
            for pi in range(count):
                n += 1
                if card["vpi"]:
                    name = f"LINK_TYPE_P{n}"
                    value = merged["next_boot"].get(name, merged["defaults"].get(name, fw.BY_NAME["LINK_TYPE"].default))
                    card["link_layers"][(pci, pi + 1)] = "Ethernet" if value == 2 else "InfiniBand"
    return cards


# ibsim's client hands the node id (SIM_HOST = the NodeDescription) over in a char[32] (include/ibsim.h)
IBSIM_NODEID_MAX = 31


def _ib_fabric(profile: dict, top: str) -> dict | None:
    """``ib_fabric: {server, port, hostname}`` (install.yml sets it from ``simhost_ib_fabric``): the host's IB ports
    are CAs of an ibsim fabric reachable at server:port, named ``<hostname> <dev>``."""
    fab = _get(profile, "ib_fabric", top, dict)
    if fab is None:
        return None
    where = f"{top}.ib_fabric"
    _unknown(fab, {"server", "port", "hostname"}, where)
    server = _get(fab, "server", where, str, required=True)
    hostname = _get(fab, "hostname", where, str, required=True)
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,63}", server):
        raise _err(f"{where}.server", f"{server!r} is not a host name or IPv4 address")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,63}", hostname):
        raise _err(f"{where}.hostname", f"{hostname!r} is not a host name")
    return {"server": server, "port": _int_or_hex(fab, "port", where, default=7070, lo=1, hi=65000),
            "hostname": hostname}


def _node_desc(dev: dict, where: str, name: str, host_index: int, ib_fabric, ports: list) -> str:
    """NodeDescription: the profile's, else ``<hostname> <dev>`` on a fabric (what rdma-ndd sets on real hosts),
    else ``simhost<N> <dev>``. On a fabric it is also the ibsim node id, hence at most 31 characters."""
    default = f"{ib_fabric['hostname']} {name}" if ib_fabric else f"simhost{host_index} {name}"
    desc = _get(dev, "node_desc", where, str, default=default)
    if ib_fabric and any(p.get("fabric") for p in ports) and len(desc) > IBSIM_NODEID_MAX:
        raise _err(f"{where}.node_desc", f"{desc!r} is longer than {IBSIM_NODEID_MAX} characters, the longest node "
                   "id an ibsim client can name (SIM_HOST); use a shorter host name")
    return desc


def _name_devices(profile: dict, top: str, devices: list, boot: dict | None, stack_provider: str) -> dict:
    """Kernel names (probe = PCI order), device indexes, then the boot's naming rules (simhost/naming.py): sets
    ``kernel_name``, ``index``, ``name`` and ``named_by`` of each expanded device; returns the profile's
    ``rdma_naming`` record."""
    pin = _get(profile, "rdma_naming", top, str, choices=tuple(naming.PINS))
    kernel = naming.kernel_names([d["pci"] for d in devices], [d["name"] for d in devices])
    for i, kname in enumerate(kernel):
        if kname in kernel[:i]:
            raise _err(f"{top}.devices[{i}].name", f"{kname!r} is not a valid, unique RDMA device name")
    order = sorted(range(len(devices)), key=lambda k: devices[k]["pci"])
    for index, i in enumerate(order):
        dev = devices[i]
        first = dev["ports"][0]
        dev.update(kernel_name=kernel[i], index=index, protocol=first["link_layer"], attrs={
            "node_guid": ":".join(dev["node_guid"][j:j + 4] for j in range(0, 16, 4)),
            "sys_image_guid": ":".join(dev["sys_image_guid"][j:j + 4] for j in range(0, 16, 4)),
            "fw_ver": dev["fw_ver"], "hca_type": dev["hca_type"], "hw_rev": dev["hw_rev"], "board_id": dev["board_id"],
            "node_type": "1: CA"})
    rules = (boot or {}).get("naming")
    if rules is None:   # no boot (check, fabric): the pin, else the stack's own rule file
        rules = naming.boot_rules(pin, stack_provider, disk=False)
    warnings = naming.assign(devices, rules)
    for dev in devices:
        dev.pop("attrs")
    return {"pin": pin, "files": rules["files"], "warnings": warnings}


def expand(profile: dict, host_index: int | None = None, boot: dict | None = None) -> dict:  # noqa: C901
    """Validate ``profile`` and resolve it for host number ``host_index`` (default: profile's host_index or 0).

    ``boot`` (from build_tree: what the firmware NV store and the cables make of the hardware at this boot, and the
    udev naming rules on the host's disk): ``{"link_layers": {(pci, port): "InfiniBand"|"Ethernet"}, "unplugged":
    [(pci, port)], "naming": naming.boot_rules(...)}``; without it a VPI port takes the link layer the profile's
    firmware (next_boot, else defaults) gives it, every cable is in, and the devices are named by the profile's
    ``rdma_naming`` pin, else by the profile stack's own rules file (no site override)."""
    if not isinstance(profile, dict):
        raise ProfileError(f"profile must be a mapping, got {type(profile).__name__}")
    pname = profile.get("name") or "<unnamed>"
    top = f"profile {pname}"
    _unknown(profile, KNOWN_TOP, top)
    _get(profile, "name", top, str, required=True)
    if host_index is None:
        host_index = _int_or_hex(profile, "host_index", top, default=0, hi=255)
    if isinstance(host_index, bool) or not isinstance(host_index, int) or not 0 <= host_index <= 255:
        raise _err(f"{top}.host_index", f"must be an integer 0..255, got {host_index!r}")

    stack = _get(profile, "stack", top, dict, default={"provider": "inbox"})
    _unknown(stack, {"provider", "version", "ofed_info_s"}, f"{top}.stack")
    provider = _get(stack, "provider", f"{top}.stack", str, required=True, choices=PROVIDERS)
    version = _get(stack, "version", f"{top}.stack", str)
    if provider in ("mlnx_ofed", "doca") and not version:
        raise _err(f"{top}.stack.version", f"required when provider is {provider}")
    if provider in ("inbox", "none") and version:
        raise _err(f"{top}.stack.version", f"must be empty when provider is {provider} (no ofed_info on such a host)")
    ofed_info_s = stack.get("ofed_info_s")
    if provider == "mlnx_ofed" and not ofed_info_s:
        ofed_info_s = f"MLNX_OFED_LINUX-{version}:"
    elif provider == "doca" and not ofed_info_s:
        ofed_info_s = f"OFED-internal-{version}:"

    devices_in = _get(profile, "devices", top, list, default=[])
    modules = _get(profile, "kernel_modules", top, list, default=(list(DEFAULT_MODULES) if devices_in else []))
    for i, m in enumerate(modules):
        if not isinstance(m, str) or not re.fullmatch(r"[a-z0-9_]+", m):
            raise _err(f"{top}.kernel_modules[{i}]", f"{m!r} is not a kernel module name")
    if devices_in and "mlx5_core" not in modules:
        raise _err(f"{top}.kernel_modules", "devices are declared but mlx5_core is not loaded")

    seed = _int_or_hex(profile, "guid_seed", top, default=0x100000, hi=0xFFFFFF)
    lid_stride = _int_or_hex(profile, "lid_host_stride", top, default=32, hi=0x1000)
    ip_stride = _int_or_hex(profile, "ipv4_host_stride", top, default=1, hi=0x10000)
    rail_subnets = _rail_subnets(profile, top)
    dev_defaults = _get(profile, "device_defaults", top, dict, default={})
    port_defaults = _get(profile, "port_defaults", top, dict, default={})
    _unknown(dev_defaults, KNOWN_DEV - {"name", "pci", "ports", "node_guid", "sys_image_guid", "acpi_index"},
             f"{top}.device_defaults")
    _unknown(port_defaults, KNOWN_PORT - {"port", "netdev", "ipv4", "ipv6", "mac"}, f"{top}.port_defaults")
    for key, allowed in (("ib", VPI_IB_FIELDS), ("eth", VPI_ETH_FIELDS)):
        if key in port_defaults:
            _get(port_defaults, key, f"{top}.port_defaults", dict)
            _unknown(port_defaults[key], allowed - {"netdev", "ipv4", "ipv6", "mac"}, f"{top}.port_defaults.{key}")
    boot = boot or {}
    boot_link_layers = boot.get("link_layers") or {}
    boot_unplugged = {tuple(x) for x in boot.get("unplugged") or []}
    ib_fabric = _ib_fabric(profile, top)  # simhost/fabric.py: the host's IB ports are on an ibsim fabric
    layout = _get(profile, "mstflint_layout", top, str, default="current", choices=MSTFLINT_LAYOUTS)

    cards = _cards(devices_in, dev_defaults, top)
    out_devices, dev_where = [], []
    seen_dev, seen_pci, seen_netdev = set(), set(), set()

    def guid_of(d: dict, i: int, where: str) -> str:
        if not d.get("node_guid"):
            return f"{MELLANOX_OUI}0300{(seed + (host_index << 12) + i * 0x10) & 0xFFFFFF:06x}"
        guid = _guid_hex(d["node_guid"], f"{where}.node_guid")
        return f"{int(guid, 16) ^ (host_index << 24):016x}" if host_index else guid

    for di, dev_in in enumerate(devices_in):
        dwhere = f"{top}.devices[{di}]"
        if not isinstance(dev_in, dict):
            raise _err(dwhere, "must be a mapping")
        _unknown(dev_in, KNOWN_DEV, dwhere)
        dev = {**dev_defaults, **dev_in}
        # the kernel's name for the device (mlx5_<N>, probe order); default from PCI order (after this loop)
        name = _get(dev, "name", dwhere, str)
        if name is not None and (not IBDEV_RE.match(name) or name in seen_dev):
            raise _err(f"{dwhere}.name", f"{name!r} is not a valid, unique RDMA device name")
        seen_dev.add(name)
        pci = _get(dev, "pci", dwhere, str, required=True).lower()
        if not PCI_RE.match(pci) or pci in seen_pci:
            raise _err(f"{dwhere}.pci", f"{pci!r} is not a unique PCI address DDDD:BB:DD.F")
        seen_pci.add(pci)
        card = cards[pci.rsplit(".", 1)[0]]
        # a PCI function with siblings on the same slot gets the f<fn> suffix in its predictable netdev name
        multi_function = len(card["functions"]) > 1
        vpi = card["vpi"]
        lower24 = (seed + (host_index << 12) + di * 0x10) & 0xFFFFFF
        mac_base = f"{MELLANOX_OUI}{lower24:06x}"

        node_guid = guid_of(dev, di, dwhere)
        # the functions of one card share its system image GUID: the node GUID of its first function
        first = card["functions"][0][1]
        card_guid = node_guid if first == di else guid_of({**dev_defaults, **devices_in[first]}, first,
                                                          f"{top}.devices[{first}]")
        sys_guid = _guid_hex(dev["sys_image_guid"], f"{dwhere}.sys_image_guid") if dev.get("sys_image_guid") else card_guid
        hca_type = _get(dev, "hca_type", dwhere, str, default="MT4129")
        if not re.fullmatch(r"MT\d+", hca_type):
            raise _err(f"{dwhere}.hca_type", f"{hca_type!r} is not like MT4129")
        pci_dev_id = _int_or_hex(dev, "pci_device_id", dwhere, default=int(hca_type[2:]), hi=0xFFFF)
        fw_ver = _get(dev, "fw_ver", dwhere, str, default="28.41.1000")
        if not re.fullmatch(r"\d+\.\d+\.\d+", fw_ver):
            raise _err(f"{dwhere}.fw_ver", f"{fw_ver!r} is not like 28.41.1000")
        ports_in = _get(dev, "ports", dwhere, list, required=True)
        if not ports_in:
            raise _err(f"{dwhere}.ports", "a device needs at least one port")
        fn = int(pci.rsplit(".", 1)[1])

        ctx = {"host_index": host_index, "lid_stride": lid_stride, "ip_stride": ip_stride, "pci": pci, "fn": fn,
               "rail_subnets": rail_subnets,
               "multi_function": multi_function, "mac_base": mac_base, "node_guid": node_guid,
               "seen_netdev": seen_netdev}

        ports = []
        for pi, port_in in enumerate(ports_in):
            pwhere = f"{dwhere}.ports[{pi}]"
            if not isinstance(port_in, dict):
                raise _err(pwhere, "must be a mapping")
            _unknown(port_in, KNOWN_PORT, pwhere)
            common = {k: v for k, v in {**port_defaults, **port_in}.items() if k not in ("ib", "eth")}
            num = _int_or_hex(common, "port", pwhere, default=pi + 1, lo=1, hi=255)
            if not vpi:
                for key in ("ib", "eth"):
                    if key in port_in:
                        raise _err(f"{pwhere}.{key}", "ib:/eth: give the two link layers of a port of a VPI card "
                                   "(device vpi: true); this card is not VPI")
                port = _resolve_port(ctx, common, pi, num, lambda _k, w=pwhere: w, True)
            else:
                if "link_layer" in common:
                    raise _err(f"{pwhere}.link_layer", "a VPI port's link layer is the firmware's LINK_TYPE_P<n> "
                               "(device firmware.next_boot); give the values of each link layer as ib: and eth:")
                chosen = boot_link_layers.get((pci, num)) or card["link_layers"][(pci, pi + 1)]
                port = None
                for key, ll, allowed in (("ib", "InfiniBand", VPI_IB_FIELDS), ("eth", "Ethernet", VPI_ETH_FIELDS)):
                    # a port's ib:/eth: map; without one, port_defaults' (a profile gives the alternative once)
                    sub_in = port_in.get(key, {} if isinstance(port_defaults.get(key), dict) else None)
                    if not isinstance(sub_in, dict):
                        raise _err(f"{pwhere}.{key}", "a port of a VPI card needs an ib: and an eth: mapping (the port's "
                                   "values as InfiniBand and as Ethernet port, here or in port_defaults), got "
                                   + type(sub_in).__name__)
                    _unknown(sub_in, allowed, f"{pwhere}.{key}")
                    # the more specific wins: port_defaults, port_defaults.<ll>, the port's own fields, its <ll> map
                    own = {k: v for k, v in port_in.items() if k not in ("ib", "eth")}
                    base = {k: v for k, v in port_defaults.items() if k not in ("ib", "eth")}
                    merged = {**base, **(port_defaults.get(key) or {}), **own, **sub_in}
                    if "gids" not in sub_in and _gids_layer(merged.get("gids")) not in (None, ll):
                        # gids given for the other link layer (their sources name it): this one's defaults
                        merged.pop("gids")
                        if _gids_layer((port_defaults.get(key) or {}).get("gids")) == ll:
                            merged["gids"] = port_defaults[key]["gids"]
                    alt = _resolve_port(ctx, {**merged, "link_layer": ll}, pi, num,
                                        lambda k, w=pwhere, s=key, keys=set(sub_in) | (set(port_defaults.get(key) or {})
                                                                                      - set(own)):
                                        f"{w}.{s}" if k in keys else w,
                                        ll == chosen)
                    if ll == chosen:
                        port = alt
            if ib_fabric and port["link_layer"] == "InfiniBand" and port["phys_state"] == "LinkUp":
                # on a fabric the SM assigns the LID: up to the first sweep the port is INIT with no LID, as real
                # hardware (a port the profile has without link, e.g. DOWN/Polling, is not cabled to the fabric); simhost-ibsync mirrors what the fabric's SM did (simhost/ibsync.py)
                port.update(state="INIT", phys_state="LinkUp", lid=0, sm_lid=0, fabric=True)
            if (pci, num) in boot_unplugged:
                # a port whose cable is out at boot: the link never trained, no SM ever answered (no LID)
                port["plugged"] = {k: port[k] for k in ("state", "phys_state", "rate", "lid", "sm_lid")}
                port.update(cable="unplugged", state="DOWN", phys_state="Polling", rate=_down_rate(port["link_layer"]),
                            lid=0, sm_lid=0)
            ports.append(port)
        nums = [p["port"] for p in ports]
        if nums != list(range(1, len(nums) + 1)):
            raise _err(f"{dwhere}.ports", f"port numbers must be 1..{len(nums)} in order, got {nums}")
        acpi_index = _int_or_hex(dev, "acpi_index", dwhere, hi=naming.ONBOARD_INDEX_MAX)
        out_devices.append({
            "name": name, "pci": pci, "pci_device_id": pci_dev_id, "hca_type": hca_type, "fw_ver": fw_ver,
            "board_id": _get(dev, "board_id", dwhere, str, default="MT_0000000838"),
            "hw_rev": _get(dev, "hw_rev", dwhere, str, default="0"),
            "part_number": _get(dev, "part_number", dwhere, str), "description": _get(dev, "description", dwhere, str),
            "node_guid": node_guid, "sys_image_guid": sys_guid,
            "numa_node": _int_or_hex(dev, "numa_node", dwhere, default=0, hi=64),
            "pcie": _get(dev, "pcie", dwhere, str, default="32.0 GT/s PCIe"),
            "vpi": vpi, "firmware": card["firmware"], "multi_function": multi_function, "acpi_index": acpi_index,
            "ports": ports,
        })
        dev_where.append((dev, dwhere))
    rdma_naming = _name_devices(profile, top, out_devices, boot, stack_provider=provider)
    for (dev, dwhere), out in zip(dev_where, out_devices):
        out["node_desc"] = _node_desc(dev, dwhere, out["name"], host_index, ib_fabric, out["ports"])
    oob = _get(profile, "oob_netdevs", top, list, default=[{"name": "eth0"}])
    oob_out = []
    for oi, o in enumerate(oob):
        owhere = f"{top}.oob_netdevs[{oi}]"
        if not isinstance(o, dict):
            raise _err(owhere, "must be a mapping {name, mtu}")
        _unknown(o, {"name", "mtu", "mac"}, owhere)
        oname = _get(o, "name", owhere, str, required=True)
        if not NAME_RE.match(oname) or oname in seen_netdev:
            raise _err(f"{owhere}.name", f"{oname!r} is not a valid, unique interface name")
        seen_netdev.add(oname)
        oob_out.append({"name": oname, "mtu": _int_or_hex(o, "mtu", owhere, default=1500, lo=68, hi=65535),
                        "mac": o.get("mac") or f"02:42:ac:11:{host_index:02x}:{oi + 2:02x}"})

    # simhost.kmod: the GPU driver marker, the modules modprobe can load, enhanced IPoIB (datagram only)
    gpu = _get(profile, "gpu", top, dict, default=None)
    if gpu is not None:
        _unknown(gpu, {"driver", "version"}, f"{top}.gpu")
        _get(gpu, "driver", f"{top}.gpu", str, required=True, choices=("nvidia",))
        if not re.fullmatch(r"\d+\.\d+(\.\d+)?", str(_get(gpu, "version", f"{top}.gpu", str, required=True))):
            raise _err(f"{top}.gpu.version", f"{gpu['version']!r} is not a driver version like 550.54.15")
        gpu = {"driver": gpu["driver"], "version": gpu["version"]}
    available = _get(profile, "modules_available", top, list, default=None)
    for i, m in enumerate(available or []):
        if not isinstance(m, str) or not re.fullmatch(r"[a-z0-9_]+", m):
            raise _err(f"{top}.modules_available[{i}]", f"{m!r} is not a kernel module name")
    ipoib_enhanced = _get(profile, "ipoib_enhanced", top, bool, default=True)

    return {
        "gpu": gpu, "modules_available": available, "ipoib_enhanced": ipoib_enhanced,
        "name": profile["name"], "description": profile.get("description", ""), "host_index": host_index,
        "stack": {"provider": provider, "version": version, "ofed_info_s": ofed_info_s},
        "kernel_modules": modules, "devices": out_devices, "oob_netdevs": oob_out,
        # true: the RoCE netdevs are real container links that simhost-netsync mirrors (see simhost/netdev.py)
        "real_netdevs": _get(profile, "real_netdevs", top, bool, default=False),
        "mstflint_layout": layout,
        # how the devices got their names at this boot (simhost/naming.py): pin, rule files, warnings
        "rdma_naming": rdma_naming,
        # {server, port, hostname} of the host's ibsim fabric, or None (static IB ports); simhost/fabric.py
        "ib_fabric": ib_fabric,
    }
