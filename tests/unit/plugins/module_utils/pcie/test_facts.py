"""The GPUDirect path in the facts (pcie/facts.py): a simulated 8-rail InfiniBand host (simhost's cx7_ib_ndr_8x) whose
ConnectX cards sit in the DGX H100-like PCIe tree (pcie_tree.graft), read as rdma_facts reads it with ``pcie: true``;
a host without PCI information gets nulls, never an exception."""

from __future__ import annotations

import os

import pytest

import simhost  # tests/simhost, on sys.path via tests/unit/conftest.py
from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import facts as pcie_facts
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import facts
from simhost import pcie_tree

NICS = ["0000:%02x:00.0" % (base + 4) for base in (0x15, 0x35, 0x55, 0x75, 0x95, 0xB5, 0xD5, 0xF5)]
GPUS = ["0000:%02x:00.0" % (base + 3) for base in (0x15, 0x35, 0x55, 0x75, 0x95, 0xB5, 0xD5, 0xF5)]


def dgx_host(root, profile="cx7_ib_ndr_8x", iommu="passthrough", nic_under=None, edit=None, config_size=4096):
    """The simulated host under ``root`` with its RDMA devices in the DGX H100-like tree (rail r's card at NIC r's
    address); ``edit``: {pci: node values} (the faults, as pcie_tree's docstring says). Returns the root."""
    host_bridges, nodes = pcie_tree.dgx_h100(nic_under)
    for pci, values in (edit or {}).items():
        nodes[pci].update(values)
    pcie_tree.build_host(root, profile, (host_bridges, nodes), iommu=iommu, config_size=config_size)
    return root


def read(root, fabrics=("infiniband",)):
    return pcie_facts.attach(facts.read(str(root), None, list(fabrics), []))


def test_every_rdma_device_gets_its_path_affinity_and_the_host_its_gpus_and_iommu_mode(tmp_path):
    rdma = read(dgx_host(tmp_path))
    assert [g["pci"] for g in rdma["gpus"]] == GPUS
    assert set(rdma["gpus"][0]) == {"pci", "numa_node", "device_id", "pcie_path"}
    assert (rdma["gpus"][4]["numa_node"], rdma["gpus"][4]["device_id"]) == (1, "0x2330")
    assert rdma["iommu"] == {"mode": "passthrough"}
    for rail, name in enumerate("mlx5_%d" % r for r in range(8)):
        dev = rdma["devices"][name]
        assert dev["pci_address"] == NICS[rail]
        assert dev["gpu_affinity"] == {"gpu": GPUS[rail], "distance": "PIX"}
        assert dev["max_read_req"] == 4096 and dev["iommu_group"] is not None and dev["ats"] is False
    path = rdma["devices"]["mlx5_0"]["pcie_path"]
    assert [h["pci"] for h in path] == ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0", NICS[0]]
    assert set(path[2]) == {"pci", "type", "speed", "width", "max_speed", "max_width", "acs", "acs_redirect"}
    assert (path[2]["speed"], path[2]["width"], path[2]["acs_redirect"]) == (32.0, 16, False)
    # the RDMA facts themselves are the same as without the tree (the card moved, its links followed)
    assert rdma["devices"]["mlx5_0"]["ports"]["1"]["state"] == "ACTIVE"
    assert rdma["ports_by_role"]["compute"][0] == "mlx5_0:1"


def test_faults_show_in_the_facts(tmp_path):
    rdma = read(dgx_host(tmp_path, iommu="translated", nic_under={0: 4},
                         edit={"0000:97:00.0": {"acs": pcie_tree.ACS_REDIRECT_ON}, "0000:39:00.0": {"width": 8}}))
    assert rdma["iommu"] == {"mode": "translated"}
    assert rdma["devices"]["mlx5_0"]["gpu_affinity"] == {"gpu": GPUS[4], "distance": "PIX"}
    assert rdma["devices"]["mlx5_1"]["pcie_path"][-1]["width"] == 8
    gpu4 = [g for g in rdma["gpus"] if g["pci"] == GPUS[4]][0]
    assert gpu4["pcie_path"][2]["acs_redirect"] is True


def test_a_truncated_config_space_reads_nulls(tmp_path):
    """64 bytes of config space (what a reader that is not root gets): no ACS, MaxReadReq, ATS; the links from the
    sysfs link files still."""
    rdma = read(dgx_host(tmp_path, config_size=64))
    dev = rdma["devices"]["mlx5_0"]
    assert (dev["max_read_req"], dev["ats"]) == (None, None)
    assert dev["pcie_path"][2]["acs"] is None and dev["pcie_path"][2]["acs_redirect"] is None
    assert dev["pcie_path"][-1]["speed"] == 32.0
    assert dev["gpu_affinity"] == {"gpu": GPUS[0], "distance": "PIX"}


def test_a_device_without_a_pci_function_gets_nulls(tmp_path):
    root = dgx_host(tmp_path)
    os.unlink(tmp_path / "class" / "infiniband" / "mlx5_3" / "device")
    rdma = read(root)
    dev = rdma["devices"]["mlx5_3"]
    assert dev["pci_address"] is None
    assert all(dev[k] is None for k in pcie_facts.DEVICE_KEYS)
    assert rdma["devices"]["mlx5_2"]["gpu_affinity"]["distance"] == "PIX"


def test_a_test_bed_host_without_the_pcie_tree_does_not_fail(tmp_path):
    """simhost's own layout (each card on a root port of its own, no config space beyond the header): paths without
    ACS, no GPU, the IOMMU off."""
    simhost.build_tree(simhost.load("cx7_roce_400g_2x"), tmp_path, host_index=1)
    rdma = read(tmp_path, ("roce",))
    assert rdma["gpus"] == [] and rdma["iommu"] == {"mode": "off"}
    for dev in rdma["devices"].values():
        assert dev["gpu_affinity"] is None and dev["max_read_req"] is None
        assert dev["pcie_path"][-1]["pci"] == dev["pci_address"]


@pytest.mark.parametrize("rdma", [{}, {"devices": {}}, {"devices": {"gpus": [], "iommu": None}}])
def test_the_view_of_facts_read_without_pcie_is_none(rdma):
    assert pcie_facts.view(rdma) is None


def test_the_view_is_what_the_checks_take(tmp_path):
    rdma = read(dgx_host(tmp_path))
    view = pcie_facts.view(rdma)
    assert sorted(view["devices"]) == NICS and view["iommu"] == {"mode": "passthrough"}
    assert view["devices"][NICS[0]]["pci"] == NICS[0] and view["gpus"] == rdma["gpus"]
