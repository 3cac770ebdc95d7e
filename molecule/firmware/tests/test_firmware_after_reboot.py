"""After the firmware scenario: the VPI card's port 2 is InfiniBand (sysfs, ibv_devinfo, the firmware's Current
column, nccl.conf), the RoCE host's ECN/CNP firmware settings are current, and SR-IOV from the side effect is on.
Tool output is parsed with the collection's own parsers (mlxconfig), as the module reads it."""

import sys

import pytest
from rdma_testinfra import collection_path, parse_ibv_devinfo, parse_nccl_conf

sys.path.insert(0, str(collection_path().parents[2]))
from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware import mlxconfig  # noqa: E402  pylint: disable=wrong-import-position

SYS = "/run/simhost/sys"


def _run(host, *argv):
    result = host.run(" ".join(argv))
    assert result.rc == 0, (argv, result.stderr)
    return result.stdout


def _config(host, pci):
    return mlxconfig.config_of(mlxconfig.parse_query(_run(host, "mstconfig", "-d", pci, "-e", "q")))


@pytest.fixture(scope="module")
def vpi(host):
    if host.backend.get_hostname() != "mol-fw-vpi":
        pytest.skip("VPI host only")
    return host


@pytest.fixture(scope="module")
def roce(host):
    if host.backend.get_hostname() != "mol-fw-roce":
        pytest.skip("RoCE host only")
    return host


def test_port_2_is_infiniband_in_sysfs(vpi):
    assert vpi.file(SYS + "/class/infiniband/mlx5_1/ports/1/link_layer").content_string.strip() == "InfiniBand"
    assert vpi.file(SYS + "/class/infiniband/mlx5_1/ports/1/state").content_string.strip() == "4: ACTIVE"
    assert vpi.file(SYS + "/class/infiniband/mlx5_0/ports/1/link_layer").content_string.strip() == "InfiniBand"


def test_port_2_is_infiniband_in_ibv_devinfo(vpi):
    info = parse_ibv_devinfo(_run(vpi, "ibv_devinfo", "-d", "mlx5_1"))
    assert info["mlx5_1"]["ports"][1]["link_layer"] == "InfiniBand"
    assert info["mlx5_1"]["ports"][1]["state"] == "PORT_ACTIVE (4)"


def test_the_firmware_has_no_pending_change(vpi):
    config = _config(vpi, "0000:0c:00.0")
    assert config["LINK_TYPE_P1"]["current"] == config["LINK_TYPE_P2"]["current"] == 1
    assert config["LINK_TYPE_P2"]["default"] == 1
    assert config["SRIOV_EN"]["current"] == 1 and config["NUM_OF_VFS"]["current"] == 4
    assert all(value["current"] == value["next_boot"] for value in config.values())


def test_sriov_totalvfs_follows_the_firmware(vpi):
    for fn in ("0000:0c:00.0", "0000:0c:00.1"):
        assert vpi.file("%s/bus/pci/devices/%s/sriov_totalvfs" % (SYS, fn)).content_string.strip() == "4"


def test_nccl_uses_both_infiniband_ports(vpi):
    conf = parse_nccl_conf(vpi.file("/etc/nccl.conf").content_string)
    assert conf["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"
    assert "NCCL_IB_GID_INDEX" not in conf


@pytest.mark.parametrize("pci", ["0000:0c:00.0", "0000:8c:00.0"])
def test_roce_ecn_and_cnp_are_current_in_firmware(roce, pci):
    config = _config(roce, pci)
    assert config["ROCE_CC_PRIO_MASK_P1"]["current"] == 1 << 3   # ECN on priority 3 only (roce_ecn_priorities)
    assert config["CNP_DSCP_P1"]["current"] == 48
    assert config["CNP_802P_PRIO_P1"]["current"] == 6


def test_roce_host_nccl_conf(roce):
    # rdma_device_naming: pci renamed mlx5_0/mlx5_1 at the rolling reboot; nccl.conf names them as the host does now
    conf = parse_nccl_conf(roce.file("/etc/nccl.conf").content_string)
    assert conf["NCCL_IB_HCA"] == "=rocep12s0:1,rocep140s0:1"
    assert conf["NCCL_IB_TC"] == "106"


def test_roce_host_devices_have_the_names_the_udev_rule_gives(roce):
    rule = roce.file("/etc/udev/rules.d/60-rdma-persistent-naming.rules").content_string
    assert rule.splitlines()[-1] == 'ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_PCI"'
    assert _run(roce, "rdma", "dev").splitlines()[0].startswith("0: rocep12s0: node_type ca")
