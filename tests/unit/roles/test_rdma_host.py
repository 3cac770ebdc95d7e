"""The hpcnet.rdma.rdma_host role: its argument spec, and the role itself run with ansible-playbook on this machine.

The playbook runs use the local connection and a temporary sysfs root whose module/<name> directories say which
modules are loaded. The files are redirected into a temporary folder through the role's internal path variables
(``__rdma_host_limits_file``, ``__rdma_host_systemd_file``, ``__rdma_host_modules_load_dir``), so that nothing
outside it is written; modprobe, which this machine lacks, is only reached by the tests of a module that is not
loaded (it fails, as a missing module does). Loading for real is tested on the simulated hosts by Molecule.
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
LOADED = ("ib_umad", "ib_uverbs", "rdma_ucm")


def _play(tmp_path, extra_vars=None, check=False, driver=False, loaded=LOADED, pam=True, modprobe=None):
    """Run the role; return (returncode, [(task name, host result)], stats, files written under tmp_path/etc).

    ``loaded``: the modules the temporary sysfs shows as loaded (module/<name>/initstate live); modprobe, which this
    machine lacks, runs only for the others. ``pam``: an sshd PAM file that calls pam_limits. ``modprobe``: the
    script of a modprobe stand-in put first on PATH."""
    sysfs = tmp_path / "sys"
    (sysfs / "module").mkdir(parents=True, exist_ok=True)
    for name in loaded:
        (sysfs / "module" / name).mkdir(exist_ok=True)
        (sysfs / "module" / name / "initstate").write_text("live\n")
    if driver:
        (sysfs / "module" / "nvidia").mkdir(exist_ok=True)
    pam_dir = tmp_path / "pam.d"
    pam_dir.mkdir(exist_ok=True)
    if pam:
        (pam_dir / "sshd").write_text("account required pam_nologin.so\nsession    required     pam_limits.so\n")
    etc = tmp_path / "etc"
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"name": "Host settings", "hosts": "all", "gather_facts": True,
                                         "roles": [{"role": "hpcnet.rdma.rdma_host"}]}]))
    inventory = {"all": {"hosts": {HOST: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                          "ansible_become": False}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    variables = {"rdma_sysfs_root": str(sysfs),
                 "__rdma_host_limits_file": str(etc / "security/limits.d/90-hpcnet-rdma.conf"),
                 "__rdma_host_systemd_file": str(etc / "systemd/system.conf.d/90-hpcnet-rdma.conf"),
                 "__rdma_host_modules_load_dir": str(etc / "modules-load.d"),
                 "__rdma_host_proc_modules": str(tmp_path / "proc-modules"),
                 "__rdma_host_pam_files": ["sshd"]}
    variables.update(extra_vars or {})
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-i", str(tmp_path / "hosts.yml"),
            "-e", json.dumps(variables)] + (["--check", "--diff"] if check else [])
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
               ANSIBLE_HOME=str(REPO_ROOT / ".ansible"), ANSIBLE_NOCOLOR="1")
    if modprobe:
        (tmp_path / "bin").mkdir(exist_ok=True)
        (tmp_path / "bin" / "modprobe").write_text(modprobe)
        (tmp_path / "bin" / "modprobe").chmod(0o755)
        env["PATH"] = "%s:%s" % (tmp_path / "bin", env["PATH"])
    # the module reads /etc/pam.d; the role passes no pam_dir, so point it at the temporary one through the module
    # defaults of this play
    playbook.write_text(yaml.safe_dump([{"name": "Host settings", "hosts": "all", "gather_facts": True,
                                         "module_defaults": {"hpcnet.rdma.rdma_host_settings": {"pam_dir": str(pam_dir)}},
                                         "roles": [{"role": "hpcnet.rdma.rdma_host"}]}]))
    run = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    for text in (run.stdout, run.stderr):
        assert "Traceback" not in text, text[-3000:]
    report = json.loads(run.stdout)
    tasks = [(task["task"]["name"].removeprefix(PREFIX), task["hosts"][HOST]) for play in report["plays"]
             for task in play["tasks"] if HOST in task["hosts"]]
    files = {str(p.relative_to(etc)): p.read_text() for p in sorted(etc.rglob("*")) if p.is_file()} if etc.exists() else {}
    return run.returncode, tasks, report["stats"][HOST], files


APPLY = "Set the locked-memory limits, load the RDMA modules and nvidia_peermem now and at boot"
PUBLISH = "Publish the host settings for the play's summary"


def _result(tasks, name):
    found = [result for task, result in tasks if task == name]
    assert found, [task for task, _result in tasks]
    return found[-1]


def _diff(result, suffix):
    """The text the module would write to the file whose path ends with ``suffix``, from its --diff output."""
    found = [d["after"] for d in result["diff"] if d["after_header"].endswith(suffix)]
    assert found, [d["after_header"] for d in result["diff"]]
    return found[0]


LIMITS_UNLIMITED = """*          soft   memlock  unlimited
*          hard   memlock  unlimited
root       soft   memlock  unlimited
root       hard   memlock  unlimited
"""


def test_check_mode_renders_the_files_changes_nothing_and_does_not_reexecute_systemd(tmp_path):
    returncode, tasks, stats, files = _play(tmp_path, check=True)
    assert returncode == 0, tasks[-3:]
    result = _result(tasks, APPLY)
    limits = _diff(result, "limits.d/90-hpcnet-rdma.conf")
    assert limits.startswith("# Managed by hpcnet.rdma (rdma_host role)")
    assert limits.endswith(LIMITS_UNLIMITED)
    assert _diff(result, "system.conf.d/90-hpcnet-rdma.conf").endswith("\n[Manager]\nDefaultLimitMEMLOCK=infinity\n")
    assert _diff(result, "modules-load.d/hpcnet-rdma.conf").splitlines()[1:] == list(LOADED)
    assert result["changed"] and result["commands"] == []
    assert files == {}
    state = _result(tasks, PUBLISH)["ansible_facts"]
    assert state["rdma_host_state"] == {"memlock": "unlimited", "modules": ["ib_umad", "ib_uverbs", "rdma_ucm"],
                                        "gdr": "off", "gpu_driver": "absent", "peermem": "not_loaded"}
    assert state["rdma_host_gdr_state"] == "off"
    assert stats["failures"] == 0


def test_a_kib_limit_goes_to_limits_d_as_is_and_to_systemd_with_k_and_a_second_run_changes_nothing(tmp_path):
    variables = {"rdma_host_memlock": 1048576}
    returncode, tasks, stats, files = _play(tmp_path, variables)
    assert returncode == 0, tasks[-3:]
    assert stats["changed"] == 1
    assert sorted(_result(tasks, APPLY)["files"]) == sorted(
        str(tmp_path / "etc" / name) for name in ("security/limits.d/90-hpcnet-rdma.conf",
                                                  "systemd/system.conf.d/90-hpcnet-rdma.conf",
                                                  "modules-load.d/hpcnet-rdma.conf"))
    assert files["security/limits.d/90-hpcnet-rdma.conf"].endswith(LIMITS_UNLIMITED.replace("unlimited", "1048576"))
    assert files["systemd/system.conf.d/90-hpcnet-rdma.conf"].endswith("[Manager]\nDefaultLimitMEMLOCK=1048576K\n")
    assert files["modules-load.d/hpcnet-rdma.conf"].splitlines()[1:] == list(LOADED)
    assert _result(tasks, PUBLISH)["ansible_facts"]["rdma_host_state"]["memlock"] == 1048576
    returncode, tasks, stats, again = _play(tmp_path, variables)
    assert returncode == 0 and stats["changed"] == 0 and again == files


def test_ipoib_is_added_on_infiniband_hosts_that_use_it(tmp_path):
    returncode, tasks, _stats, _files = _play(tmp_path, {"rdma_host_ipoib": True}, check=True,
                                              loaded=LOADED + ("ib_ipoib",))
    assert returncode == 0, tasks[-3:]
    assert _result(tasks, PUBLISH)["ansible_facts"]["rdma_host_state"]["modules"] == [
        "ib_umad", "ib_uverbs", "rdma_ucm", "ib_ipoib"]


def test_gdr_true_without_a_gpu_driver_says_so_and_does_not_fail(tmp_path):
    returncode, tasks, stats, _files = _play(tmp_path, {"rdma_gdr": True}, check=True)
    assert returncode == 0 and stats["failures"] == 0
    warnings = _result(tasks, APPLY)["warnings"]
    assert any(w.startswith("rdma_gdr is true, but rdma-host-test has no NVIDIA GPU driver loaded") for w in warnings)
    facts = _result(tasks, PUBLISH)["ansible_facts"]
    assert facts["rdma_host_gdr_state"] == "no_gpu_driver"
    assert facts["rdma_host_state"]["gdr"] == "no_gpu_driver"
    assert facts["rdma_host_state"]["gpu_driver"] == "absent"


def test_a_host_whose_logins_do_not_call_pam_limits_gets_a_warning(tmp_path):
    returncode, tasks, _stats, _files = _play(tmp_path, check=True, pam=False)
    assert returncode == 0
    warnings = _result(tasks, APPLY)["warnings"]
    assert any("calls pam_limits.so in its session stack" in w and "rdma-host-test" in w for w in warnings), warnings


def test_gdr_false_leaves_nvidia_peermem_alone_even_with_a_gpu_driver(tmp_path):
    returncode, tasks, _stats, _files = _play(tmp_path, {"rdma_gdr": False}, check=True, driver=True)
    assert returncode == 0, tasks[-3:]
    facts = _result(tasks, PUBLISH)["ansible_facts"]
    assert facts["rdma_host_state"]["gdr"] == "off" and facts["rdma_host_state"]["gpu_driver"] == "present"
    assert not any(d["after_header"].endswith("hpcnet-rdma-gdr.conf") for d in _result(tasks, APPLY)["diff"])


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


def test_a_module_modprobe_cannot_find_fails_before_any_change(tmp_path):
    # this machine has no modprobe (or none that finds rdma_ucm under the temporary sysfs): the dry run fails, and so
    # does the role, before the memlock files are written
    returncode, tasks, stats, files = _play(tmp_path, loaded=("ib_umad", "ib_uverbs"))
    assert returncode != 0
    failed = [(task, result) for task, result in tasks if result.get("failed")]
    assert failed[-1][0] == APPLY
    assert failed[-1][1]["msg"].startswith("Nothing was changed on rdma-host-test (kernel ")
    assert "modprobe" in failed[-1][1]["msg"]
    assert stats["changed"] == 0 and files == {}


NO_PEERMEM = """#!/bin/sh
[ "$1" = -n ] && shift
echo "modprobe: FATAL: Module $1 not found in directory /lib/modules/$(uname -r)" >&2
exit 1
"""


def test_a_gpu_host_whose_peermem_cannot_load_fails_with_the_cause_before_any_change(tmp_path):
    returncode, tasks, stats, files = _play(tmp_path, driver=True, modprobe=NO_PEERMEM)
    assert returncode != 0
    failed = [(task, result) for task, result in tasks if result.get("failed")]
    assert failed[-1][0] == APPLY
    msg = failed[-1][1]["msg"]
    assert msg.startswith("nvidia_peermem did not load: the GPU driver's nvidia_peermem module is not installed"), msg
    assert "modprobe: FATAL: Module nvidia_peermem not found" in msg
    assert stats["changed"] == 0 and files == {}


def test_a_gpu_host_gets_its_modules_and_nvidia_peermem_loaded_now_and_at_boot(tmp_path):
    loads = """#!/bin/sh
[ "$1" = -n ] && exit 0
mkdir -p %(sysfs)s/module/$1 && echo live > %(sysfs)s/module/$1/initstate
""" % {"sysfs": tmp_path / "sys"}
    returncode, tasks, stats, files = _play(tmp_path, driver=True, loaded=("ib_umad",), modprobe=loads)
    assert returncode == 0, tasks[-3:]
    result = _result(tasks, APPLY)
    assert result["commands"] == ["modprobe ib_uverbs", "modprobe rdma_ucm", "modprobe nvidia_peermem"]
    assert files["modules-load.d/hpcnet-rdma.conf"].splitlines()[1:] == list(LOADED)
    assert files["modules-load.d/hpcnet-rdma-gdr.conf"].splitlines()[1:] == ["nvidia_peermem"]
    assert _result(tasks, PUBLISH)["ansible_facts"]["rdma_host_state"] == {
        "memlock": "unlimited", "modules": list(LOADED), "gdr": "loaded", "gpu_driver": "present", "peermem": "loaded"}
    returncode, tasks, stats, again = _play(tmp_path, driver=True, loaded=(), modprobe=loads)
    assert returncode == 0 and stats["changed"] == 0 and again == files
