"""The hpcnet.rdma.firmware_config module (every card of a host in one call) against the simulated host's stateful
mstconfig and its tree, as tests/unit/plugins/modules/test_mlxconfig_module.py does for one card.

The host is cx7_vpi_2p: one dual-port VPI card (mlx5_0 at 0000:0c:00.0, mlx5_1 at 0000:0c:00.1, port 2 Ethernet).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs
from ansible_collections.hpcnet.rdma.plugins.modules import firmware_config

CARDS3 = "mixed_ib_roce_down"


@pytest.fixture(name="fw")
def _fw(run_module):
    """``fw(root, check=False, **args)``: the module on the simulated host at ``root``, its devices as rdma_facts reads
    them (tests/unit/plugins/modules/conftest.py runs it)."""
    def run(root, check=False, **args):
        args = dict({"sysfs_root": str(root), "tool": "mstconfig",
                     "devices": gather_rdma_sysfs(str(root))["devices"]}, **args)
        return run_module(firmware_config.main, args, check)
    return run


def _disk():
    return sorted((p, p.read_bytes()) for p in Path(os.environ["SIMHOST_PERSIST_DIR"]).rglob("*") if p.is_file())


def test_no_entries_reads_nothing(vpi_host, fw):
    result, failed = fw(vpi_host())
    assert not failed and not result["changed"]
    assert result["cards"] == [] and result["reboot_reasons"] == [] and result["commands"] == []


def test_read_all_reports_each_card_once(vpi_host, fw):
    result, failed = fw(vpi_host(), read_all=True)
    assert not failed and not result["changed"]
    assert [card["device"] for card in result["cards"]] == ["0000:0c:00.0"]
    assert result["cards"][0]["devices"] == ["mlx5_0", "mlx5_1"]
    assert result["cards"][0]["config"]["LINK_TYPE_P2"] == {"default": 1, "current": 2, "next_boot": 2}
    assert result["reboot_reasons"] == []


def test_check_mode_plans_and_writes_nothing(vpi_host, fw):
    root = vpi_host()
    before = _disk()
    entries = [{"devices": "all", "params": {"LINK_TYPE_P2": "IB"}}]
    result, failed = fw(root, check=True, entries=entries)
    assert not failed and result["changed"]
    assert result["commands"] == ["mstconfig -y -d 0000:0c:00.0 set LINK_TYPE_P2=IB"]
    assert result["reboot_reasons"] == [{"device": "mlx5_1", "pci": "0000:0c:00.1", "card": "0000:0c:00.0",
                                         "parameter": "LINK_TYPE_P2", "from": "ETH(2)", "to": "IB(1)"}]
    assert result["diff"] == {"before": {"mlx5_0,mlx5_1 (0000:0c:00.0)": {"LINK_TYPE_P2": 2}},
                              "after": {"mlx5_0,mlx5_1 (0000:0c:00.0)": {"LINK_TYPE_P2": 1}}}
    assert _disk() == before


def test_set_then_second_run_changes_nothing_and_the_reboot_makes_it_current(vpi_host, fw):
    root = vpi_host()
    entries = [{"devices": ["mlx5_1"], "params": {"LINK_TYPE_P2": "IB"}}]
    first, failed = fw(root, entries=entries)
    assert not failed and first["changed"] and len(first["reboot_reasons"]) == 1
    second, _ = fw(root, entries=entries)
    assert not second["changed"] and second["commands"] == [] and len(second["reboot_reasons"]) == 1
    root = vpi_host()  # reboot
    after, _ = fw(root, entries=entries)
    assert not after["changed"] and after["reboot_reasons"] == []
    assert after["cards"][0]["config"]["LINK_TYPE_P2"]["current"] == 1


def test_a_selector_that_picks_no_card_is_returned(vpi_host, fw):
    entries = [{"devices": ["MCX75310AAS-NEAT"], "params": {"SRIOV_EN": True}}]
    result, failed = fw(vpi_host(), entries=entries)
    assert not failed and not result["changed"]
    assert result["unmatched"] == ["firmware_mlxconfig[0].devices: MCX75310AAS-NEAT"]


def test_a_part_number_selector_matches_the_card_read(vpi_host, fw):
    entries = [{"devices": ["MCX755106AS-HEAT"], "params": {"LINK_TYPE_P2": "IB"}}]
    result, failed = fw(vpi_host(), check=True, entries=entries)
    assert not failed and result["changed"] and result["unmatched"] == []


@pytest.mark.parametrize("entries,fragment", [
    ([{"devices": "all", "params": {"NO_SUCH_P1": 1}}], "has no parameter NO_SUCH_P1. Nothing was written."),
    ([{"params": {"LINK_TYPE_P2": "IB"}}], "firmware_mlxconfig[0]"),
    ([{"devices": "all"}], "firmware_mlxconfig[0] must be a map with keys devices and params"),
    ([{"devices": "all", "params": {"NO_SUCH_P1": 1}}, {"devices": ["MCX75310AAS-NEAT"], "params": {"SRIOV_EN": True}}],
     "No card on this host matches firmware_mlxconfig[1].devices: MCX75310AAS-NEAT"),
])
def test_bad_entries_fail_before_anything_is_written(vpi_host, entries, fragment, fw):
    root = vpi_host()
    before = _disk()
    result, failed = fw(root, entries=entries)
    assert failed and not result["changed"]
    assert fragment in result["msg"], result["msg"]
    assert _disk() == before


def test_a_card_the_tool_refuses_is_returned_not_raised(vpi_host, fw):
    result, failed = fw(vpi_host(), entries=[{"devices": "all", "params": {"LINK_TYPE_P2": "FOO"}}])
    assert not failed and not result["changed"]
    assert result["refused"][0]["pci"] == "0000:0c:00.0"
    assert "LINK_TYPE_P2=FOO is not a value the device accepts" in result["refused"][0]["msg"]


# ------------------------------------------------------------------------------------------- three cards, one host
# mixed_ib_roce_down: three single-port cards (mlx5_0 at 0000:18:00.0, mlx5_1 at 0000:2a:00.0, mlx5_2 at 0000:41:00.0),
# part number MCX755106AS-HEAT, PSID MT_0000000838, NUM_OF_VFS at most 127.

@pytest.fixture(name="cards3")
def _cards3(sim_host):
    return sim_host(CARDS3)


def _pcis(result):
    return sorted(line.split(" -d ")[1].split()[0] for line in result["commands"])


@pytest.mark.parametrize("selectors,pcis", [
    ("all", ["0000:18:00.0", "0000:2a:00.0", "0000:41:00.0"]),
    ("ALL", ["0000:18:00.0", "0000:2a:00.0", "0000:41:00.0"]),
    (["18:00"], ["0000:18:00.0"]),                       # short card address
    (["0000:2A:00"], ["0000:2a:00.0"]),                  # upper case, no function
    (["0000:41:00.0 "], ["0000:41:00.0"]),               # a blank around it
    ("mlx5_0, mlx5_2", ["0000:18:00.0", "0000:41:00.0"]),  # comma-separated string
    (["mcx755106as-heat_ax"], ["0000:18:00.0", "0000:2a:00.0", "0000:41:00.0"]),  # part number, any case, _Ax
    (["mt_0000000838"], ["0000:18:00.0", "0000:2a:00.0", "0000:41:00.0"]),        # PSID, any case
    (["0000:18:00.1"], []),                              # a function the card does not have
])
def test_every_kind_of_selector(cards3, selectors, pcis, fw):
    root = cards3()
    before = _disk()
    result, failed = fw(root, check=True, entries=[{"devices": selectors, "params": {"SRIOV_EN": True}}])
    assert not failed and _pcis(result) == pcis and result["changed"] == bool(pcis)
    assert bool(result["unmatched"]) == (not pcis)
    assert _disk() == before


def test_overlapping_entries_one_call_per_card_later_entries_win(cards3, fw):
    root = cards3()
    entries = [{"devices": "all", "params": {"SRIOV_EN": True, "NUM_OF_VFS": 8}},
               {"devices": ["mlx5_0", "0000:18:00", "MT_0000000838"], "params": {"NUM_OF_VFS": 4}},
               {"devices": ["mlx5_1"], "params": {"NUM_OF_VFS": 16}},
               {"devices": ["mlx5_1"], "params": {"NUM_OF_VFS": 16}}]
    first, failed = fw(root, entries=entries)
    assert not failed and first["changed"]
    assert first["commands"] == ["mstconfig -y -d 0000:18:00.0 set NUM_OF_VFS=4 SRIOV_EN=True",
                                 "mstconfig -y -d 0000:2a:00.0 set NUM_OF_VFS=16 SRIOV_EN=True",
                                 "mstconfig -y -d 0000:41:00.0 set NUM_OF_VFS=4 SRIOV_EN=True"]
    second, _ = fw(root, entries=entries)
    assert not second["changed"] and second["commands"] == [] and len(second["reboot_reasons"]) == 6


def test_a_refused_card_does_not_hide_what_the_others_have_pending(cards3, fw):
    root = cards3()
    entries = [{"devices": ["mlx5_0"], "params": {"SRIOV_EN": True, "NUM_OF_VFS": 8}},
               {"devices": ["mlx5_1"], "params": {"NUM_OF_VFS": 60000}}]  # the tool refuses it (at most 127)
    result, failed = fw(root, entries=entries)
    assert not failed and result["changed"]
    assert result["commands"] == ["mstconfig -y -d 0000:18:00.0 set NUM_OF_VFS=8 SRIOV_EN=True"]
    assert [(r["pci"], r["changed"]) for r in result["refused"]] == [("0000:2a:00.0", False)]
    assert "larger than maximum allowed 127" in result["refused"][0]["msg"]
    assert sorted((r["device"], r["parameter"]) for r in result["reboot_reasons"]) == [
        ("mlx5_0", "NUM_OF_VFS"), ("mlx5_0", "SRIOV_EN")]
    assert [card["device"] for card in result["cards"]] == ["0000:18:00.0", "0000:2a:00.0", "0000:41:00.0"]
    again, failed = fw(root, entries=entries)
    assert not failed and not again["changed"] and again["commands"] == [] and len(again["refused"]) == 1


def test_check_mode_with_a_refused_card_writes_nothing(cards3, fw):
    root = cards3()
    before = _disk()
    entries = [{"devices": ["mlx5_0"], "params": {"SRIOV_EN": True}}, {"devices": ["mlx5_1"], "params": {"SRIOV_EN": "MAYBE"}}]
    result, failed = fw(root, check=True, entries=entries)
    assert not failed and result["changed"] and _pcis(result) == ["0000:18:00.0"]
    assert [r["pci"] for r in result["refused"]] == ["0000:2a:00.0"]
    assert _disk() == before


@pytest.mark.parametrize("entries,fragment", [
    (["all"], "entries"),
    ([None], "entries"),
    ([{"devices": None, "params": {"SRIOV_EN": True}}], "firmware_mlxconfig[0].devices must be"),
    ([{"devices": [], "params": {"SRIOV_EN": True}}], "firmware_mlxconfig[0].devices must be"),
    ([{"devices": [["mlx5_0"]], "params": {"SRIOV_EN": True}}], "firmware_mlxconfig[0].devices must be"),
    ([{"devices": "mlx5_0,", "params": {"SRIOV_EN": True}}], "firmware_mlxconfig[0].devices must be"),
    ([{"devices": "all", "params": {"SRIOV_EN": True}, "device": "x"}], "must be a map with keys devices and params"),
    ([{"devices": "all", "params": None}], "firmware_mlxconfig[0].params must be a map"),
    ([{"devices": "all", "params": {"sriov_en": True}}], "is not an mlxconfig parameter name"),
    ([{"devices": "all", "params": {"NUM_OF_VFS": 1.5}}], "NUM_OF_VFS=1.5"),
    ([{"devices": "all", "params": {"NUM_OF_VFS": "08"}}], "leading zero"),
    ([{"devices": ["mlx5_9"], "params": {"SRIOV_EN": True}}, {"devices": "all", "params": {"LINK_TYPE_P1": "IB"}}],
     "mlx5_0 (0000:18:00.0) has no parameter LINK_TYPE_P1; mlx5_1"),
])
def test_bad_entries_fail_with_a_message_and_write_nothing(cards3, entries, fragment, fw):
    root = cards3()
    before = _disk()
    result, failed = fw(root, entries=entries)
    assert failed and not result.get("changed") and fragment in result["msg"], result
    assert _disk() == before


@pytest.mark.parametrize("devices", [{}, {"rxe0": {"pci_address": None, "ports": {}}}, {"siw0": {}}])
def test_no_card_reads_nothing(cards3, devices, fw):
    root = cards3()
    result, failed = fw(root, read_all=True, devices=devices)
    assert not failed and not result["changed"] and result["cards"] == [] and result["reboot_reasons"] == []
    result, failed = fw(root, devices=devices, entries=[{"devices": "all", "params": {"SRIOV_EN": True}}])
    assert not failed and not result["changed"] and result["unmatched"] == ["firmware_mlxconfig[0].devices: all"]


def test_rxe_next_to_the_cards_is_no_card(cards3, fw):
    root = cards3()
    devices = dict(gather_rdma_sysfs(str(root))["devices"], rxe0={"pci_address": None, "ports": {}})
    result, failed = fw(root, check=True, devices=devices, entries=[{"devices": ["rxe0", "mlx5_2"], "params": {"SRIOV_EN": True}}])
    assert not failed and _pcis(result) == ["0000:41:00.0"]
    assert result["unmatched"] == ["firmware_mlxconfig[0].devices: rxe0"]


def test_the_rolling_reboot_compares_the_read_entry_points_cards(cards3, fw):
    """playbooks/tasks/rolling_reboot_host.yml: rdma_reboot_reasons before the reboot | firmware_after_reboot(cards)."""
    from ansible_collections.hpcnet.rdma.plugins.filter.firmware import firmware_after_reboot
    root = cards3()
    entries = [{"devices": "all", "params": {"SRIOV_EN": True}}, {"devices": ["mlx5_1"], "params": {"NUM_OF_VFS": 8}}]
    before, _ = fw(root, entries=entries)
    now, _ = fw(cards3(), read_all=True)  # reboot, then tasks_from: read.yml
    after = firmware_after_reboot(before["reboot_reasons"], now["cards"])
    assert after["not_applied"] == [] and len(after["current"]) == 4
    assert now["reboot_reasons"] == [] and not now["changed"]


# ------------------------------------------------------------------------------------ defects found in review (fixed)

@pytest.mark.parametrize("address", ["0000:2A:00.0", "2a:00.0"])
def test_a_pci_address_not_in_canonical_form_is_no_traceback(cards3, address, fw):
    root = cards3()
    devices = gather_rdma_sysfs(str(root))["devices"]
    devices["mlx5_1"] = dict(devices["mlx5_1"], pci_address=address)
    result, failed = fw(root, check=True, devices=devices, read_all=True)
    assert failed or [card["device"] for card in result["cards"]] == ["0000:18:00.0", "0000:2a:00.0", "0000:41:00.0"]


def test_a_card_refused_after_its_write_reports_what_it_has_pending(cards3, monkeypatch, fw):
    from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware import mlxconfig
    root = cards3()
    real = mlxconfig.Device.query_all

    def query_all(self, names=()):
        query = real(self, names)
        if self.pci == "0000:2a:00.0" and getattr(self, "applied", None) == [] and "NUM_OF_VFS" in query["params"]:
            query["params"]["NUM_OF_VFS"]["next_boot"] = "0"  # the read-back after the set: NUM_OF_VFS did not take
        return query
    monkeypatch.setattr(mlxconfig.Device, "query_all", query_all)
    result, failed = fw(root, entries=[{"devices": "all", "params": {"SRIOV_EN": True, "NUM_OF_VFS": 8}}])
    assert not failed and result["changed"]
    assert [(r["pci"], r["changed"]) for r in result["refused"]] == [("0000:2a:00.0", True)]
    assert ("mlx5_1", "SRIOV_EN") in [(r["device"], r["parameter"]) for r in result["reboot_reasons"]]


def test_role_selectors_take_the_ports_roles_and_fabrics_give_facts_without_them_the_defaults(vpi_host, fw):
    """Issue 23: role:storage picks the card of the Ethernet storage port (port 2, up with an address); devices read
    without roles (as gather_rdma_sysfs gives them) pick nothing unless fabrics (group_names) gives the defaults."""
    root = vpi_host()
    entries = [{"devices": ["role:storage"], "params": {"SRIOV_EN": True, "NUM_OF_VFS": 8}}]
    bare, failed = fw(root, check=True, entries=entries)
    assert not failed and bare["unmatched"] == ["firmware_mlxconfig[0].devices: role:storage"] and bare["commands"] == []
    result, failed = fw(root, check=True, entries=entries, fabrics=["infiniband"])
    assert not failed and result["unmatched"] == []
    assert result["commands"] == ["mstconfig -y -d 0000:0c:00.0 set NUM_OF_VFS=8 SRIOV_EN=True"]
    # roles the facts carry win over the defaults: with port 2 unused, role:storage picks nothing
    devices = gather_rdma_sysfs(str(root))
    port_roles.annotate(devices, [{"role": "unused", "devices": ["Ethernet"]}], ["infiniband"], [])
    kept, failed = fw(root, check=True, entries=entries, fabrics=["infiniband"], devices=devices["devices"])
    assert not failed and kept["commands"] == [] and kept["unmatched"] == ["firmware_mlxconfig[0].devices: role:storage"]
