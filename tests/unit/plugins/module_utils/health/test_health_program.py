"""The health check end to end on simulated hosts: the module's install step (expected state, program, units), then
the installed program run as a host runs it (system python3, no Ansible), against faults the simulator injects."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import simhost
from simhost.firmware import set_cable

from ansible_collections.hpcnet.rdma.plugins.filter.health import health_fabric_reference, health_fabric_references
from ansible_collections.hpcnet.rdma.plugins.module_utils.health import cli  # noqa: F401 (the program's code)
from ansible_collections.hpcnet.rdma.plugins.module_utils.health import slurm, thresholds
from ansible_collections.hpcnet.rdma.plugins.module_utils.health.deploy import DeployError, _facts, deploy
from ansible_collections.hpcnet.rdma.plugins.module_utils.infiniband import infiniband
from ansible_collections.hpcnet.rdma.plugins.module_utils.runner.tool_runner import SubprocessRunner

KIT = Path(__file__).resolve().parents[4] / "simhost"
ROLES = Path(__file__).resolve().parents[5] / "roles"
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"


def _memlock():
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    return "unlimited" if soft == resource.RLIM_INFINITY else soft


def params(tmp, root, **extra):
    out = dict(host="node01", group="infiniband", fabrics=["infiniband"], port_roles=None, management_netdevs=["eth0"],
               sysfs_root=str(root), expected_rate_gbps=None, expected_storage_rate_gbps=None, mtu=None,
               storage_mtu=None, memlock=_memlock(), gdr="false", ipoib=[], sm=False, roce_qos={},
               lossless_priorities=[], nccl_conf_path=None, thresholds={}, slurm=False, metrics="auto",
               textfile_dir=str(tmp / "textfile"), timer=True, expected_path=str(tmp / "etc/health.json"),
               prefix=str(tmp / "usr"), unit_dir=str(tmp / "units"), validate_only=False)
    out.update(extra)
    return out


@pytest.fixture
def ib_host(tmp_path, monkeypatch):
    root = tmp_path / "sys"
    monkeypatch.setenv("SIMHOST_SYSFS_ROOT", str(root))
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))
    monkeypatch.setenv("PATH", "%s:%s" % (KIT / "bin", os.environ["PATH"]))
    simhost.build_tree(simhost.load("cx7_ib_ndr_8x"), root)
    (tmp_path / "textfile").mkdir()
    return tmp_path, root


def program(tmp, *args):
    """The installed launcher, as the timer or slurmd runs it (its own python3, -sE: no site-packages)."""
    return subprocess.run([PYTHON, "-sE", str(tmp / "usr/sbin/hpcnet-rdma-health"), "--expected",
                           str(tmp / "etc/health.json"), *args], capture_output=True, text=True, timeout=60,
                          check=False)


def installed(tmp, root, **extra):
    return deploy(params(tmp, root, state_dir=str(tmp / "state"), **extra), SubprocessRunner(), False)


def test_install_writes_the_expected_state_and_program_once(ib_host):
    tmp, root = ib_host
    first = deploy(params(tmp, root), SubprocessRunner(), False)
    assert first["changed"] and first["health"]["ok"], first["health"]
    assert first["health"]["reason"] == "healthy: 8 ports checked"
    names = set(os.path.relpath(p, tmp) for p in first["files"])
    assert {"etc/health.json", "usr/sbin/hpcnet-rdma-health",
            "usr/lib/hpcnet-rdma/ansible_collections/hpcnet/rdma/plugins/module_utils/verify/rdma_verify.py",
            "usr/lib/hpcnet-rdma/ansible/module_utils/parsing/convert_bool.py"} <= names
    # the metrics' units are the role's (a template), never the module's
    assert not any(name.startswith("units/") for name in names)
    doc = first["expected"]
    assert doc["spec"]["expected_rate_gbps"] == 400 and len(doc["expect"]["devices"]) == 8
    assert [p["rail"] for p in doc["ports"]] == list(range(8))
    again = deploy(params(tmp, root), SubprocessRunner(), False)
    assert not again["changed"] and again["files"] == []


def test_check_mode_writes_nothing(ib_host):
    tmp, root = ib_host
    result = deploy(params(tmp, root), SubprocessRunner(), True)
    assert result["changed"] and not (tmp / "etc/health.json").exists() and not (tmp / "usr").exists()


def test_a_pulled_cable_is_the_first_line_and_exit_1(ib_host):
    tmp, root = ib_host
    installed(tmp, root)
    healthy = program(tmp)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.splitlines()[0] == "healthy: 8 ports checked"
    set_cable(root, "mlx5_1", 1, False)
    broken = program(tmp)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert broken.stdout.splitlines()[0] == "mlx5_1:1 DOWN (expected ACTIVE 400 Gb/s)"
    assert "error port_state mlx5_1:1" in broken.stdout.splitlines()[1]
    as_json = json.loads(program(tmp, "--json").stdout)
    assert as_json["ok"] is False and as_json["findings"][0]["check"] == "port_state"
    assert set(as_json["findings"][0]) >= {"host", "severity", "check", "device", "port", "expected", "found", "cause", "fix"}
    set_cable(root, "mlx5_1", 1, True)
    assert program(tmp).returncode == 0


def test_a_flap_between_two_runs_is_an_error_and_the_threshold_allows_it(ib_host):
    tmp, root = ib_host
    installed(tmp, root)
    assert program(tmp).returncode == 0  # the first run keeps the snapshot
    counter = root / "class/infiniband/mlx5_3/ports/1/counters/link_downed"
    counter.write_text("%d\n" % (int(counter.read_text()) + 1))
    flapped = program(tmp)
    assert flapped.returncode == 1
    assert flapped.stdout.splitlines()[0] == "mlx5_3:1 link_downed +1 (expected link_downed +0)"
    assert program(tmp).returncode == 0  # the next run sees no new flap
    installed(tmp, root, thresholds={"health_link_flaps_max": 1})
    counter.write_text("%d\n" % (int(counter.read_text()) + 1))
    assert program(tmp).returncode == 0



def test_slurm_keeps_its_own_counter_snapshot(ib_host, monkeypatch):
    """The metrics timer runs more often than slurmd's check: a flap the timer saw first still drains the node.
    slurmd runs hpcnet-rdma-health-slurm (HealthCheckProgram takes no arguments), which adds --slurm --quiet."""
    tmp, root = ib_host

    def slurm_check():
        return subprocess.run([str(tmp / "usr/sbin/hpcnet-rdma-health-slurm"), "--expected", str(tmp / "etc/health.json")],
                              capture_output=True, text=True, timeout=60, check=False)

    calls = tmp / "scontrol.calls"
    scontrol = tmp / "bin/scontrol"
    scontrol.parent.mkdir()
    scontrol.write_text('#!/bin/sh\necho "$@" >> %s\necho "NodeName=node01 State=IDLE Reason=(null)"\n' % calls)
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (scontrol.parent, os.environ["PATH"]))
    installed(tmp, root)
    assert program(tmp, "--textfile").returncode == 0 and slurm_check().returncode == 0  # the snapshots
    counter = root / "class/infiniband/mlx5_3/ports/1/counters/link_downed"
    counter.write_text("%d\n" % (int(counter.read_text()) + 1))
    assert program(tmp, "--textfile").returncode == 1
    drained = slurm_check()
    assert drained.returncode == 1 and drained.stdout == "mlx5_3:1 link_downed +1 (expected link_downed +0)\n"
    assert "State=DRAIN Reason=hpcnet-rdma: mlx5_3:1 link_downed +1" in calls.read_text()


def test_textfile_metrics(ib_host):
    tmp, root = ib_host
    installed(tmp, root)
    set_cable(root, "mlx5_2", 1, False)
    assert program(tmp, "--textfile", "--quiet").returncode == 1
    text = (tmp / "textfile/hpcnet_rdma.prom").read_text()
    assert 'hpcnet_rdma_health_check_ok{check="port_state",device="mlx5_2",port="1",netdev="ibp79s0",role="compute",rail="2"} 0' in text
    assert "hpcnet_rdma_health_ok 0" in text
    promtool = shutil.which("promtool")
    if promtool:
        checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    elif os.environ.get("HPCNET_REQUIRE_PROMTOOL"):
        pytest.fail("promtool is not installed")


def test_no_expected_state_exits_2(ib_host):
    tmp, root = ib_host
    installed(tmp, root)
    (tmp / "etc/health.json").unlink()
    missing = program(tmp)
    assert missing.returncode == 2 and missing.stdout.startswith("cannot check:")


@pytest.mark.parametrize("inputs, needle", [
    ({"health_pfc_pause_percent_max": "5%"}, "health_pfc_pause_percent_max must be a plain number in percent"),
    ({"health_pfc_pause_percent_max": 150}, "0 to 100"),
    ({"health_interval": 0}, "health_interval must be a whole number of seconds, 10 to 86400"),
    ({"health_link_flaps_max": 1.5}, "health_link_flaps_max must be a plain whole number"),
    ({"health_slurm_node_state": "BUSY"}, "health_slurm_node_state must be Slurm's HealthCheckNodeState"),
])
def test_threshold_errors_name_the_variable(inputs, needle):
    errors = thresholds.input_errors(inputs)
    assert len(errors) == 1 and needle in errors[0], errors


def test_host_side_refusals_change_nothing(ib_host):
    tmp, root = ib_host
    with pytest.raises(DeployError, match="health_textfile_dir: .*/nowhere does not exist"):
        deploy(params(tmp, root, metrics="true", textfile_dir=str(tmp / "nowhere")), SubprocessRunner(), False)
    with pytest.raises(DeployError, match="health_slurm is true but slurmd is not installed"):
        deploy(params(tmp, root, slurm=True), SubprocessRunner(), False)
    assert not (tmp / "etc").exists()


@pytest.mark.parametrize("extra, needle", [
    ({"expected_path": "etc/health.json"}, "health_expected_path must be an absolute path .*; got 'etc/health.json'"),
    ({"prefix": "usr"}, "health_install_prefix must be an absolute path"),
    ({"metrics": "true", "textfile_dir": ""}, "health_textfile_dir is empty, but health_metrics is true"),
    ({"metrics": "true", "textfile_dir": "textfile"}, "health_textfile_dir must be an absolute path or empty"),
])
def test_paths_the_host_cannot_use_are_refused_by_the_preflight_naming_the_role_variable(ib_host, extra, needle):
    # the preflight (validate_only) refuses them, as the install would otherwise write under its working directory
    tmp, root = ib_host
    for validate_only in (True, False):
        with pytest.raises(DeployError, match=needle):
            deploy(params(tmp, root, validate_only=validate_only, **extra), SubprocessRunner(), False)
    assert not (tmp / "etc").exists() and not (tmp / "usr").exists()


SHOW_NODE = ("NodeName=node01 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 State=IDLE+DRAIN ThreadsPerCore=1 "
             "Partitions=debug BootTime=2026-12-06T10:00:00 Reason=%s [%s@2026-12-06T12:00:00]")


@pytest.mark.parametrize("state, reason", [("DOWN", "hardware failure"), ("IDLE+FAIL", "bad psu"),
                                           ("MIXED+DRAIN", "admin: wait")])
def test_an_admins_down_fail_or_drain_is_never_changed(state, reason):
    node = slurm.node_state("NodeName=node01 State=%s Reason=%s [jdoe@2026-12-06T12:00:00]" % (state, reason))
    for ok in (True, False):
        assert slurm.action(node, ok, "mlx5_2:1 DOWN")[0] is None


@pytest.mark.parametrize("reason, user, ok, expected", [
    ("hpcnet-rdma: mlx5_1:1 DOWN (expected ACTIVE 400 Gb/s)", "root", True, ("resume", None)),
    ("bad DIMM", "admin", True, (None, "IDLE+DRAIN by someone else (bad DIMM): left as it is")),
    ("bad DIMM", "admin", False, (None, "IDLE+DRAIN by someone else (bad DIMM): left as it is")),
    ("hpcnet-rdma:mlx5 manual, do not resume", "admin", True,
     (None, "IDLE+DRAIN by someone else (hpcnet-rdma:mlx5 manual, do not resume): left as it is")),
    ("hpcnet-rdma: old", "root", False, ("drain", "hpcnet-rdma: mlx5_2:1 DOWN")),
])
def test_slurm_drains_and_resumes_only_its_own(reason, user, ok, expected):
    node = slurm.node_state(SHOW_NODE % (reason, user))
    assert node["drain"] and node["reason"] == reason
    assert slurm.action(node, ok, "mlx5_2:1 DOWN") == expected


def test_slurm_drains_an_idle_node():
    node = slurm.node_state("NodeName=node01 State=IDLE Partitions=debug Reason=(null)")
    assert slurm.action(node, False, "mlx5_2:1 DOWN") == ("drain", "hpcnet-rdma: mlx5_2:1 DOWN")
    assert slurm.argv("/usr/bin/scontrol", "node01", "drain", "hpcnet-rdma: x y") == [
        "/usr/bin/scontrol", "update", "NodeName=node01", "State=DRAIN", "Reason=hpcnet-rdma: x y"]


def test_a_host_without_rdma_devices_is_healthy_with_nothing_to_check(tmp_path, monkeypatch):
    root = tmp_path / "sys"
    monkeypatch.setenv("SIMHOST_SYSFS_ROOT", str(root))
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))
    simhost.build_tree(simhost.load("no_rdma"), root)
    result = deploy(params(tmp_path, root), SubprocessRunner(), False)
    assert result["health"] == {"ok": True, "reason": "healthy: 0 ports checked", "findings": []}


def test_qos_drift_is_found_by_the_full_check_and_left_to_it_by_a_sysfs_only_run(tmp_path, monkeypatch):
    from ansible_collections.hpcnet.rdma.plugins.module_utils.qos.roce_qos import Port

    root = tmp_path / "sys"
    monkeypatch.setenv("SIMHOST_SYSFS_ROOT", str(root))
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))
    monkeypatch.setenv("PATH", "%s:%s" % (KIT / "bin", os.environ["PATH"]))
    simhost.build_tree(simhost.load("cx7_roce_400g_2x_ofed"), root)
    state = Port(SubprocessRunner(), str(root), "enp12s0np0").read(create_cm=False)
    declared = {"backend": "mlnx_qos", "trust": state["trust"], "pfc": state["pfc"],
                "dscp2prio": dict((str(d), p) for d, p in enumerate(state["dscp2prio"])),
                "traffic_class": state["traffic_class"], "roce_mode": state["roce_mode"]}
    deploy(params(tmp_path, root, group="roce", fabrics=["roce"], roce_qos={"enp12s0np0": declared},
                  state_dir=str(tmp_path / "state")), SubprocessRunner(), False)
    assert program(tmp_path).returncode == 0
    subprocess.run([str(KIT / "bin" / "mlnx_qos"), "-i", "enp12s0np0", "--trust", "pcp" if state["trust"] == "dscp"
                    else "dscp"], check=True, capture_output=True)
    full = program(tmp_path)
    assert full.returncode == 1 and full.stdout.startswith("mlx5_0:1 differs in trust on enp12s0np0"), full.stdout
    assert program(tmp_path, "--sysfs-only").returncode == 0


def test_a_p_key_gone_from_a_port_is_an_error(ib_host):
    tmp, root = ib_host
    compute = {"name": "compute", "pkey": 1, "members": [{"selector": "ALL", "membership": "full"}]}
    for dev in range(8):
        (root / ("class/infiniband/mlx5_%d/ports/1/pkeys/1" % dev)).write_text("0x8001\n")
    result = installed(tmp, root, **role_declared(_facts(params(tmp, root)), [compute]))
    assert result["expected"]["expect"]["pkeys"]["mlx5_4:1"] == ["0x8001", "0xffff"]
    assert program(tmp).returncode == 0
    (root / "class/infiniband/mlx5_4/ports/1/pkeys/1").write_text("0x0000\n")
    gone = program(tmp)
    assert gone.returncode == 1 and gone.stdout.splitlines()[0] == "mlx5_4:1 0x8001 missing (expected P_Keys 0x8001, 0xffff)"


def _reboot_without(root, pci):
    """The host boots again with the card at ``pci`` gone (off the bus): the kernel names the others mlx5_0.. anew."""
    prof = simhost.load("cx7_ib_ndr_8x")
    prof["devices"] = [dict((k, v) for k, v in d.items() if k != "name") for d in prof["devices"] if d.get("pci") != pci]
    shutil.rmtree(root)
    simhost.build_tree(prof, root)


def test_a_card_off_the_bus_is_named_by_its_rail_and_pci_address_not_by_a_shifted_name(ib_host):
    tmp, root = ib_host
    installed(tmp, root)
    _reboot_without(root, "0000:40:00.0")
    out = program(tmp)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.splitlines()[0] == "mlx5_1:1 absent (expected compute rail 1 at 0000:40:00.0)", out.stdout
    assert len([line for line in out.stdout.splitlines()[1:] if line.startswith("error")]) == 1, out.stdout
    text = (program(tmp, "--textfile", "--quiet"), (tmp / "textfile/hpcnet_rdma.prom").read_text())[1]
    assert 'check_ok{check="port_state",device="mlx5_1",port="1",netdev="ibp64s0",role="compute",rail="1"} 0' in text
    assert 'check_ok{check="port_state",device="mlx5_6",port="1",netdev="ibp220s0",role="compute",rail="7"} 1' in text


def test_a_device_renamed_since_the_install_is_the_same_port(ib_host):
    tmp, root = ib_host
    installed(tmp, root)
    subprocess.run([str(KIT / "bin" / "rdma"), "dev", "set", "mlx5_2", "name", "ibp79s0"], check=True,
                   capture_output=True)
    out = program(tmp, "--json")
    assert out.returncode == 0, out.stdout
    rows = json.loads(out.stdout)["checks"]
    assert {"device": "ibp79s0", "rail": 2} in [{"device": r["device"], "rail": r["rail"]} for r in rows]


def test_link_errors_count_over_the_last_hour_against_the_hourly_threshold(ib_host):
    tmp, root = ib_host
    installed(tmp, root)
    state = tmp / "state/counters.json"
    counter = root / "class/infiniband/mlx5_3/ports/1/counters/symbol_error"

    def errors_then_run(count, age):
        snap = json.loads(state.read_text())
        snap["time"] -= age
        state.write_text(json.dumps(snap))
        counter.write_text("%d\n" % (int(counter.read_text()) + count))
        return program(tmp)

    assert program(tmp).returncode == 0
    assert errors_then_run(3, 300).returncode == 0     # 3 in the last hour: under the default 10 per hour
    bad = errors_then_run(8, 300)                       # 11 in the last hour
    assert bad.returncode == 1
    assert bad.stdout.splitlines()[0] == "mlx5_3:1 symbol_error +11 (expected symbol_error +10 at most)", bad.stdout


@pytest.mark.parametrize("snapshot", ['"x"', "42", '{"time": "abc", "counters": {}}', '{"time": 1e400, "counters": {}}',
                                      '{"time": 1, "counters": {"mlx5_0/1": {"symbol_error": "x"}}}',
                                      '{"time": 4102444800, "counters": {}}'])
def test_an_unusable_snapshot_is_a_first_run(ib_host, snapshot):
    tmp, root = ib_host
    installed(tmp, root)
    (tmp / "state").mkdir(exist_ok=True)
    (tmp / "state/counters.json").write_text(snapshot)
    out = program(tmp)
    assert (out.returncode, out.stderr) == (0, ""), out.stdout + out.stderr
    assert json.loads((tmp / "state/counters.json").read_text())["time"] < 4102444800


def test_cannot_check_is_json_with_json_and_says_so_in_the_metrics(ib_host):
    tmp, root = ib_host
    installed(tmp, root)
    shutil.rmtree(root)
    out = program(tmp, "--json", "--textfile")
    assert out.returncode == 2 and json.loads(out.stdout)["reason"].startswith("cannot check: reading ")
    assert "hpcnet_rdma_health_ok 0" in (tmp / "textfile/hpcnet_rdma.prom").read_text()


def test_a_hand_edited_expected_state_is_no_traceback(ib_host):
    tmp, root = ib_host
    installed(tmp, root)
    doc = json.loads((tmp / "etc/health.json").read_text())
    doc["thresholds"] = {}
    (tmp / "etc/health.json").write_text(json.dumps(doc))
    assert program(tmp).returncode == 0  # the first run has no counter rates to judge
    out = program(tmp)
    assert out.returncode == 2 and "does not hold what this program expects (KeyError" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr


def test_the_launcher_reads_the_expected_state_where_the_role_wrote_it(ib_host):
    tmp, root = ib_host
    deploy(params(tmp, root, expected_path=str(tmp / "opt/health.json"), state_dir=str(tmp / "state")),
           SubprocessRunner(), False)
    out = subprocess.run([PYTHON, "-sE", str(tmp / "usr/sbin/hpcnet-rdma-health")], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0 and out.stdout.startswith("healthy"), out.stdout + out.stderr


def test_metrics_turned_off_remove_the_units_and_the_textfile(ib_host):
    tmp, root = ib_host
    installed(tmp, root)
    # the units as the role's template wrote them
    for name in ("hpcnet-rdma-health.service", "hpcnet-rdma-health.timer"):
        (tmp / "units").mkdir(exist_ok=True)
        (tmp / "units" / name).write_text("[Unit]\n", encoding="utf-8")
    program(tmp, "--textfile")
    assert (tmp / "textfile/hpcnet_rdma.prom").exists() and (tmp / "units/hpcnet-rdma-health.timer").exists()
    off = deploy(params(tmp, root, metrics="false", state_dir=str(tmp / "state")), SubprocessRunner(), False)
    assert off["changed"] and sorted(os.path.basename(p) for p in off["removed"]) == [
        "hpcnet-rdma-health.service", "hpcnet-rdma-health.timer", "hpcnet_rdma.prom"]
    assert not (tmp / "units/hpcnet-rdma-health.timer").exists() and not (tmp / "textfile/hpcnet_rdma.prom").exists()
    assert not deploy(params(tmp, root, metrics="false", state_dir=str(tmp / "state")), SubprocessRunner(), False)["changed"]


def test_an_unwritable_place_is_refused_before_anything_is_written(ib_host):
    tmp, root = ib_host
    (tmp / "file").write_text("")
    with pytest.raises(DeployError, match="cannot write .*file/etc"):
        deploy(params(tmp, root, expected_path=str(tmp / "file/etc/health.json")), SubprocessRunner(), False)
    assert not (tmp / "usr").exists() and not (tmp / "units").exists()


@pytest.mark.parametrize("extra, needle", [
    ({"expected_rate_gbps": -400}, "expected_rate_gbps must be more than 0"),
    ({"mtu": -1}, "mtu must be more than 68"),
    ({"memlock": "lots"}, "memlock must be unlimited, unchecked or a number of bytes"),
    ({"lossless_priorities": [9]}, "lossless_priorities must be priorities 0-7"),
])
def test_module_values_no_check_could_use_are_refused(ib_host, extra, needle):
    tmp, root = ib_host
    with pytest.raises(DeployError, match=needle):
        deploy(params(tmp, root, **extra), SubprocessRunner(), False)


def test_the_timers_sysfs_only_run_starts_no_sminfo_until_the_full_check_is_due(ib_host):
    from ansible_collections.hpcnet.rdma.plugins.module_utils.health import cli as program_cli

    tmp, root = ib_host
    installed(tmp, root, sm=True)

    class Counting(SubprocessRunner):
        calls = []

        def run(self, argv, changes=False, timeout=60):
            Counting.calls.append(os.path.basename(argv[0]))
            return super().run(argv, changes, timeout)

    args = program_cli.parse_args(["--expected", str(tmp / "etc/health.json"), "--sysfs-only"])
    now = __import__("time").time()
    program_cli.check(args, Counting(), now)          # no full check yet: this one is
    assert Counting.calls.count("sminfo") == 8
    Counting.calls.clear()
    program_cli.check(args, Counting(), now + 60)
    assert Counting.calls == []
    program_cli.check(args, Counting(), now + 301)    # the full check is due again
    assert Counting.calls.count("sminfo") == 8


def test_nccl_conf_findings_fail_its_row_and_the_slurm_reason_has_no_field_separator(tmp_path, monkeypatch):
    root = tmp_path / "sys"
    monkeypatch.setenv("SIMHOST_SYSFS_ROOT", str(root))
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))
    simhost.build_tree(simhost.load("cx7_roce_400g_2x"), root)
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_IB_HCA==mlx5_0:1,mlx5_1:1\nNCCL_IB_GID_INDEX=1\n")
    deploy(params(tmp_path, root, group="roce", fabrics=["roce"], nccl_conf_path=str(conf),
                  state_dir=str(tmp_path / "state")), SubprocessRunner(), False)
    out = json.loads(program(tmp_path, "--json").stdout)
    assert not out["ok"] and [r["ok"] for r in out["checks"] if r["check"] == "nccl_conf"] == [False]
    assert "=" in out["reason"]
    node = slurm.node_state("NodeName=node01 State=IDLE Reason=(null)")
    what, reason = slurm.action(node, False, out["reason"])
    assert what == "drain" and "=" not in reason
    assert slurm.node_state("NodeName=node01 State=IDLE+DRAIN Reason=%s [root@2026-12-06T12:00:00]" % reason)["reason"] == reason


def test_a_port_without_a_lossless_profile_is_not_held_to_pfc(tmp_path, monkeypatch):
    from ansible_collections.hpcnet.rdma.plugins.module_utils.health import counter_window

    doc = {"roce_qos": {"enp1s0np0": {"pfc": [3]}}, "lossless_priorities": [3]}
    assert counter_window.lossless_of(doc, "enp1s0np0") == [3]
    assert counter_window.lossless_of(doc, "enp2s0np0") == [] and counter_window.lossless_of(doc, None) == []


def test_each_netdev_keeps_its_own_mtu(ib_host):
    tmp, root = ib_host
    (root / "class/net/ibp64s0/mtu").write_text("2044\n")
    (root / "class/net/ibp24s0/mtu").write_text("4092\n")
    result = installed(tmp, root, netdev_mtu={"ibp24s0": 4092, "ibp64s0": 2044})
    assert result["health"]["ok"], result["health"]
    assert result["expected"]["expect"]["netdev_mtu"]["ibp64s0"] == 2044
    assert program(tmp).returncode == 0
    (root / "class/net/ibp24s0/mtu").write_text("2044\n")
    out = program(tmp)
    assert out.returncode == 1 and out.stdout.splitlines()[0] == "mlx5_0:1 2044 on ibp24s0 (expected 4092 (declared))"


def test_the_plays_own_groups_are_no_part_of_the_expected_state(ib_host):
    tmp, root = ib_host
    first = deploy(params(tmp, root, fabrics=["infiniband", "rdma_rolling_reboot", "rdma_facts_reread"]),
                   SubprocessRunner(), False)
    assert first["expected"]["fabrics"] == ["infiniband"]
    assert not deploy(params(tmp, root, fabrics=["infiniband"]), SubprocessRunner(), False)["changed"]


# ---- the expected state comes from the declaration and the fabric, never from the host's bad day -----------------
def _template(text, scope):
    """A role's Jinja expression as Ansible templates it."""
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.template import Templar, trust_as_template  # pylint: disable=import-outside-toplevel
    return Templar(loader=DataLoader(), variables=scope).template(trust_as_template(text))


def _task(path, module):
    return next(t for t in yaml.safe_load((ROLES / path).read_text()) if module in t)


HEALTH_ARGS = _task("health/tasks/rdma_health.yml", "hpcnet.rdma.rdma_health")["hpcnet.rdma.rdma_health"]
IB_HANDOFF = next(t for t in yaml.safe_load((ROLES / "infiniband/tasks/preflight.yml").read_text())
                  if "infiniband_declared" in t.get("ansible.builtin.set_fact", {}))["ansible.builtin.set_fact"]


def role_declared(rdma, partitions=(), ipoib=None, roce_declared_mtu=None):
    """What the health role hands the module of what the fabric roles configure: the infiniband role's plan of this
    host through its preflight's hand-off (infiniband_declared), then the health task's arguments, each templated as
    Ansible does (the wiring under test, not a copy of it)."""
    # the host runs the subnet's SM (opensm with the role's partitions.conf): its ports get the file's P_Keys
    plan = infiniband.plan(rdma, list(partitions), {}, ipoib or {}, True, 14, [],
                           {"node01": {"rdma": rdma, "sm": True, "sm_priority": 14}}, 1)
    assert not plan["errors"], plan["errors"]
    scope = {"infiniband_declared": _template(IB_HANDOFF["infiniband_declared"], {"__infiniband_plan": plan}),
             "roce_declared_mtu": roce_declared_mtu or {}}
    return dict((key, _template(HEALTH_ARGS[key], scope)) for key in ("pkeys", "ipoib", "netdev_mtu"))


def _half_rate(root, *devices):
    """The ports' links trained at HDR (200 Gb/s), as with a cable of a lower class or a switch port set lower."""
    for dev in devices:
        (root / ("class/infiniband/%s/ports/1/rate" % dev)).write_text("200 Gb/sec (4X HDR)\n")


def test_a_port_at_half_rate_at_install_is_held_to_the_fabrics_rate_and_named(ib_host):
    tmp, root = ib_host
    peer = tmp / "peer"
    simhost.build_tree(simhost.load("cx7_ib_ndr_8x"), peer)
    _half_rate(root, "mlx5_3")
    hostvars = {"node01": {"ansible_facts": {"rdma": _facts(params(tmp, root))}},
                "node02": {"ansible_facts": {"rdma": _facts(params(tmp, peer))}}, "mgmt": {}}
    groups = {"infiniband": ["node01", "node02"]}
    reference = health_fabric_reference(hostvars, ["node01", "node02", "mgmt"], groups, "node01")
    assert reference["rate_gbps"]["compute"] == 400 and reference["width"]["compute"] == "4X"
    # the role's once-for-the-play form: the same reference for each host, each host's hostvars read once
    lookups = []

    class CountingHostvars(dict):
        def __getitem__(self, name):
            lookups.append(name)
            return dict.__getitem__(self, name)

    every = health_fabric_references(CountingHostvars(hostvars), ["node01", "node02", "mgmt"], groups)
    assert every == {"node01": reference,
                     "node02": health_fabric_reference(hostvars, ["node01", "node02", "mgmt"], groups, "node02")}
    assert sorted(lookups) == ["mgmt", "node01", "node02"]
    first = installed(tmp, root, fabric_reference=reference)
    assert first["expected"]["spec"]["expected_rate_gbps"] == 400
    assert not first["health"]["ok"] and first["health"]["reason"].startswith("mlx5_3:1 "), first["health"]
    assert [(f["check"], f["device"]) for f in first["health"]["findings"] if f["severity"] == "error"] == [
        ("rate", "mlx5_3")]
    # the finding names where the expected rate came from: the fabric, not a variable nobody set
    assert [f["expected"] for f in first["health"]["findings"] if f["check"] == "rate"] == [
        "400 Gb/s (the most common rate of the infiniband group's compute ports at install)"]
    assert "mlx5_3:1" in first["warnings"][0] and "fails its health check at install" in first["warnings"][0]
    out = program(tmp)
    assert out.returncode == 1 and out.stdout.splitlines()[0] == first["health"]["reason"]
    # the role again on a host that got worse (most of its rails at HDR): the fabric's rate stays the expected one
    _half_rate(root, "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_4")
    hostvars["node01"]["ansible_facts"]["rdma"] = _facts(params(tmp, root))
    again = installed(tmp, root, fabric_reference=health_fabric_reference(hostvars, ["node01", "node02"], groups,
                                                                          "node01"))
    assert not again["changed"] and again["expected"] == first["expected"]
    assert sorted(f["device"] for f in again["health"]["findings"] if f["check"] == "rate") == [
        "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4"]
    # declared, it wins over the fabric's
    declared = installed(tmp, root, expected_rate_gbps=200.0, fabric_reference=reference)
    assert declared["expected"]["spec"]["expected_rate_gbps"] == 200 and declared["health"]["ok"], declared["health"]
    assert declared["expected"]["spec"]["rate_sources"]["compute"] == "declared (health_expected_rate_gbps)"


def test_without_the_fabric_the_rate_is_the_rule_over_the_hosts_own_ports(ib_host):
    tmp, root = ib_host
    _half_rate(root, "mlx5_3")
    result = installed(tmp, root)
    assert result["expected"]["spec"]["expected_rate_gbps"] == 400
    assert result["expected"]["spec"]["min_width"] == "4X" and not result["health"]["ok"]


def test_a_partition_missing_at_install_is_expected_all_the_same(ib_host):
    tmp, root = ib_host
    compute = {"name": "compute", "pkey": 2, "members": [{"selector": "ALL", "membership": "full"}]}
    declared = role_declared(_facts(params(tmp, root)), [compute])
    first = installed(tmp, root, **declared)
    assert first["expected"]["expect"]["pkeys"]["mlx5_0:1"] == ["0x8002", "0xffff"]
    assert not first["health"]["ok"]
    assert first["health"]["reason"] == "mlx5_0:1 0x8002 missing (expected P_Keys 0x8002, 0xffff) (+7 more)"
    assert not installed(tmp, root, **declared)["changed"]
    for dev in range(8):  # the SM sweeps: every port gets the partition
        (root / ("class/infiniband/mlx5_%d/ports/1/pkeys/1" % dev)).write_text("0x8002\n")
    assert program(tmp).returncode == 0


def test_an_ipoib_interface_down_at_install_stays_expected_up(ib_host):
    tmp, root = ib_host
    (root / "class/net/ibp64s0/operstate").write_text("down\n")
    declared = role_declared(_facts(params(tmp, root)), ipoib={"pools": {"ibp24s0": "10.10.0.0/24",
                                                                          "ibp64s0": "10.10.1.0/24"}})
    assert declared["ipoib"] == ["ibp24s0", "ibp64s0"]
    result = installed(tmp, root, **declared)
    assert result["expected"]["expect"]["ipoib"] == ["ibp24s0", "ibp64s0"]
    assert not result["health"]["ok"] and result["health"]["reason"].startswith("mlx5_1:1 ibp64s0 down"), \
        result["health"]["reason"]
    (root / "class/net/ibp64s0/operstate").write_text("up\n")
    assert program(tmp).returncode == 0


def test_an_mtu_wrong_at_install_is_held_to_the_declared_profile(ib_host):
    tmp, root = ib_host
    (root / "class/net/ibp24s0/mtu").write_text("1500\n")
    declared = role_declared(_facts(params(tmp, root)), ipoib={"pools": {"ibp24s0": "10.10.0.0/24"}},
                             roce_declared_mtu={"enp12s0np0": 9000})
    assert declared["netdev_mtu"] == {"enp12s0np0": 9000, "ibp24s0": 2044}
    result = installed(tmp, root, **declared)
    assert result["expected"]["expect"]["netdev_mtu"]["ibp24s0"] == 2044
    assert result["health"]["reason"] == "mlx5_0:1 1500 on ibp24s0 (expected 2044 (declared))", result["health"]
    (root / "class/net/ibp24s0/mtu").write_text("2044\n")
    assert program(tmp).returncode == 0


def test_a_port_down_at_install_stays_expected_active(ib_host):
    tmp, root = ib_host
    set_cable(root, "mlx5_1", 1, False)
    result = installed(tmp, root)
    port = [p for p in result["expected"]["ports"] if p["device"] == "mlx5_1"]
    assert port and port[0]["role"] == "compute" and port[0]["rail"] == 1 and "state" not in port[0]
    assert result["health"]["reason"] == "mlx5_1:1 DOWN (expected ACTIVE 400 Gb/s)"
    set_cable(root, "mlx5_1", 1, True)
    assert program(tmp).returncode == 0
    assert not installed(tmp, root)["changed"]
