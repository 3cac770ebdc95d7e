"""The hpcnet.rdma.rdma_host role: its argument spec, and the role itself run with ansible-playbook on this machine.

The playbook runs use the local connection and a temporary sysfs root. The files of the memlock phase are
redirected into a temporary folder through the role's internal path variables (``__rdma_host_limits_file``,
``__rdma_host_systemd_dir``, ``__rdma_host_systemd_file``), so that nothing outside it is written. The modules phase
is skipped (``--skip-tags rdma_host_modules``): it runs modprobe, which this machine lacks, and writes
``/etc/modules-load.d`` of the machine; module_utils/kernel_modules is tested in
tests/unit/plugins/module_utils/test_host_settings.py, the phase itself on simulated hosts by Molecule.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

REPO_ROOT = Path(__file__).resolve().parents[3]
ROLE = REPO_ROOT / "roles" / "rdma_host"
SPEC = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
HOST = "rdma-host-test"
PREFIX = "hpcnet.rdma.rdma_host : "


# -- argument spec ----------------------------------------------------------------------------------------------------
def _validate(**params):
    # the role's defaults are templated from collection-wide variables; give the spec concrete values
    values = {"rdma_host_memlock": "unlimited", "rdma_host_modules": ["ib_umad", "ib_uverbs", "rdma_ucm"],
              "rdma_host_ipoib": False, "rdma_host_gdr": "auto", "rdma_host_sysfs_root": "/sys"}
    values.update(params)
    result = ArgumentSpecValidator(SPEC).validate(values)
    return result.error_messages, result.validated_parameters


@pytest.mark.parametrize("value, validated", [
    (True, "true"), (False, "false"), ("true", "true"), ("false", "false"), ("auto", "auto"),
])
def test_spec_accepts_gdr_true_false_and_auto(value, validated):
    errors, params = _validate(rdma_host_gdr=value)
    assert errors == []
    assert params["rdma_host_gdr"] == validated


@pytest.mark.parametrize("value", ["maybe", "yes", "on", 1, "enabled"])
def test_spec_refuses_other_gdr_values_with_the_field_and_the_choices(value):
    errors, _params = _validate(rdma_host_gdr=value)
    assert errors == ["value of rdma_host_gdr must be one of: true, false, auto, got: %s" % value]


@pytest.mark.parametrize("value", ["unlimited", "1048576", 1048576])
def test_spec_accepts_memlock_as_a_string_or_a_number(value):
    assert _validate(rdma_host_memlock=value)[0] == []


def test_spec_takes_the_module_list_as_a_list_or_a_comma_separated_string():
    assert _validate(rdma_host_modules="ib_umad,rdma_ucm")[1]["rdma_host_modules"] == ["ib_umad", "rdma_ucm"]
    assert _validate(rdma_host_modules={"a": 1})[0] != []


@pytest.mark.parametrize("value", ["maybe", [1]])
def test_spec_refuses_an_ipoib_switch_that_is_not_a_boolean(value):
    errors = _validate(rdma_host_ipoib=value)[0]
    assert errors and "rdma_host_ipoib" in errors[0]


def test_spec_refuses_unknown_options():
    errors = _validate(rdma_host_memlok="unlimited")[0]
    assert errors and "rdma_host_memlok" in errors[0]


# -- the role on this machine -----------------------------------------------------------------------------------------
def _play(tmp_path, extra_vars=None, check=False, driver=False, skip=("rdma_host_modules",)):
    """Run the role; return (returncode, [(task name, host result)], stats, files written under tmp_path/etc)."""
    sysfs = tmp_path / "sys"
    (sysfs / "module").mkdir(parents=True, exist_ok=True)
    if driver:
        (sysfs / "module" / "nvidia").mkdir(exist_ok=True)
    etc = tmp_path / "etc"
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"name": "Host settings", "hosts": "all", "gather_facts": True,
                                         "roles": [{"role": "hpcnet.rdma.rdma_host"}]}]))
    inventory = {"all": {"hosts": {HOST: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                          "ansible_become": False}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    variables = {"rdma_sysfs_root": str(sysfs),
                 "__rdma_host_limits_file": str(etc / "security/limits.d/90-hpcnet-rdma.conf"),
                 "__rdma_host_systemd_dir": str(etc / "systemd/system.conf.d"),
                 "__rdma_host_systemd_file": str(etc / "systemd/system.conf.d/90-hpcnet-rdma.conf")}
    variables.update(extra_vars or {})
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-i", str(tmp_path / "hosts.yml"),
            "-e", json.dumps(variables)] + (["--check", "--diff"] if check else [])
    if skip:
        argv += ["--skip-tags", ",".join(skip)]
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
               ANSIBLE_HOME=str(REPO_ROOT / ".ansible"), ANSIBLE_NOCOLOR="1")
    run = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    for text in (run.stdout, run.stderr):
        assert "Traceback" not in text, text[-3000:]
    report = json.loads(run.stdout)
    tasks = [(task["task"]["name"].removeprefix(PREFIX), task["hosts"][HOST]) for play in report["plays"]
             for task in play["tasks"] if HOST in task["hosts"]]
    files = {str(p.relative_to(etc)): p.read_text() for p in sorted(etc.rglob("*")) if p.is_file()} if etc.exists() else {}
    return run.returncode, tasks, report["stats"][HOST], files


def _result(tasks, name):
    found = [result for task, result in tasks if task == name]
    assert found, [task for task, _result in tasks]
    return found[-1]


def _after(result):
    """The text a template task would write, from its --diff output."""
    diff = result["diff"]
    return (diff[0] if isinstance(diff, list) else diff)["after"]


LIMITS_UNLIMITED = """*          soft   memlock  unlimited
*          hard   memlock  unlimited
root       soft   memlock  unlimited
root       hard   memlock  unlimited
"""


def test_check_mode_renders_both_files_changes_nothing_and_does_not_reexecute_systemd(tmp_path):
    returncode, tasks, stats, files = _play(tmp_path, check=True)
    assert returncode == 0, tasks[-3:]
    limits = _after(_result(tasks, "Write the locked-memory limit of login sessions (pam_limits)"))
    assert limits.startswith("# Ansible managed\n")
    assert limits.endswith(LIMITS_UNLIMITED)
    system_conf = _after(_result(tasks, "Write the default locked-memory limit of systemd services"))
    assert system_conf.endswith("\n[Manager]\nDefaultLimitMEMLOCK=infinity\n")
    assert files == {}
    handler = _result(tasks, "Re-execute the systemd manager")
    assert handler.get("skipped") and handler.get("false_condition") == "not ansible_check_mode"
    state = _result(tasks, "Publish the host settings for the play's summary")["ansible_facts"]
    assert state["rdma_host_state"] == {"memlock": "unlimited", "modules": ["ib_umad", "ib_uverbs", "rdma_ucm"],
                                        "gdr": "off", "gpu_driver": "absent", "peermem": "not_loaded"}
    assert state["rdma_host_gdr_state"] == "off"
    assert stats["failures"] == 0


def test_a_kib_limit_goes_to_limits_d_as_is_and_to_systemd_with_k_and_a_second_run_changes_nothing(tmp_path):
    variables = {"rdma_host_memlock": 1048576}
    returncode, tasks, stats, files = _play(tmp_path, variables)
    assert returncode == 0, tasks[-3:]
    assert stats["changed"] == 3  # the two directories (one task), two files
    assert files["security/limits.d/90-hpcnet-rdma.conf"].endswith(LIMITS_UNLIMITED.replace("unlimited", "1048576"))
    assert files["systemd/system.conf.d/90-hpcnet-rdma.conf"].endswith("[Manager]\nDefaultLimitMEMLOCK=1048576K\n")
    assert _result(tasks, "Publish the host settings for the play's summary")["ansible_facts"][
        "rdma_host_state"]["memlock"] == 1048576
    returncode, tasks, stats, again = _play(tmp_path, variables)
    assert returncode == 0 and stats["changed"] == 0 and again == files


def test_ipoib_is_added_on_infiniband_hosts_that_use_it(tmp_path):
    returncode, tasks, _stats, _files = _play(tmp_path, {"rdma_host_ipoib": True}, check=True)
    assert returncode == 0
    assert _result(tasks, "Publish the host settings for the play's summary")["ansible_facts"][
        "rdma_host_state"]["modules"] == ["ib_umad", "ib_uverbs", "rdma_ucm", "ib_ipoib"]


def test_gdr_true_without_a_gpu_driver_says_so_and_does_not_fail(tmp_path):
    returncode, tasks, stats, _files = _play(tmp_path, {"rdma_gdr": True}, check=True)
    assert returncode == 0 and stats["failures"] == 0
    warning = _result(tasks, "Say that GPUDirect RDMA was asked for on a host without the NVIDIA GPU driver")
    assert warning["msg"].startswith("WARNING: rdma_gdr is true, but rdma-host-test has no NVIDIA GPU driver loaded")
    facts = _result(tasks, "Publish the host settings for the play's summary")["ansible_facts"]
    assert facts["rdma_host_gdr_state"] == "no_gpu_driver"
    assert facts["rdma_host_state"]["gdr"] == "no_gpu_driver"
    assert facts["rdma_host_state"]["gpu_driver"] == "absent"


def test_gdr_false_leaves_nvidia_peermem_alone_even_with_a_gpu_driver(tmp_path):
    # no module to load, nothing for modprobe to probe on this machine
    returncode, tasks, _stats, _files = _play(tmp_path, {"rdma_gdr": False, "rdma_host_modules": []}, check=True,
                                              driver=True, skip=())
    assert returncode == 0, tasks[-3:]
    facts = _result(tasks, "Publish the host settings for the play's summary")["ansible_facts"]
    assert facts["rdma_host_state"]["gdr"] == "off" and facts["rdma_host_state"]["gpu_driver"] == "present"


@pytest.mark.parametrize("extra_vars, message", [
    ({"rdma_host_memlock": "64M"},
     "rdma_host_memlock must be 'unlimited' or a number of KiB (a positive integer, as limits.conf counts memlock); "
     "got '64M'."),
    ({"rdma_host_memlock": 0}, "rdma_host_memlock must be 'unlimited' or a number of KiB"),
    ({"rdma_host_modules": ["ib_umad", "ib.uverbs"]},
     "rdma_host_modules takes kernel module names (letters, digits, '_' and '-', as in ib_uverbs); got [\"ib.uverbs\"]."),
    ({"rdma_gdr": "maybe"}, "value of rdma_host_gdr must be one of: true, false, auto, got: maybe"),
])
def test_bad_input_is_refused_before_anything_changes(tmp_path, extra_vars, message):
    returncode, tasks, stats, files = _play(tmp_path, extra_vars)
    assert returncode != 0
    messages = [str(result.get("msg", "")) for _task, result in tasks if result.get("failed")]
    assert any(message in msg for msg in messages), messages
    assert stats["changed"] == 0 and files == {}


def test_a_gpu_host_whose_peermem_modprobe_cannot_load_fails_in_preflight_before_any_change(tmp_path):
    # this machine has no modprobe: the dry run (modprobe -n) of nvidia_peermem fails, and so does the role,
    # before the memlock phase
    returncode, tasks, stats, files = _play(tmp_path, {"rdma_host_modules": []}, driver=True, skip=())
    assert returncode != 0
    failed = [(task, result) for task, result in tasks if result.get("failed")]
    assert failed[-1][0] == "Fail on the modules that modprobe cannot find"
    assert failed[-1][1]["msg"].startswith("Nothing was changed on rdma-host-test (kernel ")
    assert "modprobe" in failed[-1][1]["msg"]
    assert stats["changed"] == 0 and files == {}
