# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl-tests in the verify playbook: the launcher's argument list, and each run's verdict per host.

- ``launcher_argv``: OpenMPI ``mpirun`` (one rank per host by default, ``-x`` for every NCCL/launcher variable) or
  Slurm ``srun`` (``--nodelist``, ``--export=ALL``), wrapped in coreutils ``timeout`` so that a hung job ends.
- ``launcher_args``: the arguments of the launcher the run uses (``verify_mpirun_args`` or ``verify_srun_args``, or
  the launcher-neutral ``verify_launcher_args``; both at once is refused by ``verify_plan.input_errors``).
- ``test_verdicts``: an ``hpcnet.rdma.nccl_transport`` analysis of the run's output plus nccl-tests' own footer ->
  per inventory host ``{net_transport, link_layer, gdr, fallback_to_socket, busbw_gbps}`` and findings: unmet
  expectations (the analyser's findings, with NCCL's own error meanings), a failed launch (the launcher's own error,
  ``launcher_output``, with the last lines of its stderr and stdout), ranks that ran alone (NCCL's communicators
  smaller than the job: the launcher did not wire the ranks together), wrong results (a non-zero ``#wrong`` or
  ``# Out of bounds values : N FAILED``) and a bus bandwidth under the threshold.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import launcher_output

LAUNCHERS = ("mpirun", "srun")
# each launcher's own argument list (the role's variable), next to the launcher-neutral verify_launcher_args
LAUNCHER_ARGS = {"mpirun": "verify_mpirun_args", "srun": "verify_srun_args"}
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)\s*$", re.M)
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.]+)", re.M)
_LINK_LAYER = {"InfiniBand": "IB", "IB": "IB", "RoCE": "RoCE", "Ethernet": "RoCE"}


def launch_address(hostvars):
    """The address a launcher reaches a host at: verify_oob_address, the default IPv4 address, ansible_host, name."""
    facts = hostvars.get("ansible_facts") or {}
    return (hostvars.get("verify_oob_address") or (facts.get("default_ipv4") or {}).get("address")
            or hostvars.get("ansible_host") or hostvars.get("inventory_hostname"))


def launcher_args(launcher, common=None, own=None):
    """The arguments of the launcher the run uses: its own list (``verify_mpirun_args``/``verify_srun_args``), else
    the launcher-neutral ``verify_launcher_args``. Raises ValueError when both are given (which one was meant?)."""
    if common and own:
        raise ValueError("verify_launcher_args and %s are both set for verify_launcher=%s: give the arguments once, "
                         "in %s (verify_launcher_args is for arguments of whichever launcher runs)"
                         % (LAUNCHER_ARGS.get(launcher), launcher, LAUNCHER_ARGS.get(launcher)))
    args = own or common or []
    # a role input's type is checked, not converted: a string given for the list arrives as a string
    args = [args] if isinstance(args, str) else list(args)
    # the launcher gets each item as one argument (an argument list, no shell): "--partition gpu" would reach srun as
    # one unknown option, and a string given for the list becomes such an item
    joined = [a for a in args if _several_arguments(a)]
    if joined:
        raise ValueError("%s takes one argument per list item, as the launcher gets them (no shell splits them); got "
                         "%s: write %s" % (LAUNCHER_ARGS.get(launcher) if own else "verify_launcher_args",
                                           ", ".join(repr(a) for a in joined), [w for a in joined for w in a.split()]))
    return args


def _several_arguments(item):
    """An item that is an option followed by words of its own (``--partition gpu``) or by another option
    (``--mpi=pmix --exclusive``); ``--comment=rail check`` is one argument whose value has a space."""
    words = item.split() if isinstance(item, str) and item.startswith("-") else []
    return len(words) > 1 and ("=" not in words[0] or any(w.startswith("-") for w in words[1:]))


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


def _ranks_alone(analysis, hosts, launcher, ranks_per_host):
    """Findings when NCCL's communicators are smaller than the job (``nranks 1`` where the fabric has more hosts): the
    launcher started the processes, but not as one MPI job, so each ran alone (NCCL used no network, bus bandwidth 0).
    One finding per host of the run; none when the log shows no communicator size."""
    expected = len(hosts) * max(1, int(ranks_per_host or 1))
    nranks = analysis.get("ranks")
    if not isinstance(nranks, int) or expected < 2 or nranks >= expected:
        return []
    seen = len(analysis.get("hosts") or []) or len(analysis.get("per_host") or {})
    if launcher == "srun":
        cause = ("srun did not wire the ranks together: without PMIx (no --mpi=pmix, and no MpiDefault=pmix "
                 "in slurm.conf or an --mpi=none over it) it starts each rank as its own %d-rank job, so NCCL used "
                 "no network and the bus bandwidth is 0" % nranks)
        fix = ("set MpiDefault=pmix in slurm.conf (as GPU clusters do; `srun --mpi=list` shows the plugins Slurm "
               "has), or add --mpi=pmix to verify_srun_args")
    else:
        cause = ("%s did not wire the ranks together: each process started its own %d-rank job (nccl-tests built "
                 "without MPI=1, or against another MPI than the launcher's), so NCCL used no network and the bus "
                 "bandwidth is 0" % (launcher or "the launcher", nranks))
        fix = ("build nccl-tests with MPI=1 against the MPI of verify_mpirun (MPI_HOME), or launch it with the "
               "launcher of the MPI it was built with")
    found = "NCCL's communicator has %d rank%s (nranks %d)%s" % (
        nranks, "" if nranks == 1 else "s", nranks,
        ", on each of %d hosts" % seen if seen > 1 else "")
    return [_finding(h.get("inventory_hostname"), "nccl_ranks",
                     "one communicator of %d ranks (%d hosts x %d)" % (expected, len(hosts), expected // len(hosts)),
                     found, cause, fix) for h in hosts]


def test_verdict(test, fabric, analysis, stdout, rc, hosts, min_busbw=None, stderr="", launcher=None, timeout=None,
                 ranks_per_host=1):
    """One nccl-test run -> ``{test, fabric, rc, summary, hosts: {host: verdict}, findings, busbw, evidence}``.

    ``launcher`` (``mpirun``/``srun``), ``stderr`` and ``timeout`` explain a failed launch; ``ranks_per_host`` gives
    the job's size (hosts x ranks) that NCCL's communicators must have."""
    names = [h.get("inventory_hostname") for h in hosts]
    first = names[0] if names else None
    entries = _host_entries(analysis, hosts)
    busbw = analysis.get("busbw") or {}
    foot = footer(stdout)
    avg = busbw.get("avg_busbw_gbps") if busbw.get("avg_busbw_gbps") is not None else foot["avg_busbw"]
    failure = launcher_output.classify(launcher, stdout, stderr, rc, timeout)
    findings = []
    for name in names:
        entry = entries.setdefault(name, {"net_transport": None, "link_layer": None, "gdr": None,
                                          "fallback_to_socket": None, "hcas": []})
        entry["busbw_gbps"] = avg
    for message in analysis.get("findings") or []:
        culprit = next((n for n in names if re.search(r"\b%s\b" % re.escape(n), message)), None)
        errors = [e.get("meaning") or e.get("text") for e in analysis.get("errors") or []][:2]
        findings.append(_finding(
            culprit or first, "nccl_transport", "NCCL over %s with the fabric's HCAs" % fabric, message,
            "; ".join(e for e in errors if e) or "NCCL did not use the fabric as expected (see the evidence lines)",
            "check NCCL_IB_HCA, NCCL_IB_GID_INDEX and nvidia_peermem on the hosts named; rerun "
            "ansible-playbook hpcnet.rdma.site --tags nccl,rdma_host to rewrite them from facts"))
        if failure:
            findings[-1]["evidence"] = failure["evidence"]
    if failure and (failure["kind"] not in ("exit_code", "collective_failed") or not findings):
        findings.insert(0, dict(_finding(
            first, "nccl_tests_exit", "exit code 0", "exit code %s" % rc,
            failure["cause"] if failure["kind"] != "exit_code" or not analysis.get("summary")
            else "%s: %s" % (failure["cause"], analysis["summary"]), failure["fix"]),
            evidence=failure["evidence"]))
    findings += _ranks_alone(analysis, hosts, launcher, ranks_per_host)
    findings += _role_findings(entries, hosts)
    wrong = _wrong_rows(busbw)
    if wrong or (foot["out_of_bounds"] or 0) > 0:
        findings.append(_finding(
            first, "nccl_tests_wrong_results", "#wrong 0 and 'Out of bounds values : 0 OK'",
            "; ".join(wrong[:4] + (["Out of bounds values : %d FAILED" % foot["out_of_bounds"]]
                                   if foot["out_of_bounds"] else [])),
            "the collective returned wrong data: a GPU, NIC or driver corrupts data in flight (memory errors, PCIe "
            "ACS/ATS misconfiguration, a broken GDR path), whatever the bandwidth",
            "rerun with NCCL_NET_GDR_LEVEL=LOC to take GDR out; check `nvidia-smi -q -d ECC`, PCIe ACS (must be off "
            "for GDR) and the HCA's firmware"))
    if min_busbw is not None and avg is not None and float(avg) < float(min_busbw):
        findings.append(_finding(
            first, "nccl_busbw", ">= %s GB/s average bus bandwidth" % min_busbw, "%s GB/s" % avg,
            "NCCL runs, but slower than the threshold: a port below line rate, congestion without PFC/ECN, or "
            "traffic on fewer rails than the hosts have",
            "compare with the perftest matrix of this report; check the counter deltas for pause frames and "
            "discards"))
    return {"test": test, "fabric": fabric, "rc": rc, "summary": analysis.get("summary"), "hosts": entries,
            "findings": findings, "busbw": {"avg_busbw_gbps": avg, "out_of_bounds": foot["out_of_bounds"],
                                            "rows": busbw.get("rows") or []},
            "evidence": analysis.get("evidence") or {}}
