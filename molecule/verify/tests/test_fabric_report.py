"""The healthy fabric's report, as the controller wrote it (verify_report_dir of the scenario): every check passes,
the IB hosts use IB, the RoCE hosts RoCE with GPUDirect RDMA where GPUs are, and the bandwidth is near line rate.
The per-host part runs once per host; the file checks read the controller's copy."""

import json
import os
import re

import pytest

REPORT_DIR = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "fabric-report", "healthy")
IB_HOSTS = ["mol-vfy-ib1", "mol-vfy-ib2"]
ROCE_HOSTS = ["mol-vfy-roce1", "mol-vfy-roce2"]
LINK_FINDINGS = {"peer_missing", "rail_map", "ib_link_width", "switch_dcbx", "switch_pfc", "switch_app", "switch_mtu"}


@pytest.fixture(scope="module")
def report():
    with open(os.path.join(REPORT_DIR, "fabric-report.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_verdict_pass_and_no_error(report):
    assert report["verdict"] == "pass", [f for f in report["findings"] if f["severity"] == "error"]
    assert set(report) >= {"verdict", "hosts", "findings", "perftest", "nccl", "counters"}


def test_every_check_of_every_host_passes_or_is_skipped(report):
    assert sorted(report["hosts"]) == sorted(IB_HOSTS + ROCE_HOSTS)
    for host, entry in report["hosts"].items():
        assert entry["group"] == ("infiniband" if host in IB_HOSTS else "roce")
        failing = {name: state for name, state in entry["checks"].items() if state == "fail"}
        # a check of the host table fails by its findings; the links check's findings have names of their own
        warnings = {"links" if f["check"] in LINK_FINDINGS else f["check"]
                    for f in report["findings"] if f["host"] == host and f["severity"] == "warning"}
        assert set(failing) <= warnings, (host, failing)


def test_nccl_used_ib_on_ib_and_roce_with_gdr_where_expected(report):
    for host in IB_HOSTS:
        assert report["nccl"][host]["net_transport"] == "IB" and report["nccl"][host]["link_layer"] == "IB"
        assert report["nccl"][host]["gdr"] is True and report["nccl"][host]["fallback_to_socket"] is False
    for host in ROCE_HOSTS:
        assert report["nccl"][host]["net_transport"] == "IB" and report["nccl"][host]["link_layer"] == "RoCE"
    assert report["nccl"]["mol-vfy-roce1"]["gdr"] is True
    assert report["nccl"]["mol-vfy-roce2"]["gdr"] in (False, None)


def test_ring_on_both_rails_of_both_fabrics_near_line_rate(report):
    pairs = {(r["rail"], r["client"], r["server"]) for r in report["perftest"]}
    assert pairs == {(rail, a, b) for rail in (0, 1) for a, b in
                     [("mol-vfy-ib1", "mol-vfy-ib2"), ("mol-vfy-roce1", "mol-vfy-roce2")]}
    for row in report["perftest"]:
        assert row["line_rate_gbps"] == 400.0 and 90.0 <= row["pct"] <= 100.0, row


def test_counters_moved_with_the_traffic(report):
    for host in ROCE_HOSTS + IB_HOSTS:
        ports = report["counters"][host]
        assert any((deltas.get("port_xmit_data") or 0) > 0 for deltas in ports.values()), (host, ports)


def test_html_is_self_contained_and_says_pass():
    with open(os.path.join(REPORT_DIR, "fabric-report.html"), encoding="utf-8") as handle:
        html = handle.read()
    assert re.search(r'id="verdict"[^>]*>PASS<', html)
    assert not re.search(r'<(script|link|img)[^>]+(src|href)=', html)


def test_nccl_conf_on_the_host_is_the_one_verified(host):
    if host.backend.get_hostname() not in IB_HOSTS + ROCE_HOSTS:
        pytest.skip("the fabric host runs no NCCL")
    conf = host.file("/etc/nccl.conf")
    assert conf.exists and "NCCL_IB_HCA" in conf.content_string


def test_rail_map_each_ib_rail_on_its_own_switch_and_roce_peers_unread_without_lldpd(report):
    """The IB hosts' peers come from the subnet manager's view (the real iblinkinfo over ibsim: one switch per rail);
    the RoCE hosts run no lldpd in this scenario, which verify says once per host instead of passing their links."""
    rail_map = report["rail_map"]
    assert sorted(rail_map) == sorted(IB_HOSTS + ROCE_HOSTS)
    switches = {}
    for host in IB_HOSTS:
        assert sorted(rail_map[host]) == ["0", "1"], rail_map[host]
        for rail, entry in rail_map[host].items():
            assert entry["switch"] and entry["switch_port"], (host, rail, entry)
            switches.setdefault(rail, set()).add(entry["switch"])
        assert report["hosts"][host]["checks"]["links"] == "pass", host
    assert all(len(names) == 1 for names in switches.values()) and switches["0"] != switches["1"], switches
    assert report["meta"]["rail_map_basis"] == "inferred"
    for host in ROCE_HOSTS:
        (unread,) = [f for f in report["findings"] if f["host"] == host and f["check"] == "peer_missing"]
        assert unread["severity"] == "warning" and "lldpd" in unread["cause"] + unread["fix"], unread
        assert all(entry["switch"] is None for entry in rail_map[host].values())
