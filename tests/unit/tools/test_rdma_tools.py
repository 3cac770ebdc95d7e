"""Parsers of vendor tool output, run over every real capture in tests/fixtures/real/rdma-outputs."""

from __future__ import annotations

import pytest

import rdma_tools  # tests/tools: the parsers of the vendor tools' text, used only by tests
from fixtures_path import real_fixtures

CAPTURES = real_fixtures() / "rdma-outputs"


def _read(name: str) -> str:
    return (CAPTURES / name).read_text(encoding="utf-8")


def _all(prefix: str) -> list[str]:
    return sorted(p.name for p in CAPTURES.glob(prefix + "*.txt"))


# ------------------------------------------------------------------------------------------ ibv_devinfo
# capture -> (device, port, expected port values, expected device values)
IBV_DEVINFO = {
    "ibv_devinfo-01.txt": ("mlx5_3", 1, {"state": "PORT_ACTIVE", "state_num": 4, "sm_lid": 1, "port_lid": 1690,
                                         "port_lmc": 0, "link_layer": "InfiniBand", "active_mtu": 4096},
                           {"fw_ver": "28.37.1700", "node_guid": "2dc3:190f:3ddc:67b6", "vendor_part_id": 4126,
                            "board_id": "MT_0000000970", "phys_port_cnt": 1, "transport": "InfiniBand"}),
    "ibv_devinfo-02.txt": ("mlx5_12", 1, {"state": "PORT_DOWN", "state_num": 1, "active_mtu": 1024, "max_mtu": 4096,
                                          "link_layer": "Ethernet"},
                           {"vendor_part_id": 4125, "sys_image_guid": "a088:c203:007c:450c"}),
    "ibv_devinfo-03.txt": ("mlx5_2", 1, {"state": "PORT_ACTIVE", "link_layer": "Ethernet", "port_lid": 0},
                           {"vendor_part_id": 4129, "board_id": "MT_0000000838", "fw_ver": "28.42.1000"}),
    "ibv_devinfo-v-01.txt": ("mlx5_0", 1, {"link_layer": "Ethernet", "active_width": "4X", "active_speed_gbps": 25.0,
                                           "phys_state": "LINK_UP", "gid_tbl_len": 256, "pkey_tbl_len": 1,
                                           "port_cap_flags": "0x04010000"},
                             {"vendor_part_id": 4123, "max_qp": 262144, "num_comp_vectors": 32}),
    "ibv_devinfo-v-02.txt": ("mlx5_0", None, {}, {"fw_ver": "28.42.1000", "max_qp": 131072, "device_cap_flags": "0xed721c36",
                                                  "node_guid": "a088:c203:00c1:ab26"}),
    "ibv_devinfo-v-03.txt": ("", 1, {"active_width": "1X", "active_speed_gbps": 25.0, "gid_tbl_len": 256,
                                     "link_layer": "Ethernet"}, {}),
}


def test_every_ibv_devinfo_capture_has_expectations():
    assert set(_all("ibv_devinfo-")) - {"ibv_devinfo-l-01.txt"} == set(IBV_DEVINFO)


@pytest.mark.parametrize("capture", sorted(IBV_DEVINFO))
def test_ibv_devinfo_capture_gives_device_and_port_values(capture):
    dev_name, port_num, port_expect, dev_expect = IBV_DEVINFO[capture]
    parsed = rdma_tools.parse_ibv_devinfo(_read(capture))
    dev = parsed["devices"][dev_name]
    for key, val in dev_expect.items():
        assert dev[key] == val, key
    if port_num is not None:
        port = dev["ports"][port_num]
        for key, val in port_expect.items():
            assert port[key] == val, key


def test_ibv_devinfo_verbose_gids_with_type_suffix_are_normalised():
    gids = rdma_tools.parse_ibv_devinfo(_read("ibv_devinfo-v-01.txt"))["devices"]["mlx5_0"]["ports"][1]["gids"]
    assert [(g["index"], g["type"]) for g in gids] == [(0, "IB/RoCE v1"), (1, "RoCE v2"), (2, "IB/RoCE v1"), (3, "RoCE v2")]
    # the compressed RoCE v2 forms come back as 8 groups, equal to their v1 twins
    assert gids[1]["gid"] == gids[0]["gid"] == "fe80:0000:0000:0000:ba59:9fff:fec0:ec68"
    assert gids[3]["gid"] == "0000:0000:0000:0000:0000:ffff:0a00:0011"
    assert gids[3]["ipv4"] == "10.0.0.17" and gids[1]["ipv4"] is None


def test_ibv_devinfo_gid_lines_without_type_suffix_have_no_type():
    gids = rdma_tools.parse_ibv_devinfo(_read("ibv_devinfo-v-03.txt"))["devices"][""]["ports"][1]["gids"]
    assert [(g["index"], g["type"], g["ipv4"]) for g in gids] == [(14, None, "10.0.0.18"), (15, None, "10.0.0.18")]


def test_ibv_devinfo_verbose_capability_flags_are_lists():
    dev = rdma_tools.parse_ibv_devinfo(_read("ibv_devinfo-v-02.txt"))["devices"]["mlx5_0"]
    flags = dev["flags"]["device_cap_flags"]
    assert flags[0] == "BAD_PKEY_CNTR" and flags[-1] == "Unknown flags: 0xC8400000" and len(flags) == 14
    assert dev["flags"]["general_odp_caps"] == ["ODP_SUPPORT"]


def test_ibv_devinfo_list_form_gives_device_names():
    parsed = rdma_tools.parse_ibv_devinfo(_read("ibv_devinfo-l-01.txt"))
    assert list(parsed["devices"]) == ["mlx5_0", "mlx5_1", "irdma0", "irdma1"]


def test_ibv_devinfo_tabs_and_spaces_parse_the_same():
    text = _read("ibv_devinfo-03.txt")
    assert rdma_tools.parse_ibv_devinfo(text) == rdma_tools.parse_ibv_devinfo(text.replace("        ", "\t"))


# ------------------------------------------------------------------------------------------------ ibstat
# capture -> (number of CAs, CA, port, expected port values, expected CA values, number of noise lines)
IBSTAT = {
    "ibstat-01.txt": (9, "mlx5_5", 1, {"state": "Active", "phys_state": "LinkUp", "rate": 400.0, "base_lid": 1775,
                                       "sm_lid": 1, "lmc": 0, "cap_mask": 0xA751E848, "port_guid": "0xa088c203008399aa",
                                       "link_layer": "InfiniBand"},
                      {"ca_type": "MT4129", "num_ports": 1, "fw_ver": "28.41.1000", "node_guid": "0xa088c203008399aa"}, 0),
    "ibstat-02.txt": (12, "mlx5_11", 1, {"state": "Down", "phys_state": "Polling", "rate": 40.0, "base_lid": 0,
                                         "port_guid": "0x0000000000000000", "link_layer": "Ethernet"},
                      {"ca_type": "MT4129", "fw_ver": "28.39.1002"}, 0),
    "ibstat-03.txt": (8, "mlx5_7", 1, {"rate": 200.0, "base_lid": 13305, "cap_mask": 0xA651EC48},
                      {"ca_type": "MT4124", "sys_image_guid": "0xb83fd2030088e37c"}, 1),
    "ibstat-04.txt": (1, "mlx4_0", 1, {"state": "Down", "phys_state": "Disabled", "rate": 10.0, "base_lid": 38,
                                       "sm_lid": 13, "cap_mask": 0x02594868},
                      {"ca_type": "MT4099", "num_ports": 2, "hw_ver": "1"}, 4),
}


def test_every_ibstat_capture_has_expectations():
    assert set(_all("ibstat-")) == set(IBSTAT)


@pytest.mark.parametrize("capture", sorted(IBSTAT))
def test_ibstat_capture_gives_ca_and_port_values(capture):
    count, ca_name, port_num, port_expect, ca_expect, noise = IBSTAT[capture]
    parsed = rdma_tools.parse_ibstat(_read(capture))
    assert len(parsed["devices"]) == count
    assert len(parsed["messages"]) == noise
    ca = parsed["devices"][ca_name]
    assert ca["node_type"] == "CA"
    for key, val in ca_expect.items():
        assert ca[key] == val, key
    for key, val in port_expect.items():
        assert ca["ports"][port_num][key] == val, key


def test_ibstat_keeps_the_ibpanic_line_as_a_message():
    parsed = rdma_tools.parse_ibstat(_read("ibstat-03.txt"))
    assert parsed["messages"][0].startswith("ibpanic:") and "mlx5_8" in parsed["messages"][0]
    assert "mlx5_8" not in parsed["devices"]


def test_ibstat_single_port_form():
    text = "CA: 'mlx5_1'\nPort 1:\nState: Active\nPhysical state: LinkUp\nRate: 400\nBase lid: 0\nLMC: 0\n" \
           "SM lid: 0\nCapability mask: 0x00010000\nPort GUID: 0xa288c2fffe65a810\nLink layer: Ethernet\n"
    port = rdma_tools.parse_ibstat(text)["devices"]["mlx5_1"]["ports"][1]
    assert port["link_layer"] == "Ethernet" and port["rate"] == 400.0 and port["port_guid"] == "0xa288c2fffe65a810"


def test_ibstat_fdr10_and_sdr_rates():
    text = "CA 'mlx4_0'\n\tPort 1:\n\t\tRate: 40 (FDR10)\n\tPort 2:\n\t\tRate: 2.5\n"
    ports = rdma_tools.parse_ibstat(text)["devices"]["mlx4_0"]["ports"]
    assert (ports[1]["rate"], ports[1]["rate_fdr10"], ports[2]["rate"]) == (40.0, True, 2.5)


# --------------------------------------------------------------------------------------------- show_gids
# capture -> (n_gids_found, number of rows, {(dev, index): (ipv4, version, netdev)})
SHOW_GIDS = {
    "show_gids-01.txt": (4, 4, {("mlx5_0", 3): ("10.0.0.19", "v2", "rdma0"), ("mlx5_0", 0): (None, "v1", "rdma0")}),
    "show_gids-02.txt": (12, 12, {("mlx5_2", 3): ("10.0.0.22", "v2", "eth03"), ("mlx5_1", 1): (None, "v2", "eth02")}),
    "show_gids-03.txt": (3, 3, {("mlx5_1", 0): (None, "v1", None), ("mlx5_0", 1): (None, "v2", "ens11f0")}),
    "show_gids-04.txt": (4, 4, {("hrn3_bond_0", 1): ("10.0.0.23", "v2", "bond0"), ("mlx5_bond_0", 0): (None, "v1", "bond1")}),
}


def test_every_show_gids_capture_has_expectations():
    assert set(_all("show_gids-")) == set(SHOW_GIDS)


@pytest.mark.parametrize("capture", sorted(SHOW_GIDS))
def test_show_gids_capture_gives_rows(capture):
    found, rows, expect = SHOW_GIDS[capture]
    parsed = rdma_tools.parse_show_gids(_read(capture))
    assert parsed["n_gids_found"] == found
    assert len(parsed["gids"]) == rows
    by_key = {(g["device"], g["index"]): g for g in parsed["gids"]}
    for key, (ipv4, version, netdev) in expect.items():
        assert (by_key[key]["ipv4"], by_key[key]["version"], by_key[key]["netdev"]) == (ipv4, version, netdev)
    for g in parsed["gids"]:
        assert len(g["gid"]) == 39 and g["port"] == 1
        assert g["type"] == ("RoCE v2" if g["version"] == "v2" else "IB/RoCE v1")


# ------------------------------------------------------------------------------------------ ibdev2netdev
# capture -> (rows, index of a row, expected values of that row)
IBDEV2NETDEV = {
    "ibdev2netdev-01.txt": (16, 0, {"device": "mlx5_19", "port": 1, "netdev": "ibp75s0v7", "link_state": "Down"}),
    "ibdev2netdev-02.txt": (2, 1, {"device": "mlx5_1", "netdev": "enp2s0f1", "link_state": "Up"}),
    "ibdev2netdev-v-01.txt": (6, 2, {"device": "mlx5_2", "pci_address": "0000:02:00.5", "hca_type": "MT4116",
                                     "part_number": None, "description": None, "port_state": "DOWN",
                                     "netdev": "enp2s0f2", "link_state": "Down", "fw_ver": "12.23.1020"}),
    "ibdev2netdev-v-02.txt": (4, 3, {"device": "mlx5_3", "pci_address": "0000:c4:00.0", "part_number": "MCX653105A-HDAT",
                                     "description": "ConnectX-6 VPI adapter card, HDR IB (200Gb/s) and 200GbE, single-port QSFP56",
                                     "port_state": "ACTIVE", "netdev": "p3p1", "fw_ver": "20.28.1002"}),
    "ibdev2netdev-v-03.txt": (3, 2, {"device": "mlx5_2", "pci_address": "0005:01:00.1", "netdev": "enP5p1s0f1",
                                     "link_state": "Up", "part_number": None}),
}


def test_every_ibdev2netdev_capture_has_expectations():
    assert set(_all("ibdev2netdev-")) == set(IBDEV2NETDEV)


@pytest.mark.parametrize("capture", sorted(IBDEV2NETDEV))
def test_ibdev2netdev_capture_gives_mappings(capture):
    rows, index, expect = IBDEV2NETDEV[capture]
    parsed = rdma_tools.parse_ibdev2netdev(_read(capture))
    assert len(parsed) == rows
    for key, val in expect.items():
        assert parsed[index][key] == val, key


def test_garbage_gives_empty_results_not_exceptions():
    junk = "bash: ibstat: command not found\n\x00\xff random text: with colon\n"
    assert rdma_tools.parse_ibv_devinfo(junk)["devices"] == {}
    assert rdma_tools.parse_ibstat(junk)["devices"] == {}
    assert rdma_tools.parse_show_gids(junk)["gids"] == []
    assert rdma_tools.parse_ibdev2netdev(junk) == []
