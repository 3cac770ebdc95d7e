"""The switch side of RoCE links (plugins/module_utils/fabric/switch_intent.py): the expected settings of each switch
port a compute port reaches, their NVUE and SONiC renderings (exact text for a small case), SONiC's stock DSCP trap
called out, and one link's agreement checks (switch_dcbx, switch_pfc, switch_app, switch_mtu)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import rail_map, switch_intent as si
from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric.rail_map import FabricInputError

# NVIDIA's lossless RoCE profile, the roce role's defaults
PROFILE = {"dscp": 26, "priority": 3, "lossless": [3], "ecn": [3], "cnp_dscp": 48, "cnp_priority": 6, "mtu": 9000}
HOSTS = dict(("node%d" % n, [{"rail": r, "device": "mlx5_%d" % r, "port": 1,
                              "peer": {"system_name": "leaf-r%d" % r, "port_id": "swp%d" % n}} for r in range(2)])
             for n in (1, 2))
# what a Spectrum switch in NVUE's RoCE lossless mode advertises on a host port
GOOD_PEER = {"system_name": "leaf-r0", "port_id": "swp1", "mfs": 9238,
             "dcbx": {"pfc": {"willing": False, "enabled": [3]},
                      "app": [{"selector": 5, "protocol": 26, "priority": 3}, {"selector": 3, "protocol": 4791,
                                                                               "priority": 3}], "ets": None}}

NVUE_LEAF_R0 = """\
# leaf-r0: RoCE lossless for 2 host port(s) (hpcnet.rdma switch intent)
nv set qos roce mode lossless
nv set qos mapping default-global trust both
nv set qos mapping default-global dscp 26 switch-priority 3
nv set qos mapping default-global dscp 48 switch-priority 6
nv set qos pfc default-global switch-priority 3
nv set qos egress-queue-mapping default-global switch-priority 3 traffic-class 3
nv set qos egress-queue-mapping default-global switch-priority 6 traffic-class 6
nv set qos congestion-control default-global traffic-class 3 ecn enable
nv set interface swp1,swp2 link mtu 9000
# lldp TLV switches take on/off up to Cumulus Linux 5.14, enabled/disabled from 5.15
nv set interface swp1,swp2 lldp dcbx-pfc-tlv on
nv set interface swp1,swp2 lldp application-tlv udp-port 4791
nv config apply
"""

SONIC_LEAF_R0 = [
    {"op": "add", "path": "/DSCP_TO_TC_MAP/AZURE/26", "value": "3"},
    {"op": "add", "path": "/DSCP_TO_TC_MAP/AZURE/48", "value": "6"},
    {"op": "add", "path": "/PORT_QOS_MAP/Ethernet0/pfc_enable", "value": "3"},
    {"op": "add", "path": "/PORT_QOS_MAP/Ethernet8/pfc_enable", "value": "3"},
    {"op": "add", "path": "/WRED_PROFILE/AZURE_LOSSLESS/ecn", "value": "ecn_all"},
    {"op": "add", "path": "/QUEUE/Ethernet0|3/wred_profile", "value": "AZURE_LOSSLESS"},
    {"op": "add", "path": "/QUEUE/Ethernet8|3/wred_profile", "value": "AZURE_LOSSLESS"},
    {"op": "add", "path": "/PORT/Ethernet0/mtu", "value": "9000"},
    {"op": "add", "path": "/PORT/Ethernet8/mtu", "value": "9000"},
]


def spec(profile=None, **kwargs):
    return si.intent(rail_map.build(HOSTS)["rail_map"], profile or PROFILE, **kwargs)


def test_intent_gives_every_reached_switch_port_the_hosts_profile():
    out = spec()
    assert list(out) == ["leaf-r0", "leaf-r1"]
    leaf = out["leaf-r0"]
    assert (leaf["dscp_to_priority"], leaf["lossless"], leaf["ecn"], leaf["cnp_priority"], leaf["conflicts"]) == (
        {26: 3, 48: 6}, [3], [3], 6, [])
    assert leaf["ports"]["swp2"] == {"host": "node2", "rail": 0, "device": "mlx5_0", "port": 1, "lossless": [3],
                                     "ecn": [3], "mtu": 9000}
    assert spec(switch_mtu=9216)["leaf-r1"]["ports"]["swp1"]["mtu"] == 9216
    assert si.intent_for_report(out)["leaf-r0"]["dscp_to_priority"] == {"26": 3, "48": 6}


def test_a_host_with_another_dscp_map_on_the_same_switch_is_a_conflict():
    other = dict(PROFILE, priority=4, lossless=[4], ecn=[4])
    leaf = spec(host_profiles={"node2": other})["leaf-r0"]
    assert leaf["conflicts"] == ["DSCP 26: priority 4 for node2, 3 for another host on leaf-r0"]
    assert leaf["lossless"] == [3, 4]
    assert "# CONFLICT: DSCP 26: priority 4 for node2" in si.render_nvue("leaf-r0", leaf)


def test_the_nvue_rendering_of_a_small_case_is_exact():
    assert si.render_nvue("leaf-r0", spec()["leaf-r0"]) == NVUE_LEAF_R0


def test_nvue_renders_a_pcp_profile_as_an_l2_trust_map_and_a_profile_without_pfc_as_lossy():
    text = si.render_nvue("leaf-r0", spec(dict(PROFILE, trust="pcp"))["leaf-r0"])
    assert "nv set qos mapping default-global trust l2\nnv set qos mapping default-global pcp 3 switch-priority 3\n" \
           "nv set qos mapping default-global pcp 6 switch-priority 6\n" in text
    lossy = si.render_nvue("leaf-r0", spec(dict(PROFILE, lossless=[]))["leaf-r0"])
    assert "nv set qos roce mode lossy\n" in lossy and "qos pfc" not in lossy and "dcbx-pfc-tlv" not in lossy


def test_the_sonic_patch_of_a_small_case_is_exact_and_calls_out_the_stock_dscp_trap():
    out = si.render_sonic("leaf-r0", spec()["leaf-r0"], port_names={"swp1": "Ethernet0", "swp2": "Ethernet8"})
    assert out["patch"] == SONIC_LEAF_R0
    assert json.loads(si.sonic_patch_text(out["patch"])) == SONIC_LEAF_R0
    assert si.sonic_patch_text(out["patch"]).startswith('[\n  {\n    "op": "add",\n    "path": "/DSCP_TO_TC_MAP/AZURE/26"')
    assert out["notes"][0] == (
        "SONiC's stock AZURE map (qos_config.j2) sends DSCP 26 to TC 1 (lossy), not 3: without the "
        "/DSCP_TO_TC_MAP/AZURE/26 entry of this patch the hosts' traffic on DSCP 26 is dropped under congestion while "
        "every host check passes")
    assert not any("alias" in note for note in out["notes"])  # the port names were given


def test_sonics_stock_map_is_the_templates_and_a_dscp_it_already_maps_gets_no_trap_note():
    assert [si.sonic_stock_tc(d) for d in (3, 4, 5, 8, 26, 46, 48, 63)] == [3, 4, 2, 0, 1, 5, 6, 1]
    notes = si.render_sonic("leaf-r0", spec(dict(PROFILE, dscp=3))["leaf-r0"])["notes"]
    assert not any("stock AZURE map" in note for note in notes)


def test_the_sonic_notes_name_what_the_patch_cannot_carry():
    notes = si.render_sonic("leaf-r0", spec(dict(PROFILE, priority=5, lossless=[5], ecn=[5]))["leaf-r0"])["notes"]
    assert any(n.startswith("priority 5 is not one of SONiC's stock lossless priorities (3, 4)") for n in notes)
    assert any("SONiC's LLDP sends a port's alias as its port id" in n for n in notes)


def test_json_pointer_parts_are_escaped():
    assert si._pointer("PORT", "Eth1/1", "a~b") == "/PORT/Eth1~11/a~0b"


def test_a_switch_that_agrees_gives_no_finding():
    assert si.agreement("node1", "mlx5_0", 1, GOOD_PEER, PROFILE, rail=0) == []
    assert si.agreement("node1", "mlx5_0", 1, None, PROFILE) == []


def test_no_dcbx_tlvs_is_a_warning_unknown_never_a_pass_with_how_to_turn_them_on():
    peer = dict(GOOD_PEER, dcbx=None)
    (f,) = si.agreement("node1", "mlx5_0", 1, peer, PROFILE, rail=0)
    assert (f["check"], f["severity"], f["peer"], f["rail"]) == ("switch_dcbx", "warning", "leaf-r0:swp1", 0)
    assert "whether it is lossless on priority 3 for DSCP 26 is unknown, never a pass" in f["cause"]
    assert "nv set interface swp1 lldp dcbx-pfc-tlv on" in f["fix"]


def test_a_switch_port_lossy_on_the_roce_priority_is_named_with_what_to_set():
    peer = dict(GOOD_PEER, dcbx=dict(GOOD_PEER["dcbx"], pfc={"willing": False, "enabled": [4]}))
    (f,) = si.agreement("node1", "mlx5_0", 1, peer, PROFILE)
    assert (f["check"], f["severity"], f["expected"], f["found"]) == ("switch_pfc", "error", "PFC on priority 3",
                                                                      "PFC on 4")
    assert f["cause"].startswith("leaf-r0 swp1 has no PFC on priority 3")
    assert "nv set qos pfc default-global switch-priority 3" in f["fix"]
    assert '"path": "/PORT_QOS_MAP/swp1/pfc_enable", "value": "3"' in f["fix"]


def test_a_profile_without_pfc_asks_no_pfc_of_the_switch():
    peer = dict(GOOD_PEER, dcbx=dict(GOOD_PEER["dcbx"], pfc={"willing": False, "enabled": []}))
    assert si.agreement("node1", "mlx5_0", 1, peer, dict(PROFILE, lossless=[])) == []


def test_sonics_stock_dscp_map_advertised_is_a_switch_app_error_with_the_patch_entry():
    stock = [{"selector": 5, "protocol": d, "priority": si.sonic_stock_tc(d)} for d in range(64)]
    peer = dict(GOOD_PEER, dcbx=dict(GOOD_PEER["dcbx"], app=stock))
    (f,) = si.agreement("node1", "mlx5_0", 1, peer, PROFILE)
    assert (f["check"], f["expected"], f["found"]) == ("switch_app", "DSCP 26 -> priority 3", "DSCP 26 -> priority 1")
    assert '"path": "/DSCP_TO_TC_MAP/AZURE/26", "value": "3"' in f["fix"]
    assert "nv set qos mapping default-global dscp 26 switch-priority 3" in f["fix"]


def test_an_app_table_that_leaves_the_roce_dscp_out_is_an_error():
    peer = dict(GOOD_PEER, dcbx=dict(GOOD_PEER["dcbx"], app=[{"selector": 5, "protocol": 24, "priority": 3}]))
    (f,) = si.agreement("node1", "mlx5_0", 1, peer, PROFILE)
    assert (f["check"], f["severity"], f["found"]) == ("switch_app", "error", "DSCP entries for 24 only")


def test_udp_4791_on_another_priority_is_an_error_and_on_the_right_one_is_enough():
    udp_only = [{"selector": 3, "protocol": 4791, "priority": 3}]
    assert si.agreement("node1", "mlx5_0", 1, dict(GOOD_PEER, dcbx=dict(GOOD_PEER["dcbx"], app=udp_only)), PROFILE) == []
    wrong = [{"selector": 4, "protocol": 4791, "priority": 5}]
    (f,) = si.agreement("node1", "mlx5_0", 1, dict(GOOD_PEER, dcbx=dict(GOOD_PEER["dcbx"], app=wrong)), PROFILE)
    assert (f["check"], f["found"]) == ("switch_app", "UDP 4791 -> priority 5")


def test_no_app_entry_for_roce_is_a_warning():
    (f,) = si.agreement("node1", "mlx5_0", 1, dict(GOOD_PEER, dcbx=dict(GOOD_PEER["dcbx"], app=[])), PROFILE)
    assert (f["check"], f["severity"]) == ("switch_app", "warning")


@pytest.mark.parametrize("mfs,trust,checks", [
    (9018, "dscp", []),                 # MTU 9000 + header 14 + FCS 4
    (9017, "dscp", ["switch_mtu"]),
    (9022, "pcp", []),                  # + an 802.1Q tag
    (9018, "pcp", ["switch_mtu"]),
    (1518, "dscp", ["switch_mtu"]),
])
def test_the_switch_frame_size_must_fit_the_host_mtu_with_the_l2_overhead(mfs, trust, checks):
    prof = dict(PROFILE, trust=trust) if trust == "pcp" else PROFILE
    found = si.agreement("node1", "mlx5_0", 1, dict(GOOD_PEER, mfs=mfs), prof)
    assert [f["check"] for f in found] == checks
    if checks:
        assert found[0]["severity"] == "error"
        assert "nv set interface swp1 link mtu 9000" in found[0]["fix"] and '"/PORT/swp1/mtu"' in found[0]["fix"]


def test_no_frame_size_tlv_is_a_warning():
    (f,) = si.agreement("node1", "mlx5_0", 1, dict(GOOD_PEER, mfs=None), PROFILE)
    assert (f["check"], f["severity"], f["found"]) == ("switch_mtu", "warning", "no maximum frame size TLV")


def test_link_profile_reads_the_roce_roles_netdev_settings():
    qos = {"role": "compute", "trust": "dscp", "pfc": [3], "ecn": [3], "dscp2prio": {26: 3, 48: 6}, "cnp_dscp": 48,
           "cnp_priority": 6, "dcqcn": {}, "tos": 106, "mode": "v2", "global_pause": False}
    assert si.link_profile(qos, 9000) == dict(PROFILE, trust="dscp")


@pytest.mark.parametrize("change,message", [
    ({"dscp": 64}, "profile.dscp must be a DSCP 0-63"),
    ({"priority": True}, "profile.priority must be a priority 0-7"),
    ({"lossless": [8]}, "profile.lossless must be a list of priorities 0-7"),
    ({"mtu": "9000"}, "profile.mtu must be the host netdev's MTU in bytes"),
    ({"trust": "port"}, "profile.trust must be one of dscp, pcp"),
    ({"tos": 106}, "profile: unknown key(s) tos"),
])
def test_a_bad_profile_is_refused_naming_the_key(change, message):
    with pytest.raises(FabricInputError) as err:
        si.validate_profile(dict(PROFILE, **change))
    assert message in str(err.value)


def test_a_declared_profile_takes_the_roce_roles_parameters_and_the_firmware_cnp_defaults():
    params = {"trust": "dscp", "pfc": [3], "dscp2prio": {"26": 3, "48": 6}, "roce_tos": 106, "traffic_class": 106}
    prof = si.declared_profile(params, 9000)
    assert (prof["dscp"], prof["priority"], prof["lossless"], prof["mtu"]) == (26, 3, [3], 9000)
    assert (prof["cnp_dscp"], prof["cnp_priority"]) == (48, 6)
    assert si.declared_profile(dict(params, cnp_dscp=46, cnp_priority=5), 4200)["cnp_dscp"] == 46
    assert si.declared_profile({"pfc": [3]}, 9000) is None and si.declared_profile(params, None) is None
