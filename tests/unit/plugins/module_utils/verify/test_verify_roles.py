"""verify by port role and rail (issue 23): the plan's rails and storage ports, perftest pairing rail r with rail r
whatever the devices are called, findings for unpaired rails, expectations per role, the MTU per rail, and the
fabric report's ports with their role and rail.

The facts are written as rdma_facts returns them (devices with their PCI address, ports, netdevs) for real host
shapes: a DGX-like host (8 InfiniBand compute ports whose PCI order is not their names' order, and a BlueField-3 with
two Ethernet storage ports) and 8-rail RoCE hosts with 2 storage ports whose cards sit in other slots on each host.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.hpcnet.rdma.plugins.filter import verify as verify_filters
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import port_roles
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import (
    fabric_report, fabric_report_html, perftest_rounds, rdma_verify, verify_plan, verify_report)

MODULES = dict((name, True) for name in ("mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "rdma_cm"))
CX7 = {"board_id": "MT_0000000838", "part_number": "MCX75310AAS-NEAT", "fw_ver": "28.41.1000", "hca_type": "MT4129"}
BF3 = {"board_id": "MT_0000000884", "part_number": "900-9D3B6-00CV-AA0", "fw_ver": "32.41.1000", "hca_type": "MT41692"}
CX6DX = {"board_id": "MT_0000000359", "part_number": "MCX623106AN-CDAT", "fw_ver": "22.41.1000", "hca_type": "MT4125"}


def _gids(index, host, bus):
    """A GID table with the RoCE v2 IPv4 entry at ``index`` (an address per host and card)."""
    v4 = "0000:0000:0000:0000:0000:ffff:0a%02x:%02x%02x" % (bus % 256, host, 11)
    return [{"index": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "IB/RoCE v1"},
            {"index": 1, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "RoCE v2"},
            {"index": index, "gid": v4, "type": "RoCE v2"}]


def _host(ports, host=1):
    """``ports``: ``(name, pci, link_layer, rate, netdev, mtu, card)`` -> ansible_facts.rdma."""
    devices, netdevs = {}, {}
    for name, pci, link_layer, rate, netdev, mtu, card in ports:
        bus = int(pci.split(":")[1], 16)
        port = {"link_layer": link_layer, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": rate,
                "width": "4X" if rate >= 200 else "2X", "netdev": netdev, "lid": None, "sm_lid": None,
                "roce_v2_ipv4_gid_index": None, "gids": [], "rdma_cm": None}
        if link_layer == "InfiniBand":
            port.update(lid=0x20 + bus % 64 + 64 * host, sm_lid=1)
        else:
            port.update(roce_v2_ipv4_gid_index=3, gids=_gids(3, host, bus),
                        rdma_cm={"default_roce_mode": "RoCE v2", "default_roce_tos": 106})
        devices[name] = dict(card, pci_address=pci, ports={"1": port})
        netdevs[netdev] = {"mtu": mtu, "operstate": "up", "rdma_device": name, "rdma_port": 1}
    return {"devices": devices, "netdevs": netdevs, "kernel_modules": dict(MODULES),
            "memlock": {"soft": "unlimited", "hard": "unlimited"}}


# a DGX: the kernel named the cards mlx5_0.. in probe order, but the udev names follow the slots; rail r is the r-th
# card in PCI order, whatever it is called
DGX_BUSES = ["18", "40", "4f", "5e", "9a", "c0", "ce", "dc"]


def dgx(host=1, mtu=4092):
    ports = [("ibp%ds0" % int(bus, 16), "0000:%s:00.0" % bus, "InfiniBand", 400.0, "ibp%ds0" % int(bus, 16), mtu, CX7)
             for bus in DGX_BUSES]
    ports += [("rocep170s0f%d" % fn, "0000:aa:00.%d" % fn, "Ethernet", 200.0, "enp170s0f%dnp%d" % (fn, fn), 9000, BF3)
              for fn in (0, 1)]
    return _host(reversed(ports), host)


def roce(names, buses, storage_buses, host=1, storage_rate=200.0):
    """8 compute RoCE ports (``names`` at ``buses``, 400 GbE) and 2 storage ports (a CX-6 Dx at ``storage_buses``)."""
    ports = [(name, "0000:%s:00.0" % bus, "Ethernet", 400.0, "ens%s" % bus, 9000, CX7) for name, bus in zip(names, buses)]
    ports += [("roce_st%d" % i, "0000:%s:00.%d" % (storage_buses, i), "Ethernet", storage_rate,
               "ens%sf%d" % (storage_buses, i), 9000, CX6DX) for i in (0, 1)]
    return _host(ports, host)


# the sites pick the storage cards by their part number: one entry for every host, whatever slot the card is in
STORAGE_BY_PART = [{"role": "storage", "devices": [CX6DX["part_number"]]}]
A_BUSES = ["0c", "1a", "2b", "3c", "8c", "9a", "ab", "bc"]
A_NAMES = ["rocep%ds0" % int(bus, 16) for bus in A_BUSES]
# host B: its cards sit in other slots and the names do not follow the PCI order
B_BUSES = ["05", "15", "25", "35", "85", "95", "a5", "b5"]
B_NAMES = ["mlx5_3", "mlx5_10", "mlx5_1", "mlx5_7", "mlx5_0", "mlx5_2", "mlx5_11", "mlx5_5"]


def roce_a(**kwargs):
    return port_roles.annotate(roce(A_NAMES, A_BUSES, "d0", 1, **kwargs), STORAGE_BY_PART, ["roce"], [])


def roce_b(**kwargs):
    return port_roles.annotate(roce(B_NAMES, B_BUSES, "c5", 2, **kwargs), STORAGE_BY_PART, ["roce"], [])


# ------------------------------------------------------------------------------------------------------- the plan
def test_dgx_plan_rails_in_pci_order_and_the_bluefield_ports_as_storage():
    plan = verify_plan.host_plan(dgx(), "infiniband", fabrics=["infiniband"])  # facts read without roles
    assert [r["hca"] for r in plan["rails"]] == ["ibp%ds0" % int(bus, 16) for bus in DGX_BUSES]
    assert [(s["hca"], s["index"], s["link_layer"], s["gid_index"]) for s in plan["storage"]] == [
        ("rocep170s0f0", 0, "Ethernet", 3), ("rocep170s0f1", 1, "Ethernet", 3)]
    assert plan["hcas"] == [r["hca"] for r in plan["rails"]] and plan["storage_hcas"] == ["rocep170s0f0", "rocep170s0f1"]
    assert [(p["role"], p["rail"]) for p in plan["ports"]] == [("compute", r) for r in range(8)] + [("storage", None)] * 2


def test_roce_hosts_with_other_slots_and_names_pair_rail_r_with_rail_r():
    plan_a = verify_plan.host_plan(roce_a(), "roce", fabrics=["roce"])
    plan_b = verify_plan.host_plan(roce_b(), "roce", fabrics=["roce"])
    assert [r["hca"] for r in plan_b["rails"]] == B_NAMES  # PCI order, not mlx5_0, mlx5_1, ...
    steps = verify_filters.perftest_rounds(["a", "b"], "ring", rails={"a": plan_a["rails"], "b": plan_b["rails"]})
    plans = {"a": plan_a, "b": plan_b}
    tested = [(plans[c]["rails"][step["rail"]]["hca"], plans[s]["rails"][step["rail"]]["hca"])
              for step in steps for c, s in step["pairs"]]
    assert tested == list(zip(A_NAMES, B_NAMES))
    assert verify_filters.perftest_unpaired(["a", "b"], "ring", rails={"a": plan_a["rails"], "b": plan_b["rails"]}) == []


def test_storage_matrix_pairs_storage_port_i_with_storage_port_i_on_request():
    plan_a = verify_plan.host_plan(roce_a(), "roce", fabrics=["roce"])
    plan_b = verify_plan.host_plan(roce_b(), "roce", fabrics=["roce"])
    rails = {"a": plan_a["rails"], "b": plan_b["rails"]}
    assert all("role" not in s for s in verify_filters.perftest_rounds(["a", "b"], "ring", rails=rails))
    steps = verify_filters.perftest_rounds(["a", "b"], "ring", rails=rails,
                                           storage={"a": plan_a["storage"], "b": plan_b["storage"]})
    storage = [s for s in steps if s.get("role") == "storage"]
    assert steps[-2:] == storage == [{"round": 0, "rail": 0, "pairs": [["a", "b"]], "role": "storage"},
                                     {"round": 0, "rail": 1, "pairs": [["a", "b"]], "role": "storage"}]
    assert [(plan_a["storage"][s["rail"]]["hca"], plan_b["storage"][s["rail"]]["hca"]) for s in storage] == [
        ("roce_st0", "roce_st0"), ("roce_st1", "roce_st1")]


def test_a_pair_whose_rail_counts_differ_gets_a_finding_for_the_unpaired_rails():
    short = roce(A_NAMES, A_BUSES, "d0", 3)
    short = port_roles.annotate(short, STORAGE_BY_PART + [{"role": "unused", "devices": ["bc:00"]}], ["roce"], [])
    plans = {"a": verify_plan.host_plan(roce_a(), "roce"), "b": verify_plan.host_plan(roce_b(), "roce"),
             "c": verify_plan.host_plan(short, "roce")}
    rails = dict((h, p["rails"]) for h, p in plans.items())
    steps = verify_filters.perftest_rounds(["a", "b", "c"], "ring", rails=rails)
    assert max(s["rail"] for s in steps if ["b", "c"] in s["pairs"]) == 6  # rail 7 of b has no peer on c
    findings = verify_filters.perftest_unpaired(["a", "b", "c"], "ring", rails=rails)
    assert [(f["host"], f["peer"], f["check"], f["severity"], f["rail"]) for f in findings] == [
        ("c", "b", "perftest_rails", "error", 7), ("c", "a", "perftest_rails", "error", 7)]
    assert findings[0]["expected"] == "8 compute rails, as b has"
    assert findings[0]["found"] == ("c has 7 compute rails, b has 8: rail 7 of b (mlx5_5:1) has no peer and was not "
                                    "tested")
    assert "rdma_allow_uneven_rails" in findings[0]["fix"]
    relaxed = verify_filters.perftest_unpaired(["a", "b", "c"], "ring", rails=rails, allow_uneven="true")
    assert {f["severity"] for f in relaxed} == {"warning"}
    # storage ports: a warning, only when the storage matrix runs
    storage = {"a": plans["a"]["storage"], "b": plans["b"]["storage"][:1]}
    (f,) = perftest_rounds.unpaired(["a", "b"], "ring", storage=storage)
    assert (f["host"], f["check"], f["severity"]) == ("b", "perftest_storage", "warning") and "rail" not in f
    # the findings go into the report, where the schema takes them
    report = verify_report.assemble({"hosts": [], "spec": {}, "nccl": [], "perftest_unpaired": findings}, 90)
    assert report["verdict"] == "fail" and fabric_report.validate_report(report) == []


def test_rails_of_other_link_layers_are_not_paired():
    rails = {"a": [{"hca": "x", "port": 1, "link_layer": "InfiniBand"}, {"hca": "y", "port": 1, "link_layer": "InfiniBand"}],
             "b": [{"hca": "x", "port": 1, "link_layer": "InfiniBand"}, {"hca": "z", "port": 1, "link_layer": "Ethernet"}]}
    assert verify_filters.perftest_rounds(["a", "b"], "ring", rails=rails) == [{"round": 0, "rail": 0, "pairs": [["a", "b"]]}]
    (f,) = verify_filters.perftest_unpaired(["a", "b"], "ring", rails=rails)
    assert f["found"] == "rail 1 is InfiniBand on a (y:1) and Ethernet on b (z:1): not tested"


# ------------------------------------------------------------------------------------------- expectations per role
def _verify(hosts, spec=None):
    return rdma_verify.verify(dict((name, {"group": group, "rdma": rdma}) for name, (group, rdma) in hosts.items()),
                              spec or {})


def test_healthy_storage_ports_are_no_finding_against_the_rails_rate():
    result = _verify({"a": ("roce", roce_a()), "b": ("roce", roce_b())})
    assert result["findings"] == [] and result["verdict"] == "pass"
    refs = result["references"]["roce"]
    assert (refs["rate_gbps"], refs["rails"]) == (400.0, 8)
    assert refs["storage"] == {"ports": 2, "link_layer": "Ethernet", "rate_gbps": 200.0, "width": "4X",
                               "mtu": {"0": 9000, "1": 9000}}
    # a declared rate of the rails is not the storage ports' rate
    assert _verify({"a": ("roce", roce_a()), "b": ("roce", roce_b())}, {"expected_rate_gbps": 400})["findings"] == []
    dgx_result = _verify({"g1": ("infiniband", dgx(1)), "g2": ("infiniband", dgx(2))})
    assert dgx_result["findings"] == []
    assert dgx_result["hosts"]["g1"]["checks"]["link_layer"] == "pass"


def test_a_slow_storage_port_is_judged_against_the_storage_ports():
    slow = roce_b()
    slow["devices"]["roce_st1"]["ports"]["1"]["rate_gbps"] = 100.0
    result = _verify({"a": ("roce", roce_a()), "b": ("roce", slow), "c": ("roce", roce_a())})
    (f,) = result["findings"]
    assert (f["host"], f["check"], f["device"], f["severity"]) == ("b", "rate", "roce_st1", "error")
    assert f["expected"] == "200 Gb/s (most common rate of the storage ports of the roce group)"
    declared = _verify({"a": ("roce", roce_a()), "b": ("roce", slow)}, {"expected_storage_rate_gbps": 200})
    assert [(f["device"], f["expected"]) for f in declared["findings"]] == [
        ("roce_st1", "200 Gb/s (spec (verify_expected_storage_rate_gbps))")]


def test_storage_mtu_is_compared_with_the_storage_ports_and_declared_per_role():
    hosts = {"a": {"group": "roce", "rdma": roce_a(), "expect": {"mtu": 9000, "storage_mtu": 4200}},
             "b": {"group": "roce", "rdma": roce_b(), "expect": {"mtu": 9000}}}
    found = [(f["host"], f["device"], f["severity"], f["expected"]) for f in rdma_verify.verify(hosts, {})["findings"]]
    assert found == [("a", "roce_st0", "error", "4200 (declared)"), ("a", "roce_st1", "error", "4200 (declared)")]


# ----------------------------------------------------------------------------------------------- the MTU per rail
def _two_rail_ib(host, mtus):
    """The demo's InfiniBand host: two rails whose IPoIB netdevs keep their MTU (rail 1 at 2044 by default)."""
    return _host([("mlx5_%d" % r, "0000:%s:00.0" % bus, "InfiniBand", 400.0, "ibp%ds0" % int(bus, 16), mtu, CX7)
                  for r, (bus, mtu) in enumerate(zip(("18", "40"), mtus))], host)


def test_mtu_is_compared_rail_by_rail_not_across_the_rails():
    hosts = {"ib01": ("infiniband", _two_rail_ib(1, (4092, 2044))), "ib02": ("infiniband", _two_rail_ib(2, (4092, 2044)))}
    result = _verify(hosts)
    assert result["findings"] == [] and result["hosts"]["ib01"]["checks"]["mtu"] == "pass"
    assert result["references"]["infiniband"]["rail_mtu"] == {"0": 4092, "1": 2044}
    hosts["ib03"] = ("infiniband", _two_rail_ib(3, (4092, 4092)))
    (f,) = _verify(hosts)["findings"]
    assert (f["host"], f["device"], f["severity"], f["found"]) == ("ib03", "mlx5_1", "warning", "4092 on ibp64s0")
    assert f["expected"] == "2044 (most common MTU of rail 1 in the infiniband group)"


# ------------------------------------------------------------------------------------------------- nccl.conf roles
def test_nccl_conf_naming_a_storage_port_or_leaving_out_a_rail_is_a_warning():
    rdma = roce_a()
    listed = ",".join("%s:1" % name for name in A_NAMES[:7]) + ",roce_st0:1"
    findings = verify_plan.nccl_conf_findings("a", {"NCCL_IB_HCA": "=" + listed}, rdma, fabrics=["roce"])
    assert [(f["device"], f["severity"], f["expected"]) for f in findings] == [
        ("roce_st0", "warning", "compute ports only (a storage port is not a rail)"),
        (A_NAMES[7], "warning", "every ACTIVE compute port (rail 7)")]
    full = "=" + ",".join("%s:1" % name for name in A_NAMES)
    assert verify_plan.nccl_conf_findings("a", {"NCCL_IB_HCA": full}, rdma, fabrics=["roce"]) == []


# ----------------------------------------------------------------------------------------------------- the report
def test_report_shows_each_port_with_its_role_and_rail():
    plans = {"a": verify_plan.host_plan(roce_a(), "roce"), "b": verify_plan.host_plan(roce_b(), "roce")}
    results = [{"test": "ib_write_bw", "rail": 0, "round": 0, "client": "a", "server": "b", "device": A_NAMES[0],
                "server_device": B_NAMES[0], "link_layer": "Ethernet", "line_rate_gbps": 400.0,
                "summary": {"bw_avg_gbps": 384.0}, "failure": None},
               {"test": "ib_write_bw", "rail": 1, "round": 0, "role": "storage", "client": "a", "server": "b",
                "device": "roce_st1", "server_device": "roce_st1", "link_layer": "Ethernet", "line_rate_gbps": 200.0,
                "summary": {"bw_avg_gbps": 190.0}, "failure": None}]
    hosts = [{"inventory_hostname": name, "verify_plan": plan, "verify_perftest_results": results if name == "a" else []}
             for name, plan in plans.items()]
    report = verify_report.assemble({"hosts": hosts, "spec": {}, "nccl": []}, 90)
    assert fabric_report.validate_report(report) == []
    ports = report["hosts"]["b"]["ports"]
    assert ports[0] == {"id": "mlx5_3:1", "role": "compute", "rail": 0, "link_layer": "Ethernet", "state": "ACTIVE",
                        "rate_gbps": 400.0, "netdev": "ens05"}
    assert [(p["id"], p["role"], p.get("rail")) for p in ports[7:]] == [
        ("mlx5_5:1", "compute", 7), ("roce_st0:1", "storage", None), ("roce_st1:1", "storage", None)]
    assert [(r.get("role", "compute"), r["rail"], r["device"], r["server_device"]) for r in report["perftest"]] == [
        ("compute", 0, A_NAMES[0], "mlx5_3"), ("storage", 1, "roce_st1", "roce_st1")]
    page = fabric_report_html.render_html(report)
    assert 'data-port="mlx5_3:1" data-role="compute" data-rail="0"' in page and ">mlx5_3:1 compute rail 0<" in page
    assert 'data-port="roce_st1:1" data-role="storage"' in page and ">roce_st1:1 storage<" in page
    assert "<h3>Rail 0 \u00b7 ib_write_bw \u00b7 mlx5_3, rocep12s0: 1 pair(s) tested</h3>" in page
    assert "<h3>Storage port 1 \u00b7 ib_write_bw \u00b7 roce_st1: 1 pair(s) tested</h3>" in page
    assert 'data-role="storage" data-rail="1"' in page


def test_a_port_role_the_report_does_not_know_is_refused():
    plans = {"a": copy.deepcopy(verify_plan.host_plan(roce_a(), "roce"))}
    plans["a"]["ports"][0]["role"] = "gpu"
    with pytest.raises(fabric_report.ReportError, match=r'hosts\["a"\]\.ports\[0\]\.role must be one of compute'):
        verify_report.assemble({"hosts": [{"inventory_hostname": "a", "verify_plan": plans["a"]}]}, 90)
