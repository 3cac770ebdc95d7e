"""Simulated hosts on this machine, for playbook runs with ``ansible_connection: local`` (the bad-input catalogue, the
site.yml scale benchmark).

A local connection gives every inventory host the controller's one environment, so each simulated host gets its own
module interpreter instead. Layout under the host's directory ``hdir``:

    sys/             the sysfs tree (the host's ``rdma_sysfs_root``)
    disk/            what survives a reboot: the cards' firmware NV state, cables ($SIMHOST_PERSIST_DIR), and the
                     host's udev rules: disk/etc/udev/rules.d/*.rules name the RDMA devices at boot
                     ($SIMHOST_UDEV_ROOT, simhost/naming.py)
    bin/mstconfig    the simulator's firmware tool, over that NV state
    bin/python3      python with SIMHOST_SYSFS_ROOT, SIMHOST_PERSIST_DIR and bin/ first on PATH: the host's
                     ``ansible_python_interpreter``

Only the firmware tool goes on PATH: the other stand-ins (ethtool, which fact gathering calls) keep runtime state in
the tree and are not needed by a local run.
"""

from __future__ import annotations

import os
from pathlib import Path

from .tree import build_tree

KIT_BIN = Path(__file__).resolve().parents[1] / "bin"


def boot(profile: dict, hdir, host_index: int) -> dict:
    """Build (again) the host's tree as its boot does: the NV state on its disk becomes the cards' current
    configuration (written on the first boot), runtime state starts afresh. Returns the expanded profile."""
    hdir = Path(hdir)
    (hdir / "disk").mkdir(parents=True, exist_ok=True)
    # build_tree reads and writes the NV state there, and reads the udev rules that name the devices
    env = {"SIMHOST_PERSIST_DIR": str(hdir / "disk"), "SIMHOST_UDEV_ROOT": str(hdir / "disk")}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        return build_tree(profile, hdir / "sys", host_index=host_index)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def create(profile: dict, hdir, host_index: int, python: str) -> Path:
    """Boot a new simulated host under ``hdir`` and return its module interpreter (``bin/python3``, running
    ``python``)."""
    hdir = Path(hdir)
    boot(profile, hdir, host_index)
    bindir = hdir / "bin"
    bindir.mkdir()
    (bindir / "mstconfig").symlink_to(KIT_BIN / "mstconfig")
    wrapper = bindir / "python3"
    wrapper.write_text("#!/bin/sh\nSIMHOST_SYSFS_ROOT='%s' SIMHOST_PERSIST_DIR='%s' PATH='%s':\"$PATH\" exec '%s' \"$@\"\n"
                       % (hdir / "sys", hdir / "disk", bindir, python), encoding="utf-8")
    wrapper.chmod(0o755)
    return wrapper
