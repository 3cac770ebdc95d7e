# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tell whether the host's management link rides on an RDMA device (pure Python, no Ansible imports).

Reloading the RDMA driver (``openibd restart``, ``modprobe -r mlx5_core``) takes every ConnectX netdev down. This
finds the *management interfaces* of a host and walks each one down to the physical netdevs under it:

* the interface holding each connection address (the address the controller connects to, by default the server
  address of ``SSH_CONNECTION``), from ``ip -j addr show`` (an argv list) or, without ``ip``, IPv6 only, from
  ``<proc_root>/net/if_inet6``;
* the interface of each default route: IPv4 ``<proc_root>/net/route`` (the main table), IPv6
  ``<proc_root>/net/ipv6_route`` (all tables). ``/proc/net`` is the view of the reading process's network
  namespace.

Upper devices are walked down through ``<sysfs_root>/class/net/<if>/lower_<name>`` links (VLAN, bond, team,
bridge, macvlan, ipvlan: ``netdev_upper_dev_link()`` makes them), ``brif/<port>`` (bridge ports) and
``bonding/slaves``. A netdev is on an RDMA device when ``rdma_sysfs`` counts it as one (it is in
``class/infiniband/<dev>/device/net/``, or the ``gid_attrs/ndevs`` of a port name it) or when
``class/net/<netdev>/device/infiniband/`` lists a device. A netdev whose PCI function is driven by ``mlx5_core`` or
``mlx4_core`` (``class/net/<netdev>/device/driver``) without an RDMA device on it (``mlx5_ib`` not loaded, the
second port of a RoCE LAG) goes down with the driver too, and counts as well.
"""

from __future__ import annotations

__metaclass__ = type  # pylint: disable=invalid-name

import ipaddress
import json
import os
import socket
import struct

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import RdmaSysfs, list_dir, natural_key, read_attr

# include/uapi/linux/route.h (IPv4) and include/uapi/linux/ipv6_route.h (IPv6 shares the low bits).
RTF_UP = 0x0001
RTF_REJECT = 0x0200

# PCI drivers whose unload (modprobe -r, openibd restart) takes the netdevs of their functions down with the
# RDMA devices.
RDMA_NIC_DRIVERS = ("mlx5_core", "mlx4_core")

# Bounds: interfaces walked under one management interface, and processes climbed to find SSH_CONNECTION.
MAX_LOWER = 64
MAX_ANCESTORS = 32

ADVICE = ("a driver restart (openibd restart, modprobe -r mlx5_core) would cut this host off; reboot the host instead, "
          "or set rdma_allow_driver_restart_on_management_link=true if its console does not depend on that link")


class ManagementLinkError(Exception):
    """A kernel file or tool output is malformed; ``path`` names the source."""

    def __init__(self, path, message):
        super().__init__("%s: %s" % (path, message))
        self.path = path
        self.message = message


# ---------------------------------------------------------------------------------------------------------------
# Addresses
# ---------------------------------------------------------------------------------------------------------------

def normalise_address(text):
    """``(address, scope)`` of an address as SSH or a user writes it.

    IPv4-mapped IPv6 (``::ffff:10.0.0.5``, what sshd prints when it listens on ``::``) becomes the IPv4 address;
    a zone (``fe80::1%eth0``) is split off as ``scope``. Raises ValueError for text that is no IP address.
    """
    text = str(text).strip()
    address, _sep, scope = text.partition("%")
    if address.startswith("[") and address.endswith("]"):
        address = address[1:-1]
    parsed = ipaddress.ip_address(address)
    if parsed.version == 6 and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return str(parsed), (scope or None)


def ssh_server_address(value):
    """The server address (third field) of an ``SSH_CONNECTION`` value, or None when it has no such field."""
    fields = (value or "").split()
    return fields[2] if len(fields) >= 4 else None


def _read_environ(path):
    with open(path, "rb") as handle:
        data = handle.read()
    env = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def _parent_pid(proc_root, pid):
    """Parent pid from ``<proc_root>/<pid>/stat`` (field 4, after the ``(comm)`` that may hold blanks)."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat"), "r", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def find_ssh_connection(environ, proc_root="/proc", pid=None):
    """``(SSH_CONNECTION value, source)`` for the module, or ``(None, None)``.

    First the module's own environment. ``sudo`` (become) drops ``SSH_CONNECTION`` by default, so then the
    environments of the parent processes (``<proc_root>/<pid>/environ``, parents from ``<proc_root>/<pid>/stat``,
    starting at ``pid``, normally the module's parent) up to the sshd session, at most MAX_ANCESTORS of them, stopping
    before pid 1. Unreadable entries are skipped.
    """
    value = environ.get("SSH_CONNECTION")
    if ssh_server_address(value):
        return value, "SSH_CONNECTION of the module's environment"
    seen = set()
    while pid is not None and pid > 1 and pid not in seen and len(seen) < MAX_ANCESTORS:
        seen.add(pid)
        path = os.path.join(proc_root, str(pid), "environ")
        try:
            value = _read_environ(path).get("SSH_CONNECTION")
        except OSError:
            value = None
        if ssh_server_address(value):
            return value, "SSH_CONNECTION of %s" % path
        pid = _parent_pid(proc_root, pid)
    return None, None


def parse_ip_addr_json(text, source="ip -j addr show"):
    """``[(address, interface)]`` from the JSON ``ip -j addr show`` prints (iproute2 >= 4.13)."""
    try:
        links = json.loads(text or "[]")
    except ValueError as exc:
        raise ManagementLinkError(source, "is not JSON: %s" % exc) from exc
    if not isinstance(links, list):
        raise ManagementLinkError(source, "expected a JSON list of links, got %s" % type(links).__name__)
    pairs = []
    for link in links:
        if not isinstance(link, dict) or not link.get("ifname"):
            continue
        for info in link.get("addr_info") or []:
            local = info.get("local") if isinstance(info, dict) else None
            if not local:
                continue
            try:
                address, _scope = normalise_address(local)
            except ValueError:
                continue
            pairs.append((address, str(link["ifname"])))
    return pairs


def parse_if_inet6(text, path):
    """``[(address, interface)]`` from ``/proc/net/if_inet6`` (``<32 hex> <ifindex> <plen> <scope> <flags> <name>``)."""
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6 or len(fields[0]) != 32:
            raise ManagementLinkError(path, "line %d: expected '<32 hex digits> <ifindex> <plen> <scope> <flags> <name>', got %r"
                                      % (number, line))
        try:
            address = str(ipaddress.IPv6Address(bytes.fromhex(fields[0])))
        except ValueError as exc:
            raise ManagementLinkError(path, "line %d: bad address %r" % (number, fields[0])) from exc
        pairs.append((address, fields[5]))
    return pairs


# ---------------------------------------------------------------------------------------------------------------
# Default routes
# ---------------------------------------------------------------------------------------------------------------

def _hex_int(text, path, number, what):
    try:
        return int(text, 16)
    except ValueError as exc:
        raise ManagementLinkError(path, "line %d: %s %r is not hexadecimal" % (number, what, text)) from exc


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
            raise ManagementLinkError(path, "line %d: expected 'Iface Destination Gateway Flags RefCnt Use Metric Mask ...', got %r"
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
            raise ManagementLinkError(path, "line %d: metric %r is not an integer" % (number, metric)) from exc
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
            raise ManagementLinkError(path, "line %d: expected 10 fields (destination, prefix length, source, prefix length, "
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


def _read_optional(path):
    """Text of a kernel file, or None when it does not exist (no IPv6: no ipv6_route)."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ManagementLinkError(path, "cannot be read: %s" % (exc.strerror or exc)) from exc


def default_routes(proc_root="/proc"):
    """IPv4 then IPv6 default routes of the host (the reading process's network namespace)."""
    routes = []
    for name, parser in (("route", parse_ipv4_routes), ("ipv6_route", parse_ipv6_routes)):
        path = os.path.join(proc_root, "net", name)
        text = _read_optional(path)
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


def _path_to(parents, name):
    """Interfaces from the management interface down to ``name`` (both included)."""
    chain = [name]
    while parents.get(chain[-1]) is not None:
        chain.append(parents[chain[-1]])
    return list(reversed(chain))


def describe_interface(topology, interface):
    """The walk under one management interface: ``{lower, netdev, rdma_device, rdma_port, driver, rdma_netdevs, via}``.

    Physical netdevs (no lower device) are looked at first, then the uppers (a RoCE LAG's bond master is the GID
    netdev of ``mlx5_bond_0``). ``netdev`` is the first affected netdev, ``rdma_netdevs`` all of them, ``via`` the
    chain from the interface down to ``netdev``.
    """
    lower, parents = topology.walk(interface)
    everything = [interface] + lower
    leaves = [name for name in everything if not topology.lowers(name)]
    ordered = leaves + [name for name in everything if name not in leaves]
    hits = []
    for name in ordered:
        device, port = topology.rdma_owner(name)
        driver = topology.driver(name)
        if device or driver in RDMA_NIC_DRIVERS:
            hits.append({"netdev": name, "rdma_device": device, "rdma_port": port, "driver": driver})
    first = hits[0] if hits else {"netdev": None, "rdma_device": None, "rdma_port": None, "driver": None}
    return {
        "lower": lower,
        "netdev": first["netdev"],
        "rdma_device": first["rdma_device"],
        "rdma_port": first["rdma_port"],
        "driver": first["driver"],
        "rdma_netdevs": hits,
        "via": _path_to(parents, first["netdev"]) if first["netdev"] else [interface],
    }


# ---------------------------------------------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------------------------------------------

def resolve_addresses(addresses, runner, proc_root):
    """``({address: [interface...]}, source, warnings)`` for each address (normalised).

    Source: ``ip -j addr show`` when ``runner.which('ip')`` finds it; otherwise ``<proc_root>/net/if_inet6``,
    which knows only IPv6 addresses. A zone (``fe80::1%eth0``) names the interface itself.
    """
    result, warnings, pairs, source = {}, [], None, None
    for text in addresses:
        address, scope = normalise_address(text)
        if scope:
            result.setdefault(address, [])
            if scope not in result[address]:
                result[address].append(scope)
            continue
        if pairs is None:
            pairs, source, warn = _local_addresses(runner, proc_root)
            warnings.extend(warn)
        result.setdefault(address, [])
        for local, iface in pairs:
            if local == address and iface not in result[address]:
                result[address].append(iface)
    return result, source, warnings


def _local_addresses(runner, proc_root):
    ip = runner.which("ip") if runner else None
    if ip:
        argv = [ip, "-j", "addr", "show"]
        rc, out, err = runner.run(argv)
        if rc == 0:
            return parse_ip_addr_json(out, " ".join(argv)), "ip -j addr show", []
        warning = "%s failed (rc=%s): %s; reading %s/net/if_inet6 (IPv6 only)" % (" ".join(argv), rc, (err or "").strip(), proc_root)
    else:
        warning = ("ip (iproute2) is not installed: IPv4 connection addresses cannot be matched to an interface, "
                   "IPv6 ones come from %s/net/if_inet6" % proc_root)
    path = os.path.join(proc_root, "net", "if_inet6")
    text = _read_optional(path)
    return (parse_if_inet6(text, path) if text is not None else []), path, [warning]


def check(sysfs_root="/sys", proc_root="/proc", addresses=None, runner=None, environ=None, pid=None):
    """Find the management interfaces and whether a driver restart would take one down.

    ``addresses``: the connection addresses; None means the server address of SSH_CONNECTION (see
    :func:`find_ssh_connection`), an empty list none. ``runner`` has ``which(name)`` and ``run(argv) -> (rc, out,
    err)``. Returns ``{management_interfaces, on_rdma, message, addresses, address_source, warnings}``.
    """
    environ = os.environ if environ is None else environ
    warnings = []
    address_source = None
    if addresses is None:
        value, address_source = find_ssh_connection(environ, proc_root, pid)
        addresses = [ssh_server_address(value)] if value else []
    elif addresses:
        address_source = "the addresses option"
    clean = []
    for text in addresses:
        try:
            address, scope = normalise_address(text)
        except ValueError as exc:
            raise ManagementLinkError("addresses", "%r is not an IP address" % (text,)) from exc
        text = address + ("%" + scope if scope else "")
        if text not in clean:
            clean.append(text)

    topology = Topology(sysfs_root)
    entries = []
    resolved, source, warn = resolve_addresses(clean, runner, proc_root)
    warnings.extend(warn)
    unresolved = []
    for address, interfaces in resolved.items():
        if not interfaces:
            unresolved.append(address)
            warnings.append("connection address %s is on no interface of this host (%s): the link that carries it "
                            "cannot be checked" % (address, source or "its zone"))
        for iface in interfaces:
            entries.append({"interface": iface, "reason": "connection", "address": address,
                            "family": "ipv%d" % ipaddress.ip_address(address).version})
    seen = set()
    for route in default_routes(proc_root):
        key = (route["family"], route["interface"])
        if key in seen:
            continue
        seen.add(key)
        entries.append({"interface": route["interface"], "reason": "default_route", "family": route["family"],
                        "gateway": route["gateway"]})
    for entry in entries:
        if not topology.exists(entry["interface"]):
            warnings.append("interface %s (%s) is not in %s: its lower devices cannot be told"
                            % (entry["interface"], _reason_text(entry), os.path.join(sysfs_root, "class", "net")))
        entry.update(describe_interface(topology, entry["interface"]))
    on_rdma = any(entry["netdev"] for entry in entries)
    return {
        "management_interfaces": entries,
        "on_rdma": on_rdma,
        "message": build_message(entries, unresolved),
        "unresolved_addresses": unresolved,
        "addresses": [item.split("%")[0] for item in clean],
        "address_source": address_source,
        "warnings": warnings,
    }


def _reason_text(entry):
    if entry["reason"] == "connection":
        return "holds the connection address %s" % entry["address"]
    return "%s default route" % ("IPv6" if entry["family"] == "ipv6" else "IPv4")


def _subject(entry, interface_text=None):
    interface_text = interface_text or entry["interface"]
    if entry["reason"] == "connection":
        return "the connection address %s is on %s" % (entry["address"], interface_text)
    return "the %sdefault route goes through %s" % ("IPv6 " if entry["family"] == "ipv6" else "", interface_text)


def _owner_text(entry):
    """``enp12s0np0.100 (over enp12s0np0), the netdev of RDMA device mlx5_0 port 1``."""
    if entry["rdma_device"] and entry["rdma_port"] is not None:
        what = "the netdev of RDMA device %s port %s" % (entry["rdma_device"], entry["rdma_port"])
    elif entry["rdma_device"]:
        what = "a netdev of RDMA device %s" % entry["rdma_device"]
    else:
        what = "a port of the %s driver (no RDMA device registered on it)" % entry["driver"]
    via = entry["via"][1:]
    return "%s%s, %s" % (entry["interface"], " (over %s)" % ", ".join(via) if via else "", what)


def build_message(entries, unresolved=()):
    """One sentence naming the interfaces and devices (see the module's RETURN for the forms)."""
    hits = [entry for entry in entries if entry["netdev"]]
    if hits:
        return "%s: %s" % ("; ".join(_subject(entry, _owner_text(entry)) for entry in hits), ADVICE)
    clauses = [_subject(entry) for entry in entries]
    if unresolved:
        return ("%s: the link that carries it cannot be checked, so a driver restart might cut this host off; reboot "
                "the host instead, or set rdma_allow_driver_restart_on_management_link=true if its console does not "
                "depend on that link" % "; ".join(clauses + ["the connection address %s is on no interface of this "
                                                             "host" % address for address in unresolved]))
    if not clauses:
        return ("found no management interface (no default route in /proc/net/route or /proc/net/ipv6_route, no "
                "connection address): a driver restart cuts no management link")
    return "%s, on no RDMA device: a driver restart does not cut this host off" % "; ".join(clauses)
