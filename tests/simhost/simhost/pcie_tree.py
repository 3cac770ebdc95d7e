"""A synthetic PCIe tree in a sysfs root: root ports, PCIe switches, GPUs and ConnectX cards, with config-space files
laid out as the PCI Express Base Specification says, so that the real ``lspci``/``setpci`` (``-A linux-sysfs -O
sysfs.path=<root>/bus/pci``) read them (standard library only).

Layout written (paths under the root, as on a real kernel):

    devices/pci<DDDD:BB>/<root port>/<switch upstream port>/<downstream port>/<device>/   one directory per function
        vendor device class subsystem_vendor subsystem_device revision irq resource numa_node
        current_link_speed current_link_width max_link_speed max_link_width ("32.0 GT/s PCIe", "16")
        config        4096 bytes (``size`` to truncate, as an unprivileged read is): type 0/1 header, bus numbers,
                      capabilities at 0x40 (Power Management) and 0x60 (PCI Express v2: DevCap, DevCtl, LnkCap,
                      LnkSta, LnkCap2, LnkCtl2); extended at 0x100: bridges ACS, endpoints a Device Serial Number
                      then ATS at 0x140
        iommu_group -> ../../kernel/iommu_groups/<n>      (unless the IOMMU is off)
    bus/pci/devices/<bdf> -> ../../../devices/...        kernel/iommu_groups/<n>/{type,devices/<bdf>}

A node is a dict: ``pci``, ``kind`` (root_port, upstream_port, downstream_port, gpu, nic), ``max_speed`` (GT/s),
``max_width``, ``speed``/``width`` (the trained link: on the upstream-facing end; a downstream-facing port shows its
child's, or 2.5 GT/s x0 with nothing below it), ``acs`` (the ACS Control word of a bridge), ``ats`` (an endpoint's ATS
Enable), ``max_read_req``, ``max_payload``, ``children``. The model's numbers: every link Gen5 x16 unless a fault
says otherwise, ACS Capability 0x005f (SrcValid TransBlk ReqRedir CmpltRedir UpstreamFwd DirectTrans), MaxPayload 256 of 512.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SPEED_CODE = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
PORT_TYPE = {"root_port": 0x4, "upstream_port": 0x5, "downstream_port": 0x6, "gpu": 0x0, "nic": 0x0}
BRIDGES = ("root_port", "upstream_port", "downstream_port")
IDS = {  # kind -> (vendor, device, class)
    "root_port": (0x8086, 0x352A, 0x060400), "upstream_port": (0x1000, 0xC030, 0x060400),
    "downstream_port": (0x1000, 0xC030, 0x060400), "gpu": (0x10DE, 0x2330, 0x030200),
    "nic": (0x15B3, 0x1021, 0x020700),
}
SIZE_CODE = {128: 0, 256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
ACS_REDIRECT_ON = 0x001D    # SrcValid ReqRedir CmpltRedir UpstreamFwd: what Linux enables with the IOMMU on
IOMMU_TYPES = {"passthrough": "identity", "translated": "DMA-FQ"}


def _speed_text(speed):
    return "%.1f GT/s PCIe" % speed


def config_space(node, bus=None, secondary=None, subordinate=None, size=4096):
    """The node's config space bytes (the first ``size`` of 4096)."""
    cfg = bytearray(4096)
    vendor, device, klass = IDS[node["kind"]]
    cfg[0:4] = vendor.to_bytes(2, "little") + node.get("device_id", device).to_bytes(2, "little")
    cfg[0x04:0x08] = (0x0406).to_bytes(2, "little") + (0x0010).to_bytes(2, "little")
    cfg[0x09:0x0C] = klass.to_bytes(3, "little")
    bridge = node["kind"] in BRIDGES
    cfg[0x0E] = 0x01 if bridge else 0x00
    if bridge:
        cfg[0x18:0x1B] = bytes([bus, secondary, subordinate])
    cfg[0x34] = 0x40
    cfg[0x40:0x44] = bytes([0x01, 0x60, 0x03, 0x00])                          # Power Management, next 0x60
    exp = 0x60
    cfg[exp:exp + 4] = bytes([0x10, 0x00]) + (0x0002 | (PORT_TYPE[node["kind"]] << 4)).to_bytes(2, "little")
    cfg[exp + 0x04:exp + 0x08] = (0x0002).to_bytes(4, "little")                    # MaxPayload 512 supported
    devctl = (SIZE_CODE[node.get("max_payload", 256)] << 5) | (SIZE_CODE[node.get("max_read_req", 512)] << 12)
    cfg[exp + 0x08:exp + 0x0A] = devctl.to_bytes(2, "little")
    port = node.get("port_number", 0)
    lnkcap = SPEED_CODE[node["max_speed"]] | (node["max_width"] << 4) | (port << 24)
    cfg[exp + 0x0C:exp + 0x10] = lnkcap.to_bytes(4, "little")
    lnksta = SPEED_CODE[node["_speed"]] | (node["_width"] << 4)
    cfg[exp + 0x12:exp + 0x14] = lnksta.to_bytes(2, "little")
    vector = sum(1 << code for code in SPEED_CODE.values() if code <= SPEED_CODE[node["max_speed"]])
    cfg[exp + 0x2C:exp + 0x30] = vector.to_bytes(4, "little")
    cfg[exp + 0x30:exp + 0x32] = SPEED_CODE[node["max_speed"]].to_bytes(2, "little")
    if bridge:
        if node.get("acs") is not None:   # ACS, version 1, last
            cfg[0x100:0x104] = (0x000D | (1 << 16)).to_bytes(4, "little")
            cfg[0x104:0x106] = (0x005F).to_bytes(2, "little")
            cfg[0x106:0x108] = node["acs"].to_bytes(2, "little")
    else:
        after = 0x140 if node.get("ats") is not None else 0     # Device Serial Number, then ATS
        cfg[0x100:0x104] = (0x0003 | (1 << 16) | (after << 20)).to_bytes(4, "little")
        cfg[0x104:0x10C] = bytes(range(1, 9))
        if node.get("ats") is not None:
            cfg[0x140:0x144] = (0x000F | (1 << 16)).to_bytes(4, "little")
            cfg[0x146:0x148] = ((0x8000 if node["ats"] else 0)).to_bytes(2, "little")
    return bytes(cfg[:size])


def _w(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _bus(pci):
    return int(pci.split(":")[1], 16)


def _subordinate(node):
    return max([_bus(node["pci"])] + [_subordinate(c) for c in node.get("children", [])])


def write(root, host_bridges, iommu="passthrough", config_size=4096):
    """Write ``host_bridges`` (``[{name: "pci0000:15", numa_node, ports: [node]}]``) under ``root``; ``iommu`` off,
    passthrough or translated. Returns the root."""
    root = Path(root)
    groups = []

    def visit(node, parent_dir, numa, parent):
        fn_dir = parent_dir / node["pci"]
        kids = node.get("children", [])
        if node["kind"] in ("root_port", "downstream_port"):
            below = kids[0] if kids else None
            node["_speed"], node["_width"] = (below.get("speed", min(below["max_speed"], node["max_speed"])),
                                              below.get("width", min(below["max_width"], node["max_width"]))) \
                if below else (2.5, 0)
        else:   # the upstream end of the link to ``parent`` (a switch's upstream port, an endpoint)
            node["_speed"] = node.get("speed", min(node["max_speed"], parent["max_speed"]))
            node["_width"] = node.get("width", min(node["max_width"], parent["max_width"]))
        vendor, device, klass = IDS[node["kind"]]
        _w(fn_dir / "vendor", "0x%04x" % vendor)
        _w(fn_dir / "device", "0x%04x" % node.get("device_id", device))
        _w(fn_dir / "class", "0x%06x" % klass)
        _w(fn_dir / "subsystem_vendor", "0x%04x" % vendor)
        _w(fn_dir / "subsystem_device", "0x0000")
        _w(fn_dir / "revision", "0x00")
        _w(fn_dir / "irq", "0")
        _w(fn_dir / "numa_node", str(numa))
        _w(fn_dir / "resource", "\n".join(["0x0000000000000000 0x0000000000000000 0x0000000000000000"] *
                                          (17 if node["kind"] in BRIDGES else 13)))
        _w(fn_dir / "current_link_speed", _speed_text(node["_speed"]))
        _w(fn_dir / "current_link_width", str(node["_width"]))
        _w(fn_dir / "max_link_speed", _speed_text(node["max_speed"]))
        _w(fn_dir / "max_link_width", str(node["max_width"]))
        secondary = _bus(kids[0]["pci"]) if kids else _bus(node["pci"]) + 1
        (fn_dir / "config").write_bytes(config_space(node, _bus(node["pci"]), secondary, _subordinate(node),
                                                     size=config_size))
        link = root / "bus" / "pci" / "devices" / node["pci"]
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(fn_dir, link.parent))
        if iommu != "off":
            groups.append((node["pci"], fn_dir))
        for child in kids:
            visit(child, fn_dir, numa, node)

    for hb in host_bridges:
        for port in hb["ports"]:
            visit(port, root / "devices" / hb["name"], hb.get("numa_node", -1), None)
    for number, (pci, fn_dir) in enumerate(groups):
        gdir = root / "kernel" / "iommu_groups" / str(number)
        _w(gdir / "type", IOMMU_TYPES[iommu])
        (gdir / "devices").mkdir(parents=True, exist_ok=True)
        (gdir / "devices" / pci).symlink_to(os.path.relpath(fn_dir, gdir / "devices"))
        (fn_dir / "iommu_group").symlink_to(os.path.relpath(gdir, fn_dir))
    (root / "kernel" / "iommu_groups").mkdir(parents=True, exist_ok=True)
    return root


def _places(root, host_bridges):
    """``{pci: the function's directory}`` of every node of ``host_bridges`` under ``root``."""
    out = {}

    def walk(node, parent):
        out[node["pci"]] = parent / node["pci"]
        for child in node.get("children", []):
            walk(child, parent / node["pci"])
    for hb in host_bridges:
        for port in hb["ports"]:
            walk(port, root / "devices" / hb["name"])
    return out


def graft(root, host_bridges, iommu="passthrough", config_size=4096):
    """Write the tree into a host's root that ``tree.build_tree`` made with its RDMA devices at the tree's NIC
    addresses (the profile's ``pci`` set to ``rails(nodes)``): each such function's directory (its ``infiniband/``,
    ``net/``, VPD...) moves to its place in the PCIe tree, the links into and out of it follow (relative, as the
    kernel's), and ``write`` then gives it the tree's files (ids, link files, config space). Returns the root."""
    root = Path(os.path.realpath(root))
    links = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                links.append((path, Path(os.path.normpath(os.path.join(dirpath, os.readlink(path))))))
    moves = []
    for pci, place in _places(root, host_bridges).items():
        link = root / "bus" / "pci" / "devices" / pci
        if link.is_symlink():
            old = Path(os.path.realpath(link))
            link.unlink()
            place.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(old), str(place))
            moves.append((old, place))
            try:
                os.removedirs(old.parent)       # the builder's own root port, now empty
            except OSError:
                pass

    def moved(path):
        for old, new in moves:
            if path == old or old in path.parents:
                return new / path.relative_to(old)
        return path
    for link, target in links:
        new_link, new_target = moved(link), moved(target)
        if (new_link, new_target) != (link, target) and new_link.is_symlink():
            new_link.unlink()
            new_link.symlink_to(os.path.relpath(new_target, new_link.parent))
    return write(root, host_bridges, iommu=iommu, config_size=config_size)


def build_host(root, profile, layout=None, host_index=1, iommu="passthrough", config_size=4096):
    """Build a simulated host (a profile name or dict, ``tree.build_tree``) under ``root`` with its RDMA devices in the
    PCIe tree ``layout`` (``(host_bridges, nodes)``, default ``dgx_h100()``; faults are node edits before this call):
    the profile's device i at NIC i's address (``rails``), then ``graft``. Returns ``nodes``."""
    import copy  # pylint: disable=import-outside-toplevel
    from simhost import load  # pylint: disable=import-outside-toplevel
    from simhost.tree import build_tree  # pylint: disable=import-outside-toplevel

    host_bridges, nodes = layout or dgx_h100()
    spec = copy.deepcopy(load(profile) if isinstance(profile, str) else profile)
    for dev, pci in zip(spec["devices"], rails(nodes)):
        dev["pci"] = pci
    build_tree(spec, root, host_index=host_index)
    graft(root, host_bridges, iommu=iommu, config_size=config_size)
    return nodes


def dgx_h100(nic_under=None):
    """A DGX H100-like host: 8 GPU-NIC pairs, each a root port (its own host bridge, as on Sapphire Rapids) with a
    PCIe switch whose two downstream ports hold an H100 SXM (10de:2330) and a ConnectX-7 (15b3:1021); pairs 0-3 on
    NUMA node 0, 4-7 on 1. ``nic_under``: ``{pair: other pair}`` puts a pair's NIC under the other pair's switch
    instead. Returns ``(host_bridges, nodes by pci)``; NIC r is rail r's."""
    nic_under = nic_under or {}
    bases = [0x15, 0x35, 0x55, 0x75, 0x95, 0xB5, 0xD5, 0xF5][:8]
    placed = dict((p, ["gpu"]) for p in range(8))
    for p in range(8):
        placed[nic_under.get(p, p)].append(("nic", p))
    host_bridges, nodes = [], {}

    def add(node):
        nodes[node["pci"]] = node
        return node

    for p, base in enumerate(bases):
        dsps = []
        for i, what in enumerate(placed[p]):
            child_bus = base + 3 + i
            kind = "gpu" if what == "gpu" else "nic"
            end = add({"pci": "0000:%02x:00.0" % child_bus, "kind": kind, "max_speed": 32.0, "max_width": 16,
                       "ats": False, "max_read_req": 4096 if kind == "nic" else 512,
                       "rail": what[1] if kind == "nic" else None})
            dsps.append(add({"pci": "0000:%02x:%02x.0" % (base + 2, i), "kind": "downstream_port",
                             "max_speed": 32.0, "max_width": 16, "acs": 0x0000, "port_number": i + 1,
                             "children": [end]}))
        usp = add({"pci": "0000:%02x:00.0" % (base + 1), "kind": "upstream_port", "max_speed": 32.0,
                   "max_width": 16, "children": dsps})
        rp = add({"pci": "0000:%02x:01.0" % base, "kind": "root_port", "max_speed": 32.0, "max_width": 16,
                  "acs": 0x0000, "children": [usp]})
        host_bridges.append({"name": "pci0000:%02x" % base, "numa_node": 0 if p < 4 else 1, "ports": [rp]})
    return host_bridges, nodes


def rails(nodes):
    """``[NIC pci]`` of a ``dgx_h100`` layout, rail 0 first."""
    nics = [n for n in nodes.values() if n["kind"] == "nic"]
    return [n["pci"] for n in sorted(nics, key=lambda n: n["rail"])]
