"""The simulated mlxconfig / mstconfig and the firmware NV model (tests/simhost/simhost/firmware.py).

The real captures (tests/fixtures/real/rdma-outputs/mlxconfig-*, qos-firmware/ml*config-*, mstconfig-*) and the
simulated outputs go through the same parser, the product's plugins/module_utils/firmware/mlxconfig.py; layout is compared
byte for byte where the content is the same; the error paths captured from the real mstflint 4.21 are reproduced
exactly, those that need a device follow the mstflint sources (see tests/simhost/README.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.hpcnet.rdma.plugins.module_utils.firmware import mlxconfig as mc
import rdma_tools  # tests/tools: the parsers of the vendor tools' text, used only by tests
from fixtures_path import real_fixtures

KIT = Path(__file__).resolve().parents[2] / "simhost"
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import firmware  # noqa: E402  pylint: disable=wrong-import-position

RDMA = real_fixtures() / "rdma-outputs"
QOSFW = real_fixtures() / "qos-firmware"

# a ConnectX-4 Lx like the cards of the captures (dual-port, one card 0000:19:00.x), Ethernet
CX4LX = {
    "name": "cx4lx_test", "stack": {"provider": "inbox"}, "guid_seed": 0x2a0000,
    "rdma_naming": "kernel",   # mlx5_0/mlx5_1 (unpinned, an inbox host would call them rocep25s0f0/rocep25s0f1)
    "device_defaults": {"hca_type": "MT4117", "pci_device_id": 0x1015, "fw_ver": "14.32.1010",
                        "part_number": "MCX4121A-ACU",
                        "description": "ConnectX-4 Lx EN network interface card; 25GbE dual-port SFP28; PCIe3.0 x8; "
                                       "UEFI Enabled; tall bracket"},
    "port_defaults": {"link_layer": "Ethernet", "rate": "25 Gb/sec (1X EDR)", "mtu": 1500},
    "devices": [
        {"name": "mlx5_0", "pci": "0000:19:00.0", "ports": [{"ipv4": "10.0.0.11/24"}],
         "firmware": {"defaults": {"NUM_OF_VFS": 8}, "next_boot": {"SRIOV_EN": True}}},
        {"name": "mlx5_1", "pci": "0000:19:00.1", "ports": [{"ipv4": "10.0.1.11/24"}]},
    ],
}


@pytest.fixture(autouse=True)
def persist(tmp_path, monkeypatch):
    """Every test has its own firmware NV store / cable table (the container's /var/lib/simhost)."""
    path = tmp_path / "persist"
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(path))
    return path


def boot(profile, root: Path, host_index=None) -> dict:
    """A (re)boot of the host: build_tree."""
    prof = simhost.load(profile) if isinstance(profile, str) else json.loads(json.dumps(profile))
    return simhost.build_tree(prof, root, host_index)


def run(root: Path, tool: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "SIMHOST_SYSFS_ROOT": str(root), "LC_ALL": "C"}
    # -S: no site-packages, the kit is standard library only (the containers have no extra packages)
    return subprocess.run([sys.executable, "-S", str(KIT / "bin" / tool), *args], capture_output=True, text=True,
                          env=env, input=stdin, check=False, timeout=60)


def ok(root: Path, tool: str, *args: str) -> str:
    res = run(root, tool, *args)
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stdout, res.stderr)
    return res.stdout


def rows(text: str) -> dict:
    """{NAME: table line} of a query/set table."""
    out = {}
    for line in text.splitlines():
        match = re.match(r"^[* ](?:RO| {2})? +([A-Z][A-Z0-9_]*(?:\[\d+\])?) ", line)
        if match and not line.startswith(("Configurations", "Device")):
            out[match.group(1)] = line
    return out


def line_of(text: str, prefix: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(prefix))


@pytest.fixture
def vpi(tmp_path):
    root = tmp_path / "vpi" / "sys"
    return root, boot("cx7_vpi_2p", root)


@pytest.fixture
def cx4(tmp_path):
    root = tmp_path / "cx4" / "sys"
    return root, boot(CX4LX, root)


# ------------------------------------------------------------------------------------------ layouts
def test_mstconfig_e_query_lines_up_with_the_capture_byte_for_byte(cx4):
    root, _exp = cx4
    ours = ok(root, "mstconfig", "-d", "19:00.0", "-e", "q")
    real = (RDMA / "mlxconfig-query-01.txt").read_text()
    for prefix in ("Configurations:", "Device type:", "Device:", "The '*' shows"):
        assert line_of(ours, prefix) == line_of(real, prefix)
    assert ours.startswith("\nDevice #1:\n----------\n\n")          # the capture (a test template) lost the first \n
    ours_rows, real_rows = rows(ours), rows(real)
    same = [name for name in ours_rows if name in real_rows and ours_rows[name] == real_rows[name]]
    assert len(same) >= 45
    # the only common row that differs is the capture's template artefact: '*' on NUM_OF_VFS 8/8/8
    assert [n for n in ours_rows if n in real_rows and n not in same] == ["NUM_OF_VFS"]
    assert real_rows["NUM_OF_VFS"] == "*" + ours_rows["NUM_OF_VFS"][1:]
    po, pr = mc.parse_query(ours), mc.parse_query(real)
    assert po["columns"] == pr["columns"] == ["default", "current", "next_boot"]
    assert po["device"]["type"] == pr["device"]["type"] == "ConnectX4LX"
    for name in same:
        assert po["params"][name] == pr["params"][name]
    assert po["params"]["SRIOV_EN"] == pr["params"]["SRIOV_EN"] == {
        "default": "False(0)", "current": "True(1)", "next_boot": "True(1)", "modified": True}


def test_mlxconfig_query_is_the_mft_layout_of_the_capture(cx4):
    root, _exp = cx4
    ours = ok(root, "mlxconfig", "-d", "0000:19:00.0", "q")
    real = (QOSFW / "mlxconfig-query-02.txt").read_text()
    for prefix in ("Configurations:", "Device type:", "Name:", "Description:"):
        assert line_of(ours, prefix) == line_of(real, prefix)
    assert line_of(ours, "Configurations:").index("Next Boot") == 57           # MFT: header at 57, values at 52
    ours_rows, real_rows = rows(ours), rows(real)
    same = [n for n in ours_rows if n in real_rows and ours_rows[n] == real_rows[n]]
    assert len(same) >= 45 and all(ours_rows[n][52] != " " for n in same)
    assert mc.parse_query(ours)["columns"] == mc.parse_query(real)["columns"] == ["next_boot"]
    # the two tools are two layouts of the same card
    mst = ok(root, "mstconfig", "-d", "0000:19:00.0", "q")
    assert line_of(mst, "Configurations:").index("Next Boot") == 52
    assert mc.parse_query(mst)["params"] == mc.parse_query(ours)["params"]


def test_legacy16_layout_is_mstflint_4_21(tmp_path):
    root = tmp_path / "sys"
    boot({**CX4LX, "mstflint_layout": "legacy16",
          "devices": [{**CX4LX["devices"][0], "pci": "0000:01:00.0"}, {**CX4LX["devices"][1], "pci": "0000:01:00.1"}]},
         root)
    ours = ok(root, "mstconfig", "-d", "01:00.1", "q")
    real = (QOSFW / "mstconfig-query-01.txt").read_text()
    assert line_of(ours, "Configurations:") == line_of(real, "Configurations:")
    assert line_of(ours, "Device type:") == line_of(real, "Device type:")
    assert line_of(ours, "Device:") == line_of(real, "Device:")
    ours_rows, real_rows = rows(ours), rows(real)
    same = [n for n in ours_rows if n in real_rows and ours_rows[n] == real_rows[n]]
    assert len(same) >= 30
    # rdma-outputs/mlxconfig-query-05: the DCQCN block of the same layout (an excerpt: the padding was trimmed)
    excerpt = rows((RDMA / "mlxconfig-query-05.txt").read_text())
    assert len(excerpt) == 21 and all(ours_rows[n].rstrip() == line for n, line in excerpt.items())
    # -e and the set dialog: 16-wide fields, no blank between full fields (PRINT_SPACE_IF_NEEDED width > 16)
    verbose = ok(root, "mstconfig", "-d", "01:00.1", "-e", "q")
    assert line_of(verbose, "Configurations:") == line_of((RDMA / "mlxconfig-query-02.txt").read_text(), "Configurations:")
    dialog = ok(root, "mstconfig", "-y", "-d", "01:00.1", "s", "CLAMP_TGT_RATE_P1=1")
    real_set = (QOSFW / "mstconfig-set-02.txt").read_text()
    assert line_of(dialog, "Configurations:") == line_of(real_set, "Configurations:")
    assert rows(dialog)["CLAMP_TGT_RATE_P1"] == "         CLAMP_TGT_RATE_P1                   False(0)        True(1)         "
    assert dialog.endswith(real_set[real_set.index("\n Apply new"):])


def test_mlxconfig_set_dialog_is_the_capture(tmp_path):
    """qos-firmware/mlxconfig-set-02: a ConnectX-5 whose Next Boot already holds the values; -y prints the answer."""
    root = tmp_path / "sys"
    boot({"name": "cx5", "devices": [{
        "name": "mlx5_0", "pci": "0000:5e:00.0", "hca_type": "MT4119", "part_number": "04TRD3",
        "description": "ConnectX-5 EN network interface card; 25GbE Dual-port SFP28 for OCP3.0",
        "firmware": {"next_boot": {"SRIOV_EN": True, "NUM_OF_VFS": 8}},
        "ports": [{"link_layer": "Ethernet", "rate": "25 Gb/sec (1X EDR)"}]}]}, root)
    ours = ok(root, "mlxconfig", "-y", "-d", "5e:00.0", "set", "SRIOV_EN=1", "NUM_OF_VFS=8")
    real = (QOSFW / "mlxconfig-set-02.txt").read_text()
    swap = "Device:             /dev/mst/mt4119_pciconf0\n"
    assert ours == real.replace(swap, "Device:             5e:00.0             \n")
    res = mc.parse_set(ours)
    assert res["applied"] and res["reboot_required"]
    assert res["params"] == {"SRIOV_EN": {"next_boot": "True(1)", "new": "True(1)"},
                             "NUM_OF_VFS": {"next_boot": "8", "new": "8"}}


def test_mstconfig_set_dialog_columns_are_the_capture(vpi):
    root, _exp = vpi
    ours = ok(root, "mstconfig", "-y", "-d", "0c:00.0", "set", "LINK_TYPE_P2=IB")
    real = (QOSFW / "mstconfig-set-01.txt").read_text()
    assert line_of(ours, "Configurations:") == line_of(real, "Configurations:")
    row, real_row = rows(ours)["LINK_TYPE_P2"], rows(real)["ROCE_CONTROL"]
    assert row == "        LINK_TYPE_P2                                ETH(2)               IB(1)               "
    assert [m.start() for m in re.finditer(r"\S+", row)] == [8, 52, 73] == [m.start() for m in re.finditer(r"\S+", real_row)]
    assert len(row) == len(real_row)
    assert ours.endswith(real[real.index("\n Apply new"):])


def test_show_confs_lines_are_the_capture(vpi):
    root, _exp = vpi
    ours = ok(root, "mstconfig", "-d", "mlx5_0", "i")
    real = (QOSFW / "mstconfig-show-confs-01.txt").read_text().splitlines()
    assert ours.startswith("\nList of configurations the device mlx5_0 may support:\n\t\tINTERNAL HAIRPIN CONF:\n")
    expanded = [line.replace("\t", " " * 8) for line in ours.splitlines()]        # the capture is a terminal copy
    for i, line in enumerate(real):
        if "=<" not in line:
            continue
        name = line.split("=")[0].strip()
        mine = next((m for m in expanded if m.strip().startswith(name + "=<")), None)
        if mine is None:
            continue
        cut = i + 1 < len(real) and real[i + 1] == "(...)"                     # terminal copy lost its padding
        assert mine == line or (cut and mine.rstrip() == line), name
        j = 1
        while i + j < len(real) and real[i + j].startswith(" " * 60):        # the description's further lines
            assert expanded[expanded.index(mine) + j] == real[i + j]
            j += 1
        assert not expanded[expanded.index(mine) + j].startswith(" " * 60)
    confs = mc.parse_show_confs(ours)
    assert confs["LINK_TYPE_P1"] == {"type": "enum", "symbols": {"ETH": 2, "IB": 1}}
    assert confs["SRIOV_EN"]["type"] == "bool" and confs["CNP_DSCP_P2"]["type"] == "num"


# ------------------------------------------------------------------------------------- the NV model
def test_vpi_profile_boots_as_declared(vpi):
    root, exp = vpi
    (p1,), (p2,) = exp["devices"][0]["ports"], exp["devices"][1]["ports"]
    assert (p1["link_layer"], p1["netdev"], p1["rate"], p1["lid"], p1["sm_lid"]) == (
        "InfiniBand", "ibp12s0f0", "200 Gb/sec (2X NDR)", 0x31, 1)
    assert (p2["link_layer"], p2["netdev"], p2["rate"], p2["ipv4"]) == (
        "Ethernet", "enp12s0f1np1", "200 Gb/sec (2X NDR)", "10.0.3.11/24")
    assert exp["devices"][1]["sys_image_guid"] == exp["devices"][0]["node_guid"]    # one card, one system image
    q = mc.parse_query(ok(root, "mstconfig", "-d", "mlx5_1", "-e", "q"))
    assert q["device"]["device"] == "mlx5_1" and q["device"]["type"] == "ConnectX7"
    assert q["params"]["LINK_TYPE_P1"] == {"default": "IB(1)", "current": "IB(1)", "next_boot": "IB(1)",
                                           "modified": False}
    assert q["params"]["LINK_TYPE_P2"] == {"default": "IB(1)", "current": "ETH(2)", "next_boot": "ETH(2)",
                                           "modified": True}
    host1 = boot("cx7_vpi_2p", root.parent / "h1", host_index=1)
    assert host1["devices"][0]["ports"][0]["lid"] == 0x31 + 16 and host1["devices"][1]["ports"][0]["ipv4"] == "10.0.3.12/24"


def test_set_changes_next_boot_only_and_a_reboot_makes_it_current(vpi):
    root, _exp = vpi
    out = ok(root, "mlxconfig", "-y", "-d", "0000:0c:00.1", "set", "LINK_TYPE_P2=ib")
    assert mc.parse_set(out)["params"]["LINK_TYPE_P2"] == {"next_boot": "ETH(2)", "new": "IB(1)"}
    q = mc.parse_query(ok(root, "mlxconfig", "-d", "0c:00.0", "-e", "q", "LINK_TYPE_P2"))
    assert q["params"]["LINK_TYPE_P2"] == {"default": "IB(1)", "current": "ETH(2)", "next_boot": "IB(1)",
                                           "modified": True}
    assert mc.pending_of(q) == {"LINK_TYPE_P2": {"current": 2, "next_boot": 1,
                                                 "printed": {"current": "ETH(2)", "next_boot": "IB(1)"}}}
    port = root / "class/infiniband/mlx5_1/ports/1"
    assert (port / "link_layer").read_text() == "Ethernet\n"                       # nothing changes before the boot
    exp = boot("cx7_vpi_2p", root)                                                  # reboot
    (p2,) = exp["devices"][1]["ports"]
    assert (port / "link_layer").read_text() == "InfiniBand\n"
    assert (port / "lid").read_text() == "0x32\n" and (port / "sm_lid").read_text() == "0x1\n"
    assert (port / "rate").read_text() == "200 Gb/sec (2X NDR)\n"
    assert (port / "gids/0").read_text() == "fe80:0000:0000:0000:" + ":".join(
        p2["port_guid"][i:i + 4] for i in range(0, 16, 4)) + "\n"
    assert len(os.listdir(port / "gids")) == 8 and not os.listdir(port / "gid_attrs/ndevs")
    fn = root / "bus/pci/devices/0000:0c:00.1"
    assert sorted(os.listdir(fn / "net")) == ["ibp12s0f1"] and (fn / "class").read_text() == "0x020700\n"
    net = root / "class/net/ibp12s0f1"
    assert (net / "type").read_text() == "32\n" and (net / "addr_len").read_text() == "20\n"
    assert not (root / "class/net/enp12s0f1np1").exists()
    dv = rdma_tools.parse_ibv_devinfo(ok(root, "ibv_devinfo", "-v", "-d", "mlx5_1"))["devices"]["mlx5_1"]["ports"][1]
    assert dv["link_layer"] == "InfiniBand" and dv["port_lid"] == 0x32 and dv["sm_lid"] == 1
    q = mc.parse_query(ok(root, "mstconfig", "-d", "0c:00.1", "-e", "q", "LINK_TYPE_P2"))
    assert q["params"]["LINK_TYPE_P2"] == {"default": "IB(1)", "current": "IB(1)", "next_boot": "IB(1)",
                                           "modified": False}
    # and back: ETH again after the next boot
    ok(root, "mstconfig", "-y", "-d", "mlx5_0", "set", "LINK_TYPE_P2=2")
    boot("cx7_vpi_2p", root)
    assert (port / "link_layer").read_text() == "Ethernet\n" and (root / "class/net/enp12s0f1np1/type").read_text() == "1\n"
    assert (port / "gid_attrs/types/3").read_text() == "RoCE v2\n" and (port / "lid").read_text() == "0x0\n"


def test_sriov_files_appear_at_the_boot_after_sriov_en(vpi):
    root, _exp = vpi
    fns = [root / "bus/pci/devices" / f"0000:0c:00.{f}" for f in (0, 1)]
    assert not any((fn / "sriov_totalvfs").exists() for fn in fns)              # SRIOV_EN False: no SR-IOV capability
    ok(root, "mstconfig", "-y", "-d", "0c:00.0", "set", "SRIOV_EN=True", "NUM_OF_VFS=8")
    assert not (fns[0] / "sriov_totalvfs").exists()
    boot("cx7_vpi_2p", root)
    for fn in fns:
        assert (fn / "sriov_totalvfs").read_text() == "8\n" and (fn / "sriov_numvfs").read_text() == "0\n"
    ok(root, "mstconfig", "-y", "-d", "0c:00.0", "set", "NUM_OF_VFS=0")
    boot("cx7_vpi_2p", root)
    assert not (fns[1] / "sriov_totalvfs").exists()


def test_ecn_boot_defaults_come_from_the_firmware_on_ofed(tmp_path):
    root = tmp_path / "sys"
    boot("cx7_roce_400g_2x_ofed", root)
    ecn = root / "class/net/enp12s0np0/ecn"
    assert [(ecn / "roce_np/enable" / str(p)).read_text() for p in range(8)] == ["1\n"] * 8
    assert (ecn / "roce_np/cnp_dscp").read_text() == "48\n" and (ecn / "roce_np/cnp_802p_prio").read_text() == "6\n"
    ok(root, "mlxconfig", "-y", "-d", "mlx5_0", "set", "ROCE_CC_PRIO_MASK_P1=8", "CNP_DSCP_P1=26", "CNP_802P_PRIO_P1=3",
       "RPG_AI_RATE_P1=10", "MIN_TIME_BETWEEN_CNPS_P1=0")
    assert (ecn / "roce_np/cnp_dscp").read_text() == "48\n"                       # NV: takes effect at boot
    boot("cx7_roce_400g_2x_ofed", root)
    assert [(ecn / "roce_rp/enable" / str(p)).read_text() for p in range(8)] == ["0\n"] * 3 + ["1\n"] + ["0\n"] * 4
    assert (ecn / "roce_np/cnp_dscp").read_text() == "26\n" and (ecn / "roce_np/cnp_802p_prio").read_text() == "3\n"
    assert (ecn / "roce_rp/rpg_ai_rate").read_text() == "10\n" and (ecn / "roce_np/min_time_between_cnps").read_text() == "0\n"
    assert (root / "class/net/enp140s0np0/ecn/roce_np/cnp_dscp").read_text() == "48\n"   # the other card
    # a write the kernel refuses leaves the boot value (kernelfs.settle restores it)
    (ecn / "roce_np/cnp_dscp").write_text("x\n")
    simhost.kernelfs.settle(root)
    assert (ecn / "roce_np/cnp_dscp").read_text() == "26\n"


def test_inbox_hosts_show_the_ecn_nv_values_only_through_the_tools(tmp_path):
    root = tmp_path / "sys"
    boot("cx7_roce_400g_2x", root)
    assert not (root / "class/net/enp12s0np0/ecn").exists()
    q = mc.parse_query(ok(root, "mstconfig", "-d", "mlx5_0", "q", "CNP_DSCP_P1", "ROCE_CC_PRIO_MASK_P1"))
    assert mc.config_of(q) == {"CNP_DSCP_P1": {"default": None, "current": None, "next_boot": 48},
                               "ROCE_CC_PRIO_MASK_P1": {"default": None, "current": None, "next_boot": 255}}


def test_reset_restores_the_defaults_with_the_captured_dialog(vpi):
    root, _exp = vpi
    ok(root, "mstconfig", "-y", "-d", "0c:00.0", "set", "CNP_DSCP_P1=24", "SRIOV_EN=1")
    out = ok(root, "mstconfig", "-y", "-d", "0c:00.0", "reset")
    real = (QOSFW / "mlxconfig-reset-01.txt").read_text()
    assert out == real.replace("mt4103_pci_cr0", "0c:00.0")
    q = mc.parse_query(ok(root, "mstconfig", "-e", "-d", "0c:00.0", "q"))
    assert all(p["next_boot"] == p["default"] for p in q["params"].values())
    assert q["params"]["LINK_TYPE_P2"]["current"] == "ETH(2)" and q["params"]["LINK_TYPE_P2"]["next_boot"] == "IB(1)"
    boot("cx7_vpi_2p", root)                    # the shipped LINK_TYPE_P2=ETH is gone with the reset: IB at boot
    assert (root / "class/infiniband/mlx5_1/ports/1/link_layer").read_text() == "InfiniBand\n"
    # reset without -y reads the answer: y (any case) goes on, anything else aborts (exit 2)
    assert run(root, "mstconfig", "-d", "0c:00.0", "reset", stdin="YES\n").returncode == 0
    assert run(root, "mstconfig", "-d", "0c:00.0", "reset", stdin="n\n").returncode == 2


def test_query_without_device_lists_every_function(vpi):
    root, _exp = vpi
    out = ok(root, "mstconfig", "q", "LINK_TYPE_P2")
    assert out.count("Device #") == 2 and "\nDevice #2:\n" in out
    assert [line.split()[-1] for line in out.splitlines() if line.startswith("Device:")] == ["0000:0c:00.0", "0000:0c:00.1"]


def test_array_parameters_query_and_set(vpi):
    root, _exp = vpi
    real = (RDMA / "mlxconfig-query-03.txt").read_text()
    out = ok(root, "mstconfig", "-d", "0c:00.0", "-e", "q", "ESWITCH_HAIRPIN_DESCRIPTORS[0..7]")
    ours_rows, real_rows = rows(out), rows(real)
    assert list(ours_rows) == list(real_rows) == [f"ESWITCH_HAIRPIN_DESCRIPTORS[{i}]" for i in range(8)]
    assert mc.parse_query(out)["params"] == mc.parse_query(real)["params"]
    ok(root, "mstconfig", "-y", "-d", "0c:00.0", "set", "ESWITCH_HAIRPIN_DESCRIPTORS[2]=64")
    q = mc.parse_query(ok(root, "mstconfig", "-e", "-d", "0c:00.0", "q", "ESWITCH_HAIRPIN_DESCRIPTORS[2]",
                          "ESWITCH_HAIRPIN_DESCRIPTORS"))
    assert q["params"]["ESWITCH_HAIRPIN_DESCRIPTORS[2]"] == {"default": "128", "current": "128", "next_boot": "64",
                                                             "modified": True}
    assert q["params"]["ESWITCH_HAIRPIN_DESCRIPTORS"]["next_boot"] == "Array[0..7]"


def test_the_nv_store_of_another_card_is_ignored(vpi, persist):
    root, exp = vpi
    ok(root, "mstconfig", "-y", "-d", "0c:00.0", "set", "LINK_TYPE_P2=IB")
    nv = json.loads((persist / "mlxconfig/0000:0c:00.0.json").read_text())
    assert nv["next_boot"]["LINK_TYPE_P2"] == 1 and nv["card"] == exp["devices"][0]["node_guid"]
    other = boot("cx7_vpi_2p", root, host_index=3)          # another card (other GUIDs) in the same slot
    assert other["devices"][1]["ports"][0]["link_layer"] == "Ethernet"


# ----------------------------------------------------------------------------------------- errors
CAPTURED = [  # (fixture, args, exit status) -- qos-firmware/SOURCES.md "Real runs of mstconfig"
    ("mstconfig-error-nodev-01", ["-d", "0000:99:00.0", "q"], 3),
    ("mstconfig-error-nodev-02", ["-d", "mlx5_9", "q"], 3),
    ("mstconfig-error-devname-01", ["-d", "0c:00", "q"], 3),
    ("mstconfig-error-nocmd-01", ["-d", "0000:0c:00.0"], 3),
    ("mstconfig-error-badarg-01", ["-d", "0000:0c:00.0", "--bogus", "q"], 3),
    ("mstconfig-error-noeq-01", ["-d", "0000:0c:00.0", "set", "LINK_TYPE_P1"], 3),
    ("mstconfig-error-noeq-02", ["-d", "0000:0c:00.0", "set", "LINK_TYPE_P1="], 3),
    ("mstconfig-error-noeq-03", ["-d", "0000:0c:00.0", "set", "SRIOV_EN=1=2"], 3),
    ("mstconfig-error-noeq-04", ["-d", "0000:0c:00.0", "set", "=1"], 3),
    ("mstconfig-error-noargs-01", ["-d", "0000:0c:00.0", "set"], 3),
    ("mstconfig-error-dup-01", ["-d", "0000:0c:00.0", "set", "LINK_TYPE_P1=ETH", "LINK_TYPE_P1=IB"], 3),
    ("mstconfig-error-resetargs-01", ["-d", "0000:0c:00.0", "reset", "LINK_TYPE_P1"], 3),
    ("mstconfig-error-showconfsargs-01", ["-d", "0000:0c:00.0", "i", "LINK_TYPE_P1"], 3),
    ("mstconfig-error-nodevarg-01", ["set", "LINK_TYPE_P1=ETH"], 3),
    ("mstconfig-error-missingdev-01", ["-d"], 3),
    ("mstconfig-error-missingval-01", ["-d", "0000:0c:00.0", "-b"], 3),
    ("mstconfig-error-devtype-01", ["-d", "0000:0c:00.0", "-t", "foo", "q"], 3),
    ("mstconfig-error-rawfile-01", ["-d", "0000:0c:00.0", "-f", "conf_file", "q"], 3),
    ("mstconfig-reset-abort-01", ["-d", "0000:0c:00.0", "reset"], 2),
    ("mstconfig-reset-nodev-01", ["-d", "0000:99:00.0", "-y", "reset"], 3),
    ("mstconfig-help-01", ["-h"], 0),
    ("mstconfig-version-01", ["-v"], 0),
]


@pytest.mark.parametrize("fixture, args, rc", CAPTURED, ids=[c[0] for c in CAPTURED])
def test_error_paths_are_the_real_mstconfig_runs(vpi, fixture, args, rc):
    root, _exp = vpi
    res = run(root, "mstconfig", *args)
    assert res.returncode == rc
    assert res.stdout == (QOSFW / f"{fixture}.txt").read_text()
    err = QOSFW / f"{fixture}.stderr.txt"
    assert res.stderr == (err.read_text() if err.exists() else "")


def test_no_device_on_the_host(tmp_path):
    root = tmp_path / "sys"
    boot("no_rdma", root)
    for args in (["q"], ["-y", "reset"]):
        res = run(root, "mstconfig", *args)
        assert (res.returncode, res.stdout) == (3, (QOSFW / "mstconfig-error-nodevices-01.txt").read_text())


def _opening_and_header(root, dev, header_cols=""):
    q = ok(root, "mstconfig", "-d", dev, "q", "SRIOV_EN")
    return q[:q.index("Configurations:")] + line_of(q, "Configurations:") + header_cols + "\n"


def test_unsupported_parameter_error_follows_the_source(vpi):
    """queryDevCfg prints the opening and the table header, then queryParamViews throws (mlxcfg_generic_commander):
    the capture qos-firmware/mstconfig-error-02 quoted only that last line."""
    root, _exp = vpi
    res = run(root, "mstconfig", "-d", "0c:00.0", "q", "MPFS_UC_LOOPBACK_DISABLE_P1")
    assert res.returncode == 3 and res.stderr == ""
    assert res.stdout == _opening_and_header(root, "0c:00.0") + (QOSFW / "mstconfig-error-02.txt").read_text()
    assert mc.parse_errors(res.stdout) == ["The Device doesn't support MPFS_UC_LOOPBACK_DISABLE_P1 parameter"]


@pytest.mark.parametrize("profile, args, message", [
    (CX4LX, ["LINK_TYPE_P1=ETH"], "The Device doesn't support LINK_TYPE_P1 parameter"),   # an EN card: not VPI
    ("cx7_roce_400g_2x", ["CNP_DSCP_P2=26"], "The Device doesn't support CNP_DSCP_P2 parameter"),      # one port
    ("cx7_vpi_2p", ["LINK_TYPE_P1=FOO"], "Unknown value FOO"),
    ("cx7_vpi_2p", ["SRIOV_EN=2"], "Unknown value 2"),
    ("cx7_vpi_2p", ["CNP_DSCP_P1=64"], "The value 64 is not valid,  as its size is 6 bits"),
    ("cx7_vpi_2p", ["CNP_DSCP_P1=abc"], "Cannot parse the value"),
    ("cx7_vpi_2p", ["ESWITCH_HAIRPIN_DESCRIPTORS[8]=1"],
     "Index 8 of the parameter ESWITCH_HAIRPIN_DESCRIPTORS is out of range. Maximal index is 7"),
])
def test_set_errors_before_the_prompt(tmp_path, profile, args, message):
    root = tmp_path / "sys"
    boot(profile, root)
    res = run(root, "mstconfig", "-y", "-d", "mlx5_0", "set", *args)
    assert res.returncode == 3 and res.stderr == ""
    assert res.stdout == _opening_and_header(root, "mlx5_0", "       New") + f"-E- {message}\n"
    assert "Apply new" not in res.stdout and not list((tmp_path / "persist").glob("mlxconfig/*"))


@pytest.mark.parametrize("args, message", [
    (["NUM_OF_VFS=128"], "Parameter NUM_OF_VFS' value is larger than maximum allowed 127"),
    (["RPG_MIN_DEC_FAC_P2=101"], "Parameter RPG_MIN_DEC_FAC_P2' value is larger than maximum allowed 100"),
    (["DCE_TCP_G_P1=0"], "Parameter DCE_TCP_G_P1' value is smaller than minimum allowed 1"),
    (["ESWITCH_HAIRPIN_DESCRIPTORS=3"], "Cannot set the value 3 for the parameter "
                                        "log_hpin_num_descriptor(ESWITCH_HAIRPIN_DESCRIPTORS): Operation is not supported"),
])
def test_set_errors_when_applying(vpi, persist, args, message):
    """TLVConf::checkRules / Param::setVal run in setCfg, after the prompt: 'Applying... Failed!'."""
    root, _exp = vpi
    res = run(root, "mlxconfig", "-y", "-d", "0c:00.0", "set", *args)
    assert res.returncode == 3
    assert res.stdout.endswith(f"\n Apply new Configuration? (y/n) [n] : y\nApplying... Failed!\n-E- {message}\n")
    assert not (persist / "mlxconfig/0000:0c:00.0.json").exists()


def test_set_without_yes_reads_the_answer(vpi, persist):
    root, _exp = vpi
    res = run(root, "mstconfig", "-d", "0c:00.0", "set", "CNP_DSCP_P1=26")            # EOF: no answer
    assert res.returncode == 2 and res.stdout.endswith(" Apply new Configuration? (y/n) [n] : -E- Aborted by user.\n")
    assert not (persist / "mlxconfig").exists()
    res = run(root, "mstconfig", "-d", "0c:00.0", "set", "CNP_DSCP_P1=26", stdin="y\n")
    assert res.returncode == 0 and res.stdout.endswith(" : Applying... Done!\n-I- Please reboot machine to load new "
                                                       "configurations.\n")
    assert mc.parse_query(ok(root, "mstconfig", "-d", "0c:00.0", "q", "CNP_DSCP_P1"))["params"]["CNP_DSCP_P1"][
        "next_boot"] == "26"


def test_mlxconfig_prints_its_own_name(vpi):
    root, _exp = vpi
    res = run(root, "mlxconfig", "--bogus")
    assert res.returncode == 3 and res.stdout.startswith("-E- invalid argument: --bogus\n    NAME:\n        mlxconfig\n")
    assert "mstconfig" not in res.stdout


# ------------------------------------------------------------------------------------------ cables
def test_unplugged_cable_persists_across_boots(vpi, persist):
    root, _exp = vpi
    env = {**os.environ, "PYTHONPATH": str(KIT)}
    cli = [sys.executable, "-m", "simhost", "cable"]
    res = subprocess.run(cli + ["unplug", "--device", "mlx5_0", "--port", "1", "--root", str(root)],
                         capture_output=True, text=True, env=env, check=False)
    assert res.returncode == 0, res.stderr
    port, net = root / "class/infiniband/mlx5_0/ports/1", root / "class/net/ibp12s0f0"
    assert (port / "state").read_text() == "1: DOWN\n" and (port / "phys_state").read_text() == "2: Polling\n"
    assert (net / "carrier").read_text() == "0\n" and (net / "operstate").read_text() == "down\n"
    assert json.loads((persist / "cables.json").read_text()) == {"0000:0c:00.0": {"1": "unplugged"}}
    exp = boot("cx7_vpi_2p", root)                        # a reboot does not put the cable back
    assert (exp["devices"][0]["ports"][0]["state"], exp["devices"][0]["ports"][0]["lid"]) == ("DOWN", 0)
    assert (port / "state").read_text() == "1: DOWN\n" and (port / "lid").read_text() == "0x0\n"
    dv = rdma_tools.parse_ibv_devinfo(ok(root, "ibv_devinfo", "-d", "mlx5_0"))["devices"]["mlx5_0"]["ports"][1]
    assert dv["state"] == "PORT_DOWN"
    assert (root / "class/infiniband/mlx5_1/ports/1/state").read_text() == "4: ACTIVE\n"
    res = subprocess.run(cli + ["plug", "--device", "mlx5_0", "--root", str(root)], capture_output=True, text=True,
                         env=env, check=False)
    assert res.returncode == 0, res.stderr
    assert (port / "state").read_text() == "4: ACTIVE\n" and (port / "lid").read_text() == "0x31\n"
    assert (net / "carrier").read_text() == "1\n" and (net / "speed").read_text() == "200000\n"
    assert boot("cx7_vpi_2p", root)["devices"][0]["ports"][0]["state"] == "ACTIVE"
    bad = subprocess.run(cli + ["unplug", "--device", "mlx5_9", "--root", str(root)], capture_output=True, text=True,
                         env=env, check=False)
    assert bad.returncode == 2 and "no RDMA device 'mlx5_9'" in bad.stderr


# ----------------------------------------------------------------------------------------- profiles
@pytest.mark.parametrize("mutate, field", [
    (lambda p: p["devices"][0]["firmware"]["next_boot"].update(LINK_TYPE_P3="IB"),
     "devices[0].firmware.next_boot.LINK_TYPE_P3"),
    (lambda p: p["devices"][0]["firmware"]["next_boot"].update(LINK_TYPE_P2="ETHERNET"),
     "devices[0].firmware.next_boot.LINK_TYPE_P2: 'ETHERNET': Unknown value ETHERNET"),
    (lambda p: p["devices"][1].update(vpi=False), "devices[1].vpi"),
    # without eth: here or in port_defaults (a port takes port_defaults' ib:/eth: when it has none)
    (lambda p: (p["devices"][1]["ports"][0].pop("eth"), p["port_defaults"].pop("eth")), "devices[1].ports[0].eth"),
    (lambda p: p["devices"][1]["ports"][0].update(link_layer="Ethernet"), "devices[1].ports[0].link_layer"),
    (lambda p: p["devices"][1]["ports"][0]["eth"].update(lid=3), "devices[1].ports[0].eth: unknown field(s) lid"),
    (lambda p: p["devices"][1]["ports"][0]["eth"].update(rate="200G"), "devices[1].ports[0].eth.rate"),
    (lambda p: p["devices"][0]["ports"][0]["ib"].update(lid=0), "devices[0].ports[0].ib.lid"),
    (lambda p: p["devices"][0]["firmware"].update(defaults={"NUM_OF_VFS": 200}),
     "devices[0].firmware.defaults.NUM_OF_VFS: 200 is more than the card's max_vfs 127"),
])
def test_vpi_profile_errors_name_the_field(mutate, field):
    prof = simhost.load("cx7_vpi_2p")
    mutate(prof)
    with pytest.raises(simhost.ProfileError, match=re.escape(field)):
        simhost.expand(prof)


def test_a_non_vpi_card_has_no_link_type():
    prof = json.loads(json.dumps(CX4LX))   # an EN card (the CX-7s of the bundled profiles are all VPI)
    prof["devices"][0]["firmware"] = {"next_boot": {"LINK_TYPE_P1": "IB"}}
    with pytest.raises(simhost.ProfileError, match=r"devices\[0\]\.firmware\.next_boot\.LINK_TYPE_P1: not a parameter"):
        simhost.expand(prof)
    names = [name for name, _p, _port in firmware.param_table(1, False)]
    assert "LINK_TYPE_P1" not in names and "CNP_DSCP_P1" in names and "CNP_DSCP_P2" not in names
