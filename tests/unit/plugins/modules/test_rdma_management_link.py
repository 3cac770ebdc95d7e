"""Tests of the hpcnet.rdma.rdma_management_link module.

In-process (ansible's module test pattern): argument handling, read-only result, check mode, the fail path.

Real kernel: in a fresh network namespace (``unshare --net``) the test makes a veth named ``enp12s0np0`` (the netdev
of mlx5_0 in simhost profile cx7_roce_400g_2x) and one named ``eth0`` (the profile's out-of-band netdev), gives them
addresses, points the default route at one of them, and runs the module with ``ansible -m`` over the local
connection against a simhost tree of that profile. The routes and addresses are the namespace's own
(``/proc/net/route``, ``ip -j addr show``); only the RDMA side comes from the tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.module_utils import basic

from ansible_collections.hpcnet.rdma.plugins.module_utils.runner import tool_runner
from ansible.module_utils.testing import patch_module_args

from ansible_collections.hpcnet.rdma.plugins.modules import rdma_management_link
from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

REPO_ROOT = Path(__file__).resolve().parents[4]
PROFILE = "cx7_roce_400g_2x"
MESSAGE = ("the default route goes through enp12s0np0, the netdev of RDMA device mlx5_0 port 1: a driver restart "
           "(openibd restart, modprobe -r mlx5_core) would cut this host off; reboot the host instead, or set "
           "rdma_allow_driver_restart_on_management_link=true if its console does not depend on that link")


class AnsibleExitJson(Exception):
    """exit_json was called."""


class AnsibleFailJson(Exception):
    """fail_json was called."""


@pytest.fixture(name="module_calls")
def fixture_module_calls(monkeypatch):
    """Patch exit/fail/warn and the ``ip`` lookup; returns ``{"warnings": [...], "commands": [...]}``."""
    calls = {"warnings": [], "commands": []}

    def exit_json(self, **kwargs):  # pylint: disable=unused-argument
        raise AnsibleExitJson(kwargs)

    def fail_json(self, msg, **kwargs):  # pylint: disable=unused-argument
        kwargs.update(msg=msg, failed=True)
        raise AnsibleFailJson(kwargs)

    def warn(self, warning):  # pylint: disable=unused-argument
        calls["warnings"].append(warning)

    def get_bin_path(self, name, required=False, opt_dirs=None):  # pylint: disable=unused-argument
        assert required is False
        return "/usr/sbin/ip" if name == "ip" else None

    def run(self, args, **kwargs):  # pylint: disable=unused-argument
        calls["commands"].append((args, kwargs))
        return 0, json.dumps([{"ifname": "eth0", "addr_info": [{"family": "inet", "local": "192.0.2.10"}]}]), ""

    for name, func in (("exit_json", exit_json), ("fail_json", fail_json), ("warn", warn), ("get_bin_path", get_bin_path)):
        monkeypatch.setattr(basic.AnsibleModule, name, func)
    monkeypatch.setattr(tool_runner.ModuleRunner, "run", run)   # every module runs its tools through the runner
    return calls


def run_module(args):
    with patch_module_args(args):
        with pytest.raises((AnsibleExitJson, AnsibleFailJson)) as info:
            rdma_management_link.main()
    return info.type, info.value.args[0]


@pytest.fixture(name="host")
def fixture_host(tmp_path):
    tree.build_tree(profile.load(PROFILE), tmp_path / "sys", host_index=1)
    (tmp_path / "proc" / "net").mkdir(parents=True)
    (tmp_path / "proc" / "net" / "route").write_text(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "enp12s0np0\t00000000\t0101000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")
    return tmp_path


@pytest.mark.parametrize("check_mode", [False, True])
def test_result_is_read_only_and_the_same_in_check_mode(host, module_calls, check_mode):
    kind, result = run_module({"sysfs_root": str(host / "sys"), "proc_root": str(host / "proc"), "addresses": ["192.0.2.10"],
                               "_ansible_check_mode": check_mode})
    assert kind is AnsibleExitJson
    assert result["changed"] is False
    assert set(result) == {"changed", "management_interfaces", "on_rdma", "message", "addresses", "address_source",
                           "unresolved_addresses"}
    assert result["on_rdma"] is True
    assert result["message"] == MESSAGE  # the connection address is on eth0: only the default route is named
    assert [(e["reason"], e["interface"]) for e in result["management_interfaces"]] == [
        ("connection", "eth0"), ("default_route", "enp12s0np0")]
    (argv, kwargs), = module_calls["commands"]
    assert argv == ["/usr/sbin/ip", "-j", "addr", "show"] and not kwargs.get("changes")
    json.dumps(result)


def test_warnings_go_through_module_warn(host, module_calls):
    kind, result = run_module({"sysfs_root": str(host / "sys"), "proc_root": str(host / "proc"), "addresses": ["198.51.100.1"]})
    assert kind is AnsibleExitJson and "warnings" not in result
    assert module_calls["warnings"] == ["connection address 198.51.100.1 is on no interface of this host (ip -j addr show): "
                                        "the link that carries it cannot be checked"]


def test_a_missing_sysfs_root_fails_naming_it(tmp_path, module_calls):  # pylint: disable=unused-argument
    kind, result = run_module({"sysfs_root": str(tmp_path / "nope"), "addresses": []})
    assert kind is AnsibleFailJson
    assert result["msg"] == "rdma_management_link: %s: sysfs_root does not exist or is not a directory" % (tmp_path / "nope")
    assert result["changed"] is False


def test_a_malformed_route_file_fails_naming_it(host, module_calls):  # pylint: disable=unused-argument
    (host / "proc" / "net" / "route").write_text("Iface\tDestination\neth0\t0\n")
    kind, result = run_module({"sysfs_root": str(host / "sys"), "proc_root": str(host / "proc"), "addresses": []})
    assert kind is AnsibleFailJson
    assert result["msg"].startswith("rdma_management_link: %s: line 2: expected" % (host / "proc" / "net" / "route"))


# ------------------------------------------------------------------------------------------------ real kernel
UNSHARE = ["unshare", "--net"]
NETNS_SETUP = [
    "ip link set lo up",
    "ip link add enp12s0np0 type veth peer name enp12s0np0p",
    "ip link add eth0 type veth peer name eth0p",
    "for i in enp12s0np0 enp12s0np0p eth0 eth0p; do ip link set dev $i up; done",
    "ip address add 10.0.1.12/24 dev enp12s0np0",
    "ip address add 192.0.2.10/24 dev eth0",
    "ip -6 address add fd00:1::12/64 dev enp12s0np0 nodad",
]
DEFAULT_VIA = {
    "enp12s0np0": ["ip route add default via 10.0.1.1 dev enp12s0np0"],
    "eth0": ["ip route add default via 192.0.2.1 dev eth0"],
    "enp12s0np0-ipv6": ["ip route add default via 192.0.2.1 dev eth0", "ip -6 route add default via fd00:1::1 dev enp12s0np0"],
}


def _netns_allowed():
    if not shutil.which("unshare") or not shutil.which("ip"):
        return False
    probe = subprocess.run(UNSHARE + ["sh", "-ec", " && ".join(NETNS_SETUP)], capture_output=True, check=False)
    return probe.returncode == 0


needs_netns = pytest.mark.skipif(not _netns_allowed(), reason="this machine does not allow unshare --net with veth pairs")


def run_in_netns(default_via, module_args, tmp_path, environ=None):
    """``ansible localhost -m hpcnet.rdma.rdma_management_link`` in a fresh network namespace; returns (result, run)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"mgmt-host": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}), encoding="utf-8")
    argv = [str(Path(sys.executable).parent / "ansible"), "mgmt-host", "-i", str(inventory),
            "-m", "hpcnet.rdma.rdma_management_link", "-a", json.dumps(module_args)]
    script = " && ".join(NETNS_SETUP + DEFAULT_VIA[default_via]) + ' && exec "$@"'
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"), ANSIBLE_HOME=str(REPO_ROOT / ".ansible"),
               ANSIBLE_COLLECTIONS_PATH=str(REPO_ROOT / "collections"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_NOCOLOR="1")
    env.pop("SSH_CONNECTION", None)
    env.update(environ or {})
    run = subprocess.run(UNSHARE + ["sh", "-ec", script, "sh"] + argv, cwd=REPO_ROOT, env=env, capture_output=True,
                         text=True, check=False, timeout=120)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    report = json.loads(run.stdout)
    return report["plays"][0]["tasks"][0]["hosts"]["mgmt-host"], run


@pytest.fixture(name="simhost_sys")
def fixture_simhost_sys(tmp_path):
    tree.build_tree(profile.load(PROFILE), tmp_path / "sys", host_index=1)
    return str(tmp_path / "sys")


@needs_netns
def test_real_kernel_default_route_on_the_connectx_veth_is_on_rdma(simhost_sys, tmp_path):
    result, _run = run_in_netns("enp12s0np0", {"sysfs_root": simhost_sys, "addresses": []}, tmp_path)
    assert result["changed"] is False and result["on_rdma"] is True
    assert result["message"] == MESSAGE
    (entry,) = result["management_interfaces"]
    assert (entry["reason"], entry["interface"], entry["gateway"], entry["netdev"], entry["rdma_device"], entry["rdma_port"]) == (
        "default_route", "enp12s0np0", "10.0.1.1", "enp12s0np0", "mlx5_0", 1)


@needs_netns
def test_real_kernel_default_route_on_another_veth_is_not_on_rdma(simhost_sys, tmp_path):
    result, _run = run_in_netns("eth0", {"sysfs_root": simhost_sys, "addresses": []}, tmp_path)
    assert result["on_rdma"] is False
    assert result["message"] == "the default route goes through eth0, on no RDMA device: a driver restart does not cut this host off"
    assert [(e["interface"], e["netdev"]) for e in result["management_interfaces"]] == [("eth0", None)]


@needs_netns
def test_real_kernel_connection_address_from_ssh_connection_is_matched_with_ip(simhost_sys, tmp_path):
    """SSH_CONNECTION names 10.0.1.12, which `ip -j addr show` in the namespace finds on enp12s0np0."""
    result, _run = run_in_netns("eth0", {"sysfs_root": simhost_sys}, tmp_path,
                                environ={"SSH_CONNECTION": "10.0.1.99 50022 10.0.1.12 22"})
    assert result["on_rdma"] is True
    assert result["address_source"] == "SSH_CONNECTION of the module's environment"
    assert [(e["reason"], e["interface"], e["rdma_device"]) for e in result["management_interfaces"]] == [
        ("connection", "enp12s0np0", "mlx5_0"), ("default_route", "eth0", None)]
    assert result["message"].startswith("the connection address 10.0.1.12 is on enp12s0np0, the netdev of RDMA device mlx5_0 "
                                        "port 1: a driver restart")


@needs_netns
def test_real_kernel_connection_address_on_eth0_is_not_on_rdma(simhost_sys, tmp_path):
    result, _run = run_in_netns("eth0", {"sysfs_root": simhost_sys, "addresses": ["192.0.2.10"]}, tmp_path)
    assert result["on_rdma"] is False
    assert [(e["reason"], e["interface"]) for e in result["management_interfaces"]] == [
        ("connection", "eth0"), ("default_route", "eth0")]


@needs_netns
def test_real_kernel_ipv6_default_route_on_the_connectx_veth_is_on_rdma(simhost_sys, tmp_path):
    result, _run = run_in_netns("enp12s0np0-ipv6", {"sysfs_root": simhost_sys, "addresses": []}, tmp_path)
    assert [(e["family"], e["interface"], e["gateway"]) for e in result["management_interfaces"]] == [
        ("ipv4", "eth0", "192.0.2.1"), ("ipv6", "enp12s0np0", "fd00:1::1")]
    assert result["on_rdma"] is True
    assert result["message"].startswith("the IPv6 default route goes through enp12s0np0, the netdev of RDMA device mlx5_0 port 1: ")


@needs_netns
def test_real_kernel_sysfs_upper_devices_are_walked_as_the_kernel_lays_them_out(tmp_path):
    """The lower_* links, brif/ and bonding/slaves the walk follows, read from the namespace's own sysfs.

    Bridge and macvlan are built into most kernels; VLAN and bond need modules a container may not load, so each kind
    is tried and the ones the kernel refuses are left out. No RDMA device here: only the topology is checked.
    """
    kinds = {
        "br0": ("ip link add br0 type bridge && ip link set dev eth0 master br0 && ip link set dev br0 up", ["eth0"]),
        "mv0": ("ip link add link enp12s0np0 name mv0 type macvlan mode bridge", ["enp12s0np0"]),
        "eth0p.7": ("ip link add link eth0p name eth0p.7 type vlan id 7", ["eth0p"]),
        "bond0": ("ip link add bond0 type bond mode active-backup && ip link set dev enp12s0np0p down && "
                  "ip link set dev enp12s0np0p master bond0", ["enp12s0np0p"]),
    }
    script = ["mount -t sysfs sysfs /sys"] + NETNS_SETUP + ["(%s) 2>/dev/null || true" % cmd for cmd, _ in kinds.values()]
    code = ("import json, sys; "
            "from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs import routes; "
            "t = routes.Topology('/sys'); print(json.dumps(dict((n, t.walk(n)[0]) for n in sys.argv[1:] if t.exists(n))))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    run = subprocess.run(["unshare", "--net", "--mount", "sh", "-ec", " && ".join(script) + ' && exec "$@"', "sh",
                          sys.executable, "-c", code] + list(kinds), env=env, capture_output=True, text=True, check=False,
                         timeout=60)
    if run.returncode != 0 and "mount" in run.stderr:
        pytest.skip("cannot mount sysfs in a new mount namespace here: %s" % run.stderr.strip())
    assert run.returncode == 0, run.stderr
    walked = json.loads(run.stdout)
    assert "br0" in walked and "mv0" in walked, walked  # built into every kernel this runs on
    for name, found in walked.items():
        assert found == kinds[name][1], (name, found)
