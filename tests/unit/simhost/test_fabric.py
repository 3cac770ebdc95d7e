"""simhost InfiniBand fabric: ibsim netfile from profiles, ibsync parsing of real smpquery output and mirroring into
a tree, the infiniband-diags launchers, and (when Debian's ibsim-utils/opensm/infiniband-diags are installed) a real
local ibsim + opensm run. See tests/simhost/README.md, "InfiniBand fabric and subnet manager"."""

from __future__ import annotations

import json
import os

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.sysfs.rdma_sysfs import gather_rdma_sysfs

KIT = Path(__file__).resolve().parents[2] / "simhost"
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import fabric, ibsync  # noqa: E402  pylint: disable=wrong-import-position
from simhost.profile import ProfileError  # noqa: E402  pylint: disable=wrong-import-position

FIX = Path(__file__).resolve().parents[2] / "fixtures/real/ib-stack"


def host(name, profile, index, server="fab", port=7070):
    prof = dict(simhost.load(profile), host_index=index, ib_fabric={"server": server, "port": port, "hostname": name})
    return {"host": name, "profile": prof}


@pytest.fixture(autouse=True)
def _persist(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))


# ------------------------------------------------------------------------------------------- profiles
def test_fabric_ports_come_up_init_without_lid():
    exp = simhost.expand(host("node01", "cx7_ib_ndr_8x", 1)["profile"])
    for dev in exp["devices"]:
        port = dev["ports"][0]
        assert (port["state"], port["phys_state"], port["lid"], port["sm_lid"]) == ("INIT", "LinkUp", 0, 0)
        assert dev["node_desc"] == f"node01 {dev['name']}"
    assert exp["ib_fabric"] == {"server": "fab", "port": 7070, "hostname": "node01"}


def test_profiles_without_fabric_keep_static_active():
    exp = simhost.expand(simhost.load("cx7_ib_ndr_8x"), 1)
    port = exp["devices"][0]["ports"][0]
    assert (port["state"], port["lid"], port["sm_lid"]) == ("ACTIVE", 0x1A + 16, 1)
    assert exp["ib_fabric"] is None and not fabric.fabric_ports(exp)


def test_fabric_leaves_ethernet_and_linkless_ports_alone():
    exp = simhost.expand(host("node03", "mixed_ib_roce_down", 0)["profile"])
    states = {d["name"]: (d["ports"][0]["state"], d["ports"][0]["lid"]) for d in exp["devices"]}
    assert states == {"mlx5_0": ("INIT", 0), "mlx5_1": ("ACTIVE", 0), "mlx5_2": ("DOWN", 0)}
    assert [d["name"] for d in fabric.ib_devices(exp)] == ["mlx5_0"]


def test_node_id_too_long_for_ibsim():
    with pytest.raises(ProfileError, match="longer than 31 characters"):
        simhost.expand(host("a-very-long-host-name-0123456", "cx7_vpi_2p", 0)["profile"])


def test_bad_fabric_field_is_named():
    prof = dict(simhost.load("cx7_vpi_2p"), ib_fabric={"server": "fab"})
    with pytest.raises(ProfileError, match=r"ib_fabric: missing required field 'hostname'"):
        simhost.expand(prof)


def test_tree_on_fabric_shows_init(tmp_path):
    exp = simhost.build_tree(host("node02", "cx7_vpi_2p", 2)["profile"], tmp_path / "sys")
    pdir = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    assert [(pdir / f).read_text() for f in ("state", "phys_state", "lid", "sm_lid")] == \
        ["2: INIT\n", "5: LinkUp\n", "0x0\n", "0x0\n"]
    assert (tmp_path / "sys/class/infiniband/mlx5_0/node_desc").read_text() == "node02 mlx5_0\n"
    assert exp["devices"][1]["ports"][0]["link_layer"] == "Ethernet"


# -------------------------------------------------------------------------------------------- netfile
def test_netfile_one_switch_per_rail_and_ca_guid_minus_one():
    hosts = [host("node01", "cx7_vpi_2p", 1), host("node02", "cx7_vpi_2p", 2), host("node03", "cx7_ib_ndr_8x", 3),
             {"host": "plain", "profile": dict(simhost.load("cx7_ib_ndr_8x"), host_index=4)}]
    hosts[3]["profile"]["ib_fabric"] = None  # a host on no fabric contributes nothing
    text = fabric.netfile(hosts, "fab")
    lines = text.splitlines()
    assert lines.count('Switch 3 "sw-rail0"') == 1
    i = lines.index('Switch 3 "sw-rail0"')
    assert lines[i + 1:i + 4] == ['[1] "node01 mlx5_0"[1]', '[2] "node02 mlx5_0"[1]', '[3] "node03 mlx5_0"[1]']
    # the 8x host's other devices are alone on rails 1..7 (separate subnets); the VPI hosts' mlx5_1 is Ethernet
    assert sum(1 for line in lines if line.startswith("Switch ")) == 8
    assert '"node01 mlx5_1"' not in text and "plain" not in text
    exp = simhost.expand(hosts[0]["profile"])
    port_guid = exp["devices"][0]["ports"][0]["port_guid"]
    j = lines.index('Hca 1 "node01 mlx5_0"')
    assert lines[j - 1] == f"caguid=0x{int(port_guid, 16) - 1:016x}"
    assert lines[j + 1] == '[1] "sw-rail0"[1]'
    j = lines.index('Hca 1 "node03 mlx5_7"')
    assert lines[j + 1] == '[1] "sw-rail7"[1]'


def test_netfile_accepts_expanded_profiles(tmp_path):
    raw = host("node01", "cx7_vpi_2p", 1)
    simhost.build_tree(raw["profile"], tmp_path / "sys")
    booted = json.loads((tmp_path / "sys/.simhost/profile.json").read_text())
    assert fabric.netfile([booted]) == fabric.netfile([raw])


def test_netfile_refuses_duplicate_node_ids():
    with pytest.raises(ValueError, match="already taken"):
        fabric.netfile([host("node01", "cx7_vpi_2p", 1), host("node01", "cx7_vpi_2p", 2)])


def test_netfile_cli(tmp_path, capsys):
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps([host("node01", "cx7_vpi_2p", 1)]))
    out = tmp_path / "fabric.net"
    from simhost.__main__ import main  # pylint: disable=import-outside-toplevel
    assert main(["fabric", "netfile", "--hosts", str(path), "--output", str(out)]) == 0
    assert "changed" in capsys.readouterr().out
    assert main(["fabric", "netfile", "--hosts", str(path), "--output", str(out)]) == 0
    assert "unchanged" in capsys.readouterr().out
    assert 'Hca 1 "node01 mlx5_0"' in out.read_text()


def _two_rail_hosts():
    # node01/node02: cx7_ib_ndr_2x_gpu (mlx5_0 rail 0, mlx5_1 rail 1); node03: one IB device (rail 0 only)
    return [host("node01", "cx7_ib_ndr_2x_gpu", 1), host("node02", "cx7_ib_ndr_2x_gpu", 2),
            host("node03", "mixed_ib_roce_down", 3)]


def test_netfile_of_one_rail_has_only_its_switch_and_cas():
    hosts = _two_rail_hosts()
    lines = fabric.netfile(hosts, "fab", rail=1).splitlines()
    assert [line for line in lines if line.startswith(("Switch", "Hca"))] == \
        ['Switch 2 "sw-rail1"', 'Hca 1 "node01 mlx5_1"', 'Hca 1 "node02 mlx5_1"']
    i = lines.index('Switch 2 "sw-rail1"')
    assert lines[i - 1] == "switchguid=0x0002c90300fab001"
    assert lines[i + 1:i + 3] == ['[1] "node01 mlx5_1"[1]', '[2] "node02 mlx5_1"[1]']
    assert "sw-rail0" not in "\n".join(lines) and "mlx5_0" not in "\n".join(lines)
    j = lines.index('Hca 1 "node02 mlx5_1"')
    guid = simhost.expand(hosts[1]["profile"])["devices"][1]["ports"][0]["port_guid"]
    assert lines[j - 1] == f"caguid=0x{int(guid, 16) - 1:016x}" and lines[j + 1] == '[1] "sw-rail1"[2]'
    rail0 = fabric.netfile(hosts, "fab", rail=0)
    assert 'Switch 3 "sw-rail0"' in rail0 and '"node03 mlx5_0"' in rail0 and "sw-rail1" not in rail0
    with pytest.raises(ValueError, match=r"rail 2: no IB port of these hosts is on it \(rails: 0, 1\)"):
        fabric.netfile(hosts, rail=2)


def test_netfiles_one_per_rail():
    hosts = _two_rail_hosts()
    files = fabric.netfiles(hosts, "fab")
    assert sorted(files) == [0, 1]
    assert files == {0: fabric.netfile(hosts, "fab", rail=0), 1: fabric.netfile(hosts, "fab", rail=1)}
    assert "# ibsim netfile written by simhost (python3 -m simhost fabric netfile): fabric fab, rail 1" in files[1]
    # duplicate node ids are refused even when they are on different rails' files
    with pytest.raises(ValueError, match="already taken"):
        fabric.netfiles(hosts + [host("node01", "cx7_vpi_2p", 4)])


def test_rail_ports_are_20_apart():
    assert [fabric.rail_port(7070, r) for r in range(4)] == [7070, 7090, 7110, 7130]
    # ibsim uses port .. port + 1 + 9 (10 clients): the rails' ranges never overlap
    used = [set(range(fabric.rail_port(7070, r), fabric.rail_port(7070, r) + 1 + fabric.IBSIM_MAX_CLIENTS))
            for r in range(8)]
    assert all(not (used[a] & used[b]) for a in range(8) for b in range(a + 1, 8))
    assert fabric.rail_port(65000, 7) == 65140  # the profile's highest fabric port, 8 rails
    with pytest.raises(ValueError, match=r"rail 27: ibsim port 65540 .* out of range 1\.\.65524"):
        fabric.rail_port(65000, 27)


def test_fabric_port_comes_from_the_hosts():
    assert fabric.fabric_port([host("node01", "cx7_vpi_2p", 1, port=7170)]) == 7170
    assert fabric.fabric_port([]) == fabric.DEFAULT_PORT
    with pytest.raises(ValueError, match=r"different ib_fabric ports.*7070: node01; 7170: node02"):
        fabric.fabric_port([host("node01", "cx7_vpi_2p", 1), host("node02", "cx7_vpi_2p", 2, port=7170)])


def test_netfile_cli_output_dir(tmp_path, capsys):
    from simhost.__main__ import main  # pylint: disable=import-outside-toplevel
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps(_two_rail_hosts()))
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "fabric-rail5.net").write_text("stale")
    (etc / "fabric.net").write_text("not ours to remove here")
    args = ["fabric", "netfile", "--hosts", str(path), "--title", "fab", "--output-dir", str(etc)]
    assert main(args) == 0
    res = json.loads(capsys.readouterr().out)
    assert res == {"changed": True, "removed": [str(etc / "fabric-rail5.net")], "rails": [
        {"rail": 0, "port": 7070, "netfile": str(etc / "fabric-rail0.net"), "changed": True},
        {"rail": 1, "port": 7090, "netfile": str(etc / "fabric-rail1.net"), "changed": True}]}
    assert sorted(p.name for p in etc.iterdir()) == ["fabric-rail0.net", "fabric-rail1.net", "fabric.net"]
    assert (etc / "fabric-rail1.net").read_text() == fabric.netfile(json.loads(path.read_text()), "fab", rail=1)
    assert main(args) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["changed"] is False and not res["removed"] and [r["changed"] for r in res["rails"]] == [False, False]
    # one rail only, printed
    assert main(["fabric", "netfile", "--hosts", str(path), "--rail", "1"]) == 0
    assert 'Switch 2 "sw-rail1"' in capsys.readouterr().out
    assert main(["fabric", "netfile", "--hosts", str(path), "--rail", "7"]) == 2
    assert "simhost: error: rail 7: no IB port" in capsys.readouterr().err


def test_env_files(tmp_path):
    exp = simhost.expand(host("node01", "cx7_ib_ndr_8x", 1, server="h1-fab", port=7170)["profile"])
    files = fabric.env_files(exp)
    assert "IBSIM_SERVER_NAME=h1-fab\nIBSIM_SERVER_PORT=7170\n" in files["ibsim.env"]
    assert "LD_PRELOAD=" in files["ibsim.env"]
    guid = exp["devices"][3]["ports"][0]["port_guid"]
    # the port's own file carries its rail's ibsim port (mlx5_3: rail 3, 7170 + 3 x 20)
    assert files[f"opensm/0x{guid}.env"].endswith('SIM_HOST="node01 mlx5_3"\nIBSIM_SERVER_PORT=7230\n')
    guid0 = exp["devices"][0]["ports"][0]["port_guid"]
    assert files[f"opensm/0x{guid0}.env"].endswith('SIM_HOST="node01 mlx5_0"\nIBSIM_SERVER_PORT=7170\n')
    assert len(files) == 9
    etc = tmp_path / "etc"
    (etc / "opensm").mkdir(parents=True)
    (etc / "opensm/0xdeadbeef00000000.env").write_text("stale")
    changed = fabric.write_env_files(exp, etc)
    assert len(changed) == 10 and not (etc / "opensm/0xdeadbeef00000000.env").exists()
    assert fabric.write_env_files(exp, etc) == []
    assert fabric.env_files(simhost.expand(simhost.load("cx7_ib_ndr_8x"))) == {}


# ---------------------------------------------------------------------------------------- launchers
def test_tool_command_maps_ca_and_port_to_sim_host():
    exp = simhost.expand(host("node01", "cx7_ib_ndr_8x", 1)["profile"])
    argv, env = fabric.tool_command("sminfo", ["sminfo"], exp, environ={})
    assert argv == ["/usr/sbin/sminfo"] and env["SIM_HOST"] == "node01 mlx5_0"
    assert env["IBSIM_SERVER_NAME"] == "fab" and env["LD_PRELOAD"].endswith("libumad2sim.so")
    assert env["IBSIM_SERVER_PORT"] == "7070"  # the default device mlx5_0: rail 0
    for args in (["-C", "mlx5_3", "-P", "1"], ["-Cmlx5_3", "-P1"], ["--Ca=mlx5_3", "--Port", "1"]):
        argv, env = fabric.tool_command("smpquery", ["smpquery"] + args + ["portinfo", "2"], exp, environ={})
        assert argv == ["/usr/sbin/smpquery", "portinfo", "2"] and env["SIM_HOST"] == "node01 mlx5_3"
        assert env["IBSIM_SERVER_PORT"] == "7130"  # rail 3's ibsim
    argv, env = fabric.tool_command("sminfo", ["sminfo", "-C", "mlx5_1", "-P", "1"], exp, environ={})
    assert argv == ["/usr/sbin/sminfo"] and (env["SIM_HOST"], env["IBSIM_SERVER_PORT"]) == ("node01 mlx5_1", "7090")
    # a CA that is no fabric device goes to the real tool unchanged (its own "Failed to open" error)
    argv, env = fabric.tool_command("sminfo", ["sminfo", "-C", "mlx5_9"], exp, environ={})
    assert argv == ["/usr/sbin/sminfo", "-C", "mlx5_9"] and "SIM_HOST" not in env
    argv, env = fabric.tool_command("sminfo", ["sminfo", "-C", "mlx5_0"], simhost.expand(simhost.load("cx7_vpi_2p")),
                                    environ={})
    assert argv == ["/usr/sbin/sminfo", "-C", "mlx5_0"] and "LD_PRELOAD" not in env


def test_launchers_exist():
    for tool in fabric.TOOLS:
        path = KIT / "bin" / tool
        assert os.access(path, os.X_OK) and f'exec_tool("{tool}"' in path.read_text()


# ------------------------------------------------------------------------------------ ibsync parsing
def test_parse_real_portinfo_capture():
    info = ibsync.parse_portinfo((FIX / "smpquery-portinfo-sim-01.txt").read_text())
    assert (info["Lid"], info["SMLid"], info["LinkState"], info["PhysLinkState"], info["SMSL"]) == \
        ("1", "1", "Active", "LinkUp", "0")
    assert "IsSM" in info["CapMaskFlags"] and "IsLinkWidth2xSupported" in info["CapabilityMask2Flags"]
    files = ibsync.port_files(info, None, 128)
    assert files == {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "lid": "0x1", "sm_lid": "0x1", "sm_sl": "0",
                     "lid_mask_count": "0"}


def test_parse_real_pkeys_capture():
    table, capacity = ibsync.parse_pkeys((FIX / "smpquery-pkeys-after-default-retry-sim-01.txt").read_text())
    assert capacity == 64 and len(table) == 64 and table[0] == 0xFFFF and not any(table[1:])
    files = ibsync.pkey_files(table, 128)
    assert len(files) == 128 and files["pkeys/0"] == "0xffff" and files["pkeys/127"] == "0x0000"


def test_parse_sminfo_real_capture():
    assert fabric.parse_sminfo((FIX / "sminfo-error-badlid-sim-01.txt").read_text()) is None
    line = "sminfo: sm lid 1 sm guid 0xc42a10300aa0101, activity count 72 priority 10 state 3 SMINFO_MASTER\n"
    assert fabric.parse_sminfo(line) == {"lid": 1, "guid": "0xc42a10300aa0101", "activity": 72, "priority": 10,
                                         "state": 3, "state_name": "SMINFO_MASTER"}


class FakeFabric:
    """Stands in for subprocess.run: answers smpquery with the real captures (or fails: ibsim unreachable)."""

    def __init__(self, pkeys_text, up=True):
        self.portinfo = (FIX / "smpquery-portinfo-sim-01.txt").read_text()
        self.pkeys = pkeys_text
        self.up = up
        self.calls = []

    def __call__(self, argv, **kw):
        env = kw.get("env", {})
        self.calls.append((argv, env.get("SIM_HOST"), env.get("IBSIM_SERVER_PORT")))
        if not self.up:
            return subprocess.CompletedProcess(argv, 255, "", "ibwarn: [1] sim_ctl: ctl failed(read)\n")
        text = self.portinfo if "portinfo" in argv else self.pkeys
        return subprocess.CompletedProcess(argv, 0, text, "")


def test_mirror_into_tree_and_back_when_unreachable(tmp_path):
    root = tmp_path / "sys"
    simhost.build_tree(host("node02", "cx7_vpi_2p", 2)["profile"], root)
    pk = (FIX / "smpquery-pkeys-after-default-retry-sim-01.txt").read_text().replace(
        "   0: 0xffff 0x0000", "   0: 0xffff 0x8002")
    fake = FakeFabric(pk)
    syncer = ibsync.Syncer(root, runner=fake)
    changed = syncer.step()
    pdir = root / "class/infiniband/mlx5_0/ports/1"
    assert (pdir / "state").read_text() == "4: ACTIVE\n" and (pdir / "lid").read_text() == "0x1\n"
    assert (pdir / "pkeys/1").read_text() == "0x8002\n" and (pdir / "pkeys/2").read_text() == "0x0000\n"
    assert "class/net/ibp12s0f0/carrier" in changed
    assert (root / "class/net/ibp12s0f0/operstate").read_text() == "up\n"
    assert {c[1] for c in fake.calls} == {"node02 mlx5_0"}  # the Ethernet port mlx5_1 is not queried
    assert syncer.step() == []  # written only when changed
    facts = gather_rdma_sysfs(str(root))["devices"]["mlx5_0"]["ports"]["1"]
    assert facts["lid"] == 1 and facts["pkeys"] == ["0xffff", "0x8002"] and facts["pkey_indexes"]["0x8002"] == 1
    state = json.loads((root / ".simhost/state/ibsync.json").read_text())
    assert state["ports"]["mlx5_0/1"]["reachable"] is True
    fake.up = False
    for _ in range(ibsync.FAIL_LIMIT - 1):
        assert syncer.step() == []
    syncer.step()
    assert (pdir / "state").read_text() == "2: INIT\n" and (pdir / "lid").read_text() == "0x0\n"
    assert (pdir / "pkeys/1").read_text() == "0x0000\n"
    assert (root / "class/net/ibp12s0f0/carrier").read_text() == "0\n"


def test_ibsync_queries_each_port_at_its_rails_ibsim(tmp_path):
    root = tmp_path / "sys"
    simhost.build_tree(host("node01", "cx7_ib_ndr_2x_gpu", 1, port=7170)["profile"], root)
    fake = FakeFabric((FIX / "smpquery-pkeys-after-default-retry-sim-01.txt").read_text())
    ibsync.Syncer(root, runner=fake).step()
    assert {(c[0][-3], c[1], c[2]) for c in fake.calls} == {
        ("portinfo", "node01 mlx5_0", "7170"), ("pkeys", "node01 mlx5_0", "7170"),
        ("portinfo", "node01 mlx5_1", "7190"), ("pkeys", "node01 mlx5_1", "7190")}
    for dev in ("mlx5_0", "mlx5_1"):
        assert (root / f"class/infiniband/{dev}/ports/1/state").read_text() == "4: ACTIVE\n"


def test_unplugged_port_is_left_down(tmp_path):
    root = tmp_path / "sys"
    simhost.build_tree(host("node02", "cx7_vpi_2p", 2)["profile"], root)
    simhost.firmware.set_cable(root, "mlx5_0", 1, plugged=False)
    fake = FakeFabric((FIX / "smpquery-pkeys-after-default-retry-sim-01.txt").read_text())
    ibsync.Syncer(root, runner=fake).step()
    assert (root / "class/infiniband/mlx5_0/ports/1/state").read_text() == "1: DOWN\n" and not fake.calls


def test_watch_opensm_restarts_an_orphaned_sm(tmp_path, monkeypatch):
    root = tmp_path / "sys"
    exp = simhost.build_tree(host("node01", "cx7_vpi_2p", 1)["profile"], root)
    unit = f"opensm@0x{exp['devices'][0]['ports'][0]['port_guid']}.service"
    calls = []

    def runner(argv, **_kw):
        calls.append(argv)
        if argv[0] == "systemctl":
            return subprocess.CompletedProcess(argv, 0 if argv[1] == "is-active" else 0, "", "")
        rc = 255 if argv[0].endswith("sminfo") else 0
        return subprocess.CompletedProcess(argv, rc, "" if rc else (FIX / "smpquery-portinfo-sim-01.txt").read_text(), "")

    monkeypatch.setattr(ibsync, "SM_CHECK_EVERY", 0.0)
    syncer = ibsync.Syncer(root, runner=runner, watch_opensm=True)
    for _ in range(ibsync.SM_FAIL_LIMIT):
        syncer.step()
    assert ["systemctl", "restart", "--no-block", unit] in calls


def test_watch_opensm_asks_each_sm_at_its_rails_ibsim(tmp_path, monkeypatch):
    root = tmp_path / "sys"
    exp = simhost.build_tree(host("node01", "cx7_ib_ndr_2x_gpu", 1)["profile"], root)
    units = [f"opensm@0x{d['ports'][0]['port_guid']}.service" for d in exp["devices"] if d["ports"][0].get("fabric")]
    asked = []

    def runner(argv, **kw):
        if argv[0] == "systemctl":
            return subprocess.CompletedProcess(argv, 0, "", "")
        if argv[0].endswith("sminfo"):
            asked.append((kw["env"]["SIM_HOST"], kw["env"]["IBSIM_SERVER_PORT"]))
            return subprocess.CompletedProcess(argv, 0, "sminfo: sm lid 1 sm guid 0x1, activity count 1 priority 14 "
                                               "state 3 SMINFO_MASTER\n", "")
        return subprocess.CompletedProcess(argv, 0, (FIX / "smpquery-portinfo-sim-01.txt").read_text(), "")

    monkeypatch.setattr(ibsync, "SM_CHECK_EVERY", 0.0)
    ibsync.Syncer(root, runner=runner, watch_opensm=True).step()
    assert len(units) == 2 and asked == [("node01 mlx5_0", "7070"), ("node01 mlx5_1", "7090")]


# ------------------------------------------------------------------- real ibsim + opensm (no Docker)
UMAD2SIM = fabric.umad2sim_lib()
HAVE_SIM = all(os.access(p, os.X_OK) for p in ("/usr/bin/ibsim", "/usr/sbin/opensm", "/usr/sbin/sminfo",
                                               "/usr/sbin/smpquery")) and os.path.exists(UMAD2SIM)


def _free_base_port() -> int:
    """A UDP port P with P..P+11 free (ibsim binds the server port and one per client)."""
    for base in range(27070, 40000, 97):
        socks = []
        try:
            for p in range(base, base + fabric.IBSIM_MAX_CLIENTS + 2):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks.append(s)
                s.bind(("0.0.0.0", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    pytest.skip("no free UDP port range for ibsim")
    return 0


@pytest.mark.skipif(not HAVE_SIM, reason="needs Debian's ibsim-utils, libumad2sim0, opensm and infiniband-diags")
def test_real_ibsim_and_opensm(tmp_path):  # noqa: C901
    port = _free_base_port()
    hosts = [host(f"node0{i}", "cx7_vpi_2p", i, server="127.0.0.1", port=port) for i in (1, 2, 3)]
    net = tmp_path / "fabric.net"
    net.write_text(fabric.netfile(hosts))
    exps = [simhost.expand(h["profile"]) for h in hosts]
    guids = [e["devices"][0]["ports"][0]["port_guid"] for e in exps]
    procs = []
    try:
        procs.append(subprocess.Popen(["/usr/bin/ibsim", "-r", "-s", "-n", "-l", str(port), str(net)],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        time.sleep(0.5)
        for i, prio in ((0, 10), (1, 5)):
            conf = tmp_path / f"osm{i}.conf"
            (tmp_path / f"cache{i}").mkdir()
            conf.write_text(f"guid 0x{guids[i]}\nsm_priority {prio}\nlog_file {tmp_path}/osm{i}.log\n"
                            f"partition_config_file {tmp_path}/partitions.conf\n")
            (tmp_path / "partitions.conf").write_text(
                "Default=0x7fff, ipoib, defmember=full : ALL=full ;\ncompute=0x8002, ipoib, mtu=5 : ALL=full ;\n")
            env = dict(os.environ, **fabric.server_env(exps[i]), SIM_HOST=exps[i]["devices"][0]["node_desc"],
                       OSM_CACHE_DIR=str(tmp_path / f"cache{i}"))
            procs.append(subprocess.Popen(["/usr/sbin/opensm", "-F", str(conf)], env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        # sminfo from the third node, through the launcher's argv/env mapping
        root = tmp_path / "sys3"
        exp3 = simhost.build_tree(hosts[2]["profile"], root)
        argv, env = fabric.tool_command("sminfo", ["sminfo", "-C", "mlx5_0", "-P", "1"], exp3)
        info = None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=10, check=False)
            info = fabric.parse_sminfo(res.stdout)
            if info and info["state_name"] == "SMINFO_MASTER" and info["guid"] == f"0x{int(guids[0], 16):x}":
                break
            time.sleep(0.3)
        assert info and info["state_name"] == "SMINFO_MASTER" and info["priority"] == 10
        # the same parser on the simulated output as on the real capture; ibsync mirrors it into the tree
        argv, env = fabric.tool_command("smpquery", ["smpquery", "-D", "portinfo", "0", "1"], exp3)
        res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=10, check=False)
        assert ibsync.parse_portinfo(res.stdout)["LinkState"] == "Active"
        ibsync.Syncer(root).step()
        pdir = root / "class/infiniband/mlx5_0/ports/1"
        assert (pdir / "state").read_text() == "4: ACTIVE\n"
        assert int((pdir / "lid").read_text(), 16) > 0 and (pdir / "sm_lid").read_text() == f"0x{info['lid']:x}\n"
        assert (pdir / "pkeys/1").read_text() == "0x8002\n"
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()



def test_units_and_drop_in():
    files = KIT / "files"
    drop_in = (files / "opensm-simhost.conf").read_text()
    assert "EnvironmentFile=/etc/simhost/ibsim.env\n" in drop_in
    assert "EnvironmentFile=/etc/simhost/opensm/%i.env\n" in drop_in
    assert "\nConditionPathExists=\n" in drop_in  # resets Debian's /sys/class/infiniband_mad condition
    # the port's file (its rail's IBSIM_SERVER_PORT) comes after ibsim.env, so it wins
    assert drop_in.index("EnvironmentFile=/etc/simhost/ibsim.env") < \
        drop_in.index("EnvironmentFile=/etc/simhost/opensm/%i.env")
    unit = (files / "simhost-ibsim@.service").read_text()
    assert "\nEnvironmentFile=/etc/simhost/ibsim-rail%i.env\n" in unit and "\nRestart=always\n" in unit
    assert "\nExecStart=/usr/bin/ibsim -r -s -n -l ${SIMHOST_IBSIM_PORT} /etc/simhost/fabric-rail%i.net\n" in unit
    assert not (files / "simhost-ibsim.service").exists()
    assert "simhost.ibsync run --root /run/simhost/sys --watch-opensm" in (files / "simhost-ibsync.service").read_text()
    install = (KIT / "install.yml").read_text()
    for name in ("opensm-simhost.conf", "simhost-ibsim@.service", "simhost-ibsync.service",
                 "/opensm@.service.d/simhost.conf", "'ibsim': {'hosts':", "'dir': '/etc/simhost'"):
        assert name in install


def test_the_sync_asks_a_quiet_fabric_less_often_and_a_changing_one_every_second():
    """1 s after a change, then 2 and 4 s while nothing changes; a change brings it back to 1 s."""
    waits, wait = [], 1.0
    for changed in [True, False, False, False, False, True, False]:
        wait = ibsync.next_interval(wait, changed, 1.0)
        waits.append(wait)
    assert waits == [1.0, 2.0, 4.0, ibsync.IDLE_INTERVAL, ibsync.IDLE_INTERVAL, 1.0, 2.0]
    assert ibsync.next_interval(0.5, False, 5.0) == 5.0  # never below the interval asked for
