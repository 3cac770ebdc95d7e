# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the verify playbook: what a host is expected to have, and what its /etc/nccl.conf asks for."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils import verify_nccl, verify_plan, verify_report as report_mod


def verify_input_errors(inputs, hosts):
    """The verify role's ``verify_*`` inputs + the play's hosts -> one message per problem."""
    return verify_plan.input_errors(inputs or {}, hosts or [])


def verify_host_plan(rdma, group, hcas=None, gdr_mode="auto", gpu_driver=False):
    """``ansible_facts.rdma`` + group -> ``{group, link_layer, rails, hcas, gdr_expected}``."""
    try:
        return verify_plan.host_plan(rdma, group, hcas, gdr_mode, gpu_driver)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def nccl_conf_settings(text):
    """``/etc/nccl.conf`` text -> ``{NAME: value}``."""
    return verify_plan.nccl_conf(text)


def nccl_conf_findings(settings, host, rdma, path="/etc/nccl.conf"):
    """NCCL settings of a host -> findings for ports NCCL cannot use and a GID index that cannot connect."""
    return verify_plan.nccl_conf_findings(host, settings or {}, rdma, path)


def verify_launcher_argv(hosts, launcher, env, launcher_args, program, test_args, timeout, mpirun="mpirun",
                         srun="srun", ranks_per_host=1):
    """Host variables of a fabric's hosts -> ``timeout`` + mpirun/srun + the nccl-test's argument list."""
    try:
        return verify_nccl.launcher_argv(launcher, hosts, env, launcher_args, program, test_args, timeout, mpirun,
                                         srun, ranks_per_host)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def nccl_test_verdicts(analyses, runs, fabric, hosts, min_busbw=None):
    """nccl_transport results + the launcher's results (same order) -> one verdict per nccl-test."""
    verdicts = []
    for analysis, run in zip(analyses or [], runs or []):
        verdicts.append(verify_nccl.test_verdict(run.get("__verify_nccl_test") or run.get("item"), fabric, analysis,
                                                 run.get("stdout", ""), run.get("rc"), hosts, min_busbw))
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


class FilterModule:
    """hpcnet.rdma verify filters."""

    def filters(self):
        return {"verify_host_plan": verify_host_plan, "nccl_conf_settings": nccl_conf_settings,
                "nccl_conf_findings": nccl_conf_findings, "verify_launcher_argv": verify_launcher_argv,
                "nccl_test_verdicts": nccl_test_verdicts, "verify_report": verify_report,
                "verify_finding_line": verify_finding_line, "verify_input_errors": verify_input_errors}
