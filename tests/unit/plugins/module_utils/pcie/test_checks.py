"""The GPUDirect path checks (pcie/checks.py) on a synthetic DGX H100-like host: the healthy tree has no finding; ACS
redirect on a downstream port, a NIC at x8/16GT/s under a x16/32GT/s port, a GPU and its NIC under different
switches, the IOMMU translating and a small MaxReadReq are each named, with the bridge's PCI address and the fix."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import checks
from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import tree
from simhost import pcie_tree

KEYS = {"host", "severity", "check", "expected", "found", "cause", "fix", "device", "rail"}


def _host(tmp_path, iommu="passthrough", nic_under=None, edit=None, **kwargs):
    host_bridges, nodes = pcie_tree.dgx_h100(nic_under)
    for pci, values in (edit or {}).items():
        nodes[pci].update(values)
    pcie_tree.write(tmp_path, host_bridges, iommu=iommu)
    nics = pcie_tree.rails(nodes)
    pcie = tree.read(str(tmp_path), nics)
    rails = dict((rail, ("mlx5_%d" % rail, pci)) for rail, pci in enumerate(nics))
    return checks.host_findings("node1", pcie, rails, **kwargs)


def test_the_healthy_tree_has_no_finding(tmp_path):
    assert _host(tmp_path) == []


def test_acs_redirect_on_the_gpus_downstream_port(tmp_path):
    found = _host(tmp_path, edit={"0000:17:00.0": {"acs": pcie_tree.ACS_REDIRECT_ON}})
    assert [(f["check"], f["severity"], f["device"], f["rail"]) for f in found] == [("pcie_acs", "error", "mlx5_0", 0)]
    assert set(found[0]) == KEYS
    assert "0000:17:00.0" in found[0]["found"] and "ReqRedir+ CmpltRedir+" in found[0]["found"]
    assert "0000:18:00.0" in found[0]["expected"]           # the GPU
    assert found[0]["fix"].startswith("setpci -s 0000:17:00.0 ECAP_ACS+0x6.w=0000")


def test_acs_redirect_with_ats_and_direct_translated_p2p_is_no_finding(tmp_path):
    found = _host(tmp_path, edit={"0000:17:00.0": {"acs": pcie_tree.ACS_REDIRECT_ON | 0x0040},
                                  "0000:19:00.0": {"ats": True}})
    assert found == []


def test_acs_redirect_is_not_checked_without_gpudirect(tmp_path):
    assert _host(tmp_path, gpudirect=False, edit={"0000:17:00.0": {"acs": pcie_tree.ACS_REDIRECT_ON}}) == []


def test_a_nic_trained_at_x8_gen4_under_a_x16_gen5_port(tmp_path):
    found = _host(tmp_path, edit={"0000:19:00.0": {"speed": 16.0, "width": 8}})
    assert [(f["check"], f["device"]) for f in found] == [("pcie_link", "mlx5_0")]
    assert found[0]["found"] == "16GT/s x8"
    assert "32GT/s x16 on the link 0000:17:01.0 -> 0000:19:00.0" in found[0]["expected"]


def test_a_gen5_nic_in_a_gen4_slot_is_not_a_fault(tmp_path):
    found = _host(tmp_path, edit={"0000:17:01.0": {"max_speed": 16.0}})
    assert found == []


def test_a_gen4_trained_gpu_is_named_by_its_address(tmp_path):
    found = _host(tmp_path, edit={"0000:18:00.0": {"speed": 16.0}})
    assert [(f["check"], f["device"], f.get("rail")) for f in found] == [("pcie_link", "0000:18:00.0", None)]


def test_a_nic_under_another_sockets_switch(tmp_path):
    """Rail 0's NIC under pair 4's switch: its nearest GPU is pair 4's (PIX), no finding for affinity; a NIC far
    from every GPU is one."""
    assert _host(tmp_path, nic_under={0: 4}) == []
    far = checks.gpu_affinity("node1", "mlx5_0", {"gpu": "0000:18:00.0", "distance": "SYS"}, rail=0)
    assert [(f["check"], f["severity"]) for f in far] == [("gpu_affinity", "warning")]
    assert "0000:18:00.0 at SYS" in far[0]["found"] and "mlx5_0" in far[0]["cause"]
    assert checks.gpu_affinity("node1", "mlx5_0", {"gpu": "0000:18:00.0", "distance": "PXB"}) == []


def test_a_nic_without_a_gpu_under_its_switch(tmp_path):
    """Rail 0's NIC on a root port of its own, no switch: the nearest GPU is NODE (another host bridge)."""
    host_bridges, nodes = pcie_tree.dgx_h100()
    nic = {"pci": "0000:0b:00.0", "kind": "nic", "max_speed": 32.0, "max_width": 16, "rail": 0, "ats": False,
           "max_read_req": 4096}
    rp = {"pci": "0000:0a:01.0", "kind": "root_port", "max_speed": 32.0, "max_width": 16, "acs": 0, "children": [nic]}
    host_bridges.insert(0, {"name": "pci0000:0a", "numa_node": 0, "ports": [rp]})
    pcie_tree.write(tmp_path, host_bridges)
    pcie = tree.read(str(tmp_path), ["0000:0b:00.0"])
    found = checks.host_findings("node1", pcie, {0: ("mlx5_0", "0000:0b:00.0")})
    assert [(f["check"], f["found"]) for f in found] == [("gpu_affinity", "nearest GPU 0000:18:00.0 at NODE")]


@pytest.mark.parametrize("exceptions,platform,count", [((), None, 1), (("DGX*",), "DGXH100", 0),
                                                       (("GH200*",), "DGXH100", 1)])
def test_iommu_translated(tmp_path, exceptions, platform, count):
    found = _host(tmp_path, iommu="translated", platform=platform, iommu_exceptions=exceptions)
    assert [(f["check"], f["severity"]) for f in found] == [("iommu", "warning")] * count


def test_max_read_req_below_4096_on_a_compute_nic(tmp_path):
    found = _host(tmp_path, edit={"0000:19:00.0": {"max_read_req": 512}})
    assert [(f["check"], f["found"]) for f in found] == [("pcie_max_read_req", "MaxReadReq 512 bytes")]
    assert found[0]["fix"].startswith("setpci -s 0000:19:00.0 CAP_EXP+0x8.w=5000:7000")


def test_what_cannot_be_read_gives_no_finding():
    unknown = {"pci": "0000:19:00.0", "type": None, "speed": None, "width": None, "max_speed": None,
               "max_width": None, "acs": None, "acs_redirect": None}
    assert checks.pcie_link("node1", "mlx5_0", [dict(unknown, pci="0000:17:01.0"), unknown]) == []
    assert checks.pcie_max_read_req("node1", "mlx5_0", "0000:19:00.0", None) == []
    assert checks.iommu("node1", None) == []


@pytest.mark.parametrize("acs,ats", [(pcie_tree.ACS_REDIRECT_ON, True), (pcie_tree.ACS_REDIRECT_ON | 0x0040, False)])
def test_acs_redirect_needs_both_ats_and_direct_translated_p2p_to_pass(tmp_path, acs, ats):
    found = _host(tmp_path, edit={"0000:17:01.0": {"acs": acs}, "0000:19:00.0": {"ats": ats}})
    assert [(f["check"], "0000:17:01.0" in f["found"]) for f in found] == [("pcie_acs", True)]


def test_acs_redirect_on_a_root_port_the_pair_does_not_cross_is_no_finding(tmp_path):
    """GPU and NIC under one switch (PIX): their peer-to-peer traffic turns at the switch, never reaching the root
    port, so the root port's ACS does not matter to GPUDirect."""
    assert _host(tmp_path, edit={"0000:15:01.0": {"acs": pcie_tree.ACS_REDIRECT_ON}}) == []


def test_acs_redirect_names_every_rail_whose_pair_crosses_the_port(tmp_path):
    """Rail 0's NIC under pair 4's switch: GPU 4 is its nearest (PIX) as it is rail 4's, so the redirect on GPU 4's
    port is named for both rails; pair 0's root port is on neither pair's path."""
    found = _host(tmp_path, nic_under={0: 4}, edit={"0000:97:00.0": {"acs": pcie_tree.ACS_REDIRECT_ON},
                                                     "0000:15:01.0": {"acs": pcie_tree.ACS_REDIRECT_ON}})
    assert [(f["check"], f["device"], f["rail"], "0000:97:00.0" in f["found"]) for f in found] == \
        [("pcie_acs", "mlx5_0", 0, True), ("pcie_acs", "mlx5_4", 4, True)]
