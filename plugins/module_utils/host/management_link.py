# -*- coding: utf-8 -*-
# Copyright (c) hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tell whether the host's management link rides on an RDMA device (pure Python, no Ansible imports).

Reloading the RDMA driver (``openibd restart``, ``modprobe -r mlx5_core``) takes every ConnectX netdev down. This
finds the *management interfaces* of a host and walks each one down to the physical netdevs under it:

* the interface holding each connection address (the address the controller connects to, by default the server
  address of ``SSH_CONNECTION``), from ``ip -j addr show`` (an argv list) or, without ``ip``, IPv6 only, from
  ``<proc_root>/net/if_inet6``;
* the interface of each default route (``sysfs.routes``: ``<proc_root>/net/route`` and ``ipv6_route``).

Upper devices are walked down as ``sysfs.routes.Topology`` walks them (``lower_<name>`` links, bridge ports, bond
slaves). A netdev is on an RDMA device when ``rdma_sysfs`` counts it as one (it is in
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

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import SysfsError
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.routes import Topology, default_routes, read_optional

# PCI drivers whose unload (modprobe -r, openibd restart) takes the netdevs of their functions down with the
# RDMA devices.
RDMA_NIC_DRIVERS = ("mlx5_core", "mlx4_core")

# Bound: processes climbed to find SSH_CONNECTION.
MAX_ANCESTORS = 32

ADVICE = ("a driver restart (openibd restart, modprobe -r mlx5_core) would cut this host off; reboot the host instead, "
          "or set rdma_allow_driver_restart_on_management_link=true if its console does not depend on that link")


class ManagementLinkError(SysfsError):
    """A kernel file or tool output is malformed; ``path`` names the source (the route files raise ``SysfsError``)."""


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
    """The server address (third field) of an ``SSH_CONNECTION`` value, or None when it has no such field or sshd did
    not know it: over a connection that is not a socket (``sshd -i`` on a pipe, as a ProxyCommand or from inetd)
    OpenSSH writes ``UNKNOWN 65535 UNKNOWN 65535``."""
    fields = (value or "").split()
    return fields[2] if len(fields) >= 4 and fields[2] != "UNKNOWN" else None


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
    text = read_optional(path)
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
