"""The roles' inputs site.yml, health.yml and verify.yml check before anything changes, beyond the argument specs
(plugins/module_utils/play/play_inputs.py role_errors): the host paths and the rdma_host settings, with the rules the
roles apply themselves later."""

from __future__ import annotations

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.host.host_settings import profile
from ansible_collections.hpcnet.rdma.plugins.module_utils.play import play_inputs


def test_nothing_given_and_good_values_are_fine():
    assert play_inputs.role_errors({}) == []
    assert play_inputs.role_errors({"rdma_host_memlock": None, "health_expected_path": None}) == []
    assert play_inputs.role_errors({"rdma_host_memlock": "unlimited", "rdma_host_modules": ["ib_umad"],
                                    "rdma_host_ipoib": True, "health_expected_path": "/etc/h.json",
                                    "nccl_conf_settings": {"NCCL_IB_HCA": "x"}}) == []


@pytest.mark.parametrize("memlock", ["unlimted", "64G", "0", -1, "1.5", True])
def test_a_memlock_in_a_wrong_form_is_refused_with_the_rdma_host_rule(memlock):
    errors = play_inputs.role_errors({"rdma_host_memlock": memlock})
    assert errors == profile({"rdma_host_memlock": memlock}, False)["errors"]
    assert errors == ["rdma_host_memlock must be 'unlimited' or a number of KiB (a positive integer%s); got %r." % (
        "" if memlock is True else ", as limits.conf counts memlock", memlock)]


def test_module_names_are_checked_with_the_rdma_host_rule():
    assert play_inputs.role_errors({"rdma_host_modules": ["ib_umad", "../evil"]}) == [
        "rdma_host_modules takes kernel module names (letters, digits, '_' and '-', as in ib_uverbs); got [\"../evil\"]."]


def test_host_paths_are_checked_and_a_sysfs_root_inherited_from_rdma_sysfs_root_is_left_to_it():
    assert play_inputs.role_errors({"health_expected_path": "health.json"}) == [
        "health_expected_path must be an absolute path (the file the health check's expected state is written to, "
        "/etc/hpcnet/health.json by default); got 'health.json'."]
    # the nccl role's default is rdma_sysfs_root's value: collection_errors names rdma_sysfs_root
    assert play_inputs.role_errors({"rdma_sysfs_root": "sys", "nccl_sysfs_root": "sys"}) == []
    assert play_inputs.role_errors({"rdma_sysfs_root": "/sys", "nccl_sysfs_root": "sys"}) == [
        "nccl_sysfs_root must be an absolute path (root of sysfs, /sys on a real host); got 'sys'."]


def test_the_playbooks_template_only_the_variables_the_rules_read_of_the_roles_they_check():
    assert play_inputs.role_inputs(["health"]) == [
        "health_sysfs_root", "health_expected_path", "health_install_prefix", "health_textfile_dir",
        "health_nccl_conf_path", "health_metrics", "rdma_sysfs_root"]
    assert play_inputs.role_inputs(["rdma_host"]) == [
        "rdma_host_sysfs_root", "rdma_host_memlock", "rdma_host_modules", "rdma_host_ipoib", "rdma_sysfs_root"]
    assert play_inputs.role_inputs([]) == ["rdma_sysfs_root"]
