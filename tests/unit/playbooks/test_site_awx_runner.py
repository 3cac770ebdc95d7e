"""The AWX path: ansible-runner runs every playbook the collection ships, from a private data dir laid out as AWX does.

AWX (and Ansible Automation Platform) hands ansible-runner a private data dir with the project checked out under
``project/``, the inventory as an executable script under ``inventory/hosts`` (it prints the inventory as JSON),
the job's extra variables (template, survey, launch) in the YAML file ``env/extravars``, environment variables in
``env/envvars``, runner settings in ``env/settings`` and the remaining ansible-playbook options (here the skipped
tags) in ``env/cmdline``. The call itself names only the private data dir and the playbook. Each shipped playbook
runs from this repository as the project; the collection's playbooks also run by FQCN from an infrastructure
project whose collections/requirements.yml names hpcnet.rdma, with the collection installed from the `make build`
tarball into ``requirements_collections/``, where AWX installs a project's collections.

The host is the controller itself (local connection) with a simulated sysfs tree, so the run needs neither
containers nor RDMA hardware. What would change the controller's packages or network is skipped (SKIP_TAGS);
the preflights, the input checks and the nccl role run for real.
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ansible_runner = pytest.importorskip("ansible_runner")

REPO_ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text(encoding="utf-8"))
COLLECTION = "%s.%s" % (GALAXY["namespace"], GALAXY["name"])
# What needs a real (or simulated) host rather than the controller: package installs, the roce role's QoS tools and
# network configuration, the health check's program and systemd units (Molecule covers those on simulated hosts).
# Preflights and nccl run for real; the health playbook's own case installs into the job's directory.
SKIP_TAGS = ("firmware,ofed_fetch,ofed_kernel,ofed_remove,ofed_install,ofed_verify,ofed_activate,rdma_host,roce_probe,"
             "roce_address,roce_configure,roce_persist,health_install,health_timer")
HOST = "awx-node"


def _is_playbook(path):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    keys = {"hosts", "import_playbook", "ansible.builtin.import_playbook", "ansible.legacy.import_playbook"}
    return isinstance(data, list) and bool(data) and all(isinstance(p, dict) and keys & set(p) for p in data)


def shipped_playbooks():
    """The repository's root playbooks (site.yml) and the collection's playbooks/ (not their task files)."""
    found = [p for p in sorted(REPO_ROOT.glob("*.y*ml")) if _is_playbook(p)]
    found += [p for p in sorted((REPO_ROOT / "playbooks").rglob("*.y*ml")) if _is_playbook(p)]
    return [str(p.relative_to(REPO_ROOT)) for p in found]


# One or more runner cases per shipped playbook: (shipped playbook, project, what the job template runs).
# "repo": AWX's project is this repository and the template's playbook is the file.
# "infra": AWX's project is another repository that lists hpcnet.rdma in collections/requirements.yml; its
# site.yml imports the collection's playbook by FQCN.
RUNNER_CASES = [
    ("site.yml", "repo", "site.yml"),
    ("playbooks/site.yml", "repo", "playbooks/site.yml"),
    ("playbooks/site.yml", "infra", "site.yml"),
]
CASE_IDS = ["%s-from-%s" % (case[0], case[1]) for case in RUNNER_CASES]
# The second, no-op run of the same job: once, on the path AWX users take (the collection installed from the infra
# project's requirements). Every Molecule scenario proves site.yml's idempotence on simulated hosts; here it is the
# job's inputs as a survey sends them that must not change anything on a re-run, whichever path found the playbook.
IDEMPOTENCE_CASE = "playbooks/site.yml-from-infra"
# Playbooks that change no configuration file and have their own tests below.
ROLLING_CASES = [("playbooks/rolling_reboot.yml", "repo", "playbooks/rolling_reboot.yml")]
# Playbooks that only read the hosts and write a report on the controller.
VERIFY_CASES = [("verify.yml", "repo", "verify.yml"), ("playbooks/verify.yml", "repo", "playbooks/verify.yml")]
# The health playbook: the expected state and the program, written under the job's directory.
HEALTH_CASES = [("health.yml", "repo", "health.yml"), ("playbooks/health.yml", "repo", "playbooks/health.yml")]


def test_every_shipped_playbook_has_a_runner_case():
    """A new playbook under playbooks/ (or at the root) needs its AWX case in RUNNER_CASES or ROLLING_CASES."""
    assert sorted(shipped_playbooks()) == sorted({case[0] for case in RUNNER_CASES + ROLLING_CASES + VERIFY_CASES + HEALTH_CASES})
    assert IDEMPOTENCE_CASE in CASE_IDS


def _default_route_interface():
    if not shutil.which("ip"):
        return None
    out = subprocess.run(["ip", "-j", "route", "show", "default"], capture_output=True, text=True, check=False)
    try:
        routes = json.loads(out.stdout or "[]")
    except ValueError:
        return None
    return next((r["dev"] for r in routes if r.get("dev")), None)


@pytest.fixture(name="collection_tarball", scope="module")
def _collection_tarball(tmp_path_factory):
    """What `make build` makes (ansible-galaxy collection build), into a temp dir."""
    out = tmp_path_factory.mktemp("build")
    env = dict(os.environ, ANSIBLE_HOME=str(out / ".ansible"))
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out)],
                   cwd=REPO_ROOT, env=env, check=True, capture_output=True)
    return next(out.glob("*.tar.gz"))


def _awx_collections_path(pdd, project):
    """ANSIBLE_COLLECTIONS_PATH as AWX (22.7 and later) sets it: the project's installed requirements, the project's
    ansible.cfg collections_path (relative paths resolve from the project, the job's working directory), then the
    defaults, which in an EE include the collections baked into the image."""
    paths = [str(pdd / "requirements_collections")]
    cfg = project / "ansible.cfg"
    if cfg.is_file():
        parser = configparser.ConfigParser()
        parser.read(cfg)
        paths += [p for p in parser.get("defaults", "collections_path", fallback="").split(":") if p]
    return ":".join(paths + ["~/.ansible/collections", "/usr/share/ansible/collections"])


def _private_data_dir(tmp_path, kind, tarball):
    pdd = tmp_path / "runner"
    (pdd / "inventory").mkdir(parents=True)
    (pdd / "env").mkdir()
    (pdd / "requirements_collections").mkdir()
    if kind == "repo":
        (pdd / "project").symlink_to(REPO_ROOT, target_is_directory=True)
        collection_root = REPO_ROOT
    else:
        project = pdd / "project"
        (project / "collections").mkdir(parents=True)
        (project / "collections" / "requirements.yml").write_text(yaml.safe_dump({"collections": [{"name": COLLECTION}]}))
        (project / "site.yml").write_text(yaml.safe_dump([{
            "name": "Run the %s site playbook" % COLLECTION, "ansible.builtin.import_playbook": COLLECTION + ".site"}]))
        # The project sync installs collections/requirements.yml; here from the tarball, as Galaxy would serve it.
        subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--force", str(tarball),
                        "-p", str(pdd / "requirements_collections")],
                       cwd=project, env=dict(os.environ, ANSIBLE_HOME=str(tmp_path / ".ansible")), check=True, capture_output=True)
        collection_root = pdd / "requirements_collections" / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"]
    return pdd, collection_root


def _write_job(pdd, group, extravars, skip_tags=SKIP_TAGS):
    """inventory/hosts and env/* as AWX writes them for a job template launch."""
    inventory = {
        "all": {"children": ["ungrouped", group]},
        "ungrouped": {"hosts": []},
        group: {"hosts": [HOST]},
        "_meta": {"hostvars": {HOST: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}},
    }
    hosts = pdd / "inventory" / "hosts"
    hosts.write_text("#! /usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(%r)\n" % json.dumps(inventory))
    os.chmod(hosts, stat.S_IRUSR | stat.S_IXUSR | stat.S_IWUSR)
    (pdd / "env" / "extravars").write_text(yaml.safe_dump(extravars, default_flow_style=False))
    (pdd / "env" / "envvars").write_text(yaml.safe_dump({
        # the EE's ansible-playbook, here the venv's
        "PATH": "%s:%s" % (BIN, os.environ.get("PATH", "/usr/bin:/bin")),
        "ANSIBLE_COLLECTIONS_PATH": _awx_collections_path(pdd, pdd / "project"),
        "ANSIBLE_ROLES_PATH": "%s:~/.ansible/roles:/usr/share/ansible/roles:/etc/ansible/roles" % (pdd / "requirements_roles"),
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_FORCE_COLOR": "False",
        "AWX_PRIVATE_DATA_DIR": str(pdd),
    }))
    (pdd / "env" / "settings").write_text(yaml.safe_dump({"job_timeout": 600, "suppress_ansible_output": True}))
    (pdd / "env" / "cmdline").write_text("--skip-tags %s" % skip_tags)


def _run(pdd, playbook, group, extravars, skip_tags=SKIP_TAGS):
    _write_job(pdd, group, extravars, skip_tags)
    run = ansible_runner.run(private_data_dir=str(pdd), playbook=playbook, quiet=True)
    command = run.config.command
    assert "-e" in command and "@%s" % (pdd / "env" / "extravars") in command, command  # from the file, not the call
    assert command[command.index("-i") + 1] == str(pdd / "inventory"), command
    return run


def _stats(run):
    return {key: (run.stats or {}).get(key, {}).get(HOST, 0) for key in ("ok", "changed", "failures")}


def _role_task_paths(run):
    return {e["event_data"]["task_path"].rsplit(":", 1)[0] for e in run.events
            if e.get("event") in ("runner_on_ok", "runner_on_failed") and e.get("event_data", {}).get("role")
            and e["event_data"].get("task_path")}


@pytest.fixture(name="job")
def _job(tmp_path, request, monkeypatch):
    # AWX sets no ANSIBLE_CONFIG: ansible-playbook finds the project's ansible.cfg in the working directory.
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    shipped, kind, playbook = request.param
    tarball = request.getfixturevalue("collection_tarball") if kind == "infra" else None
    pdd, collection_root = _private_data_dir(tmp_path, kind, tarball)
    return pdd, playbook, collection_root


@pytest.fixture(name="roce_tree")
def _roce_tree(tmp_path):
    from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

    root = tmp_path / "sys"
    tree.build_tree(profile.load("cx7_roce_400g_2x_ipv6"), root, host_index=3)
    return root


@pytest.mark.parametrize("job", RUNNER_CASES, ids=CASE_IDS, indirect=True)
def test_awx_job_writes_nccl_conf_and_is_idempotent(job, roce_tree, tmp_path, request):
    ifname = _default_route_interface()
    if not ifname:
        pytest.skip("this machine has no IPv4 default route: no real interface to give NCCL_SOCKET_IFNAME")
    pdd, playbook, collection_root = job
    conf = tmp_path / "nccl.conf"
    # As a survey sends them: strings, and an integer for the traffic class.
    extravars = {"rdma_sysfs_root": str(roce_tree), "ansible_become": False, "nccl_conf_path": str(conf),
                 "nccl_socket_ifname": ifname, "nccl_ib_traffic_class": 106}
    first = _run(pdd, playbook, "roce", extravars)
    assert first.status == "successful", first.stdout.read()
    lines = [line for line in conf.read_text().splitlines() if line and not line.startswith("#")]
    assert lines == ["NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "NCCL_IB_GID_INDEX=5", "NCCL_IB_TC=106", "NCCL_SOCKET_IFNAME=" + ifname]
    assert _stats(first)["changed"] == 1  # only nccl.conf
    # The roles ran from the collection the project provides: the clone's link, or requirements_collections.
    paths = _role_task_paths(first)
    assert paths and all(Path(p).resolve().is_relative_to(collection_root.resolve()) for p in paths), paths

    if request.node.callspec.id != IDEMPOTENCE_CASE:
        return
    second = _run(pdd, playbook, "roce", extravars)
    assert second.status == "successful", second.stdout.read()
    assert _stats(second)["changed"] == 0
    assert _stats(second)["failures"] == 0


@pytest.mark.parametrize("job", RUNNER_CASES, ids=CASE_IDS, indirect=True)
def test_awx_job_fails_a_host_without_rdma_devices_with_a_clear_message(job, tmp_path):
    pdd, playbook, _ = job
    empty = tmp_path / "sys"
    (empty / "class").mkdir(parents=True)
    run = _run(pdd, playbook, "infiniband",
               {"rdma_sysfs_root": str(empty), "ansible_become": False, "nccl_conf_path": str(tmp_path / "nccl.conf")})
    assert run.status == "failed"
    failed = [e for e in run.events if e.get("event") == "runner_on_failed"]
    assert failed and "No RDMA device under %s/class/infiniband on %s" % (empty, HOST) in failed[0]["event_data"]["res"]["msg"]
    assert not (tmp_path / "nccl.conf").exists()


@pytest.mark.parametrize("job", ROLLING_CASES, ids=["%s-from-%s" % (c[0], c[1]) for c in ROLLING_CASES], indirect=True)
def test_awx_rolling_reboot_with_nothing_pending_reboots_nothing(job, tmp_path):
    """A job template for the rolling reboot: a host whose firmware has nothing pending is read and left alone."""
    pdd, playbook, _ = job
    empty = tmp_path / "sys"
    (empty / "class" / "infiniband").mkdir(parents=True)
    run = _run(pdd, playbook, "roce", {"rdma_sysfs_root": str(empty), "ansible_become": False})
    assert run.status == "successful", run.stdout.read()
    assert _stats(run)["changed"] == 0 and _stats(run)["failures"] == 0
    started = [e["event_data"].get("task") for e in run.events if e.get("event") == "runner_on_start"]
    assert "Reboot" not in started


@pytest.mark.parametrize("job", VERIFY_CASES, ids=["%s-from-%s" % (c[0], c[1]) for c in VERIFY_CASES], indirect=True)
def test_awx_verify_job_writes_the_report_and_changes_no_host(job, roce_tree, tmp_path):
    """A job template for verify.yml on a host the collection did not configure: the report names what differs."""
    pdd, playbook, _ = job
    report_dir = tmp_path / "report"
    run = _run(pdd, playbook, "roce", {"rdma_sysfs_root": str(roce_tree), "ansible_become": False,
                                       "verify_report_dir": str(report_dir), "verify_fail_on_findings": False})
    assert run.status == "successful", run.stdout.read()
    report = json.loads((report_dir / "fabric-report.json").read_text())
    assert set(report) >= {"verdict", "hosts", "findings", "perftest", "nccl", "counters"}
    assert report["hosts"][HOST]["group"] == "roce"
    assert report["perftest"] == [] and report["nccl"] == {}  # one host: no pair, no launch
    assert (report_dir / "fabric-report.html").read_text().count('id="verdict"') == 1
    # only the controller's report files changed (the directory and the two files), nothing on the host
    changed = [e["event_data"]["task"] for e in run.events if e.get("event") == "runner_on_ok"
               and e["event_data"]["res"].get("changed")]
    assert sorted(changed) == ["Create the report directory", "Write fabric-report.html", "Write fabric-report.json"]


@pytest.mark.parametrize("job", HEALTH_CASES, ids=["%s-from-%s" % (c[0], c[1]) for c in HEALTH_CASES], indirect=True)
def test_awx_health_job_writes_the_expected_state_and_program_once(job, roce_tree, tmp_path):
    """A job template for the health playbook: the expected state and the program, then a no-op second run."""
    pdd, playbook, _ = job
    extravars = {"rdma_sysfs_root": str(roce_tree), "ansible_become": False, "health_metrics": "false",
                 "health_expected_path": str(tmp_path / "health.json"), "health_install_prefix": str(tmp_path / "usr")}
    first = _run(pdd, playbook, "roce", extravars, "roce_probe")
    assert first.status == "successful", first.stdout.read()
    assert _stats(first)["changed"] == 1
    expected = json.loads((tmp_path / "health.json").read_text())
    assert expected["host"] == HOST and [p["device"] for p in expected["ports"]] == ["mlx5_0", "mlx5_1"]
    assert (tmp_path / "usr/sbin/hpcnet-rdma-health").exists()
    second = _run(pdd, playbook, "roce", extravars, "roce_probe")
    assert second.status == "successful" and _stats(second)["changed"] == 0
