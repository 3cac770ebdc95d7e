# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the verify playbook expects of one host, from its RDMA facts and its group, and its NCCL configuration.

- ``input_errors``: the verify role's inputs that the argument spec cannot check (ranges, the perftest pairs), one
  message per problem, each naming the variable (the role's one validation path).
- ``host_plan``: the group's link layer, the host's rails (its compute ports in rail order, read through
  ``port_roles.planned``: rail r is the r-th compute port in PCI order, whatever the device is called; or
  ``verify_hcas`` in the order given) and its storage ports, each with its port, GID index (RoCE v2 IPv4 entry) and
  ToS, every port with its role and rail (the report), and whether GPUDirect RDMA is expected.
- ``nccl_conf``: ``/etc/nccl.conf`` text -> ``{NAME: value}`` as NCCL reads it (``NAME=VALUE`` lines, ``#`` comments).
- ``nccl_conf_findings``: what in that file cannot work on this host (an NCCL_IB_HCA port that is not ACTIVE or not
  there, an NCCL_IB_GID_INDEX that is not the port's RoCE v2 IPv4 GID) or is not what it should be (an NCCL_IB_HCA
  port that is not a compute port), each with its cause and fix.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.hpcnet.rdma.plugins.module_utils.host.host_settings import GDR_MODES
from ansible_collections.hpcnet.rdma.plugins.module_utils.host.nccl_hca import entry_devices, parse_hca_list
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.perftest_rounds import pair_errors
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_nccl import launcher_args
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import natural_key
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import GROUP_LINK_LAYER


def _number(value, kind):
    """``value`` as ``kind`` (int or float), as Jinja's int / float filters read it; None when it is no number."""
    if isinstance(value, bool):
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        try:
            number = kind(float(value))
        except (TypeError, ValueError, OverflowError):
            return None
    # nan and inf are no thresholds (every comparison with nan is false)
    return number if kind is int or math.isfinite(number) else None


def input_errors(inputs, hosts):
    """Problems with the verify role's ``verify_*`` inputs beyond their types (ranges, pairs), for the run's
    ``hosts`` (the play's, in inventory order)."""
    get = inputs.get
    errors = []
    pct = _number(get("verify_min_bw_pct"), float)
    if pct is None or not 0 < pct <= 100:
        errors.append("verify_min_bw_pct must be a percentage of line rate, more than 0 and at most 100; got %s."
                      % (get("verify_min_bw_pct"),))
    port = _number(get("verify_perftest_port"), int)
    if port is None or not 1024 <= port <= 65535:
        errors.append("verify_perftest_port must be a TCP port 1024-65535 (perftest takes -p); got %s." % (get("verify_perftest_port"),))
    timeouts = [_number(get(name), int) for name in ("verify_perftest_timeout", "verify_nccl_timeout")]
    if any(t is None or t <= 0 for t in timeouts):
        errors.append("verify_perftest_timeout and verify_nccl_timeout must be seconds, more than 0; got %s and %s."
                      % (get("verify_perftest_timeout"), get("verify_nccl_timeout")))
    size, iterations = _number(get("verify_perftest_size"), int), _number(get("verify_perftest_iterations"), int)
    if size is None or size <= 0 or iterations is None or iterations < 5:
        errors.append("verify_perftest_size must be more than 0 bytes and verify_perftest_iterations at least 5 "
                      "(perftest's minimum); got %s and %s." % (get("verify_perftest_size"), get("verify_perftest_iterations")))
    ranks = _number(get("verify_nccl_ranks_per_host"), int)
    if ranks is None or ranks < 1:
        errors.append("verify_nccl_ranks_per_host must be at least 1; got %s." % (get("verify_nccl_ranks_per_host"),))
    busbw = get("verify_min_busbw_gbps")
    if busbw is not None and (_number(busbw, float) or 0) <= 0:  # None, 0, negative, nan, inf
        errors.append("verify_min_busbw_gbps must be more than 0 GB/s, or unset; got %s." % (busbw,))
    if get("verify_perftest_pattern") == "pairs":
        errors += pair_errors(list(hosts), get("verify_perftest_pairs"))
    report_dir = get("verify_report_dir")
    if report_dir is not None and not (isinstance(report_dir, str) and report_dir.strip()):
        # the report is written last: an empty directory would fail after every test has run
        errors.append("verify_report_dir must name a directory on the controller for fabric-report.json and "
                      "fabric-report.html (default fabric-report in the current directory); got %r." % (report_dir,))
    launcher = get("verify_launcher")
    own = {"mpirun": get("verify_mpirun_args"), "srun": get("verify_srun_args")}.get(launcher)
    try:
        launcher_args(launcher, get("verify_launcher_args"), own)
    except ValueError as exc:
        errors.append("%s." % exc)
    return errors


def _entry(role, index, name, number, port, present):
    """One port of the plan: ``rail`` (compute) or ``index`` (storage) and what perftest needs to run on it."""
    port = port or {}
    rdma_cm = port.get("rdma_cm") or {}
    ethernet = port.get("link_layer") == "Ethernet"
    entry = {"role": role, "hca": name, "port": number, "present": present, "link_layer": port.get("link_layer"),
             "state": port.get("state"), "rate_gbps": port.get("rate_gbps"),
             "gid_index": port.get("roce_v2_ipv4_gid_index") if ethernet else None,
             "tclass": rdma_cm.get("default_roce_tos") if ethernet else None, "netdev": port.get("netdev")}
    entry["rail" if role == "compute" else "index"] = index
    return entry


def _named_ports(devices, hcas):
    """``verify_hcas`` (``dev`` = its first port, ``dev:port``) -> ``[(name, number, port facts or None, present)]``."""
    out = []
    for item in hcas:
        name, sep, num = item.partition(":")
        ports = (devices.get(name) or {}).get("ports") or {}
        number = int(num) if sep and num.isdigit() else (int(sorted(ports, key=int)[0]) if ports else 1)
        out.append((name, number, ports.get(str(number)), name in devices))
    return out


def host_plan(rdma, group, hcas=None, gdr_mode="auto", gpu_driver=False, fabrics=None):
    """One host's expectations. ``fabrics``: the host's inventory groups (the default port roles of facts read without
    them; default ``[group]``). Raises ValueError naming the field on a bad group, HCA list or GDR mode."""
    if group not in GROUP_LINK_LAYER:
        raise ValueError("the host must be in the infiniband or the roce group; got %r" % (group,))
    mode = str(gdr_mode).lower()
    if mode not in GDR_MODES:
        raise ValueError("verify_expect_gdr must be true, false or auto; got %r" % (gdr_mode,))
    link_layer = GROUP_LINK_LAYER[group]
    planned = port_roles.planned(rdma or {}, [group] if fabrics is None else list(fabrics))
    devices = planned.get("devices") or {}
    by_role = planned.get("ports_by_role") or {}

    def facts_of(pid):
        name, num = pid.rsplit(":", 1)
        return name, int(num), devices[name]["ports"][num], True

    if hcas:
        if not isinstance(hcas, (list, tuple)) or not all(isinstance(h, str) and h for h in hcas):
            raise ValueError("verify_hcas must be a list of RDMA device names (mlx5_0, ibp24s0, or dev:port); got %r"
                             % (hcas,))
        compute = _named_ports(devices, hcas)
    else:
        compute = [facts_of(pid) for pid in by_role.get("compute") or []]
    taken = set((name, number) for name, number, _p, _present in compute)
    storage = [facts_of(pid) for pid in by_role.get("storage") or []]
    storage = [item for item in storage if (item[0], item[1]) not in taken]
    rails = [_entry("compute", rail, *item) for rail, item in enumerate(compute)]
    stor = [_entry("storage", index, *item) for index, item in enumerate(storage)]
    ports = []
    for role in port_roles.ROLES:
        for pid in by_role.get(role) or []:
            name, num = pid.rsplit(":", 1)
            port = devices[name]["ports"][num]
            ports.append({"device": name, "port": int(num), "role": role, "rail": port.get("rail"),
                          "link_layer": port.get("link_layer"), "state": port.get("state"),
                          "rate_gbps": port.get("rate_gbps"), "netdev": port.get("netdev")})
    if hcas:  # verify_hcas names the rails: the ports it lists are compute, in its order
        rail_of = dict(((r["hca"], r["port"]), r["rail"]) for r in rails)
        for port in ports:
            port["rail"] = rail_of.get((port["device"], port["port"]))
            if port["rail"] is not None:
                port["role"] = "compute"
    return {
        "group": group,
        "link_layer": link_layer,
        "rails": rails,
        "hcas": _unique(r["hca"] for r in rails),
        "storage": stor,
        "storage_hcas": _unique(s["hca"] for s in stor),
        "ports": ports,
        "gdr_expected": mode == "true" or (mode == "auto" and bool(gpu_driver)),
    }


def _unique(names):
    out = []
    for name in names:
        if name not in out:
            out.append(name)
    return out


def nccl_conf(text):
    """``/etc/nccl.conf`` -> ``{NAME: value}``: one ``NAME=VALUE`` per line, ``#`` starts a comment, last one wins."""
    settings = {}
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" not in line:
            continue
        name, value = line.split("=", 1)
        if name.strip():
            settings[name.strip()] = value.strip()
    return settings


def _hca_ports(value, devices):
    """NCCL_IB_HCA -> (exclude, [(device, port or None)]): each entry as the devices of this host it selects (NCCL's
    grammar, ``host.nccl_hca``: a name without ``=`` is a prefix), or as written when it selects none."""
    exclude, exact, entries = parse_hca_list(value)
    out = []
    for name, number in entries:
        for device in entry_devices(name, exact, devices) or [name]:
            if (device, number) not in out:
                out.append((device, number))
    return exclude, out


def nccl_conf_findings(host, settings, rdma, path="/etc/nccl.conf", fabrics=None):
    """Findings ``{host, severity, check, device, port, expected, found, cause, fix}`` for what cannot work, and for
    an NCCL_IB_HCA that names a port of another role than compute or leaves out an ACTIVE compute port (warnings).
    ``fabrics``: the host's groups (the default roles of facts read without them)."""
    findings = []
    devices = (rdma or {}).get("devices") or {}
    exclude, entries = _hca_ports(settings.get("NCCL_IB_HCA"), devices)
    listed = []
    if not exclude:
        for name, number in entries:
            ports = (devices.get(name) or {}).get("ports") or {}
            chosen = [str(number)] if number else (sorted(ports, key=int) or ["1"])
            for pnum in chosen:
                port = ports.get(pnum)
                listed.append((name, pnum, port))
                if port is None:
                    findings.append(_finding(
                        host, "nccl_conf_hca", name, pnum, "an RDMA port of this host",
                        "%s names %s:%s, which this host does not have" % (path, name, pnum),
                        "NCCL_IB_HCA lists a device or port that does not exist here: NCCL skips it, and with no "
                        "other usable port falls back to sockets",
                        "write NCCL_IB_HCA from this host's facts (hpcnet.rdma.nccl: site.yml --tags nccl) or fix the "
                        "device name"))
                elif port.get("state") != "ACTIVE":
                    findings.append(_finding(
                        host, "nccl_conf_hca", name, pnum, "ACTIVE",
                        "%s:%s is %s/%s" % (name, pnum, port.get("state"), port.get("phys_state")),
                        "NCCL_IB_HCA in %s names a port that is not ACTIVE: NCCL cannot use it, and uses sockets when "
                        "no listed port is up" % path,
                        "bring the port up (cable, switch port, SM on InfiniBand) or leave it out of NCCL_IB_HCA "
                        "(hpcnet.rdma.nccl writes only ACTIVE ports: run site.yml --tags nccl)"))
    gid = settings.get("NCCL_IB_GID_INDEX")
    if gid is not None and gid.strip().lstrip("-").isdigit():
        index = int(gid)
        for name, pnum, port in listed or [(d, n, p) for d in sorted(devices, key=natural_key)
                                           for n, p in sorted(((devices[d].get("ports") or {}).items()))]:
            if not port or port.get("link_layer") != "Ethernet":
                continue
            want = port.get("roce_v2_ipv4_gid_index")
            if want is not None and index != want:
                entry = next((g for g in port.get("gids") or [] if g.get("index") == index), None)
                found = ("GID index %d: %s (%s)" % (index, entry.get("gid"), entry.get("type")) if entry
                         else "GID index %d: an empty entry" % index)
                findings.append(_finding(
                    host, "nccl_conf_gid_index", name, pnum, "NCCL_IB_GID_INDEX=%d (RoCE v2, IPv4)" % want, found,
                    "NCCL_IB_GID_INDEX in %s is not the port's RoCE v2 IPv4 GID: RoCE v1, link-local or empty "
                    "entries cannot be routed between hosts, so the queue pairs fail to connect" % path,
                    "set NCCL_IB_GID_INDEX=%d (hpcnet.rdma.nccl writes it from facts: site.yml --tags nccl), or "
                    "remove it (NCCL 2.21+ picks RoCE v2 IPv4 itself)" % want))
                break
    if not exclude and entries:
        findings += _role_findings(host, entries, port_roles.planned(rdma or {}, fabrics or ()), path)
    return findings


def _role_findings(host, entries, planned, path):
    """NCCL_IB_HCA against the roles: a listed port that is not compute, an ACTIVE compute port not listed."""
    out = []
    devices = planned.get("devices") or {}
    named = set()
    for name, number in entries:
        ports = (devices.get(name) or {}).get("ports") or {}
        for pnum in ([str(number)] if number else sorted(ports, key=int)):
            named.add("%s:%s" % (name, pnum))
            role = (ports.get(pnum) or {}).get("role")
            if role not in (None, "compute"):
                out.append(dict(_finding(
                    host, "nccl_conf_hca", name, pnum, "compute ports only (a %s port is not a rail)" % role,
                    "%s names %s:%s, a %s port" % (path, name, pnum, role),
                    "NCCL_IB_HCA lists a port whose role is %s: NCCL sends its traffic over it too, onto the %s "
                    "network, and pairs the rails of the hosts wrongly" % (role, role),
                    "write NCCL_IB_HCA from this host's facts (hpcnet.rdma.nccl: site.yml --tags nccl lists the compute "
                    "ports in rail order), or give the port the role compute (rdma_port_roles)"), severity="warning"))
    for pid in (planned.get("ports_by_role") or {}).get("compute") or []:
        name, pnum = pid.rsplit(":", 1)
        if pid not in named and (devices[name]["ports"][pnum] or {}).get("state") == "ACTIVE":
            out.append(dict(_finding(
                host, "nccl_conf_hca", name, pnum, "every ACTIVE compute port (rail %s)"
                % devices[name]["ports"][pnum].get("rail"), "%s does not name %s" % (path, pid),
                "NCCL_IB_HCA leaves out an ACTIVE compute port: NCCL runs on fewer rails than the host has (less "
                "bandwidth), and rail r of this host no longer meets rail r of the others",
                "write NCCL_IB_HCA from this host's facts again (hpcnet.rdma.nccl: site.yml --tags nccl)"),
                severity="warning"))
    return out


def _finding(host, check, device, port, expected, found, cause, fix):
    return {"host": host, "severity": "error", "check": check, "device": device,
            "port": int(port) if str(port).isdigit() else port, "expected": expected, "found": found,
            "cause": cause, "fix": fix}
