"""What `ibv_devinfo` (the simulated rdma-core tool, reading the same sysfs tree) reports on the host."""

import pytest
from rdma_testinfra import parse_ibv_devinfo


def test_ibv_devinfo_shows_the_first_rails_port_active(host, rdma_host, expected_ports):
    # by the name the host gave the device (mlx5_0 under kernel names, ibp24s0 under rdma-core's inbox rule)
    dev = expected_ports[0][0]
    out = host.run(f"ibv_devinfo -d {dev}")
    assert out.rc == 0, out.stderr
    devinfo = parse_ibv_devinfo(out.stdout)
    assert list(devinfo) == [dev], out.stdout
    port = devinfo[dev]["ports"].get(1, {})
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
    # No RDMA module loaded: libibverbs cannot list devices, devinfo prints the error and exits with -1 (255). Over
    # SSH, testinfra takes exit status 255 for ssh's own failure, so the status comes back on a line of its own.
    for command in ("ibv_devinfo", "ibv_devinfo -l"):
        out = host.run(command + "; echo \"exit status $?\"")
        assert (out.stdout, out.stderr) == ("exit status 255\n", "Failed to get IB devices list: Unknown error -38\n")
