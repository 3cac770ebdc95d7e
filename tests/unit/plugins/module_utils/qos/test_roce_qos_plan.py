"""The RoCE QoS planner: a given state and desired settings give these commands, in this order; bad input is refused.

The state comes from real captures (mlnx_qos-01, dcb text forms, ethtool-a-01) served by a fake runner, on a
sysfs tree built by tests/simhost (an inbox RoCE host and an OFED one with the ecn/ and tc/ trees).
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import roce_qos
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.roce_qos import Port, QosError, validate
from fixtures_path import real_fixtures
from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

RDMA = real_fixtures() / "rdma-outputs"
QOS = real_fixtures() / "qos-firmware"
LOSSLESS = {"trust": "dscp", "pfc": [3], "ecn": [3], "cnp_dscp": 48, "cnp_priority": 6, "traffic_class": 106,
            "roce_tos": 106, "roce_mode": "v2", "global_pause": False, "dscp2prio": None, "dcqcn": None}


class FakeRunner:
    """Answers the read commands from captures; records every command."""

    def __init__(self, tools, answers):
        self.tools, self.answers, self.calls = tools, answers, []

    def which(self, name):
        return "/usr/sbin/" + name if name in self.tools else None

    def run(self, argv, changes=False, timeout=None):
        self.calls.append(argv)
        key = tuple(argv[1:])
        for prefix, answer in sorted(self.answers.items(), key=lambda item: -len(item[0])):
            if key[:len(prefix)] == prefix:
                return answer
        return 0, "", ""


def _tree(tmp_path, name):
    root = tmp_path / "sys"
    tree.build_tree(profile.load(name), root, host_index=1)
    return str(root)


def _mlnx_qos_runner():
    return FakeRunner({"mlnx_qos", "ethtool"}, {
        ("-i",): (0, (RDMA / "mlnx_qos-01.txt").read_text(), ""),
        ("-a",): (0, (QOS / "ethtool-a-01.txt").read_text(), ""),
    })


def _dcb_runner():
    return FakeRunner({"dcb", "ethtool"}, {
        ("-j", "apptrust"): (0, '{"order":["pcp"]}\n', ""),
        ("-j", "pfc"): (0, '{"pfc_cap":8,"macsec_bypass":false,"delay":0,"prio_pfc":{"0":false,"1":false,"2":false,'
                           '"3":false,"4":false,"5":false,"6":false,"7":false}}', ""),
        ("-j", "app"): (0, '{"dscp_prio":[]}', ""),
        ("-a",): (0, (QOS / "ethtool-a-01.txt").read_text(), ""),
    })


@pytest.fixture(name="ofed_port")
def _ofed_port(tmp_path):
    root = _tree(tmp_path, "cx7_roce_400g_2x_ofed")
    # configfs creates the attributes when the device directory is made; a plain directory tree does not, so the
    # fixture makes them (the simulated host models this behaviour itself)
    ports = os.path.join(root, "kernel", "config", "rdma_cm", "mlx5_0", "ports", "1")
    os.makedirs(ports, exist_ok=True)
    for name, value in (("default_roce_mode", "RoCE v2"), ("default_roce_tos", "0")):
        with open(os.path.join(ports, name), "w") as handle:
            handle.write(value + "\n")
    return Port(_mlnx_qos_runner(), root, "enp12s0np0")


@pytest.fixture(name="inbox_port")
def _inbox_port(tmp_path):
    return Port(_dcb_runner(), _tree(tmp_path, "cx7_roce_400g_2x"), "enp12s0np0")


def test_mlnx_qos_state_is_read_from_the_tool_and_the_ecn_tree(ofed_port):
    state = ofed_port.read()
    assert ofed_port.backend == "mlnx_qos" and (ofed_port.device, ofed_port.port) == ("mlx5_0", 1)
    assert state["trust"] == "dscp" and state["pfc"] == [3] and state["global_pause"] is True
    assert state["dscp2prio"] == [d >> 3 for d in range(64)]
    assert set(state) == set(roce_qos.STATE_KEYS)
    assert state["ecn"] is not None and state["cnp_dscp"] is not None


def test_lossless_profile_on_mlnx_qos_turns_pause_off_first_and_only_changes_what_differs(ofed_port):
    before = ofed_port.read()
    _after, steps, firmware = ofed_port.plan(before, LOSSLESS)
    settings = [s["setting"] for s in steps]
    assert settings[0] == "global_pause" and steps[0]["argv"] == ["/usr/sbin/ethtool", "-A", "enp12s0np0", "rx", "off", "tx", "off"]
    assert "trust" not in settings and "pfc" not in settings  # the capture already trusts DSCP with PFC on 3
    assert firmware == {}


def test_pfc_and_trust_commands_per_backend(ofed_port, inbox_port):
    _a, steps, _f = ofed_port.plan(ofed_port.read(), {"pfc": [3, 4], "trust": "pcp"})
    assert [s["argv"][3:] for s in steps] == [["--trust", "pcp"], ["--pfc", "0,0,0,1,1,0,0,0"]]
    _a, steps, _f = inbox_port.plan(inbox_port.read(), {"pfc": [3], "trust": "dscp"})
    assert [s["argv"][1:] for s in steps] == [
        ["apptrust", "set", "dev", "enp12s0np0", "order", "dscp"],
        ["pfc", "set", "dev", "enp12s0np0", "prio-pfc", "0:off", "1:off", "2:off", "3:on", "4:off", "5:off", "6:off", "7:off"]]


def test_dscp_map_comes_before_trust_and_only_changed_entries_are_set(ofed_port, inbox_port):
    _a, steps, _f = ofed_port.plan(ofed_port.read(), {"dscp2prio": {24: 3, 30: 4, 40: 4}, "trust": "pcp"})
    assert [s["argv"][3:] for s in steps] == [["--dscp2prio", "set,30,4"], ["--dscp2prio", "set,40,4"], ["--trust", "pcp"]]
    after, steps, _f = inbox_port.plan(inbox_port.read(), {"dscp2prio": {30: 4, 40: 4}, "trust": "dscp"})
    assert steps[0]["argv"][1:] == ["app", "replace", "dev", "enp12s0np0", "dscp-prio", "30:4", "40:4"]
    assert after["dscp2prio"][30] == 4 and after["dscp2prio"][31] == 3


def test_inbox_ecn_and_cnp_become_firmware_settings_and_no_step(inbox_port):
    before = inbox_port.read()
    assert before["ecn"] is None and before["cnp_dscp"] is None and before["traffic_class"] is None
    after, steps, firmware = inbox_port.plan(before, {"ecn": [3], "cnp_dscp": 48, "cnp_priority": 6, "dcqcn": {"rpg_min_rate": 10}})
    assert steps == [] and after == before
    assert firmware == {"ROCE_CC_PRIO_MASK_P1": 8, "CNP_DSCP_P1": 48, "CNP_802P_PRIO_P1": 6, "RPG_MIN_RATE_P1": 10}


def test_ecn_only_adds_priorities_and_writes_both_points(ofed_port):
    before = ofed_port.read()
    for point in ("roce_np", "roce_rp"):
        with open(os.path.join(ofed_port.ecn_dir(), point, "enable", "5"), "w") as handle:
            handle.write("0\n")
    before = ofed_port.read()
    after, steps, _f = ofed_port.plan(before, {"ecn": [5]})
    assert [s["path"].split("/ecn/")[1] for s in steps] == ["roce_np/enable/5", "roce_rp/enable/5"]
    assert 5 in after["ecn"]["np"] and set(before["ecn"]["np"]) <= set(after["ecn"]["np"])


def test_apply_writes_and_a_second_plan_is_empty(ofed_port):
    desired = {"ecn": [3], "cnp_dscp": 46, "dcqcn": {"rpg_min_rate": 100}, "traffic_class": 106, "roce_tos": 106, "roce_mode": "v2"}
    _a, steps, _f = ofed_port.plan(ofed_port.read(), desired)
    ofed_port.apply(steps)
    with open(ofed_port.tc_file()) as handle:
        assert handle.read() == "106\n"
    with open(ofed_port.tc_file(), "w") as handle:  # what the driver then shows, as a plain file cannot
        handle.write("Global tclass=106\n")
    _a, again, _f = ofed_port.plan(ofed_port.read(), desired)
    assert again == []


def test_a_failed_step_names_the_steps_applied(ofed_port):
    ofed_port.runner.answers[("-i", "enp12s0np0", "--pfc")] = (1, "Netlink error: Bad value. see dmesg.\n", "")
    _a, steps, _f = ofed_port.plan(ofed_port.read(), {"global_pause": False, "pfc": [2]})
    with pytest.raises(roce_qos.QosApplyError, match=r"--pfc 0,0,1,0,0,0,0,0 failed \(exit 1\): Netlink error") as info:
        ofed_port.apply(steps)
    assert [s["setting"] for s in info.value.applied] == ["global_pause"]


@pytest.mark.parametrize("desired, message", [
    ({"pfc": [8]}, r"pfc must be a list of priorities 0-7; got \[8\]"),
    ({"ecn": [-1]}, r"ecn must be a list of priorities 0-7"),
    ({"cnp_dscp": 64}, r"cnp_dscp must be an integer 0-63; got 64"),
    ({"cnp_priority": 8}, r"cnp_priority must be an integer 0-7; got 8"),
    ({"traffic_class": 256}, r"traffic_class must be an integer 0-255; got 256"),
    ({"dscp2prio": {64: 1}}, r"dscp2prio maps a DSCP 0-63 to a priority 0-7; got 64: 1"),
    ({"dcqcn": {"rpg_bogus": 1}}, r"dcqcn has no parameter 'rpg_bogus'; allowed: clamp_tgt_rate, "),
    ({"dcqcn": {"rpg_min_dec_fac": 101}}, r"dcqcn.rpg_min_dec_fac must be an integer 0-100 \(%\); got 101"),
    ({"dcqcn": {"rpg_ai_rate": 500000}}, r"dcqcn.rpg_ai_rate must be an integer 1-400000 \(Mb/s\); got 500000"),
    ({"pfc": [3], "global_pause": True}, r"global_pause must be false when pfc enables priorities \[3\]"),
    ({"pfc": [3], "cnp_priority": 3}, r"cnp_priority 3 is a PFC priority \(pfc \[3\]\)"),
    ({"dscp2prio": {"\u00b2": 3}}, r"dscp2prio maps a DSCP 0-63 to a priority 0-7; got '\u00b2': 3"),
])
def test_bad_settings_name_the_field_and_the_allowed_values(desired, message):
    errors = validate(desired, line_rate_mbps=400000)
    assert any(__import__("re").search(message, e) for e in errors), errors


def test_unknown_netdev_lists_the_rdma_netdevs(tmp_path):
    with pytest.raises(QosError, match=r"netdev 'eth9' is not a netdev of an RDMA device .*: enp12s0np0, enp140s0np0"):
        Port(_dcb_runner(), _tree(tmp_path, "cx7_roce_400g_2x"), "eth9")


def test_infiniband_port_is_refused(tmp_path):
    with pytest.raises(QosError, match=r"whose link layer is InfiniBand, not Ethernet"):
        Port(_dcb_runner(), _tree(tmp_path, "cx7_ib_ndr_8x"), "ibp24s0")


@pytest.mark.parametrize("backend, message", [
    ("mlnx_qos", r"backend mlnx_qos is not installed on this host \(mlnx_qos comes with MLNX_OFED"),
    ("lldpad", r"backend must be one of: auto, mlnx_qos, dcb; got 'lldpad'"),
])
def test_missing_or_unknown_backend(tmp_path, backend, message):
    with pytest.raises(QosError, match=message):
        Port(_dcb_runner(), _tree(tmp_path, "cx7_roce_400g_2x"), "enp12s0np0", backend)


def test_no_backend_at_all(tmp_path):
    with pytest.raises(QosError, match=r"neither mlnx_qos .* nor dcb .* is installed"):
        Port(FakeRunner(set(), {}), _tree(tmp_path, "cx7_roce_400g_2x"), "enp12s0np0")


def test_dcb_without_apptrust_reads_trust_from_the_dscp_app_entries_and_sets_it_through_them(tmp_path):
    runner = _dcb_runner()
    runner.answers[("-j", "apptrust")] = (1, "\n", "Attribute not found: Success\n")
    port = Port(runner, _tree(tmp_path, "cx7_roce_400g_2x"), "enp12s0np0")
    before = port.read()
    assert before["trust"] == "pcp" and port.apptrust is False
    _a, steps, _f = port.plan(before, {"trust": "dscp", "dscp2prio": {26: 2}})
    assert [s["argv"][1:] for s in steps] == [["app", "replace", "dev", "enp12s0np0", "dscp-prio", "26:2"]]
    _a, steps, _f = port.plan(before, {"trust": "dscp"})
    assert [s["argv"][1:] for s in steps] == [["app", "replace", "dev", "enp12s0np0", "dscp-prio", "0:0"]]
    runner.answers[("-j", "app")] = (0, '{"dscp_prio":[[26,3]]}\n', "")
    before = port.read()
    assert before["trust"] == "dscp"
    _a, steps, _f = port.plan(before, {"trust": "pcp"})
    assert [s["argv"][1:] for s in steps] == [["app", "flush", "dev", "enp12s0np0", "dscp-prio"]]
