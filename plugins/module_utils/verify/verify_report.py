# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Gather what the verify playbook's phases left on each host into the fabric report (fabric_report.build_report).

Per host (its variables): ``verify_plan`` (group, and its ports with their role and rail), ``verify_perftest_results``
(the tests it ran as client), ``__verify_nccl_conf_findings``, ``verify_counter_deltas`` and
``__verify_counter_findings``. Once for the play: the spec checks' result (``hpcnet.rdma.rdma_verify``), the
nccl-tests verdicts and the rails the perftest matrix left untested (``perftest_unpaired``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import fabric_report, verify_perftest


def _nccl_hosts(verdicts):
    hosts, findings = {}, []
    for verdict in verdicts or []:
        findings.extend(verdict.get("findings") or [])
        for host, entry in (verdict.get("hosts") or {}).items():
            entry = dict(entry, test=verdict.get("test"), fabric=verdict.get("fabric"),
                         summary=verdict.get("summary"),
                         evidence=[e.get("text") for kind in ("transport", "net", "gdr", "fallback", "error")
                                   for e in (verdict.get("evidence") or {}).get(kind) or []][:8])
            # the first test (all_reduce_perf) is the host's verdict; later tests add their findings only
            hosts.setdefault(host, entry)
    return hosts, findings


def assemble(parts, min_pct, meta=None):
    """``{hosts: [host variables], spec: rdma_verify result, nccl: [verdicts], perftest_unpaired: [findings]}`` -> the
    fabric report dict."""
    hostvars = [h for h in parts.get("hosts") or [] if h.get("verify_plan")]
    spec = parts.get("spec") or {}
    spec_findings = list(spec.get("findings") or [])
    spec_hosts = spec.get("hosts") or {}
    findings = list(spec_findings)
    results, counters, hosts = [], {}, {}
    for h in hostvars:
        name = h["inventory_hostname"]
        checks = dict((spec_hosts.get(name) or {}).get("checks") or {})
        conf = h.get("__verify_nccl_conf_findings")
        if conf is not None:
            checks["nccl_conf"] = "fail" if conf else "pass"
            findings.extend(conf)
        findings.extend(h.get("__verify_counter_findings") or [])
        hosts[name] = {"group": h["verify_plan"].get("group"), "checks": checks}
        if h["verify_plan"].get("ports") is not None:
            hosts[name]["ports"] = [_port_row(p) for p in h["verify_plan"]["ports"]]
        results.extend(h.get("verify_perftest_results") or [])
        if h.get("verify_counter_deltas") is not None:
            counters[name] = h["verify_counter_deltas"]
    matrix = verify_perftest.matrix(results, min_pct, findings)
    findings.extend(matrix["findings"])
    findings.extend(parts.get("perftest_unpaired") or [])
    nccl, nccl_findings = _nccl_hosts(parts.get("nccl"))
    findings.extend(nccl_findings)
    meta = dict(meta or {})
    busbw = meta.pop("min_busbw_gbps", None)
    meta.pop("min_bw_pct", None)
    meta["thresholds"] = {"min_bw_pct": float(min_pct)}
    if busbw not in (None, ""):
        meta["thresholds"]["min_busbw_gbps"] = float(busbw)
    basis = spec.get("rail_map_basis") or {}
    if spec.get("rail_map") is not None:
        meta["rail_map_basis"] = basis.get("basis")
        meta["rail_map_note"] = basis.get("note")
    return fabric_report.build_report(hosts=hosts, findings=findings, perftest=matrix["perftest"], nccl=nccl,
                                      counters=counters, meta=meta, latency=matrix["latency"] or None,
                                      rail_map=spec.get("rail_map"), pcie=spec.get("pcie"))


def _port_row(port):
    """A port of ``verify_plan.ports`` as the report lists it (null values left out)."""
    row = {"id": "%s:%s" % (port.get("device"), port.get("port")), "role": port.get("role")}
    for key in ("rail", "link_layer", "state", "rate_gbps", "netdev"):
        if port.get(key) is not None:
            row[key] = port[key]
    return row


def finding_line(finding):
    """One finding as one line for the play's failure message."""
    where = finding.get("host") or "fabric"
    if finding.get("device"):
        where += " %s%s" % (finding["device"], (":%s" % finding["port"]) if finding.get("port") else "")
    return "%s: %s: expected %s, found %s" % (where, finding.get("check"), finding.get("expected"),
                                              finding.get("found"))
