"""/etc/nccl.conf as an operator checks it: a root-owned 0644 file, managed by Ansible, and, read the way NCCL reads
it, exactly the settings the scenario expects for the host (molecule.yml host_vars expected_nccl_conf)."""

import pytest
from rdma_testinfra import nccl_conf_repeated_names, parse_nccl_conf

NCCL_CONF = "/etc/nccl.conf"


@pytest.fixture(scope="module")
def nccl_conf(host):
    return host.file(NCCL_CONF)


@pytest.fixture(scope="module")
def nccl_conf_text(nccl_conf):
    return nccl_conf.content_string


def test_nccl_conf_is_a_root_owned_0644_file(nccl_conf):
    assert nccl_conf.is_file and not nccl_conf.is_symlink
    assert (nccl_conf.user, nccl_conf.group, oct(nccl_conf.mode)) == ("root", "root", "0o644")


def test_nccl_conf_carries_the_managed_header(nccl_conf_text):
    assert nccl_conf_text.startswith("# Ansible managed")


def test_nccl_conf_holds_exactly_the_expected_settings(nccl_conf_text, hostvars):
    assert parse_nccl_conf(nccl_conf_text) == hostvars["expected_nccl_conf"]


def test_nccl_conf_sets_each_name_once(nccl_conf_text):
    # NCCL keeps the first line of a name and silently ignores the others.
    assert nccl_conf_repeated_names(nccl_conf_text) == []
