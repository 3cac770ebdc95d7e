"""The hpcnet.rdma.roce_qos module against the simulated host's own tools (mlnx_qos, dcb, ethtool) and tree.

Each test builds a simulated host (tests/simhost) in a temp dir and puts its tools first on PATH, so the module runs
the same commands it would run on a real host, against a model that keeps their state.
"""

from __future__ import annotations


import pytest

from ansible_collections.hpcnet.rdma.plugins.modules import roce_qos
from simhost import kernelfs  # tests/simhost, on sys.path via tests/unit/conftest.py

LOSSLESS = {"trust": "dscp", "pfc": [3], "dscp2prio": {"26": 3, "48": 6}, "ecn": [3], "cnp_dscp": 48, "cnp_priority": 6,
            "traffic_class": 106, "roce_tos": 106, "roce_mode": "v2", "global_pause": False}
QOS_TOOLS = ("mlnx_qos", "dcb", "ethtool")


@pytest.fixture(name="qos")
def _qos(run_module):
    """``qos(root, check=False, **settings)``: the module on enp12s0np0 of the simulated host at ``root``."""
    def run(root, check=False, **settings):
        return run_module(roce_qos.main, dict({"netdev": "enp12s0np0", "sysfs_root": str(root)}, **settings), check)
    return run


def _settle(root):
    """What the kernel would show after the writes (the container runs this as simhost-kernelfs.service)."""
    if hasattr(kernelfs, "settle"):
        kernelfs.settle(root)


def test_a_read_without_settings_never_changes(qos, sim_host):
    root = sim_host("cx7_roce_400g_2x_ofed", QOS_TOOLS).root
    result, failed = qos(root)
    assert not failed and result["changed"] is False and result["commands"] == []
    assert result["before"]["trust"] == "pcp" and result["before"]["pfc"] == [] and result["before"]["global_pause"] is True
    assert result["backend"] == "mlnx_qos" and result["rdma_device"] == "mlx5_0:1"


def test_check_mode_plans_and_changes_nothing(qos, sim_host):
    root = sim_host("cx7_roce_400g_2x_ofed", QOS_TOOLS).root
    result, _ = qos(root, check=True, **LOSSLESS)
    assert result["changed"] is True and result["after"]["trust"] == "dscp"
    again, _ = qos(root)
    assert again["before"]["trust"] == "pcp" and again["before"]["global_pause"] is True


@pytest.mark.parametrize("name, backend", [("cx7_roce_400g_2x_ofed", "mlnx_qos"), ("cx7_roce_400g_2x", "dcb")])
def test_lossless_profile_applies_and_a_second_run_changes_nothing(name, backend, qos, sim_host):
    tools = ("mlnx_qos", "dcb", "ethtool") if backend == "mlnx_qos" else ("dcb", "ethtool")
    root = sim_host(name, tools).root
    first, failed = qos(root, **LOSSLESS)
    assert not failed, first["msg"]
    assert first["changed"] is True and first["backend"] == backend
    assert first["after"]["trust"] == "dscp" and first["after"]["pfc"] == [3] and first["after"]["global_pause"] is False
    assert first["after"]["dscp2prio"][26] == 3 and first["after"]["dscp2prio"][48] == 6
    _settle(root)
    second, _ = qos(root, **LOSSLESS)
    assert second["changed"] is False and second["commands"] == [], second["commands"]
    if backend == "dcb":  # inbox: no ecn/ tree, so ECN and CNP are firmware settings, never changed here
        assert first["firmware"] == {"ROCE_CC_PRIO_MASK_P1": 8, "CNP_DSCP_P1": 48, "CNP_802P_PRIO_P1": 6}
        assert first["after"]["ecn"] is None


def test_boot_steps_set_everything_from_a_fresh_driver(qos, sim_host):
    root = sim_host("cx7_roce_400g_2x_ofed", QOS_TOOLS).root
    result, _ = qos(root, check=True, **LOSSLESS)
    commands = [argv[1:] for argv in result["boot"]["commands"]]
    assert ["-A", "enp12s0np0", "rx", "off", "tx", "off"] in commands
    assert ["-i", "enp12s0np0", "--trust", "dscp"] in commands and ["-i", "enp12s0np0", "--pfc", "0,0,0,1,0,0,0,0"] in commands
    assert result["boot"]["writes"][0][1] is None  # the RDMA-CM configfs device directory comes first


@pytest.mark.parametrize("settings, message", [
    ({"netdev": "eth9"}, r"roce_qos eth9: netdev 'eth9' is not a netdev of an RDMA device"),
    ({"pfc": [9]}, r"pfc must be a list of priorities 0-7; got \[9\]"),
    ({"backend": "mlnx_qos"}, r"backend mlnx_qos is not installed on this host"),
])
def test_bad_input_fails_with_a_message_naming_the_field(settings, message, qos, sim_host):
    root = sim_host("cx7_roce_400g_2x", ("dcb", "ethtool")).root
    result, failed = qos(root, **settings)
    assert failed and __import__("re").search(message, result["msg"]), result["msg"]


# ---- several netdevs in one call (netdevs): every netdev read and checked before any is set --------------------------
RAILS = ("enp12s0np0", "enp140s0np0")


@pytest.fixture(name="qos_many")
def _qos_many(run_module):
    """``qos_many(root, entries, check=False, **top)``: the module with ``netdevs`` on the simulated host at ``root``."""
    def run(root, entries, check=False, **top):
        return run_module(roce_qos.main, dict({"netdevs": entries, "sysfs_root": str(root)}, **top), check)
    return run


def test_netdevs_set_each_rail_with_its_own_settings_and_a_second_run_changes_nothing(qos_many, sim_host):
    root = sim_host("cx7_roce_400g_2x_ofed", QOS_TOOLS).root
    top = dict(LOSSLESS, dscp2prio=None)
    entries = [{"netdev": RAILS[0], "dscp2prio": {"26": 3}}, {"netdev": RAILS[1], "dscp2prio": {"24": 3}, "pfc": [3, 4]}]
    first, failed = qos_many(root, entries, **top)
    assert not failed, first.get("msg")
    assert first["changed"] is True and list(first["netdevs"]) == list(RAILS)
    one, two = (first["netdevs"][name] for name in RAILS)
    assert one["rdma_device"] == "mlx5_0:1" and one["after"]["pfc"] == [3] and one["after"]["dscp2prio"][26] == 3
    assert two["after"]["pfc"] == [3, 4] and two["after"]["dscp2prio"][24] == 3 and two["after"]["trust"] == "dscp"
    assert [d["before_header"] for d in first["diff"]] == list(RAILS)
    _settle(root)
    second, _ = qos_many(root, entries, **top)
    assert second["changed"] is False and all(r["commands"] == [] for r in second["netdevs"].values())


def test_netdevs_a_bad_setting_on_one_rail_changes_no_rail(qos_many, qos, sim_host):
    root = sim_host("cx7_roce_400g_2x_ofed", QOS_TOOLS).root
    result, failed = qos_many(root, [{"netdev": RAILS[0]}, {"netdev": RAILS[1], "pfc": [9]}], **LOSSLESS)
    assert failed and result["msg"].startswith("roce_qos netdevs: enp140s0np0: pfc must be a list of priorities 0-7")
    assert result["changed"] is False
    untouched, _ = qos(root)  # the first rail was read, not set
    assert untouched["before"]["trust"] == "pcp" and untouched["before"]["pfc"] == []


@pytest.mark.parametrize("settings, message", [
    ({"netdevs": [{"netdev": "enp12s0np0"}, {"netdev": "enp12s0np0"}]},
     r"roce_qos netdevs: netdevs names a netdev more than once: enp12s0np0"),
    ({"netdevs": [{"netdev": "eth9"}]}, r"roce_qos netdevs: eth9: netdev 'eth9' is not a netdev of an RDMA device"),
    ({"netdevs": [{"netdev": "enp12s0np0"}], "netdev": "enp12s0np0"}, r"mutually exclusive: netdev\|netdevs"),
    ({"netdevs": [{"pfc": [3]}]}, r"missing required arguments: netdev found in netdevs"),
])
def test_netdevs_bad_input_fails_with_a_message_naming_the_field(settings, message, run_module, sim_host):
    root = sim_host("cx7_roce_400g_2x", ("dcb", "ethtool")).root
    result, failed = run_module(roce_qos.main, dict({"sysfs_root": str(root)}, **settings), False)
    assert failed and __import__("re").search(message, result["msg"]), result["msg"]


def test_neither_netdev_nor_netdevs_is_refused(run_module, sim_host):
    root = sim_host("cx7_roce_400g_2x", ("dcb", "ethtool")).root
    result, failed = run_module(roce_qos.main, {"sysfs_root": str(root)}, False)
    assert failed and "one of the following is required: netdev, netdevs" in result["msg"], result["msg"]
