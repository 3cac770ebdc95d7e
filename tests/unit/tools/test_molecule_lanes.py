"""tests/tools/molecule_lanes.py: which scenarios may run side by side, and what a failed one prints."""
import pytest

import molecule_lanes  # tests/tools, on the path by tests/unit/conftest.py


@pytest.fixture(name="held")
def _held():
    return {name: molecule_lanes.resources(name) for name in molecule_lanes.scenario_names()}


def test_every_scenario_holds_its_containers(held):
    assert {"default", "infiniband", "verify", "roce"} <= set(held)
    assert "container:mol-ib-sm1" in held["infiniband"]
    assert "subnet:10.10.0.0/24" in held["infiniband"]


def test_scenarios_on_the_same_rail_subnets_never_run_together(held):
    # the RoCE profiles fix 10.0.1.0/24 and 10.0.2.0/24 unless the scenario moves them (simhost_rail_subnets:
    # roce 10.0.11/12, verify 10.0.21/22); the IB profiles 10.10.0.0/24 and 10.10.1.0/24
    assert molecule_lanes.collides("verify", ["infiniband"], held) == "infiniband"
    assert molecule_lanes.collides("ofed", ["default", "firmware"], held) == "firmware"
    assert "subnet:10.0.11.0/24" in held["roce"] and "subnet:10.0.21.0/24" in held["verify"]
    assert molecule_lanes.collides("roce", ["default", "firmware", "verify"], held) is None
    assert molecule_lanes.collides("default", ["infiniband", "roce"], held) is None


def test_a_network_no_scenario_owns_on_a_scenario_subnet_is_named(held):
    # the demo's rail networks sit on the IB profiles' subnets: `make demo` then `make test` must say so up front
    found = molecule_lanes.foreign_networks(held, {"hpcnet-rail0": ["10.10.0.0/24"], "bridge": ["172.17.0.0/16"],
                                                   "hpcnet-mol-ibrail0": ["10.10.0.0/24"]})
    assert found == ["hpcnet-rail0 (10.10.0.0/24, needed by infiniband, verify)"]
    assert molecule_lanes.foreign_networks(held, {"hpcnet-mol-ibrail0": ["10.10.0.0/24"]}) == []


def test_main_refuses_before_running_when_such_a_network_is_up(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(molecule_lanes, "docker_networks", lambda: {"hpcnet-rail0": ["10.10.0.0/24"]})
    monkeypatch.setattr(molecule_lanes, "run", lambda *a: pytest.fail("ran a scenario"))
    assert molecule_lanes.main(["--logs", str(tmp_path), "infiniband"]) == 2
    assert "hpcnet-rail0 (10.10.0.0/24, needed by infiniband)" in capsys.readouterr().err


def test_no_two_scenarios_share_a_container_name(held):
    containers = {}
    for name, items in held.items():
        for item in items:
            if item.startswith("container:"):
                assert item not in containers, f"{item} in {containers.get(item)} and {name}"
                containers[item] = name


def test_a_failed_scenario_names_its_failed_task(tmp_path):
    log = tmp_path / "roce.log"
    log.write_text("\n".join([
        "  │ TASK [hpcnet.rdma.roce : Apply the QoS settings] ***",
        "  │ ok: [mol-roce-inbox]",
        "  │ fatal: [mol-roce-ofed]: FAILED! => changed=false",
        "  │   msg: pfc_priorities: 8 is not a priority (0-7)",
        "INFO roce ➜ converge: \x1b[31mExecuted: Failed\x1b[0m",
    ]) + "\n", encoding="utf-8")
    picked, tail = molecule_lanes.failure_excerpt(log, tail=2)
    assert picked[0] == "TASK [hpcnet.rdma.roce : Apply the QoS settings] ***"
    assert "fatal: [mol-roce-ofed]: FAILED! => changed=false" in picked
    assert "msg: pfc_priorities: 8 is not a priority (0-7)" in picked
    assert tail[-1] == "INFO roce ➜ converge: Executed: Failed"


def test_an_unknown_scenario_is_refused(capsys):
    with pytest.raises(SystemExit):
        molecule_lanes.main(["--jobs", "2", "rocee"])
    assert "unknown scenario rocee; scenarios: default" in capsys.readouterr().err


def test_the_failed_tasks_are_the_last_lines_printed(tmp_path, monkeypatch, capsys):
    """A CI log is read from its end: the failed task and its message come after the one-line-per-scenario recap."""
    (tmp_path / "roce.log").write_text("\n".join([
        "  │ TASK [Wait until the standby (priority 10) is master] ***",
        "  │ fatal: [mol-ib-node]: FAILED! => changed=false",
        "  │   msg: no takeover",
        "INFO roce ➜ side_effect: Executed: Failed",
    ]) + "\n", encoding="utf-8")
    monkeypatch.setattr(molecule_lanes, "run", lambda scenarios, jobs, logs: {
        "roce": (2, 10, {"create": 4.2, "converge": 5.6}), "default": (0, 5, {"create": 5})})
    assert molecule_lanes.main(["--logs", str(tmp_path), "roce", "default"]) == 1
    out = capsys.readouterr().out.splitlines()
    roce = next(line for line in out if line.startswith("  roce "))
    assert roce.split() == ["roce", "FAILED", "10", "s", "4", "s", "6", "s"]
    assert out.index(roce) < out.index("=== roce: failed tasks")
    assert out[-1] == "INFO roce ➜ side_effect: Executed: Failed"
    assert "msg: no takeover" in out[-3:]


def test_the_task_that_ended_the_play_goes_to_failed_tasks_txt(tmp_path, monkeypatch):
    """tests/tools/stages prints failed-tasks.txt after its stage times: the task that ended the play, not a failure a
    rescue caught before it, nor the destroy stage's last task."""
    (tmp_path / "infiniband.log").write_text("\n".join([
        "  │ TASK [Wait until the standby (priority 10) is master] ***",
        "  │ fatal: [mol-ib-node]: FAILED! => changed=false",
        "  │ TASK [Ignored] ***",
        "  │ fatal: [mol-ib-node]: FAILED! => changed=false",
        "  │ ...ignoring",
        "  │ TASK [No takeover] ***",
        "  │ fatal: [mol-ib-node]: FAILED! => changed=false",
        "  │   msg: the standby did not take over",
        "  │ TASK [Remove the scenario's containers and networks] ***",
        "ERROR    Ansible return code was 2",
    ]) + "\n", encoding="utf-8")
    monkeypatch.setattr(molecule_lanes, "run", lambda scenarios, jobs, logs: {"infiniband": (2, 10, {})})
    monkeypatch.setattr(molecule_lanes, "docker_networks", dict)
    assert molecule_lanes.main(["--logs", str(tmp_path), "infiniband"]) == 1
    summary = (tmp_path / "failed-tasks.txt").read_text(encoding="utf-8").splitlines()
    assert summary[1] == "TASK [No takeover] ***"
    assert summary[2:4] == ["fatal: [mol-ib-node]: FAILED! => changed=false", "msg: the standby did not take over"]
    monkeypatch.setattr(molecule_lanes, "run", lambda scenarios, jobs, logs: {"infiniband": (0, 10, {})})
    assert molecule_lanes.main(["--logs", str(tmp_path), "infiniband"]) == 0
    assert not (tmp_path / "failed-tasks.txt").exists()


def test_a_module_traceback_is_shown_to_its_cause(tmp_path):
    """A module that died prints a traceback under the failed task; its last line says why."""
    frames = [f"    File \"<stdin>\", line {n}, in <module>" for n in range(16)]
    log = tmp_path / "roce.log"
    log.write_text("\n".join(["  │ TASK [Wait until systemd has booted] ***",
                              "  │ fatal: [mol-roce-ofed]: FAILED! =>",
                              "  │   module_stderr: |-",
                              "  │     Traceback (most recent call last):"]
                             + frames + ["  │     FileNotFoundError: [Errno 2] No such file or directory"]) + "\n",
                   encoding="utf-8")
    picked, _ = molecule_lanes.failure_excerpt(log)
    assert picked[-1] == "FileNotFoundError: [Errno 2] No such file or directory"


def test_each_stage_is_timed_from_its_announcement_to_its_end():
    """Molecule announces "➜ stage: Executing" and "➜ stage: Executed"; destroy runs twice and adds up."""
    ticks = iter([0, 3, 10, 25, 100, 104])
    lines = [b"INFO     verify \xe2\x9e\x9c destroy: Executing\n", b"INFO     verify \xe2\x9e\x9c destroy: Executed: Successful\n",
             b"INFO     verify \xe2\x9e\x9c converge: Executing\n", b"  | TASK [x]\n",
             b"INFO     verify \xe2\x9e\x9c converge: \x1b[31mExecuted: Failed\x1b[0m\n",
             b"INFO     verify \xe2\x9e\x9c destroy: Executing\n", b"INFO     verify \xe2\x9e\x9c destroy: Executed: Successful\n"]
    copied, times = [], {}
    for line, times in molecule_lanes.stage_times(lines, clock=lambda: next(ticks)):
        copied.append(line)
    assert copied == lines
    assert times == {"destroy": 3 + 4, "converge": 15}
