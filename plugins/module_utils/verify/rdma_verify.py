# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Spec checks of an RDMA fabric: every host's ``ansible_facts.rdma`` compared with its group's expectations.

Pure Python (no Ansible imports). ``verify(hosts, spec)`` validates the input, runs every check of ``CHECKS`` on
every host (and the fabric-wide part of the checks that have one) and returns the findings, the per-host check
table and the verdict; ``summary_message`` is the module's one-line message. A check is a small function
``check(fabric, host) -> Outcome``; ``CHECKS`` is the one place that lists them, in report order.

This file owns the host checks (the RoCE QoS state, IPoIB, memlock, kernel modules, GPUDirect RDMA). The port and
link checks are in ``verify_ports``; the input, the finding format and the fabric view (ports, rails, references) in
``verify_fabric``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_fabric import (
    FABRIC, SKIP, Fabric, Outcome, VerifyInputError, finding, is_number, references_table, validate_hosts,
    validate_spec)
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_links import links
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_pcie import host_pcie
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_ports import (
    check_firmware, check_gid_index, check_link_layer, check_mtu, check_pkeys, check_port_state, check_rate,
    check_subnet_manager, check_width, fabric_subnet_manager)

# Every host needs these loaded for RDMA (user-space verbs and RDMA-CM included).
BASE_MODULES = ("mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "rdma_cm")


# ------------------------------------------------------------------------------------------------ the host checks
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
    if soft == "unlimited" or (wanted != "unlimited" and is_number(soft) and soft >= wanted):
        return Outcome()
    return Outcome([finding(
        host, "error", "memlock", None, None, wanted if wanted == "unlimited" else ">= %d bytes" % wanted,
        soft if not is_number(soft) else "%d bytes" % soft,
        "the locked-memory limit (RLIMIT_MEMLOCK) is %s: RDMA pins the memory it registers, so NCCL, MPI and "
        "perftest fail to register their buffers (ibv_reg_mr: Cannot allocate memory)" % (
            soft if not is_number(soft) else "%d bytes" % soft),
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


def fabric_links(fabric):
    """Once for the fabric: the rail map and every link's findings (``verify_links``), kept on ``fabric`` for the
    per-host part and the module's return."""
    try:
        fabric.links = links(fabric, fabric.spec["rail_switches"])
    except ValueError as exc:
        raise VerifyInputError(str(exc)) from exc
    return []


def check_links(fabric, host):
    """The other end of each cable: the host's rails on their rails' switches (rail_map), a peer on every port
    (peer_missing), InfiniBand links alike from both ends (ib_link_width), and the switch lossless where the host is
    (switch_dcbx, switch_pfc, switch_app, switch_mtu); skipped for facts read without peers."""
    if not isinstance(fabric.hosts[host]["rdma"].get("peers"), dict):
        return SKIP
    return Outcome([f for f in fabric.links["findings"] if f["host"] == host])


def fabric_pcie(fabric):
    """Once for the fabric: each host's GPUDirect path (``verify_pcie``), kept on ``fabric`` for the per-host part and
    the module's return."""
    fabric.pcie = {}
    for name in fabric.order:
        read = host_pcie(fabric, name)
        if read is not None:
            fabric.pcie[name] = read
    return []


def check_pcie(fabric, host):
    """The GPUDirect path inside the host: each PCIe link of a compute NIC and a GPU at the lower of its ends' maxima
    (pcie_link), no ACS redirect between a rail's NIC and its GPU (pcie_acs) and the IOMMU not translating (iommu)
    where GPUDirect RDMA is expected, a GPU under each rail's PCIe switch (gpu_affinity), MaxReadReq 4096
    (pcie_max_read_req); skipped for facts read without the PCIe path."""
    if host not in fabric.pcie:
        return SKIP
    return Outcome(fabric.pcie[host]["findings"])


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
    Check("pkeys", check_pkeys),
    Check("ipoib", check_ipoib),
    Check("memlock", check_memlock),
    Check("kernel_modules", check_kernel_modules),
    Check("gdr", check_gdr),
    Check("links", check_links, fabric_links),
    Check("pcie", check_pcie, fabric_pcie),
)
CHECK_NAMES = tuple(c.name for c in CHECKS)


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
        "references": references_table(fabric),
        "rail_map": fabric.links["rail_map"],
        "rail_map_basis": {"basis": fabric.links["basis"], "note": fabric.links["note"],
                           "rail_switches": dict((str(k), v) for k, v in fabric.links["rail_switches"].items())},
        "pcie": dict((name, read["rails"]) for name, read in fabric.pcie.items()),
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
