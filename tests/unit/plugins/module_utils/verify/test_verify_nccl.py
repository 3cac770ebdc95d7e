"""verify_nccl: the launcher's argument list and an nccl-test's verdict per inventory host."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import verify_nccl

HOSTS = [{"inventory_hostname": "node01", "ansible_facts": {"hostname": "gpu-a", "default_ipv4": {"address": "10.0.0.11"}}},
         {"inventory_hostname": "node02", "ansible_facts": {"hostname": "gpu-b", "default_ipv4": {"address": "10.0.0.12"}},
          "verify_oob_address": "192.168.0.12", "verify_slurm_node": "gpu-b"}]


def test_mpirun_argv_one_rank_per_host_exports_every_variable():
    argv = verify_nccl.launcher_argv("mpirun", HOSTS, {"NCCL_DEBUG": "INFO", "OMPI_X": "1"}, ["--mca", "btl", "tcp,self"],
                                     "/opt/nccl-tests/build/all_reduce_perf", ["-b", "8M", "-g", 1], 600)
    assert argv == ["timeout", "--kill-after=10", "600", "mpirun", "-np", "2", "-H", "10.0.0.11:1,192.168.0.12:1",
                    "-x", "NCCL_DEBUG", "-x", "OMPI_X", "--mca", "btl", "tcp,self",
                    "/opt/nccl-tests/build/all_reduce_perf", "-b", "8M", "-g", "1"]


def test_srun_argv_uses_slurm_node_names():
    argv = verify_nccl.launcher_argv("srun", HOSTS, {}, [], "all_reduce_perf", [], 60, ranks_per_host=8)
    assert argv == ["timeout", "--kill-after=10", "60", "srun", "--nodes", "2", "--ntasks-per-node", "8",
                    "--nodelist", "node01,gpu-b", "--export", "ALL", "all_reduce_perf"]


def test_unknown_launcher_names_the_field():
    with pytest.raises(ValueError, match="verify_launcher must be one of: mpirun, srun; got 'pdsh'"):
        verify_nccl.launcher_argv("pdsh", HOSTS, {}, [], "x", [], 1)


def _analysis(transport_a="IB", transport_b="IB", gdr=True, findings=(), rows=None, avg=20.5):
    def entry(host, t):
        return {"host": host, "net_transport": t, "gdr": gdr if t == "IB" else None,
                "ib_devices": [{"name": "mlx5_0", "port": 1, "link_layer": "RoCE"}] if t == "IB" else []}
    return {"per_host": {"gpu-a:1": entry("gpu-a", transport_a), "gpu-b:2": entry("gpu-b", transport_b)},
            "findings": list(findings), "errors": [], "summary": "NCCL 2.23.4; used IB",
            "busbw": {"avg_busbw_gbps": avg, "rows": rows or []}, "evidence": {}}


def test_verdict_maps_nccl_host_names_to_inventory_hosts():
    v = verify_nccl.test_verdict("all_reduce_perf", "roce", _analysis(), "# Out of bounds values : 0 OK\n", 0, HOSTS)
    assert v["findings"] == []
    assert v["hosts"]["node01"] == {"net_transport": "IB", "link_layer": "RoCE", "gdr": True, "fallback_to_socket": False,
                                    "hcas": ["mlx5_0:1"], "busbw_gbps": 20.5}
    assert v["hosts"]["node02"]["net_transport"] == "IB"


def test_socket_fallback_and_the_analyser_findings_name_the_host():
    a = _analysis(transport_b="Socket", findings=["gpu-b: NCCL fell back to sockets (node02)"])
    v = verify_nccl.test_verdict("all_reduce_perf", "roce", a, "", 0, HOSTS)
    assert v["hosts"]["node02"]["fallback_to_socket"] is True
    assert [f["host"] for f in v["findings"]] == ["node02"]
    assert v["findings"][0]["check"] == "nccl_transport"


def test_wrong_results_are_a_finding_whatever_the_bandwidth():
    rows = [{"size": "8388608", "out_of_place": {"wrong": "0"}, "in_place": {"wrong": "12"}}]
    v = verify_nccl.test_verdict("all_reduce_perf", "infiniband", _analysis(rows=rows),
                                 "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 180.1 \n", 0, HOSTS)
    f = [x for x in v["findings"] if x["check"] == "nccl_tests_wrong_results"]
    assert len(f) == 1 and "8388608 B in-place: #wrong 12" in f[0]["found"] and "3 FAILED" in f[0]["found"]
    assert v["busbw"]["out_of_bounds"] == 3


def test_busbw_threshold_and_exit_code():
    v = verify_nccl.test_verdict("all_reduce_perf", "roce", _analysis(avg=10.0), "", 0, HOSTS, min_busbw=40)
    assert [f["check"] for f in v["findings"]] == ["nccl_busbw"]
    failed = verify_nccl.test_verdict("all_reduce_perf", "roce", _analysis(), "", 255, HOSTS)
    assert [f["check"] for f in failed["findings"]] == ["nccl_tests_exit"] and failed["findings"][0]["host"] == "node01"


def test_footer_reads_real_nccl_tests_footers():
    assert verify_nccl.footer("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 194.675 \n#\n") == \
        {"out_of_bounds": 0, "avg_busbw": 194.675}
    assert verify_nccl.footer("no footer") == {"out_of_bounds": None, "avg_busbw": None}


def test_nccl_on_a_port_that_is_not_a_compute_port_is_a_warning():
    hosts = [dict(h, verify_plan={"ports": [{"device": "mlx5_0", "port": 1, "role": "storage"},
                                            {"device": "mlx5_1", "port": 1, "role": "compute", "rail": 0}]})
             if h["inventory_hostname"] == "node02" else h for h in HOSTS]
    v = verify_nccl.test_verdict("all_reduce_perf", "roce", _analysis(), "# Out of bounds values : 0 OK\n", 0, hosts)
    (f,) = v["findings"]
    assert (f["host"], f["check"], f["severity"], f["found"]) == ("node02", "nccl_hcas", "warning",
                                                                  "NCCL used mlx5_0:1 (storage)")
