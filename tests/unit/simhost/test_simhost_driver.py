"""simhost booted kernel and driver (simhost/driver.py): the kernel a boot runs, the vendor driver it loads from the
DKMS-built modules of that kernel, and the product's probe reading the result (module_utils/stack/ofed_stack.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[2] / "simhost"
sys.path.insert(0, str(KIT))

from simhost import driver, profile, tree  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.hpcnet.rdma.plugins.module_utils.stack import ofed_stack  # noqa: E402

OFED_INFO = '#!/bin/bash\nif [ "X$1" == "X-s" ]; then echo OFED-internal-25.10-1.7.1.0:; exit 0; fi\n'


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMHOST_PERSIST_DIR", str(tmp_path / "persist"))
    monkeypatch.setenv("SIMHOST_DISK_ROOT", str(tmp_path / "disk"))
    (tmp_path / "disk/boot").mkdir(parents=True)


def _kernel(disk: Path, release: str, modules_version: str | None = None):
    (disk / "boot" / ("vmlinuz-" + release)).write_text("image\n")
    if modules_version:
        ko = disk / "lib/modules" / release / "updates/dkms/mlx5_core.ko"
        ko.parent.mkdir(parents=True, exist_ok=True)
        # a real .ko keeps its MODULE_VERSION as a NUL-terminated "version=" string in .modinfo
        ko.write_bytes(b"\x7fELF\x00license=Dual BSD/GPL\x00version=%s\x00vermagic=%s \x00" % (
            modules_version.encode(), release.encode()))


def _boot(tmp_path, name="cx7_roce_400g_2x"):
    root = tmp_path / "run/sys"
    exp = tree.build_tree(profile.load(name), root, host_index=1)
    return root, exp


def test_newest_installed_kernel_boots_and_stays_until_the_next_boot(tmp_path):
    disk = tmp_path / "disk"
    _kernel(disk, "6.1.0-9-amd64")
    _kernel(disk, "6.1.0-18-amd64")
    root, _exp = _boot(tmp_path)
    assert driver.kernel_file(root).read_text().strip() == "6.1.0-18-amd64"
    _kernel(disk, "6.1.0-28-amd64")  # installed later: runs only after the next boot
    _boot(tmp_path)
    assert driver.running_kernel(root) == "6.1.0-18-amd64"
    driver.kernel_file(root).unlink()  # a reboot empties /run
    _boot(tmp_path)
    assert driver.running_kernel(root) == "6.1.0-28-amd64"


def test_inbox_driver_without_vendor_modules(tmp_path):
    _kernel(tmp_path / "disk", "6.1.0-18-amd64")
    root, exp = _boot(tmp_path)
    assert exp["stack"]["provider"] == "inbox"
    assert not (root / "module/mlx5_core/version").exists()
    assert not list(root.glob("class/net/*/ecn"))


def test_vendor_modules_of_the_running_kernel_load_at_boot(tmp_path):
    disk = tmp_path / "disk"
    _kernel(disk, "6.1.0-18-amd64", modules_version="25.10-1.7.1")
    (disk / "usr/bin").mkdir(parents=True)
    (disk / "usr/bin/ofed_info").write_text(OFED_INFO)
    root, exp = _boot(tmp_path)
    assert exp["stack"] == {"provider": "doca", "version": "25.10-1.7.1.0", "ofed_info_s": "OFED-internal-25.10-1.7.1.0:",
                            "module_version": "25.10-1.7.1"}
    assert (root / "module/mlx5_core/version").read_text().strip() == "25.10-1.7.1"
    assert list(root.glob("class/net/*/ecn/roce_np"))  # the vendor driver's ecn/ tree
    assert json.loads((root / ".simhost/profile.json").read_text())["stack"]["provider"] == "doca"


def test_modules_built_for_another_kernel_do_not_load(tmp_path):
    disk = tmp_path / "disk"
    _kernel(disk, "6.1.0-18-amd64", modules_version="25.10-1.7.1")
    _kernel(disk, "6.1.0-28-amd64")  # a kernel update without headers: DKMS built nothing for it
    root, exp = _boot(tmp_path)
    assert exp["stack"]["provider"] == "inbox"
    probed = {"installed": {"provider": "doca"},
              "driver": {"loaded": True, "loaded_version": None, "installed_version": None}}
    assert ofed_stack.driver_pending(probed) is None  # nothing on disk for this kernel: the DKMS check says why
    rows = ofed_stack.parse_dkms_status("mlnx-ofed-kernel/25.10.OFED.25.10.1.7.1.1, 6.1.0-18-amd64, x86_64: installed\n")
    message = ofed_stack.dkms_guard(rows, driver.running_kernel(root))
    assert "6.1.0-28-amd64" in message and "6.1.0-18-amd64" in message


def test_uname_stand_in_prints_the_booted_kernel(tmp_path):
    real = subprocess.run(["uname", "-r"], capture_output=True, text=True, check=True).stdout.strip()
    script = (KIT / "bin/uname").read_text().replace("/run/simhost/kernel-release", str(tmp_path / "kernel-release"))
    stand_in = tmp_path / "uname"
    stand_in.write_text(script)
    stand_in.chmod(0o755)
    assert subprocess.run([str(stand_in), "-r"], capture_output=True, text=True).stdout.strip() == real
    (tmp_path / "kernel-release").write_text("6.1.0-28-amd64\n")
    assert subprocess.run([str(stand_in), "-r"], capture_output=True, text=True).stdout.strip() == "6.1.0-28-amd64"
    assert "6.1.0-28-amd64" in subprocess.run([str(stand_in), "-a"], capture_output=True, text=True).stdout
    assert subprocess.run([str(stand_in), "-m"], capture_output=True, text=True).stdout.strip() == \
        subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.strip()
