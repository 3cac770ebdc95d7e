"""RDMA device names in the simulated host (simhost/naming.py) and the ``rdma`` stand-in (simhost/tools/rdma.py): the
kernel's mlx5_<N> in PCI order, udev's rdma_rename at boot (the profile's pin, the rules on the host's disk over the
booted stack's), ``rdma dev set DEV name NEW`` at run time, firmware NV state keyed by PCI address across renames,
and the DGX/RoCE profiles of issue 23. Checked against real files: Debian 12's and MLNX_OFED's
60-rdma-persistent-naming.rules, the DGX H100 user guide's port table, renamed devices in the wild, rdma captures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fixtures_path import real_fixtures

KIT = Path(__file__).resolve().parents[2] / "simhost"
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import fabric, localhost, naming, profile as sp, sysfs  # noqa: E402  pylint: disable=wrong-import-position

RDMA = real_fixtures() / "rdma-outputs"
STACK = real_fixtures() / "ib-stack"
DGX = ["ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0", "ibp154s0", "rocep170s0f0", "rocep170s0f1", "ibp192s0", "ibp206s0",
       "ibp220s0"]
ROCE = ["rocep24s0", "rocep42s0", "rocep58s0", "rocep93s0", "rocep154s0", "rocep171s0", "rocep189s0", "rocep193s0f0",
        "rocep193s0f1", "rocep219s0"]
RULE = 'ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k {}"\n'


@pytest.fixture(autouse=True, name="host_disk")
def _host_disk(tmp_path, monkeypatch):
    """Each test's host: its own NV store and cables, its own disk (udev rules, /boot, /lib/modules)."""
    disk = tmp_path / "disk"
    (disk / "boot").mkdir(parents=True)
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))
    monkeypatch.setenv("SIMHOST_DISK_ROOT", str(disk))
    monkeypatch.delenv("SIMHOST_UDEV_ROOT", raising=False)
    return disk


def rules(disk: Path, text: str, name: str = naming.RULES_FILE, rel: str = "etc/udev/rules.d") -> Path:
    path = disk / rel / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def boot(name, root: Path, host_index=None, **changes) -> dict:
    prof = simhost.load(name) if isinstance(name, str) else json.loads(json.dumps(name))
    prof.update(changes)
    return simhost.build_tree(prof, root, host_index)


def names(exp: dict) -> list:
    return [d["name"] for d in sorted(exp["devices"], key=lambda d: d["index"])]


def run(root: Path, tool: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "SIMHOST_SYSFS_ROOT": str(root), "LC_ALL": "C"}
    return subprocess.run([sys.executable, str(KIT / "bin" / tool), *args], capture_output=True, text=True, env=env,
                          input=stdin, check=False, timeout=60)


# ----------------------------------------------------------------------------------- rdma_rename policies
@pytest.mark.parametrize("prefix, pci, multi, expected", [
    ("ib", "0000:18:00.0", False, "ibp24s0"),               # single-function IB card: no f<fn>
    ("roce", "0000:06:00.1", True, "rocep6s0f1"),           # the capture rdma-dev-01's name
    ("roce", "0000:c1:00.0", True, "rocep193s0f0"),         # function 0 of a dual-function card: f0 (header type)
    ("ib", "0000:00:0c.4", True, "ibp0s12f4"),              # the rules file's own example
    ("ib", "0001:02:00.0", False, "ibP1p2s0"),              # a non-zero domain: P<domain>, decimal
    ("roce", "000a:81:1f.0", False, "roceP10p129s31"),      # decimal domain, bus and slot
    ("ib", "0000:3b:00.1", False, "ibp59s0f1"),             # a function above 0 always shows
])
def test_pci_names_are_rdma_rename_by_pci(prefix, pci, multi, expected):
    assert naming.pci_name(prefix, pci, multi) == expected


def test_guid_and_onboard_names():
    assert naming.guid_name("roce", "5254:00c0:fe12:3455") == "rocex525400c0fe123455"   # the rules file's example
    assert naming.guid_name("ib", "a088c203005d4100") == "ibxa088c203005d4100"
    assert naming.onboard_name("ib", 3) == "ibo3"
    assert naming.onboard_name("roce", 16383) == "roceo16383" and naming.onboard_name("roce", 16384) is None


def _dev(**kw):
    base = {"kernel_name": "mlx5_0", "index": 0, "pci": "0000:18:00.0", "protocol": "InfiniBand",
            "node_guid": "a088c203005d4100", "multi_function": False, "acpi_index": None, "attrs": {}}
    return {**base, **kw}


@pytest.mark.parametrize("policy, dev, expected", [
    ("NAME_FALLBACK", {}, "ibp24s0"),
    ("NAME_FALLBACK", {"acpi_index": 2}, "ibo2"),                      # onboard first
    ("NAME_FALLBACK", {"pci": None}, None),                           # no PCI: NOT by GUID (str2policy)
    ("NAME_PCI", {"protocol": "Ethernet", "multi_function": True}, "rocep24s0f0"),
    ("NAME_GUID", {}, "ibxa088c203005d4100"),
    ("NAME_ONBOARD", {}, None),                                       # not onboard: no name, exit 1
    ("NAME_KERNEL", {}, None),
])
def test_rdma_rename_policies(policy, dev, expected):
    current = {"mlx5_0": 0}
    status, name = naming.rdma_rename(["mlx5_0", policy], _dev(**dev), current)
    assert name == expected
    assert status == (0 if expected or policy == "NAME_KERNEL" else 1)
    assert list(current) == [expected or "mlx5_0"]


def test_rdma_rename_failures():
    current = {"mlx5_0": 0, "ibp24s0": 1}
    assert naming.rdma_rename(["mlx5_0", "NAME_PCI"], _dev(), current) == (1, None)   # -EEXIST: keeps its name
    assert naming.rdma_rename(["mlx5_9", "NAME_PCI"], _dev(), current) == (1, None)   # no device called %k
    assert naming.rdma_rename(["mlx5_0", "NAME_BOGUS"], _dev(), current) == (1, None)
    assert naming.rdma_rename(["mlx5_0", "NAME_FIXED"], _dev(), current) == (1, None)  # no name given
    assert naming.rdma_rename(["-v", "mlx5_0", "NAME_FIXED", "data0"], _dev(), current) == (0, "data0")


def test_kernel_names_follow_pci_order():
    pcis = ["0000:dc:00.0", "0000:18:00.0", "0000:aa:00.1", "0000:aa:00.0"]
    assert naming.kernel_names(pcis, [None] * 4) == ["mlx5_3", "mlx5_0", "mlx5_2", "mlx5_1"]
    assert naming.kernel_names(pcis, [None, "mlx5_1", None, None]) == ["mlx5_3", "mlx5_1", "mlx5_2", "mlx5_0"]


# ------------------------------------------------------------------------------------------ real files
def test_shipped_rules_files_say_fallback_inbox_and_kernel_on_mlnx():
    def policies(name):
        found, warnings = naming.parse_rules((STACK / name).read_text(), name)
        assert not warnings
        return [r["argv"][1] for r in found]
    assert policies("rdma-persistent-naming-rules-shipped-01.txt") == ["NAME_FALLBACK"]   # Debian 12 rdma-core 44.0-2
    assert policies("rdma-persistent-naming-rules-shipped-02.txt") == ["NAME_KERNEL"]     # MLNX_OFED's rdma-core
    assert policies("rdma-persistent-naming-rules-shipped-03.txt") == ["NAME_KERNEL"]     # the commented example stays out
    ours = naming.parse_rules(naming.stack_rules_text("inbox"), "x")[0][0]["argv"]
    assert ours == naming.parse_rules((STACK / "rdma-persistent-naming-rules-shipped-01.txt").read_text(), "x")[0][0]["argv"]
    for provider in ("mlnx_ofed", "doca"):
        assert naming.parse_rules(naming.stack_rules_text(provider), "x")[0][0]["argv"] == ["%k", "NAME_KERNEL"]
    assert naming.stack_rules_text("none") is None


def test_rule_lines_as_udev_reads_them():
    found, warnings = naming.parse_rules(
        'SUBSYSTEM=="net", ACTION=="add", NAME="x"\n'                               # no rdma_rename: not a naming rule
        'ACTION=="add" PROGRAM="rdma_rename %k NAME_PCI"\n'                         # blanks separate keys too
        '  # ACTION=="add", PROGRAM="rdma_rename %k NAME_GUID"\n'
        'KERNEL=="mlx5_*", \\\n  PROGRAM="/usr/lib/udev/rdma_rename %k NAME_FIXED a0"\n'
        'SUBSYSTEM=="net" garbage\n'                                                # broken, but no rdma_rename
        'ACTION=="add", PROGRAM="rdma_rename %k NAME_PCI" junk\n', "x.rules")
    assert [(r["line"], r["argv"]) for r in found] == [(2, ["%k", "NAME_PCI"]), (4, ["%k", "NAME_FIXED", "a0"])]
    assert warnings == ["x.rules:7: invalid rule (not KEY==\"value\" at 'junk'), ignored"]


def test_dgx_h100_port_table_is_kernel_names_in_pci_order_and_systemd_netdevs():
    rows = [line.split("\t") for line in (RDMA / "dgx-h100-network-ports-01.txt").read_text().splitlines()[1:]]
    mlx = [r for r in rows if r[4].startswith("mlx5_")]
    pcis = ["0000:" + r[1] for r in mlx]
    assert naming.kernel_names(pcis, [None] * len(pcis)) == [r[4] for r in mlx]      # MOFED keeps the kernel's names
    slots = {}
    for pci in pcis:
        slots.setdefault(pci[:-2], []).append(pci)
    for pci, row in zip(pcis, mlx):
        multi = len(slots[pci[:-2]]) > 1
        ib, eth = (row[2], row[3]) if row[2].startswith("ib") else (row[3], row[2])
        assert sp._pci_netdev_name(pci, int(pci[-1]), "InfiniBand", multi) == ib   # pylint: disable=protected-access
        assert sp._pci_netdev_name(pci, int(pci[-1]), "Ethernet", multi) == eth    # pylint: disable=protected-access
        # the NAME_FALLBACK name of its RDMA device on an inbox host: the IPoIB netdev's own shape
        assert naming.pci_name("ib", pci, multi) == ib


def test_renamed_devices_in_the_wild_have_rdma_renames_shape():
    found = re.findall(r"^Infiniband device '(\S+)' port 1 status:.*?link_layer:\t (\w+)",
                       (RDMA / "ibstatus-03.txt").read_text(), re.M | re.S)
    assert len(found) == 9
    dev = (RDMA / "rdma-dev-01.txt").read_text().split()[1].rstrip(":")
    for name, link_layer in found + [(dev, "Ethernet")]:
        m = re.fullmatch(r"(ib|roce)p(\d+)s(\d+)(?:f(\d+))?", name)
        assert m and m.group(1) == naming.PROTOCOL_PREFIX[link_layer], name
        pci = "0000:%02x:%02x.%d" % (int(m.group(2)), int(m.group(3)), int(m.group(4) or 0))
        assert naming.pci_name(m.group(1), pci, m.group(4) is not None) == name


# ------------------------------------------------------------------------------------------- at boot
def test_inbox_profiles_get_fallback_names_vendor_stacks_keep_kernel_names(tmp_path):
    exp = boot("dgx_ib_8x_bf3", tmp_path / "dgx")
    assert names(exp) == DGX
    assert [d["kernel_name"] for d in sorted(exp["devices"], key=lambda d: d["index"])] == [f"mlx5_{i}" for i in range(10)]
    assert exp["rdma_naming"]["files"] == [f"/lib/udev/rules.d/{naming.RULES_FILE} (inbox rdma-core, modelled)"]
    assert sysfs.ib_devices(tmp_path / "dgx") == sorted(DGX)
    for provider, version in (("mlnx_ofed", "24.10-1.1.4.0"), ("doca", "25.10-1.7.1.0")):
        exp = boot("dgx_ib_8x_bf3", tmp_path / provider, stack={"provider": provider, "version": version})
        assert names(exp) == [f"mlx5_{i}" for i in range(10)]
    exp = boot("roce_8x400_2x200", tmp_path / "r")
    assert names(exp) == ROCE


def test_existing_profiles_are_pinned_to_kernel_names(tmp_path, host_disk):
    rules(host_disk, RULE.format("NAME_PCI"))
    for name in sp.list_profiles():
        prof = simhost.load(name)
        exp = simhost.expand(prof)
        if name.startswith(("dgx_", "roce_8x400")):
            assert "rdma_naming" not in prof
            continue
        if exp["devices"]:
            assert prof["rdma_naming"] == "kernel", name
            assert names(exp) == [d["kernel_name"] for d in exp["devices"]] == [f"mlx5_{i}" for i in range(len(exp["devices"]))]
    # the pin is the image's rule file: a site's file in /etc/udev/rules.d overrides it (rdma_device_naming)
    exp = boot("cx7_vpi_2p", tmp_path / "vpi")
    assert names(exp) == ["ibp12s0f0", "rocep12s0f1"]
    assert exp["rdma_naming"]["files"] == ["/etc/udev/rules.d/60-rdma-persistent-naming.rules"]
    rules(host_disk, "")  # an empty file masks: the image's pin again
    exp = boot("cx7_vpi_2p", tmp_path / "vpi")
    assert names(exp) == ["mlx5_0", "mlx5_1"] and exp["rdma_naming"]["pin"] == "kernel"


@pytest.mark.parametrize("pin, expected", [
    ("kernel", [f"mlx5_{i}" for i in range(10)]),
    ("pci", DGX),
    ("fallback", DGX),
])
def test_profile_pin(tmp_path, host_disk, pin, expected):
    assert names(boot("dgx_ib_8x_bf3", tmp_path / "sys", rdma_naming=pin)) == expected
    rules(host_disk, RULE.format("NAME_GUID"))  # the site's rule overrides the image's pin
    assert all(name.startswith(("ibx", "rocex")) for name in names(boot("dgx_ib_8x_bf3", tmp_path / "sys", rdma_naming=pin)))


def test_guid_pin_and_bad_pin(tmp_path):
    exp = boot("dgx_ib_8x_bf3", tmp_path / "sys", rdma_naming="guid")
    assert all(re.fullmatch(r"(ibx|rocex)[0-9a-f]{16}", n) for n in names(exp))
    assert names(exp)[0] == "ibx" + exp["devices"][0]["node_guid"]
    with pytest.raises(simhost.ProfileError, match=r"rdma_naming: 'NAME_PCI' is not one of: kernel, fallback"):
        simhost.expand({**simhost.load("dgx_ib_8x_bf3"), "rdma_naming": "NAME_PCI"})


def test_the_sites_rules_file_overrides_the_stacks(tmp_path, host_disk):
    rules(host_disk, RULE.format("NAME_KERNEL"))
    exp = boot("dgx_ib_8x_bf3", tmp_path / "sys")
    assert names(exp) == [f"mlx5_{i}" for i in range(10)]
    assert exp["rdma_naming"]["files"] == [f"/etc/udev/rules.d/{naming.RULES_FILE}"]
    # /etc beats /run, /run beats the stack's; a file linked to /dev/null masks it: no rule, kernel names
    (host_disk / "etc/udev/rules.d" / naming.RULES_FILE).unlink()
    rules(host_disk, RULE.format("NAME_GUID"), rel="run/udev/rules.d")
    assert names(boot("dgx_ib_8x_bf3", tmp_path / "sys"))[0].startswith("ibx")
    (host_disk / "etc/udev/rules.d" / naming.RULES_FILE).symlink_to("/dev/null")
    exp = boot("dgx_ib_8x_bf3", tmp_path / "sys")
    assert names(exp) == [f"mlx5_{i}" for i in range(10)]
    assert exp["rdma_naming"]["files"] == [f"/etc/udev/rules.d/{naming.RULES_FILE} (masked)"]
    # the localhost helper takes the rules from the host's disk
    hdir = tmp_path / "local"
    rules(hdir / "disk", RULE.format("NAME_KERNEL"))
    assert names(localhost.boot(simhost.load("roce_8x400_2x200"), hdir, 0)) == [f"mlx5_{i}" for i in range(10)]
    assert names(localhost.boot(simhost.load("roce_8x400_2x200"), tmp_path / "other", 0)) == ROCE


def test_rules_with_matches_fixed_names_and_the_first_rename_wins(tmp_path, host_disk):
    guid = simhost.expand(simhost.load("roce_8x400_2x200"))["devices"][7]["node_guid"]
    groups = ":".join(guid[i:i + 4] for i in range(0, 16, 4))
    rules(host_disk, "# the storage card's port 1 keeps a fixed name\n"
          'ACTION=="add", SUBSYSTEM=="infiniband", ATTR{node_guid}=="%s", \\\n'
          '    PROGRAM="rdma_rename %%k NAME_FIXED storage0"\n'
          'ACTION=="add", KERNEL=="mlx5_9", PROGRAM="rdma_rename %%k NAME_FIXED rocep24s0"\n'
          'ACTION=="remove", PROGRAM="rdma_rename %%k NAME_FIXED gone"\n'
          'ACTION=="add", SUBSYSTEM=="infiniband", DRIVERS=="mlx5_core", PROGRAM="rdma_rename %%k NAME_GUID"\n' % groups,
          name="50-site.rules")
    exp = boot("roce_8x400_2x200", tmp_path / "sys")
    got = names(exp)
    assert got[7] == "storage0"                    # 50-site.rules runs before 60-...: its rename wins
    # mlx5_9's NAME_FIXED rocep24s0 fails (-EEXIST: mlx5_0 has that name), so the stack's NAME_FALLBACK names it
    assert got[:7] + got[8:] == ROCE[:7] + ROCE[8:]
    assert any("DRIVERS is not simulated" in w for w in exp["rdma_naming"]["warnings"])
    assert exp["devices"][7]["named_by"] == "/etc/udev/rules.d/50-site.rules:2"
    assert exp["devices"][9]["named_by"] == f"/lib/udev/rules.d/{naming.RULES_FILE}:2"


def test_names_after_a_vendor_stack_install_follow_the_next_boot(tmp_path, host_disk):
    root = tmp_path / "run/sys"
    assert names(boot("roce_8x400_2x200", root)) == ROCE
    release = (root.parent / "kernel-release").read_text().strip()
    ko = host_disk / "lib/modules" / release / "updates/dkms/mlx5_core.ko"      # DKMS built the vendor driver
    ko.parent.mkdir(parents=True)
    ko.write_bytes(b"\x7fELF\x00version=25.10-OFED.25.10.1.7.1\x00")
    (host_disk / "usr/bin").mkdir(parents=True)
    (host_disk / "usr/bin/ofed_info").write_text('#!/bin/bash\necho OFED-internal-25.10-1.7.1.0:\n')
    assert names(json.loads((root / ".simhost/profile.json").read_text())) == ROCE   # installed, not booted yet
    exp = boot("roce_8x400_2x200", root)                                          # the next boot (driver reload)
    assert exp["stack"]["provider"] == "doca" and names(exp) == [f"mlx5_{i}" for i in range(10)]
    assert run(root, "rdma", "dev").stdout.splitlines()[7].startswith("7: mlx5_7: node_type ca fw 28.42.1000 ")


def test_booted_names_api_and_cli(host_disk):
    got = simhost.booted_names(simhost.load("dgx_ib_8x_bf3"), 1)
    assert [d["name"] for d in got] == DGX and [d["index"] for d in got] == list(range(10))
    assert got[5] == {"index": 5, "pci": "0000:aa:00.0", "kernel_name": "mlx5_5", "name": "rocep170s0f0",
                      "named_by": f"/lib/udev/rules.d/{naming.RULES_FILE}:2", "link_layer": "Ethernet",
                      "netdevs": ["enp170s0f0np0"]}
    rules(host_disk, RULE.format("NAME_KERNEL"))
    env = {**os.environ, "PYTHONPATH": str(KIT)}
    out = subprocess.run([sys.executable, "-m", "simhost", "names", "--profile", "roce_8x400_2x200"],
                         capture_output=True, text=True, env=env, check=True).stdout.splitlines()
    assert out[7] == "7\t0000:c1:00.0\tmlx5_7\tmlx5_7\tenp193s0f0np0\tkernel name"


def test_tree_has_what_rdma_rename_reads(tmp_path):
    root = tmp_path / "sys"
    boot("dgx_ib_8x_bf3", root)
    fn = sysfs.pci_function("rocep170s0f1", root)
    assert os.path.basename(os.readlink(fn / "subsystem")) == "pci"
    cfg = (fn / "config").read_bytes()
    assert len(cfg) == 256 and cfg[:4] == bytes.fromhex("b315dca2") and cfg[0x0E] == 0x80 and cfg[0x0B] == 0x02
    single = sysfs.pci_function("ibp24s0", root)
    assert (single / "config").read_bytes()[0x0E] == 0x00 and (single / "config").read_bytes()[0x0A] == 0x07
    assert not (single / "acpi_index").exists()
    for cls in ("infiniband_verbs/uverbs5", "infiniband_mad/umad5"):
        assert (root / "class" / cls / "ibdev").read_text() == "rocep170s0f0\n"


def test_onboard_index(tmp_path):
    prof = simhost.load("roce_8x400_2x200")
    prof["devices"][0]["acpi_index"] = 3
    exp = boot(prof, tmp_path / "sys")
    assert names(exp)[0] == "roceo3" and names(exp)[1:] == ROCE[1:]
    assert sysfs.read(sysfs.pci_function("roceo3", tmp_path / "sys") / "acpi_index") == "3"


# ------------------------------------------------------------------------------------------ rdma tool
DEV_RE = re.compile(r"^(\d+): (\S+): node_type ca fw \d+\.\d+\.\d+ node_guid ([0-9a-f]{4}:){3}[0-9a-f]{4} "
                    r"sys_image_guid ([0-9a-f]{4}:){3}[0-9a-f]{4}$")
LINK_IB_RE = re.compile(r"^link (\S+)/(\d+) subnet_prefix fe80:0000:0000:0000 lid \d+ sm_lid \d+ lmc \d+ "
                        r"state [A-Z_]+ physical_state [A-Z_]+$")
LINK_ETH_RE = re.compile(r"^link (\S+)/(\d+) state [A-Z_]+ physical_state [A-Z_]+ netdev \S+$")


def test_rdma_dev_and_link_are_the_captures_lines(tmp_path):
    for line in (RDMA / "rdma-dev-01.txt").read_text().splitlines():
        assert DEV_RE.match(line.rstrip()), line
    for name in ("rdma-link-01.txt", "rdma-link-02.txt", "rdma-link-07.txt"):
        for line in (RDMA / name).read_text().splitlines():
            assert LINK_IB_RE.match(line.rstrip()) or LINK_ETH_RE.match(line.rstrip()), line
    root = tmp_path / "sys"
    boot("dgx_ib_8x_bf3", root)
    res = run(root, "rdma", "dev")
    assert res.returncode == 0 and res.stderr == ""
    lines = res.stdout.splitlines()
    assert [DEV_RE.match(ln.rstrip()).group(1, 2) for ln in lines] == [(str(i), n) for i, n in enumerate(DGX)]
    assert all(ln.endswith("sys_image_guid " + ln.split()[-1] + " ") for ln in lines)   # every field has its blank
    assert run(root, "rdma", "dev", "show").stdout == res.stdout == run(root, "rdma", "d", "l").stdout
    assert run(root, "rdma", "dev", "show", "ibp220s0").stdout == lines[9] + "\n"
    links = run(root, "rdma", "link").stdout.splitlines()
    assert [ln.split()[1] for ln in links] == [f"{n}/1" for n in DGX]
    assert LINK_IB_RE.match(links[0].rstrip()) and " lid 65 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP " in links[0]
    assert links[5] == "link rocep170s0f0/1 state ACTIVE physical_state LINK_UP netdev enp170s0f0np0 "
    assert run(root, "rdma", "link", "show", "rocep170s0f1/1").stdout == links[6] + "\n"
    assert "netdev enp170s0f1np1 netdev_index " in run(root, "rdma", "-d", "link", "show", "rocep170s0f1/1").stdout


def test_rdma_json_and_details(tmp_path):
    root = tmp_path / "sys"
    exp = boot("roce_8x400_2x200", root)
    devs = json.loads(run(root, "rdma", "-j", "dev").stdout)
    assert [d["ifname"] for d in devs] == ROCE and devs[7] == {
        "ifindex": 7, "ifname": "rocep193s0f0", "node_type": "ca", "fw": "28.42.1000",
        "node_guid": ":".join(exp["devices"][7]["node_guid"][i:i + 4] for i in range(0, 16, 4)),
        "sys_image_guid": ":".join(exp["devices"][7]["sys_image_guid"][i:i + 4] for i in range(0, 16, 4))}
    assert run(root, "rdma", "-j", "dev").stdout.startswith('[{"ifindex":0,"ifname":"rocep24s0","node_type":"ca",')
    pretty = run(root, "rdma", "-j", "-p", "link", "show", "rocep24s0/1").stdout
    assert pretty == ('[ {\n        "ifindex": 0,\n        "ifname": "rocep24s0",\n        "port": 1,\n'
                      '        "state": "ACTIVE",\n        "physical_state": "LINK_UP",\n        "netdev": "enp24s0np0",\n'
                      '        "netdev_index": %d\n    } ]\n' % int(sysfs.read(root / "class/net/enp24s0np0/ifindex")))
    detail = json.loads(run(root, "rdma", "-d", "-j", "dev", "show", "rocep24s0").stdout)[0]
    assert detail["adaptive-moderation"] is True and detail["caps"][:2] == ["BAD_PKEY_CNTR", "BAD_QKEY_CNTR"]
    text = run(root, "rdma", "-d", "dev", "show", "rocep24s0").stdout.splitlines()
    assert text[0].endswith(" adaptive-moderation on ") and text[1].startswith("    caps: <BAD_PKEY_CNTR, ")
    assert text[1].endswith(", ON_DEMAND_PAGING, SG_GAPS_REG, RAW_SCATTER_FCS, PCI_WRITE_END_PADDING, UNKNOWN, UNKNOWN, UNKNOWN>")
    assert run(root, "rdma", "dev", "set", "rocep24s0", "adaptive-moderation", "off").returncode == 0
    assert "adaptive-moderation off " in run(root, "rdma", "-d", "dev", "show", "rocep24s0").stdout
    assert run(root, "rdma", "-j", "dev", "show", "nosuch").stdout == "[]\n"


@pytest.mark.parametrize("args, rc, out, err", [
    (["-V"], 0, "rdma utility, iproute2-6.1.0\n", ""),
    (["dev", "show", "nosuch"], 1, "", "Wrong device name - nosuch\n"),
    (["link", "show", "rocep24s0"], 1, "", "Wrong device name\n"),       # 6.1: DEV/PORT, a bare DEV is refused
    (["link", "show", "rocep24s0/2"], 1, "", "Wrong device name\n"),
    (["dev", "set"], 1, "", "Please provide device name.\n"),
    (["dev", "set", "rocep24s0", "name"], 1, "", "Please provide device new name.\n"),
    (["dev", "set", "rocep24s0", "name", "rocep42s0"], 1, "", "error: File exists\n"),
    (["dev", "set", "rocep24s0", "name", ""], 1, "", "error: Invalid argument\n"),
    (["dev", "set", "rocep24s0", "name", "x" * 65], 1, "", "Error: Attribute failed policy validation.\n"
                                                           "error: Invalid argument\n"),
    (["dev", "set", "rocep24s0", "colour", "red"], 0, "", "Unknown parameter 'colour'.\n"),
    (["dev", "set", "rocep24s0", "netns", "blue"], 1, "", 'Cannot open network namespace "blue": No such file or directory\n'),
    (["bogus"], 0, "", "Unknown object 'bogus'.\n"),
    (["-Z", "dev"], 1, "USAGE", "Unknown option.\n"),
    (["-b"], 1, "", "-b option requires an argument\n"),
    (["resource"], 1, "", "simhost: rdma resource: not simulated\n"),
])
def test_rdma_errors_and_exit_codes(tmp_path, monkeypatch, args, rc, out, err):
    monkeypatch.setenv("SIMHOST_NETNS_RUN_DIR", str(tmp_path / "netns"))
    root = tmp_path / "sys"
    boot("roce_8x400_2x200", root)
    res = run(root, "rdma", *args)
    usage = run(root, "rdma", "help").stdout
    assert usage.startswith("Usage: rdma [ OPTIONS ] OBJECT { COMMAND | help }\n       rdma [ -f[orce] ] -b[atch] filename\n")
    assert (res.returncode, res.stdout, res.stderr) == (rc, usage if out == "USAGE" else out, err)
    assert names(sysfs.simhost_profile(root)) == ROCE            # no failed command renamed anything


def test_rdma_without_ib_core(tmp_path):
    root = tmp_path / "sys"
    boot("no_rdma", root)
    res = run(root, "rdma", "dev")
    assert (res.returncode, res.stdout, res.stderr) == (1, "", "Failed to open NETLINK_RDMA socket\n")
    assert run(root, "rdma", "-V").returncode == 0


# ------------------------------------------------------------------------------------ rename at run time
def test_rename_is_seen_by_every_tool_until_the_next_boot(tmp_path):
    root = tmp_path / "sys"
    boot("dgx_ib_8x_bf3", root)
    res = run(root, "rdma", "dev", "set", "rocep170s0f0", "name", "storage0")
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    assert run(root, "rdma", "dev", "set", "storage0", "name", "storage0").returncode == 0     # same name: no-op
    want = DGX[:5] + ["storage0"] + DGX[6:]
    assert [ln.split()[1].rstrip(":") for ln in run(root, "rdma", "dev").stdout.splitlines()] == want
    assert "5: storage0: node_type ca fw 32.41.1000 " in run(root, "rdma", "dev").stdout
    assert run(root, "ibv_devinfo", "-l").stdout.split("\n")[6] == "\tstorage0"
    assert "storage0" in run(root, "ibstat", "-l").stdout.split() and "rocep170s0f0" not in run(root, "ibstat", "-l").stdout
    assert "storage0 port 1 ==> enp170s0f0np0 (Up)" in run(root, "ibdev2netdev").stdout
    assert run(root, "show_gids", "storage0").stdout.splitlines()[2].startswith("storage0\t1\t0\t")
    assert "link storage0/1 state ACTIVE physical_state LINK_UP netdev enp170s0f0np0 " in run(root, "rdma", "link").stdout
    assert (root / "class/infiniband_verbs/uverbs5/ibdev").read_text() == "storage0\n"
    assert sysfs.ib_name_of_pci("0000:aa:00.0", root) == "storage0"
    exp = sysfs.simhost_profile(root)
    assert exp["devices"][5]["name"] == "storage0" and exp["devices"][5]["kernel_name"] == "mlx5_5"
    # MFT's mlxconfig takes any RDMA device name; mstflint's mstconfig only mthca*/mlx4_*/mlx5_* (mstflint PR #1930)
    assert "Device:             storage0" in run(root, "mlxconfig", "-d", "storage0", "q", "LINK_TYPE_P1").stdout
    bad = run(root, "mstconfig", "-d", "storage0", "q")
    assert bad.returncode == 3 and bad.stderr == "Unable to parse device name storage0\n"
    # a reboot names the devices afresh
    assert names(boot("dgx_ib_8x_bf3", root)) == DGX


def test_state_of_a_renamed_device_goes_with_it(tmp_path):
    root = tmp_path / "sys"
    boot("roce_8x400_2x200", root)
    state = root / ".simhost/state/rdma_cm.json"
    state.write_text(json.dumps({"rocep24s0": {"1": {"default_roce_mode": "IB/RoCE v1", "default_roce_tos": 106}}}))
    assert naming.rename(root, "rocep24s0", "rail1") == (0, "rail1")
    assert json.loads(state.read_text()) == {"rail1": {"1": {"default_roce_mode": "IB/RoCE v1", "default_roce_tos": 106}}}
    assert naming.rename(root, "rail1", "rocep42s0")[0] == 17 and naming.rename(root, "nosuch", "x")[0] == 19
    assert naming.rename(root, "rail1", "y" * 64) == (0, "y" * 63)               # cut to IB_DEVICE_NAME_MAX - 1


def test_nv_state_is_keyed_by_pci_and_survives_a_rename(tmp_path):
    root = tmp_path / "sys"
    boot("roce_8x400_2x200", root)
    assert run(root, "rdma", "dev", "set", "rocep193s0f1", "name", "storage1").returncode == 0
    out = run(root, "mlxconfig", "-y", "-d", "storage1", "set", "LINK_TYPE_P2=IB").stdout
    assert "Applying... Done!" in out
    nv = json.loads((tmp_path / "persist/mlxconfig/0000:c1:00.0.json").read_text())
    assert nv["next_boot"]["LINK_TYPE_P2"] == 1 and nv["pci"] == "0000:c1:00.0"
    assert run(root, "rdma", "dev", "set", "storage1", "name", "other").returncode == 0
    q = run(root, "mstconfig", "-d", "0000:c1:00.1", "-e", "q", "LINK_TYPE_P2").stdout
    assert re.search(r"LINK_TYPE_P2\s+IB\(1\)\s+ETH\(2\)\s+IB\(1\)", q), q
    exp = boot("roce_8x400_2x200", root)                                           # reboot: NV applies, names afresh
    assert names(exp) == ROCE[:8] + ["ibp193s0f1", "rocep219s0"]
    assert exp["devices"][8]["ports"][0]["link_layer"] == "InfiniBand"
    assert run(root, "rdma", "link", "show", "ibp193s0f1/1").stdout.startswith("link ibp193s0f1/1 subnet_prefix ")


def test_netsync_finds_a_renamed_devices_ports(tmp_path):
    from simhost import netdev   # pylint: disable=import-outside-toplevel
    root = tmp_path / "sys"
    exp = boot("roce_8x400_2x200", root)
    rails = netdev.rail_ports(exp)
    assert [r["pci"] for r in rails][:2] == ["0000:18:00.0", "0000:2a:00.0"]
    naming.rename(root, "rocep24s0", "rail1")
    links = [{"name": "enp24s0np0", "ifindex": 9, "mac": rails[0]["mac"], "mtu": 9000, "operstate": "UP",
              "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "ipv4": ["10.0.1.11/24"]}]
    report = netdev.sync_tree(root, links, exp)                                  # the daemon's boot-time profile
    assert report["enp24s0np0"]["link"] and not (root / "class/infiniband/rocep24s0").exists()


# ----------------------------------------------------------------------------------------- the profiles
def test_dgx_profile(tmp_path):
    exp = boot("dgx_ib_8x_bf3", tmp_path / "sys", host_index=1)
    devs = sorted(exp["devices"], key=lambda d: d["index"])
    ib = [d for d in devs if d["ports"][0]["link_layer"] == "InfiniBand"]
    assert [d["pci"][5:7] for d in ib] == ["18", "40", "4f", "5e", "9a", "c0", "ce", "dc"]
    assert all(d["vpi"] and d["part_number"] == "MCX75310AAS-NEAT" for d in ib)
    assert [d["ports"][0]["netdev"] for d in ib] == [n for n in DGX if n.startswith("ib")]
    assert [(p["state"], p["lid"], p["sm_lid"], p["rate"]) for p in (d["ports"][0] for d in ib)] == [
        ("ACTIVE", 0x41 + i + 16, 1, "400 Gb/sec (4X NDR)") for i in range(8)]
    assert [d["ports"][0]["ipv4"] for d in ib] == [f"10.10.{r}.12/24" for r in range(8)]
    bf3 = [d for d in devs if d["pci"].startswith("0000:aa")]
    assert [(d["name"], d["hca_type"], d["part_number"]) for d in bf3] == [
        ("rocep170s0f0", "MT41692", "900-9D3B6-00CV-AA0"), ("rocep170s0f1", "MT41692", "900-9D3B6-00CV-AA0")]
    ports = [d["ports"][0] for d in bf3]
    assert [(p["netdev"], p["ipv4"], p["rate"], p["state"]) for p in ports] == [
        ("enp170s0f0np0", "10.50.0.12/24", "200 Gb/sec (2X NDR)", "ACTIVE"),
        ("enp170s0f1np1", "10.51.0.12/24", "200 Gb/sec (2X NDR)", "ACTIVE")]
    assert [p["gids"][3]["type"] for p in ports] == ["RoCE v2"] * 2 and ports[0]["gids"][3]["gid"].endswith("0a32:000c")
    assert exp["gpu"] == {"driver": "nvidia", "version": "550.54.15"}
    q = run(tmp_path / "sys", "mstconfig", "-d", "aa:00.1", "-e", "q", "LINK_TYPE_P1", "LINK_TYPE_P2").stdout
    assert "Device type:        BlueField3" in q and re.search(r"LINK_TYPE_P2\s+ETH\(2\)\s+ETH\(2\)\s+ETH\(2\)", q)
    q = run(tmp_path / "sys", "mstconfig", "-d", "18:00.0", "-e", "q", "LINK_TYPE_P1").stdout
    assert re.search(r"LINK_TYPE_P1\s+IB\(1\)\s+IB\(1\)\s+IB\(1\)", q)                 # VPI, booted IB
    # the fabric sees the 8 IB ports, one rail each, node ids with the booted names
    prof = dict(simhost.load("dgx_ib_8x_bf3"), ib_fabric={"server": "fab", "hostname": "dgx01"})
    text = fabric.netfile([{"host": "dgx01", "profile": prof}])
    assert '"dgx01 ibp24s0"' in text and '"dgx01 ibp220s0"' in text and "rocep170" not in text
    assert len(fabric.device_rails(simhost.expand(prof))) == 8


def test_roce_profiles_share_rails_in_pci_order(tmp_path):
    base = boot("roce_8x400_2x200", tmp_path / "a", host_index=0)
    alt = boot("roce_8x400_2x200_alt", tmp_path / "b", host_index=0)

    def rails(exp):
        ports = [d["ports"][0] for d in sorted(exp["devices"], key=lambda d: d["index"])]
        return [(p["ipv4"], p["mtu"], p["rate"]) for p in ports]
    assert rails(base) == [(f"10.0.{r}.11/24", 9000, "400 Gb/sec (4X NDR)") for r in range(1, 8)] + [
        ("10.60.0.11/24", 9000, "200 Gb/sec (2X NDR)"), ("10.61.0.11/24", 9000, "200 Gb/sec (2X NDR)"),
        ("10.0.8.11/24", 9000, "400 Gb/sec (4X NDR)")]
    assert rails(alt) == [("10.60.0.21/24", 9000, "200 Gb/sec (2X NDR)"), ("10.61.0.21/24", 9000, "200 Gb/sec (2X NDR)")] + [
        (f"10.0.{r}.21/24", 9000, "400 Gb/sec (4X NDR)") for r in range(1, 9)]
    assert names(alt) == ["rocep14s0f0", "rocep14s0f1", "rocep25s0", "rocep43s0", "rocep59s0", "rocep94s0",
                          "rocep155s0", "rocep172s0", "rocep190s0", "rocep222s0"]
    assert not set(names(alt)) & set(names(base))
    ids = [{d["node_guid"] for d in e["devices"]} | {d["ports"][0]["mac"] for d in e["devices"]} for e in (base, alt)]
    assert not ids[0] & ids[1]
    for exp in (base, alt):
        assert all(d["vpi"] and d["ports"][0]["link_layer"] == "Ethernet" for d in exp["devices"])
        assert all(sorted(d["ports"][0]["gids"]) == [0, 1, 2, 3] for d in exp["devices"])
    storage = [d for d in base["devices"] if d["part_number"] == "MCX755106AS-HEAT"]
    assert [d["firmware"]["next_boot"] for d in storage] == [{"LINK_TYPE_P1": 2, "LINK_TYPE_P2": 2}] * 2
    out = run(tmp_path / "a", "ibdev2netdev").stdout
    assert "rocep193s0f0 port 1 ==> enp193s0f0np0 (Up)\n" in out and "rocep219s0 port 1 ==> enp219s0np0 (Up)\n" in out
    gids = run(tmp_path / "a", "show_gids", "rocep219s0").stdout.splitlines()
    assert gids[5] == "rocep219s0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a00:080b\t10.0.8.11  \tv2\tenp219s0np0"


def test_vpi_parts_are_vpi_in_the_profiles():
    """Cards that are VPI in real life (MCX75310AAS-NEAT '400GbE / NDR IB', MCX755106AS-HEAT, BlueField-3) are VPI in
    the bundled profiles, booted as before by their NV LINK_TYPE; mixed_ib_roce_down stays as it is (see README)."""
    vpi_parts = {"MCX75310AAS-NEAT", "MCX755106AS-HEAT", "900-9D3B6-00CV-AA0"}
    for name in sp.list_profiles():
        if name == "mixed_ib_roce_down":
            continue
        for dev in simhost.expand(simhost.load(name))["devices"]:
            assert dev["vpi"] == (dev["part_number"] in vpi_parts), (name, dev["pci"])


def test_every_launcher_is_installed():
    play = yaml.safe_load((KIT / "install.yml").read_text())[0]["vars"]
    listed = set(play["__simhost_tools"]) | set(play["__simhost_ofed_tools"]) | set(play["__simhost_ib_tools"])
    launchers = {p.name for p in (KIT / "bin").iterdir()} - {"uname", "modprobe"}
    assert "rdma" in play["__simhost_tools"] and launchers == listed


def test_the_vendor_rdma_core_ships_kernel_names(tmp_path):
    """vendor/build.py re-versions Debian's rdma-core as the vendor's; its udev rule becomes NVIDIA's (NAME_KERNEL),
    its md5sums follow."""
    import hashlib   # pylint: disable=import-outside-toplevel
    import importlib.util   # pylint: disable=import-outside-toplevel
    sys.path.insert(0, str(KIT / "vendor"))
    spec = importlib.util.spec_from_file_location("simhost_vendor_build", KIT / "vendor/build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    shipped = (STACK / "rdma-persistent-naming-rules-shipped-01.txt").read_bytes()      # Debian 12's file
    rules_file = tmp_path / "lib/udev/rules.d" / naming.RULES_FILE
    rules_file.parent.mkdir(parents=True)
    rules_file.write_bytes(shipped)
    (tmp_path / "DEBIAN").mkdir()
    (tmp_path / "DEBIAN/md5sums").write_text(f"{hashlib.md5(shipped).hexdigest()}  lib/udev/rules.d/{naming.RULES_FILE}\n"
                                             "0123  lib/udev/rdma_rename\n")
    assert build.mlnx_naming_rules(tmp_path) == [rules_file]
    text = rules_file.read_text()
    assert text == shipped.decode().replace("NAME_FALLBACK\"", "NAME_KERNEL\"")
    assert [r["argv"] for r in naming.parse_rules(text, "x")[0]] == [["%k", "NAME_KERNEL"]]
    assert (tmp_path / "DEBIAN/md5sums").read_text().splitlines() == [
        f"{hashlib.md5(rules_file.read_bytes()).hexdigest()}  lib/udev/rules.d/{naming.RULES_FILE}",
        "0123  lib/udev/rdma_rename"]
    assert build.mlnx_naming_rules(tmp_path) == []                                      # a second run changes nothing
