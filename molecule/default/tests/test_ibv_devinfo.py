"""What `ibv_devinfo` (the simulated rdma-core tool, reading the same sysfs tree) reports on the host."""

import pytest
from rdma_testinfra import parse_ibv_devinfo


def test_ibv_devinfo_shows_mlx5_0_port_active(host, rdma_host):
    out = host.run("ibv_devinfo -d mlx5_0")
    assert out.rc == 0, out.stderr
    devinfo = parse_ibv_devinfo(out.stdout)
    assert list(devinfo) == ["mlx5_0"], out.stdout
    port = devinfo["mlx5_0"]["ports"].get(1, {})
    assert (port.get("state"), port.get("link_layer")) == ("PORT_ACTIVE (4)", rdma_host["expected_link_layer"])


def test_ibv_devinfo_shows_every_nccl_port_active(host, rdma_host, expected_ports):
    out = host.run("ibv_devinfo")
    assert out.rc == 0, out.stderr
    ports = {(dev, port): info for dev, data in parse_ibv_devinfo(out.stdout).items()
             for port, info in data["ports"].items()}
    seen = {f"{dev}:{port}": (ports.get((dev, port), {}).get("state"), ports.get((dev, port), {}).get("link_layer"))
            for dev, port in expected_ports}
    want = {f"{dev}:{port}": ("PORT_ACTIVE (4)", rdma_host["expected_link_layer"]) for dev, port in expected_ports}
    assert seen == want


@pytest.mark.usefixtures("rdma_less_host")
def test_ibv_devinfo_finds_no_device(host):
    # No RDMA module loaded: libibverbs cannot list devices, devinfo prints the error and exits with -1 (255).
    for command in ("ibv_devinfo", "ibv_devinfo -l"):
        out = host.run(command)
        assert (out.rc, out.stdout, out.stderr) == (255, "", "Failed to get IB devices list: Unknown error -38\n")
