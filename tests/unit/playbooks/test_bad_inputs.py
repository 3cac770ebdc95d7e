"""The bad-input catalogue (tests/bad_inputs/catalogue.yml): every entry fails with its message and changes nothing.

Each entry runs its playbook with ansible-playbook against a local host whose RDMA hardware is a sysfs tree built by
tests/simhost. Package installation and the roce role's changes to the host's network configuration are skipped (tags
ofed_install, ofed_verify, roce; its input checks run in the play's pre_tasks); everything else runs.

One run, several entries: the site.yml entries of one group and profile run as one ansible-playbook run, one inventory
host per entry (named by its id) with the entry's variables as host variables, each on its own simulated host (its
own tree and firmware NV state, through its own module interpreter: tests/simhost/simhost/localhost.py). Ansible runs each host until its own first
failure, so each entry is still checked on its own: its message, no change on its host, none of its output files.
That is sound because site.yml has no run_once, any_errors_fatal or max_fail_percentage before a host would reboot,
and the roles' vars/ hold only private `__` names, which no host variable overrides. Entries run alone when their
check looks at the play as a whole (verify.yml's and rolling_reboot.yml's run_once checks and max_fail_percentage), or
when they set `netns`, `hosts` or `alone: true`.

Every simulated host is this machine, so the play's fact gathering finds this machine's facts, gathered once, in a
fact cache (`_gathered_facts`) instead of running the setup module once per host; an entry with `netns` gathers its
own (its namespace has other interfaces).
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

from simhost import localhost, profile  # tests/simhost, on sys.path via tests/unit/conftest.py

REPO_ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = yaml.safe_load((REPO_ROOT / "tests" / "bad_inputs" / "catalogue.yml").read_text(encoding="utf-8"))
FIELDS = {"id", "playbook", "group", "profile", "extra_vars", "message", "netns", "hosts", "alone"}
# the playbooks whose entries may share a run (see the module's docstring)
SHARED_RUN_PLAYBOOKS = {"site.yml"}
SKIP_TAGS = "ofed_fetch,ofed_kernel,ofed_remove,ofed_install,ofed_verify,ofed_activate,rdma_host,roce,firmware_tool,health_install,health_timer"
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


def _shares_a_run(entry):
    return entry["playbook"] in SHARED_RUN_PLAYBOOKS and not (entry.get("netns") or entry.get("hosts") or entry.get("alone"))


def _run_key(entry):
    return (entry["playbook"], entry["group"], entry["profile"]) if _shares_a_run(entry) else ("alone", entry["id"])


def _run(entries, tmp_path):
    """One ansible-playbook run for `entries` (one, or several that share a run), each entry on its own simulated
    host with its own module interpreter (tests/simhost/simhost/localhost.py): {id: (inventory host or None, output
    dir)}, the completed process, and {id: snapshot of its simulated host's tree and NV state} before and after."""
    first = entries[0]
    hosts, outs, sims, extra = {}, {}, {}, {}
    for entry in entries:
        hdir = tmp_path / entry["id"]
        python = localhost.create(profile.load(first["profile"]), hdir, 1, sys.executable)
        sims[entry["id"]] = (hdir / "sys", hdir / "disk")
        out = hdir / "out"
        out.mkdir()
        own = {"rdma_sysfs_root": str(hdir / "sys"), "nccl_conf_path": str(out / "nccl.conf"),
               "verify_report_dir": str(out / "fabric-report")}
        local = {"ansible_connection": "local", "ansible_python_interpreter": str(python), "ansible_become": False}
        if len(entries) == 1:
            # `hosts` (optional): inventory hosts of the group with their own variables, all on this one simulated
            # host; the entry's variables as extra vars
            for name, hvars in (entry.get("hosts") or {"bad-input-host": {}}).items():
                hosts[name] = dict(local, **(hvars or {}))
            extra = dict(own, **entry["extra_vars"])
            outs[entry["id"]] = (None, out)
        else:
            hosts[entry["id"]] = dict(local, **dict(own, **entry["extra_vars"]))
            outs[entry["id"]] = (entry["id"], out)
    inventory = {"all": {"children": {first["group"]: {"hosts": hosts}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory), encoding="utf-8")
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(REPO_ROOT / first["playbook"]),
            "-i", str(tmp_path / "hosts.yml"), "-e", json.dumps(extra), "--skip-tags", SKIP_TAGS]
    if first.get("netns"):
        argv = UNSHARE + ["sh", "-ec", " && ".join(NETNS_SETUP) + ' && exec "$@"', "sh"] + argv
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
               ANSIBLE_HOME=str(REPO_ROOT / ".ansible"), ANSIBLE_NOCOLOR="1",
               # as many forks as hosts: the entries of a shared run go through each task together
               ANSIBLE_FORKS=str(max(5, len(entries))))
    if not first.get("netns"):
        # every host is this machine: its facts, gathered once, stand in for each host's own gathering
        env.update(_gathered_facts(tmp_path / "facts", hosts))
    before = {key: _snapshot(sysfs) + _snapshot(disk) for key, (sysfs, disk) in sims.items()}
    run = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)
    after = {key: _snapshot(sysfs) + _snapshot(disk) for key, (sysfs, disk) in sims.items()}
    return outs, run, before, after


_FACTS = []


def _gathered_facts(cache, hosts):
    """Ansible's settings for a fact cache (jsonfile, under ``cache``) that holds this machine's facts for each of
    ``hosts``: the play's fact gathering then finds them (gathering = smart) instead of running the setup module once
    per host. The facts are gathered once per process (a real gather_facts run, through the first host's interpreter:
    the action, not the setup module alone, marks the facts gathered, without which each host gathers again)."""
    env = {"ANSIBLE_GATHERING": "smart", "ANSIBLE_CACHE_PLUGIN": "ansible.builtin.jsonfile",
           "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(cache), "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "0"}
    if not _FACTS:
        name = "fact-template"
        python = next(iter(hosts.values()))["ansible_python_interpreter"]
        argv = [str(Path(sys.executable).parent / "ansible"), name, "-i", "%s," % name, "-c", "local", "-m", "ansible.builtin.gather_facts",
                "-e", "ansible_python_interpreter=%s" % python]
        template = cache.parent / "fact-template"
        run_env = dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"), ANSIBLE_HOME=str(REPO_ROOT / ".ansible"),
                       **dict(env, ANSIBLE_CACHE_PLUGIN_CONNECTION=str(template)))
        subprocess.run(argv, cwd=REPO_ROOT, env=run_env, capture_output=True, text=True, check=True, timeout=300)
        # the cache names a host's file by a prefix of Ansible's and the host's name
        (path,) = template.iterdir()
        _FACTS.append((path.name[:-len(name)], path.read_text(encoding="utf-8")))
    prefix, text = _FACTS[0]
    cache.mkdir()
    for host in hosts:
        (cache / (prefix + host)).write_text(text, encoding="utf-8")
    return env


def xdist_scopes():
    """{test name: scope} for the pytest-xdist scheduler of tests/unit/conftest.py: the entries of one shared run are
    one scope, which one worker takes, so that the run is made once (each worker has its own _RUNS)."""
    return {"test_bad_input_fails_with_its_message_and_changes_nothing[%s]" % entry["id"]: "-".join(_run_key(entry))
            for entry in CATALOGUE}


_RUNS = {}


@pytest.fixture
def catalogue_run(tmp_path_factory):
    """The run an entry belongs to, made once for all entries that share it."""
    def get(entry):
        key = _run_key(entry)
        if key not in _RUNS:
            entries = [e for e in CATALOGUE if _run_key(e) == key]
            _RUNS[key] = _run(entries, tmp_path_factory.mktemp("bad-input"))
        return _RUNS[key]
    return get


def test_every_entry_has_the_catalogue_fields_and_a_unique_id():
    ids = [entry["id"] for entry in CATALOGUE]
    assert len(ids) == len(set(ids))
    for entry in CATALOGUE:
        assert {"id", "playbook", "group", "profile", "extra_vars", "message"} <= set(entry) <= FIELDS, entry["id"]
        assert (REPO_ROOT / entry["playbook"]).is_file(), entry["id"]
        re.compile(entry["message"])


def test_entries_share_runs_only_where_each_host_is_checked_on_its_own():
    shared = [entry for entry in CATALOGUE if _shares_a_run(entry)]
    assert shared and all(entry["playbook"] == "site.yml" for entry in shared)
    assert not any(_shares_a_run(entry) for entry in CATALOGUE if entry["playbook"] in ("verify.yml", "playbooks/rolling_reboot.yml"))


@pytest.mark.parametrize("entry", CATALOGUE, ids=[entry["id"] for entry in CATALOGUE])
def test_bad_input_fails_with_its_message_and_changes_nothing(entry, catalogue_run):
    if entry.get("netns") and not _netns_allowed():
        pytest.skip("this machine does not allow unshare --net with a veth pair")
    outs, run, before, after = catalogue_run(entry)
    host, out = outs[entry["id"]]
    assert run.returncode != 0, run.stdout[-3000:]
    report = json.loads(run.stdout)
    # a failed loop task keeps each item's message under results; a shared run: only this entry's host
    messages = [msg for play in report["plays"] for task in play["tasks"] for name, result in task["hosts"].items()
                if result.get("failed") and host in (None, name)
                for msg in [result.get("msg", "")] + [item.get("msg", "") for item in result.get("results") or []
                                                      if isinstance(item, dict) and item.get("failed")]]
    assert any(re.search(entry["message"], str(msg)) for msg in messages), (messages, run.stderr[-2000:])
    assert all(stats["changed"] == 0 for name, stats in report["stats"].items() if host in (None, name)), report["stats"]
    assert before[entry["id"]] == after[entry["id"]], "the sysfs tree or the firmware's NV state changed"
    assert list(out.iterdir()) == [], "files were written: %s" % list(out.iterdir())
    for text in [run.stdout, run.stderr] + [str(msg) for msg in messages]:
        assert "Traceback" not in text and "Finalization of task args" not in text
