"""simhost real netdevs: adoption planning, the roce_gid_mgmt stand-in, and what the product's reader then sees."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs

KIT = Path(__file__).resolve().parents[2] / "simhost"
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import netdev as nd  # noqa: E402  pylint: disable=wrong-import-position
from simhost import netsync  # noqa: E402  pylint: disable=wrong-import-position

V1, V2 = "IB/RoCE v1", "RoCE v2"
ZERO = nd.ZERO_GID
P0, P1 = "enp12s0np0", "enp140s0np0"
MAC0, MAC1 = "a0:88:c2:80:75:a0", "a0:88:c2:80:75:b0"   # cx7_roce_400g_2x, host 0
GID_11 = "0000:0000:0000:0000:0000:ffff:0a00:010b"       # ::ffff:10.0.1.11
GID_50 = "0000:0000:0000:0000:0000:ffff:0a00:0132"       # ::ffff:10.0.1.50


def build(tmp_path, name="cx7_roce_400g_2x", host=0):
    prof = {**simhost.load(name), "real_netdevs": True}
    root = tmp_path / "sys"
    exp = simhost.build_tree(prof, root, host_index=host)
    return root, exp


def link(name, ipv4=(), mtu=9000, mac=MAC0, up=True, carrier=True, ifindex=10):
    flags = ["BROADCAST", "MULTICAST"] + (["UP"] if up else []) + (["LOWER_UP"] if up and carrier else [])
    return {"ifindex": ifindex, "name": name, "mac": mac, "mtu": mtu, "flags": flags,
            "operstate": "UP" if up and carrier else "DOWN", "ipv4": list(ipv4)}


def links(p0_ipv4=(), p1_ipv4=(), **kw):
    return [link("lo", ["127.0.0.1/8"], mtu=65536, mac="00:00:00:00:00:00", ifindex=1),
            link("eth0", ["172.17.0.3/16"], mtu=1500, mac="02:42:ac:11:00:03", ifindex=20),
            link(P0, p0_ipv4, ifindex=30, **kw), link(P1, p1_ipv4, mac=MAC1, ifindex=32)]


def port_dir(root, dev="mlx5_0"):
    return root / "class/infiniband" / dev / "ports/1"


def table(root, dev="mlx5_0", upto=8):
    t = nd.read_gid_table(port_dir(root, dev))
    return {i: (e["gid"], e["type"], e["ndev"]) for i, e in t.items() if i < upto}


def rdma_port(root, dev="mlx5_0"):
    return gather_rdma_sysfs(str(root))["devices"][dev]["ports"]["1"]


# ------------------------------------------------------------------------------------------------ GID table
def test_fresh_host_has_only_link_local_gids(tmp_path):
    root, _exp = build(tmp_path)
    assert table(root)[2][0] == GID_11            # the static build still has the profile's IPv4 ...
    nd.sync_tree(root, links())                   # ... the real netdev has none: roce_gid_mgmt would not list it
    t = table(root)
    assert t[0] == (nd.link_local_gid(MAC0), V1, P0) and t[1] == (nd.link_local_gid(MAC0), V2, P0)
    assert all(t[i] == (ZERO, None, None) for i in range(2, 8))
    assert not (port_dir(root) / "gid_attrs/types/2").exists() and not (port_dir(root) / "gid_attrs/ndevs/3").exists()
    assert rdma_port(root)["roce_v2_ipv4_gid_index"] is None
    assert [g["index"] for g in rdma_port(root)["gids"]] == [0, 1]


def test_address_add_second_add_and_remove_follow_roce_gid_mgmt(tmp_path):
    root, _exp = build(tmp_path)
    nd.sync_tree(root, links())
    rep = nd.sync_tree(root, links(["10.0.1.11/24"]))
    assert rep[P0]["gids"] == {2: GID_11, 3: GID_11}
    assert table(root)[2] == (GID_11, V1, P0) and table(root)[3] == (GID_11, V2, P0)
    facts = rdma_port(root)
    assert facts["roce_v2_ipv4_gid_index"] == 3 and facts["netdev"] == P0
    assert [(g["index"], g["type"], g["ipv4"], g["netdev"]) for g in facts["gids"][2:]] == [
        (2, V1, "10.0.1.11", P0), (3, V2, "10.0.1.11", P0)]

    nd.sync_tree(root, links(["10.0.1.11/24", "10.0.1.50/24"]))
    assert table(root)[4] == (GID_50, V1, P0) and table(root)[5] == (GID_50, V2, P0)

    rep = nd.sync_tree(root, links(["10.0.1.50/24"]))
    assert rep[P0]["gids"] == {2: None, 3: None}
    t = table(root)
    assert t[2] == (ZERO, None, None) and t[3] == (ZERO, None, None)      # emptied, not compacted
    assert t[4] == (GID_50, V1, P0) and t[5] == (GID_50, V2, P0)          # indexes of other GIDs do not move
    assert rdma_port(root)["roce_v2_ipv4_gid_index"] == 5

    nd.sync_tree(root, links(["10.0.1.50/24", "10.0.1.11/24"]))           # a new address takes the lowest free
    assert table(root)[2] == (GID_11, V1, P0) and table(root)[3] == (GID_11, V2, P0)
    assert rdma_port(root)["roce_v2_ipv4_gid_index"] == 3
    # the other port is untouched by addresses on this one
    assert [g["index"] for g in rdma_port(root, "mlx5_1")["gids"]] == [0, 1]


def test_sync_is_idempotent(tmp_path):
    root, _exp = build(tmp_path)
    nd.sync_tree(root, links(["10.0.1.11/24"]))
    again = nd.sync_tree(root, links(["10.0.1.11/24"]))
    assert again[P0] == {"link": True, "changed": [], "gids": {}}


def test_ipv6_profile_keeps_its_ipv6_entries(tmp_path):
    root, exp = build(tmp_path, "cx7_roce_400g_2x_ipv6", host=1)
    port = exp["devices"][0]["ports"][0]
    mac, ipv6_gid = port["mac"], port["gids"][2]["gid"]
    lk = [link(P0, [], mac=mac, ifindex=30), link(P1, [], mac=exp["devices"][1]["ports"][0]["mac"], ifindex=31)]
    nd.sync_tree(root, lk)
    t = table(root)
    assert t[2] == (ipv6_gid, V1, P0) and t[3] == (ipv6_gid, V2, P0)
    assert t[4] == (ZERO, None, None) and t[5] == (ZERO, None, None)
    lk[0]["ipv4"] = ["10.0.1.12/24"]
    nd.sync_tree(root, lk)
    t = table(root)
    assert t[2][0] == ipv6_gid and t[4] == (nd.ipv4_gid("10.0.1.12"), V1, P0) and t[5] == (nd.ipv4_gid("10.0.1.12"), V2, P0)
    assert rdma_port(root)["roce_v2_ipv4_gid_index"] == 5


def test_plan_gid_update_pure_cases():
    ll = nd.link_local_gid(MAC0)
    base = {0: {"gid": ll, "type": V1, "ndev": P0}, 1: {"gid": ll, "type": V2, "ndev": P0}}
    base.update({i: {"gid": ZERO, "type": None, "ndev": None} for i in range(2, 4)})
    # table full after one address: the second gets nothing (-ENOSPC), nothing else changes
    ch = nd.plan_gid_update(base, P0, ["10.0.1.11/24", "10.0.1.50/24"], default_indexes=[0, 1])
    assert ch == {2: {"gid": GID_11, "type": V1, "ndev": P0}, 3: {"gid": GID_11, "type": V2, "ndev": P0}}
    # the same address twice (two prefixes) is one GID pair
    assert len(nd.plan_gid_update(base, P0, ["10.0.1.11/24", "10.0.1.11/16"], default_indexes=[0, 1])) == 2
    # another netdev's IPv4 GIDs (a bond, a VLAN) are not ours to remove
    other = {**base, 2: {"gid": GID_50, "type": V1, "ndev": "bond0"}}
    assert nd.plan_gid_update(other, P0, [], default_indexes=[0, 1]) == {}
    # the default GIDs follow the MAC (NETDEV_CHANGEADDR)
    new_mac = "a0:88:c2:00:00:01"
    ch = nd.plan_gid_update(base, P0, [], mac=new_mac, default_indexes=[0, 1])
    assert ch[0]["gid"] == ch[1]["gid"] == nd.link_local_gid(new_mac) and (ch[0]["type"], ch[1]["type"]) == (V1, V2)
    assert nd.plan_gid_update(base, P0, [], mac=MAC0, default_indexes=[0, 1]) == {}


def test_ipv4_gid_text():
    assert nd.ipv4_gid("10.0.1.11") == GID_11
    assert nd.link_local_gid(MAC0) == "fe80:0000:0000:0000:a288:c2ff:fe80:75a0"


# ------------------------------------------------------------------------------------------------ netdev files
def test_netdev_files_follow_the_real_link(tmp_path):
    root, _exp = build(tmp_path)
    nd.sync_tree(root, links(mtu=1500))
    ndir = root / "class/net" / P0
    assert (ndir / "mtu").read_text() == "1500\n"
    facts = gather_rdma_sysfs(str(root))["netdevs"][P0]
    assert facts == {**facts, "mtu": 1500, "operstate": "up", "carrier": True, "speed_mbps": 400000, "address": MAC0}
    nd.sync_tree(root, links(mtu=9000))
    assert gather_rdma_sysfs(str(root))["netdevs"][P0]["mtu"] == 9000
    assert rdma_port(root)["state"] == "ACTIVE"

    nd.sync_tree(root, links(up=False))                       # ip link set enp12s0np0 down
    facts = gather_rdma_sysfs(str(root))["netdevs"][P0]
    assert (facts["operstate"], facts["carrier"], facts["speed_mbps"]) == ("down", None, None)
    assert (ndir / "flags").read_text() == "0x1002\n"
    assert (rdma_port(root)["state"], rdma_port(root)["phys_state"]) == ("DOWN", "Disabled")

    nd.sync_tree(root, links(carrier=False))                  # up, no carrier (peer gone)
    facts = gather_rdma_sysfs(str(root))["netdevs"][P0]
    assert (facts["operstate"], facts["carrier"], facts["speed_mbps"]) == ("down", False, None)
    assert (ndir / "speed").read_text() == "-1\n"
    assert (rdma_port(root)["state"], rdma_port(root)["phys_state"]) == ("DOWN", "Polling")


def test_a_rail_without_its_link_is_a_port_without_cable(tmp_path):
    root, _exp = build(tmp_path)
    rep = nd.sync_tree(root, [link("lo", ifindex=1)])
    assert rep[P0]["link"] is False and rep[P0]["gids"] == {2: None, 3: None}
    facts = gather_rdma_sysfs(str(root))
    assert (facts["netdevs"][P0]["operstate"], facts["netdevs"][P0]["carrier"]) == ("down", None)
    port = facts["devices"]["mlx5_0"]["ports"]["1"]
    assert (port["state"], port["phys_state"], port["roce_v2_ipv4_gid_index"]) == ("DOWN", "Disabled", None)


# ------------------------------------------------------------------------------------------------ adoption
def docker_links(order=("rail0", "rail1")):
    """What Docker gives the container: eth0 on the default bridge, eth1/eth2 on the rails in attach order."""
    addr = {"rail0": "10.0.1.129/24", "rail1": "10.0.2.130/24"}
    out = [link("lo", ["127.0.0.1/8"], mtu=65536, mac="00:00:00:00:00:00", ifindex=1),
           link("eth0", ["172.17.0.3/16"], mtu=1500, mac="02:42:ac:11:00:03", ifindex=40)]
    for n, rail in enumerate(order, start=1):
        out.append(link(f"eth{n}", [addr[rail]], mac=f"02:42:0a:00:0{n}:81", ifindex=40 + 2 * n))
    return out


def rails():
    return nd.rail_ports(simhost.expand({**simhost.load("cx7_roce_400g_2x"), "real_netdevs": True}, 0))


def test_rail_ports_of_a_profile():
    assert [(r["dev"], r["netdev"], r["mac"], r["subnet"], r["default_gids"]) for r in rails()] == [
        ("mlx5_0", P0, MAC0, "10.0.1.0/24", [0, 1]), ("mlx5_1", P1, MAC1, "10.0.2.0/24", [0, 1])]
    assert nd.rail_ports(simhost.expand(simhost.load("cx7_ib_ndr_8x"), 0)) == []


@pytest.mark.parametrize("order", [("rail0", "rail1"), ("rail1", "rail0")])
def test_plan_adoption_matches_by_subnet_in_any_attach_order(order):
    steps, warnings = nd.plan_adoption(rails(), docker_links(order))
    assert warnings == []
    by_netdev = {s["netdev"]: s for s in steps}
    eth_of = {rail: f"eth{n}" for n, rail in enumerate(order, start=1)}
    assert by_netdev[P0] == {**by_netdev[P0], "link": eth_of["rail0"], "mac": MAC0, "mtu": 1500, "strip": ["10.0.1.129/24"]}
    assert by_netdev[P1] == {**by_netdev[P1], "link": eth_of["rail1"], "mac": MAC1, "mtu": 1500, "strip": ["10.0.2.130/24"]}


def test_plan_adoption_after_rename_changes_nothing():
    done = [ln for ln in docker_links() if ln["name"] in ("lo", "eth0")] + links(["10.0.1.11/24"])[2:]
    assert nd.plan_adoption(rails(), done) == ([], [])


def test_plan_adoption_by_mac_missing_rail_and_duplicates():
    lk = docker_links(("rail0",))
    lk.append(link("eth7", [], mac=MAC1, ifindex=90))          # the port's MAC wins over the subnet
    steps, warnings = nd.plan_adoption(rails(), lk)
    assert [(s["link"], s["netdev"], s["strip"]) for s in steps] == [("eth1", P0, ["10.0.1.129/24"]), ("eth7", P1, [])]
    assert warnings == []
    steps, warnings = nd.plan_adoption(rails(), docker_links(("rail0",)))
    assert [s["netdev"] for s in steps] == [P0]
    assert warnings == [f"mlx5_1 port 1: no container link on rail 10.0.2.0/24 or with MAC {MAC1}; {P1} stays simulated only"]
    two = docker_links(("rail0", "rail0"))
    steps, warnings = nd.plan_adoption(rails(), two)
    assert steps[0]["link"] == "eth1" and "links eth1, eth2 are all on rail 10.0.1.0/24; taking eth1" in warnings[0]


def test_adoption_argv():
    step = {"link": "eth2", "ifindex": 44, "netdev": P0, "mac": MAC0, "mtu": 1500, "strip": ["10.0.1.129/24"]}
    assert nd.adoption_argv(step) == [
        ["ip", "link", "set", "dev", "eth2", "down"],
        ["ip", "address", "del", "10.0.1.129/24", "dev", "eth2"],
        ["ip", "link", "set", "dev", "eth2", "name", P0],
        ["ip", "link", "set", "dev", P0, "address", MAC0],
        ["ip", "link", "set", "dev", P0, "mtu", "1500"],
        ["ip", "link", "set", "dev", P0, "up"],
    ]


def test_parse_links_of_ip_json():
    text = json.dumps([
        {"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "mtu": 65536, "operstate": "UNKNOWN",
         "address": "00:00:00:00:00:00", "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
        {"ifindex": 44, "link_index": 45, "ifname": "enp12s0np0", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
         "mtu": 9000, "operstate": "UP", "link_type": "ether", "address": "A0:88:C2:80:75:A0", "link_netnsid": 0,
         "addr_info": [{"family": "inet", "local": "10.0.1.11", "prefixlen": 24, "scope": "global"},
                       {"family": "inet6", "local": "fe80::a288:c2ff:fe80:75a0", "prefixlen": 64}]},
    ])
    parsed = nd.parse_links(text)
    assert parsed[1] == {"ifindex": 44, "name": P0, "mac": MAC0, "mtu": 9000, "operstate": "UP",
                         "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "ipv4": ["10.0.1.11/24"]}


def test_netsync_once_adopts_then_mirrors(tmp_path, monkeypatch):
    """The daemon's sync step with `ip` faked: rename plan executed as argv lists, then the tree follows."""
    root, _exp = build(tmp_path)
    state = {"links": docker_links(("rail1", "rail0"))}
    ran = []

    def fake_run(cmds):
        for argv in cmds:
            ran.append(argv)
            assert isinstance(argv, list) and argv[0] == "ip"
            dev = argv[4] if argv[1] == "link" else argv[5]
            lk = next(ln for ln in state["links"] if ln["name"] == dev)
            if argv[1] == "address":
                lk["ipv4"].remove(argv[3])
            elif argv[5] == "name":
                lk["name"] = argv[6]
            elif argv[5] == "address":
                lk["mac"] = argv[6]
            elif argv[5] == "mtu":
                lk["mtu"] = int(argv[6])

    monkeypatch.setattr(nd, "read_links", lambda ip="ip": [dict(ln, ipv4=list(ln["ipv4"])) for ln in state["links"]])
    monkeypatch.setattr(nd, "run_argv", fake_run)
    ns = netsync.NetSync(root, settle=0)
    ns.sync()
    assert [ln["name"] for ln in state["links"]] == ["lo", "eth0", P1, P0]
    assert [s["link"] + ">" + s["netdev"] for s in ns.state["adopted"]] == ["eth2>" + P0, "eth1>" + P1]
    assert (root / "class/net" / P0 / "mtu").read_text() == "1500\n"
    assert [g["index"] for g in rdma_port(root)["gids"]] == [0, 1]
    assert json.loads((root / ".simhost/state/netsync.json").read_text())["syncs"] == 1
    ran.clear()
    next(ln for ln in state["links"] if ln["name"] == P0)["ipv4"].append("10.0.1.11/24")   # networkd adds the address
    ns.sync()
    assert ran == [] and rdma_port(root)["roce_v2_ipv4_gid_index"] == 3


def test_real_netdevs_flag_is_validated():
    assert simhost.expand(simhost.load("cx7_roce_400g_2x"))["real_netdevs"] is False
    with pytest.raises(simhost.ProfileError, match="real_netdevs"):
        simhost.expand({**simhost.load("cx7_roce_400g_2x"), "real_netdevs": "yes"})


def test_tools_follow_the_mirrored_state(tmp_path, monkeypatch, capsys):
    """show_gids lists the GIDs networkd's address made; ibdev2netdev says Down (not NA) for a link that is down,
    as the mlnx-tools script does when reading carrier fails with EINVAL."""
    from simhost.tools import ibdev2netdev, show_gids  # pylint: disable=import-outside-toplevel

    root, _exp = build(tmp_path)
    monkeypatch.setenv("SIMHOST_SYSFS_ROOT", str(root))
    lk = links(["10.0.1.11/24"])
    lk[3]["flags"] = ["BROADCAST", "MULTICAST"]               # enp140s0np0 admin down
    nd.sync_tree(root, lk)
    assert show_gids.main(["show_gids", "mlx5_0"]) == 0
    out = capsys.readouterr().out
    assert f"mlx5_0\t1\t3\t{GID_11}\t10.0.1.11  \tv2\t{P0}\n" in out and out.endswith("n_gids_found=4\n")
    assert ibdev2netdev.main(["ibdev2netdev"]) == 0
    assert capsys.readouterr().out == f"mlx5_0 port 1 ==> {P0} (Up)\nmlx5_1 port 1 ==> {P1} (Down)\n"


def test_netsync_daemon_notifies_follows_and_stops_at_once(tmp_path):
    """`python3 -m simhost.netsync run` with a fake `ip`: READY=1 on $NOTIFY_SOCKET after the first sync, a
    change picked up by the periodic re-sync, and SIGTERM honoured at once (not after the select timeout)."""
    root, _exp = build(tmp_path)
    state = tmp_path / "links.json"
    bindir = tmp_path / "bin"
    bindir.mkdir()

    def ip_json(p0):
        return json.dumps([{"ifindex": 30 + i, "ifname": n, "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
                            "mtu": 9000, "operstate": "UP", "address": m,
                            "addr_info": [{"family": "inet", "local": a, "prefixlen": 24} for a in addrs]}
                           for i, (n, m, addrs) in enumerate(((P0, MAC0, p0), (P1, MAC1, [])))])

    state.write_text(ip_json([]))
    (bindir / "ip").write_text(f"#!{sys.executable}\nimport sys\nif sys.argv[1:] == ['-j', 'address', 'show']:\n"
                               f"    print(open({str(state)!r}).read())\n")
    (bindir / "ip").chmod(0o755)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify.sock"))
    notify.settimeout(30)
    env = {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin", "PYTHONPATH": str(KIT),
           "NOTIFY_SOCKET": str(tmp_path / "notify.sock")}
    proc = subprocess.Popen([sys.executable, "-m", "simhost.netsync", "run", "--root", str(root), "--interval", "0.3"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert notify.recv(4096).decode().startswith("READY=1\nSTATUS=mirroring enp12s0np0, enp140s0np0")
        assert table(root)[2] == (ZERO, None, None)
        state.write_text(ip_json(["10.0.1.11"]))
        deadline = time.monotonic() + 20
        while table(root)[3][0] != GID_11 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert table(root)[3] == (GID_11, V2, P0)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert time.monotonic() - t0 < 10
        assert "simhost-netsync: stopping" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        notify.close()


def test_a_cable_pulled_at_run_time_keeps_the_port_down_over_a_live_link(tmp_path, monkeypatch):
    """The Docker link under a RoCE port stays up when the cable is pulled; the next sync must not bring the port
    back (seen in the verify scenario: a sync after `simhost cable unplug` made the port ACTIVE again)."""
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))
    root, _exp = build(tmp_path)
    nd.sync_tree(root, links())
    simhost.firmware.set_cable(root, "mlx5_0", 1, plugged=False)
    nd.sync_tree(root, links())                               # the link is still UP, LOWER_UP
    facts = gather_rdma_sysfs(str(root))
    assert (rdma_port(root)["state"], rdma_port(root)["phys_state"]) == ("DOWN", "Polling")
    assert (facts["netdevs"][P0]["operstate"], facts["netdevs"][P0]["carrier"]) == ("down", False)
    assert rdma_port(root, "mlx5_1")["state"] == "ACTIVE"

    simhost.firmware.set_cable(root, "mlx5_0", 1, plugged=True)
    nd.sync_tree(root, links())
    assert rdma_port(root)["state"] == "ACTIVE"


def test_rail_subnets_move_a_profiles_rails_with_their_host_part_and_gids():
    from simhost import netdev as netdev_mod, profile as profile_mod  # pylint: disable=import-outside-toplevel
    prof = profile_mod.load("cx7_roce_400g_2x")
    rails = {r["dev"]: r for r in netdev_mod.rail_ports(profile_mod.expand(prof, 2))}
    assert (rails["mlx5_0"]["ipv4"], rails["mlx5_0"]["subnet"]) == ("10.0.1.13/24", "10.0.1.0/24")
    moved = dict(prof, rail_subnets={"10.0.1.0/24": "10.0.11.0/24", "10.0.2.0/24": "10.0.12.0/24"})
    exp = profile_mod.expand(moved, 2)
    rails = {r["dev"]: r for r in netdev_mod.rail_ports(exp)}
    assert (rails["mlx5_0"]["ipv4"], rails["mlx5_0"]["subnet"]) == ("10.0.11.13/24", "10.0.11.0/24")
    assert (rails["mlx5_1"]["ipv4"], rails["mlx5_1"]["subnet"]) == ("10.0.12.13/24", "10.0.12.0/24")
    gids = {g["gid"] for g in exp["devices"][0]["ports"][0]["gids"].values() if g}
    assert "0000:0000:0000:0000:0000:ffff:0a00:0b0d" in gids   # the RoCE v2 IPv4 GID of 10.0.11.13
    for bad, says in (({"10.0.1.0/24": "10.0.11.0/23"}, "not a pair of IPv4 networks"),
                      ({"10.0.1.0/24": "10.0.12.0/25"}, "differ in prefix length")):
        with pytest.raises(Exception, match=says):
            profile_mod.expand(dict(prof, rail_subnets=bad), 1)
