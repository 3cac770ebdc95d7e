"""InfiniBand peers from iblinkinfo (fabric/ib_peers.py): real field captures (whole, excerpt, grep'd, back-to-back)
and real iblinkinfo runs on an ibsim fabric in its three forms (whole fabric, line mode, partial scan)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import ib_peers as ib
from fixtures_path import real_fixtures

OUTPUTS = real_fixtures() / "rdma-outputs"
IBSTACK = real_fixtures() / "ib-stack"


def _peers(path):
    return ib.hca_peers(path.read_text(encoding="utf-8"))


LEAF01 = {"system_name": "leaf01", "guid": "0x0002c90300fab001", "port_id": 1, "lid": 3, "node_type": "Switch",
          "width": "4X", "speed": "2.5 Gbps", "hca_width": "4X", "hca_speed": "2.5 Gbps",
          "could_be": "Could be 12X Could be 10.0 Gbps"}


@pytest.mark.parametrize("name", ["iblinkinfo-sim-01.txt", "iblinkinfo-l-sim-01.txt", "iblinkinfo-D0-a-sim-01.txt"])
def test_ibsim_runs_every_form_names_the_switch(name):
    got = _peers(IBSTACK / name)
    assert got["problems"] == []
    # line mode prints no node type
    expected = dict(LEAF01, node_type=None) if name == "iblinkinfo-l-sim-01.txt" else LEAF01
    assert ib.find_peer(got["peers"], guid="0x0002c90300aa0101") == expected
    node02 = ib.find_peer(got["peers"], guid="0002C90300AA0201")
    assert (node02["guid"], node02["port_id"], node02["width"]) == ("0x0002c90300fab001", 2, "4X")


def test_ibsim_by_node_description_and_port():
    got = _peers(IBSTACK / "iblinkinfo-sim-01.txt")
    assert ib.find_peer(got["peers"], node_desc="node01 mlx5_0", port=1) == LEAF01
    assert ib.find_peer(got["peers"], node_desc="node01 mlx5_0", port=2) is None
    assert [e["hca_desc"] for e in got["peers"]] == ["node02 mlx5_0", "node01 mlx5_0"]   # no switch line


def test_ibsim_down_ports_parsed():
    ports = ib.parse_iblinkinfo((IBSTACK / "iblinkinfo-sim-01.txt").read_text(encoding="utf-8"))["ports"]
    down = [p for p in ports if p["state"] == "Down"]
    assert [p["port"] for p in down] == [3, 4, 5, 6, 7, 8]
    assert all(p["remote"] is None and p["width"] is None and p["phys_state"] == "Polling" for p in down)
    assert all(p["node_guid"] == "0x0002c90300fab001" and p["node_desc"] == "leaf01" for p in down)


def test_line_mode_description_unpadded():
    ports = ib.parse_iblinkinfo((IBSTACK / "iblinkinfo-l-sim-01.txt").read_text(encoding="utf-8"))["ports"]
    assert {p["node_desc"] for p in ports} == {"node01 mlx5_0", "node02 mlx5_0", "leaf01"}


def test_field_capture_qdr_fabric_with_a_switch_block_excerpt():
    got = _peers(OUTPUTS / "iblinkinfo-01.txt")
    assert len(got["peers"]) == 4
    node02 = ib.find_peer(got["peers"], node_desc="node02 HCA-1", port=1)
    assert node02 == {"system_name": "Infiniscale-IV Mellanox Technologies", "guid": "0x0002c90200e53f88",
                      "port_id": 2, "lid": 2, "node_type": "Switch", "width": "4X", "speed": "10.0 Gbps",
                      "hca_width": "4X", "hca_speed": "10.0 Gbps", "could_be": None}
    # the excerpt of the switch block stops at port 2: port 3's own line is missing, its header is not
    node01 = ib.find_peer(got["peers"], guid="0x0002c903002f80f9")
    assert (node01["guid"], node01["port_id"], node01["width"], node01["hca_width"]) == \
        ("0x0002c90200e53f88", 3, None, "4X")


def test_field_capture_grep_without_headers():
    got = _peers(OUTPUTS / "iblinkinfo-02.txt")
    assert [e["hca_guid"] for e in got["peers"]] == ["0xec0d9a030031bebe", "0x248a070300f69486",
                                                     "0xec0d9a0300a0467a"]
    peer = ib.find_peer(got["peers"], guid="0x248a070300f69486")
    assert (peer["system_name"], peer["port_id"], peer["guid"], peer["speed"]) == \
        ("MF0;SB7700:MSB7700/U1", 36, None, "25.78125 Gbps")      # no switch header: no switch GUID


def test_field_capture_back_to_back_hcas():
    got = _peers(OUTPUTS / "iblinkinfo-03.txt")
    peer = ib.find_peer(got["peers"], node_desc="node08 HCA-3", port=1)
    assert (peer["system_name"], peer["node_type"], peer["guid"]) == ("node09 HCA-1", "CA", "0x0002c90300d5d011")


def test_additional_settings_and_fdr10_speed():
    # `iblinkinfo -p` appends (HOQ:.. VL_Stall:..) to the link; FDR10 is printed "10.0 Gbps (FDR10)"
    text = ("CA: node01 mlx5_0:\n"
            "      0x0002c90300aa0101      1    1[  ] ==( 4X  10.0 Gbps (FDR10) Active/  LinkUp) (HOQ:16 VL_Stall:7)"
            "==>       3    1[  ] \"leaf01\" ( )\n")
    port = ib.parse_iblinkinfo(text)["ports"][0]
    assert (port["width"], port["speed"], port["state"]) == ("4X", "10.0 Gbps (FDR10)", "Active")


def test_noise_lines_skipped_and_garbled_port_lines_reported():
    text = (IBSTACK / "iblinkinfo-stderr-no-umad-sim-01.txt").read_text(encoding="utf-8") + "\nsomething ==> else\n"
    got = ib.parse_iblinkinfo(text)
    assert got["ports"] == []
    assert got["problems"] == ["iblinkinfo line not understood: something ==> else"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from((IBSTACK / "iblinkinfo-sim-01.txt").read_text(encoding="utf-8").splitlines()
                                + ["", "==>", "CA: :", "Switch: 0x0 x:"]), max_size=12))
def test_any_mix_of_lines_never_raises(lines):
    got = ib.hca_peers("\n".join(lines))
    assert isinstance(got["peers"], list)


class FakeRunner:
    """iblinkinfo answering (rc, stdout, stderr) per (device, port), or absent; records each argv."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def which(self, name):
        return "/usr/sbin/" + name if self.answers is not None else None

    def run(self, argv, changes=False, timeout=None):
        assert isinstance(argv, list) and not changes
        self.calls.append(argv)
        return self.answers[(argv[2], argv[4])]


def test_read_peers_one_partial_scan_per_port():
    partial = (IBSTACK / "iblinkinfo-D0-a-sim-01.txt").read_text(encoding="utf-8")
    err = (IBSTACK / "iblinkinfo-stderr-no-umad-sim-01.txt").read_text(encoding="utf-8")
    runner = FakeRunner({("mlx5_0", "1"): (0, partial, ""), ("mlx5_1", "1"): (1, "", err)})
    got = ib.read_peers(runner, [("mlx5_0", 1, "0x0002c90300aa0101"), ("mlx5_1", 1, "0x0002c90300aa0301")])
    assert runner.calls == [["/usr/sbin/iblinkinfo", "-C", "mlx5_0", "-P", "1", "-D", "0", "-a"],
                            ["/usr/sbin/iblinkinfo", "-C", "mlx5_1", "-P", "1", "-D", "0", "-a"]]
    assert got["state"] == "ok"
    assert got["peers"] == {"mlx5_0": {1: LEAF01}, "mlx5_1": {1: None}}
    assert got["problems"] == ["mlx5_1 port 1: `iblinkinfo` failed (rc 1): Failed to open mlx5_1 port 1"]


def test_read_peers_without_infiniband_diags():
    runner = FakeRunner(None)
    got = ib.read_peers(runner, [("mlx5_0", 1, "0x0002c90300aa0101")])
    assert runner.calls == []
    assert got["state"] == "infiniband_diags_not_installed"
    assert got["peers"] == {"mlx5_0": {1: None}}


def test_read_peers_no_ib_port_runs_nothing():
    runner = FakeRunner(None)
    assert ib.read_peers(runner, []) == {"state": "ok", "reason": None, "peers": {}, "problems": []}


def test_read_peers_failing_on_every_port_is_a_state():
    err = (IBSTACK / "iblinkinfo-stderr-no-umad-sim-01.txt").read_text(encoding="utf-8")
    runner = FakeRunner({("mlx5_0", "1"): (1, "", err), ("mlx5_1", "1"): (1, "", err)})
    got = ib.read_peers(runner, [("mlx5_0", 1, "0x0002c90300aa0101"), ("mlx5_1", 1, "0x0002c90300aa0301")])
    assert got["state"] == "iblinkinfo_failed"
    assert got["reason"] == "mlx5_0 port 1: `iblinkinfo` failed (rc 1): Failed to open mlx5_1 port 1"
    assert len(got["problems"]) == 2 and got["peers"] == {"mlx5_0": {1: None}, "mlx5_1": {1: None}}
