"""The shipped playbooks' own input rules (plugins/module_utils/play/play_inputs.py): the collection-wide rdma_* variables
and the rolling reboot's; each message names the variable the user set."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.play import play_inputs


def test_nothing_given_is_fine():
    assert play_inputs.collection_errors({}) == []
    assert play_inputs.rolling_reboot_errors({}) == []
    assert play_inputs.collection_errors({"rdma_require_devices": None, "rdma_gdr": None}) == []


@pytest.mark.parametrize("name, value", [("rdma_require_devices", "no"), ("rdma_require_devices", False),
                                         ("rdma_allow_reboot", "Yes"), ("rdma_allow_reboot", 1), ("rdma_gdr", "auto"),
                                         ("rdma_gdr", True), ("rdma_sysfs_root", "/tmp/sys")])
def test_good_collection_values(name, value):
    assert play_inputs.collection_errors({name: value}) == []


@pytest.mark.parametrize("name, value, message", [
    ("rdma_require_devices", "perhaps", 'rdma_require_devices must be true or false (true fails a host without an RDMA device; '
                                        'false configures it for NCCL over sockets); got "perhaps".'),
    ("rdma_allow_reboot", "maybe", 'rdma_allow_reboot must be true or false (consent to reboot hosts whose firmware changes '
                                   'are pending); got "maybe".'),
    ("rdma_allow_reboot", 2, "rdma_allow_reboot must be true or false"),
    ("rdma_gdr", "yes", 'rdma_gdr must be true, false or auto'),
    ("rdma_sysfs_root", "sys", 'rdma_sysfs_root must be an absolute path (/sys on a real host); got "sys".'),
])
def test_each_bad_collection_value_names_its_variable(name, value, message):
    errors = play_inputs.collection_errors({name: value})
    assert len(errors) == 1 and errors[0].startswith(message)


@pytest.mark.parametrize("inputs, message", [
    ({"rolling_reboot_batches": 0}, 'rolling_reboot_batches takes host counts (1 or more) and shares ("1%" to "100%")'),
    ({"rolling_reboot_batches": ""}, 'a canary then 10% at a time); got "".'),
    ({"rolling_reboot_batches": []}, "got []."),
    ({"rolling_reboot_batches": [1, "101%"]}, 'got [1, "101%"].'),
    ({"rolling_reboot_max_fail_percentage": -5}, "rolling_reboot_max_fail_percentage must be an integer 0-100 (0: any failure stops the rollout); got -5."),
    ({"rolling_reboot_timeout": "soon"}, 'rolling_reboot_timeout must be a number of seconds, 1 or more; got "soon".'),
    ({"rolling_reboot_port_timeout": 0}, "rolling_reboot_port_timeout must be a number of seconds, 1 or more; got 0."),
    ({"rolling_reboot_pre_tasks": "docs/examples/slurm_drain.yml"}, 'not absolute or not found: ["docs/examples/slurm_drain.yml"].'),
    ({"rolling_reboot_post_tasks": ["/nonexistent/x.yml", 3]}, 'not found: [3, "/nonexistent/x.yml"].'),
])
def test_each_bad_rolling_reboot_value_names_its_variable(inputs, message):
    errors = play_inputs.rolling_reboot_errors(inputs)
    assert len(errors) == 1 and message in errors[0], errors


def test_good_rolling_reboot_values(tmp_path):
    hook = tmp_path / "drain.yml"
    hook.write_text("---\n[]\n")
    assert play_inputs.rolling_reboot_errors({"rolling_reboot_batches": [1, "10%", 5, "100%"], "rolling_reboot_timeout": "600",
                                              "rolling_reboot_max_fail_percentage": "100", "rolling_reboot_pre_tasks": [str(hook)],
                                              "rolling_reboot_post_tasks": str(hook)}) == []


def test_a_hook_left_blank_is_no_hook_as_the_rolling_reboot_takes_it():
    assert play_inputs.rolling_reboot_errors({"rolling_reboot_pre_tasks": ""}) == []
    assert "not absolute or not found" in play_inputs.rolling_reboot_errors({"rolling_reboot_post_tasks": ["", "/x.yml"]})[0]


def test_device_errors_name_a_failed_read_a_host_without_devices_and_nothing_else():
    ok = {"ansible_facts": {"rdma": {"devices": {"mlx5_0": {}}}}, "failed": False}
    none = {"ansible_facts": {"rdma": {"devices": {}}}, "failed": False}
    # site.yml registers the read with failed_when false, which clears "failed": no facts is the failure
    failed = {"failed": False, "msg": "/x/sys: sysfs_root does not exist or is not a directory"}
    assert play_inputs.device_errors(ok, {}, "h1") == []
    assert play_inputs.device_errors(none, {"rdma_require_devices": "false"}, "h1") == []
    assert play_inputs.device_errors(none, {}, "h1")[0].startswith("No RDMA device under /sys/class/infiniband on h1.")
    assert play_inputs.device_errors(failed, {"rdma_sysfs_root": "/x/sys"}, "h1") == [
        "Reading the RDMA devices under /x/sys on h1 failed: /x/sys: sysfs_root does not exist or is not a directory"]
    # a refused root or require flag is named by collection_errors, not twice
    assert play_inputs.device_errors(failed, {"rdma_sysfs_root": "x/sys"}, "h1") == []
    assert play_inputs.device_errors(none, {"rdma_require_devices": "perhaps"}, "h1") == []


# ---- a value of the wrong type: the refusal says what the variable takes ----

def test_a_type_error_says_what_the_variable_takes_and_other_errors_stay_as_they_are():
    spec = {"roce_mtu": {"type": "int", "description": "Netdev MTU in bytes, 576-9978 (9000 gives RDMA MTU 4096)."},
            "health_expected_rate_gbps": {"type": "float", "description": [
                "Rate in Gb/s every ACTIVE compute port is held to (more than 0, at most 10000). Null - the most common."]},
            "roce_backend": {"type": "str", "choices": ["mlnx_qos", "dcb"], "description": "The QoS tool."}}
    results = [{"argument_spec_data": spec, "argument_errors": [
        "argument 'roce_mtu' is of type str and we were unable to convert to int: \"'9000B'\" cannot be converted to an int",
        "argument 'health_expected_rate_gbps' is of type str and we were unable to convert to float: <class 'str'> "
        "cannot be converted to a float",
        "value of roce_backend must be one of: mlnx_qos, dcb, got: tc"]},
        {"argument_spec_data": {}, "argument_errors": []}, {"skipped": True}]
    assert play_inputs.spec_errors(results) == [
        "Invalid role input: argument 'roce_mtu' is of type str and we were unable to convert to int: \"'9000B'\" "
        "cannot be converted to an int; roce_mtu takes a whole number: Netdev MTU in bytes, 576-9978 (9000 gives RDMA "
        "MTU 4096)",
        "Invalid role input: argument 'health_expected_rate_gbps' is of type str and we were unable to convert to "
        "float: <class 'str'> cannot be converted to a float; health_expected_rate_gbps takes a number: Rate in Gb/s "
        "every ACTIVE compute port is held to (more than 0, at most 10000)",
        "Invalid role input: value of roce_backend must be one of: mlnx_qos, dcb, got: tc"]
