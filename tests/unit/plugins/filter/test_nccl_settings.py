"""The nccl_settings filter derives nccl.conf from ansible_facts.rdma."""

from __future__ import annotations

import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpcnet.rdma.plugins.filter.nccl_settings import nccl_settings
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles


def _port(link_layer, state="ACTIVE", gid_index=None, rate=400.0):
    return {"link_layer": link_layer, "state": state, "rate_gbps": rate, "roce_v2_ipv4_gid_index": gid_index}


def _facts(ports_by_device, pci=None):
    """``pci`` maps a device to its PCI address (the rails follow PCI order)."""
    return {"devices": {dev: {"pci_address": (pci or {}).get(dev), "ports": {str(n): p for n, p in ports.items()}}
                        for dev, ports in ports_by_device.items()}}


IB_12 = _facts({"mlx5_%d" % i: {1: _port("InfiniBand")} for i in range(12)},
               dict(("mlx5_%d" % i, "0000:%02x:00.0" % (0x10 + i)) for i in range(12)))


# Adjusted for issue 23: NCCL_IB_HCA follows the rails (PCI order), no longer the names' natural order; these cards'
# PCI order is their names' order.
def test_infiniband_lists_active_ports_in_rail_order_with_exact_match():
    plan = nccl_settings(IB_12, "infiniband", "eth0")
    assert plan["settings"]["NCCL_IB_HCA"] == "=" + ",".join("mlx5_%d:1" % i for i in range(12))
    assert "NCCL_IB_GID_INDEX" not in plan["settings"]
    assert list(plan["settings"]) == ["NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"]


def test_prefix_match_when_exact_is_off():
    plan = nccl_settings(_facts({"mlx5_0": {1: _port("InfiniBand")}}), "infiniband", "ib0", hca_exact=False)
    assert plan["settings"]["NCCL_IB_HCA"] == "mlx5_0:1"


def test_down_ports_and_other_link_layers_are_skipped_with_reasons():
    facts = _facts({
        "mlx5_0": {1: _port("InfiniBand")},
        "mlx5_1": {1: _port("InfiniBand", state="DOWN")},
        "mlx5_2": {1: _port("Ethernet", gid_index=3)},
    })
    plan = nccl_settings(facts, "infiniband", "eth0")
    assert plan["settings"]["NCCL_IB_HCA"] == "=mlx5_0:1"
    # mlx5_2 (Ethernet, no address in its GIDs) is not up on the other fabric: its role is unused, not a rail
    assert {(s["device"], s["reason"]) for s in plan["skipped"]} == {("mlx5_1", "state DOWN"), ("mlx5_2", "role unused")}


def test_roce_takes_the_ports_roce_v2_ipv4_gid_index():
    facts = _facts({"mlx5_0": {1: _port("Ethernet", gid_index=5)}, "mlx5_1": {1: _port("Ethernet", gid_index=5)}})
    plan = nccl_settings(facts, "roce", "eth0", traffic_class=106)
    assert plan["settings"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_IB_GID_INDEX": 5, "NCCL_IB_TC": 106, "NCCL_SOCKET_IFNAME": "eth0"}
    assert plan["fabric"] == "roce"


def test_roce_port_without_ipv4_v2_gid_is_skipped():
    facts = _facts({"mlx5_0": {1: _port("Ethernet", gid_index=3)}, "mlx5_1": {1: _port("Ethernet", gid_index=None)}})
    plan = nccl_settings(facts, "roce", "eth0")
    assert plan["settings"]["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert plan["skipped"] == [{"device": "mlx5_1", "port": 1, "reason": "no RoCE v2 GID with an IPv4 address"}]


def test_roce_ports_that_disagree_on_gid_index_are_an_error_naming_both():
    facts = _facts({"mlx5_0": {1: _port("Ethernet", gid_index=3)}, "mlx5_1": {1: _port("Ethernet", gid_index=5)}})
    with pytest.raises(AnsibleFilterError, match=r"mlx5_0:1=3, mlx5_1:1=5"):
        nccl_settings(facts, "roce", "eth0")


def test_auto_prefers_infiniband_then_roce():
    mixed = _facts({"mlx5_0": {1: _port("InfiniBand")}, "mlx5_1": {1: _port("Ethernet", gid_index=3)}})
    assert nccl_settings(mixed, "auto", "eth0")["fabric"] == "infiniband"
    roce = _facts({"mlx5_1": {1: _port("Ethernet", gid_index=3)}})
    assert nccl_settings(roce, "auto", "eth0")["fabric"] == "roce"


def test_no_rdma_device_gives_socket_only_settings():
    plan = nccl_settings({"devices": {}}, "auto", "eth0")
    assert plan == {"fabric": None, "ports": [], "skipped": [], "settings": {"NCCL_SOCKET_IFNAME": "eth0"}, "errors": []}


def test_traffic_class_is_written_only_when_set():
    assert "NCCL_IB_TC" not in nccl_settings(IB_12, "infiniband", "eth0", traffic_class=None)["settings"]
    assert nccl_settings(IB_12, "infiniband", "eth0", traffic_class=0)["settings"]["NCCL_IB_TC"] == 0


@pytest.mark.parametrize("value", [256, -1, "high"])
def test_bad_traffic_class_names_the_field_and_range(value):
    with pytest.raises(AnsibleFilterError, match=r"nccl_ib_traffic_class must be an integer 0-255 .*; got %r$" % (value,)):
        nccl_settings(IB_12, "infiniband", "eth0", traffic_class=value)


def test_bad_fabric_lists_allowed_values():
    with pytest.raises(AnsibleFilterError, match=r"allowed values: auto, infiniband, roce"):
        nccl_settings(IB_12, "ethernet", "eth0")


def test_empty_socket_ifname_is_an_error():
    with pytest.raises(AnsibleFilterError, match=r"nccl_socket_ifname"):
        nccl_settings(IB_12, "infiniband", "")


@pytest.mark.parametrize("extra, message", [
    ({"FOO": 1}, "not an NCCL variable"),
    ({"NCCL_IB_HCA": "mlx5_0"}, "computed from facts"),
])
def test_extra_settings_are_validated(extra, message):
    with pytest.raises(AnsibleFilterError, match=message):
        nccl_settings(IB_12, "infiniband", "eth0", extra=extra)


def test_extra_settings_follow_computed_ones_sorted():
    plan = nccl_settings(IB_12, "infiniband", "eth0", extra={"NCCL_IB_QPS_PER_CONNECTION": 4, "NCCL_DEBUG": "WARN"})
    assert list(plan["settings"])[-2:] == ["NCCL_DEBUG", "NCCL_IB_QPS_PER_CONNECTION"]


def test_input_that_is_not_rdma_facts_is_rejected():
    with pytest.raises(AnsibleFilterError, match="ansible_facts.rdma"):
        nccl_settings({"foo": 1}, "auto", "eth0")


@pytest.mark.parametrize("value", ["INFO\nNCCL_IB_HCA=mlx5_9:1", "a#b", "", [1, 2], None, {"a": 1}])
def test_extra_values_must_be_one_line_scalars(value):
    with pytest.raises(AnsibleFilterError, match=r"nccl_extra_settings NCCL_DEBUG must be a string, number or boolean on one line"):
        nccl_settings(IB_12, "infiniband", "eth0", extra={"NCCL_DEBUG": value})


def test_extra_booleans_are_written_the_way_nccl_reads_them():
    plan = nccl_settings(IB_12, "infiniband", "eth0", extra={"NCCL_IB_DISABLE": True, "NCCL_NET_GDR_READ": False, "NCCL_IB_TIMEOUT": 22})
    assert [plan["settings"][k] for k in ("NCCL_IB_DISABLE", "NCCL_IB_TIMEOUT", "NCCL_NET_GDR_READ")] == ["1", "22", "0"]


@pytest.mark.parametrize("value", ["eth0\nNCCL_IB_HCA=mlx5_9:1", "eth0 eth1", "eth0;rm"])
def test_socket_ifname_must_be_an_interface_list(value):
    with pytest.raises(AnsibleFilterError, match=r"nccl_socket_ifname .* is not an interface list"):
        nccl_settings(IB_12, "infiniband", value)


@pytest.mark.parametrize("value", ["eth0", "=bond0", "^docker,lo", "ens1f0np0,ens2f0np0"])
def test_socket_ifname_accepts_nccl_syntax(value):
    assert nccl_settings(IB_12, "infiniband", value)["settings"]["NCCL_SOCKET_IFNAME"] == value


def test_blank_socket_ifname_is_empty():
    with pytest.raises(AnsibleFilterError, match=r"nccl_socket_ifname is empty"):
        nccl_settings(IB_12, "infiniband", "  ")


# The host's interfaces as setup publishes them: 'interfaces' plus one entry per interface ('-' and ':' -> '_').
NET = {"interfaces": ["lo", "eth0", "eth1", "docker0", "br-0a1b"], "lo": {"active": True}, "eth0": {"active": True},
       "eth1": {"active": False}, "docker0": {"active": True}, "br_0a1b": {"active": True}}


@pytest.mark.parametrize("value", ["eth0", "eth", "=eth0", "^docker,lo", "^=docker0", "br-0a1b", "eth0,eth9"])
def test_socket_ifname_that_selects_an_up_interface_passes(value):
    assert nccl_settings(IB_12, "infiniband", value, network_facts=NET)["settings"]["NCCL_SOCKET_IFNAME"] == value


@pytest.mark.parametrize("value", ["eth9", "=eth", "bond0,ib"])
def test_socket_ifname_that_selects_no_interface_names_the_ones_the_host_has(value):
    with pytest.raises(AnsibleFilterError, match=r"nccl_socket_ifname '%s' selects no interface of this host.*"
                                                  r"Interfaces here: br-0a1b, docker0, eth0, eth1, lo\." % re.escape(value)):
        nccl_settings(IB_12, "infiniband", value, network_facts=NET)


def test_socket_ifname_whose_interfaces_are_down_is_refused_with_the_up_ones():
    with pytest.raises(AnsibleFilterError, match=r"selects eth1, which is down .* Interfaces that are up: br-0a1b, docker0, eth0, lo\."):
        nccl_settings(IB_12, "infiniband", "=eth1", network_facts=NET)


def test_exclusion_that_leaves_only_down_interfaces_is_refused():
    with pytest.raises(AnsibleFilterError, match=r"selects eth1, which is down"):
        nccl_settings(IB_12, "infiniband", "^lo,eth0,docker,br", network_facts=NET)


def test_without_network_facts_the_interface_is_not_checked():
    assert nccl_settings(IB_12, "infiniband", "eth9", network_facts={})["settings"]["NCCL_SOCKET_IFNAME"] == "eth9"


def test_on_error_return_gives_the_message_instead_of_raising():
    plan = nccl_settings(IB_12, "infiniband", "eth9", network_facts=NET, on_error="return")
    assert plan["settings"] == {} and plan["errors"][0].startswith("nccl_socket_ifname 'eth9' selects no interface")


def test_on_error_must_be_raise_or_return():
    with pytest.raises(AnsibleFilterError, match=r"on_error is 'ignore'; allowed values: raise, return"):
        nccl_settings(IB_12, "infiniband", "eth0", on_error="ignore")


# -- the role's one validation path: conf path, partition, required ports ---------------------------------------------
def _ib_rdma(pkeys):
    return {"devices": {"mlx5_0": {"ports": {"1": {"link_layer": "InfiniBand", "state": "ACTIVE", "rate_gbps": 400,
                                                   "pkey_indexes": pkeys}}}}}


def test_a_relative_conf_path_is_refused_by_name():
    plan = nccl_settings(_ib_rdma({"0xffff": 0}), socket_ifname="eth0", conf_path="relative/nccl.conf", on_error="return")
    assert plan["errors"] == ["nccl_conf_path must be an absolute path (NCCL reads /etc/nccl.conf, or the file "
                              "NCCL_CONF_FILE names); got 'relative/nccl.conf'."]


def test_the_partition_gives_nccl_ib_pkey_its_table_index():
    parts = [{"name": "gpu", "pkey": "0x8001"}]
    plan = nccl_settings(_ib_rdma({"0xffff": 0, "0x8001": 1}), socket_ifname="eth0", partition="gpu", partitions=parts)
    assert plan["settings"]["NCCL_IB_PKEY"] == 1 and list(plan["settings"])[-1] == "NCCL_IB_PKEY"


def test_an_unknown_partition_is_an_error_even_before_the_sm_swept():
    plan = nccl_settings(_ib_rdma({"0xffff": 0}), socket_ifname="eth0", partition="gpu", partitions=[],
                         check_pkey_ports=False, on_error="return")
    assert plan["errors"] == ["nccl_ib_partition 'gpu' is not a partition of infiniband_partitions; allowed: Default"]


def test_a_pkey_missing_from_the_table_is_an_error_only_once_the_sm_swept():
    parts = [{"name": "gpu", "pkey": "0x8001"}]
    before = nccl_settings(_ib_rdma({"0xffff": 0}), socket_ifname="eth0", partition="gpu", partitions=parts,
                           check_pkey_ports=False, on_error="return")
    assert before["errors"] == [] and "NCCL_IB_PKEY" not in before["settings"]
    after = nccl_settings(_ib_rdma({"0xffff": 0}), socket_ifname="eth0", partition="gpu", partitions=parts, on_error="return")
    assert after["errors"][0].startswith("P_Key 0x8001 is not in the P_Key table of mlx5_0:1")


def test_no_qualifying_port_is_an_error_only_when_required():
    down = {"devices": {"mlx5_0": {"ports": {"1": {"link_layer": "InfiniBand", "state": "DOWN"}}}}}
    assert nccl_settings(down, socket_ifname="eth0", on_error="return")["errors"] == []
    errors = nccl_settings(down, socket_ifname="eth0", require_ports=True, on_error="return")["errors"]
    assert errors == ['No port qualifies for NCCL_IB_HCA, so NCCL would fall back to TCP sockets. Ports seen: '
                      '{"device": "mlx5_0", "port": 1, "reason": "link layer InfiniBand"}. Fix the fabric, or set '
                      'nccl_require_ib_hca=false to write a sockets-only configuration.']


def test_extra_settings_given_as_a_string_are_refused_by_name():
    plan = nccl_settings(_ib_rdma({"0xffff": 0}), socket_ifname="eth0", extra="NCCL_DEBUG=INFO", on_error="return")
    assert plan["errors"] == ["nccl_extra_settings takes a mapping of NCCL variables to values ({NCCL_DEBUG: WARN}); "
                              "got 'NCCL_DEBUG=INFO'"]


# -- issue 23: the compute ports in rail order, never a storage, management or unused port ------------------------------
V4_GIDS = [{"index": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "IB/RoCE v1"},
           {"index": 3, "gid": "0000:0000:0000:0000:0000:ffff:0a00:010b", "type": "RoCE v2"}]
# a DGX-like host: 8 InfiniBand compute cards whose PCI order is not their names' order, and a BlueField-3 with two
# Ethernet storage ports (up, with an IPv4 address)
DGX_BUSES = {"mlx5_0": "9a", "mlx5_1": "18", "mlx5_2": "ce", "mlx5_3": "40", "mlx5_4": "dc", "mlx5_5": "4f",
             "mlx5_6": "c0", "mlx5_7": "5e"}
DGX_RAILS = ["mlx5_1", "mlx5_3", "mlx5_5", "mlx5_7", "mlx5_0", "mlx5_6", "mlx5_2", "mlx5_4"]


def _dgx():
    devices = dict((name, {"pci_address": "0000:%s:00.0" % bus, "ports": {"1": _port("InfiniBand")}})
                   for name, bus in DGX_BUSES.items())
    for fn in (0, 1):
        port = dict(_port("Ethernet", gid_index=5 + fn, rate=200.0), gids=V4_GIDS, netdev="enp170s0f%dnp%d" % (fn, fn))
        devices["mlx5_%d" % (8 + fn)] = {"pci_address": "0000:aa:00.%d" % fn, "ports": {"1": port}}
    return {"devices": devices}


@pytest.mark.parametrize("annotated", [True, False], ids=["facts-with-roles", "facts-without-roles"])
def test_dgx_nccl_ib_hca_lists_the_compute_ports_in_rail_order_and_no_storage_port(annotated):
    rdma = _dgx()
    if annotated:  # as rdma_facts writes them
        port_roles.annotate(rdma, None, ["infiniband"], [])
    plan = nccl_settings(rdma, "infiniband", "eth0", fabrics=["infiniband"])
    assert plan["settings"]["NCCL_IB_HCA"] == "=" + ",".join("%s:1" % name for name in DGX_RAILS)
    assert [(p["device"], p["rail"]) for p in plan["ports"]] == [(name, rail) for rail, name in enumerate(DGX_RAILS)]
    assert plan["skipped"] == [{"device": "mlx5_8", "port": 1, "reason": "role storage"},
                               {"device": "mlx5_9", "port": 1, "reason": "role storage"}]
    # auto on a host in both groups: InfiniBand compute, Ethernet storage
    both = nccl_settings(_dgx(), "auto", "eth0", fabrics=["infiniband", "roce"])
    assert both["fabric"] == "infiniband" and "mlx5_8" not in both["settings"]["NCCL_IB_HCA"]


def _roce_8_2(names, buses, storage_gid=7):
    """A RoCE host with 8 compute and 2 storage ports; ``names`` and ``buses`` list the 10 devices (the last two
    storage, chosen with rdma_port_roles by PCI address as a site would)."""
    devices = {}
    for index, (name, bus) in enumerate(zip(names, buses)):
        gid = 3 if index < 8 else storage_gid
        port = dict(_port("Ethernet", gid_index=gid), gids=V4_GIDS, netdev="ens%d" % index)
        devices[name] = {"pci_address": "0000:%s:00.0" % bus, "ports": {"1": port}}
    entries = [{"role": "storage", "devices": ["%s:00" % bus for bus in buses[8:]]}]
    return port_roles.annotate({"devices": devices}, entries, ["roce"], [])


def test_roce_8_plus_2_gid_index_consistency_covers_the_compute_ports_only():
    names = ["rocep%ds0" % int(bus, 16) for bus in ("0c", "1a", "2b", "3c", "8c", "9a", "ab", "bc", "d0", "e0")]
    rdma = _roce_8_2(names, ["0c", "1a", "2b", "3c", "8c", "9a", "ab", "bc", "d0", "e0"])
    plan = nccl_settings(rdma, "roce", "eth0", traffic_class=106, fabrics=["roce"])
    assert plan["settings"]["NCCL_IB_HCA"] == "=" + ",".join("%s:1" % name for name in names[:8])
    assert plan["settings"]["NCCL_IB_GID_INDEX"] == 3  # the storage ports' GID index 7 does not count
    assert [s["reason"] for s in plan["skipped"]] == ["role storage", "role storage"]


def test_management_and_unused_ports_never_reach_nccl_conf():
    rdma = _facts({"mlx5_0": {1: _port("InfiniBand")}, "mlx5_1": {1: _port("InfiniBand")},
                   "mlx5_2": {1: _port("InfiniBand")}},
                  {"mlx5_0": "0000:18:00.0", "mlx5_1": "0000:40:00.0", "mlx5_2": "0000:4f:00.0"})
    rdma["devices"]["mlx5_0"]["ports"]["1"]["netdev"] = "ibp24s0"
    port_roles.annotate(rdma, [{"role": "unused", "devices": ["mlx5_2"]}], ["infiniband"], ["ibp24s0"])
    plan = nccl_settings(rdma, "infiniband", "eth0", fabrics=["infiniband"])
    assert plan["settings"]["NCCL_IB_HCA"] == "=mlx5_1:1"
    assert [(s["device"], s["reason"]) for s in plan["skipped"]] == [("mlx5_0", "role management"),
                                                                     ("mlx5_2", "role unused")]


def test_fabrics_must_be_a_list_of_group_names():
    plan = nccl_settings(IB_12, "infiniband", "eth0", fabrics="infiniband", on_error="return")
    assert plan["errors"][0].startswith("nccl_settings: fabrics must be the host's inventory groups")
