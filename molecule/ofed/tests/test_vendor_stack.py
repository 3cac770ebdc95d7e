"""The vendor stacks the ofed scenario installed: what is on disk, pinned, built and loaded."""

import pytest

ROCE = "mol-ofed-roce"
IB = "mol-ofed-ib"


@pytest.fixture(scope="module")
def roce(host):
    if host.backend.get_hostname() != ROCE:
        pytest.skip("RoCE host only")
    return host


@pytest.fixture(scope="module")
def ib(host):
    if host.backend.get_hostname() != IB:
        pytest.skip("IB host only")
    return host


def test_doca_version_and_ofed_info(roce):
    assert roce.package("doca-ofed").version == "3.2.1-044000"
    assert roce.check_output("ofed_info -s") == "OFED-internal-25.10-1.7.1.0:"


def test_doca_repository_is_signed_and_pinned(roce):
    sources = roce.file("/etc/apt/sources.list.d/hpcnet-rdma-doca.sources").content_string
    assert "URIs: http://doca-mirror/public/repo/doca/3.2.1/debian12/x86_64/" in sources
    assert "Signed-By: /etc/apt/keyrings/hpcnet-rdma-doca.asc" in sources
    assert "trusted=yes" not in sources
    pins = roce.file("/etc/apt/preferences.d/hpcnet-rdma-vendor.pref").content_string
    assert 'Pin: origin "doca-mirror"\nPin-Priority: 1001' in pins
    # the candidate is the vendor's, though the distribution mirror carries rdma-core too
    policy = roce.check_output("apt-cache policy rdma-core")
    assert "Candidate: 2510mlnx58-1.2510071" in policy


def test_dkms_built_for_the_running_kernel_and_driver_loaded(roce):
    running = roce.check_output("uname -r")
    assert f"mlnx-ofed-kernel/25.10.OFED.25.10.1.7.1.1, {running}, x86_64: installed" in roce.check_output("dkms status")
    assert roce.file("/run/simhost/sys/module/mlx5_core/version").content_string.strip() == "25.10-1.7.1"


def test_openib_conf_setting(roce):
    assert "IPOIB_LOAD=no" in roce.file("/etc/infiniband/openib.conf").content_string


def test_mlnx_ofed_installed_from_the_tarball(ib):
    assert ib.check_output("ofed_info -s") == "MLNX_OFED_LINUX-24.10-1.1.4.0:"
    assert ib.package("rdma-core").version == "2410mlnx54-1.2410114"
    pins = ib.file("/etc/apt/preferences.d/hpcnet-rdma-vendor.pref").content_string
    assert "Package: rdma-core\nPin: version 2410mlnx54-1.2410114\nPin-Priority: 1001" in pins


def test_mlnx_ofed_driver_waits_for_a_reboot(ib):
    # installed and built, not loaded: the loaded mlx5_core is still the in-tree one (no version file)
    assert ib.file("/lib/modules/%s/updates/dkms/mlx5_core.ko" % ib.check_output("uname -r")).exists
    assert not ib.file("/run/simhost/sys/module/mlx5_core/version").exists


@pytest.mark.parametrize("package", ["openmpi-bin", "libopenmpi3", "python3-mpi4py"])
def test_the_site_mpi_stack_survives_the_stack_changes(host, package):
    # inbox -> vendor: the vendor's rdma-core family replaces the distribution's in place (removing the inbox stack
    # first would take Open MPI, libfabric, UCX and mpi4py with it: they depend on libibverbs1 / ibverbs-providers);
    # vendor -> vendor (the DOCA upgrade, downgrade and offline upgrade of side_effect): ofed_uninstall.sh does take
    # them, and the role installs them again after the new stack
    if host.backend.get_hostname() not in (ROCE, IB):
        pytest.skip("RDMA hosts only")
    assert host.package(package).is_installed
