# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the RDMA state of a host from sysfs (pure Python, no Ansible imports).

Everything is read under a root directory (``/sys`` on a real host, a fixture tree in tests), following the
kernel ABI ``Documentation/ABI/stable/sysfs-class-infiniband`` and ``drivers/infiniband/core/sysfs.c``:

* ``class/infiniband/<dev>/{fw_ver,node_guid,sys_image_guid,board_id,hca_type,node_type}`` and the ``device``
  link to the PCI function, whose ``net/`` lists the netdevs;
* ``class/infiniband/<dev>/ports/<n>/{state,phys_state,link_layer,rate,lid,sm_lid}``, ``gids/<i>``,
  ``gid_attrs/{types,ndevs}/<i>``, ``pkeys/<i>``, ``counters/``, ``hw_counters/``;
* ``class/net/<if>/{mtu,operstate,carrier,speed,address,dev_port,dev_id}`` and MLNX_OFED's ``ecn/``;
* MLNX_OFED's ``class/infiniband/<dev>/tc/<port>/traffic_class`` and the RDMA-CM configfs defaults in
  ``kernel/config/rdma_cm/<dev>/ports/<n>/``;
* ``module/<name>`` for loaded kernel modules.

A missing attribute (ENOENT), and one the kernel refuses for this port or entry (EINVAL, as ``gid_attrs/ndevs/<i>``
does on InfiniBand ports and empty GID entries, ENODATA, EOPNOTSUPP), reads as absent (``None``). A value that is
present but malformed raises :class:`SysfsError`, whose message names the path and the expected form.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

import errno
import ipaddress
import os
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.pci import read_part_number

# Errnos that mean "this attribute does not exist here" rather than "the read failed".
ABSENT_ERRNOS = frozenset((errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.ENODATA, errno.EOPNOTSUPP, errno.ENXIO, errno.ENODEV))

# Speed names printed by rate_show() in drivers/infiniband/core/sysfs.c (Ethernet ports of mlx5 map their link
# speed onto the same names, e.g. 400GbE -> "400 Gb/sec (4X NDR)").
IB_SPEEDS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
# Link widths known to ib_width_enum_to_int().
IB_WIDTHS = ("1X", "2X", "4X", "8X", "12X")

GID_TYPE_ROCE_V2 = "RoCE v2"
GID_TYPE_V1 = "IB/RoCE v1"

# Kernel modules reported in kernel_modules (present when <root>/module/<name> exists).
KERNEL_MODULES = ("mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "ib_umad", "ib_ipoib", "rdma_cm", "rdma_ucm", "nvidia_peermem")

# Bound on the number of non-RDMA netdevs reported with gather_all_netdevs (hosts with many veths/VFs).
MAX_EXTRA_NETDEVS = 256

_STATE_RE = re.compile(r"^(\d+): (\S.*)$")
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?) Gb/sec \((\d+X)(?: ([A-Z][A-Z0-9]*))?\)$")
_LID_RE = re.compile(r"^0x[0-9a-fA-F]{1,4}$")
_GID_RE = re.compile(r"^[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4}){7}$")
_PKEY_RE = re.compile(r"^0x[0-9a-fA-F]{1,4}$")
_INT_RE = re.compile(r"^-?\d+$")


class SysfsError(Exception):
    """A sysfs value is missing where it is required, unreadable, or malformed. ``path`` names the file."""

    def __init__(self, path, message):
        super().__init__("%s: %s" % (path, message))
        self.path = path
        self.message = message


def _read_file(path):
    """Return the raw text of ``path`` (one small sysfs attribute)."""
    with open(path, "r", encoding="utf-8", errors="replace") as handle:
        return handle.read()


def read_attr(path):
    """Return the stripped text of a sysfs attribute, or ``None`` when it is absent (see ABSENT_ERRNOS).

    Any other read error (EACCES, EIO, ...) raises SysfsError naming the path.
    """
    try:
        return _read_file(path).strip()
    except IsADirectoryError as exc:
        raise SysfsError(path, "is a directory, expected a sysfs attribute file") from exc
    except OSError as exc:
        if exc.errno in ABSENT_ERRNOS:
            return None
        raise SysfsError(path, "cannot be read: %s" % (exc.strerror or exc)) from exc


def list_dir(path):
    """Return the sorted entry names of a directory, or [] when it does not exist."""
    try:
        return sorted(os.listdir(path), key=natural_key)
    except OSError as exc:
        if exc.errno in ABSENT_ERRNOS:
            return []
        raise SysfsError(path, "cannot be listed: %s" % (exc.strerror or exc)) from exc


def numbered_attrs(directory):
    """Yield ``(index, path, value)`` for the readable numbered entries of a table folder (``gids/``, ``pkeys/``)."""
    for index in list_dir(directory):
        if not index.isdigit():
            continue
        path = os.path.join(directory, index)
        raw = read_attr(path)
        if raw is not None:
            yield index, path, raw


def card_port(pci, default=None):
    """The card port (the n of a firmware ``_P<n>`` parameter such as ``LINK_TYPE_P2``) that a PCI function drives:
    function n-1 drives port n (0000:0c:00.1 -> 2); ``default`` when ``pci`` has no function number."""
    match = re.match(r"^.*\.([0-7])$", pci or "")
    return int(match.group(1)) + 1 if match else default


def natural_key(name):
    """Sort key putting mlx5_2 before mlx5_10, port "2" before "10", node2 before node10 and kernel 6.1.0-9 before
    6.1.0-18 (the one natural order of the collection). Numbers sort before text at the same place."""
    return [(0, int(tok), "") if tok.isdigit() else (1, 0, tok) for tok in re.findall(r"\d+|\D+", "" if name is None else str(name))]


# ---------------------------------------------------------------------------------------------------------------
# Value parsers: text in, value out; ``path`` only names the source in errors.
# ---------------------------------------------------------------------------------------------------------------

def parse_numbered_state(text, path):
    """``4: ACTIVE`` -> ``ACTIVE``; ``5: LinkUp`` -> ``LinkUp``; ``1: CA`` -> ``CA`` (state, phys_state, node_type)."""
    match = _STATE_RE.match(text)
    if not match:
        raise SysfsError(path, "expected '<number>: <name>' (e.g. '4: ACTIVE'), got %r" % text)
    return match.group(2).strip()


def parse_rate(text, path):
    """Parse a port ``rate`` as printed by the kernel.

    ``400 Gb/sec (4X NDR)`` -> ``{"rate_gbps": 400.0, "width": "4X", "speed": "NDR"}``. Older kernels print SDR
    without a speed name (``10 Gb/sec (4X)``): speed is then ``None``. Any other form raises SysfsError.
    """
    match = _RATE_RE.match(text)
    if not match:
        raise SysfsError(path, "expected '<Gb/s> Gb/sec (<width> <speed>)' (e.g. '400 Gb/sec (4X NDR)'), got %r" % text)
    gbps, width, speed = match.groups()
    if width not in IB_WIDTHS:
        raise SysfsError(path, "unknown link width %r in %r; expected one of %s" % (width, text, ", ".join(IB_WIDTHS)))
    if speed is not None and speed not in IB_SPEEDS:
        raise SysfsError(path, "unknown link speed %r in %r; expected one of %s" % (speed, text, ", ".join(IB_SPEEDS)))
    return {"rate_gbps": float(gbps), "width": width, "speed": speed}


def parse_lid(text, path):
    """``0x1a`` -> 26 (lid, sm_lid are printed as ``0x%x``)."""
    if not _LID_RE.match(text):
        raise SysfsError(path, "expected a hexadecimal LID such as '0x1a', got %r" % text)
    return int(text, 16)


def parse_gid(text, path):
    """Validate a GID (``%pI6``: 8 groups of hex digits) and return it in the kernel's full form, lower case."""
    if not _GID_RE.match(text):
        raise SysfsError(path, "expected a GID of 8 colon-separated hex groups (e.g. 'fe80:0000:...:626e'), got %r" % text)
    return ipaddress.IPv6Address(text).exploded


def gid_ipv4(gid):
    """Return the dotted IPv4 of an IPv4-mapped GID (``::ffff:a.b.c.d``, any IPv6 text form), else ``None``."""
    try:
        mapped = ipaddress.IPv6Address(gid).ipv4_mapped
    except (ValueError, AttributeError):
        return None
    return str(mapped) if mapped is not None else None


def parse_int(text, path, what="an integer"):
    """Parse a decimal integer attribute."""
    if not _INT_RE.match(text):
        raise SysfsError(path, "expected %s, got %r" % (what, text))
    return int(text)


def parse_pkey(text, path):
    """``0xffff`` -> ``0xffff`` (normalised to 4 lower-case hex digits), or None for the empty P_Key 0x0000."""
    if not _PKEY_RE.match(text):
        raise SysfsError(path, "expected a hexadecimal P_Key such as '0xffff', got %r" % text)
    value = int(text, 16)
    return None if value == 0 else "0x%04x" % value


_TCLASS_RULE_KEYS = ("src_ip", "dst_ip", "src_ip6", "dst_ip6")


def parse_traffic_class_file(text):
    """MLNX_OFED ``class/infiniband/<dev>/tc/<port>/traffic_class`` as the driver shows it.

    The file reads empty while no global traffic class is set (the driver's initial value is -1),
    ``Global tclass=N`` once a number was written, followed by one line per match rule
    (``dst_ip=10.0.0.0/24,tclass=96``). A line that merely contains ``Global tclass=N`` (a script echoing the
    file) is accepted too. Returns {global_tclass: int | None, rules: [{tclass, src_ip?, dst_ip?, src_ip6?,
    dst_ip6?}], dscp: global_tclass >> 2 | None}.
    """
    res = {"global_tclass": None, "rules": [], "dscp": None}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = re.search(r"Global tclass=(\d+)", line)
        if m:
            res["global_tclass"] = int(m.group(1))
            continue
        if "tclass=" in line and "=" in line.split(",", 1)[0]:
            rule = {}
            for part in line.split(","):
                key, _sep, val = part.strip().partition("=")
                if key == "tclass" and val.strip().lstrip("-").isdigit():
                    rule["tclass"] = int(val)
                elif key in _TCLASS_RULE_KEYS and val:
                    rule[key] = val.strip()
            if "tclass" in rule:
                res["rules"].append(rule)
    if res["global_tclass"] is not None:
        res["dscp"] = (res["global_tclass"] >> 2) & 0x3F
    return res


def parse_traffic_class(text):
    """MLNX_OFED's ``tc/<port>/traffic_class`` (``Global tclass=160``) -> 160; no global class -> None.

    A file with only match rules (``dst_ip=10.0.0.0/24,tclass=96``) has no global class: one grammar for the file,
    shared with the roce_qos module (``parse_traffic_class_file``)."""
    return parse_traffic_class_file(text)["global_tclass"]


def port_guid_of(gids):
    """The port GUID of an InfiniBand port: the low 64 bits of its GID 0 (subnet prefix + port GUID), as
    ``0x%016x``; None without a GID 0."""
    for entry in gids or []:
        if entry.get("index") == 0 and entry.get("gid"):
            return "0x" + entry["gid"].replace(":", "")[16:32].lower()
    return None


def select_roce_v2_ipv4_gid_index(gids):
    """Return the GID index NCCL_IB_GID_INDEX must take on a RoCE port, or None.

    This is the lowest index whose type is ``RoCE v2`` and whose GID is IPv4-mapped. It is also what NCCL >= 2.21
    picks by itself with its defaults (NCCL_IB_ROCE_VERSION_NUM=2, NCCL_IB_ADDR_FAMILY=AF_INET, no
    NCCL_IB_ADDR_RANGE): ncclIbGetGidIndex() walks the table from index 0 and moves to a candidate when it is the
    first IPv4 entry, or an IPv4 entry of the wanted RoCE version where the current one is not; an IPv4 RoCE v2
    entry, once chosen, is kept. Writing it explicitly pins the same choice for older NCCL and for tools (perftest
    ``-x``) that do not auto-select. When there is no IPv4 RoCE v2 entry NCCL would fall back to an IPv4 v1 or
    index 0; we return None so that callers fail loudly instead of configuring RoCE v1.
    """
    for entry in sorted(gids, key=lambda item: item["index"]):
        if entry.get("type") == GID_TYPE_ROCE_V2 and entry.get("ipv4"):
            return entry["index"]
    return None


# ---------------------------------------------------------------------------------------------------------------
# Tree walker
# ---------------------------------------------------------------------------------------------------------------

class RdmaSysfs:
    """Reader for one sysfs root. ``gather()`` returns the ``rdma`` facts (without ``stack`` and ``memlock``)."""

    def __init__(self, root="/sys", gather_counters=False, gather_all_netdevs=False):
        self.root = root
        self.gather_counters = gather_counters
        self.gather_all_netdevs = gather_all_netdevs
        self._real_root = os.path.realpath(root)
        self._netdev_dirs = {}

    # -- paths ------------------------------------------------------------------------------------------------
    def path(self, *parts):
        """Join ``parts`` under the root."""
        return os.path.join(self.root, *parts)

    def follow(self, link):
        """Resolve a sysfs link inside the root.

        Real sysfs links are relative (``../../../0000:1a:00.0``) and resolve naturally. An absolute ``/sys/...``
        target in a tree rooted elsewhere is re-rooted, so that a fixture tree made with absolute links still works.
        """
        resolved = os.path.realpath(link)
        if self._real_root != "/sys" and not resolved.startswith(self._real_root + os.sep):
            if resolved.startswith("/sys/"):
                resolved = os.path.join(self._real_root, resolved[len("/sys/"):])
        return resolved

    # -- top level ---------------------------------------------------------------------------------------------
    def check_root(self):
        """Fail unless the root looks like a sysfs tree (exists, holds ``class/``)."""
        if not os.path.isdir(self.root):
            raise SysfsError(self.root, "sysfs_root does not exist or is not a directory")
        if not os.path.isdir(self.path("class")):
            raise SysfsError(self.path("class"), "missing: sysfs_root %r is not a sysfs tree (no class/ directory)" % self.root)

    def gather(self):
        """Return ``{devices, netdevs, kernel_modules}`` for this root."""
        self.check_root()
        devices = {}
        for name in list_dir(self.path("class", "infiniband")):
            devices[name] = self.read_device(name)
        netdevs = self.read_netdevs(devices)
        return {
            "devices": devices,
            "netdevs": netdevs,
            "kernel_modules": self.read_kernel_modules(),
        }

    def read_kernel_modules(self):
        """``{name: bool}`` from the existence of ``<root>/module/<name>`` for each of KERNEL_MODULES."""
        return dict((name, os.path.isdir(self.path("module", name))) for name in KERNEL_MODULES)

    # -- devices -----------------------------------------------------------------------------------------------
    def read_device(self, name):
        """Return the facts of one RDMA device (HCA)."""
        base = self.path("class", "infiniband", name)
        node_type = read_attr(os.path.join(base, "node_type"))
        device = {
            "fw_ver": read_attr(os.path.join(base, "fw_ver")),
            "node_guid": read_attr(os.path.join(base, "node_guid")),
            "sys_image_guid": read_attr(os.path.join(base, "sys_image_guid")),
            "board_id": read_attr(os.path.join(base, "board_id")),
            "hca_type": read_attr(os.path.join(base, "hca_type")),
            "node_type": parse_numbered_state(node_type, os.path.join(base, "node_type")) if node_type else None,
            "pci_address": None,
            "netdevs": [],
        }
        device_link = os.path.join(base, "device")
        pci_dir = None
        if os.path.islink(device_link):
            # Real sysfs: device -> ../../../0000:1a:00.0; the basename of the resolved target is the PCI address.
            pci_dir = self.follow(device_link)
            device["pci_address"] = os.path.basename(pci_dir) or None
        elif os.path.isdir(device_link):
            pci_dir = device_link
        parent_netdevs = list_dir(os.path.join(pci_dir, "net")) if pci_dir else []
        for netdev in parent_netdevs:
            self._netdev_dirs.setdefault(netdev, os.path.join(pci_dir, "net", netdev))
        device["netdevs"] = parent_netdevs
        device["part_number"] = read_part_number(pci_dir)

        ports = {}
        for port in list_dir(os.path.join(base, "ports")):
            if not port.isdigit():
                continue
            ports[port] = self.read_port(name, base, port, parent_netdevs)
        device["ports"] = ports
        return device

    def read_port(self, dev, base, port, parent_netdevs):
        """Return the facts of one port; ``port`` is the directory name (``"1"``)."""
        pdir = os.path.join(base, "ports", port)
        facts = {}
        for key in ("state", "phys_state"):
            raw = read_attr(os.path.join(pdir, key))
            facts[key] = parse_numbered_state(raw, os.path.join(pdir, key)) if raw is not None else None
        link_layer = read_attr(os.path.join(pdir, "link_layer"))
        facts["link_layer"] = link_layer
        rate = read_attr(os.path.join(pdir, "rate"))
        if rate is None:
            facts.update({"rate_gbps": None, "width": None, "speed": None})
        else:
            facts.update(parse_rate(rate, os.path.join(pdir, "rate")))
        is_ethernet = link_layer == "Ethernet"
        for key in ("lid", "sm_lid"):
            raw = None if is_ethernet else read_attr(os.path.join(pdir, key))
            facts[key] = parse_lid(raw, os.path.join(pdir, key)) if raw is not None else None

        gids = self.read_gids(pdir)
        facts["gids"] = gids
        facts["roce_v2_ipv4_gid_index"] = select_roce_v2_ipv4_gid_index(gids) if is_ethernet else None
        facts["netdev"] = self.port_netdev(int(port), gids, parent_netdevs, is_ethernet)
        facts["pkeys"], facts["pkey_indexes"] = self.read_pkey_table(pdir)
        facts["port_guid"] = None if is_ethernet else port_guid_of(gids)
        tclass = read_attr(self.path("class", "infiniband", dev, "tc", port, "traffic_class"))
        facts["traffic_class"] = parse_traffic_class(tclass) if tclass else None
        facts["rdma_cm"] = self.read_rdma_cm(dev, port)
        if self.gather_counters:
            facts["counters"] = read_counters(os.path.join(pdir, "counters"))
            facts["hw_counters"] = read_counters(os.path.join(pdir, "hw_counters"))
        return facts

    def read_gids(self, pdir):
        """Return the non-zero GID entries of a port, with type, netdev and IPv4."""
        gids = []
        for index, gid_path, raw in numbered_attrs(os.path.join(pdir, "gids")):
            gid = parse_gid(raw, gid_path)
            if ipaddress.IPv6Address(gid).packed == bytes(16):
                continue
            gid_type = read_attr(os.path.join(pdir, "gid_attrs", "types", index)) or None
            ndev = read_attr(os.path.join(pdir, "gid_attrs", "ndevs", index)) or None
            gids.append({
                "index": int(index),
                "gid": gid,
                "type": gid_type,
                "netdev": ndev,
                "ipv4": gid_ipv4(gid),
            })
        gids.sort(key=lambda item: item["index"])
        return gids

    def read_pkeys(self, pdir):
        """Return the non-zero P_Keys of a port (``["0xffff", ...]``) in table order."""
        return self.read_pkey_table(pdir)[0]

    def read_pkey_table(self, pdir):
        """Return the non-zero P_Keys of a port in table order and their table indexes (``{"0xffff": 0}``; the
        first index of a P_Key listed twice). NCCL_IB_PKEY is such an index; the list leaves out the empty
        (0x0000) slots, so its positions are not table indexes."""
        pkeys, indexes = [], {}
        for index, path, raw in numbered_attrs(os.path.join(pdir, "pkeys")):
            value = parse_pkey(raw, path)
            if value is not None:
                pkeys.append(value)
                indexes.setdefault(value, int(index))
        return pkeys, indexes

    def read_rdma_cm(self, dev, port):
        """RDMA-CM per-port defaults from configfs, or None when the configfs directory does not exist."""
        cm_dir = self.path("kernel", "config", "rdma_cm", dev, "ports", port)
        if not os.path.isdir(cm_dir):
            return None
        mode = read_attr(os.path.join(cm_dir, "default_roce_mode"))
        tos = read_attr(os.path.join(cm_dir, "default_roce_tos"))
        return {
            "default_roce_mode": mode or None,
            "default_roce_tos": parse_int(tos, os.path.join(cm_dir, "default_roce_tos"), "a ToS byte 0-255") if tos else None,
        }

    def port_netdev(self, port, gids, parent_netdevs, is_ethernet):
        """The netdev of a port.

        RoCE: the netdev of the port's lowest-index GID that has one (``gid_attrs/ndevs``), which is the bond
        master for ``mlx5_bond_*``. Otherwise (IPoIB, or a RoCE port with no GID netdev) what ibdev2netdev does:
        the netdev under ``device/net`` whose ``dev_port`` (0-based; ``dev_id`` on old kernels) + 1 equals the
        port, preferring a parent interface over IPoIB child interfaces (``iflink`` == ``ifindex``).
        """
        if is_ethernet:
            for entry in gids:
                if entry["netdev"]:
                    return entry["netdev"]
        candidates = []
        for netdev in parent_netdevs:
            if self._netdev_port(netdev) == port:
                candidates.append(netdev)
        if not candidates:
            return None
        parents = [name for name in candidates if self._is_parent_netdev(name)]
        return (parents or candidates)[0]

    def _netdev_dir(self, netdev):
        return self._netdev_dirs.get(netdev) or self.path("class", "net", netdev)

    def _netdev_port(self, netdev):
        """1-based port of a netdev from ``dev_port`` (decimal) or ``dev_id`` (hex), or None."""
        ndir = self._netdev_dir(netdev)
        raw = read_attr(os.path.join(ndir, "dev_port"))
        if raw is not None and raw.isdigit():
            return int(raw) + 1
        raw = read_attr(os.path.join(ndir, "dev_id"))
        if raw is not None:
            try:
                return int(raw, 16) + 1
            except ValueError:
                return None
        return None

    def _is_parent_netdev(self, netdev):
        ndir = self._netdev_dir(netdev)
        ifindex = read_attr(os.path.join(ndir, "ifindex"))
        iflink = read_attr(os.path.join(ndir, "iflink"))
        if ifindex is None or iflink is None:
            return "." not in netdev
        return ifindex == iflink

    # -- netdevs -----------------------------------------------------------------------------------------------
    def read_netdevs(self, devices):
        """Every netdev that belongs to an RDMA device (device/net, GID netdevs, port netdevs)."""
        owner = {}
        # Port netdevs first: they define rdma_device/rdma_port.
        for dev, device in devices.items():
            for port, pfacts in device["ports"].items():
                if pfacts["netdev"]:
                    owner.setdefault(pfacts["netdev"], (dev, int(port)))
        for dev, device in devices.items():
            for port, pfacts in device["ports"].items():
                for entry in pfacts["gids"]:
                    if entry["netdev"]:
                        owner.setdefault(entry["netdev"], (dev, int(port)))
        for dev, device in devices.items():
            for netdev in device["netdevs"]:
                port = self._netdev_port(netdev)
                owner.setdefault(netdev, (dev, port if port is not None and str(port) in device["ports"] else None))
        if self.gather_all_netdevs:
            extra = 0
            for netdev in list_dir(self.path("class", "net")):
                if netdev in owner or netdev == "lo":
                    continue
                if extra >= MAX_EXTRA_NETDEVS:
                    break
                owner[netdev] = (None, None)
                extra += 1
        netdevs = {}
        for netdev in sorted(owner, key=natural_key):
            dev, port = owner[netdev]
            facts = self.read_netdev(netdev)
            facts["rdma_device"] = dev
            facts["rdma_port"] = port
            netdevs[netdev] = facts
        return netdevs

    def read_netdev(self, netdev):
        """mtu (bytes), operstate, carrier, speed_mbps, address and MLNX_OFED ECN state of one netdev."""
        ndir = self.path("class", "net", netdev)
        if not os.path.isdir(ndir):
            ndir = self._netdev_dir(netdev)
        mtu = read_attr(os.path.join(ndir, "mtu"))
        speed = read_attr(os.path.join(ndir, "speed"))
        speed_mbps = None
        if speed is not None:
            speed_mbps = parse_int(speed, os.path.join(ndir, "speed"), "a link speed in Mb/s")
            # -1 is SPEED_UNKNOWN; some drivers print it as an unsigned 32-bit value.
            if speed_mbps < 0 or speed_mbps >= 0xFFFFFFFF:
                speed_mbps = None
        carrier = read_attr(os.path.join(ndir, "carrier"))
        return {
            "mtu": parse_int(mtu, os.path.join(ndir, "mtu"), "an MTU in bytes") if mtu is not None else None,
            "operstate": read_attr(os.path.join(ndir, "operstate")),
            "carrier": (carrier == "1") if carrier in ("0", "1") else None,
            "speed_mbps": speed_mbps,
            "address": read_attr(os.path.join(ndir, "address")),
            "ecn": read_ecn(os.path.join(ndir, "ecn")),
        }


def read_counters(cdir):
    """``{name: int}`` for the counter files of a directory; unreadable or non-integer counters are skipped."""
    counters = {}
    for name in list_dir(cdir):
        try:
            raw = read_attr(os.path.join(cdir, name))
        except SysfsError:
            continue
        if raw is not None and _INT_RE.match(raw):
            counters[name] = int(raw)
    return counters


def read_ecn(ecn_dir):
    """MLNX_OFED per-netdev ECN state under ``class/net/<if>/ecn``, or None when the directory is absent.

    Returns ``{roce_np_enabled: [prio...], roce_rp_enabled: [prio...], cnp_dscp, cnp_802p_prio}``: the priorities
    (0-7) whose ``roce_np/enable/<prio>`` (notification point, sends CNPs) or ``roce_rp/enable/<prio>`` (reaction
    point, DCQCN rate limiting) reads 1, and the CNP DSCP (0-63) and 802.1p priority (0-7) from ``roce_np/``.
    """
    if not os.path.isdir(ecn_dir):
        return None
    result = {}
    for point in ("roce_np", "roce_rp"):
        enabled = []
        enable_dir = os.path.join(ecn_dir, point, "enable")
        for prio in list_dir(enable_dir):
            if prio.isdigit() and read_attr(os.path.join(enable_dir, prio)) == "1":
                enabled.append(int(prio))
        result[point + "_enabled"] = sorted(enabled)
    for key in ("cnp_dscp", "cnp_802p_prio"):
        path = os.path.join(ecn_dir, "roce_np", key)
        raw = read_attr(path)
        result[key] = parse_int(raw, path) if raw else None
    return result


def gather_rdma_sysfs(root="/sys", gather_counters=False, gather_all_netdevs=False):
    """Convenience wrapper: the sysfs part of ``ansible_facts.rdma`` for ``root``."""
    return RdmaSysfs(root, gather_counters=gather_counters, gather_all_netdevs=gather_all_netdevs).gather()
