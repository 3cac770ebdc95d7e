# -*- coding: utf-8 -*-
# Copyright: (c) 2025, hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the infiniband role does on one host, computed from RDMA facts and the role's inputs before anything
changes: the InfiniBand ports it manages (and the Ethernet ports of VPI cards it turns to InfiniBand), the opensm
instances (one per subnet port, bound by port GUID), the partitions.conf text, the IPoIB netdevs (parents and P_Key
children) with their mode, MTU and IPv4 address. Every input error is returned as a message naming the field and the
allowed values; nothing here touches the host. Pure Python, used by the ``infiniband_plan`` filter.

Ports: the role serves the InfiniBand ports whose role (``sysfs/port_roles.py``) is compute or storage, and turns
into InfiniBand only compute ports (``ib_ports.py`` has the rules). Subnets: the role takes rail N of every host (its
compute port of rail N, rails in PCI order) to be on subnet N, the usual layout of multi-rail GPU clusters (one switch
fabric per rail); a single-rail fabric is subnet 0; the K-th InfiniBand storage port of each host is on storage
subnet K. Two SM hosts of one subnet must differ in priority: opensm would break the tie by the lowest port GUID,
which no operator expects to decide which host is master.
"""

from __future__ import absolute_import, division, print_function

import ipaddress
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import ib_partitions as ibp
from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import ib_partitions_render as ibr
from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import ib_ports as ibports

__metaclass__ = type

SM_PRIORITY_MAX = 15
IPOIB_CM_FLAG = 0x80  # IPOIB_CM_SUPPORTED: the RC flag in byte 0 of an IPoIB hardware address


def ipoib_hardware_addresses(rdma):
    """The hardware address of each netdev of an InfiniBand port, from the RDMA facts (``netdevs.<if>.address``, read
    from ``class/net/<if>/address``): the IPoIB netdevs' 20-byte addresses."""
    out = {}
    for name, netdev in sorted(((rdma or {}).get("netdevs") or {}).items()):
        device = ((rdma.get("devices") or {}).get(netdev.get("rdma_device")) or {})
        port = (device.get("ports") or {}).get(str(netdev.get("rdma_port"))) or {}
        if port.get("link_layer") == "InfiniBand" and netdev.get("address"):
            out[name] = netdev["address"]
    return out


def enhanced_ipoib_netdevs(addresses):
    """IPoIB netdevs whose hardware address (``class/net/<if>/address``, 20 bytes) lacks the connected-mode flag, as
    the kernel tests it before it takes ``connected``: enhanced IPoIB (mlx5's offload)."""
    out = []
    for name, address in sorted((addresses or {}).items()):
        first = (address or "").strip().split(":")[0]
        try:
            if not int(first, 16) & IPOIB_CM_FLAG:
                out.append(name)
        except ValueError:
            continue
    return out


def ib_ports(rdma, devices=None, fabrics=None):
    """The InfiniBand ports the role serves (compute and storage ports), ``[{device, port, role, rail, subnet, guid,
    netdev, state, lid, sm_lid, pkeys, pkey_indexes}]`` in rail order, then the storage ports (``ib_ports.py``)."""
    return ibports.ib_ports(rdma, devices, fabrics)


def ethernet_ports(rdma, devices, keep_netdevs=None, fabrics=None):
    """The Ethernet ports the role turns into InfiniBand ports (``infiniband_link_type_devices``: ``auto`` or
    selectors), without the ones it refuses (:func:`ib_ports.link_type_plan` gives those too)."""
    return ibports.link_type_plan(rdma, devices, keep_netdevs, fabrics)[0]


def _int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip(), 0)
        except ValueError:
            return None
    return None


def check_sm(sm, priority, hosts):
    """Errors of the SM inputs of this host and of the whole play: ``hosts`` maps each play host to
    ``{sm, sm_priority, rails: [subnets it manages: rail numbers, or labels rail N / storage K]}``. Two SM hosts of
    one subnet with the same priority are refused (named both)."""
    errors = []
    if not isinstance(sm, bool):
        errors.append("infiniband_sm must be a boolean (true on the hosts that run opensm), got %r" % (sm,))
    value = _int(priority)
    if value is None or not 0 <= value <= SM_PRIORITY_MAX:
        errors.append("infiniband_sm_priority must be an integer 0-15 (opensm sm_priority; the highest is master), "
                      "got %r" % (priority,))
    by_subnet = {}
    for host in sorted(hosts or {}):
        info = hosts[host] or {}
        if info.get("sm") is not True or _int(info.get("sm_priority")) is None:
            continue
        for rail in info.get("rails") or []:
            subnet = ("rail %d" % rail) if isinstance(rail, int) else str(rail)
            by_subnet.setdefault((subnet, _int(info["sm_priority"])), []).append(host)
    for (subnet, prio), names in sorted(by_subnet.items(), key=lambda item: (ibports.subnet_key(item[0][0]), item[0][1])):
        if len(names) > 1:
            errors.append("infiniband_sm_priority: %s run the subnet manager of %s with the same "
                          "priority %d; give each SM host of a subnet its own priority (0-15; the highest is master, "
                          "the others standby)" % (" and ".join(names), ibports.subnet_text(subnet), prio))
    return errors


def resolve_members(partitions, hosts_ports):
    """The role's partitions with host selectors turned into port GUIDs (every InfiniBand port of that host), and
    the errors: an unknown host, a host with no InfiniBand port GUID. ``hosts_ports`` maps inventory hosts to their
    :func:`ib_ports`. ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF and GUIDs pass as they are."""
    errors, out = [], []
    for index, part in enumerate(partitions if isinstance(partitions, list) else []):
        if not isinstance(part, dict):
            out.append(part)
            continue
        members = []
        for mindex, member in enumerate(part.get("members") or []):
            selector = member.get("selector") if isinstance(member, dict) else None
            text = selector.strip() if isinstance(selector, str) else selector
            if isinstance(text, str) and (text in ibp.SELECTORS or ibp.guid_value(text) is not None):
                members.append(member)
                continue
            if isinstance(text, str) and text in (hosts_ports or {}):
                guids = [p["guid"] for p in hosts_ports[text] if p.get("guid")]
                if not guids:
                    errors.append("infiniband_partitions[%d] (%s).members[%d]: host %s has no InfiniBand port GUID "
                                  "in its RDMA facts" % (index, part.get("name"), mindex, text))
                members.extend(dict(member, selector=guid) for guid in guids)
                continue
            if isinstance(text, str) and ibp.guid_value(text) is None and not text.startswith("0x"):
                errors.append("infiniband_partitions[%d] (%s).members[%d]: selector %r is not a host of the play nor "
                              "a port GUID; allowed: %s, a port GUID (0x...), or an inventory host (%s)" % (
                                  index, part.get("name"), mindex, selector, ", ".join(ibp.SELECTORS),
                                  ", ".join(sorted(hosts_ports or {})) or "none"))
                continue
            members.append(member)
        out.append(dict(part, members=members))
    return out, errors


def _partition_mtu(part):
    mtu = part.get("mtu") if isinstance(part, dict) else None
    return _int(mtu) if mtu is not None else ibp.MTU_BYTES[ibp.OPENSM_DEFAULT_MTU]


def default_partition(overrides):
    """The default partition (0x7fff) the role writes: opensm's own (IPoIB, ALL=full) with ``overrides``
    (mtu, rate, sl, members)."""
    base = dict(ibr.DEFAULT_PARTITION, members=[dict(m) for m in ibr.DEFAULT_PARTITION["members"]])
    for key in ("mtu", "rate", "sl", "members"):
        if isinstance(overrides, dict) and overrides.get(key) is not None:
            base[key] = overrides[key]
    return base


def _child_name(parent, pkey):
    return "%s.%04x" % (parent, ibp.pkey_base(pkey) | ibp.FULL_BIT)


def _address_errors(name, address, pool, host_index):
    """The IPv4 address of one IPoIB netdev (``a.b.c.d/len``) from ``address`` or ``pool`` + ``host_index``."""
    if address is not None:
        try:
            iface = ipaddress.IPv4Interface(str(address))
        except ValueError:
            return None, ["infiniband_ipoib.addresses[%s]: %r is not an IPv4 address/prefix (a.b.c.d/len)" % (
                name, address)]
        if "/" not in str(address):
            return None, ["infiniband_ipoib.addresses[%s]: %r has no prefix length (a.b.c.d/len)" % (name, address)]
        if pool is not None:
            try:
                net = ipaddress.IPv4Network(str(pool), strict=False)
            except ValueError:
                return None, ["infiniband_ipoib.pools[%s]: %r is not an IPv4 network (a.b.c.d/len)" % (name, pool)]
            if iface.ip not in net or iface.network.prefixlen != net.prefixlen:
                return None, ["infiniband_ipoib.addresses[%s]: %s is outside its pool %s" % (name, address, net)]
        return str(iface), []
    try:
        net = ipaddress.IPv4Network(str(pool), strict=False)
    except ValueError:
        return None, ["infiniband_ipoib.pools[%s]: %r is not an IPv4 network (a.b.c.d/len)" % (name, pool)]
    index = _int(host_index)
    if index is None or index < 1 or index >= net.num_addresses - 1:
        return None, ["infiniband_host_index %r gives no host address in pool %s of %s (allowed: 1-%d)" % (
            host_index, net, name, net.num_addresses - 2)]
    return "%s/%d" % (net.network_address + index, net.prefixlen), []


def plan_ipoib(ipoib, ports, partitions, default_part, enhanced, host_index):  # noqa: C901
    """IPoIB netdevs to configure: ``[{name, parent, pkey, mode, mtu, address, partition}]`` (parent first, then its
    children), and the errors. Netdevs configured are those with an address or a pool (a parent by its netdev name,
    a child by ``<parent>.<P_Key with the full bit>``, e.g. ``ibp24s0.8002``); every partition with ``ipoib: true``
    gets a child on each configured parent."""
    errors = []
    if ipoib in (None, {}):
        return [], []
    if not isinstance(ipoib, dict):
        return [], ["infiniband_ipoib must be a map {mode, mtu, addresses, pools}, got %r" % (ipoib,)]
    unknown = sorted(set(ipoib) - {"mode", "mtu", "addresses", "pools"})
    if unknown:
        errors.append("infiniband_ipoib: unknown keys %s; allowed: mode, mtu, addresses, pools" % ", ".join(unknown))
    mode = ipoib.get("mode", "datagram")
    if mode not in ibp.IPOIB_MODES:
        errors.append("infiniband_ipoib.mode %r; allowed: %s" % (mode, ", ".join(ibp.IPOIB_MODES)))
        return [], errors
    enhanced = sorted(enhanced if isinstance(enhanced, (list, tuple, set)) else
                      ([p["netdev"] for p in ports if p.get("netdev")] if enhanced else []))
    wanted_parents = sorted(set(p["netdev"] for p in ports if p.get("netdev")) &
                            set(list(ipoib.get("addresses") or {}) + list(ipoib.get("pools") or {})
                                + [n.rsplit(".", 1)[0] for n in list(ipoib.get("addresses") or {})
                                   + list(ipoib.get("pools") or {})]))
    refused = [n for n in (wanted_parents or enhanced) if n in enhanced]
    if mode == "connected" and refused:
        errors.append("infiniband_ipoib.mode connected: the IPoIB of %s is enhanced IPoIB (mlx5 offload, ConnectX-4 "
                      "and later: no connected-mode flag in its hardware address), which supports datagram mode "
                      "only; set mode datagram (MLNX_OFED / DOCA can load ib_ipoib with ipoib_enhanced=0 to get "
                      "connected mode back)" % ", ".join(refused))
        return [], errors
    addresses = ipoib.get("addresses") or {}
    pools = ipoib.get("pools") or {}
    for field, value in (("addresses", addresses), ("pools", pools)):
        if not isinstance(value, dict):
            errors.append("infiniband_ipoib.%s must be a map netdev -> %s, got %r" % (
                field, "a.b.c.d/len" if field == "addresses" else "network a.b.c.d/len", value))
    if errors:
        return [], errors
    mtu = ipoib.get("mtu")
    if mtu is not None and (_int(mtu) is None or _int(mtu) < 576):
        errors.append("infiniband_ipoib.mtu %r must be an integer of at least 576 (bytes)" % (mtu,))
        return [], errors
    parents = dict((p["netdev"], p) for p in ports if p.get("netdev"))
    children = {}
    for part in partitions:
        if isinstance(part, dict) and part.get("ipoib") and _int(part.get("pkey")) is not None:
            for parent in parents:
                children[_child_name(parent, _int(part["pkey"]))] = (parent, part)
    wanted = sorted(set(addresses) | set(pools))
    for name in wanted:
        if name not in parents and name not in children:
            errors.append("infiniband_ipoib: %s is not an IPoIB netdev of this host; allowed: %s" % (
                name, ", ".join(sorted(parents) + sorted(children)) or "none (no InfiniBand port with a netdev)"))
    if errors:
        return [], errors
    out = []
    for name in sorted(wanted, key=lambda n: (children.get(n, (n,))[0], n in children, n)):
        parent, part = (None, default_part) if name in parents else children[name]
        limit = ibp.ipoib_mtu_limit(_partition_mtu(part), mode)
        want_mtu = _int(mtu) if mtu is not None else limit
        if want_mtu > limit:
            errors.append("infiniband_ipoib.mtu %d is above the limit of %s: %d in %s mode on partition %s (IB MTU "
                          "%d; datagram = IB MTU - 4, connected up to 65520)" % (
                              want_mtu, name, limit, mode, part.get("name"), _partition_mtu(part)))
            continue
        address, addr_errors = _address_errors(name, addresses.get(name), pools.get(name), host_index)
        errors.extend(addr_errors)
        out.append({"name": name, "parent": parent, "pkey": None if parent is None else
                    "0x%04x" % (ibp.pkey_base(_int(part["pkey"])) | ibp.FULL_BIT),
                    "mode": mode, "mtu": want_mtu, "address": address, "partition": part.get("name")})
    return (out if not errors else []), errors


def sm_instances(ports, sm, priority, sm_devices=None):
    """opensm instances of this host: one per InfiniBand port it manages (``sm_devices`` narrows them), bound by
    port GUID: ``[{guid, device, port, role, rail, subnet, priority}]``."""
    if sm is not True:
        return []

    def managed(port):
        return not sm_devices or port["device"] in sm_devices or "%s:%d" % (port["device"], port["port"]) in sm_devices
    return [{"guid": p["guid"], "device": p["device"], "port": p["port"], "role": p.get("role", "compute"),
             "rail": p["rail"], "subnet": p.get("subnet", "rail %s" % p["rail"]), "priority": _int(priority)}
            for p in ports if p.get("guid") and managed(p)]


def plan(rdma, partitions, default_overrides, ipoib, sm, sm_priority, sm_devices, hosts, host_index,
         enhanced_ipoib=None, link_type_devices=None, keep_netdevs=None, fabrics=None):
    """The whole plan of one host (see the module docstring): ``{ports, link_type_ports, sm, partitions,
    partitions_conf, ipoib, errors}``. ``hosts`` maps every play host of the infiniband group to ``{rdma, sm,
    sm_priority, sm_devices}`` (for host selectors and the SM priority check); ``fabrics`` are this host's inventory
    groups (the port roles of facts read without them; default the infiniband group)."""
    errors = []
    ports = ib_ports(rdma, fabrics=fabrics)
    hosts_ports = dict((name, ib_ports((info or {}).get("rdma"))) for name, info in (hosts or {}).items())
    resolved, member_errors = resolve_members(partitions, hosts_ports)
    errors.extend(member_errors)
    part_errors = ibr.check_partitions(resolved if isinstance(partitions, list) else partitions)
    errors.extend("infiniband_" + e if e.startswith("partitions") else e for e in part_errors)
    sm_hosts = {}
    for name, info in (hosts or {}).items():
        info = info or {}
        managed = sm_instances(hosts_ports.get(name, []), info.get("sm"), info.get("sm_priority"),
                               info.get("sm_devices"))
        sm_hosts[name] = {"sm": info.get("sm"), "sm_priority": info.get("sm_priority"),
                          "rails": [i["subnet"] for i in managed]}
    errors.extend(check_sm(sm, sm_priority, sm_hosts))
    default_part = default_partition(default_overrides)
    default_errors = [e for e in ibr.check_partitions([default_part]) if "manages itself" not in e]
    errors.extend("infiniband_default_partition: " + e.split(": ", 1)[-1] for e in default_errors)
    instances = sm_instances(ports, sm, sm_priority, sm_devices)
    if sm is True and not instances:
        errors.append("infiniband_sm is true but this host has no InfiniBand port with a port GUID to bind opensm "
                      "to%s" % (" among infiniband_sm_devices %s" % ", ".join(sm_devices) if sm_devices else ""))
    conf = None
    if not errors:
        try:
            conf = ibr.render_partitions([default_part] + resolved)
            parsed = ibp.parse_partitions(conf)
        except ibp.PartitionConfigError as exc:
            errors.append("infiniband_partitions: %s" % exc)
        else:
            managed = set(subnet for info in sm_hosts.values() if info["sm"] is True for subnet in info["rails"])
            ports = member_pkeys(ports, parsed, managed | set(i["subnet"] for i in instances))
    if part_errors:
        netdevs, ipoib_errors = [], []
    else:
        netdevs, ipoib_errors = plan_ipoib(ipoib, ports, partitions, default_part, enhanced_ipoib, host_index)
    errors.extend(ipoib_errors)
    link_type_ports, link_type_errors = ibports.link_type_plan(rdma, link_type_devices or [], keep_netdevs, fabrics)
    errors.extend(link_type_errors)
    return {"ports": ports, "link_type_ports": link_type_ports, "sm": instances, "partitions": resolved,
            "partitions_conf": conf, "pkeys": port_pkeys(ports), "ipoib": netdevs, "errors": errors}


def port_pkeys(ports):
    """``{port GUID: [P_Key]}``: the ``member_pkeys`` of each port of the plan (:func:`member_pkeys`) that has any, the
    P_Keys the health check expects in its table (a port on a subnet whose SM is outside the play has none)."""
    return dict((p["guid"], p["member_pkeys"]) for p in ports if p.get("guid") and p.get("member_pkeys"))


def member_pkeys(ports, parsed, managed):
    """``ports`` with ``member_pkeys``: the P_Keys (``0x8002``, ``0x0003``) that the partitions.conf the play's
    opensm instances run with (``parsed``) puts in each port's table, on the subnets an SM host of the play manages
    (``managed``: ``rail 0``, ``storage 0``); ``[]`` elsewhere (a subnet whose SM is a switch's or a host's outside
    the play runs its own partitions)."""
    return [dict(port, member_pkeys=ibp.member_pkeys(parsed, port.get("guid")) if port.get("subnet") in managed
                 else []) for port in ports]


def ports_waiting(rdma, ports):
    """The plan's ``ports`` not yet as the role wants them in the RDMA facts ``rdma`` read now: ``[{port, state,
    lid, active, missing_pkeys}]`` (``mlx5_0:1``; ``active``: ACTIVE with a LID, the master SM of the subnet has swept
    it; ``missing_pkeys``: its ``member_pkeys`` not yet in its P_Key table, the SM has not swept since the partitions
    changed). A port of the plan that the facts lack counts as not active."""
    now = dict(("%s:%s" % (p["device"], p["port"]), p) for p in ib_ports(rdma or {}))
    out = []
    for want in ports or []:
        name = "%s:%s" % (want["device"], want["port"])
        port = now.get(name) or {}
        active = port.get("state") == "ACTIVE" and bool(port.get("lid"))
        table = set(_int(pkey) for pkey in port.get("pkeys") or [])
        missing = [pkey for pkey in want.get("member_pkeys") or [] if _int(pkey) not in table]
        if not active or missing:
            out.append({"port": name, "state": port.get("state"), "lid": port.get("lid"), "active": active,
                        "missing_pkeys": missing})
    return out


def waiting_message(waiting, timeout):
    """The failure of the ports :func:`ports_waiting` still gives after ``timeout`` seconds: the ports no SM brought
    up first (no master on their subnet), else the P_Keys missing from their tables (no sweep with the new file)."""
    inactive = [w["port"] for w in waiting or [] if not w.get("active")]
    if inactive:
        return ("%s did not become ACTIVE with a LID within %ss: no subnet manager is master on their subnet. Run one "
                "with infiniband_sm=true on one or two hosts of each subnet (rail), or check the switch's SM and the "
                "cables (ibstat)." % (", ".join(inactive), timeout))
    missing = ["%s lacks %s" % (w["port"], " ".join(w["missing_pkeys"])) for w in waiting or []]
    return ("%s in its P_Key table %ss after the partitions were written: the master SM of the subnet has not swept "
            "with the partitions.conf of this run (sminfo names the master; its opensm log says why, e.g. a PARSE "
            "ERROR, or a master that is not one of the play's SM hosts)." % ("; ".join(missing), timeout))


def partition_pkey(partitions, name):
    """The P_Key (int, full-membership bit as the table shows it for full members) of the partition ``name`` of
    the role's list; None when the list has no such partition. ``Default`` is 0xffff."""
    if name in ("Default", "default"):
        return 0xFFFF
    for part in partitions if isinstance(partitions, list) else []:
        if isinstance(part, dict) and part.get("name") == name and _int(part.get("pkey")) is not None:
            return ibp.pkey_base(_int(part["pkey"])) | ibp.FULL_BIT
    return None


def nccl_pkey_index(ports, pkey):
    """The one index NCCL_IB_PKEY takes for ``pkey`` on these ports (``[{device, port, pkey_indexes}]``), and an
    error when a port lacks the P_Key or the ports disagree on its index."""
    found = {}
    for port in ports:
        table = port.get("pkey_indexes") or {}
        index = None
        for text, idx in sorted(table.items(), key=lambda item: item[1]):
            number = _int(text)
            if number is not None and ibp.pkey_base(number) == ibp.pkey_base(pkey):
                index = idx
                break
        found["%s:%s" % (port["device"], port["port"])] = index
    missing = sorted(name for name, idx in found.items() if idx is None)
    if missing:
        return None, ("P_Key 0x%04x is not in the P_Key table of %s (is the port a member of the partition, and has "
                      "the SM swept since it was defined?)" % (pkey, ", ".join(missing)))
    indexes = sorted(set(found.values()))
    if len(indexes) > 1:
        return None, ("NCCL_IB_PKEY takes one P_Key index for every HCA, but P_Key 0x%04x sits at different indexes: "
                      "%s" % (pkey, ", ".join("%s=%d" % item for item in sorted(found.items()))))
    return (indexes[0] if indexes else None), None


def nccl_pkey(rdma, partitions, name, ports=None):
    """The NCCL_IB_PKEY value (a P_Key table index) of partition ``name`` on the ports NCCL uses (``[{device,
    port}]``, default every InfiniBand port): ``{index, pkey, error}``; ``pkey`` is None for a name that is not a
    partition of ``partitions``."""
    pkey = partition_pkey(partitions, name)
    if pkey is None:
        names = ["Default"] + [p.get("name") for p in (partitions or []) if isinstance(p, dict) and p.get("name")]
        return {"index": None, "pkey": None, "error": "nccl_ib_partition %r is not a partition of infiniband_partitions;"
                " allowed: %s" % (name, ", ".join(names))}
    want = set("%s:%s" % (p["device"], p["port"]) for p in (ports or []))
    facts = [p for p in ib_ports(rdma) if not want or "%s:%s" % (p["device"], p["port"]) in want]
    index, error = nccl_pkey_index(facts, pkey)
    return {"index": index, "pkey": "0x%04x" % pkey, "error": error}


_SMINFO_RE = re.compile(r"^sminfo: sm lid (\d+) sm guid (0x[0-9a-fA-F]+), activity count (\d+) priority (\d+) "
                        r"state (\d+) (SMINFO_[A-Z_]+)\s*$")


def parse_sminfo(text):
    """``sminfo`` output (infiniband-diags) -> ``{lid, guid, activity_count, priority, state, state_name}``
    (``state_name`` MASTER, STANDBY, DISCOVERING, NOTACTIVE), or ``{error}`` with the tool's message when the query
    failed (``sminfo: iberror: failed: query``). GUIDs are zero-padded to 16 hex digits."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    for line in lines:
        match = _SMINFO_RE.match(line)
        if match:
            return {"lid": int(match.group(1)), "guid": "0x%016x" % int(match.group(2), 16),
                    "activity_count": int(match.group(3)), "priority": int(match.group(4)),
                    "state": int(match.group(5)), "state_name": match.group(6)[len("SMINFO_"):]}
    errors = [line for line in lines if "iberror" in line] or lines[:1]
    return {"error": errors[0].strip() if errors else "no output"}


def partitions_change(old_text, new_text):
    """How running opensm instances take a new partitions.conf: ``none`` (same definitions), ``reload`` (SIGHUP:
    the heavy sweep it starts re-reads the file; enough for P_Keys added or removed) or ``restart`` (a P_Key both
    files define changed its flags or members: opensm 3.3.23 re-reading the file kept a port's old membership of an
    existing P_Key, limited where the new file made it full, until it was restarted - seen on the simulated fabric).
    A file that does not parse (or none) counts as having no definitions."""
    def definitions(text):
        try:
            parsed = ibp.parse_partitions(text or "")
        except ibp.PartitionConfigError:
            return {}
        out = {}
        for part in parsed:
            entry = dict(part)
            entry.pop("line", None)
            out.setdefault(part["pkey"], []).append(repr(sorted(entry.items())))
        return out
    old, new = definitions(old_text), definitions(new_text)
    if old == new:
        return "none"
    if any(old[pkey] != new[pkey] for pkey in set(old) & set(new)):
        return "restart"
    return "reload"
