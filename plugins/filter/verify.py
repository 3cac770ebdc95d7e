# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the verify role: what a host is expected to have, what its /etc/nccl.conf asks for, the perftest pairs
in rounds of disjoint pairs rail by rail, the nccl-tests launcher and verdicts, and the fabric report (data, HTML)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import fabric_report, fabric_report_html as html_mod
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import perftest_rounds as rounds_mod
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import verify_nccl, verify_plan, verify_report as report_mod


def verify_input_errors(inputs, hosts):
    """The verify role's ``verify_*`` inputs + the play's hosts -> one message per problem."""
    return verify_plan.input_errors(inputs or {}, hosts or [])


def verify_host_plan(rdma, group, hcas=None, gdr_mode="auto", gpu_driver=False, fabrics=None):
    """``ansible_facts.rdma`` + group -> ``{group, link_layer, rails, hcas, storage, storage_hcas, ports,
    gdr_expected}``."""
    try:
        return verify_plan.host_plan(rdma, group, hcas, gdr_mode, gpu_driver, fabrics)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def nccl_conf_settings(text):
    """``/etc/nccl.conf`` text -> ``{NAME: value}``."""
    return verify_plan.nccl_conf(text)


def nccl_conf_findings(settings, host, rdma, path="/etc/nccl.conf", fabrics=None):
    """NCCL settings of a host -> findings for ports NCCL cannot use, a GID index that cannot connect, and ports of
    another role than compute."""
    return verify_plan.nccl_conf_findings(host, settings or {}, rdma, path, fabrics)


def verify_launcher_argv(hosts, launcher, env, launcher_args, program, test_args, timeout, mpirun="mpirun",
                         srun="srun", ranks_per_host=1, mpirun_args=None, srun_args=None):
    """Host variables of a fabric's hosts -> ``timeout`` + mpirun/srun + the nccl-test's argument list; the
    launcher's own arguments (``mpirun_args``/``srun_args``), else the launcher-neutral ``launcher_args``."""
    try:
        own = {"mpirun": mpirun_args, "srun": srun_args}.get(launcher)
        return verify_nccl.launcher_argv(launcher, hosts, env, verify_nccl.launcher_args(launcher, launcher_args, own),
                                         program, test_args, timeout, mpirun, srun, ranks_per_host)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def nccl_test_verdicts(analyses, runs, fabric, hosts, min_busbw=None, launcher=None, timeout=None, ranks_per_host=1):
    """nccl_transport results + the launcher's results (same order) -> one verdict per nccl-test."""
    verdicts = []
    for analysis, run in zip(analyses or [], runs or []):
        verdicts.append(verify_nccl.test_verdict(run.get("__verify_nccl_test") or run.get("item"), fabric, analysis,
                                                 run.get("stdout", ""), run.get("rc"), hosts, min_busbw,
                                                 stderr=run.get("stderr", ""), launcher=launcher, timeout=timeout,
                                                 ranks_per_host=ranks_per_host))
    return verdicts


def verify_report(parts, min_bw_pct, meta=None):
    """``{hosts: [host variables], spec, nccl}`` -> the fabric report (fabric-report.json)."""
    try:
        return report_mod.assemble(parts, min_bw_pct, meta)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def verify_finding_line(finding):
    """A finding -> one line: ``host hca:port: check: expected ..., found ...``."""
    return report_mod.finding_line(finding)


def fabric_report_html(report):
    """A fabric report -> ``fabric-report.html``: one page, inline CSS, no script, font or image from elsewhere."""
    try:
        return html_mod.render_html(report)
    except fabric_report.ReportError as exc:
        raise AnsibleFilterError(str(exc))


def perftest_rounds(hosts, pattern, pairs=None, rails=None, storage=None):
    """Hosts -> steps ``{round, rail, pairs}``: each round of disjoint ``[client, server]`` pairs once per rail.

    ``hosts`` is a list, or a dict of groups (fabrics) -> hosts: each group is scheduled on its own (a pair never
    spans two groups) and the steps with the same round and rail run together. ``rails`` maps a host to its rails (a
    number, or ``verify_plan.rails``): rail r of one host tests rail r of the other, whatever the devices are called;
    a pair runs on the rails both hosts have. Without it every pair runs on rail 0 only. ``storage`` (the hosts'
    ``verify_plan.storage``) adds the storage matrix: steps with ``role: storage``, storage port i with port i.
    """
    try:
        return rounds_mod.steps(hosts, pattern, pairs, rails, storage)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def perftest_unpaired(hosts, pattern, pairs=None, rails=None, storage=None, allow_uneven=False):
    """The findings for the rails (and storage ports) the scheduled pairs leave untested: rail counts that differ
    between the two hosts of a pair, or a rail whose link layers differ."""
    try:
        return rounds_mod.unpaired(hosts, pattern, pairs, rails, storage, _truthy(allow_uneven))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def _truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "on", "1")
    return bool(value)


def perftest_pair_errors(hosts, pairs):
    """The problems of a ``verify_perftest_pairs`` list against the hosts of the run, each naming its entry."""
    return rounds_mod.pair_errors(list(hosts), pairs)


class FilterModule:
    """hpcnet.rdma verify filters."""

    def filters(self):
        return {"verify_host_plan": verify_host_plan, "nccl_conf_settings": nccl_conf_settings,
                "nccl_conf_findings": nccl_conf_findings, "verify_launcher_argv": verify_launcher_argv,
                "nccl_test_verdicts": nccl_test_verdicts, "verify_report": verify_report,
                "verify_finding_line": verify_finding_line, "verify_input_errors": verify_input_errors,
                "fabric_report_html": fabric_report_html,
                "perftest_rounds": perftest_rounds, "perftest_pair_errors": perftest_pair_errors,
                "perftest_unpaired": perftest_unpaired}
