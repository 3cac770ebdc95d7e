"""simhost IPoIB: the netdev's sysfs attributes, mode, P_Key children (create_child/delete_child), IB rails."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[2] / "simhost"
FIXTURES = Path(__file__).resolve().parents[1].parent / "fixtures/real/ib-stack"
import sys  # noqa: E402
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import kernelfs, netdev as nd  # noqa: E402  pylint: disable=wrong-import-position

PARENT = "ibp24s0"


@pytest.fixture(autouse=True)
def _persist(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))


def build(tmp_path, name="cx7_ib_ndr_2x_gpu", **extra):
    root = tmp_path / "sys"
    exp = simhost.build_tree({**simhost.load(name), **extra}, root, host_index=0)
    return root, exp


def net(root, name=PARENT):
    return root / "class/net" / name


def rd(path):
    return path.read_text(encoding="utf-8")


def write(path, text):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def log(root):
    p = root / ".simhost/state/kernelfs.log"
    return p.read_text(encoding="utf-8") if p.exists() else ""


def fixture_addr(name, key):
    """The link/infiniband address (key 'link') or broadcast ('brd') of an `ip link` capture."""
    words = rd(FIXTURES / name).split()
    return words[words.index("link/infiniband") + 1] if key == "link" else words[words.index("brd") + 1]


# ------------------------------------------------------------------------------------------------ attributes
def test_ipoib_netdev_attributes_as_the_kernel_shows_them(tmp_path):
    root, exp = build(tmp_path)
    d = net(root)
    guid = exp["devices"][0]["ports"][0]["port_guid"]
    assert rd(d / "type") == "32\n" and rd(d / "addr_len") == "20\n"
    addr = rd(d / "address").strip().split(":")
    real = fixture_addr("ip-link-ipoib-parent-01.txt", "link").split(":")
    assert len(addr) == len(real) == 20
    assert addr[4:12] == real[4:12] == ["fe", "80", "00", "00", "00", "00", "00", "00"]   # subnet prefix
    assert "".join(addr[12:]) == guid                                                    # port GUID
    assert addr[0] == real[0] == "00"             # enhanced IPoIB (mlx5): no IPOIB_FLAGS_RC
    assert rd(d / "broadcast").strip() == fixture_addr("ip-link-ipoib-parent-01.txt", "brd")
    assert rd(d / "mode") == "datagram\n" and rd(d / "pkey") == "0xffff\n"
    assert "ipoib pkey  0xffff mode  datagram" in rd(FIXTURES / "ip-link-ipoib-parent-02.txt")
    assert rd(d / "create_child") == "" and rd(d / "delete_child") == ""


def test_non_enhanced_ipoib_has_the_rc_flag(tmp_path):
    root, _exp = build(tmp_path, ipoib_enhanced=False)
    assert rd(net(root) / "address").startswith("80:00:10:87:fe:80:")


# ------------------------------------------------------------------------------------------------ mode
def test_connected_mode_refused_on_enhanced_ipoib(tmp_path):
    root, _exp = build(tmp_path)
    write(net(root) / "mode", "connected\n")
    kernelfs.settle(root)
    assert rd(net(root) / "mode") == "datagram\n"
    assert rd(net(root) / "mtu") == "2044\n"
    assert "mode: write 'connected\\n' refused (EINVAL, enhanced IPoIB" in log(root)


def test_connected_and_back_on_non_enhanced_ipoib(tmp_path):
    root, _exp = build(tmp_path, ipoib_enhanced=False)
    write(net(root) / "mode", "connected\n")
    kernelfs.settle(root)
    assert rd(net(root) / "mode") == "connected\n" and rd(net(root) / "mtu") == "65520\n"
    write(net(root) / "mode", "datagram\n")
    kernelfs.settle(root)
    assert rd(net(root) / "mode") == "datagram\n" and rd(net(root) / "mtu") == "2044\n"
    # ipoib_set_mode compares with "connected\n": a write without the newline is refused
    write(net(root) / "mode", "connected")
    kernelfs.settle(root)
    assert rd(net(root) / "mode") == "datagram\n"
    assert "write 'connected' refused (EINVAL" in log(root)


# ------------------------------------------------------------------------------------------------ children
def test_create_child_makes_the_p_key_netdev(tmp_path):
    root, _exp = build(tmp_path)
    write(net(root) / "create_child", "0x8002\n")
    kernelfs.settle(root)
    c = net(root, PARENT + ".8002")
    assert c.is_dir() and rd(net(root) / "create_child") == ""
    assert {f: rd(c / f).strip() for f in ("type", "addr_len", "pkey", "parent", "mode", "mtu", "operstate")} == {
        "type": "32", "addr_len": "20", "pkey": "0x8002", "parent": PARENT, "mode": "datagram", "mtu": "2044",
        "operstate": "down"}
    # same GID as the parent, own QPN; broadcast carries the P_Key (capture ip-link-ipoib-child-sysfs-01)
    paddr, caddr = rd(net(root) / "address").strip().split(":"), rd(c / "address").strip().split(":")
    assert caddr[4:] == paddr[4:] and caddr[1:4] != paddr[1:4]
    assert rd(c / "broadcast").strip() == fixture_addr("ip-link-ipoib-child-sysfs-01.txt", "brd")
    # next to the parent, under the same PCI function
    assert c.resolve().parent == net(root).resolve().parent
    assert os.readlink(c / "device") == os.readlink(net(root) / "device")
    assert kernelfs.ipoib_children(root, PARENT) == {0x8002: PARENT + ".8002"}


@pytest.mark.parametrize("text, err", [("0x8002\n", "ENOTUNIQ"), ("0xffff\n", "ENOTUNIQ"), ("0\n", "EINVAL"),
                                       ("0x8000\n", "EINVAL"), ("0x10000\n", "EINVAL"), ("abc\n", "EINVAL")])
def test_create_child_refusals(tmp_path, text, err):
    root, _exp = build(tmp_path)
    write(net(root) / "create_child", "0x8002\n")
    kernelfs.settle(root)
    write(net(root) / "create_child", text)
    kernelfs.settle(root)
    assert f"create_child: write {text!r} refused ({err})" in log(root)
    assert list(kernelfs.ipoib_children(root, PARENT)) == [0x8002]


def test_child_name_is_the_pkey_as_written(tmp_path):
    # ipoib_vlan_add: "%s.%04x" of the P_Key given (no full-membership bit added by current kernels)
    root, _exp = build(tmp_path)
    write(net(root) / "create_child", "2\n")
    kernelfs.settle(root)
    assert kernelfs.ipoib_children(root, PARENT) == {2: PARENT + ".0002"}


def test_delete_child(tmp_path):
    root, _exp = build(tmp_path)
    write(net(root) / "create_child", "0x8002\n")
    kernelfs.settle(root)
    write(net(root) / "delete_child", "0x8003\n")
    kernelfs.settle(root)
    assert "delete_child: write '0x8003\\n' refused (ENODEV)" in log(root)
    write(net(root) / "delete_child", "32770\n")
    kernelfs.settle(root)
    assert not os.path.lexists(net(root, PARENT + ".8002"))
    assert kernelfs.ipoib_children(root, PARENT) == {}


def test_children_are_runtime_state(tmp_path):
    root, _exp = build(tmp_path)
    write(net(root) / "create_child", "0x8002\n")
    kernelfs.settle(root)
    build(tmp_path)   # a reboot
    assert not os.path.lexists(net(root, PARENT + ".8002"))


def test_real_links_get_a_macvlan_stand_in(tmp_path, monkeypatch):
    root, _exp = build(tmp_path, real_netdevs=True)
    calls = []

    def runner(argv):
        calls.append(argv)
        return (0, "")
    monkeypatch.setattr(kernelfs, "IP_RUNNER", runner)
    write(net(root) / "create_child", "0x8002\n")
    kernelfs.settle(root)
    assert ["link", "add", PARENT + ".8002", "link", PARENT, "type", "macvlan", "mode", "bridge"] in calls
    assert ["link", "set", "dev", PARENT + ".8002", "mtu", "2044"] in calls
    write(net(root) / "delete_child", "0x8002\n")
    kernelfs.settle(root)
    assert calls[-1] == ["link", "del", "dev", PARENT + ".8002"]


def test_static_tree_runs_no_ip(tmp_path, monkeypatch):
    root, _exp = build(tmp_path)
    monkeypatch.setattr(kernelfs, "IP_RUNNER", lambda argv: pytest.fail(f"ran ip {argv}"))
    write(net(root) / "create_child", "0x8002\n")
    kernelfs.settle(root)


def test_watcher_handles_create_child(tmp_path):
    root, _exp = build(tmp_path)
    write(net(root) / "create_child", "0x8004\n")
    kernelfs.watch(root, period=0.1, stop_after=0.3)
    assert kernelfs.ipoib_children(root, PARENT) == {0x8004: PARENT + ".8004"}
    assert str(net(root).resolve()) in kernelfs._watch_dirs(root)  # pylint: disable=protected-access


# ------------------------------------------------------------------------------------------------ IB rails
def ib_link(name, ipv4=(), mtu=2044, up=True, ifindex=30, mac="02:42:0a:0a:00:80"):
    flags = ["BROADCAST", "MULTICAST"] + (["UP", "LOWER_UP"] if up else [])
    return {"ifindex": ifindex, "name": name, "mac": mac, "mtu": mtu, "flags": flags,
            "operstate": "UP" if up else "DOWN", "ipv4": list(ipv4)}


def test_ib_ports_with_ipv4_are_rails():
    rails = nd.rail_ports(simhost.expand(simhost.load("cx7_ib_ndr_2x_gpu"), 1))
    assert [(r["netdev"], r["subnet"], r["mac"], r["link_layer"], r["mtu"]) for r in rails] == [
        ("ibp24s0", "10.10.0.0/24", None, "InfiniBand", 2044), ("ibp64s0", "10.10.1.0/24", None, "InfiniBand", 2044)]
    assert nd.rail_ports(simhost.expand(simhost.load("cx7_ib_ndr_8x"), 0)) == []   # no ipv4: no IB rail


def test_ib_rail_adoption_keeps_the_mac_and_boots_at_2044():
    rails = nd.rail_ports(simhost.expand(simhost.load("cx7_ib_ndr_2x_gpu"), 0))
    links = [ib_link("lo", ifindex=1), ib_link("eth1", ["10.10.1.128/24"], mtu=65520, ifindex=12),
             ib_link("eth2", ["10.10.0.129/24"], mtu=65520, ifindex=14)]
    steps, warnings = nd.plan_adoption(rails, links)
    assert not warnings
    assert [(s["link"], s["netdev"], s["mtu"], s["strip"]) for s in steps] == [
        ("eth2", "ibp24s0", 2044, ["10.10.0.129/24"]), ("eth1", "ibp64s0", 2044, ["10.10.1.128/24"])]
    argv = nd.adoption_argv(steps[0])
    assert not any("address" in a and a[2] == "set" for a in argv)
    assert ["ip", "link", "set", "dev", "ibp24s0", "mtu", "2044"] in argv


def test_sync_mirrors_ipoib_link_but_keeps_ipoib_identity(tmp_path):
    root, _exp = build(tmp_path, real_netdevs=True)
    before = rd(net(root) / "address")
    port = root / "class/infiniband/mlx5_0/ports/1"
    nd.sync_tree(root, [ib_link(PARENT, ["10.10.0.11/24"], mtu=4092)])
    assert rd(net(root) / "mtu") == "4092\n" and rd(net(root) / "address") == before
    assert rd(net(root) / "type") == "32\n" and rd(net(root) / "carrier") == "1\n"
    assert rd(port / "state") == "4: ACTIVE\n"
    # the SM owns the port state; an IB port that is not ACTIVE gives the IPoIB netdev no carrier
    write(port / "state", "2: INIT\n")
    nd.sync_tree(root, [ib_link(PARENT, mtu=4092)])
    assert rd(net(root) / "carrier") == "0\n" and rd(port / "state") == "2: INIT\n"
    assert rd(net(root) / "operstate") == "down\n"


def test_sync_mirrors_children(tmp_path):
    root, _exp = build(tmp_path)
    write(net(root) / "create_child", "0x8002\n")
    kernelfs.settle(root)
    rep = nd.sync_tree(root, [ib_link(PARENT), ib_link(PARENT + ".8002", ["10.20.0.11/24"], mtu=2000, ifindex=40)])
    c = net(root, PARENT + ".8002")
    assert rd(c / "mtu") == "2000\n" and rd(c / "operstate") == "up\n" and rd(c / "pkey") == "0x8002\n"
    assert rep[PARENT + ".8002"]["link"] is True


def test_rails_cli_lists_ib_rails(capsys):
    from simhost import netsync  # pylint: disable=import-outside-toplevel
    assert netsync.main(["rails", "--profile", "cx7_ib_ndr_2x_gpu", "--host-index", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["docker"]["subnet"] for r in out] == ["10.10.0.0/24", "10.10.1.0/24"]


def test_product_reader_copes_with_children(tmp_path):
    from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs  # noqa: E501 pylint: disable=import-outside-toplevel
    root, _exp = build(tmp_path)
    before = gather_rdma_sysfs(str(root))
    write(net(root) / "create_child", "0x8002\n")
    kernelfs.settle(root)
    after = gather_rdma_sysfs(str(root))
    # as on a real kernel the child sits under the PCI function's net/, and the port's netdev stays the parent
    # (the reader prefers the interface whose iflink is its own ifindex)
    assert after["devices"]["mlx5_0"]["netdevs"] == [PARENT, PARENT + ".8002"]
    assert after["devices"]["mlx5_0"]["ports"]["1"]["netdev"] == PARENT
    assert after["devices"]["mlx5_1"] == before["devices"]["mlx5_1"]


def test_connected_mode_sets_the_real_links_mtu(tmp_path, monkeypatch):
    root, _exp = build(tmp_path, real_netdevs=True, ipoib_enhanced=False)
    calls = []
    monkeypatch.setattr(kernelfs, "IP_RUNNER", lambda argv: calls.append(argv) or (0, ""))
    write(net(root) / "mode", "connected\n")
    kernelfs.settle(root)
    assert ["link", "set", "dev", PARENT, "mtu", "65520"] in calls
