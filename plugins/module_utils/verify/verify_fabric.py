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
- a host's *ports* are the ports its group expects: ``expect.devices`` (``mlx5_0`` = every port of the HCA,
  ``mlx5_0:1`` = that port) in the order given, or every port of the group's link layer (InfiniBand for the
  infiniband group, Ethernet for roce), HCAs in natural order (mlx5_2 before mlx5_10);
- the *rail* of a port is its position in that list (rail 0 = the first HCA). On InfiniBand a rail is a subnet;
- a *reference* is what a value should be when the spec does not say: the most common value in the group (ties go to
  the higher rate, width, MTU and firmware version, and to the lower GID index).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import Counter

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband.infiniband import parse_sminfo
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import GROUP_LINK_LAYER

WIDTHS = ("1X", "2X", "4X", "8X", "12X")
SEVERITIES = ("error", "warning")
STATUSES = ("pass", "fail", "skip")
FABRIC = "fabric"          # the ``host`` of a finding about the whole fabric (a rail with no SM)

HOST_KEYS = ("group", "rdma", "roce_qos", "expect", "sminfo")
EXPECT_KEYS = ("devices", "gdr", "ipoib", "mtu", "memlock")
SPEC_KEYS = ("expected_rate_gbps", "min_width", "expected_fw_ver")
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
    width = spec.get("min_width")
    if width in ("", None):
        width = None
    elif str(width).upper() not in WIDTHS:
        raise VerifyInputError("spec.min_width must be one of %s or null; got %r" % (", ".join(WIDTHS), width))
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
    return {
        "expected_rate_gbps": _opt_number(spec.get("expected_rate_gbps"), "spec.expected_rate_gbps"),
        "min_width": str(width).upper() if width else None,
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
        expect = entry.get("expect") or {}
        if not isinstance(expect, dict):
            raise VerifyInputError("%s.expect must be a dict; got %s" % (where, type(expect).__name__))
        _unknown_keys(expect, EXPECT_KEYS, where + ".expect")
        ipoib = expect.get("ipoib") or []
        if not isinstance(ipoib, (list, tuple)) or not all(isinstance(v, str) and v for v in ipoib):
            raise VerifyInputError("%s.expect.ipoib must be a list of netdev names; got %r" % (where, ipoib))
        out[str(name)] = {
            "name": str(name), "group": group, "link_layer": GROUP_LINK_LAYER[group], "rdma": rdma, "roce_qos": qos,
            "sminfo": _sminfo(entry.get("sminfo"), where + ".sminfo"),
            "devices": _device_list(expect.get("devices"), where + ".expect.devices"),
            "gdr": _bool(expect.get("gdr"), where + ".expect.gdr"),
            "ipoib": list(ipoib),
            "mtu": _opt_number(expect.get("mtu"), where + ".expect.mtu", integer=True),
            "memlock": _memlock(expect.get("memlock"), where + ".expect.memlock"),
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
    """One port a host's group expects (``facts`` None when the HCA or the port is absent)."""

    def __init__(self, host, rail, device, port, dev_facts, facts):
        self.host = host
        self.rail = rail
        self.device = device
        self.port = port
        self.dev = dev_facts
        self.facts = facts

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
    """The normalised hosts, the spec, each host's expected ports, and the group references (computed once)."""

    def __init__(self, hosts, spec):
        self.hosts = hosts
        self.spec = spec
        self.order = sorted(hosts, key=natural_key)
        self.ports = dict((name, self._select_ports(hosts[name])) for name in self.order)
        self._refs = {}

    def _select_ports(self, host):
        devices = host["rdma"].get("devices") or {}
        refs = []
        if host["devices"] is not None:
            for name, port in host["devices"]:
                dev = devices.get(name)
                ports = (dev or {}).get("ports") or {}
                numbers = [port] if port is not None else sorted((int(p) for p in ports), key=int) or [1]
                for number in numbers:
                    refs.append((name, number, dev, ports.get(str(number)) if dev is not None else None))
        else:
            for name in sorted(devices, key=natural_key):
                ports = devices[name].get("ports") or {}
                for number in sorted(ports, key=int):
                    if ports[number].get("link_layer") == host["link_layer"]:
                        refs.append((name, int(number), devices[name], ports[number]))
        return [PortRef(host["name"], rail, name, number, dev, facts)
                for rail, (name, number, dev, facts) in enumerate(refs)]

    def group_hosts(self, group):
        return [h for h in self.order if self.hosts[h]["group"] == group]

    def group_ports(self, group):
        for name in self.group_hosts(group):
            yield from self.ports[name]

    def reference(self, kind, group, sub=None):
        """The group's most common value of ``kind`` (rate_gbps, width, mtu, fw_ver per board, gid_index and sm_lid
        per rail), memoised."""
        key = (kind, group, sub)
        if key not in self._refs:
            self._refs[key] = self._compute_reference(kind, group, sub)
        return self._refs[key]

    def _compute_reference(self, kind, group, sub):
        ports = list(self.group_ports(group))
        if kind == "rate_gbps":
            return _most_common(r.get("rate_gbps") for r in ports if r.active)
        if kind == "width":
            widths = [r.get("width") for r in ports if r.active]
            return _most_common((width_lanes(w) for w in widths), prefer_high=True)
        if kind == "mtu":
            return _most_common(mtu for h in self.group_hosts(group) for _nd, mtu, _dev in self.host_netdevs(h))
        if kind == "fw_ver":
            seen = {}
            for r in ports:
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
        """[(netdev, mtu, device)] of the host's expected ports and expected IPoIB netdevs that exist."""
        host = self.hosts[name]
        netdevs = host["rdma"].get("netdevs") or {}
        out, seen = [], set()
        wanted = [(r.get("netdev"), r.device) for r in self.ports[name] if r.present]
        wanted += [(nd, (netdevs.get(nd) or {}).get("rdma_device")) for nd in host["ipoib"]]
        for nd, dev in wanted:
            if nd and nd in netdevs and nd not in seen:
                seen.add(nd)
                out.append((nd, netdevs[nd].get("mtu"), dev))
        return out

    def rails(self, group):
        """{rail: [PortRef]} of a group."""
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


def board_of(dev):
    """The HCA's board (its PSID, board_id), else its hca_type: what firmware references are kept per."""
    return dev.get("board_id") or dev.get("hca_type") or "unknown"


def references_table(fabric):
    """What the checks compared with where the spec is silent, for the report."""
    refs = {}
    for group in ("infiniband", "roce"):
        if not fabric.group_hosts(group):
            continue
        boards = sorted(set(board_of(r.dev) for r in fabric.group_ports(group) if r.dev is not None))
        width = fabric.reference("width", group)
        refs[group] = {
            "rate_gbps": fabric.spec["expected_rate_gbps"] if fabric.spec["expected_rate_gbps"] is not None
            else fabric.reference("rate_gbps", group),
            "width": fabric.spec["min_width"] or ("%dX" % width if width else None),
            "mtu": fabric.reference("mtu", group),
            "fw_ver": dict((b, fabric.reference("fw_ver", group, b)) for b in boards),
            "rails": len(fabric.rails(group)),
        }
    if "roce" in refs:
        refs["roce"]["gid_index"] = dict((str(rail), fabric.reference("gid_index", "roce", rail))
                                         for rail in sorted(fabric.rails("roce")))
    if "infiniband" in refs:
        refs["infiniband"]["sm_lid"] = dict((str(rail), fabric.reference("sm_lid", "infiniband", rail))
                                            for rail in sorted(fabric.rails("infiniband")))
    return refs
