"""Counters before and after traffic (module_utils.rdma_counters and the hpcnet.rdma.rdma_counters module): deltas and
findings with concrete numbers, the snapshot on simulator-built trees with the simulated ethtool, and on the real
captures (ethtool -S of mlx5, a sysfs dump of an H100 node's counters)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import module_docs  # tests/tools, on sys.path via tests/unit/conftest.py
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import rdma_counters as c
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.qos_tools import parse_ethtool_stats
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import SubprocessRunner
from ansible_collections.hpcnet.rdma.plugins.modules import rdma_counters as module
from fixtures_path import real_fixtures

KIT = Path(__file__).resolve().parents[4] / "simhost"
BIN = KIT / "bin"
sys.path.insert(0, str(KIT))
sys.path.insert(0, str(Path(__file__).parents[1] / "fixtures" / "sysfs"))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from rdma_sysfs_tree import materialise_dump  # noqa: E402  pylint: disable=wrong-import-position

OUTPUTS = real_fixtures() / "rdma-outputs"
OFED = "cx7_roce_400g_2x_ofed"
IF0 = "enp12s0np0"


# ------------------------------------------------------------------------------------------------------- deltas
def test_deltas_are_after_minus_before():
    before = {"mlx5_0/1": {"rx_prio3_pause": 100, "np_cnp_sent": 7, "port_xmit_data": 1 << 40}}
    after = {"mlx5_0/1": {"rx_prio3_pause": 1620, "np_cnp_sent": 7, "port_xmit_data": (1 << 40) + 262144}}
    notes = []
    expected = {"mlx5_0/1": {"rx_prio3_pause": 1520, "np_cnp_sent": 0, "port_xmit_data": 262144}}
    assert c.deltas(before, after, notes) == expected
    assert notes == []


def test_a_counter_that_went_back_is_a_reset_never_a_negative_delta():
    notes = []
    out = c.deltas({"mlx5_1/1": {"symbol_error": 40, "rx_discards_phy": 9000}},
                   {"mlx5_1/1": {"symbol_error": 2, "rx_discards_phy": 9100}}, notes)
    assert out == {"mlx5_1/1": {"symbol_error": 2, "rx_discards_phy": 100}}
    assert notes == [{"port": "mlx5_1/1", "counter": "symbol_error", "kind": "reset", "before": 40, "after": 2,
                      "message": "symbol_error of mlx5_1/1 went back from 40 to 2: it was reset during the traffic; "
                                 "the delta (2) is a lower bound"}]


def test_saturated_appeared_disappeared_and_missing_ports_are_noted():
    notes = []
    out = c.deltas({"mlx5_0/1": {"symbol_error": 65530, "tx_global_pause": 4}, "mlx5_1/1": {"link_downed": 0}},
                   {"mlx5_0/1": {"symbol_error": 65535, "rx_prio3_pause": 12}, "mlx5_2/1": {"link_downed": 0}}, notes)
    assert out == {"mlx5_0/1": {"symbol_error": 5, "rx_prio3_pause": None}}
    assert [(n["port"], n["counter"], n["kind"]) for n in notes] == [
        ("mlx5_0/1", "rx_prio3_pause", "appeared"), ("mlx5_0/1", "symbol_error", "saturated"),
        ("mlx5_0/1", "tx_global_pause", "disappeared"), ("mlx5_1/1", None, "port_missing"),
        ("mlx5_2/1", None, "port_missing")]
    assert "perfquery -x -R" in notes[1]["message"]


# ----------------------------------------------------------------------------------------------------- findings
ROCE_QUIET = {"rx_prio3_pause": 0, "tx_prio3_pause": 0, "rx_discards_phy": 0, "tx_discards_phy": 0,
              "out_of_buffer": 0, "np_ecn_marked_roce_packets": 0, "np_cnp_sent": 0, "rp_cnp_handled": 0,
              "rx_crc_errors_phy": 0, "symbol_error": 0, "port_rcv_errors": 0}


def test_quiet_lossless_roce_port_is_fine():
    """Zero ECN marks and zero pause on a lossless port: light traffic without congestion, no finding."""
    assert c.findings("roce01", {"mlx5_0/1": dict(ROCE_QUIET)}, [3], "Ethernet") == []


def test_lossless_roce_port_that_drops_is_an_error():
    deltas = {"mlx5_0/1": dict(ROCE_QUIET, rx_discards_phy=120, out_of_buffer=5, rx_prio3_pause=800)}
    found = c.findings("roce01", deltas, [3], "Ethernet", netdevs={"mlx5_0/1": IF0})
    assert [(f["check"], f["severity"], f["found"]) for f in found] == [
        ("counter_discards", "error", "rx_discards_phy +120"), ("counter_discards", "error", "out_of_buffer +5")]
    f = found[0]
    assert (f["host"], f["device"], f["port"], f["expected"]) == ("roce01", "mlx5_0", 1, "0 (lossless priorities [3])")
    assert "PFC is not taking effect" in f["cause"]
    assert f["fix"].startswith("compare `mlnx_qos -i enp12s0np0`")
    assert "no posted buffer" in found[1]["cause"]


def test_drops_on_a_roce_port_without_lossless_priorities_are_a_warning():
    found = c.findings("roce01", {"mlx5_0/1": {"rx_discards_phy": 3}}, [], "Ethernet")
    assert [(f["severity"], f["found"]) for f in found] == [("warning", "rx_discards_phy +3")]
    assert "no priority is declared lossless" in found[0]["cause"]


def test_ib_error_counters_moving_are_errors():
    deltas = {"mlx5_3/1": {"symbol_error": 3, "link_downed": 1, "port_rcv_errors": 7, "port_xmit_discards": 2,
                           "port_xmit_data": 10 ** 9, "rx_crc_errors_phy": 4}}
    found = c.findings("ib02", deltas, [], "InfiniBand")
    assert [(f["check"], f["severity"], f["found"]) for f in found] == [
        ("counter_link_errors", "error", "symbol_error +3"), ("counter_link_errors", "error", "port_rcv_errors +7"),
        ("counter_link_errors", "warning", "port_xmit_discards +2"), ("counter_link_flap", "error", "link_downed +1")]
    assert found[0]["cause"].startswith("bit errors on the link")
    assert found[0]["fix"].startswith("`mlxlink -d mlx5_3 -p 1 -m -c`")


def test_pause_on_a_priority_that_is_not_lossless_is_a_warning():
    deltas = {"mlx5_0/1": dict(ROCE_QUIET, rx_prio3_pause=50, rx_prio5_pause=0, tx_prio5_pause=9)}
    found = c.findings("roce01", deltas, [3], "Ethernet")
    assert [(f["check"], f["severity"], f["found"]) for f in found] == [("counter_pause", "warning", "tx_prio5_pause +9")]
    assert found[0]["expected"] == "no pause on priority 5 (lossless: [3])"


def test_lossless_priority_without_pfc_counters_means_pfc_is_off():
    deltas = {"mlx5_1/1": {"rx_discards_phy": 0, "rx_global_pause": 30, "tx_global_pause": 0}}
    found = c.findings("roce02", deltas, [3], {"mlx5_1/1": "Ethernet"}, netdevs={"mlx5_1/1": "enp140s0np0"})
    assert [(f["check"], f["severity"], f["found"]) for f in found] == [
        ("counter_pfc", "error", "no rx_prio3_pause counter"), ("counter_pause", "warning", "rx_global_pause +30")]
    assert found[0]["cause"].startswith("PFC is off on priority 3 of enp140s0np0")
    assert "ethtool -A enp140s0np0 rx off tx off" in found[1]["fix"]
    # without any ethtool counter (ethtool missing), PFC cannot be judged
    assert c.findings("roce02", {"mlx5_1/1": {"out_of_buffer": 0}}, [3], "Ethernet") == []


def test_pause_storm_retransmits_and_reset():
    deltas = {"mlx5_0/1": dict(ROCE_QUIET, tx_pause_storm_error_events=1, out_of_sequence=12, packet_seq_err=2)}
    notes = [{"port": "mlx5_0/1", "counter": "np_cnp_sent", "kind": "reset", "before": 50, "after": 1}]
    found = c.findings("roce01", deltas, [3], "Ethernet", notes)
    assert [(f["check"], f["severity"], f["found"]) for f in found] == [
        ("counter_pfc_storm", "error", "tx_pause_storm_error_events +1"),
        ("counter_retransmits", "warning", "out_of_sequence +12, packet_seq_err +2"),
        ("counter_reset", "warning", "np_cnp_sent 50 -> 1")]


def test_findings_have_the_verify_finding_shape():
    deltas = {"mlx5_0/1": dict(ROCE_QUIET, rx_discards_phy=1, tx_prio6_pause=1, rx_crc_errors_phy=1)}
    for f in c.findings("h", deltas, [3], "Ethernet"):
        assert tuple(f) == ("host", "severity", "check", "device", "port", "expected", "found", "cause", "fix")
        assert f["cause"] and f["fix"] and "{" not in f["cause"] + f["fix"]


# ------------------------------------------------------------------------------------- snapshot on simhost trees
def run_sim(root, tool, *args):
    env = {**os.environ, "SIMHOST_SYSFS_ROOT": str(root), "LC_ALL": "C"}
    res = subprocess.run([sys.executable, "-S", str(BIN / tool), *args], capture_output=True, text=True, env=env,
                         check=False, timeout=60)
    assert res.returncode == 0, (tool, args, res.stdout, res.stderr)


@pytest.fixture
def sim_path(monkeypatch):
    """The simulated tools first on PATH, reading the tree of ``sim_path(root)``."""
    monkeypatch.setenv("PATH", "%s:%s" % (BIN, os.environ.get("PATH", "/usr/bin:/bin")))

    def point(root):
        monkeypatch.setenv("SIMHOST_SYSFS_ROOT", str(root))
        return root
    return point


@pytest.fixture
def ofed_host(tmp_path, sim_path):
    prof = simhost.load(OFED)
    prof["devices"][0]["ports"][0]["hw_counters"] = {"np_cnp_sent": 10, "out_of_buffer": 2}
    prof["devices"][0]["ports"][0]["counters"] = {"symbol_error": 5}
    root = tmp_path / "sys"
    simhost.build_tree(prof, root, host_index=1)
    return sim_path(root)


def test_snapshot_of_a_simulated_roce_host(ofed_host):
    snap = c.snapshot(SubprocessRunner(), str(ofed_host))
    assert sorted(snap["counters"]) == ["mlx5_0/1", "mlx5_1/1"]
    port = snap["counters"]["mlx5_0/1"]
    assert (port["np_cnp_sent"], port["out_of_buffer"], port["symbol_error"]) == (10, 2, 5)
    # at boot the simulated port has global pause on and PFC on no priority (as mlx5 lists its counters)
    assert {n for n in port if "pause" in n} == {"rx_global_pause", "tx_global_pause", "tx_pause_storm_warning_events",
                                                 "tx_pause_storm_error_events"}
    assert set(c.IB_COUNTERS + c.HW_COUNTERS) <= set(port)
    assert snap["sources"]["mlx5_0/1"]["np_cnp_sent"] == str(ofed_host / "class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent")
    assert snap["sources"]["mlx5_0/1"]["rx_discards_phy"] == "ethtool -S " + IF0
    assert snap["ports"]["mlx5_0/1"] == {"link_layer": "Ethernet", "state": "ACTIVE", "netdev": IF0}
    assert snap["notes"] == []


def test_before_and_after_with_pfc_turned_on_and_counters_moving(ofed_host):
    runner = SubprocessRunner()
    before = c.snapshot(runner, str(ofed_host), ["mlx5_0"])["counters"]
    run_sim(ofed_host, "mlnx_qos", "-i", IF0, "--pfc", "0,0,0,1,0,0,0,0")
    hw = ofed_host / "class/infiniband/mlx5_0/ports/1"
    (hw / "hw_counters/np_cnp_sent").write_text("250\n")
    (hw / "counters/symbol_error").write_text("3\n")
    after = c.snapshot(runner, str(ofed_host), ["mlx5_0"])
    assert "rx_prio3_pause" in after["counters"]["mlx5_0/1"]
    notes = []
    deltas = c.deltas(before, after["counters"], notes)
    assert deltas["mlx5_0/1"]["np_cnp_sent"] == 240
    assert deltas["mlx5_0/1"]["symbol_error"] == 3
    assert deltas["mlx5_0/1"]["rx_prio3_pause"] is None
    assert ("rx_prio3_pause", "appeared") in [(n["counter"], n["kind"]) for n in notes]
    assert ("symbol_error", "reset") in [(n["counter"], n["kind"]) for n in notes]
    found = c.findings("roce01", deltas, [3], "Ethernet", notes)
    assert [(f["check"], f["found"]) for f in found] == [
        ("counter_link_errors", "symbol_error +3"), ("counter_reset", "symbol_error 5 -> 3")]


def test_snapshot_notes_an_absent_device_and_a_missing_ethtool(ofed_host):
    class NoEthtool(SubprocessRunner):
        def which(self, name):
            return None
    snap = c.snapshot(NoEthtool(), str(ofed_host), ["mlx5_1", "mlx5_7"])
    assert sorted(snap["counters"]) == ["mlx5_1/1"]
    assert [(n["port"], n["kind"]) for n in snap["notes"]] == [(None, "absent_device"), ("mlx5_1/1", "no_ethtool")]
    assert "mlx5_7 is not an RDMA device on this host (found: mlx5_0, mlx5_1)" == snap["notes"][0]["message"]
    assert not any(n.endswith("_phy") for n in snap["counters"]["mlx5_1/1"])


class CaptureRunner:
    """``ethtool -S <netdev>`` answered with a real capture; records the argv."""

    def __init__(self, text, rc=0, err=""):
        self.text, self.rc, self.err, self.calls = text, rc, err, []

    def which(self, name):
        return "/usr/sbin/" + name

    def run(self, argv, changes=False, timeout=None):
        self.calls.append(argv)
        return self.rc, self.text, self.err


def test_ethtool_failure_is_a_note(ofed_host):
    runner = CaptureRunner("", rc=1, err="netlink error: no device matches name (offset 24)\n")
    snap = c.snapshot(runner, str(ofed_host), ["mlx5_0"])
    assert runner.calls == [["/usr/sbin/ethtool", "-S", IF0]]
    assert snap["notes"] == [{"port": "mlx5_0/1", "kind": "ethtool_failed",
                              "message": "ethtool -S %s failed (rc 1): netlink error: no device matches name "
                                         "(offset 24)" % IF0}]


# ------------------------------------------------------------------------------------------------ real captures
def test_real_ethtool_captures_give_the_counters_the_report_needs():
    cx4 = c.select_ethtool(parse_ethtool_stats((OUTPUTS / "ethtool-S-mlx5-01.txt").read_text()))
    assert cx4 == {"rx_discards_phy": 0, "tx_discards_phy": 0, "rx_crc_errors_phy": 0, "rx_symbol_err_phy": 0,
                   "link_down_events_phy": 0, "rx_global_pause": 0, "tx_global_pause": 0}
    cx6 = c.select_ethtool(parse_ethtool_stats((OUTPUTS / "ethtool-S-mlx5-02.txt").read_text()))
    assert cx6["tx_pause_storm_warning_events"] == 0 and cx6["tx_pause_storm_error_events"] == 0
    assert "tx_pause_ctrl_phy" not in cx6 and not any(c._PRIO_PAUSE.match(n) for n in cx6)  # pylint: disable=protected-access
    assert set(cx6) <= set(c.ETHTOOL_COUNTERS)


@pytest.mark.parametrize("capture", ["ethtool-S-mlx5-01.txt", "ethtool-S-mlx5-02.txt"])
def test_snapshot_reads_a_real_ethtool_capture(ofed_host, capture):
    text = (OUTPUTS / capture).read_text()
    snap = c.snapshot(CaptureRunner(text), str(ofed_host), ["mlx5_0"])
    port = snap["counters"]["mlx5_0/1"]
    assert dict((k, port[k]) for k in port if snap["sources"]["mlx5_0/1"][k].startswith("ethtool")) == \
        c.select_ethtool(parse_ethtool_stats(text))
    assert port["np_cnp_sent"] == 10


def test_snapshot_of_a_real_sysfs_dump(tmp_path):
    """The H100 node's counters (leptonai/gpud test data): port_rcv_errors 14 and excessive_buffer_overrun_errors 15,
    the 4-bit maximum of that IB counter, which a delta then flags as saturated."""
    materialise_dump((OUTPUTS / "sysfs-class-infiniband-01.txt").read_text(), tmp_path)
    snap = c.snapshot(CaptureRunner(""), str(tmp_path))
    ib = snap["counters"]["mlx5_0/1"]
    assert (ib["port_rcv_errors"], ib["excessive_buffer_overrun_errors"], ib["port_xmit_data"]) == (
        14, 15, 230442669431839)
    assert ib["out_of_buffer"] == 0 and "np_cnp_sent" not in ib
    notes = []
    assert c.deltas(snap["counters"], snap["counters"], notes)["mlx5_0/1"]["port_rcv_errors"] == 0
    assert [(n["port"], n["counter"], n["kind"]) for n in notes] == [
        ("mlx5_0/1", "excessive_buffer_overrun_errors", "saturated"),
        ("mlx5_bond_0/1", "excessive_buffer_overrun_errors", "saturated")]


# ------------------------------------------------------------------------------------------------------- module
class Exit(Exception):
    pass


class Fail(Exception):
    pass


@pytest.fixture
def exits(monkeypatch):
    def exit_json(self, **kwargs):  # pylint: disable=unused-argument
        raise Exit(kwargs)

    def fail_json(self, msg, **kwargs):  # pylint: disable=unused-argument
        raise Fail(dict(kwargs, msg=msg))
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run_module(args):
    with patch_module_args(args):
        with pytest.raises((Exit, Fail)) as info:
            module.main()
    return info.type, info.value.args[0]


def test_module_snapshot_then_deltas_and_findings(ofed_host, exits):
    kind, first = run_module({"sysfs_root": str(ofed_host), "_ansible_check_mode": True})
    assert kind is Exit and first["changed"] is False
    assert set(first) >= {"counters", "sources", "ports", "notes"} and "deltas" not in first
    (ofed_host / "class/infiniband/mlx5_1/ports/1/hw_counters/out_of_buffer").write_text("40\n")
    kind, second = run_module({"sysfs_root": str(ofed_host), "before": first, "lossless_priorities": [3],
                               "host": "roce01"})
    assert kind is Exit and second["changed"] is False
    assert second["deltas"]["mlx5_1/1"]["out_of_buffer"] == 40
    # at boot PFC is on no priority: the declared lossless priority 3 has no PFC on either port
    assert [(f["host"], f["device"], f["check"], f["severity"], f["found"]) for f in second["findings"]] == [
        ("roce01", "mlx5_0", "counter_pfc", "error", "no rx_prio3_pause counter"),
        ("roce01", "mlx5_1", "counter_discards", "error", "out_of_buffer +40"),
        ("roce01", "mlx5_1", "counter_pfc", "error", "no rx_prio3_pause counter")]
    assert second["delta_notes"] == []


@pytest.mark.parametrize("args,message", [
    ({"lossless_priorities": [3, 9]}, "lossless_priorities: priorities are 0-7; got [9]"),
    ({"before": {"mlx5_0/1": {"np_cnp_sent": "many"}}}, "before.mlx5_0/1.np_cnp_sent must be an integer"),
    ({"before": {"mlx5_0/1": 5}}, "before.mlx5_0/1 must be a dict"),
])
def test_module_bad_input_names_the_field(ofed_host, exits, args, message):
    kind, result = run_module(dict(args, sysfs_root=str(ofed_host)))
    assert kind is Fail and message in result["msg"]


def test_module_fails_on_a_root_that_is_not_sysfs(tmp_path, exits):
    kind, result = run_module({"sysfs_root": str(tmp_path / "nope")})
    assert kind is Fail and "sysfs_root does not exist" in result["msg"]


def test_module_documentation_matches_its_arguments():
    import yaml  # pylint: disable=import-outside-toplevel
    doc = module_docs.documentation(module)  # with its doc fragments
    assert set(doc["options"]) == set(module.ARGUMENT_SPEC)
    for name, arg in module.ARGUMENT_SPEC.items():
        assert doc["options"][name]["type"] == arg["type"]
        assert doc["options"][name].get("default") == arg.get("default")
    assert set(yaml.safe_load(module.RETURN)) == {"counters", "sources", "ports", "notes", "deltas", "delta_notes",
                                                  "findings"}
    yaml.safe_load(module.EXAMPLES)


def test_limits_allow_counts_up_to_the_threshold_and_no_more():
    deltas = {"mlx5_3/1": {"symbol_error": 3, "link_downed": 1}}
    assert c.findings("ib02", deltas, [], "InfiniBand", limits={"symbol_error": 3, "link_downed": 1}) == []
    found = c.findings("ib02", deltas, [], "InfiniBand", limits={"symbol_error": 2, "link_downed": 1})
    assert [f["found"] for f in found] == ["symbol_error +3"]


def test_a_lossless_priority_paused_over_the_limit_is_a_pfc_storm():
    quiet = dict(ROCE_QUIET, tx_prio3_pause=10, rx_prio3_pause=0)
    storm = dict(quiet, tx_prio3_pause_duration=9 * 10 ** 6, rx_prio3_pause_duration=0)
    found = c.findings("roce01", {"mlx5_0/1": storm}, [3], "Ethernet", limits={"pause_percent": 10}, seconds=60)
    assert [(f["check"], f["severity"], f["found"]) for f in found] == [
        ("counter_pfc_storm", "error", "tx_prio3_pause_duration 15.0% of 60s")]
    assert "kept pausing its peer" in found[0]["cause"]
    calm = dict(storm, tx_prio3_pause_duration=5 * 10 ** 6)
    assert c.findings("roce01", {"mlx5_0/1": calm}, [3], "Ethernet", limits={"pause_percent": 10}, seconds=60) == []
    # verify's traffic runs give no seconds: no share is computed
    assert c.findings("roce01", {"mlx5_0/1": storm}, [3], "Ethernet") == []


def test_ecn_marks_without_cnps_are_a_warning():
    d = dict(ROCE_QUIET, rx_prio3_pause=0, np_ecn_marked_roce_packets=500, np_cnp_sent=0)
    found = c.findings("roce01", {"mlx5_0/1": d}, [3], "Ethernet")
    assert [(f["check"], f["severity"]) for f in found] == [("counter_ecn", "warning")]
    assert c.findings("roce01", {"mlx5_0/1": dict(d, np_cnp_sent=250)}, [3], "Ethernet") == []
