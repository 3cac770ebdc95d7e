"""Runs limited by tags: a role whose own phases the tags leave out changes nothing and fails nothing.

`make demo-fault` and the repairs the verify report prints run site.yml with --tags roce, --tags firmware or
--tags nccl,rdma_host. The ofed and firmware roles include their change phases with the `always` tag (the phases
inside keep their own tags), so such a run reaches those includes with the preflight left out; they must then be
skipped, not fail on the preflight's missing results. Run with ansible-playbook on this machine, check mode, local
connection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
HOST = "tag-test"


def _play(tmp_path, role, tags):
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"name": "One role", "hosts": "all", "gather_facts": True,
                                         "roles": [{"role": "hpcnet.rdma." + role, "tags": [role]}]}]))
    inventory = {"all": {"hosts": {HOST: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                          "ansible_become": False, "rdma_sysfs_root": str(tmp_path / "sys")}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-i", str(tmp_path / "hosts.yml"),
            "--check", "--tags", tags]
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
               ANSIBLE_HOME=str(REPO_ROOT / ".ansible"), ANSIBLE_NOCOLOR="1")
    run = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    report = json.loads(run.stdout)
    ran = [task["task"]["name"] for play in report["plays"] for task in play["tasks"]
           if HOST in task["hosts"] and not task["hosts"][HOST].get("skipped")]
    return run.returncode, report["stats"][HOST], ran, run.stdout[-3000:]


@pytest.mark.parametrize("role, tags", [("ofed", "roce"), ("ofed", "ofed_activate"), ("firmware", "roce")])
def test_a_run_whose_tags_leave_the_role_out_fails_nothing_and_changes_nothing(tmp_path, role, tags):
    returncode, stats, ran, tail = _play(tmp_path, role, tags)
    assert returncode == 0, tail
    assert stats["failures"] == 0 and stats["changed"] == 0, tail
    # Ansible's own: fact gathering, the argument spec check it inserts (tagged always), the always-tagged includes
    assert all(name == "Gathering Facts" or "Validating arguments against arg spec" in name
               or name.endswith(("Change the stack (fetch, kernel, remove, install, verify, activate) and the device naming rule",
                                 "Tool and configure")) for name in ran), ran
