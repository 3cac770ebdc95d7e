"""Tests of the port roles and rails (module_utils/sysfs/port_roles.py) and the VPD part number (sysfs/pci.py)."""

from __future__ import annotations

import pytest

import simhost  # noqa: E402  (tests/simhost, on sys.path via conftest)
from ansible_collections.hpcnet.rdma.plugins.module_utils.play import play_inputs
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import pci, port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.port_roles import PortRoleError, annotate, assign
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs


def _port(link_layer, state="ACTIVE", netdev=None, gids=None):
    return {"link_layer": link_layer, "state": state, "netdev": netdev, "gids": gids or []}


V4 = [{"index": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001"},
      {"index": 3, "gid": "0000:0000:0000:0000:0000:ffff:0a00:010b"}]
LINK_LOCAL = [{"index": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001"}]


def _rdma(*devs):
    """devs: (name, pci, port dict, extra device fields)."""
    out = {}
    for name, address, port, *extra in devs:
        dev = {"pci_address": address, "board_id": "MT_0000000838", "part_number": "MCX75310AAS-NEAT", "ports": {"1": port}}
        dev.update(extra[0] if extra else {})
        out[name] = dev
    return {"devices": out}


def _dgx():
    """8 IB compute ports (PCI order differs from name order) + a dual-port VPI card with Ethernet storage ports."""
    buses = ["18", "40", "4f", "5e", "9a", "c0", "ce", "dc"]
    devs = [("ibp%ds0" % int(bus, 16), "0000:%s:00.0" % bus, _port("InfiniBand")) for bus in buses]
    devs += [("rocep170s0f%d" % fn, "0000:aa:00.%d" % fn, _port("Ethernet", netdev="enp170s0f%dnp%d" % (fn, fn), gids=V4),
              {"part_number": "900-9D3B6-00CV-AA0", "board_id": "MT_0000000884"}) for fn in (0, 1)]
    return _rdma(*reversed(devs))


def test_one_fabric_default_roles_keep_storage_ethernet_and_rails_follow_pci_order():
    roles, plan = assign(_dgx(), None, ["infiniband"], ["eth0"])
    assert plan["compute"] == ["ibp24s0:1", "ibp64s0:1", "ibp79s0:1", "ibp94s0:1", "ibp154s0:1", "ibp192s0:1",
                               "ibp206s0:1", "ibp220s0:1"]
    assert [roles[p]["rail"] for p in plan["compute"]] == list(range(8))
    assert plan["storage"] == ["rocep170s0f0:1", "rocep170s0f1:1"]
    assert plan["link_type_changes"] == [] and plan["compute_link_layer"] == "InfiniBand"
    assert roles["rocep170s0f0:1"]["rail"] is None


def test_other_link_layer_without_address_is_unused_unless_made_compute():
    rdma = _rdma(("mlx5_0", "0000:0c:00.0", _port("InfiniBand")),
                 ("mlx5_1", "0000:0c:00.1", _port("Ethernet", state="DOWN", netdev="enp12s0f1np1", gids=LINK_LOCAL)))
    _roles, plan = assign(rdma, None, ["infiniband"], [])
    assert plan["compute"] == ["mlx5_0:1"] and plan["unused"] == ["mlx5_1:1"] and plan["link_type_changes"] == []
    _roles, plan = assign(rdma, [{"role": "compute", "devices": ["mlx5_1"]}], ["infiniband"], [])
    assert plan["compute"] == ["mlx5_0:1", "mlx5_1:1"] and plan["link_type_changes"] == ["mlx5_1:1"]


def test_a_dgx_whose_storage_ports_are_down_keeps_its_rails():
    rdma = _dgx()
    for name in ("rocep170s0f0", "rocep170s0f1"):
        rdma["devices"][name]["ports"]["1"].update(state="DOWN", gids=LINK_LOCAL)
    roles, plan = assign(rdma, None, ["infiniband"], [])
    assert len(plan["compute"]) == 8 and plan["link_type_changes"] == [] and roles["ibp220s0:1"]["rail"] == 7


def test_both_groups_infiniband_compute_ethernet_storage():
    _roles, plan = assign(_dgx(), None, ["roce", "infiniband"], [])
    assert len(plan["compute"]) == 8 and len(plan["storage"]) == 2


def test_roce_host_active_infiniband_port_is_storage_and_management_never_compute():
    rdma = _rdma(("rocep12s0", "0000:0c:00.0", _port("Ethernet", netdev="eth0", gids=V4)),
                 ("rocep13s0", "0000:0d:00.0", _port("Ethernet", netdev="ens13", gids=V4)),
                 ("ibp14s0", "0000:0e:00.0", _port("InfiniBand")))
    roles, plan = assign(rdma, None, ["roce"], ["bond0", "eth0"])
    assert roles["rocep12s0:1"]["role"] == "management" and plan["compute"] == ["rocep13s0:1"]
    assert plan["storage"] == ["ibp14s0:1"]
    with pytest.raises(PortRoleError, match=r"rdma_port_roles\[0\] makes rocep12s0:1 compute, but its netdev eth0 carries"):
        assign(rdma, [{"role": "compute", "devices": ["0c:00"]}], ["roce"], ["eth0"])


@pytest.mark.parametrize("selector, picked", [
    ("all", 10), ("Ethernet", 2), ("InfiniBand", 8), ("aa:00", 2), ("0000:aa:00.1", 1), ("rocep170s0f1", 1),
    ("rocep170s0f1:1", 1), ("enp170s0f0np0", 1), ("900-9D3B6-00CV-AA0", 2), ("mt_0000000884", 2), ("MCX75310AAS-NEAT", 8),
    ("MCX75310AAS-NEAT_Ax", 8), ("mcx75310aas-neat_a1", 8),
])
def test_selectors_later_entries_win(selector, picked):
    entries = [{"role": "storage", "devices": "all"}, {"role": "unused", "devices": [selector]}]
    roles, _plan = assign(_dgx(), entries, ["infiniband"], [])
    assert sum(1 for item in roles.values() if item["role"] == "unused") == picked
    assert sum(1 for item in roles.values() if item["role"] == "storage") == 10 - picked


def test_refusals_name_the_variable_and_the_entry():
    with pytest.raises(PortRoleError, match=r"rdma_port_roles\[0\].devices: mlx5_9 matches no RDMA port of this host"):
        assign(_dgx(), [{"role": "compute", "devices": ["mlx5_9"]}], ["infiniband"], [])
    assign(_dgx(), [{"role": "unused", "devices": ["Ethernet"]}], ["roce"], [])  # a link layer may match nothing
    with pytest.raises(PortRoleError, match="compute ports of two link layers"):
        assign(_dgx(), [{"role": "compute", "devices": ["all"]}], ["roce", "infiniband"], [])
    assert port_roles.entry_errors("compute") == ['rdma_port_roles must be a list of {role, devices}, got "compute".']
    assert port_roles.entry_errors([{"role": "gpu", "devices": "all"}]) == [
        'rdma_port_roles[0].role must be one of compute, storage, management, unused, got "gpu".']
    assert "must be a map with keys role and devices" in port_roles.entry_errors([{"role": "compute"}])[0]
    assert "devices must be all, a link layer" in port_roles.entry_errors([{"role": "compute", "devices": [""]}])[0]
    assert play_inputs.collection_errors({"rdma_port_roles": [{"role": "x", "devices": "all"}]})[0].startswith(
        "rdma_port_roles[0].role")
    assert "rdma_allow_uneven_rails must be true or false" in play_inputs.collection_errors({"rdma_allow_uneven_rails": "maybe"})[0]


def test_rail_counts_per_group_name_the_odd_host():
    def facts_of(host):
        if host == "nodev":  # no RDMA device (rdma_require_devices false): no rails to compare
            return {"devices": {}, "ports_by_role": {"compute": []}}
        return {"devices": {"a": {}}, "ports_by_role": {"compute": ["a:1"] * {"n1": 8, "n2": 8, "n3": 7}[host]}}
    assert play_inputs.rail_errors(facts_of, ["n1", "nodev"], {"roce": ["n1", "nodev"]}) == {"errors": {}, "warnings": []}
    got = play_inputs.rail_errors(facts_of, ["n1", "n2", "n3"], {"roce": ["n1", "n2", "n3"]})
    assert sorted(got["errors"]) == ["n1", "n2", "n3"]  # nothing changes on any host of the group
    assert got["errors"]["n1"] == got["errors"]["n3"]
    assert "n3 has 7 compute rails where the other hosts of the roce group have 8" in got["errors"]["n3"][0]
    got = play_inputs.rail_errors(facts_of, ["n1", "n2", "n3"], {"roce": ["n1", "n2", "n3"]}, "true")
    assert got["errors"] == {} and len(got["warnings"]) == 1
    assert play_inputs.rail_errors(facts_of, ["n1", "n2"], {"roce": ["n1", "n2"]}) == {"errors": {}, "warnings": []}
    got = play_inputs.rail_errors(facts_of, ["n1", "n3"], {"roce": ["n1", "n3"]})  # a tie: no host is the odd one
    assert "the hosts of the roce group have different numbers of compute rails (n1 8, n3 7)" in got["errors"]["n1"][0]


def test_a_host_in_both_groups_has_no_roce_rails():
    def facts_of(host):
        return {"dgx": {"devices": {"i": {}}, "ports_by_role": {"compute": ["i:1"] * 8, "compute_link_layer": "InfiniBand"}}}.get(
            host, {"devices": {"r": {}}, "ports_by_role": {"compute": ["r:1"] * 2, "compute_link_layer": "Ethernet"}})
    got = play_inputs.rail_errors(facts_of, ["dgx", "r1", "r2"], {"roce": ["dgx", "r1", "r2"], "infiniband": ["dgx"]})
    assert got == {"errors": {}, "warnings": []}


def test_vpd_part_number_from_a_simulated_card_and_malformed_vpd(tmp_path):
    root = tmp_path / "sys"
    simhost.build_tree(simhost.load("cx7_vpi_2p"), root)
    rdma = gather_rdma_sysfs(str(root))
    assert {dev["part_number"] for dev in rdma["devices"].values()} == {"MCX755106AS-HEAT"}
    assert pci.vpd_part_number(b"") is None
    assert pci.vpd_part_number(b"\x82\x05\x00ab") is None  # truncated identifier string
    assert pci.vpd_part_number(b"\x82\x01\x00a\x90\x06\x00PN\x03X1 \x78") == "X1"


def test_annotate_writes_role_and_rail_into_every_port(tmp_path):
    root = tmp_path / "sys"
    simhost.build_tree(simhost.load("cx7_ib_ndr_8x"), root)
    rdma = annotate(gather_rdma_sysfs(str(root)), None, ["infiniband"], [])
    rails = sorted((port["rail"], name) for name, dev in rdma["devices"].items() for port in dev["ports"].values())
    assert [rail for rail, _name in rails] == list(range(8))
    assert rdma["ports_by_role"]["compute"] == ["%s:1" % name for _rail, name in rails]
