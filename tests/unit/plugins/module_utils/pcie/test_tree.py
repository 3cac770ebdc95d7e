"""The PCIe tree read from a synthetic sysfs (pcie/tree.py): a DGX H100-like host's paths, GPUs, IOMMU mode and
GPU-NIC distances, and what a reader without root (64 bytes of config space) still gets."""

from __future__ import annotations

import os

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.pcie import tree
from simhost import pcie_tree

NICS = ["0000:%02x:00.0" % (base + 4) for base in (0x15, 0x35, 0x55, 0x75, 0x95, 0xB5, 0xD5, 0xF5)]
GPUS = ["0000:%02x:00.0" % (base + 3) for base in (0x15, 0x35, 0x55, 0x75, 0x95, 0xB5, 0xD5, 0xF5)]


def _host(tmp_path, iommu="passthrough", nic_under=None, config_size=4096, edit=None):
    host_bridges, nodes = pcie_tree.dgx_h100(nic_under)
    for pci, values in (edit or {}).items():
        nodes[pci].update(values)
    pcie_tree.write(tmp_path, host_bridges, iommu=iommu, config_size=config_size)
    return tree.read(str(tmp_path), pcie_tree.rails(nodes))


@pytest.mark.parametrize("text,speed", [("32.0 GT/s PCIe", 32.0), ("2.5 GT/s PCIe", 2.5), ("8 GT/s", 8.0),
                                        ("16.0 GT/s", 16.0), ("Unknown", None), ("", None), (None, None)])
def test_link_speed_as_the_kernel_prints_it(text, speed):
    assert tree.parse_link_speed(text) == speed


def test_a_dgx_h100_nic_path_from_its_root_port(tmp_path):
    pcie = _host(tmp_path)
    nic = pcie["devices"][NICS[0]]
    assert [h["pci"] for h in nic["pcie_path"]] == ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0", NICS[0]]
    assert [h["type"] for h in nic["pcie_path"]] == ["root_port", "upstream_port", "downstream_port", "endpoint"]
    hop = nic["pcie_path"][2]
    assert {k: hop[k] for k in ("speed", "width", "max_speed", "max_width", "acs_redirect")} == \
        {"speed": 32.0, "width": 16, "max_speed": 32.0, "max_width": 16, "acs_redirect": False}
    assert hop["acs"]["ReqRedir"] is False and nic["pcie_path"][1]["acs"] == {}   # an upstream port without ACS
    assert (nic["max_read_req"], nic["max_payload"], nic["ats"], nic["numa_node"]) == (4096, 256, False, 0)
    assert nic["iommu_group"] is not None and nic["iommu_domain"] == "identity"
    assert pcie["iommu"] == {"mode": "passthrough"}


def test_the_gpus_and_each_rails_nearest(tmp_path):
    pcie = _host(tmp_path)
    assert [(g["pci"], g["device_id"], g["numa_node"]) for g in pcie["gpus"]] == \
        [(pci, "0x2330", 0 if i < 4 else 1) for i, pci in enumerate(GPUS)]
    for rail, nic in enumerate(NICS):
        assert pcie["devices"][nic]["gpu_affinity"] == {"gpu": GPUS[rail], "distance": "PIX"}


def test_distances_across_switches_host_bridges_and_sockets(tmp_path):
    pcie = _host(tmp_path, nic_under={0: 4, 1: 2})
    devices, gpus = pcie["devices"], dict((g["pci"], g) for g in pcie["gpus"])
    nic0, nic1 = "0000:99:00.0", "0000:59:00.0"     # the second downstream port of pair 4's and pair 2's switch
    assert [h["pci"] for h in devices[nic0]["pcie_path"]] == ["0000:95:01.0", "0000:96:00.0", "0000:97:01.0", nic0]
    assert tree.distance(devices[nic0], gpus[GPUS[0]]) == "SYS"    # rail 0's GPU is on the other socket
    assert tree.distance(devices[nic1], gpus[GPUS[1]]) == "NODE"   # rail 1's GPU: another host bridge, same socket
    assert devices[nic0]["gpu_affinity"] == {"gpu": GPUS[4], "distance": "PIX"}
    assert devices[nic1]["gpu_affinity"] == {"gpu": GPUS[2], "distance": "PIX"}


def _hop(pci, kind):
    return {"pci": pci, "type": kind}


def _function(host_bridge, numa, *pcis):
    kinds = ["root_port"] + ["upstream_port", "downstream_port"] * ((len(pcis) - 2) // 2) + ["endpoint"]
    return {"host_bridge": host_bridge, "numa_node": numa, "pcie_path": [_hop(p, k) for p, k in zip(pcis, kinds)]}


def test_phb_pxb_and_pix_from_the_paths():
    gpu = _function("pci0000:15", 0, "rp1", "u1", "d1", "u2", "d2", "gpu")
    assert tree.distance(gpu, _function("pci0000:15", 0, "rp1", "u1", "d1", "u2", "d3", "nic")) == "PIX"
    assert tree.distance(gpu, _function("pci0000:15", 0, "rp1", "u1", "d9", "u3", "d4", "nic")) == "PXB"
    assert tree.distance(gpu, _function("pci0000:15", 0, "rp2", "u4", "d5", "nic")) == "PHB"
    assert tree.distance(gpu, _function("pci0000:35", 0, "rp3", "nic")) == "NODE"
    assert tree.distance(gpu, _function("pci0000:95", 1, "rp3", "nic")) == "SYS"
    # the same paths without port types (config space not readable): hops counted by place
    untyped = dict(gpu, pcie_path=[dict(h, type=None) for h in gpu["pcie_path"]])
    other = _function("pci0000:15", 0, "rp1", "u1", "d9", "u3", "d4", "nic")
    assert tree.distance(untyped, dict(other, pcie_path=[dict(h, type=None) for h in other["pcie_path"]])) == "PXB"
    assert [h["pci"] for h in tree.bridges_between(gpu["pcie_path"], other["pcie_path"])] == \
        ["u1", "d1", "u2", "d2", "d9", "u3", "d4"]
    # meeting only at the host bridge: every bridge of both paths, the root ports too
    phb = _function("pci0000:15", 0, "rp2", "u4", "d5", "nic")
    assert [h["pci"] for h in tree.bridges_between(gpu["pcie_path"], phb["pcie_path"])] == \
        ["rp1", "u1", "d1", "u2", "d2", "rp2", "u4", "d5"]


@pytest.mark.parametrize("mode", ["off", "passthrough", "translated"])
def test_the_iommu_mode(tmp_path, mode):
    pcie = _host(tmp_path, iommu=mode)
    assert pcie["iommu"] == {"mode": mode}
    nic = pcie["devices"][NICS[0]]
    assert (nic["iommu_group"] is None) == (mode == "off")
    assert nic["iommu_domain"] == {"off": None, "passthrough": "identity", "translated": "DMA-FQ"}[mode]


def test_groups_without_a_type_file_say_nothing(tmp_path):
    _host(tmp_path)
    for group in os.listdir(tmp_path / "kernel" / "iommu_groups"):
        os.unlink(tmp_path / "kernel" / "iommu_groups" / group / "type")
    assert tree.iommu_mode(str(tmp_path)) is None


def test_a_reader_without_root_gets_the_links_from_sysfs_and_none_for_acs(tmp_path):
    pcie = _host(tmp_path, config_size=64, edit={NICS[0]: {"speed": 16.0, "width": 8}})
    nic = pcie["devices"][NICS[0]]
    assert [(h["speed"], h["width"]) for h in nic["pcie_path"]][-2:] == [(16.0, 8), (16.0, 8)]
    assert all(h["acs"] is None and h["acs_redirect"] is None and h["type"] is None for h in nic["pcie_path"])
    assert nic["max_read_req"] is None and nic["ats"] is None
    assert nic["gpu_affinity"] == {"gpu": GPUS[0], "distance": "PIX"}


def test_config_space_is_the_fallback_for_missing_link_files(tmp_path):
    _host(tmp_path, edit={NICS[0]: {"speed": 16.0, "width": 8}})
    for name in ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width"):
        os.unlink(tmp_path / "bus" / "pci" / "devices" / NICS[0] / name)
    hop = tree.read(str(tmp_path), [NICS[0]])["devices"][NICS[0]]["pcie_path"][-1]
    assert (hop["speed"], hop["width"], hop["max_speed"], hop["max_width"]) == (16.0, 8, 32.0, 16)


def test_an_address_sysfs_does_not_have_is_left_out(tmp_path):
    _host(tmp_path)
    assert tree.read(str(tmp_path), ["0000:aa:00.0"])["devices"] == {}
    assert tree.read(str(tmp_path / "nothing"), [NICS[0]]) == {"devices": {}, "gpus": [], "iommu": {"mode": "off"}}
