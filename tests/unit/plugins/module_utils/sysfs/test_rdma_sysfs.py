"""Tests of the sysfs reader behind hpcnet.rdma.rdma_facts (module_utils/sysfs/rdma_sysfs.py)."""

from __future__ import annotations

import errno
import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import rdma_sysfs
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import (
    SysfsError,
    gather_rdma_sysfs,
    gid_ipv4,
    parse_gid,
    parse_lid,
    parse_numbered_state,
    parse_rate,
    select_roce_v2_ipv4_gid_index,
)
from fixtures_path import real_fixtures

sys.path.insert(0, str(Path(__file__).parents[1] / "fixtures" / "sysfs"))
from rdma_sysfs_tree import (  # noqa: E402  pylint: disable=wrong-import-position
    ZERO_GID,
    add_hca,
    add_netdev,
    einval_reader,
    ib_port,
    ipv4_gid,
    materialise_dump,
    roce_port,
    write,
)

RDMA_OUTPUTS = real_fixtures() / "rdma-outputs"
DUMP = RDMA_OUTPUTS / "sysfs-class-infiniband-01.txt"


# ------------------------------------------------------------------------------------------------------------------
# Value parsers
# ------------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("4: ACTIVE", "ACTIVE"),
    ("1: DOWN", "DOWN"),
    ("5: ACTIVE_DEFER", "ACTIVE_DEFER"),
    ("5: LinkUp", "LinkUp"),
    ("2: Polling", "Polling"),
    ("3: Disabled", "Disabled"),
    ("7: Phy Test", "Phy Test"),
    ("0: <unknown>", "<unknown>"),
    ("1: CA", "CA"),
])
def test_numbered_state_keeps_the_name_without_the_number(text, expected):
    assert parse_numbered_state(text, "/x/state") == expected


@pytest.mark.parametrize("text", ["ACTIVE", "4:ACTIVE", "4: ", "", "x: ACTIVE", "PORT_ACTIVE (4)"])
def test_malformed_state_is_an_error_naming_the_path(text):
    with pytest.raises(SysfsError, match=r"^/sys/class/infiniband/mlx5_0/ports/1/state: expected '<number>: <name>'"):
        parse_numbered_state(text, "/sys/class/infiniband/mlx5_0/ports/1/state")


@pytest.mark.parametrize("text, rate, width, speed", [
    ("400 Gb/sec (4X NDR)", 400.0, "4X", "NDR"),
    ("200 Gb/sec (2X NDR)", 200.0, "2X", "NDR"),
    ("200 Gb/sec (4X HDR)", 200.0, "4X", "HDR"),
    ("53.125 Gb/sec (1X HDR)", 53.125, "1X", "HDR"),
    ("100 Gb/sec (4X EDR)", 100.0, "4X", "EDR"),
    ("25 Gb/sec (1X EDR)", 25.0, "1X", "EDR"),
    ("56 Gb/sec (4X FDR)", 56.0, "4X", "FDR"),
    ("40 Gb/sec (4X FDR10)", 40.0, "4X", "FDR10"),
    ("40 Gb/sec (4X QDR)", 40.0, "4X", "QDR"),
    ("20 Gb/sec (4X DDR)", 20.0, "4X", "DDR"),
    ("10 Gb/sec (1X SDR)", 10.0, "1X", "SDR"),
    ("2.5 Gb/sec (1X SDR)", 2.5, "1X", "SDR"),
    ("30 Gb/sec (12X SDR)", 30.0, "12X", "SDR"),
    ("800 Gb/sec (4X XDR)", 800.0, "4X", "XDR"),
    ("10 Gb/sec (4X)", 10.0, "4X", None),  # kernels before the SDR name was printed
])
def test_rate_splits_into_gbps_width_and_speed(text, rate, width, speed):
    assert parse_rate(text, "/r") == {"rate_gbps": rate, "width": width, "speed": speed}
    assert isinstance(parse_rate(text, "/r")["rate_gbps"], float)


@pytest.mark.parametrize("text", [
    "400 Gb/sec", "400Gb/sec (4X NDR)", "400 Gb/s (4X NDR)", "400 Gb/sec (4X ZDR)", "400 Gb/sec (3X NDR)",
    "fast", "", "400 Gb/sec (4X NDR) extra", "-400 Gb/sec (4X NDR)",
])
def test_unknown_rate_string_is_an_error_naming_the_path(text):
    path = "/sys/class/infiniband/mlx5_3/ports/1/rate"
    with pytest.raises(SysfsError) as info:
        parse_rate(text, path)
    assert info.value.path == path
    assert str(info.value).startswith(path + ": ")


@pytest.mark.parametrize("text, value", [("0x1a", 26), ("0x0", 0), ("0xffff", 65535), ("0x69a", 1690), ("0X1", None)])
def test_lid_is_hex_to_int(text, value):
    if value is None:
        with pytest.raises(SysfsError, match="hexadecimal LID"):
            parse_lid(text, "/lid")
    else:
        assert parse_lid(text, "/lid") == value


@pytest.mark.parametrize("text", ["26", "0x", "0x12345", "lid"])
def test_malformed_lid_is_an_error(text):
    with pytest.raises(SysfsError, match=r"^/p/lid: expected a hexadecimal LID"):
        parse_lid(text, "/p/lid")


def test_gid_is_returned_in_the_kernel_full_form():
    assert parse_gid("FE80:0:0:0:b859:9f03:22:626E", "/g") == "fe80:0000:0000:0000:b859:9f03:0022:626e"
    assert parse_gid("0000:0000:0000:0000:0000:ffff:0a00:000b", "/g") == "0000:0000:0000:0000:0000:ffff:0a00:000b"


@pytest.mark.parametrize("text", [
    "fe80::b859:9f03:22:626e", "fe80:0000:0000:0000:b859:9f03:0022", "zz80:0000:0000:0000:b859:9f03:0022:626e",
    "fe80:0000:0000:0000:b859:9f03:0022:626e:0000", "10.0.0.11", "",
])
def test_malformed_gid_is_an_error_naming_the_path(text):
    with pytest.raises(SysfsError, match=r"^/sys/x/gids/3: expected a GID of 8 colon-separated hex groups"):
        parse_gid(text, "/sys/x/gids/3")


@pytest.mark.parametrize("gid, ipv4", [
    ("0000:0000:0000:0000:0000:ffff:0a00:000b", "10.0.0.11"),
    ("0000:0000:0000:0000:0000:ffff:c0a8:0164", "192.168.1.100"),
    ("fe80:0000:0000:0000:0ac0:ebff:fe3d:ca54", None),
    ("2001:0db8:0000:0000:0000:0000:0000:0001", None),
    ("0000:0000:0000:0000:0000:0000:0a00:000b", None),  # IPv4-compatible, not IPv4-mapped
])
def test_ipv4_only_from_ipv4_mapped_gids(gid, ipv4):
    assert gid_ipv4(gid) == ipv4


# ------------------------------------------------------------------------------------------------------------------
# GID index selection, checked against a model of NCCL's ncclIbGetGidIndex() with default settings
# ------------------------------------------------------------------------------------------------------------------

def _entry(index, gtype, ipv4):
    gid = ipv4_gid(ipv4) if ipv4 else "fe80:0000:0000:0000:0ac0:ebff:fe3d:%04x" % index
    return {"index": index, "gid": gid, "type": gtype, "netdev": "eth0", "ipv4": ipv4}


def test_gid_index_is_the_lowest_ipv4_roce_v2_entry():
    gids = [_entry(0, "IB/RoCE v1", None), _entry(1, "RoCE v2", None), _entry(2, "IB/RoCE v1", "10.0.0.11"),
            _entry(3, "RoCE v2", "10.0.0.11"), _entry(5, "RoCE v2", "10.0.0.12")]
    assert select_roce_v2_ipv4_gid_index(gids) == 3


def test_gid_index_follows_the_v2_entry_when_it_is_not_at_3():
    gids = [_entry(0, "IB/RoCE v1", None), _entry(1, "RoCE v2", None), _entry(4, "IB/RoCE v1", "10.0.0.11"),
            _entry(7, "RoCE v2", "10.0.0.11")]
    assert select_roce_v2_ipv4_gid_index(gids) == 7


@pytest.mark.parametrize("gids", [
    [],
    [_entry(0, "IB/RoCE v1", None), _entry(1, "RoCE v2", None)],  # no IPv4 yet
    [_entry(0, "IB/RoCE v1", None), _entry(2, "IB/RoCE v1", "10.0.0.11")],  # RoCE v1 only
    [_entry(3, None, "10.0.0.11")],  # type unreadable
])
def test_gid_index_is_null_without_an_ipv4_roce_v2_entry(gids):
    assert select_roce_v2_ipv4_gid_index(gids) is None


def _nccl_default_gid_index(table):
    """Model of NCCL 2.21+ ncclIbGetGidIndex() for RoCE with NCCL_IB_ROCE_VERSION_NUM=2, AF_INET, no range.

    ``table`` is a list indexed by GID index of (family, valid, roce_version) or None for an empty slot.
    """
    def fam(i):
        return table[i][0] if table[i] else "ipv6"

    def valid(i):
        return bool(table[i]) and table[i][1]

    def ver(i):
        return table[i][2] if table[i] else -1

    chosen = 0
    for cand in range(1, len(table)):
        if fam(cand) != fam(chosen) and fam(cand) == "ipv4":
            chosen = cand
        elif fam(cand) != "ipv4" or not valid(cand):
            continue
        elif (ver(chosen) != ver(cand) or not valid(chosen)) and ver(cand) == 2:
            chosen = cand
    return chosen


_slot = st.one_of(st.none(), st.tuples(st.sampled_from(["ipv4", "ipv6"]), st.sampled_from([1, 2])))


@settings(max_examples=300, deadline=None)
@given(st.lists(_slot, min_size=1, max_size=12))
def test_gid_index_matches_what_nccl_picks_when_an_ipv4_v2_entry_exists(slots):
    table, gids = [], []
    for index, slot in enumerate(slots):
        if slot is None:
            table.append(None)
            continue
        family, version = slot
        table.append((family, True, version))
        gids.append(_entry(index, "RoCE v2" if version == 2 else "IB/RoCE v1", "10.0.0.%d" % (11 + index) if family == "ipv4" else None))
    ours = select_roce_v2_ipv4_gid_index(gids)
    has_ipv4_v2 = any(s == ("ipv4", 2) for s in slots)
    if has_ipv4_v2:
        assert ours == _nccl_default_gid_index(table)
    else:
        assert ours is None


# ------------------------------------------------------------------------------------------------------------------
# The real dump (tests/fixtures/real/rdma-outputs/sysfs-class-infiniband-01.txt)
# ------------------------------------------------------------------------------------------------------------------

@pytest.fixture(name="dump_root")
def fixture_dump_root(tmp_path):
    count = materialise_dump(DUMP.read_text(encoding="utf-8"), tmp_path)
    assert count > 100
    return tmp_path


def test_real_dump_gives_both_devices_with_their_attributes(dump_root):
    facts = gather_rdma_sysfs(str(dump_root))
    assert sorted(facts["devices"]) == ["mlx5_0", "mlx5_bond_0"]
    ib = facts["devices"]["mlx5_0"]
    assert (ib["fw_ver"], ib["board_id"], ib["hca_type"]) == ("28.41.1000", "MT_0000000838", "MT4129")
    bond = facts["devices"]["mlx5_bond_0"]
    assert (bond["fw_ver"], bond["board_id"], bond["hca_type"]) == ("32.38.3056", "MT_0000000884", "MT41692")


def test_real_dump_ports_parse_state_rate_and_link_layer(dump_root):
    devices = gather_rdma_sysfs(str(dump_root))["devices"]
    ib = devices["mlx5_0"]["ports"]["1"]
    assert ib["state"] == "ACTIVE" and ib["phys_state"] == "LinkUp" and ib["link_layer"] == "InfiniBand"
    assert (ib["rate_gbps"], ib["width"], ib["speed"]) == (400.0, "4X", "NDR")
    roce = devices["mlx5_bond_0"]["ports"]["1"]
    assert roce["link_layer"] == "Ethernet"
    assert (roce["rate_gbps"], roce["width"], roce["speed"]) == (200.0, "2X", "NDR")
    assert list(devices["mlx5_0"]["ports"]) == ["1"]


def test_real_dump_missing_attributes_read_as_null_or_empty(dump_root):
    facts = gather_rdma_sysfs(str(dump_root))
    for device in facts["devices"].values():
        assert device["node_guid"] is None and device["sys_image_guid"] is None and device["node_type"] is None
        assert device["pci_address"] is None and device["netdevs"] == []
        port = device["ports"]["1"]
        assert port["gids"] == [] and port["roce_v2_ipv4_gid_index"] is None and port["netdev"] is None
        assert port["lid"] is None and port["sm_lid"] is None
        assert "counters" not in port
    assert facts["netdevs"] == {}


def test_real_dump_counters_only_when_asked(dump_root):
    facts = gather_rdma_sysfs(str(dump_root), gather_counters=True)
    port = facts["devices"]["mlx5_0"]["ports"]["1"]
    assert port["counters"]["port_rcv_data"] == 230539874932483
    assert port["counters"]["excessive_buffer_overrun_errors"] == 15
    assert port["hw_counters"]["rx_write_requests"] == 3809045607
    assert port["hw_counters"]["roce_adp_retrans"] == 3
    text = DUMP.read_text(encoding="utf-8")
    assert len(port["counters"]) == text.count("mlx5_0/ports/1/counters/") == 21
    assert len(port["hw_counters"]) == text.count("mlx5_0/ports/1/hw_counters/") == 26
    assert all(isinstance(v, int) for v in port["hw_counters"].values())


# ------------------------------------------------------------------------------------------------------------------
# Hand-built trees, laid out like a real mlx5 device
# ------------------------------------------------------------------------------------------------------------------

IPOIB_ADDR = "00:00:10:29:fe:80:00:00:00:00:00:00:b8:59:9f:03:00:22:62:6e"


def _ib_host(root):
    add_hca(root, "mlx5_0", pci="0000:1a:00.0", ports={1: ib_port(lid="0x69a", sm_lid="0x1")},
            netdevs={"ibp26s0": {"mtu": 4092, "address": IPOIB_ADDR, "ifindex": 4, "iflink": 4},
                     "ibp26s0.8001": {"mtu": 4092, "address": IPOIB_ADDR, "ifindex": 9, "iflink": 4}})


def _roce_host(root, v2_index=3):
    add_hca(root, "mlx5_0", pci="0000:0c:00.0", ports={1: roce_port("ens1np0", ipv4="10.0.0.11", v2_ipv4_index=v2_index)},
            netdevs={"ens1np0": {"mtu": 9000, "address": "08:c0:eb:3d:ca:54"}})


def test_ib_port_has_lids_gid_and_ipoib_netdev(tmp_path):
    _ib_host(tmp_path)
    facts = gather_rdma_sysfs(str(tmp_path))
    dev = facts["devices"]["mlx5_0"]
    assert dev["pci_address"] == "0000:1a:00.0"
    assert dev["node_guid"] == "b859:9f03:0022:626e" and dev["node_type"] == "CA"
    assert dev["netdevs"] == ["ibp26s0", "ibp26s0.8001"]
    port = dev["ports"]["1"]
    assert (port["lid"], port["sm_lid"]) == (1690, 1)
    assert port["netdev"] == "ibp26s0"  # the parent, not the P_Key child interface
    assert port["gids"] == [{"index": 0, "gid": "fe80:0000:0000:0000:b859:9f03:0022:626e", "type": "IB/RoCE v1",
                             "netdev": None, "ipv4": None}]
    assert port["roce_v2_ipv4_gid_index"] is None
    assert port["pkeys"] == ["0xffff"]
    assert facts["netdevs"]["ibp26s0"] == {"mtu": 4092, "operstate": "up", "carrier": True, "speed_mbps": 400000,
                                           "address": IPOIB_ADDR, "ecn": None, "rdma_device": "mlx5_0", "rdma_port": 1}
    assert facts["netdevs"]["ibp26s0.8001"]["rdma_device"] == "mlx5_0"


@pytest.mark.parametrize("v2_index", [3, 5, 2])
def test_roce_port_reports_gids_and_the_ipv4_v2_index(tmp_path, v2_index):
    _roce_host(tmp_path, v2_index)
    port = gather_rdma_sysfs(str(tmp_path))["devices"]["mlx5_0"]["ports"]["1"]
    assert port["link_layer"] == "Ethernet"
    assert port["lid"] is None and port["sm_lid"] is None
    assert port["netdev"] == "ens1np0"
    assert port["roce_v2_ipv4_gid_index"] == v2_index
    by_index = {g["index"]: g for g in port["gids"]}
    assert by_index[v2_index] == {"index": v2_index, "gid": "0000:0000:0000:0000:0000:ffff:0a00:000b", "type": "RoCE v2",
                                  "netdev": "ens1np0", "ipv4": "10.0.0.11"}
    assert by_index[0]["type"] == "IB/RoCE v1" and by_index[1]["type"] == "RoCE v2" and by_index[1]["ipv4"] is None
    assert all(g["gid"] != ZERO_GID for g in port["gids"])
    assert [g["index"] for g in port["gids"]] == sorted(by_index)


def test_roce_port_without_ipv4_has_no_gid_index(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: roce_port("ens1np0")}, netdevs={"ens1np0": {}})
    port = gather_rdma_sysfs(str(tmp_path))["devices"]["mlx5_0"]["ports"]["1"]
    assert [g["type"] for g in port["gids"]] == ["IB/RoCE v1", "RoCE v2"]
    assert port["roce_v2_ipv4_gid_index"] is None


def test_bond_device_port_netdev_is_the_gid_netdev(tmp_path):
    spec = roce_port("bond0", ipv4="10.0.0.12")
    add_hca(tmp_path, "mlx5_bond_0", pci="0000:3b:00.0", ports={1: spec},
            netdevs={"ens3f0np0": {"dev_port": 0}})
    add_netdev(tmp_path, tmp_path / "devices" / "virtual", "bond0", mtu=9000)
    facts = gather_rdma_sysfs(str(tmp_path))
    assert facts["devices"]["mlx5_bond_0"]["ports"]["1"]["netdev"] == "bond0"
    assert facts["netdevs"]["bond0"]["rdma_device"] == "mlx5_bond_0" and facts["netdevs"]["bond0"]["rdma_port"] == 1
    assert facts["netdevs"]["bond0"]["mtu"] == 9000
    assert facts["netdevs"]["ens3f0np0"]["rdma_device"] == "mlx5_bond_0"


def test_two_port_ib_card_maps_netdevs_by_dev_port(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: ib_port(lid="0x2"), 2: ib_port(lid="0x3", state="1: DOWN", phys_state="2: Polling")},
            netdevs={"ib0": {"dev_port": 0}, "ib1": {"dev_port": 1, "operstate": "down", "carrier": None, "speed": None}})
    facts = gather_rdma_sysfs(str(tmp_path))
    ports = facts["devices"]["mlx5_0"]["ports"]
    assert (ports["1"]["netdev"], ports["2"]["netdev"]) == ("ib0", "ib1")
    assert (ports["2"]["state"], ports["2"]["phys_state"]) == ("DOWN", "Polling")
    assert facts["netdevs"]["ib1"]["rdma_port"] == 2
    assert facts["netdevs"]["ib1"]["speed_mbps"] is None and facts["netdevs"]["ib1"]["carrier"] is None


def test_dev_id_is_used_when_dev_port_is_missing(tmp_path):
    add_hca(tmp_path, "mlx4_0", ports={1: ib_port(), 2: ib_port()},
            netdevs={"ib0": {"dev_port": None, "extra": {"dev_id": "0x0"}}, "ib1": {"dev_port": None, "extra": {"dev_id": "0x1"}}})
    ports = gather_rdma_sysfs(str(tmp_path))["devices"]["mlx4_0"]["ports"]
    assert (ports["1"]["netdev"], ports["2"]["netdev"]) == ("ib0", "ib1")


def test_port_without_matching_netdev_has_null_netdev(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: ib_port()}, netdevs={"ib9": {"dev_port": 4}})
    facts = gather_rdma_sysfs(str(tmp_path))
    assert facts["devices"]["mlx5_0"]["ports"]["1"]["netdev"] is None
    assert facts["netdevs"]["ib9"]["rdma_port"] is None


@pytest.mark.parametrize("speed, expected", [("-1", None), ("4294967295", None), ("100000", 100000), (None, None)])
def test_netdev_speed_unknown_is_null(tmp_path, speed, expected):
    add_hca(tmp_path, "mlx5_0", ports={1: roce_port("eth0")}, netdevs={"eth0": {"speed": speed}})
    assert gather_rdma_sysfs(str(tmp_path))["netdevs"]["eth0"]["speed_mbps"] == expected


def test_netdev_speed_einval_is_null(tmp_path, monkeypatch):
    add_hca(tmp_path, "mlx5_0", ports={1: roce_port("eth0")}, netdevs={"eth0": {"speed": "25000"}})
    refused = [tmp_path / "class" / "net" / "eth0" / "speed"]
    monkeypatch.setattr(rdma_sysfs, "_read_file", einval_reader(rdma_sysfs._read_file, refused))
    assert gather_rdma_sysfs(str(tmp_path))["netdevs"]["eth0"]["speed_mbps"] is None


def test_malformed_mtu_is_an_error_naming_the_path(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: roce_port("eth0")}, netdevs={"eth0": {"mtu": "jumbo"}})
    with pytest.raises(SysfsError, match=r"class/net/eth0/mtu: expected an MTU in bytes, got 'jumbo'"):
        gather_rdma_sysfs(str(tmp_path))


def test_all_netdevs_adds_others_with_null_rdma_device(tmp_path):
    _ib_host(tmp_path)
    add_netdev(tmp_path, tmp_path / "devices" / "virtual", "eth0", mtu=1500)
    add_netdev(tmp_path, tmp_path / "devices" / "virtual", "lo", mtu=65536)
    assert "eth0" not in gather_rdma_sysfs(str(tmp_path))["netdevs"]
    netdevs = gather_rdma_sysfs(str(tmp_path), gather_all_netdevs=True)["netdevs"]
    assert netdevs["eth0"]["rdma_device"] is None and netdevs["eth0"]["mtu"] == 1500
    assert "lo" not in netdevs and netdevs["ibp26s0"]["rdma_device"] == "mlx5_0"


def test_devices_and_ports_sort_naturally(tmp_path):
    for index in (10, 2, 1):
        add_hca(tmp_path, "mlx5_%d" % index, pci="0000:%02x:00.0" % index, ports={1: ib_port()})
    assert list(gather_rdma_sysfs(str(tmp_path))["devices"]) == ["mlx5_1", "mlx5_2", "mlx5_10"]


def test_absolute_sys_links_are_rerooted(tmp_path):
    _ib_host(tmp_path)
    link = tmp_path / "class" / "infiniband" / "mlx5_0" / "device"
    link.unlink()
    os.symlink("/sys/devices/pci0000:00/0000:1a:00.0", link)
    dev = gather_rdma_sysfs(str(tmp_path))["devices"]["mlx5_0"]
    assert dev["pci_address"] == "0000:1a:00.0" and dev["netdevs"] == ["ibp26s0", "ibp26s0.8001"]


# ------------------------------------------------------------------------------------------------------------------
# EINVAL and malformed values
# ------------------------------------------------------------------------------------------------------------------

def test_einval_on_gid_attrs_reads_as_no_attribute(tmp_path, monkeypatch):
    _roce_host(tmp_path)
    pdir = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    refused = [pdir / "gid_attrs" / "types" / "2", pdir / "gid_attrs" / "ndevs" / "2", pdir / "gid_attrs" / "ndevs" / "0"]
    monkeypatch.setattr(rdma_sysfs, "_read_file", einval_reader(rdma_sysfs._read_file, refused))
    port = gather_rdma_sysfs(str(tmp_path))["devices"]["mlx5_0"]["ports"]["1"]
    by_index = {g["index"]: g for g in port["gids"]}
    assert by_index[2]["type"] is None and by_index[2]["netdev"] is None and by_index[2]["ipv4"] == "10.0.0.11"
    assert by_index[0]["netdev"] is None
    assert port["netdev"] == "ens1np0"  # taken from the next GID that has a netdev
    assert port["roce_v2_ipv4_gid_index"] == 3


def test_einval_on_ib_gid_ndev_matches_the_kernel(tmp_path, monkeypatch):
    add_hca(tmp_path, "mlx5_0", ports={1: ib_port()})
    pdir = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    write(pdir, "gid_attrs/ndevs/0", "")
    monkeypatch.setattr(rdma_sysfs, "_read_file", einval_reader(rdma_sysfs._read_file, [pdir / "gid_attrs" / "ndevs" / "0"]))
    gids = gather_rdma_sysfs(str(tmp_path))["devices"]["mlx5_0"]["ports"]["1"]["gids"]
    assert gids[0]["netdev"] is None and gids[0]["type"] == "IB/RoCE v1"


def test_other_read_errors_fail_naming_the_path(tmp_path, monkeypatch):
    _roce_host(tmp_path)
    target = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "gids" / "3"
    real = rdma_sysfs._read_file

    def read(path):
        if str(path) == str(target):
            raise OSError(errno.EIO, "Input/output error", str(path))
        return real(path)

    monkeypatch.setattr(rdma_sysfs, "_read_file", read)
    with pytest.raises(SysfsError, match=re.escape(str(target)) + ": cannot be read: Input/output error"):
        gather_rdma_sysfs(str(tmp_path))


def test_malformed_gid_in_tree_is_an_error_naming_the_path(tmp_path):
    _roce_host(tmp_path)
    gid_file = write(tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1", "gids/2", "not-a-gid")
    with pytest.raises(SysfsError) as info:
        gather_rdma_sysfs(str(tmp_path))
    assert info.value.path == str(gid_file)
    assert "not-a-gid" in str(info.value)


def test_bad_rate_in_tree_is_an_error_naming_the_path(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: ib_port(rate="400 Gbit/s")})
    with pytest.raises(SysfsError, match=r"mlx5_0/ports/1/rate: expected '<Gb/s> Gb/sec \(<width> <speed>\)'"):
        gather_rdma_sysfs(str(tmp_path))


def test_malformed_lid_in_tree_is_an_error(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: ib_port(lid="1690")})
    with pytest.raises(SysfsError, match=r"mlx5_0/ports/1/lid: expected a hexadecimal LID"):
        gather_rdma_sysfs(str(tmp_path))


def test_ethernet_port_ignores_lid_files(tmp_path):
    spec = roce_port("eth0")
    spec["lid"] = "garbage"
    add_hca(tmp_path, "mlx5_0", ports={1: spec}, netdevs={"eth0": {}})
    assert gather_rdma_sysfs(str(tmp_path))["devices"]["mlx5_0"]["ports"]["1"]["lid"] is None


def test_missing_root_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(SysfsError) as info:
        gather_rdma_sysfs(str(missing))
    assert info.value.path == str(missing)
    assert "sysfs_root does not exist" in str(info.value)


def test_root_without_class_is_an_error(tmp_path):
    (tmp_path / "devices").mkdir()
    with pytest.raises(SysfsError, match=r"/class: missing: sysfs_root .* is not a sysfs tree"):
        gather_rdma_sysfs(str(tmp_path))


@pytest.mark.parametrize("make_empty_infiniband", [False, True])
def test_host_without_rdma_devices_gets_empty_facts(tmp_path, make_empty_infiniband):
    (tmp_path / "class" / "net").mkdir(parents=True)
    if make_empty_infiniband:
        (tmp_path / "class" / "infiniband").mkdir()
    facts = gather_rdma_sysfs(str(tmp_path))
    assert facts["devices"] == {} and facts["netdevs"] == {}
    assert set(facts["kernel_modules"]) >= {"mlx5_core", "ib_core", "nvidia_peermem"}


# ------------------------------------------------------------------------------------------------------------------
# Extras: P_Keys, kernel modules, QoS state (ECN, traffic class, RDMA-CM configfs), counters
# ------------------------------------------------------------------------------------------------------------------

def test_pkeys_are_non_zero_hex_in_table_order(tmp_path):
    spec = ib_port()
    spec["pkeys"] = {0: "0xffff", 1: "0x0000", 2: "0x8001", 10: "0x7fff"}
    add_hca(tmp_path, "mlx5_0", ports={1: spec})
    assert gather_rdma_sysfs(str(tmp_path))["devices"]["mlx5_0"]["ports"]["1"]["pkeys"] == ["0xffff", "0x8001", "0x7fff"]


def test_kernel_modules_from_module_directories(tmp_path):
    _ib_host(tmp_path)
    for name in ("mlx5_core", "mlx5_ib", "ib_core", "ib_ipoib"):
        (tmp_path / "module" / name).mkdir(parents=True)
    modules = gather_rdma_sysfs(str(tmp_path))["kernel_modules"]
    assert modules["mlx5_core"] and modules["ib_ipoib"] and not modules["nvidia_peermem"] and not modules["rdma_ucm"]


def _materialise_ecn_capture(root):
    """Write the sysfs files quoted in ecn-sysfs-01.txt (``<path> = <value>``) under ``root``."""
    count = 0
    for line in (RDMA_OUTPUTS / "ecn-sysfs-01.txt").read_text(encoding="utf-8").splitlines():
        match = re.search(r"(/sys/\S+) = (.*)$", line)
        if match:
            write(root, match.group(1)[len("/sys/"):], match.group(2).strip())
            count += 1
    return count


def test_ecn_and_traffic_class_from_the_real_capture(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: roce_port("eth0", ipv4="10.0.0.11")}, netdevs={"eth0": {}})
    assert _materialise_ecn_capture(tmp_path) == 18
    facts = gather_rdma_sysfs(str(tmp_path))
    assert facts["netdevs"]["eth0"]["ecn"] == {"roce_np_enabled": list(range(8)), "roce_rp_enabled": list(range(8)),
                                               "cnp_dscp": 48, "cnp_802p_prio": None}
    assert facts["devices"]["mlx5_0"]["ports"]["1"]["traffic_class"] == 160


def test_ecn_lists_only_enabled_priorities(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: roce_port("eth0")}, netdevs={"eth0": {}})
    ecn = tmp_path / "class" / "net" / "eth0" / "ecn"
    for prio in range(8):
        write(ecn, "roce_np/enable/%d" % prio, "1" if prio == 3 else "0")
        write(ecn, "roce_rp/enable/%d" % prio, "1" if prio in (3, 4) else "0")
    write(ecn, "roce_np/cnp_dscp", "48")
    write(ecn, "roce_np/cnp_802p_prio", "6")
    assert gather_rdma_sysfs(str(tmp_path))["netdevs"]["eth0"]["ecn"] == {
        "roce_np_enabled": [3], "roce_rp_enabled": [3, 4], "cnp_dscp": 48, "cnp_802p_prio": 6}


def test_traffic_class_without_tclass_is_null(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: roce_port("eth0")}, netdevs={"eth0": {}})
    write(tmp_path / "class" / "infiniband" / "mlx5_0", "tc/1/traffic_class", "")
    assert gather_rdma_sysfs(str(tmp_path))["devices"]["mlx5_0"]["ports"]["1"]["traffic_class"] is None


def test_rdma_cm_defaults_from_configfs(tmp_path):
    add_hca(tmp_path, "mlx5_0", ports={1: roce_port("eth0"), 2: roce_port("eth1")}, netdevs={"eth0": {}})
    cm = tmp_path / "kernel" / "config" / "rdma_cm" / "mlx5_0" / "ports" / "1"
    write(cm, "default_roce_mode", "RoCE v2")
    write(cm, "default_roce_tos", "106")
    ports = gather_rdma_sysfs(str(tmp_path))["devices"]["mlx5_0"]["ports"]
    assert ports["1"]["rdma_cm"] == {"default_roce_mode": "RoCE v2", "default_roce_tos": 106}
    assert ports["2"]["rdma_cm"] is None


def test_unreadable_counters_are_skipped(tmp_path, monkeypatch):
    spec = ib_port()
    spec["counters"] = {"port_rcv_data": "12", "symbol_error": "0"}
    spec["hw_counters"] = {"out_of_buffer": "3", "weird": "n/a"}
    add_hca(tmp_path, "mlx5_0", ports={1: spec})
    bad = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters" / "symbol_error"
    monkeypatch.setattr(rdma_sysfs, "_read_file", einval_reader(rdma_sysfs._read_file, [bad]))
    port = gather_rdma_sysfs(str(tmp_path), gather_counters=True)["devices"]["mlx5_0"]["ports"]["1"]
    assert port["counters"] == {"port_rcv_data": 12}
    assert port["hw_counters"] == {"out_of_buffer": 3}


# ------------------------------------------------------------------------------------------------------------------
# Trees of every simulated host profile (tests/simhost), checked against the expanded profile
# ------------------------------------------------------------------------------------------------------------------

import simhost  # noqa: E402  pylint: disable=wrong-import-position  (tests/simhost, on sys.path via conftest)

PROFILES = simhost.list_profiles()
REQUIRED_PROFILES = {"cx7_ib_ndr_8x", "cx7_roce_400g_2x", "mixed_ib_roce_down", "no_rdma"}


def _build(profile, tmp_path, host_index=0):
    root = tmp_path / "sys"
    expanded = simhost.build_tree(simhost.load(profile), root, host_index=host_index)
    return str(root), expanded


def _guid(hex16):
    return ":".join(hex16[i:i + 4] for i in range(0, 16, 4))


def test_the_required_profiles_exist():
    assert REQUIRED_PROFILES <= set(PROFILES)


@pytest.mark.parametrize("host_index", [0, 3])
@pytest.mark.parametrize("profile", PROFILES)
def test_profile_tree_facts_match_the_profile(profile, host_index, tmp_path):
    root, exp = _build(profile, tmp_path, host_index)
    facts = gather_rdma_sysfs(root)
    assert sorted(facts["devices"]) == sorted(d["name"] for d in exp["devices"])
    for dev in exp["devices"]:
        got = facts["devices"][dev["name"]]
        assert (got["fw_ver"], got["board_id"], got["hca_type"]) == (dev["fw_ver"], dev["board_id"], dev["hca_type"])
        assert got["node_guid"] == _guid(dev["node_guid"]) and got["sys_image_guid"] == _guid(dev["sys_image_guid"])
        assert got["node_type"] == "CA" and got["pci_address"] == dev["pci"]
        assert sorted(got["ports"]) == sorted(str(p["port"]) for p in dev["ports"])
        for port in dev["ports"]:
            gp = got["ports"][str(port["port"])]
            rate = parse_rate(port["rate"], "profile")
            assert (gp["state"], gp["phys_state"], gp["link_layer"]) == (port["state"], port["phys_state"], port["link_layer"])
            assert (gp["rate_gbps"], gp["width"], gp["speed"]) == (rate["rate_gbps"], rate["width"], rate["speed"])
            assert gp["netdev"] == port["netdev"]
            expected_gids = {int(i): g for i, g in port["gids"].items() if g["gid"] != ZERO_GID}
            assert [g["index"] for g in gp["gids"]] == sorted(expected_gids)
            for entry in gp["gids"]:
                want = expected_gids[entry["index"]]
                assert (entry["gid"], entry["type"], entry["netdev"]) == (want["gid"], want["type"], want["ndev"])
            if port["link_layer"] == "InfiniBand":
                assert (gp["lid"], gp["sm_lid"]) == (port["lid"], port["sm_lid"])
                assert gp["roce_v2_ipv4_gid_index"] is None
            else:
                assert gp["lid"] is None and gp["sm_lid"] is None
                v2_ipv4 = sorted(i for i, g in expected_gids.items() if g["type"] == "RoCE v2" and gid_ipv4(g["gid"]))
                assert gp["roce_v2_ipv4_gid_index"] == (v2_ipv4[0] if v2_ipv4 else None)
                if port.get("ipv4"):
                    assert any(g["ipv4"] == port["ipv4"].split("/")[0] for g in gp["gids"])
            nd = facts["netdevs"][port["netdev"]]
            assert (nd["rdma_device"], nd["rdma_port"], nd["mtu"]) == (dev["name"], port["port"], port["mtu"])
    for name, mod_loaded in facts["kernel_modules"].items():
        assert mod_loaded == (name in exp["kernel_modules"])


def test_ib_8x_profile_has_eight_active_ndr_ports_with_distinct_lids(tmp_path):
    root, _exp = _build("cx7_ib_ndr_8x", tmp_path)
    devices = gather_rdma_sysfs(root)["devices"]
    assert len(devices) == 8
    ports = [d["ports"]["1"] for d in devices.values()]
    assert all(p["state"] == "ACTIVE" and p["link_layer"] == "InfiniBand" and p["rate_gbps"] == 400.0 and p["speed"] == "NDR" for p in ports)
    assert len({p["lid"] for p in ports}) == 8 and all(p["sm_lid"] for p in ports)
    assert all(p["netdev"].startswith("ibp") for p in ports)


def test_roce_profile_gid_index_is_3_and_the_ipv6_profile_moves_it_to_5(tmp_path):
    root, _exp = _build("cx7_roce_400g_2x", tmp_path / "a")
    assert {d["ports"]["1"]["roce_v2_ipv4_gid_index"] for d in gather_rdma_sysfs(root)["devices"].values()} == {3}
    root, _exp = _build("cx7_roce_400g_2x_ipv6", tmp_path / "b")
    assert {d["ports"]["1"]["roce_v2_ipv4_gid_index"] for d in gather_rdma_sysfs(root)["devices"].values()} == {5}


def test_mixed_profile_reports_the_down_port(tmp_path):
    root, _exp = _build("mixed_ib_roce_down", tmp_path)
    facts = gather_rdma_sysfs(root)
    states = {name: (d["ports"]["1"]["state"], d["ports"]["1"]["phys_state"], d["ports"]["1"]["link_layer"]) for name, d in facts["devices"].items()}
    assert sorted(states.values()) == [("ACTIVE", "LinkUp", "Ethernet"), ("ACTIVE", "LinkUp", "InfiniBand"), ("DOWN", "Polling", "InfiniBand")]
    down = [d for d in facts["devices"].values() if d["ports"]["1"]["state"] == "DOWN"][0]
    assert facts["netdevs"][down["ports"]["1"]["netdev"]]["speed_mbps"] is None


def test_no_rdma_profile_gives_empty_facts(tmp_path):
    root, _exp = _build("no_rdma", tmp_path)
    facts = gather_rdma_sysfs(root)
    assert facts["devices"] == {} and facts["netdevs"] == {}
    assert gather_rdma_sysfs(root, gather_all_netdevs=True)["netdevs"]["eth0"]["rdma_device"] is None


def test_profile_tree_counters_are_integers(tmp_path):
    root, _exp = _build("mixed_ib_roce_down", tmp_path)
    for device in gather_rdma_sysfs(root, gather_counters=True)["devices"].values():
        port = device["ports"]["1"]
        assert port["counters"] and all(isinstance(v, int) for v in port["counters"].values())
        assert all(isinstance(v, int) for v in port["hw_counters"].values())


def test_traffic_class_with_only_match_rules_has_no_global_class():
    from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import parse_traffic_class
    assert parse_traffic_class("dst_ip=10.0.0.0/24,tclass=96\n") is None
    assert parse_traffic_class("Global tclass=106\ndst_ip=10.0.0.0/24,tclass=96\n") == 106
