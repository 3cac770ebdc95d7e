"""The roce role's one validation path (plugins/module_utils/qos/roce_profile.py): the ports it picks, the QoS it asks
for, and one message per problem, naming the variable the user set. The rules shared with the roce_qos module come
from that module's validate() under the role's names, so a rule changed there changes here."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import roce_profile, roce_qos

# two Ethernet ports of a ConnectX-7 (one down) and an InfiniBand port, as rdma_facts reports them
RDMA = {"devices": {
    "mlx5_0": {"ports": {"1": {"link_layer": "Ethernet", "state": "ACTIVE", "netdev": "enp12s0np0"}}},
    "mlx5_1": {"ports": {"1": {"link_layer": "Ethernet", "state": "DOWN", "netdev": "enp140s0np0"}}},
    "mlx5_2": {"ports": {"1": {"link_layer": "InfiniBand", "state": "ACTIVE", "netdev": "ibp24s0"}}},
}}
DEFAULTS = {"roce_interfaces": [], "roce_dscp": 26, "roce_priority": 3, "roce_pfc_priorities": [3],
            "roce_ecn_priorities": [3], "roce_cnp_dscp": 48, "roce_cnp_priority": 6, "roce_tos": 106, "roce_dcqcn": {},
            "roce_global_pause": False, "roce_lossless": True, "roce_mtu": 9000, "roce_addresses": {}}


def run(**changes):
    return roce_profile.profile(dict(DEFAULTS, **changes), RDMA)


def test_defaults_pick_the_active_ethernet_ports_and_map_both_dscps():
    p = run()
    old_keys = ("netdevs", "ethernet_netdevs", "pfc", "ecn", "dscp2prio", "errors")
    assert dict((key, p[key]) for key in old_keys) == {
        "netdevs": ["enp12s0np0"], "ethernet_netdevs": ["enp12s0np0", "enp140s0np0"], "pfc": [3], "ecn": [3],
        "dscp2prio": {26: 3, 48: 6}, "errors": []}
    # issue 23: the ports by role, and the settings of each netdev (here the compute profile)
    assert p["compute_netdevs"] == ["enp12s0np0"] and p["storage_netdevs"] == [] and p["link_type_ports"] == []
    assert p["qos"] == {"enp12s0np0": {"role": "compute", "trust": "dscp", "pfc": [3], "ecn": [3], "dscp2prio": {26: 3, 48: 6},
                                       "cnp_dscp": 48, "cnp_priority": 6, "dcqcn": {}, "tos": 106, "mode": "v2",
                                       "global_pause": False}}


def test_inputs_as_extra_vars_give_strings_and_comma_lists():
    p = run(roce_dscp="24", roce_tos="98", roce_pfc_priorities="3,4", roce_interfaces="enp140s0np0,enp12s0np0,enp140s0np0")
    assert p["errors"] == []
    assert p["pfc"] == [3, 4] and p["netdevs"] == ["enp140s0np0", "enp12s0np0"] and p["dscp2prio"] == {24: 3, 48: 6}


@pytest.mark.parametrize("changes, message", [
    ({"roce_priority": 9}, "roce_priority must be an integer 0-7; got 9"),
    ({"roce_dscp": 64, "roce_tos": 2}, "roce_dscp must be an integer 0-63; got 64"),
    ({"roce_cnp_priority": 3}, "roce_cnp_priority 3 is a PFC priority (roce_pfc_priorities [3])"),
    ({"roce_global_pause": "yes"}, "roce_global_pause must be false when roce_pfc_priorities enables priorities [3]"),
    ({"roce_pfc_priorities": [8]}, "roce_pfc_priorities must be a list of priorities 0-7; got [8]"),
    ({"roce_pfc_priorities": [True]}, "roce_pfc_priorities takes numbers, not true/false; got [true]."),
    ({"roce_mtu": True}, "roce_mtu takes numbers, not true/false; got true."),
    ({"roce_dcqcn": {"rpg_gd": 99}}, "roce_dcqcn.rpg_gd must be an integer 1-15 (log2 shift); got 99"),
    ({"roce_dcqcn": {"rpg_fast": 1}}, "roce_dcqcn has no parameter 'rpg_fast'"),
    ({"roce_cnp_dscp": 26}, "roce_cnp_dscp 26 is roce_dscp"),
    ({"roce_tos": 104}, "roce_tos 104 has ECN bits 0 (Not-ECT); use ECT(0) (DSCP << 2 | 2, 106)"),
    ({"roce_tos": 98}, "roce_tos 98 carries DSCP 24 (ToS >> 2), not roce_dscp 26; use 106"),
    ({"roce_mtu": 100000}, "roce_mtu must be 576-9978 bytes"),
    ({"roce_interfaces": ["ibp24s0"]}, "roce_interfaces ['ibp24s0'] are not Ethernet ports of an RDMA device; those here: enp12s0np0, enp140s0np0."),
    ({"roce_addresses": {"enp140s0np0": "10.0.2.11/24"}}, "roce_addresses names ['enp140s0np0'], which roce_interfaces does not configure (enp12s0np0)."),
    ({"roce_addresses": {"enp12s0np0": "10.0.1.300"}}, "roce_addresses takes an IPv4 address/prefix per netdev (10.0.1.11/24); got ['10.0.1.300']."),
    ({"roce_pfc_priorities": []}, "roce_pfc_priorities is empty: a lossless RoCE profile needs PFC on at least one priority"),
    ({"roce_lossless": False}, "roce_lossless is false (RoCE without PFC), but roce_pfc_priorities enables [3]"),
])
def test_each_problem_names_the_variable_the_user_set(changes, message):
    p = run(**changes)
    assert any(message in e for e in p["errors"]), p["errors"]
    assert p["dscp2prio"] == {}


def test_a_boolean_is_reported_once_not_also_as_out_of_range():
    assert run(roce_priority=True)["errors"] == ["roce_priority takes numbers, not true/false; got true."]


def test_roce_without_pfc_is_a_choice_the_user_states():
    p = run(roce_lossless="false", roce_pfc_priorities=[])
    assert p["errors"] == [] and p["pfc"] == []


def test_no_active_ethernet_port_is_refused():
    rdma = {"devices": {"mlx5_0": {"ports": {"1": {"link_layer": "Ethernet", "state": "DOWN", "netdev": "enp12s0np0"}}}}}
    assert roce_profile.profile(DEFAULTS, rdma)["errors"] == [
        "No ACTIVE Ethernet port of an RDMA device on this host; set roce_interfaces."]


def test_the_module_rules_are_the_modules_own():
    """A rule the module has is applied through roce_qos.validate, with the names the role maps to."""
    module = roce_qos.validate({"pfc": [3], "cnp_priority": 3})
    role = run(roce_cnp_priority=3)["errors"]
    assert module == ["cnp_priority 3 is a PFC priority (pfc [3]): CNPs must not be paused behind the traffic they slow down"]
    assert role == [module[0].replace("cnp_priority", "roce_cnp_priority").replace("(pfc", "(roce_pfc_priorities")]


@pytest.mark.parametrize("value", [5, True, [["enp12s0np0"]], [{"a": 1}], {"enp12s0np0": 1}])
def test_interfaces_that_are_no_netdev_names_are_refused_without_a_crash(value):
    assert run(roce_interfaces=value)["errors"] == [
        "roce_interfaces takes netdev names (a list of strings such as enp12s0np0); got %r." % (value,)]


def test_one_priority_given_alone_is_a_list_of_one():
    p = run(roce_pfc_priorities=3, roce_ecn_priorities="3")
    assert p["errors"] == [] and p["pfc"] == [3] and p["ecn"] == [3]


@pytest.mark.parametrize("changes, only", [
    ({"roce_dscp": -1}, "roce_dscp must be an integer 0-63; got -1"),
    ({"roce_tos": 10 ** 30}, "roce_tos must be an integer 0-255; got %d" % 10 ** 30),
])
def test_a_value_out_of_range_is_not_also_compared_with_the_others(changes, only):
    assert run(**changes)["errors"] == [only]


def test_an_address_with_a_trailing_newline_is_no_address():
    assert "roce_addresses takes an IPv4 address/prefix" in run(roce_addresses={"enp12s0np0": "10.0.1.11/24\n"})["errors"][0]


def test_the_netdevs_of_one_roce_qos_call_are_the_declared_parameters_of_each_netdev():
    prof = run(roce_dcqcn={"rpg_min_rate": 100})
    declared = roce_profile.declared_qos(prof, "apply", "auto")
    entries = roce_profile.qos_netdevs(prof)
    assert not prof["errors"] and len(entries) == len(prof["netdevs"]) >= 1 and all("backend" not in e for e in entries)
    assert [e["netdev"] for e in entries] == prof["netdevs"] == list(declared)
    assert all(dict(e, backend="auto", netdev=None) == dict(declared[e["netdev"]], netdev=None) for e in entries)
    # skip: ECN, CNP and DCQCN left to the firmware; the probe checks DCQCN whatever that setting
    assert all("ecn" not in e and "dcqcn" not in e for e in roce_profile.qos_netdevs(prof, "skip"))
    assert roce_profile.qos_netdevs(prof, "skip", probe=True) == [
        {"netdev": nd, "dcqcn": {"rpg_min_rate": 100}} for nd in prof["netdevs"]]
    assert roce_profile.qos_netdevs(run(roce_pfc_priorities=[9])) == []
