"""Read the simulated (or a real) sysfs tree the way the vendor tools do, and the kernel's text formats of its port
files (port states, rate). No import of the rest of the package: every simhost module may import this one."""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

DEFAULT_ROOT = "/run/simhost/sys"

# kernel ib_port_state names (drivers/infiniband/core/sysfs.c state_show)
PORT_STATES = {"NOP": 0, "DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}
# kernel phys_state_to_str()
PHYS_STATES = {
    "Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4,
    "LinkUp": 5, "LinkErrorRecovery": 6, "Phy Test": 7,
}
# kernel rate string: "<rate> Gb/sec (<width>X <speed>)" as drivers/infiniband/core/sysfs.c rate_show()
RATE_RE = re.compile(r"^(\d+(?:\.\d+)?) Gb/sec \((1|2|4|8|12)X (SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR)\)$")


def root() -> Path:
    return Path(os.environ.get("SIMHOST_SYSFS_ROOT", DEFAULT_ROOT))


def read(path: Path) -> str | None:
    """File content without the trailing newline; None when the kernel would fail the read (ENOENT/EINVAL)."""
    try:
        return path.read_text(encoding="utf-8").rstrip("\n")
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EINVAL, errno.ENOTDIR):
            return None
        raise


def ls(path: Path) -> list[str]:
    """Names in a directory in ``ls`` order (C collation: plain byte order), as the shell tools see them."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def ib_devices(r: Path | None = None) -> list[str]:
    return ls((r or root()) / "class/infiniband")


def verbs_devices(r: Path | None = None) -> list[str]:
    """The RDMA devices in the kernel's device index order (probe order: the order of the netlink dump that
    libibverbs' ibv_get_device_list and ``rdma dev`` read), not in ``ls`` order: ``mlx5_10`` after ``mlx5_9``,
    ``ibp24s0`` before ``ibp154s0`` when its PCI bus comes first. Index from the expanded profile (simhost/naming.py)."""
    names = ib_devices(r)
    index = {d.get("name"): d.get("index", i) for i, d in enumerate(simhost_profile(r).get("devices", []))}
    return sorted(names, key=lambda n: (index.get(n, 1 << 30), n))


def ib_name_of_pci(pci: str, r: Path | None = None) -> str | None:
    """The RDMA device of a PCI function now (its name can change at run time: ``rdma dev set``), None if none."""
    names = ls((r or root()) / "bus/pci/devices" / pci / "infiniband")
    return names[0] if names else None


def ib_dir(dev: str, r: Path | None = None) -> Path:
    return (r or root()) / "class/infiniband" / dev


def ports(dev: str, r: Path | None = None) -> list[int]:
    return sorted(int(p) for p in ls(ib_dir(dev, r) / "ports") if p.isdigit())


def port_dir(dev: str, port: int, r: Path | None = None) -> Path:
    return ib_dir(dev, r) / "ports" / str(port)


def num_value(text: str | None) -> int:
    """'4: ACTIVE' -> 4, '0x1a' -> 26, '12' -> 12, None -> 0."""
    if not text:
        return 0
    head = text.split(":", 1)[0].strip() if ": " in text else text.split()[0]
    return int(head, 0)


def rate_parts(rate: str) -> tuple[float, int, str]:
    """'400 Gb/sec (4X NDR)' -> (400.0, 4, 'NDR'); the rate must match RATE_RE."""
    m = RATE_RE.match(rate)
    return float(m.group(1)), int(m.group(2)), m.group(3)


def speed_mbps(rate: str) -> int:
    """A netdev's ``speed`` (Mb/s) for a port rate: '400 Gb/sec (4X NDR)' -> 400000."""
    return int(rate_parts(rate)[0] * 1000)


def pci_function(dev: str, r: Path | None = None) -> Path:
    return (ib_dir(dev, r) / "device").resolve()


def port_netdev(dev: str, port: int, r: Path | None = None) -> str | None:
    """The netdev of a port: GID 0's ndev for RoCE, else the PCI function's netdev with dev_port == port-1."""
    nd = read(port_dir(dev, port, r) / "gid_attrs/ndevs/0")
    if nd:
        return nd
    fn = pci_function(dev, r)
    for name in ls(fn / "net"):
        if num_value(read(fn / "net" / name / "dev_port")) == port - 1:
            return name
    return None


def netdev_dir(name: str, r: Path | None = None) -> Path:
    return (r or root()) / "class/net" / name


def gid_table(dev: str, port: int, r: Path | None = None) -> list[tuple[int, str, str | None, str | None]]:
    """[(index, gid, type or None, ndev or None)] in index order, all entries incl. zero GIDs."""
    pdir = port_dir(dev, port, r)
    out = []
    for name in sorted(ls(pdir / "gids"), key=int):
        i = int(name)
        out.append((i, read(pdir / "gids" / name) or "", read(pdir / "gid_attrs/types" / name),
                    read(pdir / "gid_attrs/ndevs" / name)))
    return out


def simhost_profile(r: Path | None = None, required: bool = False) -> dict:
    """The expanded profile the tree was built from (.simhost/profile.json); {} if absent, unless ``required``
    (then a missing or empty file raises as reading and parsing it does: FileNotFoundError, ValueError)."""
    path = (r or root()) / ".simhost/profile.json"
    if required:
        return json.loads(path.read_text(encoding="utf-8"))
    text = read(path)
    return json.loads(text) if text else {}


def state_dir(r: Path | None = None) -> Path:
    """Runtime state of stateful tools: lives in the tree, so it resets with it (boot / driver reload)."""
    return (r or root()) / ".simhost/state"


def persist_dir() -> Path:
    """State that survives a reboot (firmware NV config, e.g. mlxconfig): $SIMHOST_PERSIST_DIR or /var/lib/simhost."""
    return Path(os.environ.get("SIMHOST_PERSIST_DIR", "/var/lib/simhost"))
