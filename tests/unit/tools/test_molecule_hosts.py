"""tests/tools/molecule_hosts.py: Molecule's create and destroy as docker CLI calls (what each platform key becomes)."""
import json

import pytest
import yaml

import molecule_hosts  # tests/tools, on the path by tests/unit/conftest.py
import molecule_lanes


class FakeDocker:
    """Records the docker CLI calls; `containers` and `networks` ({name: attached container count}) are the daemon."""

    def __init__(self, containers=(), networks=None):
        self.calls = []
        self.containers = set(containers)
        self.networks = dict(networks or {})

    def __call__(self, *args, check=True):
        self.calls.append(list(args))
        out, rc = "", 0
        if args[:2] == ("network", "inspect"):
            name = args[-1]
            rc = 0 if name in self.networks else 1
            out = "%d\n" % self.networks.get(name, 0)
        elif args[:2] == ("ps", "--all"):
            out = "\n".join(sorted(self.containers))
        return type("Done", (), {"returncode": rc, "stdout": out, "stderr": ""})()


def platforms(scenario):
    config = yaml.safe_load((molecule_lanes.MOLECULE / scenario / "molecule.yml").read_text(encoding="utf-8"))
    return json.loads(json.dumps(config["platforms"]).replace("${HPCNET_TEST_IMAGE:-hpcnet-rdma-base:bookworm}",
                                                             "hpcnet-rdma-base:bookworm"))


def test_every_scenario_uses_only_the_keys_the_tool_knows():
    for scenario in molecule_lanes.scenario_names():
        molecule_hosts.check_platforms(platforms(scenario))


def test_create_makes_the_networks_then_each_container_as_its_platform_says(monkeypatch):
    fake = FakeDocker()
    monkeypatch.setattr(molecule_hosts, "docker", fake)
    molecule_hosts.create(platforms("firmware"))
    assert ["network", "create", "--label", "owner=molecule", "--opt", "com.docker.network.driver.mtu=9000",
            "--subnet=10.0.1.0/24", "--gateway=10.0.1.1", "--ip-range=10.0.1.128/25", "hpcnet-mol-fw-rail0"] in fake.calls
    create = next(call for call in fake.calls if call[:3] == ["create", "--name", "mol-fw-roce"])
    assert create[-2:] == ["hpcnet-rdma-base:bookworm", "/lib/systemd/systemd"]
    for flag in ("--cap-add=SYS_ADMIN", "--cap-add=NET_ADMIN", "--tmpfs=/run", "--tmpfs=/run/lock", "--tmpfs=/tmp",
                 "--volume=/sys/fs/cgroup:/sys/fs/cgroup:ro"):
        assert flag in create
    assert create[create.index("--stop-signal") + 1] == "SIGRTMIN+3"
    assert create[create.index("--restart") + 1] == "unless-stopped"
    assert create[create.index("--network") + 1] == "bridge"
    assert ["network", "connect", "hpcnet-mol-fw-rail1", "mol-fw-roce"] in fake.calls
    # a container of an earlier run is made again; all start at once, after the networks are attached
    assert fake.calls.index(["rm", "--force", "mol-fw-roce", ]) < fake.calls.index(create)
    assert fake.calls[-1] == ["start", "mol-fw-vpi", "mol-fw-roce"]


def test_create_keeps_a_network_that_exists_and_splits_the_command_as_a_shell_would(monkeypatch):
    fake = FakeDocker(networks={"hpcnet-mol-ofed-rail1": 0})
    monkeypatch.setattr(molecule_hosts, "docker", fake)
    molecule_hosts.create(platforms("ofed"))
    assert not [call for call in fake.calls if call[:2] == ["network", "create"] and call[-1] == "hpcnet-mol-ofed-rail1"]
    # an internal network (no way out), the mirror's names on it
    assert ["network", "create", "--label", "owner=molecule", "--internal", "hpcnet-mol-ofed-mirrornet"] in fake.calls
    mirror = next(call for call in fake.calls if call[:3] == ["create", "--name", "mol-ofed-mirror"])
    assert mirror[mirror.index("--network") + 1:mirror.index("--network") + 4] == [
        "hpcnet-mol-ofed-mirrornet", "--network-alias=doca-mirror", "--network-alias=debian-mirror"]
    assert mirror[-6:] == ["python3", "-m", "http.server", "80", "--directory", "/srv/mirror"]


def test_an_unknown_platform_or_network_key_is_refused_with_its_name():
    bad = platforms("default")
    bad[0]["published_ports"] = ["80:80"]
    with pytest.raises(SystemExit, match="mol-def-ib: published_ports not supported"):
        molecule_hosts.check_platforms(bad)
    bad = platforms("firmware")
    bad[1]["docker_networks"][0]["enable_ipv6"] = True
    with pytest.raises(SystemExit, match="docker_networks hpcnet-mol-fw-rail0: enable_ipv6 not supported"):
        molecule_hosts.check_platforms(bad)
    bad = platforms("firmware")
    bad[1]["networks"][1]["ipv4_address"] = "10.0.1.5"
    with pytest.raises(SystemExit, match="networks hpcnet-mol-fw-rail0: ipv4_address not supported"):
        molecule_hosts.check_platforms(bad)


def test_destroy_removes_what_exists_and_only_unused_networks(monkeypatch):
    fake = FakeDocker(containers={"mol-fw-vpi", "other"}, networks={"hpcnet-mol-fw-rail0": 0, "hpcnet-mol-fw-rail1": 1})
    monkeypatch.setattr(molecule_hosts, "docker", fake)
    assert molecule_hosts.destroy(platforms("firmware")) is True
    assert ["rm", "--force", "mol-fw-vpi"] in fake.calls
    assert ["network", "rm", "hpcnet-mol-fw-rail0"] in fake.calls
    assert ["network", "rm", "hpcnet-mol-fw-rail1"] not in fake.calls


def test_destroy_of_nothing_changes_nothing(monkeypatch):
    fake = FakeDocker()
    monkeypatch.setattr(molecule_hosts, "docker", fake)
    assert molecule_hosts.destroy(platforms("default")) is False
    assert not [call for call in fake.calls if call[0] == "rm"]


def test_ulimits_become_docker_ulimit_flags(monkeypatch):
    fake = FakeDocker()
    monkeypatch.setattr(molecule_hosts, "docker", fake)
    platform = dict(platforms("firmware")[0], ulimits=["nofile:1024:4096"])
    molecule_hosts.create([platform])
    create = next(call for call in fake.calls if call[:2] == ["create", "--name"])
    assert "--ulimit=nofile=1024:4096" in create
