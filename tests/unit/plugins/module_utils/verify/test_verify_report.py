"""verify_report.assemble: what the phases left on each host -> a valid fabric report."""

from __future__ import annotations

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import fabric_report, verify_report


def _host(name, group, results=(), conf=(), deltas=None, counter_findings=()):
    return {"inventory_hostname": name, "verify_plan": {"group": group}, "verify_perftest_results": list(results),
            "__verify_nccl_conf_findings": list(conf), "verify_counter_deltas": deltas,
            "__verify_counter_findings": list(counter_findings)}


def _bw(client, server, bw):
    return {"test": "ib_write_bw", "rail": 0, "round": 0, "client": client, "server": server, "device": "mlx5_0",
            "server_device": "mlx5_0", "link_layer": "Ethernet", "line_rate_gbps": 400.0,
            "summary": {"bytes": 1048576, "bw_avg_gbps": bw}, "failure": None, "msg": ""}


SPEC = {"hosts": {"r1": {"checks": {"port_state": "pass", "roce_qos": "pass"}},
                  "r2": {"checks": {"port_state": "pass", "roce_qos": "fail"}}},
        "findings": [{"host": "r2", "severity": "error", "check": "roce_qos", "device": "mlx5_0", "port": 1,
                      "expected": "the declared roce profile", "found": "differs in pfc on enp12s0np0",
                      "cause": "the QoS state is not the declared roce profile (pfc)", "fix": "re-run the roce role"}]}


def test_healthy_parts_make_a_passing_valid_report():
    hosts = [_host("r1", "roce", [_bw("r1", "r2", 384.0)], deltas={"mlx5_0/1": {"port_xmit_data": 10}}),
             _host("r2", "roce", [_bw("r2", "r1", 383.0)], deltas={"mlx5_0/1": {"port_xmit_data": 12}})]
    nccl = [{"test": "all_reduce_perf", "fabric": "roce", "summary": "NCCL 2.25.1; used IB over RoCE",
             "hosts": {"r1": {"net_transport": "IB", "link_layer": "RoCE", "gdr": True, "fallback_to_socket": False,
                              "hcas": ["mlx5_0:1"], "busbw_gbps": 41.2}},
             "findings": [], "evidence": {"transport": [{"line": 3, "text": "Using network IB"}]}}]
    report = verify_report.assemble({"hosts": hosts, "spec": {"hosts": {}, "findings": []}, "nccl": nccl}, 90,
                                    {"pattern": "ring", "min_bw_pct": 90, "min_busbw_gbps": None, "launcher": "mpirun"})
    assert fabric_report.validate_report(report) == []
    assert report["verdict"] == "pass"
    assert report["hosts"]["r1"] == {"group": "roce", "checks": {"nccl_conf": "pass"}}
    assert [(r["client"], r["pct"]) for r in report["perftest"]] == [("r1", 96.0), ("r2", 95.8)]
    assert report["nccl"]["r1"]["net_transport"] == "IB" and report["nccl"]["r1"]["evidence"] == ["Using network IB"]
    assert report["counters"] == {"r1": {"mlx5_0/1": {"port_xmit_data": 10}}, "r2": {"mlx5_0/1": {"port_xmit_data": 12}}}
    assert report["meta"]["thresholds"] == {"min_bw_pct": 90.0}


def test_pfc_fault_fails_and_names_the_host_in_spec_and_perftest_findings():
    hosts = [_host("r1", "roce", [_bw("r1", "r2", 40.2)]), _host("r2", "roce", [_bw("r2", "r1", 39.9)])]
    report = verify_report.assemble({"hosts": hosts, "spec": SPEC, "nccl": []}, 90, {"min_busbw_gbps": 30})
    assert report["verdict"] == "fail"
    assert report["hosts"]["r2"]["checks"]["roce_qos"] == "fail"
    on_r2 = [f for f in report["findings"] if f["host"] == "r2"]
    assert {f["check"] for f in on_r2} == {"roce_qos", "perftest_bandwidth"}
    assert all("pfc" in f["cause"] for f in on_r2)
    assert report["meta"]["thresholds"] == {"min_bw_pct": 90.0, "min_busbw_gbps": 30.0}


def test_nccl_conf_findings_fail_the_host_check():
    conf = [{"host": "r2", "severity": "error", "check": "nccl_conf_gid_index", "device": "mlx5_0", "port": 1,
             "expected": "NCCL_IB_GID_INDEX=3 (RoCE v2, IPv4)", "found": "GID index 1: fe80::1 (RoCE v2)",
             "cause": "NCCL_IB_GID_INDEX in /etc/nccl.conf is not the port's RoCE v2 IPv4 GID", "fix": "set it to 3"}]
    report = verify_report.assemble({"hosts": [_host("r2", "roce", conf=conf)], "spec": {}, "nccl": []}, 90)
    assert report["hosts"]["r2"]["checks"]["nccl_conf"] == "fail" and report["verdict"] == "fail"
    assert verify_report.finding_line(report["findings"][0]) == (
        "r2 mlx5_0:1: nccl_conf_gid_index: expected NCCL_IB_GID_INDEX=3 (RoCE v2, IPv4), found GID index 1: fe80::1 (RoCE v2)")
