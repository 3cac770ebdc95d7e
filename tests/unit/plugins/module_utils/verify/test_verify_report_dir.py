"""verify_report_dir is refused by the verify role's preflight when it names no directory (the report is written after
every test has run)."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import verify_plan

GOOD = {"verify_min_bw_pct": 80, "verify_perftest_port": 18515, "verify_perftest_timeout": 60,
        "verify_nccl_timeout": 600, "verify_perftest_size": 1048576, "verify_perftest_iterations": 1000,
        "verify_nccl_ranks_per_host": 8, "verify_perftest_pattern": "ring"}


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_report_dir_is_refused_naming_it(value):
    assert verify_plan.input_errors(dict(GOOD, verify_report_dir=value), ["a"]) == [
        "verify_report_dir must name a directory on the controller for fabric-report.json and fabric-report.html "
        "(default fabric-report in the current directory); got %r." % value]


@pytest.mark.parametrize("value", [None, "fabric-report", "/srv/reports"])
def test_a_report_dir_on_the_controller_is_fine(value):
    assert verify_plan.input_errors(dict(GOOD, verify_report_dir=value), ["a"]) == []
