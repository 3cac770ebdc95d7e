"""Every module run the way a user runs it: through Ansible itself, from the collection as `make build` packs it and
`ansible-galaxy collection install` installs it, once with good arguments and once with bad ones. What Ansible does
with a module's return value is part of the test (a module that returned its rows under ``results``, the key Ansible
keeps for a loop's results, failed with "Unknown error" after a correct parse).

One ansible-playbook run on localhost against a simulated RoCE host (its sysfs tree in a temp dir, the simulated
tools first on PATH) runs every case with ignore_errors and writes the registered results to a JSON file; the tests
read that file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

REPO = Path(__file__).resolve().parents[4]
VENV_BIN = Path(sys.executable).parent
SIM_BIN = REPO / "tests" / "simhost" / "bin"
REAL = REPO / "tests" / "fixtures" / "real"
PERFTEST_LOG = REAL / "perftest-nccl-tests" / "ib_write_bw-server-rocev2-02.txt"
NCCL_LOG = REAL / "perftest-nccl-tests" / "all_reduce_perf-multinode-01.txt"

# module -> (good arguments, bad arguments, what the good result must carry); {root}, {tmp} are filled in
CASES = {
    "rdma_facts": ({"sysfs_root": "{root}"}, {"sysfs_root": "{tmp}/no-such-sysfs"}, "ansible_facts"),
    "rdma_management_link": ({"sysfs_root": "{root}"}, {"sysfs_root": "{tmp}/no-such-sysfs"}, "on_rdma"),
    "rdma_counters": ({"sysfs_root": "{root}"}, {"sysfs_root": "{tmp}/no-such-sysfs"}, "counters"),
    "ofed_stack": ({"provider": "inbox", "sysfs_root": "{root}"}, {"provider": "bogus"}, "action"),
    "mlxconfig": ({"device": "mlx5_0", "sysfs_root": "{root}", "tool": "mstconfig"},
                  {"device": "mlx5_9", "sysfs_root": "{root}", "tool": "mstconfig"}, "config"),
    "firmware_config": ({"devices": "{devices}", "entries": [], "sysfs_root": "{root}", "tool": "mstconfig"},
                        {"devices": "{devices}", "sysfs_root": "{root}", "tool": "mstconfig",
                         "entries": [{"devices": ["all"], "params": {"NO_SUCH_PARAMETER": 1}}]}, "cards"),
    "roce_qos": ({"netdev": "{netdev}", "sysfs_root": "{root}", "trust": "dscp", "pfc": [3]},
                 {"netdev": "no-such-netdev", "sysfs_root": "{root}"}, "after"),
    "ipoib": ({"interfaces": [], "sysfs_root": "{root}"},
              {"interfaces": [{"name": "ib9", "parent": "ib9", "mode": "connected"}], "sysfs_root": "{root}"},
              "interfaces"),
    "kernel_modules": ({"names": [], "sysfs_root": "{root}"}, {"names": ["no_such_module_xyz"], "sysfs_root": "{root}"},
                       "commands"),
    "rdma_host_settings": ({"memlock": "unlimited", "modules": [], "limits_file": "{tmp}/limits.conf",
                            "systemd_file": "{tmp}/system.conf", "modules_load_file": "{tmp}/modules-load.conf",
                            "gdr_load_file": "{tmp}/gdr.conf", "pam_dir": "{tmp}/pam.d", "sysfs_root": "{root}",
                            "gdr": "false"},
                           {"memlock": "a lot", "limits_file": "{tmp}/limits.conf"}, "state"),
    "perftest": ({"log_path": str(PERFTEST_LOG)}, {"log_path": "{tmp}/no-such-log.txt"}, "rows"),
    "nccl_transport": ({"log_path": str(NCCL_LOG)}, {"log_path": "{tmp}/no-such-log.txt"}, "summary"),
    "rdma_health": ({"host": "node1", "group": "roce", "sysfs_root": "{root}", "metrics": "false",
                     "expected_path": "{tmp}/health.json", "prefix": "{tmp}/usr", "management_netdevs": []},
                    {"host": "node1", "group": "roce", "sysfs_root": "{root}", "expected_path": "{tmp}/health.json",
                     "thresholds": {"health_interval": 0}}, "expected"),
    "rdma_verify": ({"hosts": {"node1": {"group": "roce", "rdma": "{rdma}"}}, "spec": {}},
                    {"hosts": {"node1": {"group": "no-such-group", "rdma": {}}}}, "findings"),
}
# modules that would change this machine outside the temp dir: run in check mode
CHECK_MODE = {"roce_qos", "kernel_modules"}


def _fill(value, subs):
    if isinstance(value, str):
        if value in subs and not isinstance(subs[value], str):
            return subs[value]
        for key, sub in subs.items():
            if isinstance(sub, str):
                value = value.replace(key, sub)
        return value
    if isinstance(value, list):
        return [_fill(v, subs) for v in value]
    if isinstance(value, dict):
        return dict((k, _fill(v, subs)) for k, v in value.items())
    return value


@pytest.fixture(scope="module", name="results")
def _results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("through-ansible")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(tmp / "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CONFIG=str(tmp / "ansible.cfg"),
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    (tmp / "ansible.cfg").write_text("[defaults]\ncollections_path = %s\n" % (tmp / "collections"))
    # the collection as `make build` packs it, installed as a user installs it
    subprocess.run([str(VENV_BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(tmp),
                    str(REPO)], check=True, capture_output=True, env=env)
    artifact = next(tmp.glob("hpcnet-rdma-*.tar.gz"))
    subprocess.run([str(VENV_BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "-p",
                    str(tmp / "collections"), str(artifact)], check=True, capture_output=True, env=env)
    assert (tmp / "collections" / "ansible_collections" / "hpcnet" / "rdma" / "MANIFEST.json").exists()
    # a simulated RoCE host: its tree, its firmware "disk", its tools first on PATH
    root = tmp / "sys"
    env.update(SIMHOST_PERSIST_DIR=str(tmp / "disk"), SIMHOST_SYSFS_ROOT=str(root))
    bindir = tmp / "bin"
    bindir.mkdir()
    for tool in ("mstconfig", "mlnx_qos", "dcb", "ethtool", "cma_roce_mode", "cma_roce_tos", "modprobe", "ofed_info"):
        (bindir / tool).symlink_to(SIM_BIN / tool)
    env["PATH"] = "%s:%s:%s" % (bindir, VENV_BIN, env.get("PATH", ""))
    tree.build_tree(profile.load("cx7_roce_400g_2x"), root, host_index=1)
    sys.path.insert(0, str(REPO / "collections"))
    from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs
    rdma = gather_rdma_sysfs(str(root))
    netdev = sorted(n for n, d in rdma["netdevs"].items() if d.get("rdma_device"))[0]
    subs = {"{root}": str(root), "{tmp}": str(tmp), "{netdev}": netdev, "{devices}": rdma["devices"], "{rdma}": rdma}
    tasks = []
    for name, (good, bad, _key) in CASES.items():
        for case, args in (("good", good), ("bad", bad)):
            tasks.append({"name": "%s %s" % (name, case), "hpcnet.rdma.%s" % name: _fill(args, subs),
                          "register": "r_%s_%s" % (name, case), "ignore_errors": True,
                          "check_mode": name in CHECK_MODE})
    out = tmp / "results.json"
    tasks.append({"name": "Write every result", "ansible.builtin.copy": {
        "dest": str(out), "content": "{{ %s | to_json }}" % (
            "{" + ", ".join("'%s_%s': r_%s_%s" % (n, c, n, c) for n in CASES for c in ("good", "bad")) + "}")}})
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    (tmp / "play.yml").write_text(json.dumps(play, indent=1))
    run = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                          "-e", "ansible_python_interpreter=%s" % sys.executable, str(tmp / "play.yml")],
                         capture_output=True, text=True, env=env, cwd=str(tmp), check=False)
    assert out.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(out.read_text())


def test_every_module_has_a_case():
    modules = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
    assert sorted(CASES) == modules


@pytest.mark.parametrize("name", sorted(CASES))
def test_module_succeeds_through_ansible_with_good_arguments(results, name):
    res = results["%s_good" % name]
    assert not res.get("failed"), "%s: %s" % (name, res.get("msg"))
    assert CASES[name][2] in res, "%s returned no %s: %s" % (name, CASES[name][2], sorted(res))
    assert "Unknown error" not in json.dumps(res)


@pytest.mark.parametrize("name", sorted(CASES))
def test_module_fails_through_ansible_with_a_clear_message(results, name):
    res = results["%s_bad" % name]
    assert res.get("failed"), "%s did not fail on bad arguments: %s" % (name, res)
    msg = str(res.get("msg") or "")
    assert msg and "Unknown error" not in msg and "Traceback" not in msg, "%s: %s" % (name, msg)
    assert not res.get("changed"), name


def test_read_only_modules_report_no_change(results):
    for name in ("rdma_facts", "rdma_management_link", "rdma_counters", "ofed_stack", "perftest", "nccl_transport",
                 "rdma_verify"):
        assert results["%s_good" % name].get("changed") is False, name
