"""Issue 23, real nodes: the roce, infiniband and firmware roles read the port roles (sysfs/port_roles.py) through
their filters. A DGX-class node (8 InfiniBand compute ports + a dual-port BlueField-3 whose ports are Ethernet storage
ports) in the infiniband group keeps its storage ports Ethernet; in both groups its storage ports get their own
lossless profile when asked; an 8+2 RoCE node makes only its 8 compute ports lossless by default; firmware entries
select cards by role:<role>."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import simhost  # tests/simhost, on sys.path via tests/unit/conftest.py
from ansible_collections.hpcnet.rdma.plugins.filter import firmware as fw_filter
from ansible_collections.hpcnet.rdma.plugins.filter import infiniband as ib_filter
from ansible_collections.hpcnet.rdma.plugins.filter import roce as roce_filter
from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import infiniband as ib
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs

V4 = [{"index": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001"},
      {"index": 3, "gid": "0000:0000:0000:0000:0000:ffff:0a00:010b"}]
BF3 = {"part_number": "900-9D3B6-00CV-AA0", "board_id": "MT_0000000884"}
CX7 = {"part_number": "MCX75310AAS-NEAT", "board_id": "MT_0000000838"}
ROCE_DEFAULTS = {"roce_interfaces": [], "roce_dscp": 26, "roce_priority": 3, "roce_pfc_priorities": [3],
                 "roce_ecn_priorities": [3], "roce_cnp_dscp": 48, "roce_cnp_priority": 6, "roce_tos": 106,
                 "roce_dcqcn": {}, "roce_global_pause": False, "roce_lossless": True, "roce_mtu": 9000,
                 "roce_addresses": {}, "roce_trust": "dscp", "roce_mode": "v2", "roce_storage_qos": "none"}
BUSES = ["18", "40", "4f", "5e", "9a", "c0", "ce", "dc"]


def _ib_port(number, state="ACTIVE"):
    return {"link_layer": "InfiniBand", "state": state, "netdev": "ibp%ds0" % number, "lid": number, "sm_lid": 1,
            "port_guid": "0x0c42a103%08x" % number, "pkeys": ["0xffff"], "pkey_indexes": {"0xffff": 0}, "gids": []}


def _eth_port(netdev, state="ACTIVE", gids=None):
    return {"link_layer": "Ethernet", "state": state, "netdev": netdev, "gids": gids if gids is not None else V4}


def _device(pci, port, extra):
    return dict(extra, pci_address=pci, ports={"1": port})


def dgx():
    """8 InfiniBand compute HCAs (not named mlx5_N, PCI order not name order) + a BlueField-3 whose two ports are
    Ethernet, up with an address of their own (storage), as rdma_facts reads them without roles."""
    devices = {}
    for bus in BUSES:
        number = int(bus, 16)
        devices["ibp%ds0" % number] = _device("0000:%s:00.0" % bus, _ib_port(number), CX7)
    for fn in (0, 1):
        devices["rocep170s0f%d" % fn] = _device("0000:aa:00.%d" % fn, _eth_port("enp170s0f%dnp%d" % (fn, fn)), BF3)
    netdevs = dict((port["netdev"], {"rdma_device": name, "rdma_port": 1, "ecn": None})
                   for name, dev in devices.items() for port in dev["ports"].values())
    return {"devices": devices, "netdevs": netdevs}


def roce_8_2():
    """An 8-rail RoCE node (8 CX-7 at 400G) + 2 storage RoCE ports on their own card (0000:aa:00)."""
    devices = {}
    for rail, bus in enumerate(BUSES):
        devices["rocep%ds0" % int(bus, 16)] = _device("0000:%s:00.0" % bus, _eth_port("ens%dnp0" % rail), CX7)
    for fn in (0, 1):
        devices["rocep170s0f%d" % fn] = _device("0000:aa:00.%d" % fn, _eth_port("enp170s0f%dnp%d" % (fn, fn)), BF3)
    netdevs = dict((port["netdev"], {"rdma_device": name, "rdma_port": 1, "ecn": None})
                   for name, dev in devices.items() for port in dev["ports"].values())
    return {"devices": devices, "netdevs": netdevs}


def annotated(rdma, fabrics, entries=None, management=()):
    return port_roles.annotate(copy.deepcopy(rdma), entries, fabrics, list(management))


def ib_plan(rdma, fabrics=None, **kw):
    args = dict(partitions=[], default_partition={}, ipoib={}, sm=False, sm_priority=0, hosts={}, host_index=1,
                link_type_devices="auto", keep_netdevs=[], fabrics=fabrics)
    args.update(kw)
    return ib_filter.infiniband_plan(rdma, **args)


def profile(rdma, fabrics=None, **changes):
    return roce_filter.roce_profile(dict(ROCE_DEFAULTS, **changes), rdma, fabrics)


# ---------------------------------------------------------------------------------------------------- infiniband
@pytest.mark.parametrize("facts", ["annotated", "hand-written"])
def test_dgx_in_infiniband_alone_plans_no_link_type_change_and_keeps_storage_ethernet(facts):
    rdma = annotated(dgx(), ["infiniband"]) if facts == "annotated" else dgx()
    plan = ib_plan(rdma, ["infiniband"])
    assert plan["errors"] == []
    # the bug: auto took every Ethernet RDMA port but the management link, the BlueField-3's storage ports too
    assert plan["link_type_ports"] == []
    assert ib_filter.infiniband_link_type_mlxconfig(rdma, devices="auto", keep_netdevs=[], fabrics=["infiniband"]) == []
    # the ports the role configures and waits for: the 8 InfiniBand compute ports in rail (PCI) order, no Ethernet port
    assert [(p["device"], p["rail"], p["subnet"]) for p in plan["ports"]] == [
        ("ibp%ds0" % int(bus, 16), rail, "rail %d" % rail) for rail, bus in enumerate(BUSES)]
    assert all(p["role"] == "compute" for p in plan["ports"])


def test_vpi_card_from_the_simulator_keeps_its_ethernet_storage_port(tmp_path):
    root = tmp_path / "sys"
    simhost.build_tree(simhost.load("cx7_vpi_2p"), root)
    rdma = port_roles.annotate(gather_rdma_sysfs(str(root)), None, ["infiniband"], [])
    storage = rdma["ports_by_role"]["storage"]
    assert len(storage) == 1 and rdma["ports_by_role"]["link_type_changes"] == []
    plan = ib_plan(rdma, ["infiniband"])
    assert plan["errors"] == [] and plan["link_type_ports"] == []
    # the ports wait (roles/infiniband/tasks/ports.yml) takes the plan's ports: never the Ethernet storage port
    waited = ["%s:%s" % (p["device"], p["port"]) for p in ib_filter.infiniband_plan(rdma)["ports"]]
    assert waited == rdma["ports_by_role"]["compute"] and storage[0] not in waited


def test_a_vpi_port_without_an_address_is_turned_only_when_made_compute():
    rdma = dgx()
    rdma["devices"]["rocep170s0f1"]["ports"]["1"] = _eth_port("enp170s0f1np1", state="DOWN", gids=[])
    # by default it is unused: a storage port that is down or not yet addressed is no rail and no reboot
    assert ib_plan(rdma, ["infiniband"])["link_type_ports"] == []
    rdma = annotated(rdma, ["infiniband"], [{"role": "compute", "devices": ["rocep170s0f1"]}])
    plan = ib_plan(rdma, ["infiniband"])
    assert plan["errors"] == [] and plan["link_type_ports"] == [
        {"device": "rocep170s0f1", "port": 1, "netdev": "enp170s0f1np1"}]
    assert ib_filter.infiniband_link_type_mlxconfig(rdma, devices="auto", fabrics=["infiniband"]) == [
        {"devices": ["rocep170s0f1"], "params": {"LINK_TYPE_P2": "IB"}}]
    # the management link is never turned
    assert ib_plan(rdma, ["infiniband"], keep_netdevs=["enp170s0f1np1"])["link_type_ports"] == []


def test_dgx_in_both_groups_keeps_every_ethernet_port():
    rdma = annotated(dgx(), ["infiniband", "roce"])
    assert rdma["ports_by_role"]["storage"] == ["rocep170s0f0:1", "rocep170s0f1:1"]
    assert ib_plan(rdma, ["infiniband", "roce"])["link_type_ports"] == []


@pytest.mark.parametrize("selector", ["rocep170s0f1", "rocep170s0f1:1", "enp170s0f1np1", "0000:aa:00.1"])
def test_naming_a_storage_port_in_the_explicit_list_is_refused(selector):
    plan = ib_plan(annotated(dgx(), ["infiniband"]), ["infiniband"], link_type_devices=[selector])
    assert plan["link_type_ports"] == []
    assert plan["errors"] == [
        "infiniband_link_type_devices names rocep170s0f1:1 (enp170s0f1np1, 0000:aa:00.1), which is a storage port (its "
        "role in rdma_port_roles, or by default an Ethernet port that is up with an address of its own), so it stays "
        "Ethernet: leave it out of infiniband_link_type_devices, or give it the role compute in rdma_port_roles "
        "({role: compute, devices: [rocep170s0f1:1]}) to turn it. The role turns only compute ports into InfiniBand."]
    # made compute in rdma_port_roles, the same list turns it
    rdma = annotated(dgx(), ["infiniband"], [{"role": "compute", "devices": ["rocep170s0f1:1"]}])
    plan = ib_plan(rdma, ["infiniband"], link_type_devices=[selector])
    assert plan["errors"] == [] and [p["device"] for p in plan["link_type_ports"]] == ["rocep170s0f1"]
    assert [p["device"] for p in ib_plan(rdma, ["infiniband"])["link_type_ports"]] == ["rocep170s0f1"]  # auto too


def test_naming_the_management_link_or_an_unused_port_is_refused():
    rdma = annotated(dgx(), ["infiniband"], [{"role": "unused", "devices": ["rocep170s0f1"]}],
                     management=["enp170s0f0np0"])
    errors = ib_plan(rdma, ["infiniband"], link_type_devices=["0000:aa:00"])["errors"]
    assert len(errors) == 2
    assert "names rocep170s0f0:1 (enp170s0f0np0, 0000:aa:00.0), which carries the management link" in errors[0]
    assert "names rocep170s0f1:1 (enp170s0f1np1, 0000:aa:00.1), which has the role unused in rdma_port_roles" in errors[1]
    assert all("infiniband_link_type_devices" in e and "rdma_port_roles" in e for e in errors)
    bad = ib_plan(rdma, ["infiniband"], link_type_devices={"mlx5_1": 1})["errors"]
    assert bad == ["infiniband_link_type_devices must be auto or a list of the RDMA devices (mlx5_1, or mlx5_1:1 for one "
                   "port), netdevs or PCI addresses of the ports to turn into InfiniBand; got {\"mlx5_1\": 1}"]


def test_sm_and_ipoib_serve_compute_and_storage_infiniband_ports_never_management_or_unused():
    rdma = dgx()
    rdma["devices"]["ibp24s0"]["ports"]["1"]["netdev"] = "ibmgmt0"
    rdma = annotated(rdma, ["infiniband"], [{"role": "storage", "devices": ["ibp220s0"]},
                                            {"role": "unused", "devices": ["ibp206s0"]}], management=["ibmgmt0"])
    plan = ib_plan(rdma, ["infiniband"], sm=True, sm_priority=14,
                   ipoib={"pools": {"ibp220s0": "10.30.0.0/16", "ibp64s0": "10.10.0.0/16"}})
    assert plan["errors"] == []
    served = [(p["device"], p["role"], p["rail"], p["subnet"]) for p in plan["ports"]]
    assert served[0] == ("ibp64s0", "compute", 0, "rail 0") and served[-1] == ("ibp220s0", "storage", None, "storage 0")
    assert "ibp24s0" not in [p[0] for p in served] and "ibp206s0" not in [p[0] for p in served]
    assert [(i["device"], i["subnet"]) for i in plan["sm"]][-1] == ("ibp220s0", "storage 0") and len(plan["sm"]) == 6
    assert [n["name"] for n in plan["ipoib"]] == ["ibp220s0", "ibp64s0"]
    # IPoIB on the management port is refused: it is not a netdev the role serves
    refused = ib_plan(rdma, ["infiniband"], ipoib={"pools": {"ibmgmt0": "10.10.0.0/16"}})["errors"]
    assert refused and "infiniband_ipoib: ibmgmt0 is not an IPoIB netdev of this host" in refused[0]


def test_two_sm_hosts_of_a_storage_subnet_with_one_priority_are_refused():
    rdma = annotated(dgx(), ["infiniband"], [{"role": "storage", "devices": ["ibp220s0"]}])
    hosts = {"a": {"rdma": rdma, "sm": True, "sm_priority": 14, "sm_devices": ["ibp220s0"]},
             "b": {"rdma": rdma, "sm": True, "sm_priority": 14, "sm_devices": ["ibp220s0"]}}
    errors = ib_plan(rdma, ["infiniband"], sm=True, sm_priority=14, sm_devices=["ibp220s0"], hosts=hosts)["errors"]
    assert errors == ["infiniband_sm_priority: a and b run the subnet manager of storage subnet 0 (the hosts' "
                      "InfiniBand storage port 0) with the same priority 14; give each SM host of a subnet its own "
                      "priority (0-15; the highest is master, the others standby)"]


def test_nccl_pkey_reads_the_served_ports():
    rdma = annotated(dgx(), ["infiniband"])
    found = ib.nccl_pkey(rdma, [], "Default")
    assert found == {"index": 0, "pkey": "0xffff", "error": None}


# ---------------------------------------------------------------------------------------------------------- roce
def test_an_8_plus_2_roce_node_makes_only_its_8_compute_ports_lossless_by_default():
    rdma = annotated(roce_8_2(), ["roce"], [{"role": "storage", "devices": ["0000:aa:00"]}])
    p = profile(rdma, ["roce"])
    assert p["errors"] == []
    assert p["netdevs"] == p["compute_netdevs"] == ["ens%dnp0" % rail for rail in range(8)]
    assert p["storage_netdevs"] == [] and set(p["qos"]) == set(p["netdevs"])
    assert all(q["role"] == "compute" and q["pfc"] == [3] for q in p["qos"].values())
    # the same facts read without roles (no rdma_port_roles): every Ethernet port is compute on a roce host
    assert len(profile(roce_8_2(), ["roce"])["netdevs"]) == 10
    # storage as the compute profile, when asked
    both = profile(rdma, ["roce"], roce_storage_qos="compute")
    assert both["storage_netdevs"] == ["enp170s0f0np0", "enp170s0f1np1"] and len(both["netdevs"]) == 10
    assert both["qos"]["enp170s0f0np0"] == dict(both["qos"]["ens0np0"], role="storage")


def test_dgx_in_both_groups_gives_its_storage_ports_their_own_lossless_profile_when_asked():
    rdma = annotated(dgx(), ["infiniband", "roce"])
    none = profile(rdma, ["infiniband", "roce"])
    # by default the storage ports are not made lossless, and a host whose compute ports are InfiniBand is no error
    assert none["errors"] == [] and none["netdevs"] == [] and none["link_type_ports"] == []
    own = profile(rdma, ["infiniband", "roce"], roce_storage_qos={"dscp": 24, "priority": 4})
    assert own["errors"] == []
    assert own["netdevs"] == own["storage_netdevs"] == ["enp170s0f0np0", "enp170s0f1np1"] and own["compute_netdevs"] == []
    assert own["qos"]["enp170s0f0np0"] == {
        "role": "storage", "trust": "dscp", "pfc": [4], "ecn": [4], "dscp2prio": {24: 4, 48: 6}, "cnp_dscp": 48,
        "cnp_priority": 6, "dcqcn": {}, "tos": 98, "mode": "v2", "global_pause": False}
    # the compute profile as the role's variables give it
    assert own["pfc"] == [3] and own["dscp2prio"] == {26: 3, 48: 6}


@pytest.mark.parametrize("storage_qos, message", [
    ({"priority": 6}, "roce_cnp_priority 6 is a PFC priority (roce_storage_qos.pfc_priorities [6])"),
    ({"dscp": 24, "tos": 106}, "roce_storage_qos.tos 106 carries DSCP 26 (ToS >> 2), not roce_storage_qos.dscp 24; use 98"),
    ({"lossless": False, "pfc_priorities": [3]}, "roce_storage_qos.lossless is false (RoCE without PFC), but "
                                                 "roce_storage_qos.pfc_priorities enables [3]"),
    ({"cnp_dscp": 26}, "roce_storage_qos.cnp_dscp 26 is roce_dscp"),
    ({"priority": 9}, "roce_storage_qos.priority must be an integer 0-7; got 9"),
    ({"dcqcn": {"rpg_gd": 99}}, "roce_storage_qos.dcqcn.rpg_gd must be an integer 1-15"),
    ({"pcp": 3}, "roce_storage_qos has no setting pcp; allowed: cnp_dscp, cnp_priority, dcqcn, dscp, ecn_priorities, "
                 "global_pause, lossless, mode, pfc_priorities, priority, tos, trust"),
    ("lossless", 'roce_storage_qos takes none (the default: storage ports are not made lossless), compute'),
    ({"trust": "port"}, "roce_storage_qos.trust must be one of: dscp, pcp; got 'port'"),
])
def test_storage_profile_problems_name_roce_storage_qos(storage_qos, message):
    p = profile(annotated(dgx(), ["infiniband", "roce"]), ["infiniband", "roce"], roce_storage_qos=storage_qos)
    assert any(message in e for e in p["errors"]), p["errors"]
    assert p["dscp2prio"] == {} and all(q["dscp2prio"] == {} for q in p["qos"].values())


def test_storage_without_lossless_takes_no_pfc_and_mode_trust_of_its_own():
    p = profile(annotated(dgx(), ["infiniband", "roce"]), ["infiniband", "roce"],
                roce_storage_qos={"lossless": "no", "trust": "pcp", "mode": "v1"})
    assert p["errors"] == []
    q = p["qos"]["enp170s0f1np1"]
    assert (q["pfc"], q["ecn"], q["trust"], q["mode"]) == ([], [3], "pcp", "v1")


def test_roce_interfaces_name_netdevs_each_with_its_roles_profile():
    rdma = annotated(roce_8_2(), ["roce"], [{"role": "storage", "devices": ["0000:aa:00"]}], management=["ens7np0"])
    refused = profile(rdma, ["roce"], roce_interfaces=["ens0np0", "enp170s0f0np0", "ens7np0"])["errors"]
    assert refused == [
        "roce_interfaces names enp170s0f0np0, a storage port (rdma_port_roles), but roce_storage_qos is none (storage "
        "ports are not made lossless): set roce_storage_qos to compute or to their own settings, or leave it out of "
        "roce_interfaces.",
        "roce_interfaces names ens7np0, which carries the management link (role management: a default route's "
        "interface); the role never changes it. Leave it out of roce_interfaces."]
    p = profile(rdma, ["roce"], roce_interfaces=["enp170s0f0np0", "ens0np0"], roce_storage_qos={"dscp": 24})
    assert p["errors"] == [] and p["netdevs"] == ["enp170s0f0np0", "ens0np0"]
    assert p["compute_netdevs"] == ["ens0np0"] and p["storage_netdevs"] == ["enp170s0f0np0"]
    assert p["qos"]["enp170s0f0np0"]["tos"] == 98 and p["qos"]["ens0np0"]["tos"] == 106
    # the management port is never configured by default either
    assert "ens7np0" not in profile(rdma, ["roce"], roce_storage_qos="compute")["netdevs"]


def test_only_compute_ports_are_addressed():
    rdma = annotated(roce_8_2(), ["roce"], [{"role": "storage", "devices": ["0000:aa:00"]}])
    errors = profile(rdma, ["roce"], roce_storage_qos="compute",
                     roce_addresses={"ens0np0": "10.0.1.11/24", "enp170s0f0np0": "10.9.0.11/24"})["errors"]
    assert errors == ["roce_addresses names ['enp170s0f0np0'], storage ports: the role addresses only compute ports "
                      "(the RoCE rails); a storage port keeps the addresses and MTU the site gives it."]


def test_a_roce_host_whose_ethernet_ports_are_all_storage_is_told_what_to_set():
    rdma = annotated(roce_8_2(), ["roce"], [{"role": "storage", "devices": ["all"]}])
    errors = profile(rdma, ["roce"])["errors"]
    assert len(errors) == 1 and errors[0].startswith("No ACTIVE Ethernet compute port on this host: its ACTIVE "
                                                     "Ethernet ports are ens0np0 (storage), ")
    assert "rdma_port_roles" in errors[0] and "roce_storage_qos" in errors[0]


def test_roce_compute_ports_that_are_infiniband_go_to_the_firmware_as_eth():
    rdma = roce_8_2()
    # a VPI card's port 2 that is InfiniBand and down, made compute on a roce host: to become Ethernet
    rdma["devices"]["rocep170s0f1"]["ports"]["1"] = dict(_ib_port(171), state="DOWN")
    # and an ACTIVE InfiniBand port: storage, left as it is
    rdma["devices"]["rocep170s0f0"]["ports"]["1"] = _ib_port(170)
    rdma = annotated(rdma, ["roce"], [{"role": "compute", "devices": ["rocep170s0f1"]}])
    p = profile(rdma, ["roce"])
    assert p["errors"] == [] and p["link_type_ports"] == [{"device": "rocep170s0f1", "port": 1}]
    entries = roce_filter.roce_firmware_mlxconfig(rdma, [], qos=p["qos"], link_type_ports=p["link_type_ports"])
    assert entries == [{"devices": ["rocep170s0f1"], "params": {"LINK_TYPE_P2": "ETH"}}]
    # the same on a host in both groups: the compute link layer is InfiniBand there, nothing turns to Ethernet
    assert profile(annotated(roce_8_2(), ["infiniband", "roce"]), ["infiniband", "roce"])["link_type_ports"] == []


def test_inbox_firmware_settings_follow_each_ports_own_profile():
    rdma = annotated(roce_8_2(), ["roce"], [{"role": "storage", "devices": ["0000:aa:00"]}])
    p = profile(rdma, ["roce"], roce_storage_qos={"priority": 4, "cnp_priority": 5, "dscp": 24})
    entries = roce_filter.roce_firmware_mlxconfig(rdma, p["netdevs"], qos=p["qos"])
    by_device = dict((e["devices"][0], e["params"]) for e in entries)
    assert by_device["rocep24s0"] == {"ROCE_CC_PRIO_MASK_P1": 8, "CNP_DSCP_P1": 48, "CNP_802P_PRIO_P1": 6}
    assert by_device["rocep170s0f1"] == {"ROCE_CC_PRIO_MASK_P2": 16, "CNP_DSCP_P2": 48, "CNP_802P_PRIO_P2": 5}
    # without qos, the one profile given (the filter's former form)
    assert roce_filter.roce_firmware_mlxconfig(rdma, ["ens0np0"], [3], 48, 6) == [
        {"devices": ["rocep24s0"], "params": {"ROCE_CC_PRIO_MASK_P1": 8, "CNP_DSCP_P1": 48, "CNP_802P_PRIO_P1": 6}}]


# ------------------------------------------------------------------------------------------------------ firmware
SRIOV = [{"devices": ["role:storage"], "params": {"SRIOV_EN": True, "NUM_OF_VFS": 8}}]


@pytest.mark.parametrize("facts", ["annotated", "hand-written"])
def test_firmware_role_selector_picks_the_storage_dpu_only(facts):
    rdma = annotated(dgx(), ["infiniband"]) if facts == "annotated" else dgx()
    targets = fw_filter.firmware_targets(rdma, SRIOV, fabrics=["infiniband"])
    assert targets == [{"pci": "0000:aa:00.0", "devices": ["rocep170s0f0", "rocep170s0f1"],
                        "params": {"SRIOV_EN": True, "NUM_OF_VFS": 8}, "entries": [0]}]
    assert fw_filter.firmware_unmatched(rdma, SRIOV, fabrics=["infiniband"]) == []
    compute = fw_filter.firmware_targets(rdma, [{"devices": "role:compute", "params": {"ATS_ENABLED": False}}],
                                         fabrics=["infiniband"])
    assert len(compute) == 8 and "0000:aa:00.0" not in [t["pci"] for t in compute]
    cards = fw_filter.firmware_cards(rdma, ["infiniband"])
    assert [c["roles"] for c in cards if c["pci"] == "0000:aa:00.0"] == [["storage"]]


def test_firmware_role_selector_on_facts_without_roles_needs_the_groups():
    """Facts read without roles (hand-written) carry none: without the host's groups a role: selector picks no card,
    and the role passes group_names."""
    assert fw_filter.firmware_targets(dgx(), SRIOV) == []
    assert fw_filter.firmware_unmatched(dgx(), SRIOV) == ["firmware_mlxconfig[0].devices: role:storage"]


def test_firmware_role_selector_follows_rdma_port_roles_and_reports_a_role_the_host_lacks():
    rdma = annotated(roce_8_2(), ["roce"], [{"role": "storage", "devices": ["0000:aa:00"]}])
    assert [t["pci"] for t in fw_filter.firmware_targets(rdma, SRIOV)] == ["0000:aa:00.0"]
    entries = [{"devices": ["role:management"], "params": {"SRIOV_EN": False}}]
    assert fw_filter.firmware_unmatched(rdma, entries) == ["firmware_mlxconfig[0].devices: role:management"]
    with pytest.raises(Exception, match=r"role:gpu names no port role"):
        fw_filter.firmware_targets(rdma, [{"devices": ["role:gpu"], "params": {"SRIOV_EN": True}}])


# ------------------------------------------------------------------------- the same on the simulator's real nodes
def _simulated(tmp_path, name, fabrics, entries=None):
    if not (_profiles_dir() / ("%s.yml" % name)).exists():
        pytest.skip("simulator profile %s not there" % name)
    root = tmp_path / "sys"
    simhost.build_tree(simhost.load(name), root)
    return port_roles.annotate(gather_rdma_sysfs(str(root)), entries, fabrics, [])


def _profiles_dir():
    return Path(__file__).resolve().parents[4] / "simhost" / "profiles"


def test_simulated_dgx_in_infiniband_alone_keeps_its_bluefield_ethernet(tmp_path):
    rdma = _simulated(tmp_path, "dgx_ib_8x_bf3", ["infiniband"])
    plan = ib_plan(rdma, ["infiniband"])
    assert plan["errors"] == [] and plan["link_type_ports"] == []
    assert len(plan["ports"]) == 8 and all(p["role"] == "compute" for p in plan["ports"])
    assert ib_filter.infiniband_link_type_mlxconfig(rdma, devices="auto", fabrics=["infiniband"]) == []


def test_simulated_dgx_in_both_groups_gives_the_storage_ports_their_own_profile(tmp_path):
    rdma = _simulated(tmp_path, "dgx_ib_8x_bf3", ["infiniband", "roce"])
    assert profile(rdma, ["infiniband", "roce"])["netdevs"] == []
    own = profile(rdma, ["infiniband", "roce"], roce_storage_qos={"dscp": 24, "priority": 4})
    assert own["errors"] == [] and len(own["storage_netdevs"]) == 2 and own["compute_netdevs"] == []
    assert all(own["qos"][n]["dscp2prio"] == {24: 4, 48: 6} for n in own["storage_netdevs"])


def test_simulated_8_plus_2_roce_node_makes_only_the_8_rails_lossless(tmp_path):
    rdma = _simulated(tmp_path, "roce_8x400_2x200", ["roce"], [{"role": "storage", "devices": ["MCX755106AS-HEAT"]}])
    p = profile(rdma, ["roce"])
    assert p["errors"] == [] and len(p["netdevs"]) == 8 and p["storage_netdevs"] == []
    assert len(profile(rdma, ["roce"], roce_storage_qos="compute")["netdevs"]) == 10


@pytest.mark.parametrize("value, message", [
    ({"trust": None}, "roce_storage_qos.trust is null: leave it out to take the compute profile's roce_trust."),
    ({"lossless": "maybe"}, 'roce_storage_qos.lossless must be true or false, got "maybe".'),
    ({"global_pause": []}, "roce_storage_qos.global_pause must be true or false, got []."),
])
def test_storage_qos_nulls_and_non_booleans_are_refused_before_anything_changes(value, message):
    from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.roce_profile import storage_choice
    assert storage_choice(value) == ("none", {}, [message])
