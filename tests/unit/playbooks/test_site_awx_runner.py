"""The AWX path: ansible-runner runs site.yml from a project folder, as an AWX job template does.

The project is this repository (AWX checks it out as is); the host is localhost with a simulated sysfs tree, so
the run needs neither containers nor RDMA hardware. Package installation is skipped (tag ofed_install), the
rest of the site play runs for real.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

ansible_runner = pytest.importorskip("ansible_runner")

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(name="project")
def _project(tmp_path):
    """An AWX-style private data dir: project/, inventory/hosts, env/ (the runner reads extravars from the call)."""
    pdd = tmp_path / "runner"
    (pdd / "inventory").mkdir(parents=True)
    (pdd / "project").symlink_to(REPO_ROOT, target_is_directory=True)
    return pdd


def _run(pdd, sysfs_root, group, extravars):
    inventory = {"all": {"children": {group: {"hosts": {"awx-node": {
        "ansible_connection": "local", "ansible_python_interpreter": shutil.which("python3")}}}}}}
    (pdd / "inventory" / "hosts.yml").write_text(yaml.safe_dump(inventory))
    return ansible_runner.run(
        private_data_dir=str(pdd),
        playbook="site.yml",
        extravars=dict({"rdma_sysfs_root": str(sysfs_root), "ansible_become": False}, **extravars),
        skip_tags="ofed_install,ofed_verify",
        # the venv's ansible-playbook, as an AWX execution environment has it on PATH
        envvars={"PATH": "%s:%s" % (Path(sys.executable).parent, os.environ.get("PATH", ""))},
        quiet=True,
        settings={"suppress_ansible_output": True},
    )


def _stats(run):
    return {key: (run.stats or {}).get(key, {}).get("awx-node", 0) for key in ("ok", "changed", "failures")}


@pytest.fixture(name="roce_tree")
def _roce_tree(tmp_path):
    from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

    root = tmp_path / "sys"
    tree.build_tree(profile.load("cx7_roce_400g_2x_ipv6"), root, host_index=3)
    return root


def test_site_runs_from_an_awx_project_and_is_idempotent(project, roce_tree, tmp_path):
    conf = tmp_path / "nccl.conf"
    extravars = {"nccl_conf_path": str(conf), "nccl_socket_ifname": "bond0", "nccl_ib_traffic_class": 106}
    first = _run(project, roce_tree, "roce", extravars)
    assert first.status == "successful", first.stdout.read()
    lines = [line for line in conf.read_text().splitlines() if line and not line.startswith("#")]
    assert lines == ["NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "NCCL_IB_GID_INDEX=5", "NCCL_IB_TC=106", "NCCL_SOCKET_IFNAME=bond0"]
    assert _stats(first)["changed"] == 1  # only nccl.conf

    second = _run(project, roce_tree, "roce", extravars)
    assert second.status == "successful"
    assert _stats(second)["changed"] == 0


def test_site_fails_a_host_without_rdma_devices_with_a_clear_message(project, tmp_path):
    empty = tmp_path / "sys"
    (empty / "class").mkdir(parents=True)
    run = _run(project, empty, "infiniband", {"nccl_conf_path": str(tmp_path / "nccl.conf")})
    assert run.status == "failed"
    failed = [e for e in run.events if e.get("event") == "runner_on_failed"]
    assert failed and "No RDMA device under" in failed[0]["event_data"]["res"]["msg"]
    assert not (tmp_path / "nccl.conf").exists()
