# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The perftest matrix of the verify playbook: each client's result -> the report's rows and findings.

A result belongs to a rail (rail r of the client against rail r of the server, whatever the devices are called) or,
with ``role: storage``, to a storage port (storage port i against storage port i); its rows keep the role and both
devices. A bandwidth result is compared with the line rate of the pair (the lower of the two ports' rates, Gb/s); under
``min_pct`` % it is a finding, pinned on the host the other evidence points at (a host whose RoCE QoS state differs
from the profile, or whose port a spec check found wrong) or else on the client. A test that produced no result is
a finding with perftest's own failure (device, port, server not listening, QP to RTR/RTS, timeout).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

_SUSPECT_CHECKS = ("roce_qos", "port_state", "port_rate", "link_layer", "mtu")


def _suspect(client, server, spec_findings, rail_hca):
    for host in (server, client):
        for f in spec_findings or []:
            if f.get("host") == host and f.get("severity") == "error" and \
                    any(f.get("check", "").startswith(c) for c in _SUSPECT_CHECKS) and \
                    (f.get("device") in (None, rail_hca.get(host))):
                return host, f
    return None, None


def _low_cause(link_layer, suspect_finding):
    if suspect_finding is not None:
        return "%s (%s)" % (suspect_finding.get("cause"), suspect_finding.get("check"))
    if link_layer == "Ethernet":
        return ("RoCE traffic is lossy or congested: PFC is not on for the traffic's priority on both hosts or the "
                "switch, the ToS does not map to the lossless priority, or ECN/DCQCN is off")
    return "the link trained below its rate, or the path crosses a degraded or congested switch link"


def _low_fix(link_layer, suspect_host):
    where = " on %s" % suspect_host if suspect_host else ""
    if link_layer == "Ethernet":
        return ("apply the RoCE profile%s (ansible-playbook hpcnet.rdma.site --tags roce) and check the switch's PFC "
                "and ECN on the same priority; the counter deltas show pause frames and discards per port" % where)
    return ("check the port's rate and the cable%s (ibstat, mlxlink -d <hca>), and the switch ports of the path "
            "(ibdiagnet)" % where)


def _where(r):
    return "%s %s" % ("storage port" if r.get("role") == "storage" else "rail", r.get("rail"))


def matrix(results, min_pct, spec_findings=None):
    """Client results (from the playbook) -> ``{perftest: [...], latency: [...], findings: [...]}``."""
    rows, latency, findings = [], [], []
    for r in results or []:
        rail_hca = {r["client"]: r.get("device"), r["server"]: r.get("server_device", r.get("device"))}
        summary = r.get("summary") or {}
        failed = r.get("failure") or not summary
        base = {"rail": r.get("rail"), "client": r["client"], "server": r["server"], "device": r.get("device"),
                "test": r.get("test")}
        for key in ("role", "server_device"):
            if r.get(key):
                base[key] = r[key]
        if str(r.get("test", "")).endswith("_lat"):
            if not failed:
                latency.append(dict(base, t_typical_us=summary.get("t_typical_us"), t_avg_us=summary.get("t_avg_us"),
                                    p99_us=summary.get("p99_us"), bytes=summary.get("bytes")))
        line = r.get("line_rate_gbps")
        if failed:
            failure = r.get("failure") or {}
            if not str(r.get("test", "")).endswith("_lat"):
                rows.append(dict(base, bw_avg_gbps=None, line_rate_gbps=line, pct=None,
                                 error=failure.get("cause") or r.get("msg") or "no result"))
            host = r["client"]
            if failure.get("kind") == "server_not_listening" and r.get("server_failure"):
                host, failure = r["server"], r["server_failure"]
            findings.append({
                "host": host, "severity": "error", "check": "perftest_%s" % ("latency" if str(r.get("test", "")).endswith("_lat") else "bandwidth"),
                "device": rail_hca.get(host), "expected": "%s %s -> %s on %s completes" % (r.get("test"), r["client"], r["server"], _where(r)),
                "found": r.get("msg") or failure.get("cause") or "no result row",
                "cause": failure.get("cause") or "perftest printed no result",
                "fix": failure.get("fix") or "run the same test by hand and read its output"})
            continue
        if str(r.get("test", "")).endswith("_lat"):
            continue
        bw = summary.get("bw_avg_gbps")
        pct = round(100.0 * bw / line, 1) if bw is not None and line else None
        rows.append(dict(base, bw_avg_gbps=bw, line_rate_gbps=line, pct=pct))
        if pct is not None and pct < float(min_pct):
            host, suspect = _suspect(r["client"], r["server"], spec_findings, rail_hca)
            findings.append({
                "host": host or r["client"], "severity": "error", "check": "perftest_bandwidth",
                "device": rail_hca.get(host or r["client"]),
                "expected": ">= %s%% of %s Gb/s" % (min_pct, line),
                "found": "%s -> %s %s: %s Gb/s (%s%%)" % (r["client"], r["server"], _where(r), bw, pct),
                "cause": _low_cause(r.get("link_layer"), suspect), "fix": _low_fix(r.get("link_layer"), host)})
    return {"perftest": rows, "latency": latency, "findings": findings}
