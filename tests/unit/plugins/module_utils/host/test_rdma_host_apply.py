"""module_utils/host/rdma_host_apply.py: the rdma_host_settings module's files, PAM check, plan and apply, with a fake
runner (argv in, (rc, out, err) out) over a temporary sysfs tree."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.host import rdma_host_apply as apply
from ansible_collections.hpcnet.rdma.plugins.module_utils.host.host_settings import memlock_setting


def test_limits_text_has_soft_and_hard_for_everyone_and_for_root_in_columns():
    lines = apply.limits_text(memlock_setting("1048576")).splitlines()
    assert lines[0].startswith("# Managed by hpcnet.rdma")
    assert lines[-4:] == ["*          soft   memlock  1048576", "*          hard   memlock  1048576",
                          "root       soft   memlock  1048576", "root       hard   memlock  1048576"]


def test_system_conf_text_is_a_manager_section_with_systemd_units():
    assert apply.system_conf_text(memlock_setting("unlimited")).endswith("[Manager]\nDefaultLimitMEMLOCK=infinity\n")
    assert apply.system_conf_text(memlock_setting(64)).endswith("DefaultLimitMEMLOCK=64K\n")


@pytest.mark.parametrize("text, applies", [
    ("session    required     pam_limits.so\n", True),
    ("-session optional /lib/x86_64-linux-gnu/security/pam_limits.so\n", True),
    ("session [default=1] pam_limits.so\n", True),
    ("# session required pam_limits.so\n", False),
    ("account required pam_limits.so\n", False),
    ("@include common-session\n", False),
])
def test_pam_applies_only_to_a_session_line_calling_pam_limits(text, applies):
    assert apply.pam_applies([None, text]) is applies


class Runner:
    """modprobe that loads into the sysfs tree unless the module is in ``missing``; records every argv."""

    def __init__(self, root, missing=()):
        self.root, self.missing, self.argv = root, set(missing), []

    def which(self, name):
        return "/sbin/" + name

    def run(self, argv, changes=False, timeout=None):
        self.argv.append(argv)
        name = argv[-1]
        if argv[0].endswith("modprobe"):
            if name in self.missing:
                return 1, "", "modprobe: FATAL: Module %s not found in directory /lib/modules/6.1.0" % name
            if argv[1] != "-n":
                (self.root / "module" / name).mkdir(parents=True, exist_ok=True)
                (self.root / "module" / name / "initstate").write_text("live\n")
        return 0, "", ""


def _params(tmp_path, **over):
    params = dict(memlock="unlimited", modules=["ib_umad", "rdma_ucm"], ipoib=False, gdr="auto",
                  sysfs_root=str(tmp_path / "sys"), limits_file=str(tmp_path / "limits.conf"),
                  systemd_file=str(tmp_path / "system.conf"), modules_load_file=str(tmp_path / "rdma.conf"),
                  gdr_load_file=str(tmp_path / "gdr.conf"), pam_dir=str(tmp_path), pam_files=["sshd"],
                  proc_modules=str(tmp_path / "modules"), gpu_module="nvidia", peermem_module="nvidia_peermem",
                  gpu_driver_rebuild=None, host_label="node1")
    params.update(over)
    (tmp_path / "sys" / "module").mkdir(parents=True, exist_ok=True)
    return params


def _writes(store):
    return lambda path, text: store.__setitem__(path, text)


def test_bad_input_fails_in_the_plan_with_every_problem(tmp_path):
    host = apply.HostSettings(_params(tmp_path, memlock="64M", gdr="maybe"), Runner(tmp_path / "sys"), _writes({}))
    with pytest.raises(apply.HostSettingsFailure) as err:
        host.plan()
    assert "rdma_host_memlock must be" in str(err.value) and "rdma_host_gdr (rdma_gdr) must be" in str(err.value)


def test_a_missing_module_fails_the_dry_run_before_anything_is_written(tmp_path):
    runner, written = Runner(tmp_path / "sys", missing={"rdma_ucm"}), {}
    host = apply.HostSettings(_params(tmp_path), runner, _writes(written))
    with pytest.raises(apply.HostSettingsFailure, match=r"^Nothing was changed on node1 \(kernel .*modprobe rdma_ucm"):
        host.plan()
    assert written == {} and all(argv[1] == "-n" for argv in runner.argv)


def test_apply_writes_loads_and_a_second_plan_has_nothing_to_do(tmp_path):
    (tmp_path / "sys" / "module" / "nvidia").mkdir(parents=True)
    runner, written = Runner(tmp_path / "sys"), {}
    host = apply.HostSettings(_params(tmp_path), runner, _writes(written))
    plan = host.plan()
    assert plan["to_load"] == ["ib_umad", "rdma_ucm", "nvidia_peermem"]
    host.apply(plan)
    assert host.commands == ["modprobe ib_umad", "modprobe rdma_ucm", "modprobe nvidia_peermem"]
    assert written[str(tmp_path / "gdr.conf")].splitlines()[1:] == ["nvidia_peermem"]
    state = host.state(plan, check_mode=False)
    assert state == {"memlock": "unlimited", "modules": ["ib_umad", "rdma_ucm"], "gdr": "loaded",
                     "gpu_driver": "present", "peermem": "loaded"}
    for path, text in written.items():
        (tmp_path / path).write_text(text)
    again = apply.HostSettings(_params(tmp_path), runner, _writes({})).plan()
    assert again["to_load"] == [] and again["changed_files"] == []


def test_peermem_that_does_not_load_fails_with_the_cause_and_leaves_its_boot_file_unwritten(tmp_path):
    (tmp_path / "sys" / "module" / "nvidia").mkdir(parents=True)
    runner, written = Runner(tmp_path / "sys"), {}
    host = apply.HostSettings(_params(tmp_path), runner, _writes(written))
    plan = host.plan()
    runner.missing.add("nvidia_peermem")
    with pytest.raises(apply.HostSettingsFailure, match="^nvidia_peermem did not load: the GPU driver's nvidia_peermem"):
        host.apply(plan)
    assert str(tmp_path / "gdr.conf") not in written and str(tmp_path / "rdma.conf") in written


def _removes(store):
    """write(path, text) that also writes the file, so that os.remove in apply() has something to remove."""
    def write(path, text):
        store[path] = text
        with open(path, "w") as handle:
            handle.write(text)
    return write


def test_a_boot_file_no_longer_wanted_is_removed_so_the_next_boot_does_not_load_it(tmp_path):
    """gdr false after a run that loaded nvidia_peermem, and no RDMA modules after a run that listed some."""
    (tmp_path / "sys" / "module" / "nvidia").mkdir(parents=True)
    runner = Runner(tmp_path / "sys")
    first = apply.HostSettings(_params(tmp_path), runner, _removes({}))
    first.apply(first.plan())
    assert (tmp_path / "gdr.conf").exists() and (tmp_path / "rdma.conf").exists()
    host = apply.HostSettings(_params(tmp_path, gdr="false", modules=[]), runner, _removes({}))
    plan = host.plan()
    assert plan["changed_files"] == sorted([str(tmp_path / "gdr.conf"), str(tmp_path / "rdma.conf")])
    host.apply(plan)
    assert not (tmp_path / "gdr.conf").exists() and not (tmp_path / "rdma.conf").exists()
    assert host.written == [str(tmp_path / "rdma.conf"), str(tmp_path / "gdr.conf")]
    assert apply.HostSettings(_params(tmp_path, gdr="false", modules=[]), runner, _removes({})).plan()["changed_files"] == []


@pytest.mark.parametrize("over, message", [
    ({"modules_load_file": "GDR"}, "must be four different files"),
    ({"systemd_file": "LIMITS"}, "must be four different files"),
    ({"peermem_module": "-r"}, "peermem_module takes a kernel module name"),
    ({"peermem_module": ""}, "peermem_module takes a kernel module name"),
    ({"gpu_module": ".."}, "gpu_module takes a kernel module name"),
])
def test_options_that_would_overwrite_a_file_or_reach_modprobe_as_an_option_are_refused(tmp_path, over, message):
    params = _params(tmp_path)
    over = {k: {"GDR": params["gdr_load_file"], "LIMITS": params["limits_file"]}.get(v, v) for k, v in over.items()}
    host = apply.HostSettings(dict(params, **over), Runner(tmp_path / "sys"), _writes({}))
    with pytest.raises(apply.HostSettingsFailure, match=message):
        host.plan()


def test_peermem_that_modprobe_loads_but_the_kernel_does_not_show_fails_before_its_boot_file(tmp_path):
    (tmp_path / "sys" / "module" / "nvidia").mkdir(parents=True)

    class Vanishes(Runner):
        def run(self, argv, changes=False, timeout=None):
            if argv[-1] == "nvidia_peermem" and argv[1] != "-n":
                self.argv.append(argv)
                return 0, "", ""
            return super().run(argv)

    written = {}
    host = apply.HostSettings(_params(tmp_path), Vanishes(tmp_path / "sys"), _writes(written))
    with pytest.raises(apply.HostSettingsFailure, match="^modprobe nvidia_peermem succeeded on node1, but the module"):
        host.apply(host.plan())
    assert str(tmp_path / "gdr.conf") not in written


def test_an_unreadable_pam_file_does_not_stop_the_check(tmp_path):
    (tmp_path / "sshd").write_bytes(b"session required pam_limits.so # caf\xe9\n")
    host = apply.HostSettings(_params(tmp_path), Runner(tmp_path / "sys"), _writes({}))
    plan = host.plan()
    host.state(plan, check_mode=True)
    assert host.warnings == []
