"""hpcnet.rdma.rdma_facts run on the host (testinfra's Ansible backend) after side_effect's reboot: read-only, and
the values match the scenario's expectations (molecule.yml host_vars) and the profile."""

import re

import pytest

PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def test_facts_module_changes_nothing(rdma_facts_result):
    assert rdma_facts_result["changed"] is False


@pytest.mark.usefixtures("rdma_less_host")
def test_facts_of_a_host_without_rdma_are_empty(rdma_facts):
    assert (rdma_facts["devices"], rdma_facts["netdevs"]) == ({}, {})
    assert rdma_facts["stack"]["provider"] == "inbox"


@pytest.mark.usefixtures("rdma_host")
def test_compute_ports_in_rail_order_are_the_nccl_ports_and_the_rest_storage(rdma_facts, expected_ports, hostvars):
    plan = rdma_facts["ports_by_role"]
    assert plan["compute"] == [f"{dev}:{port}" for dev, port in expected_ports]
    assert plan["storage"] == hostvars.get("expected_storage_ports", [])
    assert sorted(rdma_facts["devices"]) == sorted({p.split(":")[0] for p in plan["compute"] + plan["storage"]})
    for rail, pid in enumerate(plan["compute"]):
        dev, port = pid.split(":")
        assert (rdma_facts["devices"][dev]["ports"][port]["role"], rdma_facts["devices"][dev]["ports"][port]["rail"]) == ("compute", rail)
    for dev, info in rdma_facts["devices"].items():
        assert PCI_ADDRESS.match(info["pci_address"] or ""), (dev, info["pci_address"])


@pytest.mark.usefixtures("rdma_host")
def test_storage_ports_stay_ethernet_and_up(rdma_facts, hostvars):
    # a DGX's BlueField-3 storage ports stay Ethernet in the infiniband group (no link-type change, no reboot); their
    # addresses are the site's (verify checked them before side_effect's reboot)
    for pid in hostvars.get("expected_storage_ports", []):
        dev, port = pid.split(":")
        facts = rdma_facts["devices"][dev]["ports"][port]
        assert (facts["role"], facts["rail"], facts["link_layer"], facts["state"]) == ("storage", None, "Ethernet", "ACTIVE"), pid


def test_facts_ports_match_the_profile(rdma_facts, rdma_host, expected_ports):
    infiniband = rdma_host["expected_link_layer"] == "InfiniBand"
    seen, want = {}, {}
    for dev, port in expected_ports:
        facts = rdma_facts["devices"][dev]["ports"][str(port)]
        seen[f"{dev}:{port}"] = {
            "state": facts["state"], "phys_state": facts["phys_state"], "link_layer": facts["link_layer"],
            "rate_gbps": facts["rate_gbps"], "width": facts["width"], "speed": facts["speed"],
            "has_lid": isinstance(facts["lid"], int), "roce_v2_ipv4_gid_index": facts["roce_v2_ipv4_gid_index"],
        }
        want[f"{dev}:{port}"] = {
            "state": "ACTIVE", "phys_state": "LinkUp", "link_layer": rdma_host["expected_link_layer"],
            "rate_gbps": 400.0, "width": "4X", "speed": "NDR",
            "has_lid": infiniband, "roce_v2_ipv4_gid_index": rdma_host["expected_gid_index"],
        }
    assert seen == want


def test_facts_netdev_mtu_is_back_at_the_profile_default(rdma_facts, rdma_host, expected_ports):
    # side_effect set mlx5_0 port 1's netdev MTU to 1234, then rebooted: the driver state is the profile's again.
    seen, want = {}, {}
    for dev, port in expected_ports:
        netdev = rdma_facts["devices"][dev]["ports"][str(port)]["netdev"]
        info = rdma_facts["netdevs"].get(netdev, {})
        seen[f"{dev}:{port}"] = (netdev, info.get("rdma_device"), info.get("mtu"))
        want[f"{dev}:{port}"] = (netdev, dev, rdma_host["expected_mtu"])
    assert seen == want
