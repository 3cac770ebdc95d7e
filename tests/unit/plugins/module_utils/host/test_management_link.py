"""Tests of plugins/module_utils/host/management_link.py: which interfaces carry the management link, and what is under them.

The RDMA side is a simhost tree (profile cx7_roce_400g_2x: mlx5_0 port 1 is enp12s0np0, mlx5_1 port 1 is
enp140s0np0, eth0 is the virtual out-of-band netdev). Upper devices (VLAN, bond, bridge) are added to the tree the
way the kernel lays them out (``devices/virtual/net/<if>/`` with ``lower_<name>`` links, ``brif/``,
``bonding/slaves``). Routes are hand-written ``/proc/net/route`` and ``/proc/net/ipv6_route`` files in the kernel's
format; addresses come from a fake ``ip -j addr show``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.host import management_link as ml
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import routes
from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import SysfsError
from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

PROFILE = "cx7_roce_400g_2x"
ADVICE = ("a driver restart (openibd restart, modprobe -r mlx5_core) would cut this host off; reboot the host instead, "
          "or set rdma_allow_driver_restart_on_management_link=true if its console does not depend on that link")
ROUTE_HEADER = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"
# The kernel's own lines as fib_route_seq_show prints them (padded to 127 characters).
LINK_ROUTE = "{iface}\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0"
DEFAULT_ROUTE = "{iface}\t00000000\t0100000A\t0003\t0\t0\t{metric}\t00000000\t0\t0\t0"
# An IPv6 host with no default route: the kernel's unreachable default on lo (RTF_REJECT), a link-local route.
IPV6_BASE = [
    "fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 "
    "00000100 00000001 00000000 00000001     eth0",
    "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 "
    "ffffffff 00000001 00000000 00200200       lo",
]
IPV6_DEFAULT = ("00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 "
                "00000400 00000003 00000000 00000003 {iface:>8}")


class FakeRunner:
    """``which``/``run`` as the module's runner; ``links`` is ``{ifname: [address...]}`` for ``ip -j addr show``."""

    def __init__(self, links=None, rc=0):
        self.links = links
        self.rc = rc
        self.calls = []

    def which(self, name):
        return "/usr/sbin/ip" if name == "ip" and self.links is not None else None

    def run(self, argv, changes=False, timeout=None):
        self.calls.append(argv)
        data = [{"ifindex": index, "ifname": name,
                 "addr_info": [{"family": "inet6" if ":" in a else "inet", "local": a, "prefixlen": 24} for a in addrs]}
                for index, (name, addrs) in enumerate(self.links.items(), 1)]
        return self.rc, json.dumps(data), "" if self.rc == 0 else "ip: boom"


@pytest.fixture(name="host")
def fixture_host(tmp_path):
    """A built simhost tree (``host.sys``) and an empty ``host.proc``; ``host.routes(...)`` writes the route files."""

    class Host:
        sys = tmp_path / "sys"
        proc = tmp_path / "proc"

        def routes(self, ipv4=(), ipv6=None):
            (self.proc / "net").mkdir(parents=True, exist_ok=True)
            lines = [ROUTE_HEADER] + [line.ljust(127) for line in ipv4]
            (self.proc / "net" / "route").write_text("\n".join(lines) + "\n", encoding="utf-8")
            if ipv6 is not None:
                (self.proc / "net" / "ipv6_route").write_text("\n".join(list(ipv6)) + "\n", encoding="utf-8")

        def default_via(self, iface, metric=0):
            self.routes([DEFAULT_ROUTE.format(iface=iface, metric=metric), LINK_ROUTE.format(iface=iface)], IPV6_BASE)

        def check(self, addresses=(), runner=None, **kwargs):
            return ml.check(str(self.sys), str(self.proc), list(addresses) if addresses is not None else None,
                            runner or FakeRunner(), **kwargs)

    tree.build_tree(profile.load(PROFILE), tmp_path / "sys", host_index=1)
    host = Host()
    host.routes()
    return host


def _virtual_netdev(root, name, lowers=(), brif=(), slaves=None):
    """An upper device as the kernel shows it: devices/virtual/net/<name>/ with lower_<x> links to the lower dirs."""
    root = Path(root)
    ndir = root / "devices" / "virtual" / "net" / name
    ndir.mkdir(parents=True)
    (ndir / "mtu").write_text("1500\n")
    (ndir / "operstate").write_text("up\n")
    for lower in lowers:
        target = os.path.realpath(root / "class" / "net" / lower)
        os.symlink(os.path.relpath(target, ndir), ndir / ("lower_" + lower))
    for port in brif:
        (ndir / "brif").mkdir(exist_ok=True)
        target = os.path.realpath(root / "class" / "net" / port / "brport")
        os.symlink(os.path.relpath(target, ndir / "brif"), ndir / "brif" / port)
    if slaves is not None:
        (ndir / "bonding").mkdir()
        (ndir / "bonding" / "slaves").write_text(" ".join(slaves) + "\n")
    os.symlink(os.path.relpath(ndir, root / "class" / "net"), root / "class" / "net" / name)
    return ndir


# ------------------------------------------------------------------------------------------------ default routes
def test_default_route_through_the_connectx_netdev_is_refused_with_the_message(host):
    host.default_via("enp12s0np0")
    result = host.check()
    assert result["on_rdma"] is True
    assert result["message"] == "the default route goes through enp12s0np0, the netdev of RDMA device mlx5_0 port 1: " + ADVICE
    (entry,) = result["management_interfaces"]
    assert entry == {"interface": "enp12s0np0", "reason": "default_route", "family": "ipv4", "gateway": "10.0.0.1",
                     "lower": [], "netdev": "enp12s0np0", "rdma_device": "mlx5_0", "rdma_port": 1, "driver": "mlx5_core",
                     "rdma_netdevs": [{"netdev": "enp12s0np0", "rdma_device": "mlx5_0", "rdma_port": 1, "driver": "mlx5_core"}],
                     "via": ["enp12s0np0"]}
    assert result["warnings"] == []


def test_default_route_through_eth0_is_fine(host):
    host.default_via("eth0")
    result = host.check()
    assert result["on_rdma"] is False
    assert result["message"] == "the default route goes through eth0, on no RDMA device: a driver restart does not cut this host off"
    (entry,) = result["management_interfaces"]
    assert (entry["interface"], entry["netdev"], entry["rdma_device"], entry["lower"]) == ("eth0", None, None, [])


def test_vlan_over_the_connectx_netdev_is_refused_naming_both(host):
    _virtual_netdev(host.sys, "enp12s0np0.100", lowers=["enp12s0np0"])
    host.default_via("enp12s0np0.100")
    result = host.check()
    assert result["on_rdma"] is True
    assert result["message"] == ("the default route goes through enp12s0np0.100 (over enp12s0np0), the netdev of RDMA device "
                                 "mlx5_0 port 1: " + ADVICE)
    (entry,) = result["management_interfaces"]
    assert entry["lower"] == ["enp12s0np0"] and entry["via"] == ["enp12s0np0.100", "enp12s0np0"]


def test_bond_over_both_connectx_ports_is_refused_naming_both_ports(host):
    _virtual_netdev(host.sys, "bond0", lowers=["enp12s0np0", "enp140s0np0"], slaves=["enp12s0np0", "enp140s0np0"])
    host.default_via("bond0")
    result = host.check()
    assert result["on_rdma"] is True
    assert result["message"].startswith("the default route goes through bond0 (over enp12s0np0), the netdev of RDMA device "
                                        "mlx5_0 port 1: a driver restart")
    (entry,) = result["management_interfaces"]
    assert entry["lower"] == ["enp12s0np0", "enp140s0np0"]
    assert [(hit["netdev"], hit["rdma_device"], hit["rdma_port"]) for hit in entry["rdma_netdevs"]] == [
        ("enp12s0np0", "mlx5_0", 1), ("enp140s0np0", "mlx5_1", 1)]


def test_bond_known_only_from_bonding_slaves_is_walked(host):
    _virtual_netdev(host.sys, "bond1", slaves=["enp140s0np0"])
    host.default_via("bond1")
    result = host.check()
    assert result["on_rdma"] is True and "bond1 (over enp140s0np0), the netdev of RDMA device mlx5_1 port 1" in result["message"]


def test_vlan_over_a_bridge_over_a_bond_over_the_connectx_netdev_names_the_chain(host):
    _virtual_netdev(host.sys, "bond0", lowers=["enp12s0np0"], slaves=["enp12s0np0"])
    (host.sys / "class" / "net" / "bond0" / "brport").mkdir()
    _virtual_netdev(host.sys, "br0", brif=["bond0"])
    _virtual_netdev(host.sys, "br0.20", lowers=["br0"])
    host.default_via("br0.20")
    result = host.check()
    (entry,) = result["management_interfaces"]
    assert entry["lower"] == ["br0", "bond0", "enp12s0np0"]
    assert entry["via"] == ["br0.20", "br0", "bond0", "enp12s0np0"]
    assert result["message"].startswith("the default route goes through br0.20 (over br0, bond0, enp12s0np0), the netdev of "
                                        "RDMA device mlx5_0 port 1: ")


def test_bridge_over_eth0_only_is_fine(host):
    (host.sys / "class" / "net" / "eth0" / "brport").mkdir()
    _virtual_netdev(host.sys, "br0", lowers=["eth0"], brif=["eth0"])
    host.default_via("br0")
    result = host.check()
    assert result["on_rdma"] is False
    assert result["management_interfaces"][0]["lower"] == ["eth0"]


def test_roce_lag_bond_master_counts_through_its_gids(host):
    """A RoCE LAG (mlx5_bond_0): the bond master is the GID netdev, and the walk finds the device from there too."""
    gids = host.sys / "class" / "infiniband" / "mlx5_1" / "ports" / "1" / "gid_attrs" / "ndevs"
    for entry in gids.iterdir():
        entry.write_text("bond7\n")
    _virtual_netdev(host.sys, "bond7")  # no lower visible: only the GID table ties it to mlx5_1
    host.default_via("bond7")
    result = host.check()
    assert result["on_rdma"] is True
    assert "goes through bond7, the netdev of RDMA device mlx5_1 port 1" in result["message"]


def test_mlx5_netdev_without_an_rdma_device_still_counts(host):
    """mlx5_ib not loaded (or the second port of a RoCE LAG): no RDMA device, but mlx5_core takes the netdev down."""
    fn_dir = host.sys / "devices" / "pci0000:0d" / "0000:0d:01.0" / "0000:0e:00.0"
    (fn_dir / "net" / "enp14s0np0").mkdir(parents=True)
    os.symlink(os.path.relpath(host.sys / "bus" / "pci" / "drivers" / "mlx5_core", fn_dir), fn_dir / "driver")
    os.symlink("../../../0000:0e:00.0", fn_dir / "net" / "enp14s0np0" / "device")
    os.symlink(os.path.relpath(fn_dir / "net" / "enp14s0np0", host.sys / "class" / "net"), host.sys / "class" / "net" / "enp14s0np0")
    host.default_via("enp14s0np0")
    result = host.check()
    assert result["on_rdma"] is True
    assert result["message"].startswith("the default route goes through enp14s0np0, a port of the mlx5_core driver (no RDMA "
                                        "device registered on it): a driver restart")


def test_ipv6_default_route_is_read_and_the_unreachable_default_is_not(host):
    host.routes([LINK_ROUTE.format(iface="eth0")], IPV6_BASE + [IPV6_DEFAULT.format(iface="enp140s0np0")])
    result = host.check()
    (entry,) = result["management_interfaces"]
    assert (entry["family"], entry["interface"], entry["gateway"]) == ("ipv6", "enp140s0np0", "fd00::1")
    assert result["message"].startswith("the IPv6 default route goes through enp140s0np0, the netdev of RDMA device mlx5_1 port 1: ")


def test_every_default_route_counts_once_per_interface(host):
    host.routes([DEFAULT_ROUTE.format(iface="eth0", metric=100), DEFAULT_ROUTE.format(iface="enp12s0np0", metric=200),
                 DEFAULT_ROUTE.format(iface="eth0", metric=300)], IPV6_BASE + [IPV6_DEFAULT.format(iface="eth0")])
    result = host.check()
    assert [(e["family"], e["interface"]) for e in result["management_interfaces"]] == [
        ("ipv4", "eth0"), ("ipv4", "enp12s0np0"), ("ipv6", "eth0")]
    assert result["on_rdma"] is True
    assert result["message"] == "the default route goes through enp12s0np0, the netdev of RDMA device mlx5_0 port 1: " + ADVICE


def test_reject_routes_and_non_default_routes_are_not_default_routes():
    text = "\n".join([ROUTE_HEADER,
                      "*\t00000000\t00000000\t0201\t0\t0\t0\t00000000\t0\t0\t0",        # unreachable default
                      "eth0\t00000000\t0100000A\t0002\t0\t0\t0\t00000000\t0\t0\t0",     # not RTF_UP
                      "eth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0",     # 10.0.0.0/24
                      "eth1\t00000000\t00000000\t0001\t0\t0\t5\t00000000\t0\t0\t0"])    # default dev eth1, no gateway
    assert routes.parse_ipv4_routes(text, "/proc/net/route") == [
        {"family": "ipv4", "interface": "eth1", "gateway": None, "metric": 5}]


@pytest.mark.parametrize("text, message", [
    (ROUTE_HEADER + "\neth0\t00000000\n", r"/proc/net/route: line 2: expected 'Iface Destination"),
    (ROUTE_HEADER + "\neth0\tZZ\t0\t0003\t0\t0\t0\t00000000\n", r"/proc/net/route: line 2: destination 'ZZ' is not hexadecimal"),
])
def test_a_malformed_route_file_names_the_file_and_line(text, message):
    with pytest.raises(SysfsError, match=message):
        routes.parse_ipv4_routes(text, "/proc/net/route")


def test_a_malformed_ipv6_route_file_names_the_file_and_line():
    with pytest.raises(SysfsError, match=r"ipv6_route: line 1: expected 10 fields"):
        routes.parse_ipv6_routes("0000 00 eth0\n", "/proc/net/ipv6_route")


def test_no_route_files_and_no_address_mean_no_management_interface(host):
    (host.proc / "net" / "route").unlink()
    result = host.check()
    assert result["management_interfaces"] == [] and result["on_rdma"] is False
    assert result["message"].startswith("found no management interface")


# ------------------------------------------------------------------------------------------------ connection addresses
def test_connection_address_on_eth0_is_fine(host):
    host.routes([LINK_ROUTE.format(iface="eth0")])
    runner = FakeRunner({"lo": ["127.0.0.1"], "eth0": ["192.0.2.10"], "enp12s0np0": ["10.0.1.12"]})
    result = host.check(["192.0.2.10"], runner)
    assert result["on_rdma"] is False
    assert result["message"] == ("the connection address 192.0.2.10 is on eth0, on no RDMA device: a driver restart does not "
                                 "cut this host off")
    (entry,) = result["management_interfaces"]
    assert entry["reason"] == "connection" and entry["address"] == "192.0.2.10" and entry["interface"] == "eth0"
    assert runner.calls == [["/usr/sbin/ip", "-j", "addr", "show"]]
    assert result["addresses"] == ["192.0.2.10"] and result["address_source"] == "the addresses option"


def test_connection_address_on_the_connectx_netdev_is_refused_even_with_the_default_route_on_eth0(host):
    host.default_via("eth0")
    runner = FakeRunner({"eth0": ["192.0.2.10"], "enp12s0np0": ["10.0.1.12"]})
    result = host.check(["::ffff:10.0.1.12"], runner)
    assert result["on_rdma"] is True
    assert [(e["reason"], e["interface"]) for e in result["management_interfaces"]] == [
        ("connection", "enp12s0np0"), ("default_route", "eth0")]
    assert result["message"] == ("the connection address 10.0.1.12 is on enp12s0np0, the netdev of RDMA device mlx5_0 port 1: "
                                 + ADVICE)


def test_connection_address_on_a_vlan_and_default_route_on_the_port_are_both_named(host):
    _virtual_netdev(host.sys, "enp12s0np0.100", lowers=["enp12s0np0"])
    host.default_via("enp12s0np0")
    runner = FakeRunner({"enp12s0np0.100": ["10.100.0.12"]})
    result = host.check(["10.100.0.12"], runner)
    assert result["message"] == (
        "the connection address 10.100.0.12 is on enp12s0np0.100 (over enp12s0np0), the netdev of RDMA device mlx5_0 port 1; "
        "the default route goes through enp12s0np0, the netdev of RDMA device mlx5_0 port 1: " + ADVICE)


def test_address_on_no_interface_warns_and_is_named(host):
    result = host.check(["198.51.100.7"], FakeRunner({"eth0": ["192.0.2.10"]}))
    assert result["on_rdma"] is False and result["management_interfaces"] == []
    assert "the connection address 198.51.100.7 is on no interface of this host" in result["message"]
    assert any("198.51.100.7 is on no interface" in w for w in result["warnings"])
    # the guard fails closed on it: the link that carries that address cannot be checked
    assert result["unresolved_addresses"] == ["198.51.100.7"]
    assert "cannot be checked, so a driver restart might cut this host off; reboot the host instead" in result["message"]


def test_without_ip_ipv6_addresses_come_from_if_inet6_and_ipv4_ones_warn(host):
    (host.proc / "net" / "if_inet6").write_text(
        "fd000000000000000000000000000012 04 40 00 80 enp140s0np0\n00000000000000000000000000000001 01 80 10 80       lo\n")
    result = host.check(["fd00::12", "192.0.2.10"], FakeRunner(None))
    assert [(e["interface"], e["address"]) for e in result["management_interfaces"]] == [("enp140s0np0", "fd00::12")]
    assert result["on_rdma"] is True
    assert any("ip (iproute2) is not installed" in w for w in result["warnings"])


def test_a_zone_names_the_interface_without_running_ip(host):
    runner = FakeRunner({"eth0": []})
    result = host.check(["fe80::1%enp12s0np0"], runner)
    assert result["management_interfaces"][0]["interface"] == "enp12s0np0" and result["on_rdma"] is True
    assert runner.calls == []


def test_a_bad_address_fails_naming_it(host):
    with pytest.raises(ml.ManagementLinkError, match=r"addresses: 'eth0' is not an IP address"):
        host.check(["eth0"])


def test_a_failing_ip_falls_back_to_if_inet6_with_a_warning(host):
    result = host.check(["192.0.2.10"], FakeRunner({"eth0": ["192.0.2.10"]}, rc=1))
    assert result["management_interfaces"] == []
    assert any("ip -j addr show failed (rc=1): ip: boom" in w for w in result["warnings"])


def test_interface_missing_from_sysfs_warns(host):
    host.default_via("wg0")
    result = host.check()
    assert result["on_rdma"] is False
    assert any("interface wg0 (IPv4 default route) is not in" in w for w in result["warnings"])


def test_a_sysfs_root_without_class_fails(tmp_path):
    with pytest.raises(SysfsError, match="not a sysfs tree"):
        ml.check(str(tmp_path), str(tmp_path), [])


# ------------------------------------------------------------------------------------------------ SSH_CONNECTION
def _process(proc, pid, ppid, environ=None, comm="sh"):
    pdir = Path(proc) / str(pid)
    pdir.mkdir(parents=True)
    (pdir / "stat").write_text("%d (%s) S %d %d 0 0 -1\n" % (pid, comm, ppid, pid))
    if environ is not None:
        (pdir / "environ").write_bytes(b"".join(("%s=%s" % kv).encode() + b"\0" for kv in environ.items()))


def test_ssh_connection_of_the_module_environment_gives_the_address(host):
    host.default_via("eth0")
    runner = FakeRunner({"eth0": ["192.0.2.10"]})
    result = host.check(None, runner, environ={"SSH_CONNECTION": "192.0.2.1 50022 192.0.2.10 22"})
    assert result["addresses"] == ["192.0.2.10"]
    assert result["address_source"] == "SSH_CONNECTION of the module's environment"
    assert result["management_interfaces"][0]["reason"] == "connection"


def test_ssh_connection_is_found_in_a_parent_when_sudo_dropped_it(host):
    """become (sudo) resets the environment: the sshd session shell above it still has SSH_CONNECTION."""
    _process(host.proc, 4000, 3000, {"PATH": "/usr/bin", "SUDO_USER": "ops"}, comm="sudo")
    _process(host.proc, 3000, 2000, {"SSH_CONNECTION": "::ffff:192.0.2.1 50022 ::ffff:10.0.1.12 22"}, comm="sh -c")
    _process(host.proc, 2000, 1, {"SSH_CONNECTION": "wrong"}, comm="sshd")
    runner = FakeRunner({"enp12s0np0": ["10.0.1.12"]})
    result = host.check(None, runner, environ={"PATH": "/usr/bin"}, pid=4000)
    assert result["addresses"] == ["10.0.1.12"]
    assert result["address_source"] == "SSH_CONNECTION of %s" % (host.proc / "3000" / "environ")
    assert result["on_rdma"] is True
    assert result["message"].startswith("the connection address 10.0.1.12 is on enp12s0np0, the netdev of RDMA device mlx5_0 port 1")


def test_an_ssh_connection_over_a_pipe_has_no_address_and_checks_the_routes_only(host):
    """sshd -i on a pipe (a ProxyCommand, inetd) knows no addresses: OpenSSH writes UNKNOWN for them."""
    _process(host.proc, 4000, 1, {"SSH_CONNECTION": "UNKNOWN 65535 UNKNOWN 65535"})
    host.default_via("eth0")
    result = host.check(None, FakeRunner({"eth0": ["192.0.2.10"]}),
                        environ={"SSH_CONNECTION": "UNKNOWN 65535 UNKNOWN 65535"}, pid=4000)
    assert result["addresses"] == [] and result["address_source"] is None
    assert [e["reason"] for e in result["management_interfaces"]] == ["default_route"]


def test_no_ssh_connection_anywhere_checks_the_routes_only(host):
    _process(host.proc, 4000, 1, {"PATH": "/usr/bin"})
    host.default_via("eth0")
    result = host.check(None, FakeRunner({"eth0": []}), environ={}, pid=4000)
    assert result["addresses"] == [] and result["address_source"] is None
    assert [e["reason"] for e in result["management_interfaces"]] == ["default_route"]


def test_the_parent_walk_stops_on_a_loop_and_unreadable_entries():
    value, source = ml.find_ssh_connection({}, "/nonexistent", pid=12345)
    assert (value, source) == (None, None)


@pytest.mark.parametrize("text, expected", [
    ("10.0.0.5", ("10.0.0.5", None)),
    ("::ffff:10.0.0.5", ("10.0.0.5", None)),
    ("fe80::1%eth0", ("fe80::1", "eth0")),
    ("[2001:db8::1]", ("2001:db8::1", None)),
    ("2001:DB8:0:0::1", ("2001:db8::1", None)),
])
def test_addresses_are_normalised(text, expected):
    assert ml.normalise_address(text) == expected


def test_ssh_server_address_is_the_third_field():
    assert ml.ssh_server_address("192.0.2.1 50022 192.0.2.10 22") == "192.0.2.10"
    assert ml.ssh_server_address("garbage") is None and ml.ssh_server_address(None) is None
