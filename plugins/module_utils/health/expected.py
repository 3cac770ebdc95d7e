# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's expected RDMA state (``/etc/hpcnet/health.json``): built from what the provisioning declared and what the
fabric has, never from what one host has on a bad day; read at every health check.

Pure Python (no Ansible imports).
- ``build(declared, rdma)``: the document from the health role's inputs (``declared``) and the host's RDMA facts as
  ``rdma_facts`` read them (``rdma``: each port with its role and rail). Every port's role is pinned by its PCI function
  (a port that goes down keeps its role and stays expected ACTIVE; a card that leaves the bus is a finding, not a port
  of another role). Where each expectation comes from:
  - rate and width per role (compute, storage): declared, else the fabric's (``fabric_reference``: the most common
    value among the group's hosts, ``verify_fabric.host_references``, verify's own rule); without a fabric reference,
    the same rule over this host alone;
  - P_Keys: declared per port GUID (``pkeys``: the infiniband role's plan, what the SM gives each port from
    ``infiniband_partitions``); none declared, none checked;
  - IPoIB netdevs: declared (``ipoib``: the infiniband role's plan); none declared, none expected;
  - MTUs: declared per netdev (``netdev_mtu``: ``roce_mtu`` on the RoCE compute netdevs, the plan's IPoIB MTUs), or
    ``mtu``/``storage_mtu`` for every netdev of the role, else the fabric's (the most common MTU of the same rail or
    storage port in the group).
  A host that differs at install fails its first check (the role's ``health_state``): its damage is a finding, not
  the expected state.
- ``load(text)``: the document read back, or ``ExpectedStateError`` naming what is wrong with the file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.hpcnet.rdma.plugins.module_utils.health import thresholds
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import GROUP_LINK_LAYER
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_fabric import host_references

VERSION = 1
PATH = "/etc/hpcnet/health.json"
KEYS = ("version", "host", "group", "fabrics", "sysfs_root", "ports", "port_roles", "management_netdevs", "spec",
        "expect", "sm", "roce_qos", "lossless_priorities", "nccl_conf", "thresholds", "interval", "slurm",
        "textfile_dir", "state_dir")
CHECKED_ROLES = ("compute", "storage")
# what a port has now but is no expectation (the spec's rate and width are the role's), and its GUID (the key of its
# declared P_Keys)
PORT_NOW = ("state", "rate_gbps", "width", "guid")


class ExpectedStateError(ValueError):
    """The expected-state file is missing, unreadable or not this program's format."""


def _ports(rdma):
    """Every port with its role, rail and what the checks compare, compute first in rail order (with its state, rate,
    width and GUID now, which the file does not keep: a port down when the role ran is expected ACTIVE all the same)."""
    planned = port_roles.planned(rdma)
    out = []
    for role in port_roles.ROLES:
        for pid in (planned.get("ports_by_role") or {}).get(role) or []:
            name, num = pid.rsplit(":", 1)
            dev = planned["devices"][name]
            port = dev["ports"][num]
            netdevs = (rdma.get("netdevs") or {})
            nd = port.get("netdev")
            out.append({"device": name, "port": int(num), "pci": dev.get("pci_address"), "role": role,
                        "rail": port.get("rail"), "link_layer": port.get("link_layer"), "state": port.get("state"),
                        "rate_gbps": port.get("rate_gbps"), "width": port.get("width"), "netdev": nd,
                        "mtu": (netdevs.get(nd) or {}).get("mtu") if nd else None,
                        "gid_index": port.get("roce_v2_ipv4_gid_index"), "guid": port.get("port_guid")})
    return out


def _pinned_roles(ports):
    """rdma_port_roles entries that give every port the role it has now, by PCI function (or dev:port without one)."""
    entries = []
    for role in port_roles.ROLES:
        sel = [p["pci"] if p["pci"] else "%s:%d" % (p["device"], p["port"]) for p in ports if p["role"] == role]
        if sel:
            entries.append({"role": role, "devices": sel})
    return entries


def _pkeys(declared, ports):
    """{dev:port: [P_Key]} of the checked InfiniBand ports from the declared P_Keys, by port GUID (or dev:port)."""
    out = {}
    for p in ports:
        if p["role"] in CHECKED_ROLES and p["link_layer"] == "InfiniBand":
            pid = "%s:%d" % (p["device"], p["port"])
            wanted = declared.get(p["guid"]) if p["guid"] else None
            wanted = wanted if wanted is not None else declared.get(pid)
            if wanted:
                out[pid] = ["0x%04x" % int(str(k), 16) for k in wanted]
    return out


def _netdev_mtu(declared, reference):
    """{netdev: MTU}: the declared MTUs, over the fabric's for the other netdevs of the checked ports (none of the
    fabric's when ``mtu`` or ``storage_mtu`` is declared for every netdev of a role)."""
    out = {} if declared.get("mtu") or declared.get("storage_mtu") else dict(
        (nd, mtu) for nd, mtu in (reference.get("mtu") or {}).items() if isinstance(mtu, int))
    out.update((nd, int(mtu)) for nd, mtu in (declared.get("netdev_mtu") or {}).items())
    return out


def _reference(declared, rdma):
    """The fabric's values for this host's ports (the role's ``fabric_reference``), else verify's rule over this host
    alone (the module run on its own)."""
    if declared.get("fabric_reference"):
        return declared["fabric_reference"]
    return host_references({declared["host"]: {"group": declared["group"], "rdma": rdma}}, declared["host"])


def _rate_sources(declared, group):
    """Where each role's expected rate comes from, as the findings name it: the variable that declares it, else the
    fabric at install."""
    return dict((role, "declared (%s)" % variable if declared.get(key) else
                 "the most common rate of the %s group's %s ports at install" % (group, role))
                for role, key, variable in (("compute", "expected_rate_gbps", "health_expected_rate_gbps"),
                                            ("storage", "expected_storage_rate_gbps",
                                             "health_expected_storage_rate_gbps")))


def build(declared, rdma):
    """The expected-state document. ``declared``: {host, group, fabrics, management_netdevs, expected_rate_gbps,
    expected_storage_rate_gbps, fabric_reference (``verify_fabric.host_references`` over the group's hosts), mtu,
    storage_mtu, netdev_mtu ({netdev: MTU}), pkeys ({port GUID or dev:port: [P_Key]}), ipoib (the IPoIB netdevs
    expected up), memlock, gdr, sm, roce_qos, lossless_priorities, nccl_conf, thresholds (the role's health_*
    inputs), slurm, textfile_dir, state_dir}."""
    group = declared["group"]
    if group not in GROUP_LINK_LAYER:
        raise ExpectedStateError("the host must be in the infiniband or the roce group; got %r" % (group,))
    ports = _ports(rdma)
    compute = [p for p in ports if p["role"] == "compute"]
    reference = _reference(declared, rdma)
    rates, widths = reference.get("rate_gbps") or {}, reference.get("width") or {}
    spec = {
        "expected_rate_gbps": declared.get("expected_rate_gbps") or rates.get("compute"),
        "expected_storage_rate_gbps": declared.get("expected_storage_rate_gbps") or rates.get("storage"),
        "rate_sources": _rate_sources(declared, group),
        "min_width": widths.get("compute"),
        "min_storage_width": widths.get("storage"),
    }
    expect = {
        "pkeys": _pkeys(declared.get("pkeys") or {}, ports),
        "devices": ["%s:%d" % (p["device"], p["port"]) for p in compute],
        "gdr": bool(declared.get("gdr")),
        "ipoib": list(declared.get("ipoib") or []),
        "mtu": declared.get("mtu"),
        "storage_mtu": declared.get("storage_mtu"),
        # each netdev's own MTU (rails may differ: an IPoIB rail in datagram mode, another in a partition)
        "netdev_mtu": _netdev_mtu(declared, reference),
        "memlock": declared.get("memlock") or "unlimited",
    }
    for p in ports:
        p["pkeys"] = expect["pkeys"].get("%s:%d" % (p["device"], p["port"]), [])
    if expect["memlock"] == "unchecked":
        expect["memlock"] = None  # verify's memlock check skips a host whose limit it is not given
    doc = {
        "version": VERSION,
        "host": declared["host"],
        "group": group,
        # the fabric groups only: group_names also holds the play's own groups (the rolling reboot's), which change
        "fabrics": [g for g in GROUP_LINK_LAYER if g in (declared.get("fabrics") or [group])] or [group],
        "sysfs_root": declared.get("sysfs_root") or "/sys",
        "ports": [dict((k, v) for k, v in p.items() if k not in PORT_NOW) for p in ports if p["role"] in CHECKED_ROLES],
        "port_roles": _pinned_roles(ports),
        "management_netdevs": list(declared.get("management_netdevs") or []),
        "spec": spec,
        "expect": expect,
        "sm": bool(declared.get("sm")) and group == "infiniband",
        "roce_qos": dict(declared.get("roce_qos") or {}),
        "lossless_priorities": sorted(set(int(p) for p in declared.get("lossless_priorities") or [])),
        "nccl_conf": declared.get("nccl_conf"),
        "thresholds": thresholds.values(declared.get("thresholds") or {}),
        "interval": thresholds.interval(declared.get("thresholds") or {}),
        "slurm": dict(declared.get("slurm") or {"enabled": False}),
        "textfile_dir": declared.get("textfile_dir"),
        "state_dir": declared.get("state_dir") or "/var/lib/hpcnet/health",
    }
    return doc


def dumps(doc):
    """The file's text: stable (sorted keys), so that an unchanged state writes the same bytes."""
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def load(text, path=PATH):
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ExpectedStateError("%s is not JSON (%s): re-run the hpcnet.rdma.health role" % (path, exc))
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise ExpectedStateError("%s is not an expected-state file of version %d: re-run the hpcnet.rdma.health role"
                                 % (path, VERSION))
    missing = [key for key in KEYS if key not in doc]
    if missing:
        raise ExpectedStateError("%s lacks %s: re-run the hpcnet.rdma.health role" % (path, ", ".join(missing)))
    return doc
