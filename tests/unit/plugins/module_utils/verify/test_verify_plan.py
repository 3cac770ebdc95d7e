"""verify_plan: a host's expectations from its facts, /etc/nccl.conf parsing, and what in it cannot work."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import verify_plan


def _port(link_layer, state="ACTIVE", gid_index=None, gids=None, tos=None, rate=400.0):
    port = {"link_layer": link_layer, "state": state, "phys_state": "LinkUp" if state == "ACTIVE" else "Polling",
            "rate_gbps": rate, "roce_v2_ipv4_gid_index": gid_index, "gids": gids or [], "netdev": None,
            "rdma_cm": {"default_roce_mode": "RoCE v2", "default_roce_tos": tos} if tos is not None else None}
    return port


def _facts(devices):
    return {"devices": {name: {"ports": {"1": port}} for name, port in devices.items()}}


ROCE_GIDS = [{"index": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "IB/RoCE v1"},
             {"index": 1, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "RoCE v2"},
             {"index": 2, "gid": "0000:0000:0000:0000:0000:ffff:0a00:000b", "type": "IB/RoCE v1"},
             {"index": 3, "gid": "0000:0000:0000:0000:0000:ffff:0a00:000b", "type": "RoCE v2"}]


# Adjusted for issue 23 (was: rails in the natural order of the names, mlx5_2 before mlx5_10): the rails are the
# compute ports in PCI order, whatever the devices are called; an Ethernet port with an address is a storage port.
def test_rails_are_the_compute_ports_in_pci_order_and_storage_ports_apart():
    facts = _facts({"mlx5_10": _port("InfiniBand"), "mlx5_2": _port("InfiniBand"),
                    "mlx5_3": _port("Ethernet", gid_index=3, gids=ROCE_GIDS, tos=106)})
    for name, pci in (("mlx5_10", "0000:18:00.0"), ("mlx5_2", "0000:40:00.0"), ("mlx5_3", "0000:aa:00.0")):
        facts["devices"][name]["pci_address"] = pci
    plan = verify_plan.host_plan(facts, "infiniband")
    assert plan["hcas"] == ["mlx5_10", "mlx5_2"]
    assert [(r["rail"], r["role"]) for r in plan["rails"]] == [(0, "compute"), (1, "compute")]
    assert plan["rails"][0]["gid_index"] is None and plan["link_layer"] == "InfiniBand"
    assert plan["storage_hcas"] == ["mlx5_3"]
    assert [(s["index"], s["hca"], s["link_layer"], s["gid_index"], s["tclass"]) for s in plan["storage"]] == [
        (0, "mlx5_3", "Ethernet", 3, 106)]
    assert [(p["device"], p["role"], p["rail"]) for p in plan["ports"]] == [
        ("mlx5_10", "compute", 0), ("mlx5_2", "compute", 1), ("mlx5_3", "storage", None)]


def test_roce_rail_takes_gid_index_and_tos_from_facts_and_gdr_auto_follows_the_gpu_driver():
    facts = _facts({"mlx5_0": _port("Ethernet", gid_index=3, tos=106)})
    plan = verify_plan.host_plan(facts, "roce", gdr_mode="auto", gpu_driver=True)
    assert plan["rails"][0]["gid_index"] == 3 and plan["rails"][0]["tclass"] == 106
    assert plan["gdr_expected"] is True
    assert verify_plan.host_plan(facts, "roce", gdr_mode="auto", gpu_driver=False)["gdr_expected"] is False
    assert verify_plan.host_plan(facts, "roce", gdr_mode="true")["gdr_expected"] is True


def test_named_hcas_keep_missing_ones_as_not_present():
    plan = verify_plan.host_plan(_facts({"mlx5_0": _port("Ethernet")}), "roce", hcas=["mlx5_0", "mlx5_1"])
    assert [(r["hca"], r["present"]) for r in plan["rails"]] == [("mlx5_0", True), ("mlx5_1", False)]


@pytest.mark.parametrize("args,message", [
    (("ethernet",), "the host must be in the infiniband or the roce group; got 'ethernet'"),
    (("roce", None, "maybe"), "verify_expect_gdr must be true, false or auto; got 'maybe'"),
    (("roce", "mlx5_0"), "verify_hcas must be a list of RDMA device names"),
])
def test_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        verify_plan.host_plan(_facts({}), *args)


def test_nccl_conf_as_nccl_reads_it():
    text = "# written by hpcnet.rdma\nNCCL_IB_HCA==mlx5_0:1,mlx5_1:1\nNCCL_IB_GID_INDEX = 3  # RoCE v2\n\nNCCL_IB_GID_INDEX=5\nbad line\n"
    assert verify_plan.nccl_conf(text) == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_IB_GID_INDEX": "5"}


def test_hca_naming_a_down_port_is_a_finding_with_cause_and_fix():
    facts = _facts({"mlx5_0": _port("InfiniBand"), "mlx5_1": _port("InfiniBand", state="DOWN")})
    findings = verify_plan.nccl_conf_findings("ib-node02", {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}, facts)
    assert len(findings) == 1
    f = findings[0]
    assert (f["host"], f["check"], f["device"], f["port"], f["expected"]) == ("ib-node02", "nccl_conf_hca", "mlx5_1", 1, "ACTIVE")
    assert "mlx5_1:1 is DOWN/Polling" in f["found"] and "NCCL_IB_HCA" in f["cause"] and "site.yml --tags nccl" in f["fix"]
    assert verify_plan.nccl_conf_findings("h", {"NCCL_IB_HCA": "=mlx5_0:1"}, facts) == []
    missing = verify_plan.nccl_conf_findings("h", {"NCCL_IB_HCA": "mlx5_7"}, facts)
    assert missing[0]["found"] == "/etc/nccl.conf names mlx5_7:1, which this host does not have"
    # an excluding list names ports NCCL must not use: nothing to check
    assert verify_plan.nccl_conf_findings("h", {"NCCL_IB_HCA": "^mlx5_1"}, facts) == []


def test_gid_index_that_is_not_the_roce_v2_ipv4_entry_is_a_finding():
    facts = _facts({"mlx5_0": _port("Ethernet", gid_index=3, gids=ROCE_GIDS)})
    findings = verify_plan.nccl_conf_findings("roce-node01", {"NCCL_IB_GID_INDEX": "1"}, facts)
    assert len(findings) == 1
    f = findings[0]
    assert f["check"] == "nccl_conf_gid_index" and f["expected"] == "NCCL_IB_GID_INDEX=3 (RoCE v2, IPv4)"
    assert f["found"] == "GID index 1: fe80:0000:0000:0000:0000:0000:0000:0001 (RoCE v2)"
    assert "set NCCL_IB_GID_INDEX=3" in f["fix"]
    assert verify_plan.nccl_conf_findings("roce-node01", {"NCCL_IB_GID_INDEX": "3"}, facts) == []
    empty = verify_plan.nccl_conf_findings("roce-node01", {"NCCL_IB_GID_INDEX": "9"}, facts)
    assert empty[0]["found"] == "GID index 9: an empty entry"


# -- input_errors: the verify role's one validation path ------------------------------------------------------------
VERIFY_DEFAULTS = {"verify_min_bw_pct": 90, "verify_perftest_port": 18515, "verify_perftest_timeout": 60,
                   "verify_nccl_timeout": 600, "verify_perftest_size": 1048576, "verify_perftest_iterations": 5000,
                   "verify_nccl_ranks_per_host": 1, "verify_min_busbw_gbps": None, "verify_perftest_pattern": "ring",
                   "verify_perftest_pairs": []}


def test_verify_defaults_are_fine():
    assert verify_plan.input_errors(VERIFY_DEFAULTS, ["a", "b"]) == []
    assert verify_plan.input_errors(dict(VERIFY_DEFAULTS, verify_min_bw_pct="100", verify_min_busbw_gbps="12.5"), ["a"]) == []


@pytest.mark.parametrize("changes, message", [
    ({"verify_min_bw_pct": 150}, "verify_min_bw_pct must be a percentage of line rate, more than 0 and at most 100; got 150."),
    ({"verify_min_bw_pct": "lots"}, "verify_min_bw_pct must be a percentage of line rate"),
    ({"verify_perftest_port": 80}, "verify_perftest_port must be a TCP port 1024-65535 (perftest takes -p); got 80."),
    ({"verify_nccl_timeout": 0}, "verify_perftest_timeout and verify_nccl_timeout must be seconds, more than 0; got 60 and 0."),
    ({"verify_perftest_iterations": 4}, "verify_perftest_iterations at least 5 (perftest's minimum); got 1048576 and 4."),
    ({"verify_nccl_ranks_per_host": 0}, "verify_nccl_ranks_per_host must be at least 1; got 0."),
    ({"verify_min_busbw_gbps": 0}, "verify_min_busbw_gbps must be more than 0 GB/s, or unset; got 0."),
    ({"verify_perftest_pattern": "pairs", "verify_perftest_pairs": [["a", "zz"]]}, "zz"),
])
def test_verify_bad_inputs_name_their_variable(changes, message):
    errors = verify_plan.input_errors(dict(VERIFY_DEFAULTS, **changes), ["a", "b"])
    assert len(errors) == 1 and message in errors[0], errors


@pytest.mark.parametrize("changes", [{"verify_min_busbw_gbps": "nan"}, {"verify_min_busbw_gbps": "inf"},
                                     {"verify_min_bw_pct": 10 ** 400}, {"verify_perftest_timeout": "inf"}])
def test_verify_non_finite_numbers_are_refused_without_a_crash(changes):
    assert len(verify_plan.input_errors(dict(VERIFY_DEFAULTS, **changes), ["a"])) == 1
