"""verify_perftest: client results -> the report's bandwidth rows, latency rows and findings."""

from __future__ import annotations

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import verify_perftest


def _bw(client, server, bw, line=400.0, rail=0, link_layer="Ethernet", **extra):
    r = {"test": "ib_write_bw", "rail": rail, "client": client, "server": server, "device": "mlx5_%d" % rail,
         "link_layer": link_layer, "line_rate_gbps": line,
         "summary": {"bytes": 1048576, "bw_avg_gbps": bw, "bw_peak_gbps": bw}, "failure": None}
    r.update(extra)
    return r


def test_rows_with_percent_of_line_rate_and_no_finding_above_threshold():
    out = verify_perftest.matrix([_bw("a", "b", 384.2)], 90)
    assert out["perftest"] == [{"rail": 0, "client": "a", "server": "b", "device": "mlx5_0", "test": "ib_write_bw",
                                "bw_avg_gbps": 384.2, "line_rate_gbps": 400.0, "pct": 96.0}]
    assert out["findings"] == []


def test_low_bandwidth_is_pinned_on_the_host_whose_qos_differs_from_the_profile():
    spec = [{"host": "b", "severity": "error", "check": "roce_qos", "device": None,
             "cause": "PFC is off for priority 3 on enp1s0np0"}]
    out = verify_perftest.matrix([_bw("a", "b", 40.1)], 90, spec)
    f = out["findings"][0]
    assert (f["host"], f["check"], f["expected"]) == ("b", "perftest_bandwidth", ">= 90% of 400.0 Gb/s")
    assert f["found"] == "a -> b rail 0: 40.1 Gb/s (10.0%)"
    assert "PFC is off for priority 3" in f["cause"] and "on b" in f["fix"]


def test_low_bandwidth_without_other_evidence_names_the_client_and_the_roce_causes():
    f = verify_perftest.matrix([_bw("a", "b", 200.0)], 90)["findings"][0]
    assert f["host"] == "a" and "PFC" in f["cause"]
    ib = verify_perftest.matrix([_bw("a", "b", 200.0, link_layer="InfiniBand")], 90)["findings"][0]
    assert "trained below its rate" in ib["cause"] and "mlxlink" in ib["fix"]


def test_failed_test_uses_the_server_failure_when_the_client_only_saw_no_listener():
    r = _bw("a", "b", None, summary={}, failure={"kind": "server_not_listening", "cause": "nothing listens"},
            server_failure={"kind": "port_not_active", "cause": "port 1 of mlx5_1 is DOWN", "fix": "check the cable"},
            msg="Couldn't connect to 10.0.0.12:18515", server_device="mlx5_1")
    out = verify_perftest.matrix([r], 90)
    assert out["perftest"][0]["bw_avg_gbps"] is None and out["perftest"][0]["error"] == "nothing listens"
    f = out["findings"][0]
    assert (f["host"], f["device"], f["cause"], f["fix"]) == ("b", "mlx5_1", "port 1 of mlx5_1 is DOWN", "check the cable")


def test_latency_rows_are_kept_apart():
    lat = {"test": "ib_write_lat", "rail": 1, "client": "a", "server": "b", "device": "mlx5_1", "line_rate_gbps": 400.0,
           "summary": {"bytes": 2, "t_typical_us": 1.92, "t_avg_us": 1.95, "p99_us": 2.3}, "failure": None}
    out = verify_perftest.matrix([lat], 90)
    assert out["perftest"] == [] and out["findings"] == []
    assert out["latency"] == [{"rail": 1, "client": "a", "server": "b", "device": "mlx5_1", "test": "ib_write_lat",
                               "t_typical_us": 1.92, "t_avg_us": 1.95, "p99_us": 2.3, "bytes": 2}]
