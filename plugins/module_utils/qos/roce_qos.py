# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RoCE QoS of one netdev: read the whole state, plan the changes to a desired state, apply the plan.

Where each setting lives (the same on every host; ``<root>`` is the sysfs root, ``/sys`` on a real host):

================  ==========================================================================================
trust, pfc,       backend ``mlnx_qos`` (MLNX_OFED / DOCA, mlnx-tools): ``mlnx_qos -i <if>`` reads, ``--trust``,
dscp2prio         ``--pfc`` and ``--dscp2prio set,<dscp>,<prio>`` write (``--trust`` and ``--dscp2prio`` never
                  in one call). Backend ``dcb`` (iproute2): ``dcb -j apptrust|pfc|app show dev <if>`` reads,
                  ``dcb apptrust set``, ``dcb pfc set`` and ``dcb app replace ... dscp-prio`` write.
ecn, cnp_dscp,    MLNX_OFED / DOCA sysfs ``<root>/class/net/<if>/ecn/roce_np|roce_rp/...``. Inbox kernels have
cnp_priority,     none: there ECN per priority and the CNP DSCP / priority are firmware settings
dcqcn             (``ROCE_CC_PRIO_MASK_P<n>``, ``CNP_DSCP_P<n>``, ``CNP_802P_PRIO_P<n>``), reported in ``firmware``
                  and never changed here.
traffic_class     MLNX_OFED ``<root>/class/infiniband/<dev>/tc/<port>/traffic_class`` (write a number, reads back
                  ``Global tclass=N``).
roce_tos,         RDMA-CM configfs ``<root>/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos`` and
roce_mode         ``default_roce_mode``; the ``<dev>`` directory is created first, as ``cma_roce_tos`` does.
global_pause      ``ethtool -a <if>`` reads, ``ethtool -A <if> rx off tx off`` writes.
================  ==========================================================================================

The plan orders the steps so that the port is never left in a harmful half state: link-level pause goes off before
PFC goes on (and back on only after PFC is off), the DSCP map is complete before trust switches to DSCP, and ECN /
CNP settings follow PFC. A failed step raises ``QosApplyError`` naming the steps already applied; a re-run reads
the state again and converges.
"""

from __future__ import absolute_import, division, print_function

import os
import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import dcb_tools, qos_errors, qos_tools
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import SysfsError, card_port, gather_rdma_sysfs, read_attr

__metaclass__ = type

BACKENDS = ("auto", "mlnx_qos", "dcb")
TRUST = ("dscp", "pcp")
ROCE_MODES = {"v1": qos_tools.ROCE_MODE_V1, "v2": qos_tools.ROCE_MODE_V2}
# Every key of `before` / `after`, in the order the plan applies them.
STATE_KEYS = ("global_pause", "dscp2prio", "trust", "pfc", "ecn", "cnp_dscp", "cnp_priority", "dcqcn",
              "traffic_class", "roce_mode", "roce_tos")
SETTINGS = ("trust", "pfc", "dscp2prio", "ecn", "cnp_dscp", "cnp_priority", "dcqcn", "traffic_class", "roce_tos",
            "roce_mode", "global_pause")

# DCQCN parameters by their MLNX_OFED names: (point, minimum, maximum, unit). None as maximum means the port's line
# rate in Mb/s. Source: NVIDIA, "DCQCN CC Parameters" (DOCA 3.4 documentation) and MLNX_OFED's "DCQCN Parameters".
DCQCN = {
    "clamp_tgt_rate": ("roce_rp", 0, 1, "flag"),
    "clamp_tgt_rate_after_time_inc": ("roce_rp", 0, 1, "flag"),
    "dce_tcp_g": ("roce_rp", 0, 1023, "fixed point, 10 fraction bits"),
    "dce_tcp_rtt": ("roce_rp", 1, 131071, "us"),
    "initial_alpha_value": ("roce_rp", 1, 1023, "fixed point, 10 fraction bits"),
    "rate_reduce_monitor_period": ("roce_rp", 1, 4294967295, "us"),
    "rate_to_set_on_first_cnp": ("roce_rp", 0, None, "Mb/s"),
    "rpg_ai_rate": ("roce_rp", 1, None, "Mb/s"),
    "rpg_byte_reset": ("roce_rp", 0, 32767, "64-byte units"),
    "rpg_gd": ("roce_rp", 1, 15, "log2 shift"),
    "rpg_hai_rate": ("roce_rp", 1, None, "Mb/s"),
    "rpg_max_rate": ("roce_rp", 0, None, "Mb/s (0: line rate)"),
    "rpg_min_dec_fac": ("roce_rp", 0, 100, "%"),
    "rpg_min_rate": ("roce_rp", 1, None, "Mb/s"),
    "rpg_threshold": ("roce_rp", 1, 31, "count"),
    "rpg_time_reset": ("roce_rp", 1, 131071, "us"),
    "min_time_between_cnps": ("roce_np", 0, 4095, "us"),
}
FIRMWARE_ONLY = ("ecn", "cnp_dscp", "cnp_priority", "dcqcn")


class QosError(Exception):
    """A problem found before anything changed (bad input, missing netdev or tool)."""


def firmware_params(card_port, want):
    """The mlxconfig parameters (``ROCE_CC_PRIO_MASK_P<n>``, ``CNP_DSCP_P<n>``, ``CNP_802P_PRIO_P<n>``, DCQCN
    ``RPG_*_P<n>`` ...) that hold ``want``'s ECN, CNP and DCQCN settings in the firmware of card port ``card_port``."""
    out = {}
    suffix = "_P%d" % card_port
    if want.get("ecn") is not None:
        out["ROCE_CC_PRIO_MASK" + suffix] = sum(1 << p for p in set(want["ecn"]))
    if want.get("cnp_dscp") is not None:
        out["CNP_DSCP" + suffix] = want["cnp_dscp"]
    if want.get("cnp_priority") is not None:
        out["CNP_802P_PRIO" + suffix] = want["cnp_priority"]
    if want.get("dcqcn"):
        out.update(("%s%s" % (param.upper(), suffix), value) for param, value in want["dcqcn"].items())
    return out


class QosApplyError(Exception):
    """A step failed; ``applied`` lists the steps that did take effect."""

    def __init__(self, message, applied):
        super(QosApplyError, self).__init__(message)
        self.applied = applied


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _prios(name, value):
    if not isinstance(value, list) or not all(_is_int(p) and 0 <= p <= 7 for p in value):
        return ["%s must be a list of priorities 0-7; got %r" % (name, value)]
    return []


def int_range_error(name, value, low, high):
    """The message for a value that is not an integer ``low``-``high``, or None (one wording for module and role)."""
    if _is_int(value) and low <= value <= high:
        return None
    return "%s must be an integer %d-%d; got %r" % (name, low, high, value)


def validate(desired, line_rate_mbps=None, names=None):
    """Range and consistency errors of the desired settings (types come from the module's argument spec).

    ``names`` maps a setting to the name the user gave it (the roce role passes ``{"pfc": "roce_pfc_priorities",
    ...}``), so that each message names the variable that was set."""
    name = dict((key, key) for key in SETTINGS)
    name.update(names or {})
    errors = []
    if desired.get("trust") is not None and desired["trust"] not in TRUST:
        errors.append("%s must be one of: %s; got %r" % (name["trust"], ", ".join(TRUST), desired["trust"]))
    for key in ("pfc", "ecn"):
        if desired.get(key) is not None:
            errors += _prios(name[key], desired[key])
    for dscp, prio in sorted((desired.get("dscp2prio") or {}).items(), key=lambda kv: str(kv[0])):
        if not (re.match(r"^[0-9]{1,2}$", str(dscp)) and int(dscp) <= 63) or not (_is_int(prio) and 0 <= prio <= 7):
            errors.append("%s maps a DSCP 0-63 to a priority 0-7; got %r: %r" % (name["dscp2prio"], dscp, prio))
    for key, low, high in (("cnp_dscp", 0, 63), ("cnp_priority", 0, 7), ("traffic_class", 0, 255), ("roce_tos", 0, 255)):
        if desired.get(key) is not None:
            errors += [e for e in [int_range_error(name[key], desired[key], low, high)] if e]
    if desired.get("roce_mode") is not None and desired["roce_mode"] not in ROCE_MODES:
        errors.append("%s must be one of: %s; got %r" % (name["roce_mode"], ", ".join(sorted(ROCE_MODES)), desired["roce_mode"]))
    for param, value in sorted((desired.get("dcqcn") or {}).items()):
        if param not in DCQCN:
            errors.append("%s has no parameter %r; allowed: %s" % (name["dcqcn"], param, ", ".join(sorted(DCQCN))))
            continue
        _point, low, high, unit = DCQCN[param]
        high = line_rate_mbps if high is None else high
        if not _is_int(value) or value < low or (high is not None and value > high):
            errors.append("%s.%s must be an integer %d-%s (%s); got %r"
                          % (name["dcqcn"], param, low, high if high is not None else "line rate", unit, value))
    if desired.get("cnp_priority") is not None and desired["cnp_priority"] in (desired.get("pfc") or []):
        errors.append("%s %s is a PFC priority (%s %s): CNPs must not be paused behind the traffic they slow down"
                      % (name["cnp_priority"], desired["cnp_priority"], name["pfc"], desired["pfc"]))
    if desired.get("pfc") and desired.get("global_pause"):
        errors.append("%s must be false when %s enables priorities %s: link-level pause and PFC exclude each other"
                      % (name["global_pause"], name["pfc"], desired["pfc"]))
    return errors


class Port:
    """One RoCE netdev, its RDMA device and port, and how to reach its state."""

    def __init__(self, runner, root, netdev, backend="auto", facts=None):
        """``facts``: the sysfs facts of ``root`` when the caller has them (one read for many ports)."""
        self.runner, self.root, self.netdev = runner, root, netdev
        try:
            facts = facts if facts is not None else gather_rdma_sysfs(root)
        except SysfsError as exc:
            raise QosError("reading %s: %s" % (root, exc))
        netdevs = facts.get("netdevs") or {}
        info = netdevs.get(netdev)
        if info is None or not info.get("rdma_device"):
            raise QosError("netdev %r is not a netdev of an RDMA device under %s; RDMA netdevs here: %s"
                           % (netdev, root, ", ".join(sorted(n for n, i in netdevs.items() if i.get("rdma_device"))) or "none"))
        self.device, self.port = info["rdma_device"], info["rdma_port"] or 1
        # the firmware's _P<n> parameters count the card's ports: PCI function n-1 drives port n
        pci = facts["devices"][self.device].get("pci_address") or ""
        self.card_port = card_port(pci, self.port)
        port = facts["devices"][self.device]["ports"].get(str(self.port)) or {}
        if port.get("link_layer") != "Ethernet":
            raise QosError("netdev %r belongs to %s port %s, whose link layer is %s, not Ethernet"
                           % (netdev, self.device, self.port, port.get("link_layer")))
        rate = port.get("rate_gbps")
        self.line_rate_mbps = int(rate * 1000) if rate else None
        self.ethtool = runner.which("ethtool")
        self.apptrust = True  # dcb backend: whether the driver has the apptrust op (learnt by read())
        self.backend, self.tool = self._backend(backend)

    def _backend(self, backend):
        if backend not in BACKENDS:
            raise QosError("backend must be one of: %s; got %r" % (", ".join(BACKENDS), backend))
        for name in (("mlnx_qos", "dcb") if backend == "auto" else (backend,)):
            path = self.runner.which(name)
            if path:
                return name, path
        if backend == "auto":
            raise QosError("neither mlnx_qos (MLNX_OFED / DOCA mlnx-tools) nor dcb (iproute2) is installed on this host")
        raise QosError("backend %s is not installed on this host (%s)" % (
            backend, "mlnx_qos comes with MLNX_OFED / DOCA (mlnx-tools)" if backend == "mlnx_qos" else "dcb comes with iproute2 5.11 or later"))

    # ------------------------------------------------------------------ paths
    def ecn_dir(self):
        return os.path.join(self.root, "class", "net", self.netdev, "ecn")

    def tc_file(self):
        return os.path.join(self.root, "class", "infiniband", self.device, "tc", str(self.port), "traffic_class")

    def cm_dir(self):
        return os.path.join(self.root, "kernel", "config", "rdma_cm")

    def cm_port_file(self, name):
        return os.path.join(self.cm_dir(), self.device, "ports", str(self.port), name)

    # ------------------------------------------------------------------ reading
    def _run(self, argv):
        rc, out, err = self.runner.run(argv)
        if rc != 0:
            raise QosError("%s failed (exit %d): %s" % (" ".join(argv), rc, _tool_message(out, err)))
        return out

    def read_dcb(self):
        """trust, pfc and the 64-entry dscp2prio from the backend tool."""
        if self.backend == "mlnx_qos":
            parsed = qos_tools.parse_mlnx_qos(self._run([self.tool, "-i", self.netdev]))
            mapping = parsed.get("dscp2prio_list") or _full_map(parsed.get("dscp2prio"))
            return {"trust": parsed.get("trust"), "pfc": _enabled(parsed.get("pfc")), "dscp2prio": mapping}
        pfc = dcb_tools.parse_dcb_pfc(self._run([self.tool, "-j", "pfc", "show", "dev", self.netdev]))
        app = dcb_tools.parse_dcb_app(self._run([self.tool, "-j", "app", "show", "dev", self.netdev, "dscp-prio"]))
        rc, out, err = self.runner.run([self.tool, "-j", "apptrust", "show", "dev", self.netdev])
        if rc == 0:
            self.apptrust = True
            trust = "dscp" if (dcb_tools.parse_dcb_apptrust(out).get("order") or [])[:1] == ["dscp"] else "pcp"
        elif any(e["kind"] == "attribute_not_found" or e.get("errno") == "EOPNOTSUPP" for e in qos_errors.parse_dcb_errors(err)):
            # The driver has no apptrust op (mlx5): it trusts DSCP while its DCB app table holds a DSCP entry.
            self.apptrust = False
            trust = "dscp" if app.get("dscp_prio") else "pcp"
        else:
            raise QosError("%s -j apptrust show dev %s failed (exit %d): %s" % (self.tool, self.netdev, rc, _tool_message(out, err)))
        return {"trust": trust, "pfc": _enabled(pfc.get("pfc")), "dscp2prio": _full_map(app.get("dscp2prio"))}

    def read_pause(self):
        if not self.ethtool:
            return None
        rc, out, _err = self.runner.run([self.ethtool, "-a", self.netdev])
        if rc != 0:
            return None
        pause = qos_tools.parse_ethtool_pause(out)
        if pause.get("rx") is None and pause.get("tx") is None:
            return None
        return bool(pause.get("rx") or pause.get("tx"))

    def read_ecn(self):
        """ECN, CNP and DCQCN from the OFED ecn/ tree; None for each when this stack has no such tree."""
        ecn_dir = self.ecn_dir()
        if not os.path.isdir(ecn_dir):
            return {"ecn": None, "cnp_dscp": None, "cnp_priority": None, "dcqcn": None}
        ecn = {}
        for point, key in (("roce_np", "np"), ("roce_rp", "rp")):
            ecn[key] = [p for p in range(8) if read_attr(os.path.join(ecn_dir, point, "enable", str(p))) == "1"]
        dcqcn = {}
        for param, (point, _low, _high, _unit) in sorted(DCQCN.items()):
            raw = read_attr(os.path.join(ecn_dir, point, param))
            if raw is not None and raw.lstrip("-").isdigit():
                dcqcn[param] = int(raw)
        return {"ecn": ecn, "cnp_dscp": _int_attr(os.path.join(ecn_dir, "roce_np", "cnp_dscp")),
                "cnp_priority": _int_attr(os.path.join(ecn_dir, "roce_np", "cnp_802p_prio")), "dcqcn": dcqcn}

    def read_cm(self, create):
        """RDMA-CM default RoCE mode and ToS; the device's configfs directory is created when ``create``."""
        if not os.path.isdir(self.cm_dir()):
            return {"roce_mode": None, "roce_tos": None}
        dev_dir = os.path.join(self.cm_dir(), self.device)
        if not os.path.isdir(dev_dir) and create:
            try:
                os.mkdir(dev_dir)
            except OSError as exc:
                raise QosError("cannot create %s (%s): the RDMA-CM configfs needs root" % (dev_dir, exc.strerror))
        mode = qos_tools.parse_roce_mode(read_attr(self.cm_port_file("default_roce_mode")) or "")
        return {"roce_mode": {v: k for k, v in ROCE_MODES.items()}.get(mode),
                "roce_tos": qos_tools.parse_roce_tos(read_attr(self.cm_port_file("default_roce_tos")) or "")}

    def read(self, create_cm=True, pause=True, dcb=True):
        """The QoS state; ``pause`` False leaves link-level pause unread (None: no ``ethtool -a``), ``dcb`` False
        trust, PFC and the DSCP map (None: no QoS tool run; the rest is read from sysfs and configfs)."""
        state = dict(self.read_dcb()) if dcb else {"trust": None, "pfc": None, "dscp2prio": None}
        state["global_pause"] = self.read_pause() if pause else None
        state.update(self.read_ecn())
        raw_tc = read_attr(self.tc_file())
        state["traffic_class"] = qos_tools.parse_traffic_class(raw_tc)["global_tclass"] if raw_tc is not None else None
        state.update(self.read_cm(create_cm))
        return dict((key, state.get(key)) for key in STATE_KEYS)

    # ------------------------------------------------------------------ planning
    def plan(self, before, desired):
        """``(after, steps, firmware)`` for the settings given in ``desired`` (None = leave alone)."""
        after, steps, firmware = dict(before), [], {}
        want = dict((k, v) for k, v in desired.items() if v is not None)
        if want.get("global_pause") is False and before["global_pause"] is not False:
            steps.append(self._pause_step(False))
        if "dscp2prio" in want:
            changes = sorted((int(d), p) for d, p in want["dscp2prio"].items() if before["dscp2prio"][int(d)] != p)
            if changes:
                steps += self._dscp2prio_steps(changes)
                after["dscp2prio"] = list(before["dscp2prio"])
                for dscp, prio in changes:
                    after["dscp2prio"][dscp] = prio
        if "trust" in want and want["trust"] != before["trust"]:
            step = self._trust_step(want["trust"], after["dscp2prio"], bool(steps and steps[-1]["setting"] == "dscp2prio"))
            if step:
                steps.append(step)
            after["trust"] = want["trust"]
        if "pfc" in want and sorted(set(want["pfc"])) != before["pfc"]:
            after["pfc"] = sorted(set(want["pfc"]))
            steps.append(self._pfc_step(after["pfc"]))
        if before["ecn"] is None:
            firmware = self._firmware(want)
        else:
            self._plan_ecn(before, want, after, steps)
        if "traffic_class" in want and want["traffic_class"] != before["traffic_class"] and os.path.exists(self.tc_file()):
            steps.append({"setting": "traffic_class", "path": self.tc_file(), "value": str(want["traffic_class"])})
            after["traffic_class"] = want["traffic_class"]
        if "roce_mode" in want and want["roce_mode"] != before["roce_mode"]:
            steps += self._cm_steps("default_roce_mode", ROCE_MODES[want["roce_mode"]], "roce_mode")
            after["roce_mode"] = want["roce_mode"]
        if "roce_tos" in want and want["roce_tos"] != before["roce_tos"]:
            steps += self._cm_steps("default_roce_tos", str(want["roce_tos"]), "roce_tos")
            after["roce_tos"] = want["roce_tos"]
        if want.get("global_pause") is True and before["global_pause"] is not True:
            steps.append(self._pause_step(True))
        if "global_pause" in want:
            after["global_pause"] = want["global_pause"]
        return after, steps, firmware

    def boot_steps(self, desired):
        """Every step that sets ``desired`` on a port fresh from a driver load, whatever its state now: what a boot-time
        re-apply runs. Returns ``(commands, writes)``: argv lists, and ``[path, value]`` pairs (configfs device
        directories first, as ``[path, None]``)."""
        blank = dict((key, None) for key in STATE_KEYS)
        blank["dscp2prio"] = [None] * 64
        if os.path.isdir(self.ecn_dir()):
            blank["ecn"], blank["dcqcn"] = {"np": [], "rp": []}, {}
        _after, steps, _firmware = self.plan(blank, desired)
        commands = [step["argv"] for step in steps if "argv" in step]
        writes = [[step["path"], step["value"]] for step in steps if "path" in step]
        if any(step["setting"] in ("roce_mode", "roce_tos") for step in steps):
            writes.insert(0, [os.path.join(self.cm_dir(), self.device), None])
        return commands, writes

    def _plan_ecn(self, before, want, after, steps):
        ecn_dir = self.ecn_dir()
        if "ecn" in want:
            ecn = {"np": list(before["ecn"]["np"]), "rp": list(before["ecn"]["rp"])}
            for key, point in (("np", "roce_np"), ("rp", "roce_rp")):
                for prio in sorted(set(want["ecn"]) - set(before["ecn"][key])):
                    steps.append({"setting": "ecn", "path": os.path.join(ecn_dir, point, "enable", str(prio)), "value": "1"})
                ecn[key] = sorted(set(ecn[key]) | set(want["ecn"]))
            after["ecn"] = ecn
        for key, name in (("cnp_dscp", "cnp_dscp"), ("cnp_priority", "cnp_802p_prio")):
            if key in want and want[key] != before[key]:
                steps.append({"setting": key, "path": os.path.join(ecn_dir, "roce_np", name), "value": str(want[key])})
                after[key] = want[key]
        if "dcqcn" in want:
            dcqcn = dict(before["dcqcn"] or {})
            for param, value in sorted(want["dcqcn"].items()):
                if dcqcn.get(param) != value:
                    steps.append({"setting": "dcqcn", "path": os.path.join(ecn_dir, DCQCN[param][0], param), "value": str(value)})
                    dcqcn[param] = value
            after["dcqcn"] = dcqcn

    def _firmware(self, want):
        """What an inbox stack could only change in the firmware (mlxconfig), by the tool's parameter names."""
        return firmware_params(self.card_port, want)

    def _pause_step(self, on):
        word = "on" if on else "off"
        if not self.ethtool:
            raise QosError("global_pause needs ethtool, which is not installed on this host")
        return {"setting": "global_pause", "argv": [self.ethtool, "-A", self.netdev, "rx", word, "tx", word]}

    def _dscp2prio_steps(self, changes):
        if self.backend == "mlnx_qos":
            return [{"setting": "dscp2prio", "argv": [self.tool, "-i", self.netdev, "--dscp2prio", "set,%d,%d" % change]}
                    for change in changes]
        return [{"setting": "dscp2prio", "argv": [self.tool, "app", "replace", "dev", self.netdev, "dscp-prio"]
                 + ["%d:%d" % change for change in changes]}]

    def _trust_step(self, trust, dscp2prio, adds_dscp_entries):
        if self.backend == "mlnx_qos":
            return {"setting": "trust", "argv": [self.tool, "-i", self.netdev, "--trust", trust]}
        if self.apptrust:
            return {"setting": "trust", "argv": [self.tool, "apptrust", "set", "dev", self.netdev, "order", trust]}
        # No apptrust op: the first DSCP entry of the DCB app table switches the driver to trust DSCP, and removing
        # the last one switches it back to PCP.
        if trust == "pcp":
            return {"setting": "trust", "argv": [self.tool, "app", "flush", "dev", self.netdev, "dscp-prio"]}
        if adds_dscp_entries:
            return None
        return {"setting": "trust", "argv": [self.tool, "app", "replace", "dev", self.netdev, "dscp-prio", "0:%d" % (dscp2prio[0] or 0)]}

    def _pfc_step(self, prios):
        if self.backend == "mlnx_qos":
            return {"setting": "pfc", "argv": [self.tool, "-i", self.netdev, "--pfc", ",".join("1" if p in prios else "0" for p in range(8))]}
        return {"setting": "pfc", "argv": [self.tool, "pfc", "set", "dev", self.netdev, "prio-pfc"]
                + ["%d:%s" % (p, "on" if p in prios else "off") for p in range(8)]}

    def _cm_steps(self, name, value, setting):
        if not os.path.isdir(self.cm_dir()):
            raise QosError("%s needs the RDMA-CM configfs (%s): load rdma_cm and mount configfs" % (setting, self.cm_dir()))
        return [{"setting": setting, "path": self.cm_port_file(name), "value": value}]

    # ------------------------------------------------------------------ applying
    def apply(self, steps):
        applied = []
        for step in steps:
            if "argv" in step:
                rc, out, err = self.runner.run(step["argv"], changes=True)
                if rc != 0:
                    raise QosApplyError("%s failed (exit %d): %s" % (" ".join(step["argv"]), rc, _tool_message(out, err)), applied)
            else:
                try:
                    with open(step["path"], "w") as handle:
                        handle.write(step["value"] + "\n")
                except (IOError, OSError) as exc:
                    raise QosApplyError("writing %s to %s failed: %s" % (step["value"], step["path"], exc.strerror), applied)
            applied.append(step)
        return applied


def _full_map(entries):
    """64 priorities by DSCP: the entries the tool listed, the driver's default (DSCP >> 3) for the others."""
    entries = entries or {}
    return [entries.get(dscp, dscp >> 3) for dscp in range(64)]


def _enabled(flags):
    return None if flags is None else [p for p, flag in enumerate(flags) if flag]


def _int_attr(path):
    raw = read_attr(path)
    return int(raw) if raw is not None and raw.strip().isdigit() else None


def _tool_message(out, err):
    lines = [line.strip() for line in ((err or "") + "\n" + (out or "")).splitlines() if line.strip()]
    return " ".join(lines[:3]) or "no output"


def describe_step(step):
    """One line per step for ``commands`` and error messages: the argv, or ``write <value> > <path>``."""
    return step["argv"] if "argv" in step else ["write", step["value"], step["path"]]
