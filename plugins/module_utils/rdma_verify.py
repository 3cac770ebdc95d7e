# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Spec checks of an RDMA fabric: every host's ``ansible_facts.rdma`` compared with its group's expectations.

Pure Python (no Ansible imports). ``verify(hosts, spec)`` validates the input, runs every check of ``CHECKS`` on
every host (and the fabric-wide part of the checks that have one) and returns the findings, the per-host check
table and the verdict. A check is a small function ``check(fabric, host) -> Outcome``; ``CHECKS`` is the one place
that lists them, in report order.

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

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import parse_sminfo
from ansible_collections.hpcnet.rdma.plugins.module_utils.rdma_sysfs import card_port, natural_key

GROUP_LINK_LAYER = {"infiniband": "InfiniBand", "roce": "Ethernet"}
WIDTHS = ("1X", "2X", "4X", "8X", "12X")
# Every host needs these loaded for RDMA (user-space verbs and RDMA-CM included).
BASE_MODULES = ("mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "rdma_cm")
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
def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _opt_number(value, field, integer=False):
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = int(value) if integer else float(value)
        except ValueError:
            value = None
    if not _is_number(value) or value <= 0 or (integer and int(value) != value):
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
                                   "with devices; got %s" % (where, type(rdma).__name__ if rdma is not None else "null"))
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


def _width_lanes(width):
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
            return _most_common((_width_lanes(w) for w in widths), prefer_high=True)
        if kind == "mtu":
            return _most_common(mtu for h in self.group_hosts(group) for _nd, mtu, _dev in self.host_netdevs(h))
        if kind == "fw_ver":
            seen = {}
            for r in ports:
                if r.dev is not None and _board(r.dev) == sub:
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


def _board(dev):
    return dev.get("board_id") or dev.get("hca_type") or "unknown"


# ------------------------------------------------------------------------------------------------- the checks
_PORT_STATE_TEXT = {
    "Polling": ("no link: cable, transceiver or the switch port is down",
                "check the cable and the switch port; `ibstat {hca} {port}` / `mlxlink -d {hca} -p {port}`"),
    "Disabled": ("the port is disabled (by `ibportstate`, the SM, or the switch side)",
                 "enable the port (on the switch, or `ibportstate` from a host that sees the subnet); "
                 "`ibstat {hca} {port}` / `mlxlink -d {hca} -p {port}`"),
    "Disabled-Ethernet": ("the port is disabled: its netdev {netdev} is administratively down",
                          "`ip link set {netdev} up` and make it persistent in the host's network configuration"),
    "PortConfigurationTraining": ("the link is still training: a marginal cable or transceiver, or speeds that do "
                                  "not match on the two ends",
                                  "`mlxlink -d {hca} -p {port} -m -c` (cable, BER, speed); reseat or replace the "
                                  "cable; check the switch port's speed"),
    "LinkErrorRecovery": ("the link is recovering from errors: a marginal cable, transceiver or dirty connector",
                          "`mlxlink -d {hca} -p {port} -m -c` (BER, cable); clean, reseat or replace the cable"),
    "Sleep": ("the port is asleep (powered down)",
              "enable the port on the switch; `mlxlink -d {hca} -p {port}`"),
    "Phy Test": ("the port is in a physical test mode",
                 "take the port out of test mode (`mlxlink -d {hca} -p {port}`) or reset the HCA"),
    "INIT": ("no subnet manager has brought the port up",
             "start opensm on a host of this subnet (hpcnet.rdma.infiniband infiniband_sm), or check the SM's "
             "partition config; `sminfo -C {hca} -P {port}`"),
    "INIT-Ethernet": ("the link is up but the RDMA port is not active",
                      "`rdma link show {hca}/{port}`; reload the driver (`modprobe -r mlx5_ib && modprobe mlx5_ib`)"),
    "ARMED": ("the subnet manager configured the port but has not activated it (a sweep in progress, or the SM "
              "stopped half-way)",
              "wait for the next SM sweep, then check the SM's log (opensm.log); `sminfo -C {hca} -P {port}`"),
    "ACTIVE_DEFER": ("the port is recovering (ACTIVE_DEFER): a transient link problem",
                     "re-run the check; if it persists, `mlxlink -d {hca} -p {port} -m -c`"),
    "DOWN": ("the physical link is up but the logical port is down",
             "`ibstat {hca} {port}`; reset the port from the switch or reload the driver"),
}


def _state_text(ref, netdev):
    phys, state = ref.get("phys_state"), ref.get("state")
    eth = ref.get("link_layer") == "Ethernet"
    if phys != "LinkUp":
        key = phys if phys in _PORT_STATE_TEXT else "Polling"
        if phys == "Disabled" and eth and netdev:
            key = "Disabled-Ethernet"
    else:
        key = state if state in _PORT_STATE_TEXT else "DOWN"
        if state == "INIT" and eth:
            key = "INIT-Ethernet"
    cause, fix = _PORT_STATE_TEXT[key]
    values = {"hca": ref.device, "port": ref.port, "netdev": netdev}
    return cause.format(**values), fix.format(**values)


def check_port_state(fabric, host):
    """Every expected HCA and port exists, and is ACTIVE/LinkUp."""
    h = fabric.hosts[host]
    refs = fabric.ports[host]
    if not refs:
        return Outcome([finding(
            host, "error", "port_state", None, None, "an %s port" % h["link_layer"], "no %s port" % h["link_layer"],
            "the host has no RDMA port of its group's link layer: the HCAs are missing, their driver is not loaded, "
            "or the ports run the other link layer",
            "`rdma link` and `lspci -d 15b3:`; load mlx5_ib, or set the card's LINK_TYPE (hpcnet.rdma.firmware), or "
            "move the host to the right group")])
    out = []
    for ref in refs:
        if ref.dev is None:
            out.append(finding(host, "error", "port_state", ref.device, ref.port, "HCA %s present" % ref.device,
                               "absent", "the HCA is not an RDMA device on this host: the card is missing or "
                               "unseated, its driver (mlx5_core/mlx5_ib) is not loaded, or it has another name",
                               "`rdma link`, `lspci -d 15b3:` and `dmesg | grep -i mlx5`; fix the expected HCA list "
                               "(verify_hcas) if the name changed"))
        elif not ref.present:
            out.append(finding(host, "error", "port_state", ref.device, ref.port, "port %s" % ref.port, "absent",
                               "the HCA has no port %s" % ref.port,
                               "`rdma link show %s`; fix the expected HCA list (verify_hcas)" % ref.device))
        elif not ref.active:
            cause, fix = _state_text(ref, ref.get("netdev"))
            out.append(finding(host, "error", "port_state", ref.device, ref.port, "ACTIVE/LinkUp",
                               "%s/%s" % (ref.get("state"), ref.get("phys_state")), cause, fix))
    return Outcome(out)


def check_link_layer(fabric, host):
    """Every expected port runs the group's link layer (InfiniBand for infiniband, Ethernet for roce)."""
    h = fabric.hosts[host]
    refs = [r for r in fabric.ports[host] if r.present]
    if not refs:
        return SKIP
    out = []
    for ref in refs:
        found = ref.get("link_layer")
        if found == h["link_layer"]:
            continue
        wanted = "IB" if h["link_layer"] == "InfiniBand" else "ETH"
        other = "roce" if h["group"] == "infiniband" else "infiniband"
        n = card_port(ref.dev.get("pci_address"), 1)
        out.append(finding(
            host, "error", "link_layer", ref.device, ref.port, h["link_layer"], found,
            "the port runs %s but the host is in the %s group: the card's LINK_TYPE is not %s, or the host is in "
            "the wrong group" % (found, h["group"], wanted),
            "set LINK_TYPE_P%d=%s (hpcnet.rdma.firmware, or `mlxconfig -d %s set LINK_TYPE_P%d=%s`) and reboot, or "
            "move the host to the %s group" % (n, wanted, ref.dev.get("pci_address") or ref.device, n, wanted, other)))
    return Outcome(out)


def check_rate(fabric, host):
    """Every ACTIVE expected port runs at spec.expected_rate_gbps, or at the group's most common rate."""
    h = fabric.hosts[host]
    refs = [r for r in fabric.ports[host] if r.active and r.get("rate_gbps") is not None]
    declared = fabric.spec["expected_rate_gbps"]
    expected = declared if declared is not None else fabric.reference("rate_gbps", h["group"])
    if not refs or expected is None:
        return SKIP
    source = "spec (verify_expected_rate_gbps)" if declared is not None else "most common rate of the %s group" % (
        h["group"])
    out = []
    for ref in refs:
        rate = ref.get("rate_gbps")
        if rate < expected:
            out.append(finding(
                host, "error", "rate", ref.device, ref.port, "%g Gb/s (%s)" % (expected, source), "%g Gb/s" % rate,
                "the link trained below the expected rate: a cable or transceiver of a lower class, a switch port set "
                "to a lower speed, or link errors that forced a lower speed",
                "`mlxlink -d %s -p %s` (speed, cable type, errors); check the switch port's speed; use a cable rated "
                "for %g Gb/s" % (ref.device, ref.port, expected)))
        elif rate > expected:
            out.append(finding(
                host, "warning", "rate", ref.device, ref.port, "%g Gb/s (%s)" % (expected, source), "%g Gb/s" % rate,
                "the port runs faster than the %s: another card or fabric than the rest of the group; its peers "
                "limit it to their rate" % source,
                "if %g Gb/s is right for the whole group, set verify_expected_rate_gbps; otherwise check that this "
                "host belongs to the %s group" % (rate, h["group"])))
    return Outcome(out)


def check_width(fabric, host):
    """Every ACTIVE expected port has at least spec.min_width lanes (default: the group's most common width)."""
    h = fabric.hosts[host]
    refs = [r for r in fabric.ports[host] if r.active and _width_lanes(r.get("width"))]
    declared = fabric.spec["min_width"]
    lanes = _width_lanes(declared) if declared else fabric.reference("width", h["group"])
    if not refs or lanes is None:
        return SKIP
    source = "spec min_width" if declared else "most common width of the %s group" % h["group"]
    out = []
    for ref in refs:
        if _width_lanes(ref.get("width")) < lanes:
            out.append(finding(
                host, "error", "width", ref.device, ref.port, "%dX or more (%s)" % (lanes, source), ref.get("width"),
                "the link came up with fewer lanes than expected: a damaged cable, a failed lane in the transceiver, "
                "or a dirty connector",
                "`mlxlink -d %s -p %s -m -c` (lanes, BER, cable); clean, reseat or replace the cable or transceiver"
                % (ref.device, ref.port)))
    return Outcome(out)


def check_mtu(fabric, host):
    """The MTU of the RoCE / IPoIB netdevs is expect.mtu (error), or the group's most common MTU (warning)."""
    h = fabric.hosts[host]
    netdevs = fabric.host_netdevs(host)
    expected = h["mtu"] if h["mtu"] is not None else fabric.reference("mtu", h["group"])
    if not netdevs or expected is None:
        return SKIP
    declared = h["mtu"] is not None
    out = []
    for nd, mtu, dev in netdevs:
        if mtu == expected:
            continue
        out.append(finding(
            host, "error" if declared else "warning", "mtu", dev, _netdev_port(h, nd),
            "%d (%s)" % (expected, "declared" if declared else "most common MTU of the %s group" % h["group"]),
            "%s on %s" % (mtu, nd),
            "the MTU of %s differs from %s: RoCE and RDMA-CM derive the path MTU from it, so traffic runs with smaller "
            "packets (less bandwidth), and IP peers with a larger MTU lose their large packets"
            % (nd, "the declared one" if declared else "the rest of the group"),
            "`ip link set %s mtu %d` and make it persistent (hpcnet.rdma.roce roce_mtu, or the IPoIB settings of "
            "hpcnet.rdma.infiniband); the switch ports must allow it too" % (nd, expected)))
    return Outcome(out)


def _netdev_port(h, netdev):
    return ((h["rdma"].get("netdevs") or {}).get(netdev) or {}).get("rdma_port")


def check_firmware(fabric, host):
    """Each expected HCA runs spec.expected_fw_ver (error) or the group's most common firmware of its board (warning)."""
    h = fabric.hosts[host]
    seen = []
    for ref in fabric.ports[host]:
        if ref.dev is not None and ref.dev.get("fw_ver") and ref.device not in [s.device for s in seen]:
            seen.append(ref)
    if not seen:
        return SKIP
    declared = fabric.spec["expected_fw_ver"]
    out = []
    for ref in seen:
        board = _board(ref.dev)
        if isinstance(declared, dict):
            wanted = declared.get(board) or declared.get(ref.dev.get("hca_type") or "")
        else:
            wanted = declared
        source = "declared"
        if not wanted:
            wanted, source = fabric.reference("fw_ver", h["group"], board), "most common on %s cards of the %s group" % (
                board, h["group"])
        found = ref.dev.get("fw_ver")
        if wanted is None or found == wanted:
            continue
        out.append(finding(
            host, "error" if source == "declared" else "warning", "firmware", ref.device, None,
            "%s (%s)" % (wanted, source), found,
            "the HCA runs firmware %s where %s is expected: mixed firmware gives different link behaviour, defaults "
            "and bugs across the fabric" % (found, wanted),
            "update %s to %s (hpcnet.rdma.firmware, or `mlxfwmanager -u`), then reset the card (`mlxfwreset`) or "
            "reboot" % (ref.device, wanted)))
    return Outcome(out)


def check_gid_index(fabric, host):
    """RoCE hosts: each rail's RoCE v2 IPv4 GID index exists and is the same on every RoCE host."""
    h = fabric.hosts[host]
    if h["group"] != "roce":
        return SKIP
    refs = [r for r in fabric.ports[host] if r.present and r.get("link_layer") == "Ethernet"]
    if not refs:
        return SKIP
    out = []
    for ref in refs:
        nd = ref.get("netdev") or "its netdev"
        found = ref.get("roce_v2_ipv4_gid_index")
        if found is None:
            out.append(finding(
                host, "error", "gid_index", ref.device, ref.port, "a RoCE v2 GID with an IPv4 address",
                "none",
                "no RoCE v2 GID with an IPv4 address on %s: the interface has no IPv4 address or is down; NCCL and "
                "perftest fall back to RoCE v1 or a link-local GID and cannot reach the other hosts" % nd,
                "give %s its IPv4 address (hpcnet.rdma.roce roce_addresses) and check `show_gids %s`" % (
                    nd, ref.device)))
            continue
        wanted = fabric.reference("gid_index", "roce", ref.rail)
        if wanted is not None and found != wanted:
            # a warning: each host's own nccl.conf carries its own index (hpcnet.rdma.nccl), which works; the job
            # breaks only when one NCCL_IB_GID_INDEX is forced on every rank (launcher environment, container image)
            out.append(finding(
                host, "warning", "gid_index", ref.device, ref.port,
                "%d (rail %d on the other RoCE hosts)" % (wanted, ref.rail), found,
                "the RoCE v2 IPv4 GID is at index %d here but at %d on the other RoCE hosts: per-host nccl.conf "
                "files work, but one NCCL_IB_GID_INDEX for the whole job (launcher environment, container image) "
                "picks a wrong GID (IPv6, link-local or RoCE v1) on this host, and its QPs do not connect"
                % (found, wanted),
                "give %s the same address layout as the other hosts (one IPv4 address, the same IPv6 addresses), or "
                "leave NCCL_IB_GID_INDEX unset (NCCL 2.21+ finds the GID itself); `show_gids %s`" % (nd, ref.device)))
    return Outcome(out)


def _qos_diffs(qos):
    """[(netdev or None, sorted changed keys, failed msg or None)] of a roce_qos result (one result, a loop's
    ``results``, or a {netdev: result} map)."""
    if "results" in qos and isinstance(qos["results"], list):
        items = [(r.get("item") if isinstance(r.get("item"), str) else None, r) for r in qos["results"]]
    elif "changed" in qos or "diff" in qos or "failed" in qos:
        diff = qos.get("diff") or {}
        if isinstance(diff, dict) and diff and all(isinstance(v, dict) and set(v) <= {"before", "after"}
                                                   for v in diff.values()) and not set(diff) <= {"before", "after"}:
            items = [(nd, {"changed": bool(qos.get("changed")) and bool(d.get("before") or d.get("after")),
                           "diff": d}) for nd, d in diff.items()]
        else:
            items = [(None, qos)]
    else:
        items = [(nd, r) for nd, r in qos.items() if isinstance(r, dict)]
    out = []
    for nd, res in items:
        if res.get("failed"):
            out.append((nd, [], res.get("msg") or "failed"))
        elif res.get("changed"):
            diff = res.get("diff") or {}
            if isinstance(diff, list):
                diff = diff[0] if diff else {}
            keys = sorted(set((diff.get("before") or {})) | set((diff.get("after") or {}))) if isinstance(
                diff, dict) else []
            out.append((nd, keys, None))
    return out


def check_roce_qos(fabric, host):
    """RoCE hosts: the QoS state (trust, PFC, DSCP map, ToS, ECN...) is the declared roce profile (roce_qos in check
    mode reports no change)."""
    h = fabric.hosts[host]
    if h["group"] != "roce" or h["roce_qos"] is None:
        return SKIP
    netdevs = h["rdma"].get("netdevs") or {}
    out = []
    for nd, keys, failed in _qos_diffs(h["roce_qos"]):
        info = netdevs.get(nd) or {}
        where = (" on %s" % nd) if nd else ""
        if failed:
            out.append(finding(
                host, "warning", "roce_qos", info.get("rdma_device"), info.get("rdma_port"),
                "the declared roce profile", "not compared: %s" % failed,
                "the QoS state%s could not be read: %s" % (where, failed),
                "run the hpcnet.rdma.roce role in check mode on this host and fix what it reports"))
            continue
        what = ", ".join(keys) if keys else "unknown settings"
        out.append(finding(
            host, "error", "roce_qos", info.get("rdma_device"), info.get("rdma_port"), "the declared roce profile",
            "differs in %s%s" % (what, where),
            "the QoS state%s is not the declared roce profile (%s): RoCE traffic can be dropped (PFC), land on "
            "another priority (trust, DSCP map, ToS) or lose its congestion control (ECN/DCQCN)" % (where, what),
            "re-run the hpcnet.rdma.roce role on this host (tag roce_configure); `--check --diff` shows the "
            "changes"))
    return Outcome(out)


def check_subnet_manager(fabric, host):
    """InfiniBand hosts: every ACTIVE port has a LID and an SM LID, and sees the rail's usual SM; a rail where no
    port sees an SM fails every host on it (one fabric finding, from fabric_subnet_manager)."""
    h = fabric.hosts[host]
    if h["group"] != "infiniband":
        return SKIP
    refs = [r for r in fabric.ports[host] if r.present and r.get("link_layer") == "InfiniBand"]
    if not refs:
        return SKIP
    no_sm = fabric.rails_without_sm()
    out = []
    failed = False
    ran = False
    for ref in refs:
        if ref.rail in no_sm and ref in no_sm[ref.rail]:
            failed = True
            continue
        if not ref.active:
            continue
        ran = True
        lid, sm_lid = ref.get("lid"), ref.get("sm_lid")
        if not lid or not sm_lid:
            out.append(finding(
                host, "error", "subnet_manager", ref.device, ref.port, "LID and SM LID assigned",
                "LID %s, SM LID %s" % (lid, sm_lid),
                "the port is ACTIVE but has no %s: the SM that configured it is gone, or it never assigned one" % (
                    "LID" if not lid else "SM LID"),
                "`sminfo -C %s -P %s` and the SM's log; restart opensm on this subnet (hpcnet.rdma.infiniband "
                "infiniband_sm)" % (ref.device, ref.port)))
            continue
        # the SM at the port's SM LID (sminfo without a LID asks that one) must be the master: after a handover
        # opensm's first sweep can be a light one that leaves every port naming the old master (a stale master)
        answer = h["sminfo"].get("%s:%s" % (ref.device, ref.port)) or {}
        if answer.get("state_name") and answer["state_name"] != "MASTER":
            out.append(finding(
                host, "error", "subnet_manager", ref.device, ref.port, "SM LID %d is the master SM" % sm_lid,
                "SM LID %d is an SM in %s (priority %d, GUID %s)" % (
                    sm_lid, answer["state_name"], answer["priority"], answer["guid"]),
                "this port's SM LID names an SM that is not master: the SM that is master did not write its LID to "
                "the port (after a handover opensm can sweep lightly and leave every port of the rail naming the old "
                "master), so traps and SA queries from this port go to an SM that does not act on them",
                "force a heavy sweep by the master: restart its opensm (`systemctl restart opensm@<port GUID>` on the "
                "master's host; `sminfo -C %s -P %s <LID>` on each SM's LID finds it); `sminfo -C %s -P %s` here "
                "then names a MASTER" % (ref.device, ref.port, ref.device, ref.port)))
            continue
        usual = fabric.reference("sm_lid", "infiniband", ref.rail)
        if usual is not None and sm_lid != usual:
            out.append(finding(
                host, "warning", "subnet_manager", ref.device, ref.port,
                "SM LID %d (rail %d on most hosts)" % (usual, ref.rail), "SM LID %d" % sm_lid,
                "this port sees another SM than the rest of rail %d: it is cabled to another subnet, or an SM "
                "failover is in progress" % ref.rail,
                "check the cabling of rail %d (`iblinkinfo`, `ibnetdiscover`) and `sminfo -C %s -P %s` here and on "
                "another host" % (ref.rail, ref.device, ref.port)))
    if not out and not failed and not ran:
        return SKIP
    return Outcome(out, failed=failed)


def fabric_subnet_manager(fabric):
    """One finding per InfiniBand rail where no port sees an SM master."""
    out = []
    for rail, refs in sorted(fabric.rails_without_sm().items()):
        names = sorted(set(r.device for r in refs), key=natural_key)
        hosts = ", ".join("%s:%s" % (r.host, r.device) for r in refs)
        out.append(finding(
            FABRIC, "error", "subnet_manager", names[0] if len(names) == 1 else None, None,
            "an SM master on the subnet of rail %d" % rail, "no port of rail %d sees an SM (%s)" % (rail, hosts),
            "no subnet manager runs on the subnet of rail %d: its ports stay INIT and carry no traffic" % rail,
            "run opensm on one host of each rail (hpcnet.rdma.infiniband: infiniband_sm, infiniband_sm_devices) or "
            "enable the switch's SM; `sminfo -C %s -P 1` then shows the master" % names[0]))
    return out


def check_ipoib(fabric, host):
    """The expected IPoIB netdevs (expect.ipoib) exist and are up."""
    h = fabric.hosts[host]
    if not h["ipoib"]:
        return SKIP
    netdevs = h["rdma"].get("netdevs") or {}
    out = []
    for nd in h["ipoib"]:
        info = netdevs.get(nd)
        if info is None:
            out.append(finding(
                host, "error", "ipoib", None, None, "%s up" % nd, "absent",
                "there is no netdev %s: ib_ipoib is not loaded, or the interface (or its P_Key child) was not "
                "created" % nd,
                "`modprobe ib_ipoib`; create the interface with hpcnet.rdma.infiniband (infiniband_ipoib)"))
        elif info.get("operstate") != "up":
            out.append(finding(
                host, "error", "ipoib", info.get("rdma_device"), info.get("rdma_port"), "%s up" % nd,
                "%s %s" % (nd, info.get("operstate")),
                "the IPoIB interface %s is not up: its IB port is not ACTIVE, or the interface is administratively "
                "down" % nd,
                "`ip link set %s up`; check its port with `ibstat %s`" % (nd, info.get("rdma_device") or "")))
    return Outcome(out)


def check_memlock(fabric, host):
    """The locked-memory limit (RLIMIT_MEMLOCK, soft) is expect.memlock (unlimited by default) or more."""
    h = fabric.hosts[host]
    memlock = h["rdma"].get("memlock") or {}
    soft = memlock.get("soft")
    if soft is None:
        return SKIP
    wanted = h["memlock"]
    if soft == "unlimited" or (wanted != "unlimited" and _is_number(soft) and soft >= wanted):
        return Outcome()
    return Outcome([finding(
        host, "error", "memlock", None, None, wanted if wanted == "unlimited" else ">= %d bytes" % wanted,
        soft if not _is_number(soft) else "%d bytes" % soft,
        "the locked-memory limit (RLIMIT_MEMLOCK) is %s: RDMA pins the memory it registers, so NCCL, MPI and "
        "perftest fail to register their buffers (ibv_reg_mr: Cannot allocate memory)" % (
            soft if not _is_number(soft) else "%d bytes" % soft),
        "set memlock unlimited in /etc/security/limits.d and DefaultLimitMEMLOCK=infinity for services "
        "(hpcnet.rdma.rdma_host rdma_host_memlock), then log in again and restart the job services (slurmd)")])


_MODULE_TEXT = {
    "mlx5_core": ("the ConnectX driver is not loaded: no HCA is usable",
                  "`modprobe mlx5_core`; if it fails, `dmesg | grep -i mlx5` (a driver that does not match the kernel: "
                  "hpcnet.rdma.ofed)"),
    "mlx5_ib": ("the RDMA side of the ConnectX driver is not loaded: the HCAs have no RDMA device",
                "`modprobe mlx5_ib`; if it fails, `dmesg | grep -i mlx5` (hpcnet.rdma.ofed)"),
    "ib_core": ("the RDMA core is not loaded: no RDMA device can exist",
                "`modprobe ib_core`; if it fails, `dmesg` (a driver stack that does not match the kernel: "
                "hpcnet.rdma.ofed)"),
    "ib_uverbs": ("user-space verbs are unavailable (/dev/infiniband/uverbs*): NCCL, MPI and perftest cannot open "
                  "the HCA",
                  "`modprobe ib_uverbs`; make it load at boot (hpcnet.rdma.rdma_host rdma_host_modules)"),
    "rdma_cm": ("RDMA-CM is unavailable: tools that connect through it (perftest -R, UCX rdmacm, NFS over RDMA) fail",
                "`modprobe rdma_cm rdma_ucm`; make them load at boot (hpcnet.rdma.rdma_host rdma_host_modules)"),
    "ib_ipoib": ("IPoIB is unavailable: the IPoIB interfaces this host expects cannot exist",
                 "`modprobe ib_ipoib`; make it load at boot (hpcnet.rdma.rdma_host rdma_host_ipoib)"),
}


def required_modules(h):
    mods = list(BASE_MODULES)
    if h["group"] == "infiniband" and h["ipoib"]:
        mods.append("ib_ipoib")
    return mods


def check_kernel_modules(fabric, host):
    """mlx5_core, mlx5_ib, ib_core, ib_uverbs and rdma_cm are loaded (and ib_ipoib on IB hosts that expect IPoIB)."""
    h = fabric.hosts[host]
    loaded = h["rdma"].get("kernel_modules")
    if not isinstance(loaded, dict):
        return SKIP
    out = []
    for mod in required_modules(h):
        if not loaded.get(mod):
            cause, fix = _MODULE_TEXT[mod]
            out.append(finding(host, "error", "kernel_modules", None, None, "%s loaded" % mod, "%s not loaded" % mod,
                               cause, fix))
    return Outcome(out)


def check_gdr(fabric, host):
    """Where GPUDirect RDMA is expected (expect.gdr), nvidia_peermem is loaded."""
    h = fabric.hosts[host]
    if not h["gdr"]:
        return SKIP
    if (h["rdma"].get("kernel_modules") or {}).get("nvidia_peermem"):
        return Outcome()
    return Outcome([finding(
        host, "error", "gdr", None, None, "nvidia_peermem loaded", "nvidia_peermem not loaded",
        "GPUDirect RDMA (GDR) is unavailable: NCCL copies through host memory",
        "modprobe nvidia_peermem; make it load at boot (hpcnet.rdma.rdma_host)")])


class Check:
    def __init__(self, name, host, fabric=None):
        self.name = name
        self.host = host
        self.fabric = fabric
        self.description = (host.__doc__ or "").strip()


# The one list of checks, in report order. ``host`` runs per host; ``fabric`` (optional) once for the fabric.
CHECKS = (
    Check("port_state", check_port_state),
    Check("link_layer", check_link_layer),
    Check("rate", check_rate),
    Check("width", check_width),
    Check("mtu", check_mtu),
    Check("firmware", check_firmware),
    Check("gid_index", check_gid_index),
    Check("roce_qos", check_roce_qos),
    Check("subnet_manager", check_subnet_manager, fabric_subnet_manager),
    Check("ipoib", check_ipoib),
    Check("memlock", check_memlock),
    Check("kernel_modules", check_kernel_modules),
    Check("gdr", check_gdr),
)
CHECK_NAMES = tuple(c.name for c in CHECKS)


def _references(fabric):
    """What the checks compared with where the spec is silent, for the report."""
    refs = {}
    for group in ("infiniband", "roce"):
        if not fabric.group_hosts(group):
            continue
        boards = sorted(set(_board(r.dev) for r in fabric.group_ports(group) if r.dev is not None))
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


def verify(hosts, spec=None):
    """Run every check. Returns {verdict, hosts: {host: {group, verdict, checks, errors, warnings}}, findings,
    references, summary}. Raises VerifyInputError on bad input (before any check runs)."""
    fabric = Fabric(validate_hosts(hosts), validate_spec(spec))
    findings = []
    table = dict((name, {"group": fabric.hosts[name]["group"], "checks": {}}) for name in fabric.order)
    for check in CHECKS:
        if check.fabric is not None:
            findings.extend(check.fabric(fabric))
    per_host = []
    for name in fabric.order:
        failed = False
        for check in CHECKS:
            outcome = check.host(fabric, name)
            table[name]["checks"][check.name] = outcome.status
            per_host.extend(outcome.findings)
            failed = failed or outcome.failed
        mine = outcome_findings(per_host, name)
        table[name]["errors"] = sum(1 for f in mine if f["severity"] == "error")
        table[name]["warnings"] = sum(1 for f in mine if f["severity"] == "warning")
        table[name]["verdict"] = "fail" if table[name]["errors"] or failed else "pass"
    findings.extend(per_host)
    errors = sum(1 for f in findings if f["severity"] == "error")
    warnings = sum(1 for f in findings if f["severity"] == "warning")
    return {
        "verdict": "fail" if errors else "pass",
        "hosts": table,
        "findings": findings,
        "references": _references(fabric),
        "summary": {"hosts": len(fabric.order), "errors": errors, "warnings": warnings,
                    "failed_hosts": [n for n in fabric.order if table[n]["verdict"] == "fail"]},
    }


def outcome_findings(findings, host):
    return [f for f in findings if f["host"] == host]


def summary_message(result):
    s = result["summary"]
    if result["verdict"] == "pass":
        return "rdma_verify: %d host(s) pass the spec checks (%d warning(s))" % (s["hosts"], s["warnings"])
    return "rdma_verify: %d error(s), %d warning(s); failing: %s" % (
        s["errors"], s["warnings"], ", ".join(s["failed_hosts"]) or FABRIC)
