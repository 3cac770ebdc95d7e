"""Each port's peer attached to the facts (fabric/peers.py): a host read the one way (``sysfs.facts.read`` on a sysfs
tree), its tools answering with the real captures of lldpd (tests/fixtures/real/lldp) and iblinkinfo on an ibsim
fabric (tests/fixtures/real/ib-stack): one lldpcli run for all the RoCE ports, one iblinkinfo per InfiniBand port
with a link, a missing or failing tool a state and a reason, and the summary's line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.fabric import peers
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import facts
from fixtures_path import real_fixtures

sys.path.insert(0, str(Path(__file__).parents[1] / "fixtures" / "sysfs"))
from rdma_sysfs_tree import add_hca, add_netdev, ib_port, roce_port  # noqa: E402  pylint: disable=wrong-import-position

LLDP = real_fixtures() / "lldp"
IBSTACK = real_fixtures() / "ib-stack"
LLDPCLI = ["/usr/sbin/lldpcli", "-f", "json0", "show", "neighbors", "details"]
# the ibsim fabric of the captures: node01 mlx5_0 port 1 (port GUID 0x0002c90300aa0101) on leaf01 port 1
NODE01_GUID = "0002:c903:00aa:0101"


def _text(path):
    return path.read_text(encoding="utf-8")


class FakeRunner:
    """The host's tools: ``answers`` maps a tool to ``(rc, stdout, stderr)``, or for iblinkinfo to a function of
    ``(device, port)``; a tool not in it is not installed. Records each argv."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def which(self, name):
        return "/usr/sbin/" + name if name in self.answers else None

    def run(self, argv, changes=False, timeout=None):
        assert isinstance(argv, list), "commands are argv lists"
        assert not changes, "reading the peers changes nothing"
        assert timeout, "every tool run is bounded"
        self.calls.append(argv)
        answer = self.answers[argv[0].rsplit("/", 1)[1]]
        return answer(argv[2], argv[4]) if callable(answer) else answer


def _mixed_host(root):
    """InfiniBand compute (mlx5_0 with a link, mlx5_1 without) and RoCE storage (mlx5_2 ens1f0np0, mlx5_3
    ens2f0np0: the captures' netdevs), as a host in both fabric groups has them."""
    add_hca(root, "mlx5_0", pci="0000:1a:00.0", ports={1: ib_port(guid=NODE01_GUID)}, netdevs={"ibp26s0": {}})
    add_hca(root, "mlx5_1", pci="0000:3c:00.0",
            ports={1: ib_port(guid="0002:c903:00aa:0301", state="1: DOWN", phys_state="2: Polling")},
            netdevs={"ibp60s0": {}})
    add_hca(root, "mlx5_2", pci="0000:9a:00.0", ports={1: roce_port("ens1f0np0", ipv4="10.0.1.11")},
            netdevs={"ens1f0np0": {}})
    add_hca(root, "mlx5_3", pci="0000:ba:00.0", ports={1: roce_port("ens2f0np0", ipv4="10.0.2.11")},
            netdevs={"ens2f0np0": {}})
    return facts.read(str(root), None, ["infiniband", "roce"], management_netdevs=[])


def _iblinkinfo_partial_scan(device, port):
    return 0, _text(IBSTACK / "iblinkinfo-D0-a-sim-01.txt"), ""


def _peer(rdma, device):
    return rdma["devices"][device]["ports"]["1"]["peer"]


def test_every_port_gets_its_peer_with_one_lldpcli_and_one_iblinkinfo_per_linked_port(tmp_path):
    rdma = _mixed_host(tmp_path)
    runner = FakeRunner({"lldpcli": (0, _text(LLDP / "lldpcli-json0-neighbors-dcbx-sim-01.txt"), ""),
                         "iblinkinfo": _iblinkinfo_partial_scan})
    assert peers.attach(rdma, runner) is rdma
    # one LLDP read for both RoCE ports; iblinkinfo only where the physical link is up (mlx5_1 is Polling)
    assert runner.calls == [LLDPCLI, ["/usr/sbin/iblinkinfo", "-C", "mlx5_0", "-P", "1", "-D", "0", "-a"]]
    assert rdma["peers"] == {"lldp": {"state": "ok", "reason": None}, "infiniband": {"state": "ok", "reason": None},
                             "problems": []}
    swp1 = _peer(rdma, "mlx5_2")
    assert (swp1["system_name"], swp1["port_id"], swp1["chassis_id"], swp1["mfs"]) == \
        ("leaf01", "swp1", "2e:c5:f2:84:b1:24", 9216)
    assert swp1["dcbx"]["pfc"]["enabled"] == [3]
    assert swp1["dcbx"]["app"] == [{"selector": 3, "selector_name": "udp_dccp", "protocol": 4791, "priority": 3}]
    swp2 = _peer(rdma, "mlx5_3")
    assert (swp2["port_id"], swp2["dcbx"], swp2["mfs"]) == ("swp2", None, None)
    leaf = _peer(rdma, "mlx5_0")
    assert (leaf["system_name"], leaf["guid"], leaf["port_id"], leaf["width"], leaf["speed"]) == \
        ("leaf01", "0x0002c90300fab001", 1, "4X", "2.5 Gbps")
    assert _peer(rdma, "mlx5_1") is None
    assert peers.summary(rdma) == ("mlx5_0:1 -> leaf01:1, mlx5_1:1 no peer, mlx5_2:1 -> leaf01:swp1, "
                                   "mlx5_3:1 -> leaf01:swp2")


def test_lldpd_not_running_and_iblinkinfo_failing_are_states_with_their_reasons(tmp_path):
    rdma = _mixed_host(tmp_path)
    no_umad = _text(IBSTACK / "iblinkinfo-stderr-no-umad-sim-01.txt")
    runner = FakeRunner({"lldpcli": (1, "", _text(LLDP / "lldpcli-stderr-no-daemon-sim-01.txt")),
                         "iblinkinfo": lambda device, port: (1, "", no_umad)})
    peers.attach(rdma, runner)
    status = rdma["peers"]
    assert status["lldp"]["state"] == "lldpd_not_running"
    assert "systemctl enable --now lldpd" in status["lldp"]["reason"]
    assert status["infiniband"] == {
        "state": "iblinkinfo_failed",
        "reason": "mlx5_0 port 1: `iblinkinfo` failed (rc 1): Failed to open mlx5_1 port 1"}
    assert status["problems"] == [status["infiniband"]["reason"]]
    assert [_peer(rdma, d) for d in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")] == [None] * 4
    line = peers.summary(rdma)
    assert line.startswith("mlx5_0:1 no peer, mlx5_1:1 no peer, mlx5_2:1 no peer, mlx5_3:1 no peer; lldpd is not "
                           "running")
    assert line.endswith("; mlx5_0 port 1: `iblinkinfo` failed (rc 1): Failed to open mlx5_1 port 1")


def test_tools_not_installed_run_nothing(tmp_path):
    rdma = _mixed_host(tmp_path)
    runner = FakeRunner({})
    peers.attach(rdma, runner)
    assert runner.calls == []
    assert rdma["peers"]["lldp"]["state"] == "lldpd_not_installed"
    assert rdma["peers"]["infiniband"]["state"] == "infiniband_diags_not_installed"
    assert all(port["peer"] is None for dev in rdma["devices"].values() for port in dev["ports"].values())


def test_infiniband_host_runs_no_lldpcli(tmp_path):
    add_hca(tmp_path, "mlx5_0", pci="0000:1a:00.0", ports={1: ib_port(guid=NODE01_GUID)}, netdevs={"ibp26s0": {}})
    rdma = facts.read(str(tmp_path), None, ["infiniband"], management_netdevs=[])
    runner = FakeRunner({"lldpcli": (0, "{}", ""), "iblinkinfo": _iblinkinfo_partial_scan})
    peers.attach(rdma, runner)
    assert [argv[0] for argv in runner.calls] == ["/usr/sbin/iblinkinfo"]
    assert rdma["peers"]["lldp"] == {"state": "no_ports",
                                     "reason": "no Ethernet RDMA port with a netdev: LLDP is not read"}
    assert peers.summary(rdma) == "mlx5_0:1 -> leaf01:1"      # a source with no port to ask is no news


def test_roce_host_with_no_neighbour_heard(tmp_path):
    add_hca(tmp_path, "mlx5_0", pci="0000:9a:00.0", ports={1: roce_port("ens1f0np0", ipv4="10.0.1.11")},
            netdevs={"ens1f0np0": {}})
    rdma = facts.read(str(tmp_path), None, ["roce"], management_netdevs=[])
    runner = FakeRunner({"lldpcli": (0, _text(LLDP / "lldpcli-json0-neighbors-none-sim-01.txt"), "")})
    peers.attach(rdma, runner)
    assert rdma["peers"]["lldp"] == {"state": "ok", "reason": None}
    assert rdma["peers"]["infiniband"]["state"] == "no_ports"
    assert _peer(rdma, "mlx5_0") is None
    assert peers.summary(rdma) == "mlx5_0:1 no peer"


def test_a_bonded_port_takes_the_peer_its_first_member_hears(tmp_path):
    """RoCE LAG: mlx5_bond_0's port netdev is bond0 (its GIDs'), lldpd hears on the members."""
    add_hca(tmp_path, "mlx5_bond_0", pci="0000:9a:00.0", ports={1: roce_port("bond0", ipv4="10.0.1.11")},
            netdevs={"ens1f0np0": {}})
    add_netdev(tmp_path, tmp_path / "devices" / "virtual", "bond0",
               extra={"bonding/slaves": "ens2f0np0 ens1f0np0"})
    rdma = facts.read(str(tmp_path), None, ["roce"], management_netdevs=[])
    assert rdma["devices"]["mlx5_bond_0"]["ports"]["1"]["netdev"] == "bond0"
    runner = FakeRunner({"lldpcli": (0, _text(LLDP / "lldpcli-json0-neighbors-dcbx-sim-01.txt"), "")})
    peers.attach(rdma, runner)
    assert len(runner.calls) == 1
    assert _peer(rdma, "mlx5_bond_0")["port_id"] == "swp1"      # ens1f0np0 before ens2f0np0, in name order


def test_facts_without_a_sysfs_root_still_get_their_peers():
    """attach reads the facts it is given; a root it cannot read only loses the bond members."""
    rdma = {"sysfs_root": "/nonexistent/sys", "ports_by_role": {"compute": ["mlx5_0:1"]},
            "devices": {"mlx5_0": {"ports": {"1": {"link_layer": "Ethernet", "netdev": "ens1f0np0"}}}}}
    peers.attach(rdma, FakeRunner({"lldpcli": (0, _text(LLDP / "lldpcli-json0-neighbors-dcbx-sim-01.txt"), "")}))
    assert _peer(rdma, "mlx5_0")["port_id"] == "swp1"


@pytest.mark.parametrize("rdma", [None, {}, {"devices": {}, "ports_by_role": {}}])
def test_summary_of_facts_read_without_peers_is_none(rdma):
    assert peers.summary(rdma) is None


def test_summary_of_a_host_without_compute_or_storage_ports():
    rdma = {"devices": {}, "ports_by_role": {"compute": [], "storage": []},
            "peers": {"lldp": {"state": "no_ports", "reason": "x"}, "infiniband": {"state": "no_ports", "reason": "y"},
                      "problems": []}}
    assert peers.summary(rdma) == "no compute or storage port"


def test_the_playbooks_filter_is_the_summary(tmp_path):
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.hpcnet.rdma.plugins.filter.playbooks import FilterModule
    rdma = _mixed_host(tmp_path)
    peers.attach(rdma, FakeRunner({}))
    assert FilterModule().filters()["rdma_peer_summary"](rdma) == peers.summary(rdma)
