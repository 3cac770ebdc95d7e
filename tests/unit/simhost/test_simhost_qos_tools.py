"""Stateful QoS stand-ins of the simulated host (mlnx_qos, dcb, ethtool, cma_roce_mode/tos) and the kernel files
they share (ecn/, tc/<port>/traffic_class, RDMA-CM configfs), parsed with the same parsers as the real captures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import dcb_tools as dt
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import qos_errors as qe
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import qos_tools as q
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import rdma_sysfs
from fixtures_path import real_fixtures

KIT = Path(__file__).resolve().parents[2] / "simhost"
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import kernelfs  # noqa: E402  pylint: disable=wrong-import-position

OUTPUTS = real_fixtures() / "rdma-outputs"
QOS = real_fixtures() / "qos-firmware"
OFED = "cx7_roce_400g_2x_ofed"
INBOX = "cx7_roce_400g_2x"
IF0 = "enp12s0np0"
DEFAULT_DSCP2PRIO = [d >> 3 for d in range(64)]


def run_tool(root: Path, tool: str, *args: str) -> subprocess.CompletedProcess:
    """Run a launcher of tests/simhost/bin like test_simhost_kit.run_tool, with ``-S`` (no site-packages: the
    kit is standard library only, as in the containers, and it halves the start-up time)."""
    env = {**os.environ, "SIMHOST_SYSFS_ROOT": str(root), "LC_ALL": "C"}
    return subprocess.run([sys.executable, "-S", str(KIT / "bin" / tool), *args], capture_output=True, text=True,
                          env=env, check=False, timeout=60)


def ok(root: Path, tool: str, *args: str) -> str:
    res = run_tool(root, tool, *args)
    assert res.returncode == 0, (tool, args, res.stdout, res.stderr)
    return res.stdout


@pytest.fixture
def host(tmp_path):
    """A fresh MLNX_OFED RoCE host (2 x CX-7 400GbE)."""
    root = tmp_path / "sys"
    simhost.build_tree(simhost.load(OFED), root)
    return root


@pytest.fixture
def inbox(tmp_path):
    root = tmp_path / "sys"
    simhost.build_tree(simhost.load(INBOX), root)
    return root


def _lines(text: str) -> list:
    return [line.expandtabs(8) for line in text.splitlines()]


# ------------------------------------------------------------------------------- defaults at boot
def test_boot_defaults_through_every_view(host):
    mq = q.parse_mlnx_qos(ok(host, "mlnx_qos", "-i", IF0))
    assert (mq["dcbx_mode"], mq["trust"], mq["dscp2prio"], mq["pfc"], mq["cable_len"]) == ("os", "pcp", None, [0] * 8, 7)
    assert mq["prio_tc"] == [1, 0, 2, 3, 4, 5, 6, 7] and {t["tsa"] for t in mq["tcs"]} == {"vendor"}
    assert mq["buffer_size"] == [524160, 0, 0, 0, 0, 0, 0, 0] and mq["max_buffer_size"] == 2044224
    assert mq["default_priority"] == [] and mq["errors"] == []
    pfc = dt.parse_dcb_pfc(ok(host, "dcb", "-j", "pfc", "show", "dev", IF0))
    assert pfc == {"pfc_cap": 8, "macsec_bypass": False, "delay": 7, "pfc": [0] * 8, "pfc_enabled": [],
                   "requests": None, "indications": None}
    assert ok(host, "dcb", "-j", "app", "show", "dev", IF0) == "{}\n" and ok(host, "dcb", "app", "show", "dev", IF0) == ""
    ets = dt.parse_dcb_ets(ok(host, "dcb", "-j", "ets", "show", "dev", IF0))
    assert ets["tc_tsa"] == ["vendor"] * 8 and ets["tc_bw"] == [100] * 8 and ets["prio_tc"] == mq["prio_tc"]
    assert dt.parse_dcb_dcbx(ok(host, "dcb", "dcbx", "show", "dev", IF0))["flags"] == ["host", "cee", "ieee"]
    pause = q.parse_ethtool_pause(ok(host, "ethtool", "-a", IF0))
    assert (pause["autoneg"], pause["rx"], pause["tx"]) == (False, True, True)
    facts = rdma_sysfs.gather_rdma_sysfs(str(host))
    ecn = facts["netdevs"][IF0]["ecn"]
    assert ecn == {"roce_np_enabled": list(range(8)), "roce_rp_enabled": list(range(8)), "cnp_dscp": 48, "cnp_802p_prio": 6}
    assert facts["devices"]["mlx5_0"]["ports"]["1"]["traffic_class"] is None
    assert facts["devices"]["mlx5_0"]["ports"]["1"]["rdma_cm"] is None       # no configfs dir until mkdir


def test_ecn_parameter_files_hold_the_firmware_defaults(host):
    ecn = host / "class/net" / IF0 / "ecn"
    assert sorted(os.listdir(ecn / "roce_rp")) == sorted(list(q.ECN_RP_PARAMS) + ["enable"])
    assert sorted(os.listdir(ecn / "roce_np")) == sorted(list(q.ECN_NP_PARAMS) + ["enable"])
    values = {name: q.parse_sysfs_int((ecn / "roce_rp" / name).read_text()) for name in q.ECN_RP_PARAMS}
    assert values["rpg_ai_rate"] == 5 and values["rpg_min_rate"] == 1 and values["rpg_time_reset"] == 300
    assert (ecn / "roce_np/min_time_between_cnps").read_text() == "4\n"
    assert (ecn / "roce_np/enable/3").read_text() == "1\n"


def test_inbox_stack_has_no_ecn_tree_and_no_traffic_class(inbox):
    assert not (inbox / "class/net" / IF0 / "ecn").exists()
    assert not (inbox / "class/infiniband/mlx5_0/tc").exists()
    assert rdma_sysfs.gather_rdma_sysfs(str(inbox))["netdevs"][IF0]["ecn"] is None
    # the DCB state is the driver's: the same on an inbox host
    assert dt.parse_dcb_pfc(ok(inbox, "dcb", "pfc", "show", "dev", IF0))["delay"] == 7


# ------------------------------------------------------------------------- byte-level formatting
def test_mlnx_qos_trust_dscp_report_matches_the_real_capture_line_for_line(host):
    ours = _lines(ok(host, "mlnx_qos", "-i", IF0, "--trust", "dscp"))
    real = _lines((QOS / "mlnx_qos-trust-dscp-01.txt").read_text())
    # the capture is an older mlnx_qos: no "default priority:" block, buffer line without max_buffer_size=
    assert "default priority:" in ours
    buf_ours = next(line for line in ours if line.startswith("Receive buffer size"))
    buf_real = next(line for line in real if line.startswith("Receive buffer size"))
    assert buf_ours == buf_real + "max_buffer_size=2044224"
    assert [line for line in ours if line not in ("default priority:", buf_ours)] == [line for line in real if line != buf_real]


def test_mlnx_qos_pfc_report_matches_the_real_capture(host):
    ok(host, "mlnx_qos", "-i", IF0, "--trust", "dscp")
    raw = ok(host, "mlnx_qos", "-i", IF0, "--pfc", "0,0,0,1,0,0,0,0")
    assert "\tenabled     0   0   0   1   0   0   0   0   \n\tbuffer      0   0   0   0   0   0   0   0   \n" in raw
    assert "\tprio:3 dscp:31,30,29,28,27,26,25,24,\n" in raw and "tc: 0 ratelimit: unlimited, tsa: vendor\n\t priority:  1\n" in raw
    ours = [line for line in _lines(raw) if not line.startswith(("default priority:", "Receive buffer", "        buffer "))]
    assert ours == _lines((OUTPUTS / "mlnx_qos-01.txt").read_text())


def test_mlnx_qos_ets_report_has_the_shape_of_the_real_capture(host):
    ok(host, "mlnx_qos", "-i", IF0, "-p", "0,0,0,3,0,0,6,0", "-s", "ets,vendor,vendor,ets,vendor,vendor,vendor,vendor",
       "-t", "50,0,0,50,0,0,0,0")
    ours = ok(host, "mlnx_qos", "-i", IF0).splitlines()
    tc_part = ours[next(i for i, line in enumerate(ours) if line.startswith("tc: ")):]
    real = (OUTPUTS / "mlnx_qos-02.txt").read_text().splitlines()
    real_tc = [line.replace("        ", "\t", 1) for line in real[next(i for i, line in enumerate(real) if line.startswith("tc: ")):]]
    assert tc_part == real_tc


def test_mlnx_qos_on_a_netdev_without_dcb_prints_the_real_unsupported_lines(host):
    res = run_tool(host, "mlnx_qos", "-i", "eth0")
    assert res.returncode == 1 and res.stdout == (QOS / "mlnx_qos-error-unsupported-01.txt").read_text()
    missing = run_tool(host, "mlnx_qos", "-i", "nosuch")
    assert missing.returncode == 1 and q.parse_mlnx_qos(missing.stdout)["unsupported"] == ["trust", "buffers", "ratelimit", "ets"]


def test_dcb_text_forms_match_the_real_captures(host):
    real_pfc = (OUTPUTS / "dcb-pfc-01.txt").read_text().splitlines()
    ours = ok(host, "dcb", "pfc", "show", "dev", IF0)
    assert ours.endswith(" \n") and all(line.endswith(" ") for line in ours.splitlines())
    assert [re.sub(r"\d+", "N", line.rstrip()) for line in ours.splitlines()] == [re.sub(r"\d+", "N", line) for line in real_pfc]
    ok(host, "dcb", "pfc", "set", "dev", IF0, "prio-pfc", "all:off", "6:on", "7:on", "delay", "4096")
    assert ok(host, "dcb", "pfc", "show", "dev", IF0, "prio-pfc").rstrip() == (OUTPUTS / "dcb-pfc-02.txt").read_text().splitlines()[1]
    assert dt.parse_dcb_pfc(ok(host, "dcb", "pfc", "show", "dev", IF0))["delay"] == 7   # mlx5 ignores delay >= 1000

    ok(host, "dcb", "ets", "set", "dev", IF0, "prio-tc", "0:0", "1:1", "2:2", "3:3", "4:4", "5:5", "6:6", "7:7",
       "tc-tsa", "all:strict", "0:ets", "1:ets", "2:ets", "tc-bw", "all:0", "0:33", "1:33", "2:34")
    ours = [line.rstrip() for line in ok(host, "dcb", "ets", "show", "dev", IF0, "prio-tc", "tc-tsa", "tc-bw").splitlines()]
    real = (QOS / "dcb-ets-show-02.txt").read_text().splitlines()
    assert ours[:2] == real[:2]
    # mlx5 keeps 100% for strict TCs in firmware and reports it back (mlx5e_build_tc_tx_bw / getets)
    assert ours[2] == real[2].replace("3:0 4:0 5:0 6:0 7:0", "3:100 4:100 5:100 6:100 7:100")

    ok(host, "dcb", "buffer", "set", "dev", IF0, "prio-buffer", "0:0", "1:1", "2:2", "3:3", "4:4", "5:5", "6:6", "7:7",
       "buffer-size", "all:10K", "6:1M")
    ours = ok(host, "dcb", "buffer", "show", "dev", IF0).splitlines()
    assert [line.rstrip() for line in ours[:2]] == (QOS / "dcb-buffer-show-01.txt").read_text().splitlines()[:2]
    assert ours[2] == "total-size 2044224b "


def test_dcb_app_names_and_numbers(host):
    ok(host, "dcb", "app", "add", "dev", IF0, "dscp-prio", "0:0", "24:3", "48:6")
    ok(host, "dcb", "app", "add", "dev", IF0, "dscp-prio", "24:2")
    # mlx5 keeps one priority per DSCP (setapp replaces the old entry), unlike the man-page driver
    assert ok(host, "dcb", "-N", "app", "show", "dev", IF0, "dscp-prio") == "dscp-prio 0:0 24:2 48:6 \n"
    named = ok(host, "dcb", "app", "show", "dev", IF0)
    assert re.fullmatch(r"dscp-prio \S+:0 CS3:2 CS6:6 \n", named)
    assert dt.parse_dcb_app(named)["dscp_prio"] == [(0, 0), (24, 2), (48, 6)]
    assert json.loads(ok(host, "dcb", "-j", "app", "show", "dev", IF0)) == {"dscp_prio": [[0, 0], [24, 2], [48, 6]]}


def test_dcb_json_is_compact_pretty_on_request_and_newline_on_error(host):
    assert ok(host, "dcb", "-j", "pfc", "show", "dev", IF0) == (
        '{"pfc_cap":8,"macsec_bypass":false,"delay":7,"prio_pfc":[false,false,false,false,false,false,false,false]}\n')
    pretty = ok(host, "dcb", "-j", "-p", "buffer", "show", "dev", IF0)
    assert pretty.startswith('{\n    "prio_buffer": [\n        0,\n') and pretty.endswith("}\n")
    res = run_tool(host, "dcb", "-j", "pfc", "show", "dev", "lo")
    assert (res.returncode, res.stdout) == (1, "\n")


@pytest.mark.parametrize("args, capture, code", [
    (["pfc", "show", "dev", "nosuch"], "dcb-error-nodev-01.txt", 1),
    (["pfc", "show", "dev", "lo"], "dcb-error-eopnotsupp-01.txt", 1),
    (["app", "add", "dev", "lo", "dscp-prio", "64:3"], "dcb-error-mapping-01.txt", 1),
    (["pfc", "show", "dev"], "dcb-error-incomplete-01.txt", 255),
])
def test_dcb_errors_are_the_real_ones(host, args, capture, code):
    res = run_tool(host, "dcb", *args)
    assert (res.returncode, res.stderr, res.stdout) == (code, (QOS / capture).read_text(), "")


@pytest.mark.parametrize("args, kind, errno_name", [
    (["app", "del", "dev", IF0, "dscp-prio", "26:3"], "attribute_write", "ENOENT"),
    (["apptrust", "show", "dev", IF0], "attribute_not_found", None),
    (["apptrust", "set", "dev", IF0, "order", "dscp"], "attribute_write", "EOPNOTSUPP"),
    (["ets", "set", "dev", IF0, "tc-tsa", "0:ets"], None, None),
    (["pfc", "set", "dev", IF0, "prio-pfc", "9:on"], "mapping_range", None),
    (["pfc", "bogus"], "unknown_keyword", None),
    (["rewr", "show"], "unknown_object", None),
])
def test_dcb_errors_of_the_mlx5_driver(host, args, kind, errno_name):
    res = run_tool(host, "dcb", *args)
    assert res.returncode == 1
    errors = qe.parse_dcb_errors(res.stderr)
    if kind is None:      # dcb's own tc-bw check: vendor TCs read back 100%
        assert res.stderr == "Bandwidth percentages in tc-bw sum to 800%, expected 100%\n"
        return
    assert errors[0]["kind"] == kind and errors[0].get("errno") == errno_name


def test_dcb_replace_on_mlx5_reports_the_stale_delete_but_exits_0(host):
    ok(host, "dcb", "app", "add", "dev", IF0, "dscp-prio", "26:3")
    res = run_tool(host, "dcb", "app", "replace", "dev", IF0, "dscp-prio", "26:5")
    assert res.returncode == 0
    assert res.stderr == "Attribute write: No such file or directory\nCould not remove replaced APP entries\n"
    assert dt.parse_dcb_app(ok(host, "dcb", "-j", "app", "show", "dev", IF0))["dscp_prio"] == [(26, 5)]


# ------------------------------------------------------------------------------------- one model
def test_mlnx_qos_settings_read_back_through_dcb(host):
    ok(host, "mlnx_qos", "-i", IF0, "--trust", "dscp")
    ok(host, "mlnx_qos", "-i", IF0, "--pfc", "0,0,0,1,0,0,0,0")
    ok(host, "mlnx_qos", "-i", IF0, "--dscp2prio", "set,26,3", "--dscp2prio", "set,48,6")
    app = dt.parse_dcb_app(ok(host, "dcb", "-j", "app", "show", "dev", IF0))
    assert len(app["dscp_prio"]) == 64 and app["dscp2prio"][26] == 3 and app["dscp2prio"][48] == 6
    assert dt.parse_dcb_pfc(ok(host, "dcb", "-j", "pfc", "show", "dev", IF0))["pfc_enabled"] == [3]
    mq = q.parse_mlnx_qos(ok(host, "mlnx_qos", "-i", IF0))
    assert mq["trust"] == "dscp" and mq["dscp2prio_list"] == DEFAULT_DSCP2PRIO
    # the newest entry comes first in the app table, so the re-set DSCPs lead their rows
    raw = ok(host, "mlnx_qos", "-i", IF0)
    assert "\tprio:3 dscp:26,31,30,29,28,27,25,24,\n" in raw and "\tprio:6 dscp:48,55,54,53,52,51,50,49,\n" in raw


def test_dcb_settings_read_back_through_mlnx_qos(host):
    ok(host, "dcb", "app", "add", "dev", IF0, "dscp-prio", "26:3")
    mq = q.parse_mlnx_qos(ok(host, "mlnx_qos", "-i", IF0))
    assert mq["trust"] == "dscp" and mq["dscp2prio"] == {26: 3} and mq["dscp2prio_list"] is None
    ok(host, "dcb", "pfc", "set", "dev", IF0, "prio-pfc", "3:on")
    ok(host, "dcb", "ets", "set", "dev", IF0, "tc-tsa", "all:vendor", "0:ets", "3:ets", "tc-bw", "all:0", "0:50", "3:50",
       "prio-tc", "all:0", "3:3")
    mq = q.parse_mlnx_qos(ok(host, "mlnx_qos", "-i", IF0))
    assert mq["pfc_enabled"] == [3] and mq["prio_tc"] == [0, 0, 0, 3, 0, 0, 0, 0]
    assert [(t["tc"], t["tsa"], t["bw"]) for t in mq["tcs"]] == [(0, "ets", 50), (3, "ets", 50)]
    ok(host, "dcb", "app", "del", "dev", IF0, "dscp-prio", "26:3")
    assert q.parse_mlnx_qos(ok(host, "mlnx_qos", "-i", IF0))["trust"] == "pcp"   # last DSCP entry gone -> pcp
    ok(host, "mlnx_qos", "-i", IF0, "--trust", "dscp")
    ok(host, "mlnx_qos", "-i", IF0, "--trust", "pcp")
    assert dt.parse_dcb_app(ok(host, "dcb", "-j", "app", "show", "dev", IF0))["dscp_prio"] == []


def test_the_two_ports_have_separate_state(host):
    ok(host, "mlnx_qos", "-i", IF0, "--pfc", "0,0,0,1,0,0,0,0")
    other = next(n for n in os.listdir(host / "class/net") if n.startswith("enp") and n != IF0)
    assert dt.parse_dcb_pfc(ok(host, "dcb", "-j", "pfc", "show", "dev", other))["pfc_enabled"] == []


def test_rebuild_is_a_driver_reload(host):
    ok(host, "mlnx_qos", "-i", IF0, "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0")
    ok(host, "ethtool", "-A", IF0, "rx", "off", "tx", "off")
    (host / "class/infiniband/mlx5_0/tc/1/traffic_class").write_text("106\n")
    kernelfs.mkdir_cm_device(host, "mlx5_0")
    (host / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").write_text("106\n")
    kernelfs.settle(host)
    simhost.build_tree(simhost.load(OFED), host)
    mq = q.parse_mlnx_qos(ok(host, "mlnx_qos", "-i", IF0))
    assert (mq["trust"], mq["pfc_enabled"]) == ("pcp", [])
    assert q.parse_ethtool_pause(ok(host, "ethtool", "-a", IF0))["rx"] is True
    assert (host / "class/infiniband/mlx5_0/tc/1/traffic_class").read_text() == ""
    assert not (host / "kernel/config/rdma_cm/mlx5_0").exists()
    assert ok(host, "cma_roce_tos", "-d", "mlx5_0") == "0\n"


# ----------------------------------------------------------------------------------- mlnx_qos errors
@pytest.mark.parametrize("args, stdout", [
    (["--pfc", "0,0,0,1,0,0,0,2"], "Bad value for PFC: 2 is not in the range 0..1\nUsage: mlnx_qos -i <interface> [options]\n\n"),
    (["--pfc", "0,0,0,1,0,0,0"], "pfc list must have 8 items\n"),
    (["--pfc", "0,0,0,1,0,0,0,0,0"], "Too many items for PFC\n"),
    (["--trust", "dscp", "--dscp2prio", "set,26,3"], "trust and dscp2prio commands cannot be used at the same time.\n"),
    (["--trust", "strict"], "Invalid trust state command. Refer to the help.\n"),
    (["--dscp2prio", "set,64,3"], "Invalid dscp2prio command. Refer to the help.\n"),
    (["--defltprio", "set,2"], "defltprio command failed\n"),
    (["-s", "ets,ets,vendor,vendor,vendor,vendor,vendor,vendor"], "Netlink error: Bad value. see dmesg.\n"),
    (["-t", "50,50,0,0,0,0,0,0"], "ETS BW for a strict/vendor TC must be 0\nUsage: mlnx_qos -i <interface> [options]\n\n"),
    (["--prio2buffer", "0,1,2,3,4,5,6,7,0"], "Too many items for prio2buffer\nBuffers commands error\n"),
])
def test_mlnx_qos_errors_exit_1_with_the_real_messages(host, args, stdout):
    res = run_tool(host, "mlnx_qos", "-i", IF0, *args)
    assert (res.returncode, res.stdout) == (1, stdout)
    assert qe.parse_mlnx_qos_errors(res.stdout)


def test_mlnx_qos_pfc_applied_before_a_later_error(host):
    res = run_tool(host, "mlnx_qos", "-i", IF0, "--pfc", "0,0,0,1,0,0,0,0", "--trust", "bogus")
    assert res.returncode == 1
    assert q.parse_mlnx_qos(ok(host, "mlnx_qos", "-i", IF0))["pfc_enabled"] == [3]


def test_mlnx_qos_usage_errors_and_quiet_options(host):
    res = run_tool(host, "mlnx_qos")
    assert (res.returncode, res.stdout) == (1, "Interface name is required\nUsage: mlnx_qos -i <interface> [options]\n\n")
    res = run_tool(host, "mlnx_qos", "-i", IF0, "--bogus")
    assert res.returncode == 2 and res.stderr.endswith("mlnx_qos: error: no such option: --bogus\n")
    assert ok(host, "mlnx_qos", "-i", IF0, "-F", "x,x,x,1,x,x,x,x") == ""
    assert ok(host, "mlnx_qos", "-i", IF0, "-P", "3") == "1\n"
    crash = run_tool(host, "mlnx_qos", "-i", "nosuch", "--pfc", "0,0,0,1,0,0,0,0")
    assert crash.returncode == 1 and "OSError: Netlink error: No such device (19)" in crash.stderr


def test_mlnx_qos_ratelimit_and_buffers(host):
    ok(host, "mlnx_qos", "-i", IF0, "-r", "25,5,10,25,25,25,25,25")
    tcs = q.parse_mlnx_qos(ok(host, "mlnx_qos", "-i", IF0))["tcs"]
    assert {t["tc"]: t["ratelimit_gbps"] for t in tcs}[1] == 5.0
    assert "tc: 1 ratelimit: 5.0 Gbps, tsa: vendor\n" in ok(host, "mlnx_qos", "-i", IF0)
    ok(host, "mlnx_qos", "-i", IF0, "--prio2buffer", "0,0,0,1,0,0,0,0", "--buffer_size", "130944,130944,0,0,0,0,0,0")
    buf = dt.parse_dcb_buffer(ok(host, "dcb", "-j", "buffer", "show", "dev", IF0))
    assert buf["prio_buffer"] == [0, 0, 0, 1, 0, 0, 0, 0] and buf["buffer_size"][:2] == [130944, 130944]
    res = run_tool(host, "mlnx_qos", "-i", IF0, "--buffer_size", "9999999,0,0,0,0,0,0,0")
    assert (res.returncode, res.stdout) == (1, "Buffers commands error\n")


# ------------------------------------------------------------------------------------------- ethtool
def _pause_names(text: str) -> set:
    return {n for n in q.parse_ethtool_stats(text) if re.match(r"^(rx|tx)_(prio\d|global)_pause", n)}


def test_pause_counters_exist_only_for_pfc_priorities(host):
    stats = ok(host, "ethtool", "-S", IF0)
    assert stats.startswith("NIC statistics:\n     rx_packets: 0\n")
    pause = q.ethtool_pause_counters(stats)
    assert pause["pfc_priorities"] == [] and pause["global"] is not None
    assert set(q.parse_ethtool_stats(stats).values()) == {0}          # the invented-number rule
    ok(host, "mlnx_qos", "-i", IF0, "--pfc", "0,0,0,1,0,1,0,0")
    pause = q.ethtool_pause_counters(ok(host, "ethtool", "-S", IF0))
    assert pause["pfc_priorities"] == [3, 5]
    assert sorted(pause["prio"][3]) == ["rx_pause", "rx_pause_duration", "rx_pause_transition", "tx_pause", "tx_pause_duration"]
    ok(host, "ethtool", "-A", IF0, "rx", "off", "tx", "off")
    text = ok(host, "ethtool", "-S", IF0)
    assert q.ethtool_pause_counters(text)["global"] is None
    assert _pause_names(text) == {"%s_prio%d_%s" % (d, p, k) for p in (3, 5) for d, k in
                                  (("rx", "pause"), ("rx", "pause_duration"), ("tx", "pause"), ("tx", "pause_duration"),
                                   ("rx", "pause_transition"))}
    # the real capture's names are all in the simulated list (same driver layout)
    real = set(q.parse_ethtool_stats((OUTPUTS / "ethtool-S-mlx5-02.txt").read_text()))
    assert real <= set(q.parse_ethtool_stats(text))


def test_ethtool_pause_show_and_set(host):
    assert ok(host, "ethtool", "-a", IF0) == "Pause parameters for %s:\nAutonegotiate:\toff\nRX:\t\ton\nTX:\t\ton\n\n" % IF0
    ok(host, "ethtool", "-A", IF0, "rx", "off")
    res = q.parse_ethtool_pause(ok(host, "ethtool", "--include-statistics", "-a", IF0))
    assert (res["rx"], res["tx"], res["statistics"]) == (False, True, {"tx_pause_frames": 0, "rx_pause_frames": 0})
    bad = run_tool(host, "ethtool", "-A", IF0, "rx", "maybe")
    assert (bad.returncode, bad.stderr) == (1, (QOS / "ethtool-A-error-value-01.txt").read_text())
    auto = run_tool(host, "ethtool", "-A", IF0, "autoneg", "on")
    assert auto.returncode == 76 and qe.parse_ethtool_errors(auto.stderr)[0]["errno"] == "EINVAL"
    dup = run_tool(host, "ethtool", "-A", IF0, "rx", "on", "rx", "off")
    assert dup.stderr == "ethtool (-A): duplicate parameter 'rx'\n"


def test_ethtool_on_a_netdev_the_simulator_does_not_own(host):
    res = run_tool(host, "ethtool", "-a", "nosuch")
    if any(os.path.exists(p) for p in ("/usr/sbin/ethtool", "/sbin/ethtool")):
        assert (res.returncode, res.stderr) == (1, (QOS / "ethtool-a-error-nodev-01.txt").read_text())
    else:
        assert (res.returncode, res.stderr) == (127, "ethtool: command not found\n")


# ------------------------------------------------------------------------------ cma_roce_mode / tos
def test_cma_scripts_print_what_the_real_scripts_print(host):
    assert ok(host, "cma_roce_mode", "-d", "mlx5_0", "-p", "1") == (OUTPUTS / "cma_roce_mode-02.txt").read_text()
    assert ok(host, "cma_roce_mode", "-d", "mlx5_0", "-p", "1", "-m", "1") == (OUTPUTS / "cma_roce_mode-01.txt").read_text()
    assert ok(host, "cma_roce_mode", "-d", "mlx5_0", "-p", "1", "-m", "2") == (QOS / "cma_roce_mode-set-01.txt").read_text()
    assert ok(host, "cma_roce_tos", "-d", "mlx5_0", "-t", "106") == (OUTPUTS / "cma_roce_tos-01.txt").read_text()
    # the scripts remove the device directory they created; the values stay with the device
    assert not (host / "kernel/config/rdma_cm/mlx5_0").exists()
    assert q.parse_cma_roce_tos(ok(host, "cma_roce_tos", "-d", "mlx5_0"))["tos"] == 106
    assert ok(host, "cma_roce_tos", "-d", "mlx5_1") == "0\n"


def test_cma_scripts_errors(host, tmp_path):
    bad = run_tool(host, "cma_roce_tos", "-d", "mlx5_0", "-t", "300")
    assert bad.returncode == 0 and bad.stdout == "0\n" and bad.stderr.endswith(": line 110: echo: write error: Invalid argument\n")
    assert q.parse_cma_roce_tos(bad.stdout + bad.stderr)["error"] == "write_failed"
    nodev = run_tool(host, "cma_roce_mode", "-d", "mlx5_9")
    assert nodev.returncode == 1 and nodev.stdout == "Failed to create configuration for mlx5_9\n"
    assert nodev.stderr == "mkdir: cannot create directory 'mlx5_9': No such device\n"
    noport = run_tool(host, "cma_roce_mode", "-d", "mlx5_0", "-p", "2")
    assert noport.returncode == 1 and q.parse_cma_roce_mode(noport.stdout)["error"] == "no_port"
    nonum = run_tool(host, "cma_roce_mode", "-m", "x")
    assert nonum.returncode == 0 and nonum.stdout == "RoCE v2\n" and nonum.stderr.count("integer expression expected") == 2
    empty = tmp_path / "none"
    simhost.build_tree(simhost.load("no_rdma"), empty)
    res = run_tool(empty, "cma_roce_mode")
    assert (res.returncode, res.stdout) == (1, (OUTPUTS / "cma_roce_mode-03.txt").read_text())


# ---------------------------------------------------------------------- configfs and traffic_class
def test_configfs_files_appear_on_mkdir_and_values_survive_rmdir(host):
    cm = host / "kernel/config/rdma_cm"
    (cm / "mlx5_0").mkdir()            # what an admin (or the product) does
    kernelfs.settle(host)
    port = cm / "mlx5_0/ports/1"
    assert (port / "default_roce_mode").read_text() == (QOS / "configfs-default_roce_mode-01.txt").read_text()
    assert q.parse_roce_tos((port / "default_roce_tos").read_text()) == 0
    (port / "default_roce_tos").write_text("106")
    (port / "default_roce_mode").write_text("RoCE v1\n")     # not a kernel string: refused
    kernelfs.settle(host)
    assert (port / "default_roce_tos").read_text() == "106\n"
    assert (port / "default_roce_mode").read_text() == "RoCE v2\n"
    assert "refused (EINVAL)" in (host / ".simhost/state/kernelfs.log").read_text()
    facts = rdma_sysfs.gather_rdma_sysfs(str(host))["devices"]["mlx5_0"]["ports"]["1"]["rdma_cm"]
    assert facts == {"default_roce_mode": "RoCE v2", "default_roce_tos": 106}
    kernelfs.rmdir_cm_device(host, "mlx5_0")
    assert not (cm / "mlx5_0").exists()
    assert kernelfs.mkdir_cm_device(host, "mlx5_0") == 0
    assert (port / "default_roce_tos").read_text() == "106\n"
    (cm / "bogus").mkdir()
    kernelfs.settle(host)
    assert not (cm / "bogus").exists()


def test_traffic_class_reads_back_as_the_driver_shows_it(host):
    path = host / "class/infiniband/mlx5_0/tc/1/traffic_class"
    assert path.read_bytes() == (QOS / "sysfs-traffic_class-02.txt").read_bytes() == b""
    path.write_text("106\n")
    kernelfs.settle(host)
    assert path.read_text() == "Global tclass=106\n"
    assert q.parse_traffic_class(path.read_text())["global_tclass"] == 106
    assert rdma_sysfs.gather_rdma_sysfs(str(host))["devices"]["mlx5_0"]["ports"]["1"]["traffic_class"] == 106
    path.write_text("dst_ip=10.0.0.0/24,tclass=96\n")
    kernelfs.settle(host)
    assert path.read_text() == "Global tclass=106\ndst_ip=10.0.0.0/24,tclass=96\n"
    path.write_text("300")
    kernelfs.settle(host)
    want = {"global_tclass": 106, "rules": [{"dst_ip": "10.0.0.0/24", "tclass": 96}], "dscp": 26}
    assert q.parse_traffic_class(path.read_text()) == want
    path.write_text("-1")
    kernelfs.settle(host)
    assert path.read_text() == "dst_ip=10.0.0.0/24,tclass=96\n"


def test_ecn_writes_settle_to_the_show_format(host):
    ecn = host / "class/net" / IF0 / "ecn"
    (ecn / "roce_np/enable/3").write_text("0")
    (ecn / "roce_np/cnp_dscp").write_text("26")
    (ecn / "roce_rp/rpg_ai_rate").write_text("fast")
    kernelfs.settle(host)
    assert (ecn / "roce_np/enable/3").read_text() == "0\n" and (ecn / "roce_np/cnp_dscp").read_text() == "26\n"
    assert (ecn / "roce_rp/rpg_ai_rate").read_text() == "5\n"
    assert rdma_sysfs.gather_rdma_sysfs(str(host))["netdevs"][IF0]["ecn"]["roce_np_enabled"] == [0, 1, 2, 4, 5, 6, 7]


def test_the_watcher_settles_a_write_by_itself(host):
    env = {**os.environ, "PYTHONPATH": str(KIT)}
    proc = subprocess.Popen([sys.executable, "-m", "simhost", "watch", "--root", str(host)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        path = host / "class/infiniband/mlx5_1/tc/1/traffic_class"
        path.write_text("160\n")
        deadline = time.monotonic() + 5
        while path.read_text() != "Global tclass=160\n" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert path.read_text() == "Global tclass=160\n"
        (host / "kernel/config/rdma_cm/mlx5_1").mkdir()
        deadline = time.monotonic() + 5
        target = host / "kernel/config/rdma_cm/mlx5_1/ports/1/default_roce_mode"
        while not target.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert target.read_text() == "RoCE v2\n"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
