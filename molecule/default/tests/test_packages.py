"""The RDMA user space the ofed role installs (the distro's inbox rdma-core) is installed on every host."""

import pytest

PACKAGES = ["rdma-core", "ibverbs-utils", "infiniband-diags", "perftest"]


@pytest.mark.parametrize("name", PACKAGES)
def test_rdma_user_space_is_installed(host, name):
    assert host.package(name).is_installed


def test_facts_report_the_installed_rdma_core(host, rdma_facts):
    # Debian version 44.0-2: the stack version is the upstream part.
    installed = host.package("rdma-core").version.split(":")[-1].rsplit("-", 1)[0]
    assert (rdma_facts["stack"]["provider"], rdma_facts["stack"]["version"]) == ("inbox", installed)
