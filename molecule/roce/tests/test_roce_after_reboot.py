"""What an operator checks on a RoCE host after a reboot: the non-default lossless profile (molecule/roce/vars/
nondefault.yml) is back, read from the tools' own output (mlnx_qos, dcb, ethtool, ip), the kernel files, rdma_facts
and nccl.conf. The tool output is parsed with the collection's own parsers (qos_tools, dcb_tools), as the module
reads it."""

import json
import sys

import pytest
import yaml
from rdma_testinfra import collection_path, parse_nccl_conf

sys.path.insert(0, str(collection_path().parents[2]))
from ansible_collections.hpcnet.rdma.plugins.module_utils.qos import dcb_tools, qos_tools  # noqa: E402  pylint: disable=wrong-import-position

PROFILE = yaml.safe_load(open(__file__.rsplit("/tests/", 1)[0] + "/vars/nondefault.yml", encoding="utf-8"))
SYS = "/run/simhost/sys"
NETDEVS = {"enp12s0np0": ("mlx5_0", 0), "enp140s0np0": ("mlx5_1", 1)}


@pytest.fixture(scope="module", params=sorted(NETDEVS))
def netdev(request):
    return request.param


def _run(host, *argv):
    result = host.run(" ".join(argv))
    assert result.rc == 0, (argv, result.stderr)
    return result.stdout


def test_the_boot_time_unit_ran_and_is_visible_in_systemctl(host):
    unit = host.service("hpcnet-roce-qos.service")
    assert unit.is_enabled
    assert "status=0/SUCCESS" in host.run("systemctl status hpcnet-roce-qos.service --no-pager").stdout


def test_trust_pfc_and_dscp_map_survived(host, hostvars, netdev):
    if hostvars["expected_backend"] == "mlnx_qos":
        qos = qos_tools.parse_mlnx_qos(_run(host, "mlnx_qos", "-i", netdev))
        trust, pfc, dscp2prio = qos["trust"], qos["pfc_enabled"], qos["dscp2prio"]
    else:
        app = dcb_tools.parse_dcb_app(_run(host, "dcb", "-j", "app", "show", "dev", netdev, "dscp-prio"))
        pfc = dcb_tools.parse_dcb_pfc(_run(host, "dcb", "-j", "pfc", "show", "dev", netdev))["pfc_enabled"]
        dscp2prio = app["dscp2prio"]
        trust = "dscp" if app["dscp_prio"] else "pcp"   # mlx5: DSCP app entries switch the port to trust DSCP
    assert trust == "dscp"
    assert pfc == [PROFILE["roce_priority"]]
    assert dscp2prio[PROFILE["roce_dscp"]] == PROFILE["roce_priority"]
    assert dscp2prio[PROFILE["roce_cnp_dscp"]] == PROFILE["roce_cnp_priority"]


def test_link_level_pause_is_off(host, netdev):
    pause = qos_tools.parse_ethtool_pause(_run(host, "ethtool", "-a", netdev))
    assert (pause["rx"], pause["tx"]) == (False, False)


def test_ecn_and_cnp_survived_where_the_stack_keeps_them(host, hostvars, netdev):
    ecn = host.file("%s/class/net/%s/ecn" % (SYS, netdev))
    if hostvars["expected_backend"] != "mlnx_qos":
        assert not ecn.exists  # inbox kernel: firmware settings, left to the firmware (roce_firmware_settings: skip)
        return
    prio = PROFILE["roce_priority"]
    for point in ("roce_np", "roce_rp"):
        assert host.file("%s/class/net/%s/ecn/%s/enable/%d" % (SYS, netdev, point, prio)).content_string.strip() == "1"
    assert host.file("%s/class/net/%s/ecn/roce_np/cnp_dscp" % (SYS, netdev)).content_string.strip() == str(PROFILE["roce_cnp_dscp"])
    assert host.file("%s/class/net/%s/ecn/roce_np/cnp_802p_prio" % (SYS, netdev)).content_string.strip() == str(PROFILE["roce_cnp_priority"])


def test_tos_and_roce_mode_survived(host, hostvars, netdev):
    dev, _ = NETDEVS[netdev]
    cm = "%s/kernel/config/rdma_cm/%s/ports/1" % (SYS, dev)
    assert qos_tools.parse_roce_tos(host.file(cm + "/default_roce_tos").content_string) == PROFILE["roce_tos"]
    assert qos_tools.parse_roce_mode(host.file(cm + "/default_roce_mode").content_string) == "RoCE v2"
    if hostvars["expected_backend"] == "mlnx_qos":
        tclass = host.file("%s/class/infiniband/%s/tc/1/traffic_class" % (SYS, dev)).content_string
        assert qos_tools.parse_traffic_class(tclass)["global_tclass"] == PROFILE["roce_tos"]


def test_mtu_and_address_survived(host, hostvars, netdev):
    link = json.loads(_run(host, "ip", "-j", "address", "show", "dev", netdev))[0]
    assert link["mtu"] == PROFILE["roce_mtu"]
    addresses = ["%s/%s" % (a["local"], a["prefixlen"]) for a in link["addr_info"] if a["family"] == "inet"]
    assert addresses == [hostvars["roce_addresses"][netdev]]


def test_rdma_facts_see_the_rail_and_its_roce_v2_gid(rdma_facts, netdev):
    dev, _ = NETDEVS[netdev]
    port = rdma_facts["devices"][dev]["ports"]["1"]
    assert port["netdev"] == netdev and port["link_layer"] == "Ethernet" and port["state"] == "ACTIVE"
    assert port["roce_v2_ipv4_gid_index"] == 3
    assert rdma_facts["netdevs"][netdev]["mtu"] == PROFILE["roce_mtu"]


def test_nccl_conf_has_the_gid_index_and_the_configured_tos(host):
    conf = parse_nccl_conf(host.file("/etc/nccl.conf").content_string)
    assert conf["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"
    assert conf["NCCL_IB_GID_INDEX"] == "3"
    assert conf["NCCL_IB_TC"] == str(PROFILE["roce_tos"])


# Each host's rail addresses (molecule.yml roce_addresses), to reach the other host over each rail.
RAIL_ADDRESSES = {"mol-roce-ofed": {"enp12s0np0": "10.0.11.12", "enp140s0np0": "10.0.12.12"},
                  "mol-roce-inbox": {"enp12s0np0": "10.0.11.13", "enp140s0np0": "10.0.12.13"}}


def test_the_rails_reach_the_other_host(host, hostvars, netdev):
    other = next(name for name in RAIL_ADDRESSES if name != hostvars["inventory_hostname"])
    address = RAIL_ADDRESSES[other][netdev]
    probe = host.run("timeout 5 bash -c 'exec 3<>/dev/tcp/%s/22' 2>&1; echo rc=$?" % address)
    # Nothing listens on port 22: "Connection refused" proves the other host answered over this rail.
    assert "Connection refused" in probe.stdout or "rc=0" in probe.stdout, (netdev, address, probe.stdout)
