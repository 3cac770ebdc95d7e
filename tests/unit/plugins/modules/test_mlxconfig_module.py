"""The hpcnet.rdma.mlxconfig module against the simulated host's stateful mstconfig / mlxconfig and its tree.

Each test builds a simulated host (tests/simhost) in a temp dir, with its firmware NV state in a temp "disk"
(SIMHOST_PERSIST_DIR), and puts the simulated tool first on PATH. A reboot is a second build_tree.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.modules import mlxconfig


@pytest.fixture(name="mlx")
def _mlx(run_module):
    """``mlx(root, check=False, **args)``: the module on the simulated host at ``root`` (conftest.py runs it)."""
    def run(root, check=False, **args):
        return run_module(mlxconfig.main, dict({"sysfs_root": str(root), "tool": "mstconfig"}, **args), check)
    return run


def test_read_only_reports_what_the_card_has_pending(vpi_host, mlx):
    root = vpi_host()
    result, failed = mlx(root, device="mlx5_1")
    assert not failed and not result["changed"] and result["commands"] == []
    assert result["device"] == "0000:0c:00.1" and result["tool"] == "mstconfig"
    assert result["device_info"]["name"] == "MCX755106AS-HEAT_Ax"
    assert result["config"]["LINK_TYPE_P2"] == {"default": 1, "current": 2, "next_boot": 2}
    assert result["pending"] == {} and result["reboot_required"] is False


def test_check_mode_shows_the_plan_and_changes_nothing(vpi_host, mlx):
    root = vpi_host()
    result, failed = mlx(root, check=True, device="mlx5_1", params={"LINK_TYPE_P2": "IB", "SRIOV_EN": True, "NUM_OF_VFS": 4})
    assert not failed and result["changed"]
    assert result["commands"] == [["mstconfig", "-y", "-d", "0000:0c:00.1", "set", "LINK_TYPE_P2=IB", "NUM_OF_VFS=4",
                                   "SRIOV_EN=True"]]
    assert result["pending"]["LINK_TYPE_P2"] == {"current": 2, "next_boot": 1,
                                                 "printed": {"current": "ETH(2)", "next_boot": "IB(1)"}}
    assert result["pending"]["SRIOV_EN"]["printed"] == {"current": "False(0)", "next_boot": "True(1)"}
    assert result["reboot_required"] is True
    assert result["diff"] == {"before": {"LINK_TYPE_P2": 2, "NUM_OF_VFS": 0, "SRIOV_EN": 0},
                              "after": {"LINK_TYPE_P2": 1, "NUM_OF_VFS": 4, "SRIOV_EN": 1}}
    again, _ = mlx(root, device="mlx5_1")
    assert again["config"]["LINK_TYPE_P2"]["next_boot"] == 2, "check mode wrote the firmware"


def test_set_then_second_run_changes_nothing_before_the_reboot(vpi_host, mlx):
    root = vpi_host()
    params = {"LINK_TYPE_P2": "IB", "ATS_ENABLED": False}
    first, failed = mlx(root, device="0000:0c:00.0", params=params)
    assert not failed and first["changed"] and first["reboot_required"]
    assert first["pending"] == {"LINK_TYPE_P2": {"current": 2, "next_boot": 1,
                                                 "printed": {"current": "ETH(2)", "next_boot": "IB(1)"}}}
    second, _ = mlx(root, device="mlx5_1", params=params)
    assert not second["changed"] and second["commands"] == [] and second["reboot_required"]


def test_the_reboot_makes_next_boot_current_and_flips_the_port(vpi_host, mlx):
    root = vpi_host()
    mlx(root, device="mlx5_1", params={"LINK_TYPE_P2": "IB"})
    assert (root / "class/infiniband/mlx5_1/ports/1/link_layer").read_text().strip() == "Ethernet"
    root = vpi_host()  # reboot
    after, _ = mlx(root, device="mlx5_1", params={"LINK_TYPE_P2": "IB"})
    assert not after["changed"] and after["pending"] == {} and after["reboot_required"] is False
    assert after["config"]["LINK_TYPE_P2"] == {"default": 1, "current": 1, "next_boot": 1}
    assert (root / "class/infiniband/mlx5_1/ports/1/link_layer").read_text().strip() == "InfiniBand"


def test_reset_restores_the_defaults(vpi_host, mlx):
    root = vpi_host()
    result, failed = mlx(root, device="mlx5_0", reset=True)
    assert not failed and result["changed"]
    assert result["commands"] == [["mstconfig", "-y", "-d", "0000:0c:00.0", "reset"]]
    assert result["pending"]["LINK_TYPE_P2"]["printed"] == {"current": "ETH(2)", "next_boot": "IB(1)"}
    again, _ = mlx(root, device="mlx5_0", reset=True)
    assert not again["changed"]


@pytest.mark.parametrize("args,fragment", [
    ({"device": "mlx5_1", "params": {"LINK_TYPE_P2": "FOO"}}, "LINK_TYPE_P2=FOO is not a value the device accepts; allowed: "),
    ({"device": "mlx5_1", "params": {"NUM_OF_VFS": "lots"}}, "NUM_OF_VFS takes a number, got lots"),
    ({"device": "mlx5_1", "params": {"NO_SUCH_P1": 1}}, "The Device doesn't support NO_SUCH_P1 parameter"),
    ({"device": "mlx5_1", "params": {"NUM_OF_VFS": 9999}}, "NUM_OF_VFS"),
    ({"device": "mlx5_1", "params": {"link_type_p2": "IB"}}, "'link_type_p2' is not an mlxconfig parameter name"),
    ({"device": "mlx5_7"}, "'mlx5_7' is neither a PCI address (0000:0c:00.0) nor an RDMA device under"),
    ({"device": "0000:99:00.0"}, "Failed to open the device"),
    ({"device": "mlx5_1", "tool": "mlxconfig"}, "mlxconfig is not installed (NVIDIA MFT)"),
])
def test_errors_name_the_parameter_and_write_nothing(vpi_host, args, fragment, mlx):
    root = vpi_host()
    disk = Path(os.environ["SIMHOST_PERSIST_DIR"])
    before = sorted((p, p.read_bytes()) for p in disk.rglob("*") if p.is_file())
    result, failed = mlx(root, **args)
    assert failed and not result["changed"]
    assert fragment in result["msg"], result["msg"]
    assert sorted((p, p.read_bytes()) for p in disk.rglob("*") if p.is_file()) == before


def test_a_refused_set_after_a_reset_reports_the_reset(vpi_host, mlx):
    root = vpi_host()
    result, failed = mlx(root, device="mlx5_0", reset=True, params={"NUM_OF_VFS": 9999, "SRIOV_EN": True})
    assert failed and result["changed"] is True
    assert "the reset before it WAS applied" in result["msg"] and "NUM_OF_VFS" in result["msg"]
