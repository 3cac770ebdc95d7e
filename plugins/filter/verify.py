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


def fabric_report_html(report):
    """A fabric report -> ``fabric-report.html``: one page, inline CSS, no script, font or image from elsewhere."""
    try:
        return html_mod.render_html(report)
    except fabric_report.ReportError as exc:
        raise AnsibleFilterError(str(exc))


def _group_steps(hosts, pattern, pairs, rails):
    steps = []
    for index, round_pairs in enumerate(rounds_mod.schedule(hosts, pattern, pairs)):
        most = max([min(int(rails.get(c, 1)), int(rails.get(s, 1))) for c, s in round_pairs] or [0])
        for rail in range(most):
            on_rail = [[c, s] for c, s in round_pairs if rail < min(int(rails.get(c, 1)), int(rails.get(s, 1)))]
            steps.append({"round": index, "rail": rail, "pairs": on_rail})
    return steps


def perftest_rounds(hosts, pattern, pairs=None, rails=None):
    """Hosts -> steps ``{round, rail, pairs}``: each round of disjoint ``[client, server]`` pairs once per rail.

    ``hosts`` is a list, or a dict of groups (fabrics) -> hosts: each group is scheduled on its own (a pair never
    spans two groups) and the steps with the same round and rail run together. ``rails`` maps a host to its number
    of rails (HCA i of one host tests HCA i of the other); a pair runs on the rails both hosts have. Without it every
    pair runs on rail 0 only.
    """
    groups = hosts if isinstance(hosts, dict) else {"": hosts}
    rails = rails or {}
    everyone = [h for members in groups.values() for h in members]
    merged = {}
    try:
        if pattern == "pairs":
            errors = rounds_mod.pair_errors(everyone, pairs)
            group_of = dict((h, g) for g, members in groups.items() for h in members)
            errors += ["verify_perftest_pairs[%d] spans two fabrics (%s in %s, %s in %s)"
                       % (i, p[0], group_of[p[0]], p[1], group_of[p[1]])
                       for i, p in enumerate(pairs or []) if not errors and group_of[p[0]] != group_of[p[1]]]
            if errors:
                raise ValueError("; ".join(errors))
        for name, members in groups.items():
            members = list(members)
            own = [p for p in pairs or [] if p[0] in members] if pattern == "pairs" else None
            if pattern == "pairs" and not own:
                continue
            for step in _group_steps(members, pattern, own, rails):
                merged.setdefault((step["round"], step["rail"]), []).extend(step["pairs"])
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))
    return [{"round": r, "rail": rail, "pairs": merged[(r, rail)]} for r, rail in sorted(merged)]


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
                "perftest_rounds": perftest_rounds, "perftest_pair_errors": perftest_pair_errors}
