# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's expected RDMA state (``/etc/hpcnet/health.json``): built once from what the provisioning declared and
what the host had when it was provisioned, read at every health check.

Pure Python (no Ansible imports).
- ``build(declared, rdma)``: the document from the health role's inputs (``declared``) and the host's RDMA facts as
  ``rdma_facts`` read them (``rdma``: each port with its role and rail). Every port's role is pinned by its PCI function
  (a port that goes down keeps its role; a card that leaves the bus is a finding, not a port of another role); the
  compute ports' rate, width and MTU become the spec the checks compare with, unless the user declared them.
- ``load(text)``: the document read back, or ``ExpectedStateError`` naming what is wrong with the file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from collections import Counter

from ansible_collections.hpcnet.rdma.plugins.module_utils.health import thresholds
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import GROUP_LINK_LAYER

VERSION = 1
PATH = "/etc/hpcnet/health.json"
KEYS = ("version", "host", "group", "fabrics", "sysfs_root", "ports", "port_roles", "management_netdevs", "spec",
        "expect", "sm", "roce_qos", "lossless_priorities", "nccl_conf", "thresholds", "interval", "slurm",
        "textfile_dir", "state_dir")
CHECKED_ROLES = ("compute", "storage")
# what a port has now but is no expectation (the spec's rate and width are the role's)
PORT_NOW = ("state", "rate_gbps", "width")


class ExpectedStateError(ValueError):
    """The expected-state file is missing, unreadable or not this program's format."""


def _most_common(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    ranked = Counter(values).most_common()
    best = ranked[0][1]
    return max(v for v, n in ranked if n == best)


def _ports(rdma):
    """Every port with its role, rail and what the checks compare, compute first in rail order (with its state, rate
    and width now, which the spec is computed from and the file does not keep: a port down when the role ran)."""
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
                        "gid_index": port.get("roce_v2_ipv4_gid_index"),
                        "pkeys": list(port.get("pkeys") or []) if port.get("link_layer") == "InfiniBand" else []})
    return out


def _pinned_roles(ports):
    """rdma_port_roles entries that give every port the role it has now, by PCI function (or dev:port without one)."""
    entries = []
    for role in port_roles.ROLES:
        sel = [p["pci"] if p["pci"] else "%s:%d" % (p["device"], p["port"]) for p in ports if p["role"] == role]
        if sel:
            entries.append({"role": role, "devices": sel})
    return entries


def _ipoib(rdma, ports):
    """The IPoIB netdevs up now on the checked InfiniBand ports (each port's netdev and its P_Key children)."""
    ib = set((p["device"], p["port"]) for p in ports if p["link_layer"] == "InfiniBand" and p["role"] in CHECKED_ROLES)
    return sorted((name for name, nd in (rdma.get("netdevs") or {}).items()
                   if (nd.get("rdma_device"), nd.get("rdma_port")) in ib and nd.get("operstate") == "up"),
                  key=lambda name: (len(name), name))


def _netdev_mtu(rdma, ports, declared):
    """{netdev: MTU now} of the checked ports' netdevs and their IPoIB children, unless the user declared an MTU."""
    if declared.get("mtu") or declared.get("storage_mtu"):
        return {}
    ids = set((p["device"], p["port"]) for p in ports if p["role"] in CHECKED_ROLES)
    return dict((name, nd["mtu"]) for name, nd in (rdma.get("netdevs") or {}).items()
                if (nd.get("rdma_device"), nd.get("rdma_port")) in ids and isinstance(nd.get("mtu"), int))


def _active(ports, role, key):
    return _most_common([p[key] for p in ports if p["role"] == role and p["state"] == "ACTIVE"])


def build(declared, rdma):
    """The expected-state document. ``declared``: {host, group, fabrics, management_netdevs, expected_rate_gbps,
    expected_storage_rate_gbps, mtu, storage_mtu, memlock, gdr, ipoib (None: the IPoIB netdevs up now), sm, roce_qos,
    lossless_priorities, nccl_conf, thresholds (the role's health_* inputs), slurm, textfile_dir, state_dir}."""
    group = declared["group"]
    if group not in GROUP_LINK_LAYER:
        raise ExpectedStateError("the host must be in the infiniband or the roce group; got %r" % (group,))
    ports = _ports(rdma)
    compute = [p for p in ports if p["role"] == "compute"]
    spec = {
        "expected_rate_gbps": declared.get("expected_rate_gbps") or _active(ports, "compute", "rate_gbps"),
        "expected_storage_rate_gbps": declared.get("expected_storage_rate_gbps") or _active(ports, "storage", "rate_gbps"),
        "min_width": _active(ports, "compute", "width"),
    }
    ib = [p for p in ports if p["role"] in CHECKED_ROLES and p["link_layer"] == "InfiniBand" and p["pkeys"]]
    expect = {
        "pkeys": dict(("%s:%d" % (p["device"], p["port"]), p["pkeys"]) for p in ib),
        "devices": ["%s:%d" % (p["device"], p["port"]) for p in compute],
        "gdr": bool(declared.get("gdr")),
        "ipoib": _ipoib(rdma, ports) if declared.get("ipoib") is None else list(declared["ipoib"]),
        "mtu": declared.get("mtu"),
        "storage_mtu": declared.get("storage_mtu"),
        # each netdev's own MTU now (rails may differ: an IPoIB rail in datagram mode, another in a partition)
        "netdev_mtu": _netdev_mtu(rdma, ports, declared),
        "memlock": declared.get("memlock") or "unlimited",
    }
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
