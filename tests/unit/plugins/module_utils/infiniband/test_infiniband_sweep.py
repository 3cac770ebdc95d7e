# -*- coding: utf-8 -*-
"""A partition added in a run: the P_Keys partitions.conf gives each port (opensm's member rules), and the wait of
ports.yml that holds the run until the master's sweep has put them in the ports' tables."""

from __future__ import absolute_import, division, print_function

from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import ib_partitions as ibp
from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import infiniband as ib

GUID_A, GUID_B = "0x0c42a10300aa0101", "0x0c42a10300bb0101"
CONF = ("Default=0x7fff,ipoib : ALL=full ;\n"
        "compute=0x0002,ipoib : ALL_CAS=full ;\n"
        "storage=0x0003 : ALL_CAS=limited, %s=full ;\n"
        "switches=0x0005 : ALL_SWITCHES=full ;\n"
        "sm=0x0006 : SELF=full ;\n" % GUID_A)


def _port(guid, pkeys, state="ACTIVE", lid=5):
    return {"link_layer": "InfiniBand", "state": state, "lid": lid, "sm_lid": 1, "netdev": "ibp24s0",
            "port_guid": guid, "pkeys": list(pkeys), "pkey_indexes": dict((p, i) for i, p in enumerate(pkeys))}


def _rdma(*ports):
    return {"devices": dict(("mlx5_%d" % i, {"pci_address": "0000:%02x:00.0" % (0x18 + i), "ports": {"1": port}})
                            for i, port in enumerate(ports)), "stack": {"provider": "inbox"}}


def test_member_pkeys_follow_opensm_member_rules():
    parsed = ibp.parse_partitions(CONF)
    # a later entry for a port replaces the earlier one; switches' and the master SM's own (SELF) do not count
    assert ibp.member_pkeys(parsed, GUID_A) == ["0x8002", "0x8003", "0xffff"]
    assert ibp.member_pkeys(parsed, int(GUID_B, 16)) == ["0x0003", "0x8002", "0xffff"]
    # ALL_CAS=limited after the GUID: limited (opensm applies members in order)
    later = ibp.parse_partitions("Default=0x7fff : ALL=full ;\nst=0x0003 : %s=full, ALL_CAS=limited ;\n" % GUID_A)
    assert ibp.member_pkeys(later, GUID_A) == ["0x0003", "0xffff"]
    # a P_Key defined twice: the definitions merge, the later entry wins; both: the full P_Key is in the table
    twice = ibp.parse_partitions("a=0x0004 : ALL=limited ;\nb=0x0004 : %s=both ;\n" % GUID_A)
    assert ibp.member_pkeys(twice, GUID_A) == ["0x7fff", "0x8004"]  # no 0x7fff rule: opensm's ALL=limited
    assert ibp.member_pkeys(twice, GUID_B) == ["0x0004", "0x7fff"]


def _plan(partitions, sm=True, hosts=None, rdma=None):
    rdma = rdma or _rdma(_port(GUID_A, ["0xffff", "0x8002"]))
    hosts = {"a": {"rdma": rdma, "sm": sm, "sm_priority": 14}} if hosts is None else hosts
    return ib.plan(rdma, partitions, {}, {}, sm, 14, [], hosts, 11)


NEW = {"name": "compute2", "pkey": "0x0004", "members": [{"selector": "ALL_CAS", "membership": "full"}]}
COMPUTE = {"name": "compute", "pkey": "0x0002", "members": [{"selector": "ALL_CAS", "membership": "full"}]}


def test_plan_ports_carry_the_p_keys_of_the_partitions_where_the_play_runs_the_sm():
    plan = _plan([COMPUTE, NEW])
    assert plan["errors"] == []
    assert plan["ports"][0]["member_pkeys"] == ["0x8002", "0x8004", "0xffff"]
    # another SM host of the play manages the subnet: the same
    node = _rdma(_port(GUID_B, ["0xffff"]))
    hosts = {"a": {"rdma": _rdma(_port(GUID_A, ["0xffff"])), "sm": True, "sm_priority": 14},
             "b": {"rdma": node, "sm": False}}
    assert _plan([NEW], sm=False, hosts=hosts, rdma=node)["ports"][0]["member_pkeys"] == ["0x8004", "0xffff"]
    # no SM in the play (the switch's, or a host outside it): its partitions are not the role's to wait for
    assert _plan([NEW], sm=False, hosts={"b": {"rdma": node, "sm": False}}, rdma=node)["ports"][0]["member_pkeys"] == []


def test_a_port_active_before_the_sweep_waits_for_the_new_p_key():
    plan = _plan([COMPUTE, NEW])
    # the SIGHUP has been sent, the master has not swept yet: ACTIVE with a LID, the old table
    before = _rdma(_port(GUID_A, ["0xffff", "0x8002"]))
    assert ib.ports_waiting(before, plan["ports"]) == [
        {"port": "mlx5_0:1", "state": "ACTIVE", "lid": 5, "active": True, "missing_pkeys": ["0x8004"]}]
    # a limited entry is not the full membership the file gives
    assert ib.ports_waiting(_rdma(_port(GUID_A, ["0xffff", "0x8002", "0x0004"])), plan["ports"])[0][
        "missing_pkeys"] == ["0x8004"]
    after = _rdma(_port(GUID_A, ["0xffff", "0x8002", "0x8004"]))
    assert ib.ports_waiting(after, plan["ports"]) == []
    # not ACTIVE, or absent from the facts read now
    assert ib.ports_waiting(_rdma(_port(GUID_A, ["0xffff"], state="INIT", lid=0)), plan["ports"])[0]["active"] is False
    assert ib.ports_waiting({"devices": {}}, plan["ports"])[0]["state"] is None


def test_waiting_message_names_the_ports_and_what_they_lack():
    waiting = [{"port": "mlx5_0:1", "state": "ACTIVE", "lid": 5, "active": True, "missing_pkeys": ["0x8004"]},
               {"port": "mlx5_1:1", "state": "ACTIVE", "lid": 6, "active": True, "missing_pkeys": ["0x8004", "0x0003"]}]
    text = ib.waiting_message(waiting, 120)
    assert text.startswith("mlx5_0:1 lacks 0x8004; mlx5_1:1 lacks 0x8004 0x0003 in its P_Key table 120s after")
    assert "has not swept" in text
    inactive = ib.waiting_message(waiting + [{"port": "mlx5_2:1", "state": "INIT", "lid": 0, "active": False,
                                              "missing_pkeys": []}], 120)
    assert inactive.startswith("mlx5_2:1 did not become ACTIVE with a LID within 120s: no subnet manager is master")
