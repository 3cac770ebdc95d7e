"""simhost kernel modules: module/<name>/, the /proc/modules view, the modprobe stand-in, modules-load.d, GPU marker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[2] / "simhost"
FIXTURES = Path(__file__).resolve().parents[1].parent / "fixtures/real/ib-stack"
sys.path.insert(0, str(KIT))

import simhost  # noqa: E402  pylint: disable=wrong-import-position
from simhost import kmod  # noqa: E402  pylint: disable=wrong-import-position
from simhost.profile import ProfileError  # noqa: E402  pylint: disable=wrong-import-position

RELEASE = "6.1.0-28-amd64"
MODPROBE = KIT / "bin/modprobe"


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))
    monkeypatch.setenv("SIMHOST_UNAME_R", RELEASE)
    monkeypatch.delenv("SIMHOST_PROC_MODULES", raising=False)


def build(tmp_path, name="cx7_ib_ndr_2x_gpu", **extra):
    root = tmp_path / "sys"
    exp = simhost.build_tree({**simhost.load(name), **extra}, root, host_index=0)
    return root, exp


def proc(root):
    return kmod.proc_modules_path(root).read_text(encoding="utf-8")


def modprobe(root, *args, proc_file=None):
    env = {**os.environ, "SIMHOST_SYSFS_ROOT": str(root), "SIMHOST_UNAME_R": RELEASE}
    if proc_file:
        env["SIMHOST_PROC_MODULES"] = str(proc_file)
    res = subprocess.run([sys.executable, str(MODPROBE), *args], capture_output=True, text=True, env=env, check=False)
    return res.returncode, res.stdout, res.stderr


# ------------------------------------------------------------------------------------------------ boot state
def test_boot_modules_in_module_dir_and_proc_view(tmp_path):
    root, _exp = build(tmp_path)
    assert sorted(os.listdir(root / "module")) == ["ib_cm", "ib_core", "ib_uverbs", "iw_cm", "mlx5_core", "mlx5_ib",
                                                   "nvidia", "rdma_cm"]
    assert (root / "module/nvidia/version").read_text() == "550.54.15\n"
    assert not (root / "module/ib_core/version").exists()          # inbox: in-tree modules carry no version
    assert (root / "module/ib_core/initstate").read_text() == "live\n"
    assert sorted(os.listdir(root / "module/ib_core/holders")) == ["ib_cm", "ib_uverbs", "iw_cm", "mlx5_ib", "rdma_cm"]
    assert (root / "module/ib_core/refcnt").read_text() == "5\n"
    lines = proc(root).splitlines()
    assert lines[0] == "nvidia 54661120 1 - Live 0x0000000000000000"    # newest first; held by nvidia-persistenced
    assert "ib_core 425984 5 ib_cm,ib_uverbs,iw_cm,mlx5_ib,rdma_cm, Live 0x0000000000000000" in lines
    assert lines[-1].startswith("mlx5_core 2015232 1 mlx5_ib, Live ")
    # the same columns as a real /proc/modules line behind lsmod (capture lsmod-grep-mlx-ofed-01: name size used by)
    real = {ln.split()[0]: ln.split()[1] for ln in (FIXTURES / "lsmod-grep-mlx-ofed-01.txt").read_text().splitlines()}
    for ln in lines:
        name, size, refcnt, users, state, _addr = ln.split()
        assert re.fullmatch(r"\d+", size) and re.fullmatch(r"\d+", refcnt) and state == "Live"
        assert users == "-" or users.endswith(",")
        assert size == real.get(name, size)
    assert (root / "kernel/config/rdma_cm").is_dir()


def test_no_gpu_marker_no_nvidia(tmp_path):
    root, _exp = build(tmp_path, "cx7_ib_ndr_8x")
    assert not (root / "module/nvidia").exists()
    assert "nvidia" not in proc(root)


def test_ofed_modules_carry_the_stack_version(tmp_path):
    root, exp = build(tmp_path, "cx7_roce_400g_2x_ofed")
    assert (root / "module/mlx5_core/version").read_text().strip() == exp["stack"]["version"]


# ------------------------------------------------------------------------------------------------ modprobe
def test_modprobe_loads_with_dependencies_and_unloads(tmp_path):
    root, _exp = build(tmp_path)
    assert modprobe(root, "ib_ipoib") == (0, "", "")
    assert (root / "module/ib_ipoib/initstate").exists()
    assert "ib_ipoib" in os.listdir(root / "module/ib_cm/holders")
    assert proc(root).startswith("ib_ipoib 151552 0 - Live")
    assert modprobe(root, "ib_ipoib") == (0, "", "")                       # already loaded: nothing, status 0
    rc, out, _err = modprobe(root, "-v", "rdma_ucm")
    assert rc == 0 and out == f"insmod /lib/modules/{RELEASE}/kernel/rdma_ucm.ko\n"
    assert modprobe(root, "-r", "ib_ipoib") == (0, "", "")
    assert not (root / "module/ib_ipoib").exists() and "ib_ipoib" not in proc(root)
    assert (root / "module/ib_cm").exists()                                 # still used by rdma_cm


def test_modprobe_errors_are_kmods(tmp_path):
    root, _exp = build(tmp_path)
    assert modprobe(root, "bogus_mod") == (1, "", f"modprobe: FATAL: Module bogus_mod not found in directory "
                                                 f"/lib/modules/{RELEASE}\n")
    assert modprobe(root, "-q", "bogus_mod") == (1, "", "")
    assert modprobe(root, "-r", "bogus_mod") == (1, "", "modprobe: FATAL: Module bogus_mod not found.\n")
    assert modprobe(root, "-r", "ib_core") == (1, "", "modprobe: FATAL: Module ib_core is in use.\n")
    assert modprobe(root, "-r", "nvidia") == (1, "", "modprobe: FATAL: Module nvidia is in use.\n")
    assert modprobe(root, "-r", "ib_umad") == (0, "", "")                  # known, not loaded: nothing to do
    assert modprobe(root, "-r", "--first-time", "ib_umad") == (1, "", "modprobe: FATAL: Module ib_umad is not in kernel.\n")
    assert modprobe(root, "--first-time", "ib_core") == (
        1, "", "modprobe: ERROR: could not insert 'ib_core': Module already in kernel\n")
    assert modprobe(root)[0] == 1


def test_dry_run_changes_nothing(tmp_path):
    root, _exp = build(tmp_path)
    before = proc(root)
    assert modprobe(root, "-n", "ib_umad")[0] == 0
    assert modprobe(root, "-n", "--first-time", "ib_umad")[0] == 0       # community.general.modprobe's probe
    assert proc(root) == before and not (root / "module/ib_umad").exists()


def test_parameters_after_the_name_are_not_modules(tmp_path):
    root, _exp = build(tmp_path)
    assert modprobe(root, "ib_ipoib", "send_queue_size=256")[0] == 0
    assert not (root / "module/send_queue_size=256").exists()
    assert modprobe(root, "-a", "ib_umad", "rdma_ucm")[0] == 0
    assert (root / "module/ib_umad").exists() and (root / "module/rdma_ucm").exists()


def test_nvidia_peermem_needs_the_gpu_driver(tmp_path):
    root, _exp = build(tmp_path)
    assert modprobe(root, "nvidia_peermem") == (0, "", "")
    assert (root / "module/nvidia_peermem/version").read_text() == "550.54.15\n"
    assert "nvidia_peermem" in os.listdir(root / "module/nvidia/holders")
    assert modprobe(root, "-r", "nvidia_peermem") == (0, "", "")
    assert (root / "module/nvidia").exists()                              # nvidia-persistenced still holds it
    root2, _ = build(tmp_path / "b", "cx7_ib_ndr_8x")
    assert modprobe(root2, "nvidia_peermem") == (
        1, "", f"modprobe: FATAL: Module nvidia_peermem not found in directory /lib/modules/{RELEASE}\n")
    # the fixture's failure is another one (module present, insert refused): same "modprobe: " prefix and name
    assert "modprobe: ERROR: could not insert 'nvidia_peermem'" in (FIXTURES / "nvidia-peermem-modprobe-fail-01.txt").read_text()


def test_rdma_cm_configfs_follows_the_module(tmp_path):
    root, _exp = build(tmp_path)
    assert modprobe(root, "-r", "rdma_cm")[0] == 0
    assert not (root / "kernel/config/rdma_cm").exists()
    assert modprobe(root, "rdma_cm")[0] == 0
    assert (root / "kernel/config/rdma_cm").is_dir()


def test_proc_view_is_rewritten_in_place_and_env_path(tmp_path):
    root, _exp = build(tmp_path)
    ino = os.stat(kmod.proc_modules_path(root)).st_ino
    assert modprobe(root, "ib_umad")[0] == 0
    assert os.stat(kmod.proc_modules_path(root)).st_ino == ino          # a bind mount of it keeps following
    other = tmp_path / "proc-modules"
    assert modprobe(root, "rdma_ucm", proc_file=other)[0] == 0
    assert other.read_text().startswith("rdma_ucm ")


def test_modules_available_profile_list(tmp_path):
    root, _exp = build(tmp_path, "cx7_ib_ndr_8x", modules_available=["ib_core", "mlx5_core", "mlx5_ib", "ib_uverbs"])
    assert modprobe(root, "ib_umad")[0] == 0                               # a boot module stays available
    assert modprobe(root, "-r", "ib_umad")[0] == 0
    root2, _ = build(tmp_path / "b", "cx7_ib_ndr_8x", modules_available=["ib_core"], kernel_modules=["mlx5_core"])
    assert modprobe(root2, "ib_umad")[0] == 1


# ------------------------------------------------------------------------------------------------ boot
def test_modules_load_d_as_systemd_reads_it(tmp_path):
    etc, lib = tmp_path / "etc", tmp_path / "lib"
    etc.mkdir()
    lib.mkdir()
    (etc / "rdma.conf").write_text("# RDMA\nib_umad\n; old\n  rdma_ucm  \n\n")
    (lib / "rdma.conf").write_text("masked_by_etc\n")
    (lib / "gpu.conf").write_text("nvidia_peermem\n")
    (etc / "notes.txt").write_text("not_a_conf\n")
    assert kmod.modules_load_d([str(etc), str(lib)]) == ["nvidia_peermem", "ib_umad", "rdma_ucm"]


def test_boot_main_loads_modules_load_d(tmp_path, monkeypatch, capsys):
    root, _exp = build(tmp_path)
    d = tmp_path / "modules-load.d"
    d.mkdir()
    # what community.general.modprobe writes with persistent: present (create_module_file: name + newline)
    (d / "ib_umad.conf").write_text("ib_umad\n")
    (d / "x.conf").write_text("nvidia_peermem\nno_such_module\n")
    monkeypatch.setattr(kmod, "MODULES_LOAD_DIRS", (str(d),))
    assert kmod.boot_main(root, bind=False) == 1
    out = capsys.readouterr().out
    assert "Inserted module 'ib_umad'" in out and "Failed to find module 'no_such_module'" in out
    assert (root / "module/nvidia_peermem").exists() and (root / "module/ib_umad").exists()


def test_community_general_modprobe_sees_the_view(tmp_path):
    """community.general.modprobe's module_loaded(): a /proc/modules line starting with '<name> '."""
    root, _exp = build(tmp_path)
    assert modprobe(root, "ib_umad")[0] == 0
    assert any(line.startswith("ib_umad ") for line in proc(root).splitlines())
    assert not any(line.startswith("ib_ipoib ") for line in proc(root).splitlines())


# ------------------------------------------------------------------------------------------------ profile
@pytest.mark.parametrize("extra, msg", [
    ({"gpu": {"driver": "amdgpu", "version": "1.0"}}, "gpu.driver"),
    ({"gpu": {"driver": "nvidia"}}, "missing required field 'version'"),
    ({"gpu": {"driver": "nvidia", "version": "latest"}}, "gpu.version"),
    ({"gpu": {"driver": "nvidia", "version": "550.54.15", "cuda": "12"}}, "unknown field(s) cuda"),
    ({"modules_available": ["ib-core!"]}, "modules_available[0]"),
    ({"ipoib_enhanced": "yes"}, "ipoib_enhanced"),
])
def test_profile_fields_are_validated(extra, msg):
    with pytest.raises(ProfileError, match=re.escape(msg)):
        simhost.expand({**simhost.load("cx7_ib_ndr_8x"), **extra}, 0)


def test_profile_defaults():
    exp = simhost.expand(simhost.load("cx7_ib_ndr_8x"), 0)
    assert exp["gpu"] is None and exp["modules_available"] is None and exp["ipoib_enhanced"] is True
    assert simhost.expand(simhost.load("cx7_ib_ndr_2x_gpu"), 0)["gpu"] == {"driver": "nvidia", "version": "550.54.15"}
