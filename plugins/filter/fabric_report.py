# -*- coding: utf-8 -*-
# Copyright: hpcnet.rdma contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the verify playbook: the fabric report as JSON data and as one self-contained HTML page."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.module_utils import fabric_report as report_mod


def fabric_report(hosts, findings=None, perftest=None, nccl=None, counters=None, meta=None, latency=None):
    """Host -> ``{group, checks}`` and the phases' results -> the fabric report (``fabric-report.json``)."""
    try:
        return report_mod.build_report(hosts, findings, perftest, nccl, counters, meta=meta, latency=latency)
    except report_mod.ReportError as exc:
        raise AnsibleFilterError(str(exc))


def fabric_report_html(report):
    """A fabric report -> ``fabric-report.html``: one page, inline CSS, no script, font or image from elsewhere."""
    try:
        return report_mod.render_html(report)
    except report_mod.ReportError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    """hpcnet.rdma fabric report filters."""

    def filters(self):
        return {"fabric_report": fabric_report, "fabric_report_html": fabric_report_html}
