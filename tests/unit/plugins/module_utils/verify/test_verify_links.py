"""verify's `links` check (module_utils/verify/verify_links.py): the rail map, InfiniBand links from both ends and the
RoCE switches' lossless agreement, on rdma_facts output of simulated hosts whose ports carry peers as
module_utils/fabric/peers.attach writes them (the shapes of fabric/lldp.py and fabric/ib_peers.py)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify import rdma_verify as v, verify_fabric as vf
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.fabric_report_html import render_html
from ansible_collections.hpcnet.rdma.plugins.module_utils.verify.verify_report import assemble

KIT = Path(__file__).resolve().parents[4] / "simhost"
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position

IB = "cx7_ib_ndr_8x"
ROCE = "cx7_roce_400g_2x"
OK = {"state": "ok", "reason": None}
NO_PORTS = {"state": "no_ports", "reason": "none asked"}
# the roce role's declared parameters of a compute netdev (roce_declared_qos), NVIDIA's RoCE profile
DECLARED = {"backend": "auto", "trust": "dscp", "pfc": [3], "dscp2prio": {"26": 3, "48": 6}, "traffic_class": 106,
            "roce_tos": 106, "roce_mode": "RoCE v2", "global_pause": False, "ecn": [3], "cnp_dscp": 48,
            "cnp_priority": 6}
# what an SN5600 running Cumulus's `nv set qos roce` advertises (PFC 3, APP DSCP 26 -> 3, CNP 48 -> 6)
LOSSLESS_DCBX = {"pfc": {"willing": False, "enabled": [3]},
                 "app": [{"selector": 5, "protocol": 26, "priority": 3}, {"selector": 5, "protocol": 48, "priority": 6}],
                 "ets": None}


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    cache = {}

    def _facts(name, index):
        if (name, index) not in cache:
            root = tmp_path_factory.mktemp("sys")
            simhost.build_tree(copy.deepcopy(simhost.load(name)), root, host_index=index)
            rdma = gather_rdma_sysfs(str(root))
            rdma["memlock"] = {"soft": "unlimited", "hard": "unlimited"}
            cache[(name, index)] = rdma
        return copy.deepcopy(cache[(name, index)])
    return _facts


def _ports(rdma):
    """[(device, port number, port facts)] in device and port order."""
    return [(d, n, p) for d, dev in sorted(rdma["devices"].items()) for n, p in sorted(dev["ports"].items())]


def ib_host(facts, index, switch_of=lambda rail: "leaf-r%d" % rail, width=None, could_be=None):
    """An InfiniBand host whose port of rail r reaches ``switch_of(r)`` port ``index``; ``width``/``could_be``
    ({rail: value}) change a switch end."""
    rdma = facts(IB, index)
    for rail, (dev, _num, port) in enumerate(_ports(rdma)):
        # as fabric/ib_peers parses iblinkinfo: the switch port and LID are numbers
        port["peer"] = {"system_name": switch_of(rail), "guid": "0x%016x" % (0xb0 + rail), "port_id": index,
                        "lid": 100 + rail, "node_type": "Switch",
                        "width": (width or {}).get(rail, "4X"), "speed": "106.25 Gbps",
                        "hca_width": "4X", "hca_speed": "106.25 Gbps", "could_be": (could_be or {}).get(rail)}
    rdma["peers"] = {"lldp": NO_PORTS, "infiniband": OK, "problems": []}
    return {"group": "infiniband", "rdma": rdma}


def roce_host(facts, index, dcbx=LOSSLESS_DCBX, mfs=9216, lldp=OK, declared=True):
    rdma = facts(ROCE, index)
    netdevs = []
    for rail, (_dev, _num, port) in enumerate(_ports(rdma)):
        netdevs.append(port["netdev"])
        port["peer"] = None if lldp is not OK else {
            "system_name": "leaf-r%d" % rail, "system_description": "Cumulus Linux 5.9", "chassis_id": "mac 1c:34:da:00:00:0%d" % rail,
            "port_id": "swp%d" % index, "port_description": "swp%d" % index, "mgmt_address": None, "mfs": mfs,
            "dcbx": copy.deepcopy(dcbx)}
    rdma["peers"] = {"lldp": lldp, "infiniband": NO_PORTS, "problems": []}
    entry = {"group": "roce", "rdma": rdma}
    if declared:
        entry["roce_declared_qos"] = dict((nd, dict(DECLARED)) for nd in netdevs)
    return entry


def only(result, check, host=None):
    return [f for f in result["findings"] if f["check"] == check and (host is None or f["host"] == host)]


def test_a_healthy_rail_optimised_fabric_has_its_rail_map_and_no_link_finding(facts):
    hosts = {"ib01": ib_host(facts, 1), "ib02": ib_host(facts, 2), "roce01": roce_host(facts, 1),
             "roce02": roce_host(facts, 2)}
    result = v.verify(hosts, {})
    links = [f for f in result["findings"] if f["check"] in ("peer_missing", "rail_map", "ib_link_width")
             or f["check"].startswith("switch_")]
    assert links == []
    assert result["hosts"]["ib01"]["checks"]["links"] == "pass"
    assert result["rail_map"]["ib02"]["7"] == {"device": "mlx5_7", "port": 1, "switch": "leaf-r7", "switch_port": "2"}
    assert result["rail_map"]["roce01"]["1"]["switch"] == "leaf-r1"
    assert result["rail_map_basis"]["basis"] == "inferred"


def test_a_crossed_cable_names_both_ports_and_both_switch_ports(facts):
    swap = {2: 3, 3: 2}
    hosts = {"ib01": ib_host(facts, 1), "ib02": ib_host(facts, 2), "ib03": ib_host(facts, 3),
             "ib04": ib_host(facts, 4, switch_of=lambda rail: "leaf-r%d" % swap.get(rail, rail))}
    result = v.verify(hosts, {})
    crossed = only(result, "rail_map")
    assert len(crossed) == 1 and crossed[0]["host"] == "ib04" and crossed[0]["severity"] == "error"
    text = crossed[0]["cause"] + crossed[0]["found"]
    assert "mlx5_2:1" in text and "mlx5_3:1" in text and "leaf-r2" in text and "leaf-r3" in text
    assert result["hosts"]["ib04"]["verdict"] == "fail" and result["hosts"]["ib04"]["checks"]["links"] == "fail"
    assert result["hosts"]["ib01"]["checks"]["links"] == "pass"


@pytest.mark.parametrize("change, found", [
    ({"width": {5: "2X"}}, "2X on leaf-r5:1"),
])
def test_an_infiniband_link_trained_down_on_the_switch_side_is_named_with_its_switch_port(facts, change, found):
    hosts = {"ib01": ib_host(facts, 1, **change), "ib02": ib_host(facts, 2)}
    (f,) = only(v.verify(hosts, {}), "ib_link_width")
    assert (f["host"], f["device"], f["port"], f["rail"], f["peer"]) == ("ib01", "mlx5_5", 1, 5, "leaf-r5:1")
    assert found in f["found"] and f["severity"] == "error"


def test_a_switch_port_lossy_on_the_roce_priority_is_an_error_naming_switch_port_and_fix(facts):
    lossy = dict(LOSSLESS_DCBX, pfc={"willing": False, "enabled": []})
    hosts = {"roce01": roce_host(facts, 1, dcbx=lossy), "roce02": roce_host(facts, 2)}
    result = v.verify(hosts, {})
    pfc = only(result, "switch_pfc")
    assert {f["host"] for f in pfc} == {"roce01"} and len(pfc) == 2
    assert pfc[0]["peer"] == "leaf-r0:swp1" and pfc[0]["severity"] == "error"
    assert "priority 3" in pfc[0]["cause"] and "leaf-r0" in pfc[0]["fix"]
    assert result["verdict"] == "fail"


def test_no_dcbx_is_unknown_never_a_pass_and_a_small_frame_size_an_error(facts):
    hosts = {"roce01": roce_host(facts, 1, dcbx=None, mfs=1522), "roce02": roce_host(facts, 2)}
    result = v.verify(hosts, {})
    assert {f["severity"] for f in only(result, "switch_dcbx", "roce01")} == {"warning"}
    mtu = only(result, "switch_mtu", "roce01")
    assert mtu and mtu[0]["severity"] == "error" and "1522" in mtu[0]["found"]


def test_a_host_without_a_declared_profile_is_not_compared_with_its_switch(facts):
    hosts = {"roce01": roce_host(facts, 1, dcbx=None, declared=False), "roce02": roce_host(facts, 2)}
    result = v.verify(hosts, {})
    assert only(result, "switch_dcbx") == []


def test_lldpd_not_running_is_one_warning_per_host_not_one_per_port(facts):
    down = {"state": "lldpd_not_running", "reason": "lldpd is not running (lldpcli cannot reach its socket)"}
    hosts = {"roce01": roce_host(facts, 1, lldp=down), "roce02": roce_host(facts, 2)}
    result = v.verify(hosts, {})
    (f,) = only(result, "peer_missing")
    assert f["host"] == "roce01" and f["severity"] == "warning" and "lldpd is not running" in f["cause"]
    assert "lldpd" in f["fix"]
    assert result["rail_map"]["roce01"]["0"]["switch"] is None


def test_facts_read_without_peers_skip_the_links_check(facts):
    hosts = {"ib01": {"group": "infiniband", "rdma": facts(IB, 1)}, "ib02": ib_host(facts, 2)}
    result = v.verify(hosts, {})
    assert result["hosts"]["ib01"]["checks"]["links"] == "skip"
    assert "ib01" not in result["rail_map"] and "left out" in result["rail_map_basis"]["note"]


@pytest.mark.parametrize("rail_switches, message", [
    ("leaf-*", "rdma_rail_switches must be"),
    (["leaf-r0"], r"rdma_rail_switches has 1 item\(s\)"),
])
def test_a_bad_rail_switches_is_refused_naming_the_variable(facts, rail_switches, message):
    hosts = {"ib01": ib_host(facts, 1), "ib02": ib_host(facts, 2)}
    with pytest.raises(vf.VerifyInputError, match=message):
        v.verify(hosts, {"rail_switches": rail_switches})


def test_declared_rails_catch_a_port_on_a_stray_switch_and_the_report_shows_the_map(facts):
    hosts = {"ib01": ib_host(facts, 1), "ib02": ib_host(facts, 2, switch_of=lambda r: "spare-1" if r == 6 else
                                                          "leaf-r%d" % r)}
    spec = v.verify(hosts, {"rail_switches": ["leaf-r%d" % r for r in range(8)]})
    (f,) = only(spec, "rail_map")
    assert (f["host"], f["device"], f["rail"], f["peer"]) == ("ib02", "mlx5_6", 6, "spare-1:2")
    hostvars = [{"inventory_hostname": h, "verify_plan": {"group": "infiniband"}} for h in hosts]
    report = assemble({"hosts": hostvars, "spec": spec}, 90)
    assert report["rail_map"]["ib02"]["6"]["switch"] == "spare-1"
    assert report["meta"]["rail_map_basis"] == "declared"
    html = render_html(report)
    assert 'id="rail-map"' in html and "spare-1:2" in html and 'class="cell bad"' in html
