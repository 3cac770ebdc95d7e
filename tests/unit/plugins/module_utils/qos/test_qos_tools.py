"""QoS tool parsers (mlnx_qos, dcb, ethtool, traffic_class, RDMA-CM), run over every relevant real capture."""

from __future__ import annotations

import json

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import dcb_tools as dt
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import qos_errors as qe
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import qos_tools as q
from fixtures_path import real_fixtures

OUTPUTS = real_fixtures() / "rdma-outputs"
QOS = real_fixtures() / "qos-firmware"
DEFAULT_DSCP2PRIO = [d >> 3 for d in range(64)]
MLX5_PRIO_TC = [1, 0, 2, 3, 4, 5, 6, 7]


def _read(path) -> str:
    return path.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------- mlnx_qos
MLNX_QOS = {
    OUTPUTS / "mlnx_qos-01.txt": {
        "dcbx_mode": "os", "trust": "dscp", "dscp2prio_list": DEFAULT_DSCP2PRIO, "default_priority": None,
        "buffer_size": None, "max_buffer_size": None, "cable_len": 7, "pfc": [0, 0, 0, 1, 0, 0, 0, 0],
        "pfc_enabled": [3], "prio2buffer": None, "prio_tc": MLX5_PRIO_TC, "tsas": {"vendor"}, "ntcs": 8},
    OUTPUTS / "mlnx_qos-02.txt": {
        "dcbx_mode": "firmware", "trust": "dscp", "dscp2prio_list": DEFAULT_DSCP2PRIO,
        "buffer_size": [130944, 130944, 0, 0, 0, 0, 0, 0], "max_buffer_size": 262016, "cable_len": 7,
        "pfc_enabled": [3], "prio2buffer": [0, 0, 0, 1, 0, 0, 0, 0], "prio_tc": [0, 0, 0, 3, 0, 0, 6, 0],
        "tsas": {"ets", "vendor"}, "ntcs": 3},
    QOS / "mlnx_qos-pcp-buffer-01.txt": {
        "dcbx_mode": "os", "trust": "pcp", "dscp2prio": None, "buffer_size": [524160, 0, 0, 0, 0, 0, 0, 0],
        "max_buffer_size": None, "total_size": None, "pfc_enabled": [], "prio2buffer": [0] * 8,
        "prio_tc": MLX5_PRIO_TC, "ntcs": 8},
    QOS / "mlnx_qos-trust-dscp-01.txt": {
        "trust": "dscp", "dscp2prio_list": DEFAULT_DSCP2PRIO, "buffer_size": [524160, 0, 0, 0, 0, 0, 0, 0],
        "pfc_enabled": [], "prio_tc": MLX5_PRIO_TC},
    QOS / "mlnx_qos-ratelimit-01.txt": {
        "trust": "pcp", "default_priority": [], "buffer_size": [0, 156096, 0, 0, 0, 0, 0, 0], "pfc": [0] * 8,
        "prio2buffer": [1] * 8, "prio_tc": list(range(8)), "ratelimits": [25.0, 5.0, 10.0, 25.0, 25.0, 25.0, 25.0, 25.0]},
    QOS / "mlnx_qos-upstream-01.txt": {
        "trust": "pcp", "default_priority": [], "buffer_size": [0, 187200, 0, 0, 0, 0, 0, 0],
        "max_buffer_size": 2044224, "prio2buffer": [1] * 8, "prio_tc": MLX5_PRIO_TC},
    OUTPUTS / "ecn-sysfs-01.txt": {"trust": "dscp", "pfc_enabled": [5], "prio2buffer": [0, 0, 0, 0, 0, 1, 0, 0],
                                   "dscp2prio": None, "prio_tc": None},
}


@pytest.mark.parametrize("path", sorted(MLNX_QOS), ids=lambda p: p.name)
def test_mlnx_qos_captures(path):
    res = q.parse_mlnx_qos(_read(path))
    for key, want in MLNX_QOS[path].items():
        if key == "tsas":
            assert {tc["tsa"] for tc in res["tcs"]} == want
        elif key == "ntcs":
            assert len(res["tcs"]) == want
        elif key == "ratelimits":
            assert [tc["ratelimit_gbps"] for tc in res["tcs"]] == want
        else:
            assert res[key] == want, key
    assert res["errors"] == []


def test_mlnx_qos_every_capture_is_listed():
    files = set(OUTPUTS.glob("mlnx_qos-*.txt")) | set(QOS.glob("mlnx_qos-*.txt"))
    assert files - set(MLNX_QOS) == {QOS / "mlnx_qos-error-unsupported-01.txt"}


def test_mlnx_qos_ets_bandwidth_and_unlimited_rates():
    tcs = q.parse_mlnx_qos(_read(OUTPUTS / "mlnx_qos-02.txt"))["tcs"]
    assert [(t["tc"], t["tsa"], t["bw"], t["ratelimit_gbps"]) for t in tcs] == [
        (0, "ets", 50, None), (3, "ets", 50, None), (6, "vendor", None, None)]
    assert tcs[0]["priorities"] == [0, 1, 2, 4, 5, 7]


def test_mlnx_qos_unsupported_capture():
    res = q.parse_mlnx_qos(_read(QOS / "mlnx_qos-error-unsupported-01.txt"))
    assert res["unsupported"] == ["trust", "buffers", "ratelimit", "ets"]
    assert res["trust"] is None and res["pfc"] is None and res["tcs"] == []


@pytest.mark.parametrize("variant", ["tabs", "spaces", "no-trailing-blanks", "crlf"])
def test_mlnx_qos_whitespace_variants_parse_alike(variant):
    text = _read(OUTPUTS / "mlnx_qos-02.txt")
    tabbed = text.replace("        ", "\t")
    if variant == "tabs":
        text = tabbed
    elif variant == "no-trailing-blanks":
        text = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    elif variant == "crlf":
        text = text.replace("\n", "\r\n")
    res = q.parse_mlnx_qos(text)
    assert res["pfc_enabled"] == [3] and res["prio2buffer"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert res["dscp2prio_list"] == DEFAULT_DSCP2PRIO and res["max_buffer_size"] == 262016


def test_mlnx_qos_partial_mapping_and_wrapped_rows():
    text = ("Priority trust state: dscp\ndscp2prio mapping:\n\tprio:3 dscp:26,\n"
            "\tprio:5 dscp:26,47,46,45,44,43,42,41,\n\tprio:5 dscp:40,\ndefault priority:\n\tprio:2\n"
            "Receive buffer size (bytes): 1,2,3,4,5,6,7,8,total_size=99\n")
    res = q.parse_mlnx_qos(text)
    assert res["dscp2prio"] == {26: 5, 47: 5, 46: 5, 45: 5, 44: 5, 43: 5, 42: 5, 41: 5, 40: 5}
    assert res["dscp2prio_list"] is None and res["default_priority"] == [2] and res["total_size"] == 99


@pytest.mark.parametrize("text, kind, extra", [
    ("Bad value for PFC: 2 is not in the range 0..1\nUsage: mlnx_qos -i <interface> [options]\n\n", "bad_value",
     {"option": "PFC"}),
    ("pfc list must have 8 items\n", "list_length", {"option": "pfc"}),
    ("Too many items for PFC\n", "list_length", {"option": "PFC"}),
    ("trust and dscp2prio commands cannot be used at the same time.\n", "conflict", {}),
    ("Invalid trust state command. Refer to the help.\n", "invalid_command", {"option": "trust state"}),
    ("Netlink error: Bad value. see dmesg.\n", "netlink", {"detail": "Bad value. see dmesg."}),
    ("dscp2prio command failed\n", "failed", {"option": "dscp2prio"}),
    ("****** WARNING: lldpad service is running and may overwrite your settings ******\n", "warning", {}),
    ("Interface name is required\n", "usage", {}),
])
def test_mlnx_qos_error_lines(text, kind, extra):
    (first,) = [e for e in qe.parse_mlnx_qos_errors(text) if e["kind"] != "usage" or kind == "usage"][:1]
    assert first["kind"] == kind
    for key, val in extra.items():
        assert first[key] == val


# -------------------------------------------------------------------------------------------------- dcb
PFC = {
    OUTPUTS / "dcb-pfc-01.txt": (8, False, 0, [], None),
    OUTPUTS / "dcb-pfc-02.txt": (8, False, 4096, [6, 7], None),
    QOS / "dcb-pfc-show-01.txt": (4, False, 0, [], None),
    QOS / "dcb-pfc-show-03.txt": (8, False, 4096, [6, 7], None),
    QOS / "dcb-pfc-stats-01.txt": (8, True, 0, [1, 7], [0, 217, 0, 0, 0, 0, 0, 28]),
}


@pytest.mark.parametrize("path", sorted(PFC), ids=lambda p: p.name)
def test_dcb_pfc_captures(path):
    cap, mbc, delay, enabled, requests = PFC[path]
    res = dt.parse_dcb_pfc(_read(path))
    assert (res["pfc_cap"], res["macsec_bypass"], res["delay"], res["pfc_enabled"], res["requests"]) == (
        cap, mbc, delay, enabled, requests)


def test_dcb_pfc_with_trailing_blanks_and_json():
    text = "pfc-cap 8 macsec-bypass off delay 7 \nprio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n"
    assert dt.parse_dcb_pfc(text)["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]
    js = json.dumps({"pfc_cap": 8, "macsec_bypass": False, "delay": 7, "prio_pfc": [False] * 3 + [True] + [False] * 4})
    res = dt.parse_dcb_pfc(js + "\n")
    assert res == {"pfc_cap": 8, "macsec_bypass": False, "delay": 7, "pfc": [0, 0, 0, 1, 0, 0, 0, 0],
                   "pfc_enabled": [3], "requests": None, "indications": None}


ETS = {
    OUTPUTS / "dcb-ets-01.txt": {"prio_tc": list(range(8)), "tc_bw": [33, 33, 34, 0, 0, 0, 0, 0],
                                 "tc_tsa": ["ets"] * 3 + ["strict"] * 5, "willing": None},
    QOS / "dcb-ets-show-02.txt": {"prio_tc": list(range(8)), "tc_tsa": ["ets"] * 3 + ["strict"] * 5},
    QOS / "dcb-ets-show-01.txt": {"willing": True, "ets_cap": 8, "cbs": False, "tc_bw": [0, 0, 0, 0, 100, 0, 0, 0],
                                  "prio_tc": [1, 3, 5, 0, 0, 0, 0, 0], "reco_tc_tsa": ["strict"] * 8},
}


@pytest.mark.parametrize("path", sorted(ETS), ids=lambda p: p.name)
def test_dcb_ets_captures(path):
    res = dt.parse_dcb_ets(_read(path))
    for key, want in ETS[path].items():
        assert res[key] == want, key


APP = {
    OUTPUTS / "dcb-app-01.txt": [(0, 0), (24, 2), (24, 3), (48, 6)],
    OUTPUTS / "dcb-app-02.txt": [(0, 0), (24, 2), (24, 3), (48, 6)],
    QOS / "dcb-app-show-01.txt": [(0, 0), (24, 2), (24, 3), (48, 6)],
    QOS / "dcb-app-show-N-01.txt": [(0, 0), (24, 2), (24, 3), (48, 6)],
}


@pytest.mark.parametrize("path", sorted(APP), ids=lambda p: p.name)
def test_dcb_app_captures_symbolic_and_numeric(path):
    res = dt.parse_dcb_app(_read(path))
    assert res["dscp_prio"] == APP[path]
    assert res["dscp_multi"] == {24: [2, 3]} and res["dscp2prio"] == {0: 0, 24: 3, 48: 6}


def test_dcb_app_json_and_default_names():
    js = json.dumps({"default_prio": [0], "dscp_prio": [[26, 3], [48, 6]]})
    res = dt.parse_dcb_app(js)
    assert res["dscp_prio"] == [(26, 3), (48, 6)] and res["default_prio"] == [0]
    assert dt.parse_dcb_app("dscp-prio default:0 AF31:3 EF:5 \n")["dscp2prio"] == {0: 0, 26: 3, 46: 5}
    assert dt.parse_dcb_app("")["dscp_prio"] == []


@pytest.mark.parametrize("path", [OUTPUTS / "dcb-apptrust-01.txt", QOS / "dcb-apptrust-show-01.txt"], ids=lambda p: p.name)
def test_dcb_apptrust_captures(path):
    assert dt.parse_dcb_apptrust(_read(path)) == {"order": ["port", "pcp", "ethtype"]}
    assert dt.parse_dcb_apptrust('{"order":["dscp","pcp"]}\n') == {"order": ["dscp", "pcp"]}


@pytest.mark.parametrize("path", [OUTPUTS / "dcb-buffer-01.txt", QOS / "dcb-buffer-show-01.txt"], ids=lambda p: p.name)
def test_dcb_buffer_captures(path):
    res = dt.parse_dcb_buffer(_read(path))
    assert res["prio_buffer"] == list(range(8))
    assert res["buffer_size"] == [10240] * 6 + [1048576, 10240]
    assert res["total_size"] == 1222 * 1024


def test_dcb_sizes_rates_maxrate_dcbx():
    assert [dt.parse_dcb_size(s) for s in ("524160b", "10Kb", "1Mb", "x")] == [524160, 10240, 1048576, None]
    assert dt.parse_dcb_maxrate(_read(QOS / "dcb-maxrate-show-01.txt"))["tc_maxrate"] == [25 * 10 ** 9] * 6 + [10 ** 11, 25 * 10 ** 9]
    for path in (OUTPUTS / "dcb-dcbx-01.txt", QOS / "dcb-dcbx-show-01.txt"):
        res = dt.parse_dcb_dcbx(_read(path))
        assert res["flags"] == ["host", "ieee"] and res["host"] and not res["cee"]


DCB_ERRORS = {
    QOS / "dcb-error-01.txt": [("attribute_write", "EEXIST")],
    QOS / "dcb-error-02.txt": [("set_attribute", "EEXIST"), ("attribute_write", "ENOENT")],
    QOS / "dcb-error-nodev-01.txt": [("attribute_read", "ENODEV")],
    QOS / "dcb-error-eopnotsupp-01.txt": [("attribute_read", "EOPNOTSUPP")],
    QOS / "dcb-error-mapping-01.txt": [("mapping_range", None), ("invalid_mapping", None)],
    QOS / "dcb-error-incomplete-01.txt": [("incomplete", None)],
    QOS / "dcb-error-object-01.txt": [("unknown_object", None)],
}


@pytest.mark.parametrize("path", sorted(DCB_ERRORS), ids=lambda p: p.name)
def test_dcb_error_captures(path):
    got = [(e["kind"], e.get("errno")) for e in qe.parse_dcb_errors(_read(path))]
    assert got == DCB_ERRORS[path]


def test_dcb_error_details():
    (rng, inv) = qe.parse_dcb_errors(_read(QOS / "dcb-error-mapping-01.txt"))
    assert rng["what"] == "DSCP" and rng["range"] == "0..63" and inv["detail"] == "64"
    assert qe.parse_dcb_errors(_read(QOS / "dcb-error-object-01.txt"))[0]["detail"] == "apptrust"


# ---------------------------------------------------------------------------------------------- ethtool
def test_ethtool_pause_capture():
    res = q.parse_ethtool_pause(_read(QOS / "ethtool-a-01.txt"))
    assert res == {"interface": "enp132s0f2", "autoneg": True, "rx": True, "tx": True, "rx_negotiated": True,
                   "tx_negotiated": True, "statistics": {"tx_pause_frames": 0, "rx_pause_frames": 100}}


def test_ethtool_pause_without_negotiation_lines():
    res = q.parse_ethtool_pause("Pause parameters for enp12s0np0:\nAutonegotiate:\toff\nRX:\t\toff\nTX:\t\ton\n\n")
    assert (res["autoneg"], res["rx"], res["tx"], res["rx_negotiated"]) == (False, False, True, None)


@pytest.mark.parametrize("name, count, global_pause", [("ethtool-S-mlx5-01.txt", 751, True),
                                                       ("ethtool-S-mlx5-02.txt", 263, False)])
def test_ethtool_stats_captures(name, count, global_pause):
    stats = q.parse_ethtool_stats(_read(OUTPUTS / name))
    assert len(stats) == count
    assert stats["rx_prio0_packets"] > 0
    pause = q.ethtool_pause_counters(stats)
    assert pause["pfc_priorities"] == []                     # PFC is off in both: no rx_prioN_pause counters
    assert (pause["global"] is not None) == global_pause
    if global_pause:
        assert pause["global"] == {"rx_pause": 0, "rx_pause_duration": 0, "tx_pause": 0, "tx_pause_duration": 0,
                                   "rx_pause_transition": 0}
    else:
        assert pause["storm"] == {"tx_pause_storm_warning_events": 0, "tx_pause_storm_error_events": 0}


def test_ethtool_pause_counters_of_pfc_priorities():
    text = "NIC statistics:\n     rx_prio3_pause: 5\n     tx_prio3_pause: 7\n     rx_prio3_pause_duration: 9\n"
    pause = q.ethtool_pause_counters(text)
    assert pause["pfc_priorities"] == [3] and pause["prio"][3] == {"rx_pause": 5, "tx_pause": 7, "rx_pause_duration": 9}
    assert pause["global"] is None


ETHTOOL_ERRORS = {
    "ethtool-a-error-nodev-01.txt": [("no_device", "ENODEV"), ("netlink", "ENODEV")],
    "ethtool-A-error-nodev-01.txt": [("no_device", "ENODEV"), ("netlink", "ENODEV")],
    "ethtool-S-error-nodev-01.txt": [("ioctl", "ENODEV")],
    "ethtool-a-error-eopnotsupp-01.txt": [("netlink", "EOPNOTSUPP")],
    "ethtool-A-error-value-01.txt": [("invalid_value", None)],
}


@pytest.mark.parametrize("name", sorted(ETHTOOL_ERRORS))
def test_ethtool_error_captures(name):
    got = [(e["kind"], e.get("errno")) for e in qe.parse_ethtool_errors(_read(QOS / name))]
    assert got == ETHTOOL_ERRORS[name]


# ---------------------------------------------------------------------------- traffic_class, RDMA-CM, ECN
def test_traffic_class_captures():
    assert q.parse_traffic_class(_read(QOS / "sysfs-traffic_class-02.txt")) == {"global_tclass": None, "rules": [], "dscp": None}
    res = q.parse_traffic_class(_read(OUTPUTS / "ecn-sysfs-01.txt"))
    assert res["global_tclass"] == 160 and res["dscp"] == 40


def test_traffic_class_rules_as_the_driver_prints_them():
    res = q.parse_traffic_class("Global tclass=106\ndst_ip=10.0.0.0/24,tclass=96\nsrc_ip=10.0.1.11,dst_ip=10.0.2.0/24,tclass=0\n")
    assert res["global_tclass"] == 106 and res["dscp"] == 26
    assert res["rules"] == [{"dst_ip": "10.0.0.0/24", "tclass": 96},
                            {"src_ip": "10.0.1.11", "dst_ip": "10.0.2.0/24", "tclass": 0}]
    assert q.parse_traffic_class("106\n")["global_tclass"] is None    # a bare number is a write, never a read


@pytest.mark.parametrize("path, mode", [
    (OUTPUTS / "cma_roce_mode-01.txt", "IB/RoCE v1"), (OUTPUTS / "cma_roce_mode-02.txt", "RoCE v2"),
    (QOS / "cma_roce_mode-query-01.txt", "IB/RoCE v1"), (QOS / "cma_roce_mode-set-01.txt", "RoCE v2"),
    (QOS / "configfs-default_roce_mode-01.txt", "RoCE v2")], ids=lambda v: getattr(v, "name", v))
def test_roce_mode_captures(path, mode):
    text = _read(path)
    assert q.parse_roce_mode(text) == mode
    assert q.parse_cma_roce_mode(text) == {"mode": mode, "error": None, "message": None}
    assert q.roce_mode_version(mode) == (2 if mode == "RoCE v2" else 1)


def test_cma_errors_and_tos():
    res = q.parse_cma_roce_mode(_read(OUTPUTS / "cma_roce_mode-03.txt"))
    assert res["error"] == "no_configfs" and res["mode"] is None
    assert q.parse_cma_roce_tos(_read(OUTPUTS / "cma_roce_tos-01.txt"))["tos"] == 106
    assert q.parse_roce_mode("RoCE v1\n") is None and q.parse_roce_tos("256\n") is None
    res = q.parse_cma_roce_tos("106\n/usr/sbin/cma_roce_tos: line 110: echo: write error: Invalid argument\n")
    assert res["tos"] == 106 and res["error"] == "write_failed" and res["detail"] == "Invalid argument"
    res = q.parse_cma_roce_mode("Device mlx5_9 port 1 does not exist\n")
    assert res["error"] == "no_port" and res["device"] == "mlx5_9"


def test_ecn_sysfs_capture_and_helpers():
    dump = q.parse_sysfs_dump(_read(OUTPUTS / "ecn-sysfs-01.txt"))
    enables = {k: v for k, v in dump.items() if "/enable/" in k}
    assert len(enables) == 16 and set(enables.values()) == {"1"}
    assert q.parse_sysfs_int(dump["/sys/class/net/eth0/ecn/roce_np/cnp_dscp"]) == 48
    assert "cnp_802p_prio" in q.ECN_NP_PARAMS and len(q.ECN_RP_PARAMS) == 16
    assert q.dscp_to_tos(26, 2) == 106 and q.tos_to_dscp(106) == 26 and q.default_dscp2prio() == DEFAULT_DSCP2PRIO
