"""The Prometheus alert rules shipped with the health role (roles/health/files/prometheus/hpcnet_rdma_alerts.yml).

``promtool check rules`` on the rule file and ``promtool test rules`` on its unit tests (hpcnet_rdma_alerts_test.yml
beside this file). Without promtool (Debian: ``apt-get install prometheus``) those two skip, except when
``HPCNET_REQUIRE_PROMTOOL=1`` is set (.ci/run sets it): then they fail. ``HPCNET_PROMTOOL`` points at another binary.

Without promtool, the files are still read as YAML: every alert has a test where it fires and one where it must not,
carries a severity, a summary and a description naming the host, and uses only metrics that exist: the health check's
(``HPCNET_METRICS``, docs/metrics.md) and node_exporter 1.5.0's (Debian 12), whose infiniband collector exports no
hw_counters.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.health import exposition, health_check
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
RULES = REPO_ROOT / "roles" / "health" / "files" / "prometheus" / "hpcnet_rdma_alerts.yml"
RULE_TESTS = Path(__file__).resolve().with_name("hpcnet_rdma_alerts_test.yml")

# The health check's metrics: the program's own table, and the values of hpcnet_rdma_health_check_ok's check label.
HPCNET_METRICS = frozenset(exposition.NAMES)
HPCNET_CHECKS = frozenset(health_check.PORT_CHECKS + health_check.HOST_CHECKS)
# node_exporter 1.5.0 (Debian 12's prometheus-node-exporter 1.5.0-1+b6, built with procfs 0.8.0): the infiniband
# collector (labels device and port; node_infiniband_info: device, board_id, firmware_version, hca_type) reads
# counters/ and counters_ext/ only, no hw_counters; and the textfile collector's own series.
NODE_EXPORTER_METRICS = frozenset(["node_infiniband_" + name for name in (
    "info", "state_id", "physical_state_id", "rate_bytes_per_second",
    "legacy_multicast_packets_received_total", "legacy_multicast_packets_transmitted_total",
    "legacy_data_received_bytes_total", "legacy_packets_received_total", "legacy_unicast_packets_received_total",
    "legacy_unicast_packets_transmitted_total", "legacy_data_transmitted_bytes_total", "legacy_packets_transmitted_total",
    "excessive_buffer_overrun_errors_total", "link_downed_total", "link_error_recovery_total",
    "local_link_integrity_errors_total", "multicast_packets_received_total", "multicast_packets_transmitted_total",
    "port_constraint_errors_received_total", "port_constraint_errors_transmitted_total",
    "port_data_received_bytes_total", "port_data_transmitted_bytes_total", "port_discards_received_total",
    "port_discards_transmitted_total", "port_errors_received_total", "port_packets_received_total",
    "port_packets_transmitted_total", "port_transmit_wait_total", "unicast_packets_received_total",
    "unicast_packets_transmitted_total", "port_receive_remote_physical_errors_total",
    "port_receive_switch_relay_errors_total", "symbol_error_total", "vl15_dropped_total",
)] + ["node_textfile_scrape_error", "node_textfile_mtime_seconds"])

ALERT_NAME = re.compile(r"^HpcnetRdma(?:[A-Z][a-z0-9]+)+$")
HPCNET_NAME = re.compile(r"\bhpcnet_rdma_[a-z0-9_]+\b")
NODE_NAME = re.compile(r"\bnode_[a-z0-9]+_[a-z0-9_]+\b")  # node_<collector>_<name>, not the word node_exporter
CHECK_MATCHER = re.compile(r"\bcheck\s*=~?\s*\"([^\"]*)\"")


def _alerts():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _rule_text(rule):
    return "\n".join([rule["expr"]] + list(rule.get("annotations", {}).values()))


def _promtool_required():
    return os.environ.get("HPCNET_REQUIRE_PROMTOOL", "") == "1"


def _promtool():
    path = os.environ.get("HPCNET_PROMTOOL") or shutil.which("promtool")
    if path and os.access(path, os.X_OK):
        return path
    reason = "no promtool (%s)" % (os.environ.get("HPCNET_PROMTOOL") or "not on PATH")
    if _promtool_required():
        pytest.fail("%s; HPCNET_REQUIRE_PROMTOOL=1 is set, so the rule tests must run" % reason, pytrace=False)
    pytest.skip("%s (apt-get install prometheus); set HPCNET_REQUIRE_PROMTOOL=1 to make this a failure" % reason)


def _run(*args):
    done = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, check=False)
    assert done.returncode == 0, "%s exited with %d:\n%s" % (" ".join(args), done.returncode, done.stdout)
    return done.stdout


def test_promtool_check_rules_accepts_the_rule_file():
    out = _run(_promtool(), "check", "rules", str(RULES))
    assert "SUCCESS: %d rules found" % len(_alerts()) in out


def test_promtool_unit_tests_of_the_rules_pass():
    out = _run(_promtool(), "test", "rules", str(RULE_TESTS))
    assert "SUCCESS" in out


def test_promtool_missing_is_a_failure_only_when_required(monkeypatch):
    monkeypatch.setenv("HPCNET_PROMTOOL", "/nonexistent/promtool")
    monkeypatch.delenv("HPCNET_REQUIRE_PROMTOOL", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no promtool"):
        _promtool()
    monkeypatch.setenv("HPCNET_REQUIRE_PROMTOOL", "1")
    with pytest.raises(pytest.fail.Exception, match="HPCNET_REQUIRE_PROMTOOL=1"):
        _promtool()


def test_the_unit_tests_load_the_shipped_rule_file():
    spec = yaml.safe_load(RULE_TESTS.read_text())
    assert [(RULE_TESTS.parent / f).resolve() for f in spec["rule_files"]] == [RULES.resolve()]


def test_every_alert_has_a_test_where_it_fires_and_one_where_it_does_not():
    fires, quiet = set(), set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in _alerts()}
    assert sorted(names - fires) == [], "alerts without a test where they fire"
    assert sorted(names - quiet) == [], "alerts without a test where they must not fire (exp_alerts: [])"
    assert sorted((fires | quiet) - names) == [], "tests of alerts the rule file does not have"


def test_every_alert_is_named_and_labelled_alike():
    alerts = _alerts()
    assert len(alerts) == len({rule["alert"] for rule in alerts}), "an alert name is used twice"
    for rule in alerts:
        name = rule["alert"]
        assert ALERT_NAME.match(name), "%s: not HpcnetRdma<UpperCamel>" % name
        assert rule.get("labels", {}).get("severity") in ("critical", "warning"), "%s: severity" % name
        annotations = rule.get("annotations", {})
        assert sorted(annotations) == ["description", "summary"], "%s: annotations %s" % (name, sorted(annotations))
        for key, text in annotations.items():
            assert "$labels.instance" in text, "%s: the %s does not name the host" % (name, key)


def test_rules_use_only_metrics_the_health_check_exports():
    unknown = {}
    for rule in _alerts():
        for metric in set(HPCNET_NAME.findall(_rule_text(rule))) - HPCNET_METRICS:
            unknown.setdefault(metric, []).append(rule["alert"])
    assert unknown == {}, "hpcnet_rdma_* metrics the health check does not export"


def test_rules_use_only_checks_the_health_check_has():
    unknown = {}
    for rule in _alerts():
        for check in set(CHECK_MATCHER.findall(_rule_text(rule))) - HPCNET_CHECKS:
            unknown.setdefault(check, []).append(rule["alert"])
    assert unknown == {}, "check label values the health check does not have"


def test_rules_use_only_metrics_node_exporter_1_5_exports():
    unknown = {}
    for rule in _alerts():
        for metric in set(NODE_NAME.findall(_rule_text(rule))) - NODE_EXPORTER_METRICS:
            unknown.setdefault(metric, []).append(rule["alert"])
    assert unknown == {}, "node_* metrics that node_exporter 1.5.0 does not export"

