"""Tests of rdma_device_naming (module_utils/stack/device_naming.py, ofed_stack.naming_state)."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.stack import device_naming, ofed_stack


@pytest.mark.parametrize("name, policy, follows", [
    ("mlx5_0", "kernel", True), ("mlx5_bond_0", "kernel", True), ("ibp24s0", "kernel", False),
    ("ibp24s0", "pci", True), ("rocep12s0f1", "pci", True), ("ibP1p24s0", "pci", True), ("mlx5_3", "pci", False),
    ("ibx0c42a10300aa0101", "guid", True), ("rocexa088c203005d4100", "guid", True), ("rocep12s0f1", "guid", False),
    ("ibo1", "fallback", True), ("rocep6s0f1", "fallback", True), ("mlx5_0", "fallback", False),
    ("anything", "keep", True),
])
def test_names_each_policy_gives(name, policy, follows):
    assert device_naming.follows(name, policy) is follows


def test_fallback_keeps_kernel_names_of_devices_without_pci():
    assert device_naming.follows("rxe_0", "fallback", has_pci=False)


def test_rules_text_is_rdma_cores_rule_with_the_mode():
    text = device_naming.rules_text("kernel")
    assert text.splitlines()[-1] == 'ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_KERNEL"'


def test_state_on_a_host(tmp_path):
    sysfs = tmp_path / "sys"
    for name in ("ibp24s0", "ibp64s0"):
        (sysfs / "class" / "infiniband" / name / "device").mkdir(parents=True)
    rules = tmp_path / "60-rdma-persistent-naming.rules"
    naming, pending = ofed_stack.naming_state("kernel", str(sysfs), str(rules))
    assert naming["rules_current"] is False and naming["not_following"] == ["ibp24s0", "ibp64s0"]
    assert pending == {"from": "ibp24s0, ibp64s0", "to": "kernel names (NAME_KERNEL)", "rules_file": device_naming.RULES_FILE}
    rules.write_text(device_naming.rules_text("kernel"))
    naming, pending = ofed_stack.naming_state("kernel", str(sysfs), str(rules))
    assert naming["rules_current"] is True and pending is not None  # written, the devices wait for the next boot
    naming, pending = ofed_stack.naming_state("pci", str(sysfs), str(rules))
    assert naming["rules_current"] is False and pending is None
    naming, pending = ofed_stack.naming_state("keep", str(sysfs), str(rules))
    assert naming["rules_current"] is True and pending is None and naming["rules_text"] is None
