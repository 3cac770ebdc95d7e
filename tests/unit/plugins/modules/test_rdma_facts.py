"""Tests of the hpcnet.rdma.rdma_facts module (argument handling, exit/fail paths, check mode)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import module_docs  # tests/tools, on sys.path via tests/unit/conftest.py
from ansible.module_utils import basic

from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import tool_runner
from ansible.module_utils.testing import patch_module_args

from ansible_collections.hpcnet.rdma.plugins.modules import rdma_facts
from fixtures_path import real_fixtures

sys.path.insert(0, str(Path(__file__).parents[1] / "module_utils" / "fixtures" / "sysfs"))
from rdma_sysfs_tree import add_hca, ib_port, materialise_dump, roce_port, write  # noqa: E402  pylint: disable=wrong-import-position


class AnsibleExitJson(Exception):
    """exit_json was called."""


class AnsibleFailJson(Exception):
    """fail_json was called."""


@pytest.fixture(autouse=True)
def patch_exits(monkeypatch):
    def exit_json(self, **kwargs):  # pylint: disable=unused-argument
        raise AnsibleExitJson(kwargs)

    def fail_json(self, msg, **kwargs):  # pylint: disable=unused-argument
        kwargs["msg"] = msg
        kwargs["failed"] = True
        raise AnsibleFailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


@pytest.fixture(name="commands", autouse=True)
def fixture_commands(monkeypatch):
    """Fake PATH and tool runs: ``commands["tools"]`` maps tool -> (rc, out) or (rc, out, err);
    ``commands["calls"]`` records calls."""
    state = {"tools": {}, "calls": []}

    def get_bin_path(self, name, required=False, opt_dirs=None):  # pylint: disable=unused-argument
        assert required is False
        return "/usr/bin/" + name if name in state["tools"] else None

    def run(self, args, **kwargs):  # pylint: disable=unused-argument
        state["calls"].append((args, kwargs))
        rc, out, *err = state["tools"][args[0].rsplit("/", 1)[1]]
        return rc, out, err[0] if err else ""

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    monkeypatch.setattr(tool_runner.ModuleRunner, "run", run)   # every module runs its tools through the runner
    monkeypatch.setattr(rdma_facts, "probe_stack", _probe_without_lib_lookup(rdma_facts.probe_stack))
    return state


def _probe_without_lib_lookup(real):
    def probe(runner):
        return real(runner, lambda: False)
    return probe


def run_module(args):
    with patch_module_args(args):
        with pytest.raises((AnsibleExitJson, AnsibleFailJson)) as info:
            rdma_facts.main()
    return info.type, info.value.args[0]


def _roce_tree(root):
    add_hca(root, "mlx5_0", pci="0000:0c:00.0", ports={1: roce_port("ens1np0", ipv4="10.0.0.11", v2_ipv4_index=3)},
            netdevs={"ens1np0": {"mtu": 9000}})
    add_hca(root, "mlx5_1", pci="0000:1a:00.0", ports={1: ib_port()}, netdevs={"ibp26s0": {"mtu": 4092}})


def test_facts_from_a_tree_are_returned_unchanged(tmp_path, commands):
    _roce_tree(tmp_path)
    commands["tools"] = {"ofed_info": (0, "MLNX_OFED_LINUX-5.0-2.1.8.0:\n")}
    kind, result = run_module({"sysfs_root": str(tmp_path)})
    assert kind is AnsibleExitJson
    assert result["changed"] is False
    rdma = result["ansible_facts"]["rdma"]
    assert set(rdma) == {"sysfs_root", "devices", "netdevs", "kernel_modules", "memlock", "stack", "ports_by_role"}
    assert rdma["sysfs_root"] == str(tmp_path)
    assert rdma["devices"]["mlx5_0"]["ports"]["1"]["roce_v2_ipv4_gid_index"] == 3
    assert rdma["devices"]["mlx5_1"]["ports"]["1"]["lid"] == 26
    assert rdma["netdevs"]["ens1np0"]["rdma_device"] == "mlx5_0"
    assert rdma["stack"] == {"provider": "mlnx_ofed", "version": "5.0-2.1.8.0", "ofed_info": "MLNX_OFED_LINUX-5.0-2.1.8.0:"}
    json.dumps(result)  # facts must be JSON-serialisable


def test_public_key_names_are_exactly_the_documented_ones(tmp_path, commands):
    _roce_tree(tmp_path)
    _kind, result = run_module({"sysfs_root": str(tmp_path), "gather_stack": False})
    rdma = result["ansible_facts"]["rdma"]
    device = rdma["devices"]["mlx5_0"]
    assert set(device) == {"fw_ver", "node_guid", "sys_image_guid", "board_id", "hca_type", "node_type", "pci_address", "netdevs", "ports",
                           "part_number"}
    port = device["ports"]["1"]
    assert set(port) == {"state", "phys_state", "link_layer", "rate_gbps", "width", "speed", "lid", "sm_lid", "netdev", "gids",
                         "roce_v2_ipv4_gid_index", "pkeys", "pkey_indexes", "port_guid", "traffic_class", "rdma_cm", "role", "rail"}
    assert set(port["gids"][0]) == {"index", "gid", "type", "netdev", "ipv4"}
    assert set(rdma["netdevs"]["ens1np0"]) == {"mtu", "operstate", "carrier", "speed_mbps", "address", "rdma_device", "rdma_port", "ecn"}
    assert rdma["stack"] is None and commands["calls"] == []


def test_stack_probe_runs_argv_with_lc_all_c(tmp_path, commands):
    _roce_tree(tmp_path)
    commands["tools"] = {"dpkg-query": (0, "installed\t44.0-2")}
    _kind, result = run_module({"sysfs_root": str(tmp_path)})
    assert result["ansible_facts"]["rdma"]["stack"] == {"provider": "inbox", "version": "44.0", "ofed_info": None}
    (argv, kwargs), = commands["calls"]
    assert argv == ["/usr/bin/dpkg-query", "-W", "-f=${db:Status-Status}\t${Version}", "rdma-core"]
    assert not kwargs.get("changes")     # a read; the C locale is the runner's (test_tool_runner.py)


def test_check_mode_returns_the_same_facts_unchanged(tmp_path):
    _roce_tree(tmp_path)
    _kind, normal = run_module({"sysfs_root": str(tmp_path), "gather_stack": False})
    kind, checked = run_module({"sysfs_root": str(tmp_path), "gather_stack": False, "_ansible_check_mode": True})
    assert kind is AnsibleExitJson and checked["changed"] is False
    assert checked["ansible_facts"] == normal["ansible_facts"]


def test_counters_only_with_gather_counters(tmp_path):
    _roce_tree(tmp_path)
    write(tmp_path / "class" / "infiniband" / "mlx5_1" / "ports" / "1", "counters/port_xmit_wait", "2489603687")
    _kind, plain = run_module({"sysfs_root": str(tmp_path), "gather_stack": False})
    assert "counters" not in plain["ansible_facts"]["rdma"]["devices"]["mlx5_1"]["ports"]["1"]
    _kind, full = run_module({"sysfs_root": str(tmp_path), "gather_stack": False, "gather_counters": True})
    assert full["ansible_facts"]["rdma"]["devices"]["mlx5_1"]["ports"]["1"]["counters"] == {"port_xmit_wait": 2489603687}


def test_real_dump_through_the_module(tmp_path):
    materialise_dump((real_fixtures() / "rdma-outputs" / "sysfs-class-infiniband-01.txt").read_text(encoding="utf-8"), tmp_path)
    _kind, result = run_module({"sysfs_root": str(tmp_path), "gather_stack": False})
    devices = result["ansible_facts"]["rdma"]["devices"]
    assert devices["mlx5_0"]["ports"]["1"]["rate_gbps"] == 400.0
    assert devices["mlx5_bond_0"]["ports"]["1"]["link_layer"] == "Ethernet"


def test_missing_sysfs_root_fails_naming_the_path(tmp_path):
    missing = tmp_path / "no" / "sys"
    kind, result = run_module({"sysfs_root": str(missing)})
    assert kind is AnsibleFailJson
    assert str(missing) in result["msg"] and "does not exist" in result["msg"]
    assert result["path"] == str(missing) and result["changed"] is False
    assert "Traceback" not in result["msg"]


def test_bad_rate_fails_naming_the_path_and_the_expected_form(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: ib_port(rate="400 Gb/sec (4X WARP)")})
    kind, result = run_module({"sysfs_root": str(tmp_path), "gather_stack": False})
    assert kind is AnsibleFailJson
    assert result["path"].endswith("class/infiniband/mlx5_0/ports/1/rate")
    assert "unknown link speed 'WARP'" in result["msg"] and "NDR" in result["msg"]


def test_malformed_gid_fails(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: roce_port("eth0")}, netdevs={"eth0": {}})
    write(tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1", "gids/0", "fe80::1")
    kind, result = run_module({"sysfs_root": str(tmp_path), "gather_stack": False})
    assert kind is AnsibleFailJson and result["path"].endswith("ports/1/gids/0")


def test_host_without_rdma_devices_is_not_an_error(tmp_path):
    (tmp_path / "class" / "net").mkdir(parents=True)
    kind, result = run_module({"sysfs_root": str(tmp_path)})
    assert kind is AnsibleExitJson and result["changed"] is False
    rdma = result["ansible_facts"]["rdma"]
    assert rdma["devices"] == {} and rdma["netdevs"] == {}
    assert rdma["stack"] == {"provider": "none", "version": None, "ofed_info": None}


def test_unknown_option_is_rejected(tmp_path):
    kind, result = run_module({"sysfs_root": str(tmp_path), "sysfs_path": "/sys"})
    assert kind is AnsibleFailJson and "sysfs_path" in result["msg"]


def test_documentation_lists_every_port_key():
    import yaml  # pylint: disable=import-outside-toplevel

    ret = yaml.safe_load(rdma_facts.RETURN)
    rdma = ret["ansible_facts"]["contains"]["rdma"]["contains"]
    port_keys = set(rdma["devices"]["contains"]["ports"]["contains"])
    assert port_keys >= {"state", "phys_state", "link_layer", "rate_gbps", "width", "speed", "lid", "sm_lid", "netdev", "gids",
                         "roce_v2_ipv4_gid_index", "pkeys", "pkey_indexes", "port_guid", "traffic_class", "rdma_cm", "counters", "hw_counters",
                         "role", "rail", "peer"}
    assert set(rdma["netdevs"]["contains"]) == {"mtu", "operstate", "carrier", "speed_mbps", "address", "rdma_device", "rdma_port", "ecn"}
    assert set(rdma) == {"sysfs_root", "devices", "netdevs", "kernel_modules", "memlock", "stack", "ports_by_role", "peers",
                         "gpus", "iommu"}
    assert "part_number" in rdma["devices"]["contains"]
    assert set(rdma["devices"]["contains"]) >= {"pcie_path", "max_read_req", "iommu_group", "gpu_affinity"}
    doc = module_docs.documentation(rdma_facts)  # with its doc fragments
    assert set(doc["options"]) == {"sysfs_root", "gather_counters", "gather_all_netdevs", "gather_stack", "port_roles", "fabrics",
                                   "management_netdevs", "peers", "pcie"}


def test_module_on_a_simulated_mixed_host(tmp_path, commands):
    import simhost  # tests/simhost, on sys.path via tests/unit/conftest.py
    simhost.build_tree(simhost.load("mixed_ib_roce_down"), tmp_path / "sys", host_index=2)
    commands["tools"] = {"ofed_info": (0, "MLNX_OFED_LINUX-24.10-1.1.4.0:\n")}
    kind, result = run_module({"sysfs_root": str(tmp_path / "sys"), "_ansible_check_mode": True})
    assert kind is AnsibleExitJson and result["changed"] is False
    rdma = result["ansible_facts"]["rdma"]
    assert rdma["stack"]["provider"] == "mlnx_ofed" and rdma["stack"]["version"] == "24.10-1.1.4.0"
    roce = [d["ports"]["1"] for d in rdma["devices"].values() if d["ports"]["1"]["link_layer"] == "Ethernet"]
    assert [p["roce_v2_ipv4_gid_index"] for p in roce] == [3]


def test_pkey_indexes_are_table_indexes_and_port_guid_is_gid0(tmp_path):
    """NCCL_IB_PKEY is a P_Key table index: an empty slot before an entry must not shift it; the port GUID is the
    low half of GID 0 (what opensm's guid option takes)."""
    from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import RdmaSysfs
    port = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    (port / "pkeys").mkdir(parents=True)
    (port / "gids").mkdir()
    for index, value in enumerate(["0xffff", "0x0000", "0x8002", "0x0000"]):
        (port / "pkeys" / str(index)).write_text(value + "\n")
    (port / "gids" / "0").write_text("fe80:0000:0000:0000:0c42:a103:00aa:0101\n")
    (port / "link_layer").write_text("InfiniBand\n")
    facts = RdmaSysfs(str(tmp_path)).read_port("mlx5_0", str(port.parent.parent), "1", [])
    assert facts["pkeys"] == ["0xffff", "0x8002"]
    assert facts["pkey_indexes"] == {"0xffff": 0, "0x8002": 2}
    assert facts["port_guid"] == "0x0c42a10300aa0101"


LLDP = real_fixtures() / "lldp"
IBSTACK = real_fixtures() / "ib-stack"


def _peers_tree(root):
    """An InfiniBand compute port (the ibsim capture's node01 mlx5_0 port 1) and a RoCE storage port whose netdev is
    the one lldpd heard leaf01 swp1 on in the capture."""
    add_hca(root, "mlx5_0", pci="0000:1a:00.0", ports={1: ib_port(guid="0002:c903:00aa:0101")},
            netdevs={"ibp26s0": {}})
    add_hca(root, "mlx5_1", pci="0000:9a:00.0", ports={1: roce_port("ens1f0np0", ipv4="10.0.1.11")},
            netdevs={"ens1f0np0": {}})


def test_peers_are_read_only_when_asked(tmp_path, commands):
    _peers_tree(tmp_path)
    commands["tools"] = {"lldpcli": (0, (LLDP / "lldpcli-json0-neighbors-dcbx-sim-01.txt").read_text(encoding="utf-8")),
                         "iblinkinfo": (0, (IBSTACK / "iblinkinfo-D0-a-sim-01.txt").read_text(encoding="utf-8"))}
    args = {"sysfs_root": str(tmp_path), "gather_stack": False, "fabrics": ["infiniband", "roce"]}
    _kind, plain = run_module(args)
    rdma = plain["ansible_facts"]["rdma"]
    assert "peers" not in rdma and commands["calls"] == []
    assert all("peer" not in port for dev in rdma["devices"].values() for port in dev["ports"].values())
    # the same read with peers, in check mode: one lldpcli, one iblinkinfo, nothing changed
    kind, result = run_module(dict(args, peers=True, _ansible_check_mode=True))
    assert kind is AnsibleExitJson and result["changed"] is False
    assert [argv for argv, _kw in commands["calls"]] == [
        ["/usr/bin/lldpcli", "-f", "json0", "show", "neighbors", "details"],
        ["/usr/bin/iblinkinfo", "-C", "mlx5_0", "-P", "1", "-D", "0", "-a"]]
    assert not any(kw.get("changes") for _argv, kw in commands["calls"])
    rdma = result["ansible_facts"]["rdma"]
    assert rdma["peers"] == {"lldp": {"state": "ok", "reason": None}, "infiniband": {"state": "ok", "reason": None},
                             "problems": []}
    ib = rdma["devices"]["mlx5_0"]["ports"]["1"]["peer"]
    assert (ib["system_name"], ib["guid"], ib["port_id"], ib["width"], ib["speed"]) == \
        ("leaf01", "0x0002c90300fab001", 1, "4X", "2.5 Gbps")
    roce = rdma["devices"]["mlx5_1"]["ports"]["1"]["peer"]
    assert (roce["system_name"], roce["port_id"], roce["mfs"], roce["dcbx"]["pfc"]["enabled"]) == \
        ("leaf01", "swp1", 9216, [3])
    # everything else is the facts read without peers
    for dev in rdma["devices"].values():
        for port in dev["ports"].values():
            port.pop("peer")
    rdma.pop("peers")
    assert rdma == plain["ansible_facts"]["rdma"]
    json.dumps(result)


def test_peers_with_lldpd_stopped_and_no_infiniband_diags_do_not_fail(tmp_path, commands):
    _peers_tree(tmp_path)
    commands["tools"] = {"lldpcli": (1, "", (LLDP / "lldpcli-stderr-no-daemon-sim-01.txt").read_text(encoding="utf-8"))}
    kind, result = run_module({"sysfs_root": str(tmp_path), "gather_stack": False, "fabrics": ["infiniband", "roce"],
                               "peers": True})
    assert kind is AnsibleExitJson and result["changed"] is False
    rdma = result["ansible_facts"]["rdma"]
    assert rdma["peers"]["lldp"]["state"] == "lldpd_not_running"
    assert rdma["peers"]["infiniband"]["state"] == "infiniband_diags_not_installed"
    assert [dev["ports"]["1"]["peer"] for dev in rdma["devices"].values()] == [None, None]


def test_pcie_is_read_only_when_asked_and_runs_no_command(tmp_path, commands):
    """The GPUDirect path of a simulated 8-rail host in the DGX H100-like PCIe tree (simhost pcie_tree.build_host):
    with pcie=true every device gets its path and nearest GPU, the host its GPUs and IOMMU mode; without it, none of
    those keys; no command either way."""
    from simhost import pcie_tree  # pylint: disable=import-outside-toplevel
    pcie_tree.build_host(tmp_path, "cx7_ib_ndr_8x")
    args = {"sysfs_root": str(tmp_path), "gather_stack": False, "fabrics": ["infiniband"]}
    _kind, result = run_module(args)
    plain = result["ansible_facts"]["rdma"]
    assert "gpus" not in plain and "iommu" not in plain and "pcie_path" not in plain["devices"]["mlx5_0"]
    kind, result = run_module(dict(args, pcie=True, _ansible_check_mode=True))
    assert kind is AnsibleExitJson and result["changed"] is False and commands["calls"] == []
    rdma = result["ansible_facts"]["rdma"]
    assert [g["device_id"] for g in rdma["gpus"]] == ["0x2330"] * 8 and rdma["iommu"] == {"mode": "passthrough"}
    dev = rdma["devices"]["mlx5_0"]
    assert dev["gpu_affinity"] == {"gpu": "0000:18:00.0", "distance": "PIX"} and dev["max_read_req"] == 4096
    assert [h["pci"] for h in dev["pcie_path"]] == ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:19:00.0"]
