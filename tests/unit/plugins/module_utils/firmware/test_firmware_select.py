"""Which card gets which firmware parameters (firmware role), the reboot reasons and the after-reboot check."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.filter import firmware as filters
from ansible_collections.hpcnet.rdma.plugins.filter import roce as roce_filters
from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware import firmware_select as fs
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import facts as rdma_facts

DEVICES = {
    "mlx5_0": {"pci_address": "0000:0c:00.0", "board_id": "MT_0000000970", "ports": {"1": {"state": "ACTIVE"}}},
    "mlx5_1": {"pci_address": "0000:0c:00.1", "board_id": "MT_0000000970", "ports": {"1": {"state": "ACTIVE"}}},
    "mlx5_2": {"pci_address": "0000:8c:00.0", "board_id": "MT_0000000838", "ports": {"1": {"state": "DOWN"}}},
    "rxe0": {"pci_address": None, "ports": {"1": {"state": "ACTIVE"}}},
}
INFOS = {"0000:0c:00.0": {"name": "MCX755106AS-HEAT_Ax"}, "0000:8c:00.0": {"name": "MCX75310AAS-NEAT_Ax"}}


def test_cards_group_functions_of_one_bus_device():
    cards = fs.cards(DEVICES)
    assert [c["pci"] for c in cards] == ["0000:0c:00.0", "0000:8c:00.0"]
    assert cards[0]["devices"] == ["mlx5_0", "mlx5_1"]
    assert cards[0]["functions"] == {"0000:0c:00.0": "mlx5_0", "0000:0c:00.1": "mlx5_1"}


@pytest.mark.parametrize("selector,pcis", [
    ("all", ["0000:0c:00.0", "0000:8c:00.0"]),
    ("mlx5_1", ["0000:0c:00.0"]),
    ("0000:0c:00.1", ["0000:0c:00.0"]),
    ("0c:00", ["0000:0c:00.0"]),
    ("8c:00.0", ["0000:8c:00.0"]),
    ("8c:00.1", []),
    ("MCX755106AS-HEAT", ["0000:0c:00.0"]),
    ("mcx755106as-heat_ax", ["0000:0c:00.0"]),
    ("MT_0000000838", ["0000:8c:00.0"]),
    ("mlx5_9", []),
])
def test_selectors(selector, pcis):
    targets = fs.targets(DEVICES, [{"devices": [selector], "params": {"ATS_ENABLED": False}}], INFOS)
    assert [t["pci"] for t in targets] == pcis


def test_later_entries_win_and_params_merge():
    entries = [{"devices": "all", "params": {"ATS_ENABLED": False, "LINK_TYPE_P2": "ETH"}},
               {"devices": ["mlx5_0"], "params": {"LINK_TYPE_P2": "IB"}}]
    targets = fs.targets(DEVICES, entries, INFOS)
    assert targets[0] == {"pci": "0000:0c:00.0", "devices": ["mlx5_0", "mlx5_1"], "entries": [0, 1],
                          "params": {"ATS_ENABLED": False, "LINK_TYPE_P2": "IB"}}
    assert targets[1]["params"] == {"ATS_ENABLED": False, "LINK_TYPE_P2": "ETH"}


@pytest.mark.parametrize("entries,fragment", [
    ({"devices": "all"}, "firmware_mlxconfig must be a list"),
    (["all"], "firmware_mlxconfig[0] must be a map with keys devices and params"),
    ([{"params": {"X": 1}}], "firmware_mlxconfig[0] must be a map"),
    ([{"devices": "all", "params": {}, "extra": 1}], "firmware_mlxconfig[0] must be a map"),
    ([{"devices": [], "params": {"X": 1}}], "firmware_mlxconfig[0].devices must be all"),
    ([{"devices": [3], "params": {"X": 1}}], "firmware_mlxconfig[0].devices must be all"),
    ([{"devices": "all", "params": {"sriov_en": 1}}], "firmware_mlxconfig[0].params: 'sriov_en' is not an mlxconfig"),
    ([{"devices": "all", "params": {"NUM_OF_VFS": {"a": 1}}}], "firmware_mlxconfig[0].params: NUM_OF_VFS={'a': 1} must"),
])
def test_bad_entries(entries, fragment):
    with pytest.raises(fs.SelectError) as info:
        fs.targets(DEVICES, entries)
    assert fragment in str(info.value)
    assert fragment in filters.firmware_targets({"devices": DEVICES}, entries, {}, "return")["error"]


def test_reboot_reasons_name_the_port_device():
    results = [{"device": "0000:0c:00.0", "pending": {
        "LINK_TYPE_P2": {"current": 2, "next_boot": 1, "printed": {"current": "ETH(2)", "next_boot": "IB(1)"}},
        "SRIOV_EN": {"current": 0, "next_boot": 1, "printed": {"current": "False(0)", "next_boot": "True(1)"}}}},
        {"device": "0000:8c:00.0", "pending": {}}]
    assert fs.reboot_reasons(results, DEVICES) == [
        {"device": "mlx5_1", "pci": "0000:0c:00.1", "card": "0000:0c:00.0", "parameter": "LINK_TYPE_P2",
         "from": "ETH(2)", "to": "IB(1)"},
        {"device": "mlx5_0", "pci": "0000:0c:00.0", "card": "0000:0c:00.0", "parameter": "SRIOV_EN",
         "from": "False(0)", "to": "True(1)"}]


def test_after_reboot():
    before = [{"device": "mlx5_1", "pci": "0000:0c:00.1", "card": "0000:0c:00.0", "parameter": "LINK_TYPE_P2",
               "from": "ETH(2)", "to": "IB(1)"},
              {"device": "mlx5_0", "pci": "0000:0c:00.0", "parameter": "NUM_OF_VFS", "from": "0", "to": "8"}]
    good = [{"device": "0000:0c:00.0", "config": {"LINK_TYPE_P2": {"current": 1, "next_boot": 1},
                                                  "NUM_OF_VFS": {"current": 8, "next_boot": 8}}}]
    assert fs.after_reboot(before, good) == {"current": ["mlx5_1 LINK_TYPE_P2 IB(1)", "mlx5_0 NUM_OF_VFS 8"],
                                             "not_applied": []}
    bad = [{"device": "0000:0c:00.0", "config": {"LINK_TYPE_P2": {"current": 2, "next_boot": 1}}}]
    assert fs.after_reboot(before, bad)["not_applied"] == [
        "mlx5_1 LINK_TYPE_P2 is 2, expected IB(1) (next boot 1)", "mlx5_0 NUM_OF_VFS was not read back"]


def test_after_reboot_leaves_the_driver_to_the_ofed_role():
    before = [{"device": "mlx5_core", "pci": "kernel module", "card": None, "parameter": "version", "kind": "driver",
               "from": "inbox", "to": "25.10-1.7.1"}]
    assert fs.after_reboot(before, []) == {"current": [], "not_applied": []}


def test_ports():
    rdma = {"devices": DEVICES}
    assert rdma_facts.ports(rdma, "ACTIVE") == ["mlx5_0:1", "mlx5_1:1", "rxe0:1"]
    assert rdma_facts.ports(rdma) == ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "rxe0:1"]


def test_roce_handoff_uses_the_card_port():
    rdma = {"devices": DEVICES, "netdevs": {
        "enp12s0f1np1": {"rdma_device": "mlx5_1", "rdma_port": 1, "ecn": None},
        "enp140s0np0": {"rdma_device": "mlx5_2", "rdma_port": 1, "ecn": {"cnp_dscp": 48}}}}
    out = roce_filters.roce_firmware_mlxconfig(rdma, ["enp12s0f1np1", "enp140s0np0"], [3], 48, 6, {"rpg_ai_rate": 10})
    # mlx5_1 is function 1 of its card: port 2; mlx5_2 has the OFED ecn/ tree and needs no firmware
    assert out == [{"devices": ["mlx5_1"], "params": {"ROCE_CC_PRIO_MASK_P2": 8, "CNP_DSCP_P2": 48,
                                                      "CNP_802P_PRIO_P2": 6, "RPG_AI_RATE_P2": 10}}]


def test_a_comma_string_is_a_list_of_selectors():
    targets = fs.targets(DEVICES, [{"devices": "mlx5_0, mlx5_2", "params": {"ATS_ENABLED": False}}], INFOS)
    assert [t["pci"] for t in targets] == ["0000:0c:00.0", "0000:8c:00.0"]


def test_unmatched_selectors_are_named():
    entries = [{"devices": ["mlx5_0", "MCX755105AS-HEAT"], "params": {"X": 1}}, {"devices": "all", "params": {"Y": 1}}]
    assert fs.unmatched_selectors(DEVICES, entries, INFOS) == ["firmware_mlxconfig[0].devices: MCX755105AS-HEAT"]


def test_missing_params_are_found_on_every_card_before_any_is_written():
    targets = fs.targets(DEVICES, [{"devices": "all", "params": {"LINK_TYPE_P1": "ETH", "ARR[3]": 1}}], INFOS)
    reads = [{"device": "0000:0c:00.0", "config": {"LINK_TYPE_P1": {}, "ARR": {}}},
             {"device": "0000:8c:00.0", "config": {"ARR[3]": {}}}]
    assert fs.missing_params(targets, reads) == ["mlx5_2 (0000:8c:00.0) has no parameter LINK_TYPE_P1"]
