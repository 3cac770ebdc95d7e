# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl-tests in the verify playbook: the launcher's argument list, and each run's verdict per host.

- ``launcher_argv``: OpenMPI ``mpirun`` (one rank per host by default, ``-x`` for every NCCL/launcher variable) or
  Slurm ``srun`` (``--nodelist``, ``--export=ALL``), wrapped in coreutils ``timeout`` so that a hung job ends.
- ``test_verdicts``: an ``hpcnet.rdma.nccl_transport`` analysis of the run's output plus nccl-tests' own footer ->
  per inventory host ``{net_transport, link_layer, gdr, fallback_to_socket, busbw_gbps}`` and findings: unmet
  expectations (the analyser's findings, with NCCL's own error meanings), wrong results (a non-zero ``#wrong`` or
  ``# Out of bounds values : N FAILED``) and a bus bandwidth under the threshold.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

LAUNCHERS = ("mpirun", "srun")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)\s*$", re.M)
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.]+)", re.M)
_LINK_LAYER = {"InfiniBand": "IB", "IB": "IB", "RoCE": "RoCE", "Ethernet": "RoCE"}


def launch_address(hostvars):
    """The address a launcher reaches a host at: verify_oob_address, the default IPv4 address, ansible_host, name."""
    facts = hostvars.get("ansible_facts") or {}
    return (hostvars.get("verify_oob_address") or (facts.get("default_ipv4") or {}).get("address")
            or hostvars.get("ansible_host") or hostvars.get("inventory_hostname"))


def launcher_argv(launcher, hosts, env, launcher_args, program, test_args, timeout, mpirun="mpirun", srun="srun",
                  ranks_per_host=1):
    """The whole command: ``timeout`` + launcher + program + its arguments. ``hosts``: list of host variables."""
    if launcher not in LAUNCHERS:
        raise ValueError("verify_launcher must be one of: %s; got %r" % (", ".join(LAUNCHERS), launcher))
    per = int(ranks_per_host)
    argv = ["timeout", "--kill-after=10", str(int(timeout))]
    if launcher == "mpirun":
        argv += [mpirun, "-np", str(per * len(hosts)), "-H",
                 ",".join("%s:%d" % (launch_address(h), per) for h in hosts)]
        for name in sorted(env or {}):
            argv += ["-x", name]
    else:
        nodes = [h.get("verify_slurm_node") or h.get("inventory_hostname") for h in hosts]
        argv += [srun, "--nodes", str(len(hosts)), "--ntasks-per-node", str(per), "--nodelist", ",".join(nodes),
                 "--export", "ALL"]
    return argv + [str(a) for a in launcher_args or []] + [program] + [str(a) for a in test_args or []]


def footer(text):
    """nccl-tests' footer: ``{out_of_bounds: int|None, avg_busbw: float|None}``."""
    oob = _OUT_OF_BOUNDS.findall(text or "")
    avg = _AVG_BUSBW.findall(text or "")
    return {"out_of_bounds": int(oob[-1][0]) if oob else None, "avg_busbw": float(avg[-1]) if avg else None}


def _wrong_rows(busbw):
    bad = []
    for row in (busbw or {}).get("rows") or []:
        for side in ("out_of_place", "in_place"):
            value = (row.get(side) or {}).get("wrong")
            if value not in (None, "N/A", "0", 0):
                bad.append("%s B %s: #wrong %s" % (row.get("size"), side.replace("_", "-"), value))
    return bad


def _inventory_host(nccl_host, hosts):
    for h in hosts:
        facts = h.get("ansible_facts") or {}
        names = {h.get("inventory_hostname"), facts.get("hostname"), facts.get("nodename"),
                 (facts.get("fqdn") or "").split(".")[0]}
        if nccl_host in names or (nccl_host or "").split(".")[0] in names:
            return h.get("inventory_hostname")
    return None


def _finding(host, check, expected, found, cause, fix, severity="error"):
    return {"host": host, "severity": severity, "check": check, "expected": expected, "found": found,
            "cause": cause, "fix": fix}


def _host_entries(analysis, hosts):
    entries = {}
    for entry in (analysis.get("per_host") or {}).values():
        name = _inventory_host(entry.get("host"), hosts)
        if name is None:
            continue
        transport = entry.get("net_transport")
        layers = sorted(set(_LINK_LAYER.get(d.get("link_layer"), d.get("link_layer"))
                            for d in entry.get("ib_devices") or []))
        entries[name] = {
            "net_transport": transport,
            "link_layer": layers[0] if len(layers) == 1 else (layers or None),
            "gdr": entry.get("gdr"),
            "fallback_to_socket": transport == "Socket",
            "hcas": ["%s:%s" % (d.get("name"), d.get("port")) for d in entry.get("ib_devices") or []],
        }
    return entries


def _role_findings(entries, hosts):
    """A warning per host whose NCCL used ports that are not its compute ports (``verify_plan.ports``)."""
    out = []
    for h in hosts:
        name = h.get("inventory_hostname")
        roles = dict(("%s:%s" % (p.get("device"), p.get("port")), p.get("role"))
                     for p in (h.get("verify_plan") or {}).get("ports") or [])
        other = ["%s (%s)" % (hca, roles[hca]) for hca in (entries.get(name) or {}).get("hcas") or []
                 if roles.get(hca) not in (None, "compute")]
        if other:
            out.append(_finding(
                name, "nccl_hcas", "NCCL on the compute ports only", "NCCL used %s" % ", ".join(other),
                "NCCL_IB_HCA (in /etc/nccl.conf or the job's environment) selects ports that are not compute ports: "
                "NCCL's traffic also runs over the storage or management network, and its rails no longer match "
                "the other hosts'",
                "write NCCL_IB_HCA from facts (ansible-playbook hpcnet.rdma.site --tags nccl), and take NCCL_IB_HCA "
                "out of the launcher's environment (verify_launcher_env) or the container image", "warning"))
    return out


def test_verdict(test, fabric, analysis, stdout, rc, hosts, min_busbw=None):
    """One nccl-test run -> ``{test, fabric, rc, summary, hosts: {host: verdict}, findings, busbw, evidence}``."""
    names = [h.get("inventory_hostname") for h in hosts]
    launcher = names[0] if names else None
    entries = _host_entries(analysis, hosts)
    busbw = analysis.get("busbw") or {}
    foot = footer(stdout)
    avg = busbw.get("avg_busbw_gbps") if busbw.get("avg_busbw_gbps") is not None else foot["avg_busbw"]
    findings = []
    for name in names:
        entry = entries.setdefault(name, {"net_transport": None, "link_layer": None, "gdr": None,
                                          "fallback_to_socket": None, "hcas": []})
        entry["busbw_gbps"] = avg
    for message in analysis.get("findings") or []:
        culprit = next((n for n in names if re.search(r"\b%s\b" % re.escape(n), message)), None)
        errors = [e.get("meaning") or e.get("text") for e in analysis.get("errors") or []][:2]
        findings.append(_finding(
            culprit or launcher, "nccl_transport", "NCCL over %s with the fabric's HCAs" % fabric, message,
            "; ".join(e for e in errors if e) or "NCCL did not use the fabric as expected (see the evidence lines)",
            "check NCCL_IB_HCA, NCCL_IB_GID_INDEX and nvidia_peermem on the hosts named; rerun "
            "ansible-playbook hpcnet.rdma.site --tags nccl,rdma_host to rewrite them from facts"))
    if rc not in (0, None) and not findings:
        findings.append(_finding(
            launcher, "nccl_tests_exit", "exit code 0", "exit code %s" % rc,
            "the launcher or nccl-tests failed: %s" % (analysis.get("summary") or "no NCCL output"),
            "read the evidence lines; check passwordless SSH (mpirun) or the Slurm allocation (srun), and that "
            "%s exists on every host" % test))
    findings += _role_findings(entries, hosts)
    wrong = _wrong_rows(busbw)
    if wrong or (foot["out_of_bounds"] or 0) > 0:
        findings.append(_finding(
            launcher, "nccl_tests_wrong_results", "#wrong 0 and 'Out of bounds values : 0 OK'",
            "; ".join(wrong[:4] + (["Out of bounds values : %d FAILED" % foot["out_of_bounds"]]
                                   if foot["out_of_bounds"] else [])),
            "the collective returned wrong data: a GPU, NIC or driver corrupts data in flight (memory errors, PCIe "
            "ACS/ATS misconfiguration, a broken GDR path), whatever the bandwidth",
            "rerun with NCCL_NET_GDR_LEVEL=LOC to take GDR out; check `nvidia-smi -q -d ECC`, PCIe ACS (must be off "
            "for GDR) and the HCA's firmware"))
    if min_busbw is not None and avg is not None and float(avg) < float(min_busbw):
        findings.append(_finding(
            launcher, "nccl_busbw", ">= %s GB/s average bus bandwidth" % min_busbw, "%s GB/s" % avg,
            "NCCL runs, but slower than the threshold: a port below line rate, congestion without PFC/ECN, or "
            "traffic on fewer rails than the hosts have",
            "compare with the perftest matrix of this report; check the counter deltas for pause frames and "
            "discards"))
    return {"test": test, "fabric": fabric, "rc": rc, "summary": analysis.get("summary"), "hosts": entries,
            "findings": findings, "busbw": {"avg_busbw_gbps": avg, "out_of_bounds": foot["out_of_bounds"],
                                            "rows": busbw.get("rows") or []},
            "evidence": analysis.get("evidence") or {}}
