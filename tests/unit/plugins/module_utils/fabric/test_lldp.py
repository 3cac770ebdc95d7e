"""RoCE peers from lldpd (fabric/lldp.py): the json0 of real lldpd runs, with and without 802.1Qaz TLVs, no
neighbour, lldpd missing or stopped, and output that is not lldpcli's."""

from __future__ import annotations

import json

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import lldp
from fixtures_path import real_fixtures

LLDP = real_fixtures() / "lldp"
ARGV = ["/usr/sbin/lldpcli", "-f", "json0", "show", "neighbors", "details"]


def _read(name) -> str:
    return (LLDP / name).read_text(encoding="utf-8")


class FakeRunner:
    """lldpcli answering (rc, stdout, stderr), or absent (None); records each argv."""

    def __init__(self, answer):
        self.answer = answer
        self.calls = []

    def which(self, name):
        return "/usr/sbin/" + name if self.answer is not None else None

    def run(self, argv, changes=False, timeout=None):
        assert isinstance(argv, list), "commands must be argv lists"
        assert not changes, "reading the neighbours changes nothing"
        self.calls.append((argv, timeout))
        return self.answer


SWP1 = {
    "system_name": "leaf01",
    "system_description": "Cumulus Linux version 5.9.0 running on Nvidia SN5600",
    "chassis_id": "2e:c5:f2:84:b1:24",
    "port_id": "swp1",
    "port_description": "swp1",
    "mgmt_address": "10.0.0.1",
    "mfs": 9216,
}


def test_json0_capture_two_ports_one_with_dcbx():
    got = lldp.parse_neighbors(_read("lldpcli-json0-neighbors-dcbx-sim-01.txt"))
    assert sorted(got["peers"]) == ["ens1f0np0", "ens2f0np0"]
    assert got["problems"] == []
    peer = got["peers"]["ens1f0np0"]
    assert dict((k, peer[k]) for k in SWP1) == SWP1
    assert peer["dcbx"]["pfc"] == {"willing": False, "mbc": False, "cap": 8, "enabled": [3]}
    assert peer["dcbx"]["app"] == [{"selector": 3, "selector_name": "udp_dccp", "protocol": 4791, "priority": 3}]
    assert peer["dcbx"]["ets"]["prio_tc"] == [0, 0, 0, 3, 0, 0, 6, 0]
    other = got["peers"]["ens2f0np0"]
    assert other["port_id"] == "swp2"
    assert other["dcbx"] is None            # the switch sends no 802.1Qaz TLV
    assert other["mfs"] is None             # nor an 802.3 Maximum Frame Size TLV


def test_json0_no_neighbour():
    assert lldp.parse_neighbors(_read("lldpcli-json0-neighbors-none-sim-01.txt")) == {"peers": {}, "problems": []}


def test_not_json_and_not_json0():
    assert lldp.parse_neighbors("")["problems"][0].startswith("lldpcli's output is not JSON")
    plain = lldp.parse_neighbors(_read("lldpcli-neighbors-cumulus-sn5600-01.txt"))     # lldpcli's plain text
    assert plain["peers"] == {} and plain["problems"][0].startswith("lldpcli's output is not JSON")
    # the folded `-f json` form (an object, not a list, under "lldp") is refused, not misread
    folded = json.dumps({"lldp": {"interface": {"eth0": {"chassis": {}}}}})
    assert "not the json0 format" in lldp.parse_neighbors(folded)["problems"][0]


def test_second_neighbour_on_a_port_is_a_problem():
    data = json.loads(_read("lldpcli-json0-neighbors-dcbx-sim-01.txt"))
    interfaces = data["lldp"][0]["interface"]
    twin = json.loads(json.dumps(interfaces[1]))
    twin["name"] = "ens1f0np0"
    interfaces.append(twin)
    got = lldp.parse_neighbors(json.dumps(data))
    assert got["peers"]["ens1f0np0"]["port_id"] == "swp1"
    assert got["problems"] == ["ens1f0np0 hears more than one LLDP neighbour (leaf01 port swp1, and leaf01 port "
                               "swp2); the first is taken as its peer"]


def test_dcbx_problems_name_the_port():
    data = json.loads(_read("lldpcli-json0-neighbors-dcbx-sim-01.txt"))
    tlv = data["lldp"][0]["interface"][0]["unknown-tlvs"][0]["unknown-tlv"][0]
    tlv.update(len="1", value="08")         # PFC Configuration cut to one octet
    got = lldp.parse_neighbors(json.dumps(data))
    assert got["peers"]["ens1f0np0"]["dcbx"]["pfc"] is None
    assert got["problems"][0].startswith("ens1f0np0: PFC Configuration TLV (OUI 00-80-C2, subtype 11): 1 octets")


def test_read_peers_runs_the_one_command_and_reports_each_netdev():
    runner = FakeRunner((0, _read("lldpcli-json0-neighbors-dcbx-sim-01.txt"), ""))
    got = lldp.read_peers(runner, ["ens1f0np0", "ens3f0np0"])
    assert runner.calls == [(ARGV, lldp.LLDPCLI_TIMEOUT)]
    assert got["state"] == "ok" and got["reason"] is None
    assert sorted(got["peers"]) == ["ens1f0np0", "ens3f0np0"]
    assert got["peers"]["ens1f0np0"]["system_name"] == "leaf01"
    assert got["peers"]["ens3f0np0"] is None


def test_read_peers_all_heard_when_no_netdevs_given():
    got = lldp.read_peers(FakeRunner((0, _read("lldpcli-json0-neighbors-dcbx-sim-01.txt"), "")))
    assert sorted(got["peers"]) == ["ens1f0np0", "ens2f0np0"]


def test_lldpd_not_installed():
    runner = FakeRunner(None)
    got = lldp.read_peers(runner, ["ens1f0np0"])
    assert runner.calls == []
    assert got["state"] == "lldpd_not_installed"
    assert "not installed" in got["reason"]
    assert got["peers"] == {"ens1f0np0": None}


def test_lldpd_not_running():
    got = lldp.read_peers(FakeRunner((1, "", _read("lldpcli-stderr-no-daemon-sim-01.txt"))), ["ens1f0np0"])
    assert got["state"] == "lldpd_not_running"
    assert "systemctl enable --now lldpd" in got["reason"]
    assert got["peers"] == {"ens1f0np0": None}


def test_lldpcli_failing_otherwise_says_its_last_line():
    err = "2026-12-07T16:43:13 [WARN/control] unable to connect to socket /run/lldpd.socket: Permission denied\n"
    got = lldp.read_peers(FakeRunner((1, "", err)), ["ens1f0np0"])
    assert got["state"] == "lldpcli_failed"
    assert got["reason"].endswith("Permission denied")
    assert got["peers"] == {"ens1f0np0": None}


def test_lldpcli_output_not_json_is_a_failed_state():
    got = lldp.read_peers(FakeRunner((0, "garbage", "")), ["ens1f0np0"])
    assert got["state"] == "lldpcli_failed"
    assert got["reason"].startswith("lldpcli's output is not JSON")
