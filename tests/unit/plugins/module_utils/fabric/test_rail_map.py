"""The fabric-wide rail map (plugins/module_utils/fabric/rail_map.py): a healthy rail-optimised fabric gives no
finding; each fault (a crossed cable, a port on another rail's switch, a port with no peer, two host ports on one
switch port, a tie) is named with host, port, rail and switch port; rails declared (rdma_rail_switches) or inferred;
the bad forms of rdma_rail_switches refused with the variable and the allowed forms."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import rail_map
from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric.rail_map import FabricInputError, build


def fabric(hosts=4, rails=4, leaf="leaf-r%d"):
    """Rail r of node<n> on switch port swp<n> of leaf r: a healthy rail-optimised fabric."""
    return dict(("node%d" % n, [{"rail": r, "device": "mlx5_%d" % r, "port": 1,
                                 "peer": {"system_name": leaf % r, "port_id": "swp%d" % n}}
                                for r in range(rails)]) for n in range(1, hosts + 1))


def cross(hosts, host, a, b):
    ports = hosts[host]
    ports[a]["peer"], ports[b]["peer"] = ports[b]["peer"], ports[a]["peer"]
    return hosts


def checks(result):
    return sorted((f["check"], f["host"], f["rail"]) for f in result["findings"])


def test_a_healthy_fabric_has_no_finding_and_maps_every_rail():
    result = build(fabric())
    assert result["findings"] == []
    assert result["basis"] == "inferred"
    assert result["rail_switches"] == {"0": ["leaf-r0"], "1": ["leaf-r1"], "2": ["leaf-r2"], "3": ["leaf-r3"]}
    assert result["rail_map"]["node3"]["2"] == {"device": "mlx5_2", "port": 1, "switch": "leaf-r2", "switch_port": "swp3"}
    assert list(result["rail_map"]) == ["node1", "node2", "node3", "node4"]


def test_a_crossed_cable_is_one_finding_naming_both_ports_and_both_switch_ports():
    result = build(cross(fabric(), "node2", 2, 3))
    assert checks(result) == [("rail_map", "node2", 2)]
    f = result["findings"][0]
    assert (f["severity"], f["device"], f["port"], f["peer"]) == ("error", "mlx5_2", 1, "leaf-r3:swp2")
    assert "a crossed cable: rails 2 and 3 of node2 are swapped" in f["cause"]
    assert f["found"] == "mlx5_2:1 on leaf-r3:swp2 (rail 3's), mlx5_3:1 on leaf-r2:swp2 (rail 2's)"
    assert f["fix"] == "swap the cables of mlx5_2:1 and mlx5_3:1 on node2 (now at leaf-r3:swp2 and leaf-r2:swp2)"


def test_a_port_on_another_rails_switch_names_the_rails_switch_to_move_it_to():
    hosts = fabric()
    hosts["node4"][1]["peer"] = {"system_name": "leaf-r0", "port_id": "swp9"}
    result = build(hosts)
    assert checks(result) == [("rail_map", "node4", 1)]
    f = result["findings"][0]
    assert f["peer"] == "leaf-r0:swp9"
    assert f["found"] == "leaf-r0:swp9 (rail 0's switch)"
    assert f["expected"] == "rail 1's switch (leaf-r1)"
    assert f["fix"] == "move the cable of mlx5_1:1 on node4 to a port of leaf-r1"


def test_a_port_with_no_peer_is_a_warning_and_stays_in_the_map():
    hosts = fabric()
    hosts["node3"][0]["peer"] = None
    result = build(hosts)
    assert checks(result) == [("peer_missing", "node3", 0)]
    f = result["findings"][0]
    assert (f["severity"], f["device"], f["port"], f["peer"]) == ("warning", "mlx5_0", 1, None)
    assert result["rail_map"]["node3"]["0"] == {"device": "mlx5_0", "port": 1, "switch": None, "switch_port": None}


def test_two_host_ports_on_one_switch_port_name_each_other():
    hosts = fabric()
    hosts["node2"][1]["peer"] = dict(hosts["node1"][1]["peer"])
    result = build(hosts)
    assert checks(result) == [("rail_map", "node1", 1), ("rail_map", "node2", 1)]
    for f in result["findings"]:
        assert f["peer"] == "leaf-r1:swp1"
        assert "node1 mlx5_1:1 (rail 1), node2 mlx5_1:1 (rail 1)" in f["found"]


def test_two_switches_of_one_name_are_told_apart_by_their_chassis_id():
    hosts = fabric()
    hosts["node2"][1]["peer"] = dict(hosts["node1"][1]["peer"], chassis_id="aa:aa")
    hosts["node1"][1]["peer"]["chassis_id"] = "bb:bb"
    assert build(hosts)["findings"] == []


def test_two_hosts_with_one_crossed_pair_tie_and_every_port_on_the_tied_switches_is_named():
    result = build(cross(fabric(hosts=2, rails=2), "node2", 0, 1))
    assert checks(result) == [("rail_map", "node1", 0), ("rail_map", "node1", 1),
                              ("rail_map", "node2", 0), ("rail_map", "node2", 1)]
    f = result["findings"][0]
    assert f["found"] == "leaf-r0 is reached by 1 port(s) of rail 0, 1 port(s) of rail 1"
    assert "the map cannot tell which cable is wrong" in f["cause"]
    assert "rdma_rail_switches" in f["fix"]
    assert "leaf-r0, leaf-r1 serve no one rail (a tie)" in result["note"]


def test_declaring_the_rails_resolves_the_tie_to_the_crossed_host():
    result = build(cross(fabric(hosts=2, rails=2), "node2", 0, 1), ["leaf-r0", "leaf-r1"])
    assert result["basis"] == "declared"
    assert checks(result) == [("rail_map", "node2", 0)]
    assert "a crossed cable: rails 0 and 1 of node2" in result["findings"][0]["cause"]


def test_inferred_rails_follow_each_scalable_units_own_leaves():
    # units of 4 hosts: rail r of unit u on leaf su<u>-r<r>; rail 0 of node6 on unit 1's rail-1 leaf
    hosts = {}
    for n in range(1, 9):
        unit = 1 if n <= 4 else 2
        hosts["node%d" % n] = [{"rail": r, "device": "mlx5_%d" % r, "port": 1,
                                "peer": {"system_name": "su%d-r%d" % (unit, r), "port_id": "swp%d" % n}}
                               for r in range(2)]
    assert build(hosts)["findings"] == []
    hosts["node6"][0]["peer"] = {"system_name": "su1-r1", "port_id": "swp30"}
    result = build(hosts)
    assert result["rail_switches"] == {"0": ["su1-r0", "su2-r0"], "1": ["su1-r1", "su2-r1"]}
    assert checks(result) == [("rail_map", "node6", 0)]
    assert result["findings"][0]["fix"] == "move the cable of mlx5_0:1 on node6 to a port of su1-r0, su2-r0"


def test_declared_and_inferred_agree_on_a_healthy_fabric():
    declared = build(fabric(leaf="Leaf-R%d-a"), ["leaf-r0-*", "leaf-r1-*", ["leaf-r2-a", "leaf-r2-b"], "leaf-r3-?"])
    assert declared["findings"] == [] and declared["basis"] == "declared"
    assert declared["rail_switches"] == build(fabric(leaf="Leaf-R%d-a"))["rail_switches"]


def test_a_declared_rail_flags_a_switch_of_no_rail_and_says_how_to_declare_it():
    hosts = fabric()
    hosts["node1"][3]["peer"] = {"system_name": "mgmt-sw1", "port_id": "ge-0/0/1"}
    result = build(hosts, ["leaf-r0", "leaf-r1", "leaf-r2", "leaf-r3"])
    assert checks(result) == [("rail_map", "node1", 3)]
    f = result["findings"][0]
    assert f["expected"] == "a switch matching rdma_rail_switches[3] (leaf-r3)"
    assert f["found"] == "mgmt-sw1:ge-0/0/1 (a switch of no rail)"
    assert f["fix"].endswith("or add mgmt-sw1 to rdma_rail_switches[3] if it serves rail 3")


def test_a_fabric_that_is_not_rail_optimised_is_not_checked_unless_declared():
    hosts = dict(("node%d" % n, [{"rail": r, "device": "mlx5_%d" % r, "port": 1,
                                  "peer": {"system_name": "tor%d" % n, "port_id": "swp%d" % r}} for r in range(4)])
                 for n in range(1, 4))
    result = build(hosts)
    assert (result["basis"], result["findings"], result["rail_switches"]) == ("none", [], {})
    assert result["note"].startswith("not a rail-optimised fabric: 3 of 3 hosts")
    declared = build(hosts, ["tor*"] * 4)
    assert declared["findings"] == []
    assert len(build(hosts, ["tor1", "tor*", "tor*", "tor*"])["findings"]) == 2  # rail 0 of node2 and node3


def test_findings_have_the_keys_the_fabric_report_takes():
    result = build(cross(fabric(), "node1", 0, 1))
    assert set(result["findings"][0]) == set(rail_map.FINDING_KEYS)


@pytest.mark.parametrize("value,message", [
    ({"0": "leaf-r0"}, "rdma_rail_switches must be a list with one item per rail, rail 0 first"),
    ("leaf-*", "rdma_rail_switches must be a list with one item per rail"),
    (["leaf-r0", ""], "rdma_rail_switches[1] (rail 1) must be a glob on the switch name"),
    (["leaf-r0", 7], "rdma_rail_switches[1] (rail 1) must be a glob"),
    (["leaf-r0", []], "rdma_rail_switches[1] (rail 1) must be a glob on the switch name (leaf-r1-*) or a non-empty list"),
])
def test_bad_forms_of_rdma_rail_switches_are_refused_with_the_allowed_forms(value, message):
    with pytest.raises(FabricInputError) as err:
        build(fabric(), value)
    assert message in str(err.value)
    assert "e.g. [leaf-r0-*, leaf-r1-*]" in str(err.value)


def test_too_few_rails_declared_is_refused_naming_the_rails():
    with pytest.raises(FabricInputError, match=r"rdma_rail_switches has 2 item\(s\) \(rails 0-1\), but the hosts have "
                                               r"rails 0-3: give one item per rail"):
        build(fabric(), ["leaf-r0", "leaf-r1"])


@pytest.mark.parametrize("value", [None, "", []])
def test_an_empty_rdma_rail_switches_means_inferred(value):
    assert build(fabric(), value)["basis"] == "inferred"


@pytest.mark.parametrize("bad,message", [
    ([{"rail": -1, "device": "mlx5_0", "port": 1, "peer": None}], r"hosts.n1\[0\].rail must be an integer >= 0"),
    ([{"rail": 0, "device": "mlx5_0", "port": 1, "peer": {"system_name": "x"}}], r"hosts.n1\[0\].peer must be null"),
    ("mlx5_0", "hosts.n1 must be a list"),
])
def test_bad_host_ports_are_refused_naming_the_field(bad, message):
    with pytest.raises(FabricInputError, match=message):
        build({"n1": bad})


def test_host_ports_reads_the_rails_and_peers_from_the_facts():
    peer = {"system_name": "leaf-r1", "port_id": "swp4"}
    up = {"link_layer": "Ethernet", "state": "ACTIVE"}
    rdma = {"devices": {
        "mlx5_1": {"pci_address": "0000:8c:00.0", "ports": {"1": dict(up, netdev="enp140s0np0", peer=peer)}},
        "mlx5_0": {"pci_address": "0000:0c:00.0", "ports": {"1": dict(up, netdev="enp12s0np0")}}}}
    before = copy.deepcopy(rdma)
    assert rail_map.host_ports(rdma, ["roce"]) == [
        {"rail": 0, "device": "mlx5_0", "port": 1, "peer": None},
        {"rail": 1, "device": "mlx5_1", "port": 1, "peer": peer}]
    assert rdma == before  # the facts are not written


def test_switch_ports_lists_each_reached_switch_port_once_in_natural_order():
    hosts = fabric(hosts=10, rails=1)
    hosts["node5"][0]["peer"] = None
    ports = rail_map.switch_ports(build(hosts)["rail_map"])
    assert list(ports) == ["leaf-r0"]
    assert list(ports["leaf-r0"])[:3] == ["swp1", "swp2", "swp3"] and "swp5" not in ports["leaf-r0"]
    assert ports["leaf-r0"]["swp10"] == {"host": "node10", "rail": 0, "device": "mlx5_0", "port": 1}
