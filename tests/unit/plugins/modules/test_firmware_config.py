"""The hpcnet.rdma.firmware_config module (every card of a host in one call) against the simulated host's stateful
mstconfig and its tree, as tests/unit/plugins/modules/test_mlxconfig_module.py does for one card.

The host is cx7_vpi_2p: one dual-port VPI card (mlx5_0 at 0000:0c:00.0, mlx5_1 at 0000:0c:00.1, port 2 Ethernet).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.hpcnet.rdma.plugins.module_utils.rdma_sysfs import gather_rdma_sysfs
from ansible_collections.hpcnet.rdma.plugins.modules import firmware_config
from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

SIM_BIN = Path(__file__).resolve().parents[3] / "simhost" / "bin"


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture(autouse=True)
def _exits(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", lambda self, **kw: (_ for _ in ()).throw(ExitJson(kw)))
    monkeypatch.setattr(basic.AnsibleModule, "fail_json",
                        lambda self, msg, **kw: (_ for _ in ()).throw(FailJson(dict(kw, msg=msg))))


@pytest.fixture(name="host")
def _host(monkeypatch, tmp_path):
    root = tmp_path / "sys"
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "disk"))
    monkeypatch.setenv("SIMHOST_SYSFS_ROOT", str(root))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mstconfig").symlink_to(SIM_BIN / "mstconfig")
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "")))

    def boot():
        tree.build_tree(profile.load("cx7_vpi_2p"), root, host_index=1)
        return root
    boot()
    return boot


def _run(root, check=False, **args):
    args = dict({"sysfs_root": str(root), "tool": "mstconfig", "devices": gather_rdma_sysfs(str(root))["devices"]}, **args)
    if check:
        args["_ansible_check_mode"] = True
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as info:
            firmware_config.main()
    return info.value.args[0], isinstance(info.value, FailJson)


def _disk():
    return sorted((p, p.read_bytes()) for p in Path(os.environ["SIMHOST_PERSIST_DIR"]).rglob("*") if p.is_file())


def test_no_entries_reads_nothing(host):
    result, failed = _run(host())
    assert not failed and not result["changed"]
    assert result["cards"] == [] and result["reboot_reasons"] == [] and result["commands"] == []


def test_read_all_reports_each_card_once(host):
    result, failed = _run(host(), read_all=True)
    assert not failed and not result["changed"]
    assert [card["device"] for card in result["cards"]] == ["0000:0c:00.0"]
    assert result["cards"][0]["devices"] == ["mlx5_0", "mlx5_1"]
    assert result["cards"][0]["config"]["LINK_TYPE_P2"] == {"default": 1, "current": 2, "next_boot": 2}
    assert result["reboot_reasons"] == []


def test_check_mode_plans_and_writes_nothing(host):
    root = host()
    before = _disk()
    entries = [{"devices": "all", "params": {"LINK_TYPE_P2": "IB"}}]
    result, failed = _run(root, check=True, entries=entries)
    assert not failed and result["changed"]
    assert result["commands"] == ["mstconfig -y -d 0000:0c:00.0 set LINK_TYPE_P2=IB"]
    assert result["reboot_reasons"] == [{"device": "mlx5_1", "pci": "0000:0c:00.1", "card": "0000:0c:00.0",
                                         "parameter": "LINK_TYPE_P2", "from": "ETH(2)", "to": "IB(1)"}]
    assert result["diff"] == {"before": {"mlx5_0,mlx5_1 (0000:0c:00.0)": {"LINK_TYPE_P2": 2}},
                              "after": {"mlx5_0,mlx5_1 (0000:0c:00.0)": {"LINK_TYPE_P2": 1}}}
    assert _disk() == before


def test_set_then_second_run_changes_nothing_and_the_reboot_makes_it_current(host):
    root = host()
    entries = [{"devices": ["mlx5_1"], "params": {"LINK_TYPE_P2": "IB"}}]
    first, failed = _run(root, entries=entries)
    assert not failed and first["changed"] and len(first["reboot_reasons"]) == 1
    second, _ = _run(root, entries=entries)
    assert not second["changed"] and second["commands"] == [] and len(second["reboot_reasons"]) == 1
    root = host()  # reboot
    after, _ = _run(root, entries=entries)
    assert not after["changed"] and after["reboot_reasons"] == []
    assert after["cards"][0]["config"]["LINK_TYPE_P2"]["current"] == 1


def test_a_selector_that_picks_no_card_is_returned(host):
    entries = [{"devices": ["MCX75310AAS-NEAT"], "params": {"SRIOV_EN": True}}]
    result, failed = _run(host(), entries=entries)
    assert not failed and not result["changed"]
    assert result["unmatched"] == ["firmware_mlxconfig[0].devices: MCX75310AAS-NEAT"]


def test_a_part_number_selector_matches_the_card_read(host):
    entries = [{"devices": ["MCX755106AS-HEAT"], "params": {"LINK_TYPE_P2": "IB"}}]
    result, failed = _run(host(), check=True, entries=entries)
    assert not failed and result["changed"] and result["unmatched"] == []


@pytest.mark.parametrize("entries,fragment", [
    ([{"devices": "all", "params": {"NO_SUCH_P1": 1}}], "has no parameter NO_SUCH_P1. Nothing was written."),
    ([{"params": {"LINK_TYPE_P2": "IB"}}], "firmware_mlxconfig[0]"),
])
def test_bad_entries_fail_before_anything_is_written(host, entries, fragment):
    root = host()
    before = _disk()
    result, failed = _run(root, entries=entries)
    assert failed and not result["changed"]
    assert fragment in result["msg"], result["msg"]
    assert _disk() == before


def test_a_card_the_tool_refuses_is_returned_not_raised(host):
    result, failed = _run(host(), entries=[{"devices": "all", "params": {"LINK_TYPE_P2": "FOO"}}])
    assert not failed and not result["changed"]
    assert result["refused"][0]["pci"] == "0000:0c:00.0"
    assert "LINK_TYPE_P2=FOO is not a value the device accepts" in result["refused"][0]["msg"]
