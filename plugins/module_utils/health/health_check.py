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

from ansible_collections.hpcnet.rdma.plugins.module_utils.health import counter_window
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.roce_qos import Port, QosError
from ansible_collections.hpcnet.rdma.plugins.module_utils.stack.rdma_stack import memlock_limits
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import facts as rdma_facts, port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key
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


def _absent(doc, port):
    where = port["pci"] or "%s:%d" % (port["device"], port["port"])
    what = "compute rail %s" % port["rail"] if port["role"] == "compute" else "storage port"
    return finding(doc["host"], "error", "port_state", port["device"], port["port"], "%s at %s" % (what, where),
                   "absent", "the port's PCI function is gone: the card left the bus (PCIe link down, a dead card), "
                   "or its driver (mlx5_core) is not loaded",
                   "`lspci -s %s`, `dmesg | grep -i mlx5`; reseat or replace the card" % (port["pci"] or ""))


def current_ports(doc, rdma):
    """The expected ports as this host names them now, found by PCI function (a device renamed since the role ran
    is the same port; ``mlx5_N`` names shift when a card leaves the bus), with the role entries for the ports present
    and a finding for each port that is gone."""
    views = port_roles.port_views(rdma)
    by_pci = dict((v["pci"], v) for v in views if v["pci"])
    by_id = dict((v["id"], v) for v in views)
    ports, gone = [], []
    for port in doc["ports"]:
        view = by_pci.get(port["pci"]) if port["pci"] else by_id.get("%s:%d" % (port["device"], port["port"]))
        if view is None:
            gone.append(_absent(doc, port))
            continue
        device, number = view["id"].rsplit(":", 1)
        ports.append(dict(port, device=device, port=int(number), netdev=view["netdev"] or port["netdev"]))
    entries = []
    for entry in doc["port_roles"]:
        present = [sel for sel in entry["devices"] if any(port_roles.selector_matches(sel, v) for v in views)]
        if present:
            entries.append({"role": entry["role"], "devices": present})
    return ports, entries, gone


def _expect_now(doc, ports):
    """The expectations with the compute ports (and the P_Keys) under the names they have now."""
    expect = dict(doc["expect"])
    old_to_new = dict(("%s:%d" % (o["device"], o["port"]), "%s:%d" % (n["device"], n["port"]))
                      for o, n in zip(_present(doc, ports), ports))
    expect["devices"] = ["%s:%d" % (p["device"], p["port"]) for p in ports if p["role"] == "compute"]
    expect["pkeys"] = dict((old_to_new[k], v) for k, v in (doc["expect"].get("pkeys") or {}).items() if k in old_to_new)
    return expect


def _present(doc, ports):
    """The expected ports (as the file names them) that ``ports`` (current_ports) found, in the same order."""
    found = set(p["pci"] or "%s:%d" % (p["device"], p["port"]) for p in ports)
    return [p for p in doc["ports"] if (p["pci"] or "%s:%d" % (p["device"], p["port"])) in found]


def run(doc, runner, now, previous=None, nccl_text=None, own_limits=True, tools=True):
    """The health of this host. ``previous``: the last run's snapshot (anything: an unusable one is a first run);
    ``nccl_text``: /etc/nccl.conf as read now (None: absent); ``own_limits``: check this process's memlock limit (the
    program, run by systemd or slurmd as jobs are; not an Ansible session's); ``tools`` False: no QoS tool and no
    sminfo (``ethtool -S`` is the one process per RoCE netdev; trust, the DSCP map and the SM wait for a full check).
    Returns {ok, findings, checks, ports, snapshot, notes}; raises HealthError when the host cannot be read."""
    root = doc["sysfs_root"]
    found = {}

    def present_entries(rdma):
        found["ports"], entries, found["findings"] = current_ports(doc, rdma)
        return entries
    try:
        rdma = rdma_facts.read(root, present_entries, doc["fabrics"], doc["management_netdevs"],
                               gather_counters=True)
    except port_roles.PortRoleError as exc:
        raise HealthError("the expected state's port roles do not fit this host: %s" % exc)
    except Exception as exc:  # SysfsError and what a vanished file raises mid-read
        raise HealthError("reading %s: %s" % (root, exc))
    ports, findings = found["ports"], found["findings"]
    own_limits = own_limits and doc["expect"]["memlock"] is not None
    rdma["memlock"] = memlock_limits() if own_limits else {"soft": None, "hard": None}
    host = doc["host"]
    entry = {"group": doc["group"], "rdma": rdma, "expect": _expect_now(doc, ports),
             "roce_qos": _qos_drift(runner, root, rdma, doc["roce_qos"], tools) if doc["roce_qos"] else None,
             "sminfo": _sminfo(runner, rdma) if doc["sm"] and tools else None}
    if ports:
        try:
            findings.extend(verify({host: entry}, doc["spec"])["findings"])
        except VerifyInputError as exc:
            raise HealthError("the expected state does not fit the checks: %s" % exc)
    # else: no port left to check (every card gone: the findings above), or a host provisioned without RDMA ports
    # (rdma_require_devices false), which keeps to sockets
    findings.extend(_nccl_findings(doc, rdma, nccl_text))
    checked = dict(("%s/%s" % (p["device"], p["port"]), p) for p in ports)
    snap = rdma_counters.snapshot(runner, root, devices=sorted(set(p["device"] for p in ports)), facts=rdma)
    for key in list(snap["counters"]):
        if key not in checked:
            for part in ("counters", "sources", "ports"):
                snap[part].pop(key, None)
    previous = counter_window.valid(previous, now)
    counter_found, notes = counter_window.findings(doc, snap, previous, now)
    findings.extend(counter_found)
    findings.sort(key=lambda f: (f["severity"] != "error", f["port"] is None and f["device"] is not None,
                                 natural_key(f["device"] or ""), f["port"] or 0))
    return {"ok": not any(f["severity"] == "error" for f in findings), "findings": findings, "ports": ports,
            "checks": check_table(doc, ports, findings), "notes": notes,
            "snapshot": counter_window.next_snapshot(previous, snap["counters"], now)}


def _nccl_findings(doc, rdma, nccl_text):
    conf = doc.get("nccl_conf") or {}
    if not conf.get("path"):
        return []
    out = []
    if nccl_text is not None:
        out.extend(nccl_conf_findings(doc["host"], nccl_conf(nccl_text), rdma, conf["path"], doc["fabrics"]))
    if conf.get("content") is not None and nccl_text != conf["content"]:
        out.append(finding(doc["host"], "error", "nccl_conf", None, None, "%s as hpcnet.rdma.nccl wrote it" % conf["path"],
                           "absent" if nccl_text is None else "changed",
                           "NCCL reads another configuration than the one provisioned: jobs may use other HCAs, GID "
                           "index or traffic class", "re-run site.yml with --tags nccl on this host"))
    return out


def check_table(doc, ports, findings):
    """[{check, device, port, netdev, role, rail, ok}]: one row per check and expected port (as the host names it now;
    a port that is gone fails port_state under its expected name), and one per host check; ok unless an error finding
    names that check and port (any nccl_conf finding fails the host's nccl_conf row)."""
    failed = set((f["check"], f["device"], f["port"]) for f in findings if f["severity"] == "error")
    present = set((p["pci"], p["rail"], p["role"]) for p in ports)
    rows = []
    for port in ports + [p for p in doc["ports"] if (p["pci"], p["rail"], p["role"]) not in present]:
        for check in PORT_CHECKS:
            if check in ETHERNET_ONLY and port["link_layer"] != "Ethernet":
                continue
            if check in ("subnet_manager", "pkeys") and port["link_layer"] != "InfiniBand":
                continue
            if (check == "subnet_manager" and not doc["sm"]) or (check == "pkeys" and not port.get("pkeys")):
                continue
            if check == "roce_qos" and port["netdev"] not in doc["roce_qos"]:
                continue
            rows.append({"check": check, "device": port["device"], "port": port["port"], "netdev": port["netdev"],
                         "role": port["role"], "rail": port["rail"],
                         "ok": (check, port["device"], port["port"]) not in failed})
    for check in HOST_CHECKS:
        rows.append({"check": check, "device": None, "port": None, "netdev": None, "role": None, "rail": None,
                     "ok": not any(c == check or c.startswith(check + "_") for c, _d, _p in failed)})
    return rows
