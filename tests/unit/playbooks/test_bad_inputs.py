"""The bad-input catalogue (tests/bad_inputs/catalogue.yml): every entry fails with its message and changes nothing.

Each entry runs its playbook with ansible-playbook against one local host whose RDMA hardware is a sysfs tree
built by tests/simhost. Package installation and the roce role's changes to the host's network configuration are skipped (tags ofed_install,
ofed_verify, roce; its input checks run in the play's pre_tasks); everything else runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simhost import profile, tree  # tests/simhost, on sys.path via tests/unit/conftest.py

SIM_BIN = Path(__file__).resolve().parents[2] / "simhost" / "bin"
REPO_ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = yaml.safe_load((REPO_ROOT / "tests" / "bad_inputs" / "catalogue.yml").read_text(encoding="utf-8"))
FIELDS = {"id", "playbook", "group", "profile", "extra_vars", "message", "netns", "hosts"}
# A fresh network namespace (with its own mount namespace, so that /sys shows its interfaces): lo up, and a veth
# pair that stays down.
UNSHARE = ["unshare", "--net", "--mount"]
NETNS_SETUP = ["mount -t sysfs sysfs /sys", "ip link set lo up", "ip link add vdown0 type veth peer name vdown1"]


def _netns_allowed():
    if not shutil.which("unshare") or not shutil.which("ip"):
        return False
    probe = subprocess.run(UNSHARE + ["sh", "-ec", " && ".join(NETNS_SETUP)], capture_output=True, check=False)
    return probe.returncode == 0


def _snapshot(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _run(entry, tmp_path, monkeypatch):
    sysfs = tmp_path / "sys"
    disk = tmp_path / "disk"
    disk.mkdir()
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(disk))
    tree.build_tree(profile.load(entry["profile"]), sysfs, host_index=1)
    out = tmp_path / "out"
    out.mkdir()
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ansible_become": False}
    # `hosts` (optional): inventory hosts of the group with their own variables, all on this one simulated host
    hosts = dict((name, dict(local, **(hvars or {}))) for name, hvars in (entry.get("hosts") or {"bad-input-host": {}}).items())
    inventory = {"all": {"children": {entry["group"]: {"hosts": hosts}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory), encoding="utf-8")
    extra = dict({"rdma_sysfs_root": str(sysfs), "nccl_conf_path": str(out / "nccl.conf"),
                  "verify_report_dir": str(out / "fabric-report")}, **entry["extra_vars"])
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(REPO_ROOT / entry["playbook"]),
            "-i", str(tmp_path / "hosts.yml"), "-e", json.dumps(extra), "--skip-tags", "ofed_fetch,ofed_kernel,ofed_remove,ofed_install,ofed_verify,ofed_activate,rdma_host,roce,firmware_tool"]
    if entry.get("netns"):
        argv = UNSHARE + ["sh", "-ec", " && ".join(NETNS_SETUP) + ' && exec "$@"', "sh"] + argv
    # the simulated host's firmware tool (mstconfig over its NV state on a temp "disk") comes first on PATH; only it,
    # since the other stand-ins (ethtool, which fact gathering calls) keep runtime state in the tree
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mstconfig").symlink_to(SIM_BIN / "mstconfig")
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
               ANSIBLE_HOME=str(REPO_ROOT / ".ansible"), ANSIBLE_NOCOLOR="1", SIMHOST_SYSFS_ROOT=str(sysfs),
               SIMHOST_PERSIST_DIR=str(disk), PATH="%s:%s" % (bindir, os.environ.get("PATH", "")))
    before = _snapshot(sysfs) + _snapshot(disk)
    run = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    return run, before, _snapshot(sysfs) + _snapshot(disk), out


def test_every_entry_has_the_catalogue_fields_and_a_unique_id():
    ids = [entry["id"] for entry in CATALOGUE]
    assert len(ids) == len(set(ids))
    for entry in CATALOGUE:
        assert {"id", "playbook", "group", "profile", "extra_vars", "message"} <= set(entry) <= FIELDS, entry["id"]
        assert (REPO_ROOT / entry["playbook"]).is_file(), entry["id"]
        re.compile(entry["message"])


@pytest.mark.parametrize("entry", CATALOGUE, ids=[entry["id"] for entry in CATALOGUE])
def test_bad_input_fails_with_its_message_and_changes_nothing(entry, tmp_path, monkeypatch):
    if entry.get("netns") and not _netns_allowed():
        pytest.skip("this machine does not allow unshare --net with a veth pair")
    run, before, after, out = _run(entry, tmp_path, monkeypatch)
    assert run.returncode != 0, run.stdout[-3000:]
    report = json.loads(run.stdout)
    # a failed loop task keeps each item's message under results
    messages = [msg for play in report["plays"] for task in play["tasks"] for result in task["hosts"].values()
                if result.get("failed")
                for msg in [result.get("msg", "")] + [item.get("msg", "") for item in result.get("results") or []
                                                      if isinstance(item, dict) and item.get("failed")]]
    assert any(re.search(entry["message"], str(msg)) for msg in messages), (messages, run.stderr[-2000:])
    assert all(stats["changed"] == 0 for stats in report["stats"].values()), report["stats"]
    assert before == after, "the sysfs tree or the firmware's NV state changed"
    assert list(out.iterdir()) == [], "files were written: %s" % list(out.iterdir())
    for text in [run.stdout, run.stderr] + [str(msg) for msg in messages]:
        assert "Traceback" not in text and "Finalization of task args" not in text
