# -*- coding: utf-8 -*-
"""The infiniband role's plan: ports and rails, SM instances and priorities, member resolution, partitions.conf,
IPoIB netdevs (children, modes, MTU limits, addresses), the NCCL_IB_PKEY index and sminfo parsing."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import ib_partitions as ibp
from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import infiniband as ib
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from tests.fixtures_path import real_fixtures


def _port(guid, netdev, state="ACTIVE", lid=5, pkeys=None, link_layer="InfiniBand"):
    indexes = dict((p, i) for i, p in enumerate(pkeys or ["0xffff"]))
    return {"link_layer": link_layer, "state": state, "lid": lid, "sm_lid": 1, "netdev": netdev,
            "port_guid": guid, "pkeys": list(indexes), "pkey_indexes": indexes}


def _rdma(*ports, provider="inbox"):
    devices = {}
    for index, port in enumerate(ports):
        devices["mlx5_%d" % index] = {"pci_address": "0000:%02x:00.0" % (0x18 + index), "ports": {"1": port}}
    return {"devices": devices, "stack": {"provider": provider}}


HOST_A = _rdma(_port("0x0c42a10300aa0101", "ibp24s0"), _port("0x0c42a10300aa0201", "ibp25s0"))
HOST_B = _rdma(_port("0x0c42a10300bb0101", "ibp24s0"), _port("0x0c42a10300bb0201", "ibp25s0"))
HOSTS = {"a": {"rdma": HOST_A, "sm": True, "sm_priority": 10}, "b": {"rdma": HOST_B, "sm": True, "sm_priority": 5}}


def _plan(**kw):
    args = dict(rdma=HOST_A, partitions=[], default_overrides={}, ipoib={}, sm=True, sm_priority=10, sm_devices=[],
                hosts=HOSTS, host_index=11)
    args.update(kw)
    return ib.plan(**args)


def test_rails_and_one_opensm_per_port():
    result = _plan()
    assert result["errors"] == []
    assert [(p["device"], p["rail"]) for p in result["ports"]] == [("mlx5_0", 0), ("mlx5_1", 1)]
    assert [(i["guid"], i["priority"]) for i in result["sm"]] == [("0x0c42a10300aa0101", 10), ("0x0c42a10300aa0201", 10)]
    assert _plan(sm_devices=["mlx5_1"])["sm"][0]["device"] == "mlx5_1"


def test_equal_priorities_on_one_subnet_are_refused_naming_both_hosts():
    hosts = {"a": dict(HOSTS["a"]), "b": dict(HOSTS["b"], sm_priority=10)}
    errors = _plan(hosts=hosts)["errors"]
    assert any("a and b run the subnet manager of subnet 0 (rail 0) with the same priority 10" in e for e in errors)
    # different rails: no conflict
    hosts["b"]["sm_devices"] = []
    hosts["a"]["sm_devices"] = ["mlx5_0"]
    hosts["b"]["sm_devices"] = ["mlx5_1"]
    assert not any("same priority" in e for e in _plan(hosts=hosts, sm_devices=["mlx5_0"])["errors"])


@pytest.mark.parametrize("priority", [16, -1, "high", True])
def test_priority_range(priority):
    assert any("infiniband_sm_priority must be an integer 0-15" in e for e in _plan(sm_priority=priority)["errors"])


def test_host_members_become_port_guids_and_the_file_parses_back():
    parts = [{"name": "compute", "pkey": "0x0002", "ipoib": True, "mtu": 4096, "rate": 400,
              "members": [{"selector": "b", "membership": "full"}, {"selector": "SELF", "membership": "full"}]}]
    result = _plan(partitions=parts)
    assert result["errors"] == []
    conf = result["partitions_conf"]
    assert "compute=0x0002,ipoib,mtu=5" in conf
    assert "0x0c42a10300bb0101=full, 0x0c42a10300bb0201=full, SELF=full" in conf
    parsed = ibp.parse_partitions(conf)
    assert [p["pkey"] for p in parsed] == [0x7FFF, 0x0002]


def test_unknown_host_is_named_with_the_hosts_of_the_play():
    parts = [{"name": "compute", "pkey": 2, "members": [{"selector": "gpu-99", "membership": "full"}]}]
    errors = _plan(partitions=parts)["errors"]
    assert errors == ["infiniband_partitions[0] (compute).members[0]: selector 'gpu-99' is not a host of the play "
                      "nor a port GUID; allowed: ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF, a port GUID (0x...), "
                      "or an inventory host (a, b)"]


def test_ipoib_children_mtu_and_pool_addresses():
    parts = [{"name": "storage", "pkey": "0x0003", "ipoib": True, "mtu": 4096, "members": [{"selector": "ALL", "membership": "full"}]}]
    ipoib = {"mode": "datagram", "pools": {"ibp24s0": "10.10.0.0/16", "ibp24s0.8003": "10.30.0.0/16"}}
    result = _plan(partitions=parts, ipoib=ipoib)
    assert result["errors"] == []
    assert result["ipoib"] == [
        {"name": "ibp24s0", "parent": None, "pkey": None, "mode": "datagram", "mtu": 2044, "address": "10.10.0.11/16",
         "partition": "Default"},
        {"name": "ibp24s0.8003", "parent": "ibp24s0", "pkey": "0x8003", "mode": "datagram", "mtu": 4092,
         "address": "10.30.0.11/16", "partition": "storage"}]


def test_ipoib_mtu_rules():
    assert ibp.ipoib_mtu_limit(4096, "datagram") == 4092 and ibp.ipoib_mtu_limit(2048, "datagram") == 2044
    assert ibp.ipoib_mtu_limit(2048, "connected") == 65520
    ok = _plan(ipoib={"mode": "connected", "mtu": 65520, "addresses": {"ibp24s0": "10.10.0.11/16"}})
    assert ok["errors"] == [] and ok["ipoib"][0]["mtu"] == 65520
    bad = _plan(ipoib={"mode": "datagram", "mtu": 4092, "addresses": {"ibp24s0": "10.10.0.11/16"}})
    assert "limit of ibp24s0: 2044 in datagram mode" in bad["errors"][0]
    raised = _plan(default_overrides={"mtu": 4096}, ipoib={"mtu": 4092, "addresses": {"ibp24s0": "10.10.0.11/16"}})
    assert raised["errors"] == [] and raised["ipoib"][0]["mtu"] == 4092


def test_connected_mode_on_enhanced_ipoib_is_refused():
    # the kernel's test: the connected-mode (RC) flag in byte 0 of the 20-byte IPoIB hardware address
    addresses = {"ibp24s0": "00:00:10:87:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:aa:01:01",
                 "ibp25s0": "80:00:10:87:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:aa:02:01"}
    enhanced = ib.enhanced_ipoib_netdevs(addresses)
    assert enhanced == ["ibp24s0"]
    errors = _plan(ipoib={"mode": "connected", "addresses": {"ibp24s0": "10.10.0.11/16"}}, enhanced_ipoib=enhanced)["errors"]
    assert "the IPoIB of ibp24s0 is enhanced IPoIB" in errors[0] and "supports datagram mode only" in errors[0]
    ok = _plan(ipoib={"mode": "connected", "addresses": {"ibp25s0": "10.10.0.11/16"}}, enhanced_ipoib=enhanced)
    assert ok["errors"] == []


@pytest.mark.parametrize("ipoib,text", [
    ({"addresses": {"ibp24s0": "10.20.0.11/16"}, "pools": {"ibp24s0": "10.10.0.0/16"}}, "outside its pool 10.10.0.0/16"),
    ({"addresses": {"ibp24s0": "10.20.0.11"}}, "has no prefix length"),
    ({"addresses": {"ibp24s0": "fe80::1/64"}}, "is not an IPv4 address/prefix"),
    ({"pools": {"ibp24s0": "10.10.0.0/29"}}, "gives no host address in pool 10.10.0.0/29"),
    ({"addresses": {"ib0": "10.10.0.1/16"}}, "ib0 is not an IPoIB netdev of this host"),
    ({"mode": "cm"}, "infiniband_ipoib.mode 'cm'; allowed: datagram, connected"),
    ({"speed": 1}, "unknown keys speed"),
])
def test_ipoib_bad_inputs(ipoib, text):
    assert any(text in e for e in _plan(ipoib=ipoib)["errors"]), _plan(ipoib=ipoib)["errors"]


def test_link_type_ports_keep_the_management_link():
    rdma = _rdma(_port("0x0c42a10300aa0101", "ibp24s0"), _port(None, "enp25s0np0", link_layer="Ethernet"),
                 _port(None, "eno1np0", link_layer="Ethernet"))
    # the Ethernet ports are not up with an address: only rdma_port_roles makes them compute (a link-type change)
    assert _plan(rdma=rdma, link_type_devices="auto", keep_netdevs=["eno1np0"])["link_type_ports"] == []
    rdma = port_roles.annotate(rdma, [{"role": "compute", "devices": ["Ethernet"]}], ["infiniband"], [])
    result = _plan(rdma=rdma, link_type_devices="auto", keep_netdevs=["eno1np0"])
    assert [p["device"] for p in result["link_type_ports"]] == ["mlx5_1"]
    assert _plan(rdma=rdma, link_type_devices=[])["link_type_ports"] == []


def test_nccl_pkey_index_from_the_table_and_disagreement():
    ports = [{"device": "mlx5_0", "port": 1, "pkey_indexes": {"0xffff": 0, "0x8002": 1}},
             {"device": "mlx5_1", "port": 1, "pkey_indexes": {"0xffff": 0, "0x8002": 1}}]
    assert ib.nccl_pkey_index(ports, 0x8002) == (1, None)
    ports[1]["pkey_indexes"] = {"0xffff": 0, "0x8002": 2}
    index, error = ib.nccl_pkey_index(ports, 0x0002)
    assert index is None and "mlx5_0:1=1, mlx5_1:1=2" in error
    ports[1]["pkey_indexes"] = {"0xffff": 0}
    assert "not in the P_Key table of mlx5_1:1" in ib.nccl_pkey_index(ports, 0x8002)[1]
    assert ib.partition_pkey([{"name": "compute", "pkey": "0x0002"}], "compute") == 0x8002
    assert ib.partition_pkey([], "Default") == 0xFFFF and ib.partition_pkey([], "x") is None


@pytest.mark.parametrize("name,expected", [
    ("sminfo-01.txt", {"lid": 37, "guid": "0x7cfe900300b196f1", "priority": 14, "state_name": "MASTER"}),
    ("sminfo-02.txt", {"lid": 2, "guid": "0x0002c902009b2b01", "priority": 0, "state_name": "MASTER"}),
    ("sminfo-03.txt", {"lid": 1, "guid": "0x0000000000100001", "priority": 14, "state_name": "MASTER"}),
])
def test_parse_sminfo_real_captures(name, expected):
    result = ib.parse_sminfo((real_fixtures() / "rdma-outputs" / name).read_text())
    assert dict((k, result[k]) for k in expected) == expected


def test_parse_sminfo_error():
    text = (real_fixtures() / "rdma-outputs" / "sminfo-04.txt").read_text()
    assert ib.parse_sminfo(text) == {"error": "sminfo: iberror: failed: query"}


def test_broad_selectors_are_written_before_the_ports_named_explicitly():
    """opensm lets a later member entry override an earlier one for the same port: a host listed full before
    ALL_CAS=limited would end up limited (seen on the simulated fabric), so ALL* come first."""
    parts = [{"name": "storage", "pkey": "0x0003", "members": [{"selector": "b", "membership": "full"},
                                                               {"selector": "ALL_CAS", "membership": "limited"}]}]
    line = [ln for ln in _plan(partitions=parts)["partitions_conf"].splitlines() if ln.startswith("storage")][0]
    assert line == "storage=0x0003 : ALL_CAS=limited, 0x0c42a10300bb0101=full, 0x0c42a10300bb0201=full ;"


def test_partitions_change_reload_for_new_p_keys_restart_for_changed_ones():
    base = "Default=0x7fff,ipoib : ALL=full ;\n"
    compute = "compute=0x0002,ipoib : ALL=full ;\n"
    assert ib.partitions_change(base, base) == "none"
    assert ib.partitions_change("# comment\n" + base, base) == "none"
    assert ib.partitions_change(base, base + compute) == "reload"
    assert ib.partitions_change(base + compute, base) == "reload"
    assert ib.partitions_change(base + compute, base + "compute=0x0002,ipoib : ALL=limited ;\n") == "restart"
    assert ib.partitions_change(None, base) == "reload"


def test_ipoib_hardware_addresses_come_from_the_facts_of_the_infiniband_ports_netdevs():
    rdma = {"devices": {"mlx5_0": {"ports": {"1": {"link_layer": "InfiniBand"}}},
                        "mlx5_1": {"ports": {"1": {"link_layer": "Ethernet"}}}},
            "netdevs": {"ibp24s0": {"rdma_device": "mlx5_0", "rdma_port": 1,
                                    "address": "00:00:10:29:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:aa:01:01"},
                        "enp25s0np0": {"rdma_device": "mlx5_1", "rdma_port": 1, "address": "0c:42:a1:aa:01:02"}}}
    addresses = ib.ipoib_hardware_addresses(rdma)
    assert addresses == {"ibp24s0": "00:00:10:29:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:aa:01:01"}
    assert ib.enhanced_ipoib_netdevs(addresses) == ["ibp24s0"]
