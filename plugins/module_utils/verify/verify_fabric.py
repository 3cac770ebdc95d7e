# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the spec checks (``rdma_verify``) work on: their input, their findings, and the fabric view.

Pure Python (no Ansible imports).
- the input: ``validate_hosts`` and ``validate_spec`` normalise the module's ``hosts`` and ``spec`` or raise
  ``VerifyInputError`` naming the field;
- the findings: ``finding`` (always the keys of ``FINDING_KEYS``), ``Outcome`` (what one check found on one host) and
  ``SKIP``;
- the fabric view: ``Fabric`` (the hosts, the spec, each host's expected ports as ``PortRef``, the group references,
  computed once) and ``references_table`` (those references, for the result).

Vocabulary:
- a host's *ports* are the ports the checks look at, each with its *role* (``sysfs/port_roles``, read through
  ``port_roles.planned``): its *compute* ports, ``expect.devices`` (``mlx5_0`` = every port of the HCA, ``mlx5_0:1``
  = that port) in the order given, or the ports of the role compute in rail order (PCI order, whatever the devices
  are called); then its *storage* ports (role storage, PCI order). Management and unused ports are not checked;
- the *rail* of a compute port is its position in that list (rail 0 = the first). On InfiniBand a rail is a subnet.
  A storage port has no rail; its *index* is its position among the host's storage ports;
- a *reference* is what a value should be when the spec does not say: the most common value in the group among the
  ports of the same role (the rate, width and link layer), of the same rail or storage index (the MTU, GID index, SM
  LID) or of the same board (firmware). Ties go to the higher rate, width, MTU and firmware version, and to the
  lower GID index.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import Counter

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import rail_map
from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband.infiniband import parse_sminfo
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import GROUP_LINK_LAYER

WIDTHS = ("1X", "2X", "4X", "8X", "12X")
SEVERITIES = ("error", "warning")
STATUSES = ("pass", "fail", "skip")
FABRIC = "fabric"          # the ``host`` of a finding about the whole fabric (a rail with no SM)

HOST_KEYS = ("group", "rdma", "roce_qos", "expect", "sminfo", "roce_declared_qos")
EXPECT_KEYS = ("devices", "gdr", "ipoib", "mtu", "memlock", "storage_mtu", "pkeys", "netdev_mtu")
SPEC_KEYS = ("expected_rate_gbps", "min_width", "expected_fw_ver", "expected_storage_rate_gbps", "min_storage_width",
             "rate_sources", "rail_switches")
CHECKED_ROLES = ("compute", "storage")
FINDING_KEYS = ("host", "severity", "check", "device", "port", "expected", "found", "cause", "fix")


class VerifyInputError(ValueError):
    """Bad input; the message names the field and what it accepts."""


def finding(host, severity, check, device, port, expected, found, cause, fix):
    """One finding, always with the same keys (``device``/``port`` None when they do not apply)."""
    return {"host": host, "severity": severity, "check": check, "device": device,
            "port": int(port) if port is not None else None,
            "expected": expected, "found": found, "cause": cause, "fix": fix}


class Outcome:
    """What one check found on one host: ``skip`` (nothing to check), or its findings (none = pass).
    ``failed`` marks a host that fails without a finding of its own (its finding is a fabric one)."""

    def __init__(self, findings=None, skipped=False, failed=False):
        self.findings = list(findings or [])
        self.skipped = skipped and not self.findings and not failed
        self.failed = failed

    @property
    def status(self):
        if self.skipped:
            return "skip"
        return "fail" if self.findings or self.failed else "pass"


SKIP = Outcome(skipped=True)


# ----------------------------------------------------------------------------------------------- input checks
def is_number(value):
    """An int or a float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _opt_number(value, field, integer=False):
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = int(value) if integer else float(value)
        except ValueError:
            value = None
    if not is_number(value) or value <= 0 or (integer and int(value) != value):
        raise VerifyInputError("%s must be a positive %s or null; got %r" % (
            field, "integer" if integer else "number", value))
    return int(value) if integer else float(value)


def _memlock(value, field):
    if value is None or value == "":
        return "unlimited"
    if isinstance(value, str) and value.strip().lower() in ("unlimited", "infinity", "-1"):
        return "unlimited"
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or isinstance(value, bool) or number <= 0:
        raise VerifyInputError("%s must be \"unlimited\" or a number of bytes; got %r" % (field, value))
    return number


def _unknown_keys(data, allowed, field):
    extra = sorted(str(k) for k in data if k not in allowed)
    if extra:
        raise VerifyInputError("%s: unknown key(s) %s; allowed: %s" % (field, ", ".join(extra), ", ".join(allowed)))


def _device_list(value, field):
    if value is None or value == "" or value == []:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise VerifyInputError("%s must be a list of HCA names (mlx5_0, or mlx5_0:1 for one port); got %r"
                               % (field, value))
    out = []
    for item in value:
        name, sep, port = item.partition(":")
        if sep and not port.isdigit():
            raise VerifyInputError("%s: %r is not HCA or HCA:port (mlx5_0:1)" % (field, item))
        out.append((name, int(port) if sep else None))
    return out


def _bool(value, field):
    if value is None or value == "":
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        return value.lower() in ("true", "yes", "on", "1")
    raise VerifyInputError("%s must be true or false; got %r" % (field, value))


def validate_spec(spec):
    """``spec`` -> normalised copy. Raises VerifyInputError naming the key."""
    spec = spec or {}
    if not isinstance(spec, dict):
        raise VerifyInputError("spec must be a dict; got %s" % type(spec).__name__)
    _unknown_keys(spec, SPEC_KEYS, "spec")
    widths = {}
    for key in ("min_width", "min_storage_width"):
        width = spec.get(key)
        if width not in ("", None) and str(width).upper() not in WIDTHS:
            raise VerifyInputError("spec.%s must be one of %s or null; got %r" % (key, ", ".join(WIDTHS), width))
        widths[key] = str(width).upper() if width not in ("", None) else None
    fw = spec.get("expected_fw_ver")
    if fw in ("", None):
        fw = None
    elif isinstance(fw, dict):
        if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in fw.items()):
            raise VerifyInputError("spec.expected_fw_ver as a dict maps a board_id (PSID) or hca_type to a version "
                                   "string; got %r" % (fw,))
    elif not isinstance(fw, str):
        raise VerifyInputError("spec.expected_fw_ver must be a version string (28.41.1000), a dict "
                               "{board_id: version} or null; got %r" % (fw,))
    sources = spec.get("rate_sources") or {}
    if not (isinstance(sources, dict) and set(sources) <= set(CHECKED_ROLES)
            and all(isinstance(v, str) for v in sources.values())):
        raise VerifyInputError("spec.rate_sources maps compute or storage to where its expected rate comes from (a "
                               "text for the findings); got %r" % (sources,))
    try:
        rail_switches = rail_map.validate_rail_switches(spec.get("rail_switches"))
    except rail_map.FabricInputError as exc:
        raise VerifyInputError(str(exc)) from exc
    return {
        "rail_switches": rail_switches,
        "rate_sources": dict(sources),
        "expected_rate_gbps": _opt_number(spec.get("expected_rate_gbps"), "spec.expected_rate_gbps"),
        "expected_storage_rate_gbps": _opt_number(spec.get("expected_storage_rate_gbps"),
                                                  "spec.expected_storage_rate_gbps"),
        "min_width": widths["min_width"],
        "min_storage_width": widths["min_storage_width"],
        "expected_fw_ver": fw,
    }


def _sminfo(value, where):
    """``{"<hca>:<port>": sminfo output}`` -> ``{"<hca>:<port>": parse_sminfo(output)}`` (``{}`` when absent)."""
    if value in (None, "") or (isinstance(value, str) and value.startswith("__omit_place_holder__")):
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise VerifyInputError("%s must be a dict \"<hca>:<port>\" -> the output of `sminfo -C <hca> -P <port>`; got %r"
                               % (where, value))
    return dict((key, parse_sminfo(text)) for key, text in value.items())


def _pkeys(value, field):
    """``{"<hca>:<port>": ["0x8001", ...]}`` (the P_Keys each InfiniBand port must hold) or {}."""
    if value in (None, "", {}):
        return {}
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, (list, tuple)) and all(isinstance(p, str) for p in v)
            for k, v in value.items()):
        raise VerifyInputError("%s must map <hca>:<port> to a list of P_Keys (0x8001); got %r" % (field, value))
    return dict((k, ["0x%04x" % int(p, 16) for p in v]) for k, v in value.items())


def _netdev_mtu(value, field):
    """``{netdev: MTU}`` (each netdev's own expected MTU, as the health check keeps them) or {}."""
    if value in (None, "", {}):
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                              and v > 0 for k, v in value.items()):
        raise VerifyInputError("%s must map netdev names to MTUs in bytes; got %r" % (field, value))
    return dict(value)


def validate_hosts(hosts):
    """``hosts`` -> {host: normalised entry}. Raises VerifyInputError naming ``hosts.<host>.<key>``."""
    if not isinstance(hosts, dict) or not hosts:
        raise VerifyInputError("hosts must be a non-empty dict host -> {group, rdma, roce_qos, expect}")
    out = {}
    for name, entry in hosts.items():
        where = "hosts.%s" % name
        if not isinstance(entry, dict):
            raise VerifyInputError("%s must be a dict {group, rdma, roce_qos, expect}; got %s" % (
                where, type(entry).__name__))
        _unknown_keys(entry, HOST_KEYS, where)
        group = entry.get("group")
        if group not in GROUP_LINK_LAYER:
            raise VerifyInputError("%s.group must be one of infiniband, roce; got %r" % (where, group))
        rdma = entry.get("rdma")
        if not isinstance(rdma, dict) or not isinstance(rdma.get("devices"), dict):
            raise VerifyInputError("%s.rdma must be the host's ansible_facts.rdma (hpcnet.rdma.rdma_facts), a dict "
                                   "with devices; got %s"
                                   % (where, type(rdma).__name__ if rdma is not None else "null"))
        qos = entry.get("roce_qos")
        if qos in ("", None) or qos == {} or (isinstance(qos, str) and qos.startswith("__omit_place_holder__")):
            qos = None
        elif not isinstance(qos, dict):
            raise VerifyInputError("%s.roce_qos must be the registered result of hpcnet.rdma.roce_qos (a dict with "
                                   "changed, diff, msg) or null; got %s" % (where, type(qos).__name__))
        declared = entry.get("roce_declared_qos")
        if declared in ("", None) or (isinstance(declared, str) and declared.startswith("__omit_place_holder__")):
            declared = None
        elif not isinstance(declared, dict) or not all(isinstance(v, dict) for v in declared.values()):
            raise VerifyInputError("%s.roce_declared_qos must be the roce role's roce_declared_qos ({netdev: roce_qos "
                                   "parameters}) or null; got %r" % (where, declared))
        expect = entry.get("expect") or {}
        if not isinstance(expect, dict):
            raise VerifyInputError("%s.expect must be a dict; got %s" % (where, type(expect).__name__))
        _unknown_keys(expect, EXPECT_KEYS, where + ".expect")
        ipoib = expect.get("ipoib") or []
        if not isinstance(ipoib, (list, tuple)) or not all(isinstance(v, str) and v for v in ipoib):
            raise VerifyInputError("%s.expect.ipoib must be a list of netdev names; got %r" % (where, ipoib))
        out[str(name)] = {
            "name": str(name), "group": group, "link_layer": GROUP_LINK_LAYER[group], "rdma": rdma, "roce_qos": qos,
            "roce_declared_qos": declared,
            "sminfo": _sminfo(entry.get("sminfo"), where + ".sminfo"),
            "devices": _device_list(expect.get("devices"), where + ".expect.devices"),
            "gdr": _bool(expect.get("gdr"), where + ".expect.gdr"),
            "ipoib": list(ipoib),
            "mtu": _opt_number(expect.get("mtu"), where + ".expect.mtu", integer=True),
            "storage_mtu": _opt_number(expect.get("storage_mtu"), where + ".expect.storage_mtu", integer=True),
            "memlock": _memlock(expect.get("memlock"), where + ".expect.memlock"),
            "pkeys": _pkeys(expect.get("pkeys"), where + ".expect.pkeys"),
            "netdev_mtu": _netdev_mtu(expect.get("netdev_mtu"), where + ".expect.netdev_mtu"),
        }
    return out


# ---------------------------------------------------------------------------------------------- the fabric view
def _most_common(values, prefer_high=True):
    """The most common value; a tie goes to the highest (or lowest) of the tied values. None when empty."""
    counts = Counter(v for v in values if v is not None)
    if not counts:
        return None
    best = max(counts.values())
    tied = [v for v, n in counts.items() if n == best]
    key = _sort_key
    return max(tied, key=key) if prefer_high else min(tied, key=key)


def _sort_key(value):
    if isinstance(value, str):
        return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.\-_]", value)]
    return [(0, value, "")]


def width_lanes(width):
    """``4X`` -> 4; None when it is no width."""
    return int(str(width).rstrip("X")) if width and str(width).rstrip("X").isdigit() else None


class PortRef:
    """One port a host's checks look at (``facts`` None when the HCA or the port is absent): its ``role`` (compute or
    storage), its ``index`` among the host's ports of that role, and its ``rail`` (the index of a compute port; None
    for a storage port)."""

    def __init__(self, host, index, device, port, dev_facts, facts, role="compute"):
        self.host = host
        self.role = role
        self.index = index
        self.rail = index if role == "compute" else None
        self.device = device
        self.port = port
        self.dev = dev_facts
        self.facts = facts

    @property
    def where(self):
        """``rail 2`` or ``storage port 0``: what the port is compared with."""
        return "rail %d" % self.index if self.role == "compute" else "%s port %d" % (self.role, self.index)

    @property
    def present(self):
        return self.facts is not None

    def get(self, key):
        return (self.facts or {}).get(key)

    @property
    def link_up(self):
        return self.get("phys_state") == "LinkUp"

    @property
    def active(self):
        return self.get("state") == "ACTIVE" and self.link_up


class Fabric:
    """The normalised hosts, the spec, each host's checked ports, and the group references (computed once)."""

    def __init__(self, hosts, spec):
        self.hosts = hosts
        self.spec = spec
        self.order = sorted(hosts, key=natural_key)
        self.all_ports = dict((name, self._select_ports(hosts[name])) for name in self.order)
        # the compute ports (the rails): what most checks look at
        self.ports = dict((name, [r for r in refs if r.role == "compute"]) for name, refs in self.all_ports.items())
        self._refs = {}
        # the rail map and the link findings (rdma_verify.fabric_links)
        self.links = {"rail_map": {}, "rail_switches": {}, "basis": "none", "note": "", "findings": []}
        # each host's GPUDirect path: {host: {rails, findings}} (rdma_verify.fabric_pcie)
        self.pcie = {}

    @staticmethod
    def _select_ports(host):
        rdma = port_roles.planned(host["rdma"], [host["group"]])
        devices = rdma.get("devices") or {}
        by_role = rdma.get("ports_by_role") or {}
        compute = []
        if host["devices"] is not None:
            for name, port in host["devices"]:
                dev = devices.get(name)
                ports = (dev or {}).get("ports") or {}
                numbers = [port] if port is not None else sorted((int(p) for p in ports), key=int) or [1]
                for number in numbers:
                    compute.append((name, number, dev, ports.get(str(number)) if dev is not None else None))
        else:
            for pid in by_role.get("compute") or []:
                name, number = pid.rsplit(":", 1)
                compute.append((name, int(number), devices[name], devices[name]["ports"][number]))
        taken = set((name, number) for name, number, _d, _p in compute)
        storage = []
        for pid in by_role.get("storage") or []:
            name, number = pid.rsplit(":", 1)
            if (name, int(number)) not in taken:
                storage.append((name, int(number), devices[name], devices[name]["ports"][number]))
        return ([PortRef(host["name"], index, name, number, dev, facts)
                 for index, (name, number, dev, facts) in enumerate(compute)]
                + [PortRef(host["name"], index, name, number, dev, facts, "storage")
                   for index, (name, number, dev, facts) in enumerate(storage)])

    def group_hosts(self, group):
        return [h for h in self.order if self.hosts[h]["group"] == group]

    def group_ports(self, group, role="compute"):
        for name in self.group_hosts(group):
            for ref in self.all_ports[name]:
                if role is None or ref.role == role:
                    yield ref

    def reference(self, kind, group, sub=None):
        """The group's most common value of ``kind``, memoised: rate_gbps, width and link_layer per role (``sub``,
        compute when None), mtu per netdev key (``host_netdevs``; None: every compute netdev), fw_ver per board,
        gid_index and sm_lid per rail."""
        key = (kind, group, sub)
        if key not in self._refs:
            self._refs[key] = self._compute_reference(kind, group, sub)
        return self._refs[key]

    def _compute_reference(self, kind, group, sub):
        if kind in ("rate_gbps", "width", "link_layer"):
            ports = list(self.group_ports(group, sub or "compute"))
            if kind == "rate_gbps":
                return _most_common(r.get("rate_gbps") for r in ports if r.active)
            if kind == "link_layer":
                return _most_common(r.get("link_layer") for r in ports if r.present)
            return _most_common((width_lanes(r.get("width")) for r in ports if r.active), prefer_high=True)
        if kind == "mtu":
            return _most_common(mtu for h in self.group_hosts(group) for _nd, mtu, _dev, key in self.host_netdevs(h)
                                if key == sub or (sub is None and key[0] in ("compute", "ipoib")))
        ports = list(self.group_ports(group))
        if kind == "fw_ver":
            seen = {}
            for r in self.group_ports(group, None):
                if r.dev is not None and board_of(r.dev) == sub:
                    seen[(r.host, r.device)] = r.dev.get("fw_ver")
            return _most_common(seen.values())
        if kind == "gid_index":
            return _most_common((r.get("roce_v2_ipv4_gid_index") for r in ports if r.rail == sub
                                 and r.get("link_layer") == "Ethernet"), prefer_high=False)
        if kind == "sm_lid":
            return _most_common((r.get("sm_lid") or None for r in ports if r.rail == sub and r.active
                                 and r.get("link_layer") == "InfiniBand"), prefer_high=False)
        raise KeyError(kind)

    def host_netdevs(self, name):
        """[(netdev, mtu, device, key)] of the host's checked ports and expected IPoIB netdevs that exist. ``key``
        is what the MTU is compared with across the group: ``(role, index, "port")`` for a port's own netdev,
        ``(role, index, "child")`` for another netdev of that port (a P_Key child), ``("ipoib", netdev, "")`` for an
        IPoIB netdev of a port that is not checked."""
        host = self.hosts[name]
        netdevs = host["rdma"].get("netdevs") or {}
        out, seen = [], set()
        refs = [r for r in self.all_ports[name] if r.present]
        wanted = [(r.get("netdev"), r.device, (r.role, r.index, "port")) for r in refs]
        for nd in host["ipoib"]:
            info = netdevs.get(nd) or {}
            ref = next((r for r in refs if r.device == info.get("rdma_device")
                        and r.port == info.get("rdma_port", r.port)), None)
            wanted.append((nd, info.get("rdma_device"), (ref.role, ref.index, "child") if ref is not None
                           else ("ipoib", nd, "")))
        for nd, dev, key in wanted:
            if nd and nd in netdevs and nd not in seen:
                seen.add(nd)
                out.append((nd, netdevs[nd].get("mtu"), dev, key))
        return out

    def rails(self, group):
        """{rail: [PortRef]} of a group's compute ports."""
        out = {}
        for ref in self.group_ports(group):
            out.setdefault(ref.rail, []).append(ref)
        return out

    def rails_without_sm(self):
        """{rail: [PortRef with a link]} of the InfiniBand rails where some port has a link and none sees an SM."""
        if "no_sm" not in self._refs:
            self._refs["no_sm"] = self._rails_without_sm()
        return self._refs["no_sm"]

    def _rails_without_sm(self):
        out = {}
        for rail, refs in sorted(self.rails("infiniband").items()):
            linked = [r for r in refs if r.link_up and r.get("link_layer") == "InfiniBand"]
            if linked and not any(r.get("sm_lid") for r in linked if r.get("state") in ("ACTIVE", "ARMED")):
                out[rail] = linked
        return out


def host_references(hosts, host, spec=None):
    """What ``host``'s ports are compared with where ``spec`` is silent, from the hosts of its group (``hosts``, as
    ``validate_hosts`` takes them: ``{name: {group, rdma}}``): ``{rate_gbps: {compute, storage}, width: {compute,
    storage} ("4X"), mtu: {netdev: MTU}}`` (None where the group has no value). The health role keeps these as the
    host's expected state: the fabric's values, not what one host has on a bad day."""
    return _references_of(Fabric(validate_hosts(hosts), validate_spec(spec or {})), host)


def every_host_references(hosts, spec=None):
    """``host_references`` of every host of ``hosts`` at once: ``{name: references}``. One fabric, its group values
    computed once (memoised), so a play's hosts cost O(hosts), not a fabric per host."""
    fabric = Fabric(validate_hosts(hosts), validate_spec(spec or {}))
    return dict((name, _references_of(fabric, name)) for name in fabric.order)


def _references_of(fabric, host):
    group = fabric.hosts[host]["group"]
    out = {"rate_gbps": {}, "width": {}, "mtu": {}}
    for role in CHECKED_ROLES:
        declared = fabric.spec["expected_rate_gbps" if role == "compute" else "expected_storage_rate_gbps"]
        out["rate_gbps"][role] = declared if declared is not None else fabric.reference("rate_gbps", group, role)
        lanes = fabric.reference("width", group, role)
        out["width"][role] = "%dX" % lanes if lanes else None
    for netdev, _mtu, _dev, key in fabric.host_netdevs(host):
        out["mtu"][netdev] = fabric.reference("mtu", group, key)
    return out


def board_of(dev):
    """The HCA's board (its PSID, board_id), else its hca_type: what firmware references are kept per."""
    return dev.get("board_id") or dev.get("hca_type") or "unknown"


def references_table(fabric):
    """What the checks compared with where the spec is silent, for the report: per group the compute ports' rate,
    width, MTU (``mtu``: every compute netdev; ``rail_mtu``: per rail), firmware per board, number of rails, and the
    storage ports' (``storage``, when the group has any)."""
    refs = {}
    for group in ("infiniband", "roce"):
        if not fabric.group_hosts(group):
            continue
        boards = sorted(set(board_of(r.dev) for r in fabric.group_ports(group, None) if r.dev is not None))
        width = fabric.reference("width", group)
        refs[group] = {
            "rate_gbps": fabric.spec["expected_rate_gbps"] if fabric.spec["expected_rate_gbps"] is not None
            else fabric.reference("rate_gbps", group),
            "width": fabric.spec["min_width"] or ("%dX" % width if width else None),
            "mtu": fabric.reference("mtu", group),
            "rail_mtu": dict((str(rail), fabric.reference("mtu", group, ("compute", rail, "port")))
                             for rail in sorted(fabric.rails(group))),
            "fw_ver": dict((b, fabric.reference("fw_ver", group, b)) for b in boards),
            "rails": len(fabric.rails(group)),
        }
        storage = sorted(set(r.index for r in fabric.group_ports(group, "storage")))
        if storage:
            width = fabric.reference("width", group, "storage")
            declared = fabric.spec["expected_storage_rate_gbps"]
            refs[group]["storage"] = {
                "ports": len(storage), "link_layer": fabric.reference("link_layer", group, "storage"),
                "rate_gbps": declared if declared is not None else fabric.reference("rate_gbps", group, "storage"),
                "width": "%dX" % width if width else None,
                "mtu": dict((str(i), fabric.reference("mtu", group, ("storage", i, "port"))) for i in storage),
            }
    if "roce" in refs:
        refs["roce"]["gid_index"] = dict((str(rail), fabric.reference("gid_index", "roce", rail))
                                         for rail in sorted(fabric.rails("roce")))
    if "infiniband" in refs:
        refs["infiniband"]["sm_lid"] = dict((str(rail), fabric.reference("sm_lid", "infiniband", rail))
                                            for rail in sorted(fabric.rails("infiniband")))
    return refs
