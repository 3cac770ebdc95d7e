"""roles/ofed/tasks/driver_restart_guard.yml on a real kernel: it refuses a driver restart over the management link.

Each case runs tests/unit/playbooks/driver_restart_guard.yml (the guard, then a stand-in for the restart) with
ansible-playbook over the local connection, inside a fresh network namespace (``unshare --net``) holding two veths:
``enp12s0np0`` (the netdev of mlx5_0 in simhost profile cx7_roce_400g_2x, whose tree is the play's
``rdma_sysfs_root``) and ``eth0`` (the profile's out-of-band netdev). The default route goes through one of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

REPO_ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = REPO_ROOT / "tests" / "unit" / "playbooks" / "driver_restart_guard.yml"
HOST = "guard-host"
ROLE = "hpcnet.rdma.ofed : "  # the prefix ansible gives the names of a role's tasks
UNSHARE = ["unshare", "--net"]
NETNS_SETUP = [
    "ip link set lo up",
    "ip link add enp12s0np0 type veth peer name enp12s0np0p",
    "ip link add eth0 type veth peer name eth0p",
    "for i in enp12s0np0 enp12s0np0p eth0 eth0p; do ip link set dev $i up; done",
    "ip address add 10.0.1.12/24 dev enp12s0np0",
    "ip address add 192.0.2.10/24 dev eth0",
]
DEFAULT_VIA = {"enp12s0np0": "ip route add default via 10.0.1.1 dev enp12s0np0",
               "eth0": "ip route add default via 192.0.2.1 dev eth0"}
REFUSAL = ("Refusing to restart the RDMA driver on guard-host: the default route goes through enp12s0np0, the netdev of "
           "RDMA device mlx5_0 port 1: a driver restart (openibd restart, modprobe -r mlx5_core) would cut this host off; "
           "reboot the host instead, or set rdma_allow_driver_restart_on_management_link=true if its console does not "
           "depend on that link")


def _netns_allowed():
    if not shutil.which("unshare") or not shutil.which("ip"):
        return False
    probe = subprocess.run(UNSHARE + ["sh", "-ec", " && ".join(NETNS_SETUP)], capture_output=True, check=False)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _netns_allowed(), reason="this machine does not allow unshare --net with veth pairs")


def _play(tmp_path, default_via, extra_vars=None, check=False):
    """Run the playbook in a fresh namespace; return (returncode, {task name: host result}, run)."""
    sysfs = tmp_path / "sys"
    tree.build_tree(profile.load("cx7_roce_400g_2x"), sysfs, host_index=1)
    inventory = {"all": {"hosts": {HOST: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                          "ansible_become": False}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory), encoding="utf-8")
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(PLAYBOOK), "-i", str(tmp_path / "hosts.yml"),
            "-e", json.dumps(dict({"rdma_sysfs_root": str(sysfs)}, **(extra_vars or {})))] + (["--check"] if check else [])
    script = " && ".join(NETNS_SETUP + [DEFAULT_VIA[default_via]]) + ' && exec "$@"'
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
               ANSIBLE_HOME=str(REPO_ROOT / ".ansible"), ANSIBLE_COLLECTIONS_PATH=str(REPO_ROOT / "collections"),
               ANSIBLE_NOCOLOR="1")
    env.pop("SSH_CONNECTION", None)
    run = subprocess.run(UNSHARE + ["sh", "-ec", script, "sh"] + argv, cwd=REPO_ROOT, env=env, capture_output=True,
                         text=True, check=False, timeout=300)
    report = json.loads(run.stdout)
    tasks = {task["task"]["name"]: task["hosts"][HOST] for play in report["plays"] for task in play["tasks"]
             if HOST in task["hosts"]}
    for text in (run.stdout, run.stderr):
        assert "Traceback" not in text
    return run.returncode, tasks, run


def test_guard_refuses_when_the_default_route_rides_on_the_connectx_port(tmp_path):
    returncode, tasks, run = _play(tmp_path, "enp12s0np0")
    assert returncode != 0, run.stdout[-3000:]
    refusal = tasks[ROLE + "Refuse a driver restart that would cut the management link"]
    assert refusal["failed"] is True and refusal["msg"] == REFUSAL
    assert "Stand in for the driver restart" not in tasks


@pytest.mark.parametrize("check", [False, True], ids=["run", "check_mode"])
def test_guard_lets_the_restart_run_when_the_default_route_is_on_eth0(tmp_path, check):
    returncode, tasks, run = _play(tmp_path, "eth0", check=check)
    assert returncode == 0, (run.stdout[-3000:], run.stderr[-2000:])
    assert tasks[ROLE + "Find the management link and whether it rides on an RDMA device"]["on_rdma"] is False
    assert "Stand in for the driver restart" in tasks


@pytest.mark.parametrize("name", ["rdma_allow_driver_restart_on_management_link", "ofed_allow_driver_restart_on_management_link"])
def test_the_override_lets_the_restart_run_over_the_management_link(tmp_path, name):
    returncode, tasks, run = _play(tmp_path, "enp12s0np0", {name: True})
    assert returncode == 0, (run.stdout[-3000:], run.stderr[-2000:])
    assert tasks[ROLE + "Find the management link and whether it rides on an RDMA device"]["on_rdma"] is True
    assert "Stand in for the driver restart" in tasks


def test_a_non_boolean_override_is_refused_by_the_entry_point_spec(tmp_path):
    returncode, tasks, _run = _play(tmp_path, "enp12s0np0", {"rdma_allow_driver_restart_on_management_link": "sometimes"})
    assert returncode != 0
    failed = [result.get("msg", "") for result in tasks.values() if result.get("failed")]
    assert any("argument 'rdma_allow_driver_restart_on_management_link' is of type str and we were unable to convert to bool"
               in str(msg) for msg in failed), failed
    assert ROLE + "Find the management link and whether it rides on an RDMA device" not in tasks
    assert "Stand in for the driver restart" not in tasks
