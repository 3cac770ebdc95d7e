# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's default routes and the netdevs under them (pure Python, no Ansible imports).

* the interface of each default route: IPv4 ``<proc_root>/net/route`` (the main table), IPv6
  ``<proc_root>/net/ipv6_route`` (all tables). ``/proc/net`` is the view of the reading process's network namespace;
* the devices under an interface (``Topology``): ``<sysfs_root>/class/net/<if>/lower_<name>`` links (VLAN, bond,
  team, bridge, macvlan, ipvlan: ``netdev_upper_dev_link()`` makes them), ``brif/<port>`` (bridge ports) and
  ``bonding/slaves``, and the RDMA device of a netdev.

``default_route_netdevs`` is what ``rdma_port_roles`` reads as the management link (those netdevs are never
compute); ``host.management_link`` walks the same topology for the driver restart guard. A malformed kernel file
raises ``SysfsError`` naming it.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

import ipaddress
import os
import socket
import struct

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import (
    RdmaSysfs, SysfsError, list_dir, natural_key, read_attr)

# include/uapi/linux/route.h (IPv4) and include/uapi/linux/ipv6_route.h (IPv6 shares the low bits).
RTF_UP = 0x0001
RTF_REJECT = 0x0200

# Bound: interfaces walked under one interface.
MAX_LOWER = 64


# ---------------------------------------------------------------------------------------------------------------
# Default routes
# ---------------------------------------------------------------------------------------------------------------

def _hex_int(text, path, number, what):
    try:
        return int(text, 16)
    except ValueError as exc:
        raise SysfsError(path, "line %d: %s %r is not hexadecimal" % (number, what, text)) from exc


def parse_ipv4_routes(text, path):
    """Default routes (destination and mask 0, RTF_UP, not RTF_REJECT) of ``/proc/net/route``.

    The file is the kernel's main table (``fib_route_seq_show``): one line per route, the header first, fields
    tab-separated ``Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT``, addresses as hex of the
    network-order word (``0100000A`` is 10.0.0.1). Returns ``[{family, interface, gateway, metric}]``.
    """
    routes = []
    lines = text.splitlines()
    for number, line in enumerate(lines[1:], 2):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 8:
            raise SysfsError(path, "line %d: expected 'Iface Destination Gateway Flags RefCnt Use Metric Mask ...', got %r"
                             % (number, line))
        iface, dest, gateway, flags, _refcnt, _use, metric, mask = fields[:8]
        dest_v = _hex_int(dest, path, number, "destination")
        mask_v = _hex_int(mask, path, number, "mask")
        flags_v = _hex_int(flags, path, number, "flags")
        if dest_v != 0 or mask_v != 0 or not flags_v & RTF_UP or flags_v & RTF_REJECT or iface == "*":
            continue
        gw_v = _hex_int(gateway, path, number, "gateway")
        try:
            metric_v = int(metric)
        except ValueError as exc:
            raise SysfsError(path, "line %d: metric %r is not an integer" % (number, metric)) from exc
        routes.append({"family": "ipv4", "interface": iface,
                       "gateway": socket.inet_ntoa(struct.pack("=I", gw_v)) if gw_v else None, "metric": metric_v})
    return routes


def parse_ipv6_routes(text, path):
    """Default routes (``::/0``, RTF_UP, not RTF_REJECT, not on ``lo``) of ``/proc/net/ipv6_route``.

    Fields (``ipv6_route_native_seq_show``, every table): destination (32 hex), its prefix length (hex), source,
    its prefix length, next hop, metric, refcnt, use, flags (all hex) and the device name. The kernel's
    ``unreachable`` default (on ``lo``, RTF_REJECT) is not a route out. Returns ``[{family, interface, gateway, metric}]``.
    """
    routes = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 10 or len(fields[0]) != 32 or len(fields[4]) != 32:
            raise SysfsError(path, "line %d: expected 10 fields (destination, prefix length, source, prefix length, "
                             "next hop, metric, refcnt, use, flags, device), got %r" % (number, line))
        dest, plen, _src, _splen, nexthop, metric, _refcnt, _use, flags, iface = fields
        if _hex_int(dest, path, number, "destination") != 0 or _hex_int(plen, path, number, "prefix length") != 0:
            continue
        flags_v = _hex_int(flags, path, number, "flags")
        if not flags_v & RTF_UP or flags_v & RTF_REJECT or iface == "lo":
            continue
        gateway = _hex_int(nexthop, path, number, "next hop")
        routes.append({"family": "ipv6", "interface": iface,
                       "gateway": str(ipaddress.IPv6Address(gateway)) if gateway else None,
                       "metric": _hex_int(metric, path, number, "metric")})
    return routes


def read_optional(path):
    """Text of a kernel file, or None when it does not exist (no IPv6: no ipv6_route)."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SysfsError(path, "cannot be read: %s" % (exc.strerror or exc)) from exc


def default_routes(proc_root="/proc"):
    """IPv4 then IPv6 default routes of the host (the reading process's network namespace)."""
    routes = []
    for name, parser in (("route", parse_ipv4_routes), ("ipv6_route", parse_ipv6_routes)):
        path = os.path.join(proc_root, "net", name)
        text = read_optional(path)
        if text is not None:
            routes.extend(parser(text, path))
    return routes


# ---------------------------------------------------------------------------------------------------------------
# Netdev topology and RDMA ownership (sysfs)
# ---------------------------------------------------------------------------------------------------------------

class Topology:
    """Netdevs of one sysfs root: their lower devices and the RDMA device (or RDMA NIC driver) under them."""

    def __init__(self, sysfs_root="/sys"):
        self.root = sysfs_root
        self.sysfs = RdmaSysfs(sysfs_root)
        self.sysfs.check_root()
        self._owner = None

    @property
    def owner(self):
        """``{netdev: (rdma_device, rdma_port)}`` of the RDMA netdevs (read at first use)."""
        if self._owner is None:
            self._owner = dict((netdev, (facts["rdma_device"], facts["rdma_port"]))
                               for netdev, facts in self.sysfs.gather()["netdevs"].items())
        return self._owner

    def netdev_dir(self, name):
        return self.sysfs.path("class", "net", name)

    def exists(self, name):
        return os.path.isdir(self.netdev_dir(name))

    def lowers(self, name):
        """Names of the devices directly under ``name``: ``lower_*`` links, ``brif/`` and ``bonding/slaves``."""
        base = self.netdev_dir(name)
        found = [entry[len("lower_"):] for entry in list_dir(base) if entry.startswith("lower_") and len(entry) > 6]
        found += list_dir(os.path.join(base, "brif"))
        slaves = read_attr(os.path.join(base, "bonding", "slaves"))
        if slaves:
            found += slaves.split()
        unique = []
        for item in found:
            if item not in unique and item != name:
                unique.append(item)
        return sorted(unique, key=natural_key)

    def walk(self, name):
        """``(lower, parents)``: every device under ``name``, breadth first, and the upper each was reached from."""
        lower, parents, queue = [], {name: None}, [name]
        while queue and len(lower) < MAX_LOWER:
            current = queue.pop(0)
            for item in self.lowers(current):
                if item in parents:
                    continue
                parents[item] = current
                lower.append(item)
                queue.append(item)
        return lower, parents

    def driver(self, name):
        """PCI driver of the netdev's function (basename of ``class/net/<if>/device/driver``), or None."""
        link = os.path.join(self.netdev_dir(name), "device", "driver")
        if not os.path.islink(link):
            return None
        return os.path.basename(os.readlink(link)) or None

    def rdma_owner(self, name):
        """``(rdma_device, rdma_port)`` of a netdev, or ``(None, None)``."""
        if name in self.owner and self.owner[name][0]:
            return self.owner[name]
        devices = list_dir(os.path.join(self.netdev_dir(name), "device", "infiniband"))
        if not devices:
            return None, None
        # As ibdev2netdev: dev_port (0-based, decimal), or dev_id (hex) on old kernels, + 1.
        dev_port = read_attr(os.path.join(self.netdev_dir(name), "dev_port"))
        if dev_port is not None and dev_port.isdigit():
            return devices[0], int(dev_port) + 1
        dev_id = read_attr(os.path.join(self.netdev_dir(name), "dev_id"))
        try:
            return devices[0], int(dev_id, 16) + 1 if dev_id else None
        except ValueError:
            return devices[0], None


def default_route_netdevs(sysfs_root="/sys", proc_root="/proc"):
    """The interfaces of the default routes and every device under them (VLAN, bond, bridge ports...): the netdevs
    that carry the management link, which ``rdma_port_roles`` never makes compute."""
    topology, out = Topology(sysfs_root), []
    for route in default_routes(proc_root):
        lower, _parents = topology.walk(route["interface"])
        out.extend(name for name in [route["interface"]] + lower if name not in out)
    return out
