"""The simulated ConnectX host kit: profiles, sysfs tree layout, and fake tools checked against real captures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rdma_tools  # tests/tools: the parsers of the vendor tools' text, used only by tests
from fixtures_path import real_fixtures

KIT = Path(__file__).resolve().parents[2] / "simhost"
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import profile as sp  # noqa: E402  pylint: disable=wrong-import-position

CAPTURES = real_fixtures() / "rdma-outputs"
PROFILES = sp.list_profiles()
REQUIRED = {"cx7_ib_ndr_8x", "cx7_roce_400g_2x", "mixed_ib_roce_down", "no_rdma"}


def run_tool(root: Path, tool: str, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "SIMHOST_SYSFS_ROOT": str(root), "LC_ALL": "C", **(env_extra or {})}
    return subprocess.run([sys.executable, str(KIT / "bin" / tool), *args], capture_output=True, text=True, env=env,
                          check=False, timeout=60)


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """Every profile built for host 0 and host 1."""
    out = {}
    for name in PROFILES:
        for host in (0, 1):
            root = tmp_path_factory.mktemp(f"{name}-{host}") / "sys"
            out[(name, host)] = (root, simhost.build_tree(simhost.load(name), root, host_index=host))
    return out


# ------------------------------------------------------------------------------------------- profiles
def test_required_profiles_exist():
    assert REQUIRED <= set(PROFILES)


def test_ib_profile_is_eight_active_ndr_ports(trees):
    exp = trees[("cx7_ib_ndr_8x", 0)][1]
    ports = [p for d in exp["devices"] for p in d["ports"]]
    assert len(exp["devices"]) == 8 and len(ports) == 8
    assert {(p["link_layer"], p["state"], p["phys_state"], p["rate"]) for p in ports} == {
        ("InfiniBand", "ACTIVE", "LinkUp", "400 Gb/sec (4X NDR)")}
    assert all(p["lid"] and p["sm_lid"] == 1 and p["netdev"].startswith("ibp") for p in ports)


def test_roce_profile_gid_tables(trees):
    exp = trees[("cx7_roce_400g_2x", 0)][1]
    for dev in exp["devices"]:
        (port,) = dev["ports"]
        assert port["link_layer"] == "Ethernet" and port["ipv4"]
        types = {i: g["type"] for i, g in port["gids"].items()}
        assert types == {0: "IB/RoCE v1", 1: "RoCE v2", 2: "IB/RoCE v1", 3: "RoCE v2"}
    moved = trees[("cx7_roce_400g_2x_ipv6", 0)][1]["devices"][0]["ports"][0]["gids"]
    assert moved[5]["type"] == "RoCE v2" and moved[5]["gid"].startswith("0000:0000:0000:0000:0000:ffff:")


def test_mixed_profile_has_ib_roce_and_a_polling_port(trees):
    ports = [p for d in trees[("mixed_ib_roce_down", 0)][1]["devices"] for p in d["ports"]]
    assert sorted((p["link_layer"], p["state"], p["phys_state"]) for p in ports) == [
        ("Ethernet", "ACTIVE", "LinkUp"), ("InfiniBand", "ACTIVE", "LinkUp"), ("InfiniBand", "DOWN", "Polling")]


@pytest.mark.parametrize("name", sorted(REQUIRED - {"no_rdma"}))
def test_two_hosts_of_one_profile_share_no_guid_lid_mac_or_ipv4(trees, name):
    def ids(exp):
        out = set()
        for d in exp["devices"]:
            out |= {d["node_guid"], d["sys_image_guid"]}
            for p in d["ports"]:
                out |= {p["mac"], p["port_guid"], f"lid{p['lid']}" if p["lid"] else None, p["ipv4"]}
        return out - {None}
    assert not ids(trees[(name, 0)][1]) & ids(trees[(name, 1)][1])


@pytest.mark.parametrize("mutate, field", [
    (lambda p: p["devices"][0]["ports"][0].update(link_layer="Infiniband"), "devices[0].ports[0].link_layer"),
    (lambda p: p["devices"][0]["ports"][0].update(rate="400G"), "devices[0].ports[0].rate"),
    (lambda p: p["devices"][1].update(pci=p["devices"][0]["pci"]), "devices[1].pci"),
    (lambda p: p["devices"][0].update(colour="red"), "devices[0]: unknown field(s) colour"),
    (lambda p: p["devices"][0]["ports"][0].update(lid=0), "devices[0].ports[0].lid"),
    (lambda p: p["stack"].update(provider="ofed"), "stack.provider"),
])
def test_invalid_profile_error_names_the_field(mutate, field):
    prof = simhost.load("cx7_ib_ndr_8x")
    mutate(prof)
    with pytest.raises(simhost.ProfileError, match=re.escape(field)):
        simhost.expand(prof)


def test_cli_builds_from_json_copy_and_rejects_bad_profile(tmp_path):
    prof = simhost.load("cx7_roce_400g_2x")
    (tmp_path / "p.json").write_text(json.dumps({**prof, "host_index": 3}))
    env = {**os.environ, "PYTHONPATH": str(KIT)}
    ok = subprocess.run([sys.executable, "-m", "simhost", "build", "--profile", str(tmp_path / "p.json"),
                         "--root", str(tmp_path / "sys")], capture_output=True, text=True, env=env, check=False)
    assert ok.returncode == 0, ok.stderr
    assert json.loads((tmp_path / "sys/.simhost/profile.json").read_text())["host_index"] == 3
    (tmp_path / "bad.json").write_text(json.dumps({**prof, "devices": [{"name": "mlx5_0"}]}))
    bad = subprocess.run([sys.executable, "-m", "simhost", "check", "--profile", str(tmp_path / "bad.json")],
                         capture_output=True, text=True, env=env, check=False)
    assert bad.returncode == 2 and "devices[0]: missing required field 'pci'" in bad.stderr


def test_rebuild_resets_runtime_state_and_refuses_foreign_dirs(tmp_path):
    root = tmp_path / "sys"
    simhost.build_tree(simhost.load("cx7_roce_400g_2x"), root)
    (root / ".simhost/state/mlnx_qos.json").write_text("{}")
    (root / "class/net/enp12s0np0/mtu").write_text("1500\n")
    simhost.build_tree(simhost.load("cx7_roce_400g_2x"), root)
    assert not (root / ".simhost/state/mlnx_qos.json").exists()
    assert (root / "class/net/enp12s0np0/mtu").read_text() == "9000\n"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep").write_text("x")
    with pytest.raises(ValueError, match="not made by simhost"):
        simhost.build_tree(simhost.load("no_rdma"), foreign)
    assert (foreign / "keep").exists()


# --------------------------------------------------------------------------------------------- layout
def _dump_files():
    """{device: {relative path: value}} from the real `grep -H .` dump."""
    out: dict = {}
    for line in (CAPTURES / "sysfs-class-infiniband-01.txt").read_text().splitlines():
        path, value = line.split(":", 1)
        dev, rel = re.match(r"^/sys/class/infiniband/([^/]+)/(.+)$", path).groups()
        out.setdefault(dev, {})[rel] = value
    return out


@pytest.mark.parametrize("real_dev, profile_name, link_layer", [
    ("mlx5_0", "cx7_ib_ndr_8x", "InfiniBand"), ("mlx5_bond_0", "cx7_roce_400g_2x", "Ethernet")])
def test_tree_has_every_file_of_the_real_dump_in_the_same_format(trees, real_dev, profile_name, link_layer):
    real = _dump_files()[real_dev]
    root = trees[(profile_name, 0)][0]
    dev = root / "class/infiniband/mlx5_0"
    for rel, value in real.items():
        ours = (dev / rel).read_text()
        assert ours.endswith("\n") and "\n" not in ours[:-1], rel
        ours = ours[:-1]
        if rel.endswith(("/state", "/phys_state")):
            assert re.fullmatch(r"\d: [A-Za-z_ ]+", ours) and re.fullmatch(r"\d: [A-Za-z_ ]+", value)
        elif rel.endswith("/rate"):
            assert re.fullmatch(r"\d+ Gb/sec \(\dX [A-Z]+\)", ours)
        elif "counters/" in rel:
            assert ours.isdigit()
        elif rel.endswith("link_layer"):
            assert ours == value == link_layer
    assert (dev / "ports/1/state").read_text() == "4: ACTIVE\n"
    assert (dev / "ports/1/phys_state").read_text() == "5: LinkUp\n"
    assert (dev / "node_type").read_text() == "1: CA\n"
    assert re.fullmatch(r"([0-9a-f]{4}:){3}[0-9a-f]{4}\n", (dev / "node_guid").read_text())


def test_class_links_are_relative_and_reach_the_pci_function(trees):
    root = trees[("cx7_ib_ndr_8x", 0)][0]
    link = root / "class/infiniband/mlx5_0"
    assert os.readlink(link).startswith("../../devices/pci0000:")
    fn = (link / "device").resolve()
    assert fn.name == "0000:18:00.0" and fn.parent.name == "0000:17:01.0"
    assert os.readlink(link / "device") == "../../../0000:18:00.0"
    assert sorted(os.listdir(fn / "net")) == ["ibp24s0"]
    net = root / "class/net/ibp24s0"
    assert os.readlink(net).startswith("../../devices/") and (net / "device").resolve() == fn
    assert (net / "type").read_text() == "32\n" and (net / "operstate").read_text() == "up\n"
    assert (net / "address").read_text().startswith("00:00:10:87:fe:80:00:00:00:00:00:00:a0:88:c2:03:00:")
    assert (root / "bus/pci/devices/0000:18:00.0").resolve() == fn


def test_gid_table_is_full_and_empty_entries_have_no_attrs(trees):
    port = trees[("cx7_roce_400g_2x", 0)][0] / "class/infiniband/mlx5_0/ports/1"
    assert len(os.listdir(port / "gids")) == 256
    assert (port / "gids/200").read_text() == "0000:0000:0000:0000:0000:0000:0000:0000\n"
    assert sorted(os.listdir(port / "gid_attrs/types"), key=int) == ["0", "1", "2", "3"]
    assert (port / "gid_attrs/types/3").read_text() == "RoCE v2\n"
    assert (port / "gid_attrs/ndevs/3").read_text() == "enp12s0np0\n"
    ib_port = trees[("cx7_ib_ndr_8x", 0)][0] / "class/infiniband/mlx5_0/ports/1"
    assert os.listdir(ib_port / "gid_attrs/ndevs") == [] and (ib_port / "gid_attrs/types/0").read_text() == "IB/RoCE v1\n"
    assert (ib_port / "lid").read_text() == "0x1a\n" and (ib_port / "sm_lid").read_text() == "0x1\n"


def test_modules_and_configfs_follow_the_stack(trees):
    ib = trees[("cx7_ib_ndr_8x", 0)][0]
    assert (ib / "module/mlx5_core/initstate").read_text() == "live\n"
    assert not (ib / "module/mlx5_core/version").exists()            # inbox modules carry no version
    assert (ib / "kernel/config/rdma_cm").is_dir() and not os.listdir(ib / "kernel/config/rdma_cm")
    mixed = trees[("mixed_ib_roce_down", 0)][0]
    assert (mixed / "module/mlx5_core/version").read_text() == "24.10-1.1.4.0\n"
    none = trees[("no_rdma", 0)][0]
    assert not (none / "class/infiniband").exists() and not (none / "module").exists()
    assert sorted(os.listdir(none / "class/net")) == ["eth0", "lo"]


# ------------------------------------------------------------------------------ fake tools vs profile
@pytest.mark.parametrize("name", sorted(set(PROFILES) - {"no_rdma"}))
@pytest.mark.parametrize("host", [0, 1])
def test_fake_tools_report_what_the_profile_declares(trees, name, host):
    root, exp = trees[(name, host)]
    devinfo = run_tool(root, "ibv_devinfo", "-v")
    ibstat = run_tool(root, "ibstat")
    gids = run_tool(root, "show_gids")
    i2n = run_tool(root, "ibdev2netdev", "-v")
    for res in (devinfo, ibstat, gids, i2n):
        assert res.returncode == 0 and res.stderr == "", res.stderr
    dv = rdma_tools.parse_ibv_devinfo(devinfo.stdout)["devices"]
    st = rdma_tools.parse_ibstat(ibstat.stdout)["devices"]
    sg = {(g["device"], g["port"], g["index"]): g for g in rdma_tools.parse_show_gids(gids.stdout)["gids"]}
    nd = {(r["device"], r["port"]): r for r in rdma_tools.parse_ibdev2netdev(i2n.stdout)}
    assert set(dv) == set(st) == {d["name"] for d in exp["devices"]}
    for dev in exp["devices"]:
        guid = dev["node_guid"]
        assert dv[dev["name"]]["node_guid"] == ":".join(guid[i:i + 4] for i in range(0, 16, 4))
        assert dv[dev["name"]]["fw_ver"] == st[dev["name"]]["fw_ver"] == dev["fw_ver"]
        assert dv[dev["name"]]["vendor_part_id"] == dev["pci_device_id"]
        assert st[dev["name"]]["node_guid"] == "0x" + guid and st[dev["name"]]["ca_type"] == dev["hca_type"]
        for p in dev["ports"]:
            dp, sp_ = dv[dev["name"]]["ports"][p["port"]], st[dev["name"]]["ports"][p["port"]]
            assert dp["state"] == "PORT_" + p["state"] and sp_["state"] == p["state"].capitalize()
            assert sp_["phys_state"] == p["phys_state"] and dp["link_layer"] == sp_["link_layer"] == p["link_layer"]
            assert dp["port_lid"] == sp_["base_lid"] == p["lid"] and dp["sm_lid"] == sp_["sm_lid"] == p["sm_lid"]
            assert sp_["rate"] == float(p["rate"].split()[0])
            assert dp["active_width"] == p["rate"].split("(")[1].split()[0]
            declared = {i: g for i, g in p["gids"].items()}
            assert {g["index"]: g["gid"] for g in dp["gids"]} == {i: g["gid"] for i, g in declared.items()}
            # ibv_devinfo prints the GID type only on Ethernet ports (print_formated_gid)
            assert {g["index"]: g["type"] for g in dp["gids"]} == {
                i: (g["type"] if p["link_layer"] == "Ethernet" else None) for i, g in declared.items()}
            for i, g in declared.items():
                row = sg[(dev["name"], p["port"], i)]
                assert row["gid"] == g["gid"] and row["type"] == g["type"] and row["netdev"] == g["ndev"]
                if g["type"] == "RoCE v2" and row["ipv4"]:
                    assert row["ipv4"] == p["ipv4"].split("/")[0]
            row = nd[(dev["name"], p["port"])]
            assert row["netdev"] == p["netdev"] and row["pci_address"] == dev["pci"]
            assert row["link_state"] == ("Up" if p["state"] == "ACTIVE" else "Down")
            assert row["port_state"] == p["state"] and row["fw_ver"] == dev["fw_ver"]
            assert row["part_number"] == dev["part_number"]


def test_roce_v2_ipv4_gid_index_follows_the_profile(trees):
    root, _exp = trees[("cx7_roce_400g_2x_ipv6", 0)]
    gids = rdma_tools.parse_ibv_devinfo(run_tool(root, "ibv_devinfo", "-v", "-d", "mlx5_1").stdout)["devices"]["mlx5_1"]["ports"][1]["gids"]
    v2_ipv4 = [g["index"] for g in gids if g["type"] == "RoCE v2" and g["ipv4"]]
    assert v2_ipv4 == [5]


def test_ofed_info_only_answers_on_ofed_stacks(trees):
    mixed = run_tool(trees[("mixed_ib_roce_down", 0)][0], "ofed_info", "-s")
    assert mixed.returncode == 0 and mixed.stdout == "MLNX_OFED_LINUX-24.10-1.1.4.0:\n"
    from ansible_collections.hpcnet.rdma.plugins.module_utils.stack.rdma_stack import parse_ofed_info_s

    assert parse_ofed_info_s(mixed.stdout) == {"provider": "mlnx_ofed", "version": "24.10-1.1.4.0"}
    inbox = run_tool(trees[("cx7_ib_ndr_8x", 0)][0], "ofed_info", "-s")
    assert inbox.returncode != 0 and inbox.stdout == ""


def test_doca_stack_override_prints_the_doca_form(tmp_path):
    prof = {**simhost.load("cx7_roce_400g_2x"), "stack": {"provider": "doca", "version": "24.07-0.3.5.0.110"}}
    simhost.build_tree(prof, tmp_path / "sys")
    assert run_tool(tmp_path / "sys", "ofed_info", "-s").stdout == "OFED-internal-24.07-0.3.5.0.110:\n"


def test_tools_on_a_host_without_rdma(trees):
    root = trees[("no_rdma", 0)][0]
    dev = run_tool(root, "ibv_devinfo")
    assert dev.returncode == 255 and dev.stdout == "" and "Failed to get IB devices list" in dev.stderr
    stat = run_tool(root, "ibstat")
    assert stat.returncode == 255 and re.match(r"ibpanic: \[\d+\] main: can't list IB device names", stat.stderr)
    gids = run_tool(root, "show_gids")
    assert gids.returncode == 0 and gids.stdout.endswith("n_gids_found=0\n")
    assert run_tool(root, "ibdev2netdev").returncode == 255


@pytest.mark.parametrize("tool, args, rc, stream, text", [
    ("ibv_devinfo", ["-z"], 255, "stderr", "ibv_devinfo: invalid option -- 'z'"),
    ("ibv_devinfo", ["--bogus"], 255, "stderr", "unrecognized option '--bogus'"),
    ("ibv_devinfo", ["-d", "mlx5_9"], 255, "stderr", "IB device 'mlx5_9' wasn't found"),
    ("ibv_devinfo", ["-i", "0"], 1, "stdout", "Usage: ibv_devinfo"),
    ("ibv_devinfo", ["-d", "mlx5_0", "-i", "2"], 4, "stderr", "Invalid port requested for device"),
    ("ibstat", ["-x"], 2, "stderr", "Usage: ibstat [options] <ca_name> [portnum]"),
    ("ibstat", ["mlx9_0"], 255, "stderr", "'mlx9_0' IB device can't be found"),
    ("ibdev2netdev", ["-x"], 255, "stdout", "-v, --verbose"),
    ("ibdev2netdev", ["-h"], 0, "stdout", "-h, --help"),
])
def test_bad_arguments_fail_like_the_real_tools(trees, tool, args, rc, stream, text):
    res = run_tool(trees[("mixed_ib_roce_down", 0)][0], tool, *args)
    assert res.returncode == rc
    assert text in getattr(res, stream)


def test_single_device_and_port_forms(trees):
    root = trees[("mixed_ib_roce_down", 0)][0]
    one = run_tool(root, "ibstat", "mlx5_1", "1").stdout.splitlines()
    assert one[0] == "CA: 'mlx5_1'" and one[1] == "Port 1:" and one[-1] == "Link layer: Ethernet"
    assert run_tool(root, "ibstat", "-l").stdout == "mlx5_0\nmlx5_1\nmlx5_2\n"
    assert run_tool(root, "ibv_devinfo", "-l").stdout == "3 HCAs found:\n\tmlx5_0\n\tmlx5_1\n\tmlx5_2\n\n"
    only = rdma_tools.parse_ibv_devinfo(run_tool(root, "ibv_devinfo", "-d", "mlx5_2", "-i", "1").stdout)["devices"]
    assert list(only) == ["mlx5_2"] and only["mlx5_2"]["ports"][1]["state"] == "PORT_DOWN"
    gids = run_tool(root, "show_gids", "mlx5_1").stdout
    assert "mlx5_0" not in gids and gids.endswith("n_gids_found=4\n")


def test_show_gids_lists_in_ls_order_like_the_script(tmp_path):
    prof = simhost.load("cx7_roce_400g_2x")
    prof["devices"][0]["ports"][0]["gids"] = [
        {"index": 0, "source": "link_local", "type": "IB/RoCE v1"}, {"index": 1, "source": "link_local", "type": "RoCE v2"},
        {"index": 10, "source": "ipv4", "type": "IB/RoCE v1"}, {"index": 2, "source": "ipv4", "type": "RoCE v2"}]
    simhost.build_tree(prof, tmp_path / "sys")
    rows = rdma_tools.parse_show_gids(run_tool(tmp_path / "sys", "show_gids", "mlx5_0").stdout)["gids"]
    assert [r["index"] for r in rows] == [0, 1, 10, 2]


# ---------------------------------------------------------------------------------- line grammar checks
def _shape(line: str) -> tuple:
    """(key, column where the value starts) of a key line, tabs expanded at 8 as a terminal shows them."""
    expanded = line.expandtabs(8)
    m = re.match(r"^(\s*)([A-Za-z_][\w ]*?:)(\s+)(\S.*)$", expanded)
    if not m:
        return ()
    return (m.group(2), len(m.group(1)), len(m.group(1)) + len(m.group(2)) + len(m.group(3)))


def _shapes(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        s = _shape(line)
        if s and not s[0].startswith("GID"):
            out.setdefault(s[0], s)
    return out


@pytest.mark.parametrize("capture, args", [
    ("ibv_devinfo-01.txt", []), ("ibv_devinfo-03.txt", []), ("ibv_devinfo-v-01.txt", ["-v"]),
    ("ibv_devinfo-v-02.txt", ["-v"]), ("ibv_devinfo-v-03.txt", ["-v"])])
def test_ibv_devinfo_keys_sit_at_the_same_columns_as_the_real_capture(trees, capture, args):
    ours = _shapes(run_tool(trees[("cx7_roce_400g_2x", 0)][0], "ibv_devinfo", *args).stdout)
    real = _shapes((CAPTURES / capture).read_text())
    common = set(real) & set(ours)
    assert len(common) >= min(len(real), 8)
    for key in common:
        if key in ("completion timestamp_mask:",):
            continue
        assert ours[key] == real[key], key


def test_ibv_devinfo_uses_tabs_like_the_real_tab_capture(trees):
    ours = run_tool(trees[("cx7_ib_ndr_8x", 0)][0], "ibv_devinfo", "-v").stdout.splitlines()
    real = (CAPTURES / "ibv_devinfo-v-02.txt").read_text().splitlines()
    def raw(lines):
        return {re.sub(r"(:\t+).*$", r"\1", line) for line in lines if re.match(r"^\t\w+:\t", line)}
    assert raw(real) <= raw(ours)
    assert "hca_id:\tmlx5_0" in ours
    assert "\t\tport:\t1" in ours and "\t\t\tstate:\t\t\tPORT_ACTIVE (4)" in ours
    assert "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:a088:c203:001f:2c00" in ours


def test_ibstat_lines_match_the_real_tab_capture_line_for_line(trees):
    ours = run_tool(trees[("cx7_roce_400g_2x", 0)][0], "ibstat").stdout.splitlines()
    real = (CAPTURES / "ibstat-02.txt").read_text().splitlines()
    def shape(lines):
        return [re.sub(r"^(\t*[A-Za-z ]+:?).*$", r"\1", re.sub(r"^CA '.*'$", "CA ''", line)) for line in lines]
    assert shape(ours) == shape(real)[:len(ours)]


def test_show_gids_lines_match_the_real_tab_capture(trees):
    ours = run_tool(trees[("cx7_roce_400g_2x", 0)][0], "show_gids").stdout.splitlines()
    real = (CAPTURES / "show_gids-02.txt").read_text().splitlines()
    assert ours[:2] == real[:2]
    def shape(line):
        return re.sub(r"[^\t]+", "x", line.replace("  \t", "<pad>\t"))
    assert [shape(line) for line in ours[2:6]] == [shape(line) for line in real[2:6]]
    assert re.fullmatch(r"n_gids_found=\d+", ours[-1])


def test_ibdev2netdev_lines_match_the_real_grammar(trees):
    root = trees[("mixed_ib_roce_down", 0)][0]
    plain = run_tool(root, "ibdev2netdev").stdout.splitlines()
    assert plain[0] == "mlx5_0 port 1 ==> ibp24s0 (Up)" and plain[2].endswith("(Down)")
    verbose = run_tool(root, "ibdev2netdev", "-v").stdout.splitlines()
    real = (CAPTURES / "ibdev2netdev-v-02.txt").read_text().splitlines()
    pat = re.compile(r"^\S+ \S+ \(MT\d+ - \S+\) .+ fw [\d.]+ port \d+ \((ACTIVE|DOWN  )\) ==> \S+ \((Up|Down)\)$")
    assert all(pat.match(line) for line in real)
    assert all(pat.match(line) for line in verbose), verbose
    assert "(DOWN  ) ==> ibp65s0 (Down)" in verbose[2]



def test_kit_files_are_laid_out_once_and_removed_where_asked(tmp_path, monkeypatch, capsys):
    """install.yml lays out a host's files in one call; a second call changes nothing."""
    from simhost import kitfiles  # tests/simhost, on sys.path via tests/unit/conftest.py
    src, dest = tmp_path / "bin", tmp_path / "local"
    src.mkdir()
    (dest / "sub").mkdir(parents=True)
    (dest / "mlnx_qos").symlink_to(src / "mlnx_qos")
    (dest / "ibstat").write_text("a distribution's ibstat\n")
    (dest / "unit.service").write_text("old\n")
    spec = {"write": {str(dest / "unit.service"): {"content": "[Unit]\n", "mode": "0644"},
                      str(dest / "sub" / "key"): {"content": "secret\n", "mode": "0600"}},
            "link": {str(dest / "ibstat"): str(src / "ibstat"), str(dest / "sminfo"): str(src / "sminfo")},
            "absent": [str(dest / "mlnx_qos"), str(dest / "never-there")]}
    first = kitfiles.apply(spec)
    assert first["changed"] and first["removed"] == [str(dest / "mlnx_qos")]
    assert first["written"] == list(spec["write"]) and first["linked"] == list(spec["link"])
    assert (dest / "unit.service").read_text() == "[Unit]\n" and os.readlink(dest / "ibstat") == str(src / "ibstat")
    assert ((dest / "sub" / "key").stat().st_mode & 0o777) == 0o600
    assert kitfiles.apply(spec) == {"changed": False, "written": [], "linked": [], "removed": []}
    (dest / "sub" / "key").chmod(0o644)
    assert kitfiles.apply(spec)["written"] == [str(dest / "sub" / "key")]
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO('{"copy": {}}'))
    assert kitfiles.main([]) == 2 and "allowed: write, link, absent" in capsys.readouterr().err


def test_a_local_simulated_host_runs_modules_with_its_own_tree_nv_state_and_firmware_tool(tmp_path):
    from simhost import localhost, profile  # pylint: disable=import-outside-toplevel
    pythons = [localhost.create(profile.load("cx7_roce_400g_2x"), tmp_path / name, 1, sys.executable)
               for name in ("a", "b")]
    probe = ("import os, shutil; print(os.environ['SIMHOST_SYSFS_ROOT'], os.environ['SIMHOST_PERSIST_DIR'],"
             " shutil.which('mstconfig'))")
    for name, python in zip(("a", "b"), pythons):
        out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True).stdout.split()
        assert out == [str(tmp_path / name / "sys"), str(tmp_path / name / "disk"), str(tmp_path / name / "bin" / "mstconfig")]
        assert (tmp_path / name / "sys" / "class" / "infiniband" / "mlx5_0").is_dir()
    # the firmware tool on the interpreter's PATH answers for that host's card; the build left the caller's env alone
    query = "import subprocess; subprocess.run(['mstconfig', '-d', '0000:0c:00.0', 'q'], check=True)"
    shown = subprocess.run([str(pythons[0]), "-c", query], capture_output=True, text=True, check=True).stdout
    assert "0000:0c:00.0" in shown and "ROCE_CC_PRIO_MASK_P1" in shown
    assert os.environ.get("SIMHOST_PERSIST_DIR") not in (str(tmp_path / "a" / "disk"), str(tmp_path / "b" / "disk"))


def _fake_systemctl(tmp_path, monkeypatch):
    """systemctl on PATH that logs its arguments (kitinstall runs it by name)."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    log = tmp_path / "systemctl.log"
    (bindir / "systemctl").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (bindir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return log


def test_kit_install_lays_out_a_host_in_one_call_and_restarts_only_what_changed(tmp_path, monkeypatch):
    """install.yml's one command per host: files, create-once stand-ins, dirs, moves, the profile check, the units
    in order (restarted when what they watch changed, else started), and what it read."""
    from simhost import kitinstall, profile  # pylint: disable=import-outside-toplevel
    log = _fake_systemctl(tmp_path, monkeypatch)
    monkeypatch.setattr(kitinstall, "SYSTEMD_DIR", str(tmp_path / "units") + "/")
    units, prof = tmp_path / "units", tmp_path / "etc" / "profile.json"
    (tmp_path / "sources.list").write_text("deb http://deb.debian.org/debian bookworm main\n")
    spec = {"files": {"write": {str(prof): {"content": json.dumps(profile.load("cx7_roce_400g_2x"))},
                                str(units / "a.service"): {"content": "[Unit]\n"}}},
            "create": {str(tmp_path / "boot" / "vmlinuz-{uname_r}"): {"content": "stand-in {uname_r}\n", "mode": "0644"}},
            "dirs": {str(tmp_path / "ssh"): "0700"},
            "move": [[str(tmp_path / "sources.list"), str(tmp_path / "sources.list.off")]],
            "check": str(prof),
            "units": [{"name": "a.service", "restart_on": [str(units / "a.service")]}, {"name": "b.service"}],
            "read": [str(prof)]}
    first = kitinstall.apply(spec)
    release = os.uname().release
    assert first["changed"] and first["created"] == [str(tmp_path / "boot" / f"vmlinuz-{release}")]
    assert (tmp_path / "boot" / f"vmlinuz-{release}").read_text() == f"stand-in {release}\n"
    assert (tmp_path / "ssh").stat().st_mode & 0o777 == 0o700 and (tmp_path / "sources.list.off").exists()
    assert first["restarted"] == ["a.service"] and json.loads(first["read"][0])["name"] == "cx7_roce_400g_2x"
    assert log.read_text().splitlines() == ["daemon-reload", "enable --quiet a.service", "restart a.service",
                                            "enable --quiet b.service", "start b.service"]
    log.write_text("")
    again = kitinstall.apply(spec)
    assert not again["changed"] and again["restarted"] == []
    assert log.read_text().splitlines() == ["enable --quiet a.service", "start a.service",
                                            "enable --quiet b.service", "start b.service"]
    # the kit itself changed (install.yml's unarchive): what watches "kit" is rebuilt
    assert kitinstall.apply(dict(spec, kit_changed=True, units=[{"name": "a.service", "restart_on": ["kit"]}]))[
        "restarted"] == ["a.service"]


def test_kit_install_refuses_a_bad_profile_and_unknown_keys(tmp_path, monkeypatch, capsys):
    from simhost import kitinstall, profile  # pylint: disable=import-outside-toplevel
    _fake_systemctl(tmp_path, monkeypatch)
    bad = tmp_path / "profile.json"
    bad.write_text('{"name": "x", "devices": "none"}\n')
    with pytest.raises((ValueError, profile.ProfileError)):
        kitinstall.apply({"check": str(bad)})
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO('{"copy": {}}'))
    assert kitinstall.main([]) == 2 and "unknown spec keys ['copy']" in capsys.readouterr().err
