"""After the infiniband scenario's failover test and a restart of every container: what an operator checks on an IB
cluster. The master and standby SM (sminfo from the host that runs none, and each SM asked at its own LID), every
port ACTIVE with a LID, the P_Key tables the partitions give, IPoIB (mode, MTU, addresses, the P_Key child, real
traffic between hosts), memlock, the RDMA modules loaded at boot, nvidia_peermem, and NCCL_IB_PKEY in nccl.conf.
sminfo is parsed with the collection's own parser (module_utils/infiniband/infiniband.parse_sminfo)."""

import sys

import pytest
from rdma_testinfra import collection_path, parse_nccl_conf

sys.path.insert(0, str(collection_path().parents[2]))
from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import infiniband  # noqa: E402  pylint: disable=wrong-import-position

SYS = "/run/simhost/sys"
PRIORITY = {"mol-ib-sm1": 14, "mol-ib-sm2": 10}
ADDRESS = {"mol-ib-sm1": 11, "mol-ib-sm2": 12, "mol-ib-node": 13}


def _run(host, *argv):
    result = host.run(" ".join(argv))
    assert result.rc == 0, (argv, result.stdout, result.stderr)
    return result.stdout


@pytest.fixture(scope="module")
def ib(host):
    if host.backend.get_hostname() not in ADDRESS:
        pytest.skip("InfiniBand hosts only (not the fabric)")
    return host


def _ports(rdma_facts):
    return {"%s:%s" % (dev, num): port for dev, d in sorted(rdma_facts["devices"].items())
            for num, port in sorted(d["ports"].items())}


def test_master_is_the_priority_14_sm_on_every_rail(ib, rdma_facts):
    if ib.backend.get_hostname() != "mol-ib-node":
        pytest.skip("asked from the host that runs no SM")
    for device in ("mlx5_0", "mlx5_1"):
        info = infiniband.parse_sminfo(_run(ib, "sminfo", "-C", device, "-P", "1"))
        assert (info["state_name"], info["priority"]) == ("MASTER", 14), (device, info)
        assert info["lid"] == rdma_facts["devices"][device]["ports"]["1"]["sm_lid"]


def test_each_sm_host_runs_one_opensm_per_rail_in_its_state(ib, rdma_facts):
    name = ib.backend.get_hostname()
    if name not in PRIORITY:
        pytest.skip("SM hosts only")
    for device in ("mlx5_0", "mlx5_1"):
        port = rdma_facts["devices"][device]["ports"]["1"]
        assert ib.service("opensm@%s.service" % port["port_guid"]).is_running
        assert ib.service("opensm@%s.service" % port["port_guid"]).is_enabled
        info = infiniband.parse_sminfo(_run(ib, "sminfo", "-C", device, "-P", "1", str(port["lid"])))
        assert info["priority"] == PRIORITY[name] and info["guid"] == port["port_guid"]
        assert info["state_name"] == ("MASTER" if PRIORITY[name] == 14 else "STANDBY"), info
    conf = ib.file("/etc/opensm/opensm-%s.conf" % rdma_facts["devices"]["mlx5_0"]["ports"]["1"]["port_guid"]).content_string
    assert "sm_priority %d" % PRIORITY[name] in conf and "partition_config_file /etc/opensm/partitions.conf" in conf
    assert "compute=0x0002,ipoib,mtu=5,rate=" in ib.file("/etc/opensm/partitions.conf").content_string


def test_every_port_is_active_with_a_lid(ib, rdma_facts):
    ports = _ports(rdma_facts)
    assert len(ports) == 2
    for name, port in ports.items():
        assert (port["link_layer"], port["state"], port["phys_state"]) == ("InfiniBand", "ACTIVE", "LinkUp"), name
        assert port["lid"] and port["sm_lid"], (name, port)


def test_p_key_tables_follow_the_partitions(ib, rdma_facts):
    storage = "0x8003" if ib.backend.get_hostname() == "mol-ib-sm1" else "0x0003"
    for name, port in _ports(rdma_facts).items():
        assert {"0xffff", "0x8002", storage} <= set(port["pkeys"]), (name, port["pkeys"])
        assert port["pkey_indexes"]["0xffff"] == 0


def test_ipoib_mode_mtu_and_addresses_parent_and_child(ib):
    index = ADDRESS[ib.backend.get_hostname()]
    for netdev, address, mtu in (("ibp24s0", "10.10.0.%d/24" % index, 4092),
                                 ("ibp24s0.8002", "10.20.0.%d/24" % index, 4092)):
        assert ib.file("%s/class/net/%s/mode" % (SYS, netdev)).content_string.strip() == "datagram"
        link = _run(ib, "ip", "-o", "addr", "show", "dev", netdev)
        assert "inet %s " % address in link, link
        assert "mtu %d " % mtu in _run(ib, "ip", "-o", "link", "show", "dev", netdev)
    assert ib.file("%s/class/net/ibp24s0.8002/pkey" % SYS).content_string.strip() == "0x8002"
    assert ib.service("hpcnet-ipoib.service").is_enabled
    # networkd manages only the IPoIB netdevs here (RequiredForOnline=no): its wait-online would hold every boot
    # for 2 minutes (simhost-ibsync.service pulls in network-online.target, as slurmd does on a real node)
    assert ib.service("systemd-networkd.service").is_enabled
    assert not ib.service("systemd-networkd-wait-online.service").is_enabled


def test_hosts_reach_each_other_over_ipoib_and_the_child(ib):
    if ib.backend.get_hostname() != "mol-ib-node":
        pytest.skip("from the host that runs no SM")
    for address in ("10.10.0.11", "10.10.0.12", "10.20.0.11", "10.20.0.12"):
        _run(ib, "ping", "-c", "1", "-W", "2", address)


def test_memlock_unlimited_for_sessions_and_services(ib):
    limits = ib.file("/etc/security/limits.d/90-hpcnet-rdma.conf").content_string
    assert "* soft memlock unlimited" in " ".join(limits.split()) and "* hard memlock unlimited" in " ".join(limits.split())
    assert "DefaultLimitMEMLOCK=infinity" in ib.file("/etc/systemd/system.conf.d/90-hpcnet-rdma.conf").content_string
    assert _run(ib, "systemctl", "show", "-p", "DefaultLimitMEMLOCK").strip() == "DefaultLimitMEMLOCK=infinity"


def test_rdma_modules_and_peermem_loaded_at_boot(ib):
    listed = ib.file("/etc/modules-load.d/hpcnet-rdma.conf").content_string.split()
    for module in ("ib_umad", "ib_uverbs", "rdma_ucm", "ib_ipoib"):
        assert module in listed
        # the profile boots without ib_umad, rdma_ucm and ib_ipoib: only modules-load.d brings them after the restart
        assert ib.file("%s/module/%s/initstate" % (SYS, module)).content_string.strip() == "live", module
    assert "nvidia_peermem" in ib.file("/etc/modules-load.d/hpcnet-rdma-gdr.conf").content_string.split()
    assert ib.file("%s/module/nvidia_peermem/initstate" % SYS).content_string.strip() == "live"


def test_nccl_conf_has_the_p_key_index_of_compute(ib, rdma_facts):
    conf = parse_nccl_conf(ib.file("/etc/nccl.conf").content_string)
    indexes = {port["pkey_indexes"]["0x8002"] for port in _ports(rdma_facts).values()}
    assert len(indexes) == 1
    assert conf["NCCL_IB_PKEY"] == str(indexes.pop())
    assert conf["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"


def test_every_port_reaches_its_rails_switch_as_the_fabric_sees_it(ib):
    # the peers come with the facts read (rdma_facts peers: the real iblinkinfo, one hop from each linked port)
    result = ib.ansible("hpcnet.rdma.rdma_facts", "sysfs_root=%s peers=true" % SYS, check=False)
    rdma = result["ansible_facts"]["rdma"]
    assert rdma["peers"]["infiniband"]["state"] == "ok", rdma["peers"]
    for device, rail in (("mlx5_0", 0), ("mlx5_1", 1)):
        peer = rdma["devices"][device]["ports"]["1"]["peer"]
        assert peer and peer["system_name"] == "sw-rail%d" % rail, (device, peer)
        assert peer["guid"] and peer["port_id"], (device, peer)
        # both ends of the link trained alike
        assert (peer["width"], peer["speed"]) == (peer["hca_width"], peer["hca_speed"]), (device, peer)
