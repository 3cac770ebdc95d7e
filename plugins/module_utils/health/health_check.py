# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One health check of this host against its expected state: the same checks as ``rdma_verify``, run here.

Pure Python (no Ansible imports). ``run(doc, runner, now, previous)`` reads the host once (sysfs with counters), gives
its ports the roles the expected state pinned, runs the spec checks (``verify.rdma_verify.verify`` on this one host,
with the QoS state compared by ``qos.roce_qos.Port`` as the roce role's drift check does, and ``sminfo`` per ACTIVE
InfiniBand compute port where an SM is expected), the NCCL configuration checks (``verify.verify_plan``) and the
counter rules (``verify.rdma_counters``) on the deltas since ``previous`` (the last run's snapshot), with the
expected state's thresholds as allowances. Returns the findings (errors first), the check table (one row per check and
port, for the metrics) and the new snapshot.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.roce_qos import Port, QosError
from ansible_collections.hpcnet.rdma.plugins.module_utils.stack.rdma_stack import memlock_limits
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs, natural_key
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import rdma_counters
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.rdma_verify import verify
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_fabric import VerifyInputError, finding
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_plan import nccl_conf, nccl_conf_findings

# the checks of a port (one metric series each), and of the host
PORT_CHECKS = ("port_state", "link_layer", "rate", "width", "mtu", "firmware", "gid_index", "roce_qos",
               "subnet_manager", "pkeys", "counter_link_errors", "counter_link_flap", "counter_pfc", "counter_pfc_storm",
               "counter_pause", "counter_discards", "counter_ecn")
HOST_CHECKS = ("ipoib", "memlock", "kernel_modules", "gdr", "nccl_conf")
ETHERNET_ONLY = ("roce_qos", "gid_index", "counter_pfc", "counter_pfc_storm", "counter_pause", "counter_discards",
                 "counter_ecn")
LINK_ERRORS = ("symbol_error", "port_rcv_errors", "local_link_integrity_errors", "link_error_recovery",
               "rx_crc_errors_phy", "rx_symbol_err_phy")
FLAPS = ("link_downed", "link_down_events_phy")
DISCARDS = ("rx_discards_phy", "out_of_buffer")


class HealthError(Exception):
    """The check could not run (the host cannot be read); the message says why."""


# what only the QoS tool (mlnx_qos, dcb) reads: left to a full check; a sysfs-only check reads the rest from files
TOOL_SETTINGS = ("trust", "pfc", "dscp2prio")


def _qos_drift(runner, root, facts, declared, tools=True):
    """{netdev: {changed, diff} or {failed, msg}}: each declared netdev's QoS state against its profile, read-only.
    Without ``tools``, only what sysfs and configfs hold (ECN, CNP, DCQCN, traffic class, RDMA-CM ToS and mode):
    no process per netdev (PFC is still checked, by its counters: rdma_counters' counter_pfc)."""
    out = {}
    for netdev in sorted(declared, key=natural_key):
        desired = dict(declared[netdev])
        backend = desired.pop("backend", "auto")
        desired.pop("global_pause", None)  # link-level pause: its counters say more than a read (no ethtool -a)
        if not tools:
            for key in TOOL_SETTINGS:
                desired.pop(key, None)
        try:
            port = Port(runner, root, netdev, backend, facts=facts)
            before = port.read(create_cm=False, pause=False, dcb=tools)
            after, steps, _firmware = port.plan(before, desired)
        except QosError as exc:
            out[netdev] = {"failed": True, "msg": str(exc)}
            continue
        out[netdev] = {"changed": bool(steps), "diff": {
            "before": dict((k, v) for k, v in before.items() if after.get(k) != v),
            "after": dict((k, v) for k, v in after.items() if before.get(k) != v)}}
    return out


def _sminfo(runner, rdma):
    out = {}
    devices = rdma.get("devices") or {}
    for pid in (rdma.get("ports_by_role") or {}).get("compute") or []:
        name, num = pid.rsplit(":", 1)
        port = devices[name]["ports"][num]
        if port.get("link_layer") == "InfiniBand" and port.get("state") == "ACTIVE":
            _rc, text, err = runner.run([runner.which("sminfo") or "sminfo", "-C", name, "-P", num])
            out[pid] = text or err or ""
    return out


def _pin_roles(doc, rdma):
    """The expected state's role entries for the ports present, and a finding for each storage port that is gone
    (compute ports are verify's expected devices: its port_state check names them)."""
    views = port_roles.port_views(rdma)
    entries, missing = [], []
    for entry in doc["port_roles"]:
        present = [sel for sel in entry["devices"] if any(port_roles.selector_matches(sel, v) for v in views)]
        if present:
            entries.append({"role": entry["role"], "devices": present})
        if entry["role"] == "storage":
            missing.extend(sel for sel in entry["devices"] if sel not in present)
    out = []
    for port in doc["ports"]:
        if port["role"] == "storage" and (port["pci"] or "%s:%d" % (port["device"], port["port"])) in missing:
            out.append(finding(doc["host"], "error", "port_state", port["device"], port["port"],
                               "storage port %s present" % (port["pci"] or port["device"]), "absent",
                               "the storage port's PCI function is gone: the card left the bus, or its driver "
                               "(mlx5_core) is not loaded", "`lspci -d 15b3:` and `dmesg | grep -i mlx5`"))
    return entries, out


def _limits(thresholds, seconds):
    """{counter: allowed delta over ``seconds``} from the thresholds, and ``pause_percent``."""
    limits = {"pause_percent": thresholds["pfc_pause_percent_max"]}
    for name in LINK_ERRORS:
        limits[name] = int(math.floor(thresholds["link_errors_per_hour_max"] * seconds / 3600.0))
    for name in FLAPS:
        limits[name] = thresholds["link_flaps_max"]
    for name in DISCARDS:
        limits[name] = int(math.floor(thresholds["discards_per_minute_max"] * seconds / 60.0))
    for prio in range(8):
        for direction in ("rx", "tx"):
            limits["%s_prio%d_pause" % (direction, prio)] = thresholds["pause_frames_not_lossless_max"]
    for name in ("rx_global_pause", "tx_global_pause"):
        limits[name] = thresholds["pause_frames_not_lossless_max"]
    return limits


def _counter_findings(doc, rdma, snap, previous, now):
    """Findings of the counters since the previous snapshot, and notes."""
    notes = list(snap["notes"])
    if not previous or not isinstance(previous.get("counters"), dict) or not previous.get("time"):
        notes.append({"port": None, "kind": "first_run",
                      "message": "no previous snapshot: counter rates start with the next run"})
        return [], notes
    seconds = max(1, int(round(now - float(previous["time"]))))
    d = rdma_counters.deltas(previous["counters"], snap["counters"], notes)
    link_layers = dict((k, v["link_layer"]) for k, v in snap["ports"].items())
    netdevs = dict((k, v["netdev"]) for k, v in snap["ports"].items())
    found = rdma_counters.findings(doc["host"], d, doc["lossless_priorities"], link_layers, notes, netdevs,
                                   limits=_limits(doc["thresholds"], seconds), seconds=seconds)
    # a snapshot left by a driver reload is no counter finding of its own here: the port checks say what changed
    return [f for f in found if f["check"] != "counter_reset"], notes


def run(doc, runner, now, previous=None, nccl_text=None, own_limits=True, tools=True):
    """The health of this host. ``nccl_text``: /etc/nccl.conf as read now (None: absent); ``own_limits``: check this
    process's memlock limit (the program, run by systemd or slurmd as jobs are; not an Ansible session's); ``tools``
    False: no QoS tool (``ethtool -S`` is the one process per RoCE netdev; trust and the DSCP map wait for a full
    check). Returns
    {ok, findings, checks, ports, snapshot, notes}; raises HealthError when the host cannot be read."""
    root = doc["sysfs_root"]
    try:
        facts = gather_rdma_sysfs(root, gather_counters=True)
    except Exception as exc:  # SysfsError and what a vanished file raises mid-read
        raise HealthError("reading %s: %s" % (root, exc))
    rdma = dict(facts, sysfs_root=root)
    entries, findings = _pin_roles(doc, rdma)
    try:
        port_roles.annotate(rdma, entries, doc["fabrics"], doc["management_netdevs"])
    except port_roles.PortRoleError as exc:
        raise HealthError("the expected state's port roles do not fit this host: %s" % exc)
    own_limits = own_limits and doc["expect"]["memlock"] is not None
    rdma["memlock"] = memlock_limits() if own_limits else {"soft": None, "hard": None}
    host = doc["host"]
    entry = {"group": doc["group"], "rdma": rdma, "expect": doc["expect"],
             "roce_qos": _qos_drift(runner, root, facts, doc["roce_qos"], tools) if doc["roce_qos"] else None,
             "sminfo": _sminfo(runner, rdma) if doc["sm"] else None}
    if doc["ports"] or doc["expect"]["devices"]:
        try:
            findings.extend(verify({host: entry}, doc["spec"])["findings"])
        except VerifyInputError as exc:
            raise HealthError("the expected state does not fit the checks: %s" % exc)
    # else: a host provisioned without RDMA ports (rdma_require_devices false) keeps to sockets: nothing to check
    conf = doc.get("nccl_conf") or {}
    if conf.get("path"):
        if nccl_text is not None:
            findings.extend(nccl_conf_findings(host, nccl_conf(nccl_text), rdma, conf["path"], doc["fabrics"]))
        if conf.get("content") is not None and nccl_text != conf["content"]:
            findings.append(finding(host, "error", "nccl_conf", None, None, "%s as hpcnet.rdma.nccl wrote it" % conf["path"],
                                    "absent" if nccl_text is None else "changed",
                                    "NCCL reads another configuration than the one provisioned: jobs may use other "
                                    "HCAs, GID index or traffic class", "re-run site.yml with --tags nccl on this host"))
    checked = dict(("%s/%s" % (p["device"], p["port"]), p) for p in doc["ports"])
    snap = rdma_counters.snapshot(runner, root, devices=sorted(set(p["device"] for p in doc["ports"])), facts=facts)
    for key in list(snap["counters"]):
        if key not in checked:
            for part in ("counters", "sources", "ports"):
                snap[part].pop(key, None)
    counter_found, notes = _counter_findings(doc, rdma, snap, previous, now)
    findings.extend(counter_found)
    findings.sort(key=lambda f: (f["severity"] != "error", natural_key(f["device"] or ""), f["port"] or 0))
    return {"ok": not any(f["severity"] == "error" for f in findings), "findings": findings,
            "checks": check_table(doc, findings), "snapshot": {"time": now, "counters": snap["counters"]},
            "notes": notes}


def check_table(doc, findings):
    """[{check, device, port, netdev, role, rail, ok}]: one row per check and expected port (and per host check),
    ok unless an error finding names that check and port."""
    failed = set((f["check"], f["device"], f["port"]) for f in findings if f["severity"] == "error")
    rows = []
    for port in doc["ports"]:
        for check in PORT_CHECKS:
            if check in ETHERNET_ONLY and port["link_layer"] != "Ethernet":
                continue
            if check == "subnet_manager" and (not doc["sm"] or port["link_layer"] != "InfiniBand"):
                continue
            if check == "pkeys" and not port.get("pkeys"):
                continue
            if check == "roce_qos" and port["netdev"] not in doc["roce_qos"]:
                continue
            rows.append({"check": check, "device": port["device"], "port": port["port"], "netdev": port["netdev"],
                         "role": port["role"], "rail": port["rail"],
                         "ok": (check, port["device"], port["port"]) not in failed})
    for check in HOST_CHECKS:
        rows.append({"check": check, "device": None, "port": None, "netdev": None, "role": None, "rail": None,
                     "ok": not any(c == check for c, _d, _p in failed)})
    return rows
