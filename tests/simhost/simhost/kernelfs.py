"""Kernel attribute files whose read-back differs from what was written, on a tree of plain files.

A sysfs/configfs attribute runs a store() on write and a show() on read; a plain file just keeps the bytes.
The simulator closes that gap with ONE mechanism, :func:`settle`: it turns what a writer left in such a file
into what the kernel would show, or restores the previous value when the kernel would have refused the write
(EINVAL; the refusal is logged to ``.simhost/state/kernelfs.log`` since a plain write cannot fail). It runs

* at the start of every simulated tool (so `cma_roce_tos`, `mlnx_qos`, ... always see settled files), and
* in the watcher ``python3 -m simhost watch --root R`` (``simhost-kernelfs.service`` in containers), which calls
  it on every inotify close-write/create/delete under the watched directories (and once a second anyway).

A reader that reads within microseconds of its own write can still see the raw text (the watcher is
asynchronous); tests call ``settle(root)`` between a write and the read-back.

Files handled (MLNX_OFED / DOCA-OFED stacks only for the first two, as inbox kernels have neither):
* ``class/net/<if>/ecn/roce_{np,rp}/enable/<prio>`` and the DCQCN parameter files: show "%d\\n";
* ``class/infiniband/<dev>/tc/<port>/traffic_class``: empty until a global class is written; a number N (or
  ``tclass=N``) shows as ``Global tclass=N``, -1 clears it; ``dst_ip=A/L,tclass=N`` style rules are listed after
  it (mlx5_ib traffic_class_store/show); values above 255 or unparsable text are refused;
* ``kernel/config/rdma_cm/<dev>/`` (configfs, all stacks with rdma_cm): a ``mkdir`` by the admin makes the
  ``ports/<n>/{default_roce_mode,default_roce_tos}`` files appear with the values the device holds; those
  values live in the cma device, not in the directory, so they survive rmdir/mkdir until the tree is rebuilt
  (``.simhost/state/rdma_cm.json``); a mkdir of a name that is no RDMA device is undone (the kernel fails it
  with ENODEV). ``default_roce_mode`` takes "IB/RoCE v1" or "RoCE v2" (RoCE ports) and shows it; IB ports
  have only "IB/RoCE v1". ``default_roce_tos`` takes 0..255. Plain directories cannot be removed while they hold
  files: to remove a device directory use ``rmdir_cm_device`` (the simulated scripts do).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

from . import firmware, sysfs

ROCE_V1, ROCE_V2 = "IB/RoCE v1", "RoCE v2"
LOG = "kernelfs.log"

# MLNX_OFED en_sysfs.c attribute files. Their boot values are the card's firmware Current (simhost.firmware:
# ROCE_CC_PRIO_MASK_P<n> bit prio -> enable/<prio> at np and rp, CNP_DSCP_P<n> -> roce_np/cnp_dscp, RPG_AI_RATE_P<n> ->
# roce_rp/rpg_ai_rate, ...), whose factory defaults are the Default column of
# tests/fixtures/real/rdma-outputs/mlxconfig-query-01.txt (mask 255 = ECN on all 8 priorities, as all 16 enable files
# read 1 in rdma-outputs/ecn-sysfs-01.txt on an untouched MLNX_OFED host; cnp_dscp 48, cnp_802p_prio 6, ...).
ECN_NP_PARAMS = firmware.ECN_NP_NAMES
ECN_RP_PARAMS = firmware.ECN_RP_NAMES


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def _log(root: Path, message: str) -> None:
    path = sysfs.state_dir(root) / LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(time.strftime("%Y-%m-%dT%H:%M:%S ") + message + "\n")


def _state(root: Path, name: str) -> dict:
    text = sysfs.read(sysfs.state_dir(root) / name)
    return json.loads(text) if text else {}


def _save(root: Path, name: str, data: dict) -> None:
    path = sysfs.state_dir(root) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp%d" % os.getpid())
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _raw(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


# ------------------------------------------------------------------------------------------ boot files
def write_boot_files(root: Path, exp: dict) -> None:
    """Called by build_tree (after the firmware boot state): the MLNX_OFED-only ecn/ and tc/ trees, at their boot
    values (ecn/: the card's firmware Current, see firmware.ecn_boot_values)."""
    if (exp.get("stack") or {}).get("provider") not in ("mlnx_ofed", "doca"):
        return
    ecn_values = firmware.ecn_boot_values(root, exp)
    for dev in exp["devices"]:
        for port in dev["ports"]:
            # mlx5_ib init_tc_sysfs: tc/<port>/traffic_class, initial value -1 -> reads empty
            _w(root / "class/infiniband" / dev["name"] / "tc" / str(port["port"]) / "traffic_class", "")
            if port["link_layer"] != "Ethernet":
                continue
            ecn = root / "class/net" / port["netdev"] / "ecn"
            for rel, value in ecn_values[port["netdev"]].items():
                _w(ecn / rel, "%d\n" % value)


# ---------------------------------------------------------------------------------------- ecn (%d\n)
def _settle_ecn(root: Path) -> None:
    state = _state(root, "ecn.json")          # last accepted value of each file, to restore a refused write
    boot_values = None                        # else its boot value (firmware Current), computed when needed
    changed = False
    for netdev in sysfs.ls(root / "class/net"):
        ecn = root / "class/net" / netdev / "ecn"
        if not ecn.is_dir():
            continue
        for point in ("roce_np", "roce_rp"):
            files = [ecn / point / "enable" / n for n in sysfs.ls(ecn / point / "enable")]
            files += [ecn / point / n for n in sysfs.ls(ecn / point) if n != "enable"]
            for path in files:
                raw = _raw(path)
                if raw is None:
                    continue
                key = str(path.relative_to(root))
                m = re.match(r"^\s*(-?\d+)", raw)          # the store functions sscanf("%d")
                if m is None:
                    _log(root, "%s: write %r refused (EINVAL); file restored" % (key, raw))
                    if key not in state and boot_values is None:
                        boot_values = firmware.ecn_boot_values(root)
                    default = (boot_values or {}).get(netdev, {}).get(str(path.relative_to(ecn)), 0)
                    _w(path, "%d\n" % state.get(key, default))
                    continue
                value = int(m.group(1))
                if path.parent.name == "enable":
                    value = 1 if value else 0
                if state.get(key) != value:
                    state[key] = value
                    changed = True
                if raw != "%d\n" % value:
                    _w(path, "%d\n" % value)
    if changed:
        _save(root, "ecn.json", state)


# ------------------------------------------------------------------------------------- traffic_class
_TCLASS_KEYS = ("src_ip", "dst_ip", "src_ip6", "dst_ip6")


def _tclass_store(cmd: str) -> dict | None:
    """Parse a traffic_class write as tclass_parse_input() does: {mask keys..., tclass} or None (EINVAL)."""
    if len(cmd) > 100:
        return None
    match = {}
    for part in cmd.split(","):
        part = part.strip()
        if not part:
            continue
        for key in _TCLASS_KEYS:
            if part.startswith(key + "=") and len(part) > len(key) + 1:
                match[key] = part[len(key) + 1:]
                break
        else:
            val = part[len("tclass="):] if part.startswith("tclass=") else part
            try:
                tclass = int(val, 0)
            except ValueError:
                return None
            if tclass > 255:
                return None
            match["tclass"] = tclass
    if "tclass" not in match:
        return None
    if any(k in match for k in ("src_ip", "dst_ip")) and any(k in match for k in ("src_ip6", "dst_ip6")):
        return None
    if "dst_ip" in match and "/" not in match["dst_ip"]:
        match["dst_ip"] += "/32"
    return match


def traffic_class_show(entry: dict) -> str:
    """What traffic_class_show() prints for {val, rules}."""
    text = "Global tclass=%d\n" % entry["val"] if entry["val"] >= 0 else ""
    for rule in entry["rules"]:
        text += "".join("%s=%s," % (k, rule[k]) for k in _TCLASS_KEYS if k in rule) + "tclass=%d\n" % rule["tclass"]
    return text


def _settle_traffic_class(root: Path) -> None:
    state = _state(root, "traffic_class.json")
    changed = False
    for dev in sysfs.ib_devices(root):
        tc_dir = root / "class/infiniband" / dev / "tc"
        for port in sysfs.ls(tc_dir):
            path = tc_dir / port / "traffic_class"
            raw = _raw(path)
            if raw is None:
                continue
            entry = state.setdefault(dev, {}).setdefault(port, {"val": -1, "rules": []})
            shown = traffic_class_show(entry)
            if raw == shown:
                continue
            match = _tclass_store(raw.strip("\n").strip())
            if match is None:
                _log(root, "%s: write %r refused (EINVAL); file restored" % (path.relative_to(root), raw))
            elif set(match) == {"tclass"}:
                entry["val"] = match["tclass"]
            else:
                keys = sorted(k for k in match if k != "tclass")
                rules = [r for r in entry["rules"] if sorted(k for k in r if k != "tclass") != keys
                         or any(r[k] != match[k] for k in keys)]
                if match["tclass"] >= 0:
                    rules.append(match)
                entry["rules"] = sorted(rules, key=lambda r: -int(r["dst_ip"].split("/")[1]) if "dst_ip" in r else 1)
            _w(path, traffic_class_show(entry))
            changed = True
    if changed:
        _save(root, "traffic_class.json", state)


# ------------------------------------------------------------------------------------ rdma_cm configfs
def kstrtou8(text: str):
    """The kernel's kstrtou8(buf, 0, ..) as configfs stores use it: one trailing newline allowed, 0x hex,
    leading-0 octal, decimal; None (EINVAL/ERANGE) for anything else or a value above 255."""
    if text.endswith("\n"):
        text = text[:-1]
    if re.match(r"^\+?0[xX][0-9a-fA-F]+$", text):
        val = int(text.lstrip("+"), 16)
    elif re.match(r"^\+?0[0-7]*$", text):
        val = int(text.lstrip("+"), 8)
    elif re.match(r"^\+?[1-9][0-9]*$", text):
        val = int(text.lstrip("+"))
    else:
        return None
    return val if val <= 255 else None


def roce_mode_allowed(root: Path, dev: str, port: int) -> tuple:
    """GID types a port's default_roce_mode accepts (ib_cache_gid_parse_type_str + the port's supported types)."""
    ll = sysfs.read(sysfs.port_dir(dev, port, root) / "link_layer")
    return (ROCE_V1, ROCE_V2) if ll == "Ethernet" else (ROCE_V1,)


def _cm_defaults(root: Path, dev: str) -> dict:
    out = {}
    for port in sysfs.ports(dev, root):
        ll = sysfs.read(sysfs.port_dir(dev, port, root) / "link_layer")
        # cma_add_one: RoCE v2 where the port supports it (CMA_PREFERRED_ROCE_GID_TYPE), IB ports: IB/RoCE v1
        out[str(port)] = {"default_roce_mode": ROCE_V2 if ll == "Ethernet" else ROCE_V1, "default_roce_tos": 0}
    return out


def _cm_port_files(pdir: Path, entry: dict, seen: dict | None = None) -> None:
    # Rewrite a file only when it does not already show the value, and never over a write that came in after this
    # settle read the file (``seen``): the next settle takes that one. Otherwise two settlers (the watcher and a
    # tool) would undo each other's accepted writes.
    for name, text in (("default_roce_mode", entry["default_roce_mode"] + "\n"),
                       ("default_roce_tos", "%d\n" % entry["default_roce_tos"])):
        current = _raw(pdir / name)
        if seen is not None and current != seen.get(name):
            continue
        if current != text:
            _w(pdir / name, text)


def _settle_rdma_cm(root: Path) -> None:
    cm = root / "kernel/config/rdma_cm"
    if not cm.is_dir():
        return
    state = _state(root, "rdma_cm.json")
    changed = False
    devices = set(sysfs.ib_devices(root))
    for name in sysfs.ls(cm):
        ddir = cm / name
        if not ddir.is_dir():
            continue
        if name not in devices:
            _log(root, "mkdir kernel/config/rdma_cm/%s undone: no such RDMA device (ENODEV)" % name)
            shutil.rmtree(ddir, ignore_errors=True)
            continue
        if name not in state:
            state[name] = _cm_defaults(root, name)
            changed = True
        for port, entry in state[name].items():
            pdir = ddir / "ports" / port
            if not pdir.is_dir():
                _cm_port_files(pdir, entry)
                continue
            raw_mode = _raw(pdir / "default_roce_mode")
            if raw_mode is not None and raw_mode != entry["default_roce_mode"] + "\n":
                mode = raw_mode[:-1] if raw_mode.endswith("\n") else raw_mode
                if mode in roce_mode_allowed(root, name, int(port)):
                    entry["default_roce_mode"] = mode
                    changed = True
                else:
                    _log(root, "rdma_cm/%s/ports/%s/default_roce_mode: write %r refused (EINVAL)" % (name, port, raw_mode))
            raw_tos = _raw(pdir / "default_roce_tos")
            if raw_tos is not None and raw_tos != "%d\n" % entry["default_roce_tos"]:
                tos = kstrtou8(raw_tos)
                if tos is not None:
                    entry["default_roce_tos"] = tos
                    changed = True
                else:
                    _log(root, "rdma_cm/%s/ports/%s/default_roce_tos: write %r refused (EINVAL)" % (name, port, raw_tos))
            _cm_port_files(pdir, entry, {"default_roce_mode": raw_mode, "default_roce_tos": raw_tos})
    if changed:
        _save(root, "rdma_cm.json", state)


def mkdir_cm_device(root: Path, dev: str) -> int:
    """``mkdir kernel/config/rdma_cm/<dev>`` with the kernel's outcome: 0, errno.EEXIST or errno.ENODEV."""
    import errno  # pylint: disable=import-outside-toplevel
    cm = root / "kernel/config/rdma_cm"
    if (cm / dev).exists():
        return errno.EEXIST
    if dev not in sysfs.ib_devices(root):
        return errno.ENODEV
    (cm / dev).mkdir()
    _settle_rdma_cm(root)
    return 0


def rmdir_cm_device(root: Path, dev: str) -> None:
    """``rmdir kernel/config/rdma_cm/<dev>`` as configfs does it (the attribute files go with the directory;
    their values stay in the device)."""
    _settle_rdma_cm(root)
    shutil.rmtree(root / "kernel/config/rdma_cm" / dev, ignore_errors=True)


# --------------------------------------------------------------------------------------------- settle
def settle(root: Path | None = None) -> None:
    """Bring every handled file to what the kernel would show (see the module docstring)."""
    root = Path(root) if root is not None else sysfs.root()
    if not (root / ".simhost").is_dir():
        return
    _settle_rdma_cm(root)
    _settle_traffic_class(root)
    _settle_ecn(root)


# -------------------------------------------------------------------------------------------- watcher
IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x2, 0x8, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_IGNORED = 0x400, 0x8000


def _watch_dirs(root: Path) -> list:
    dirs = []
    cm = root / "kernel/config/rdma_cm"
    if cm.is_dir():
        for dirpath, _dirnames, _files in os.walk(cm):
            dirs.append(dirpath)
    for dev in sysfs.ib_devices(root):
        for port in sysfs.ls(root / "class/infiniband" / dev / "tc"):
            dirs.append(str(root / "class/infiniband" / dev / "tc" / port))
    for netdev in sysfs.ls(root / "class/net"):
        ecn = root / "class/net" / netdev / "ecn"
        for sub in ("roce_np", "roce_rp", "roce_np/enable", "roce_rp/enable"):
            if (ecn / sub).is_dir():
                dirs.append(str(ecn / sub))
    return dirs


def watch(root: Path, period: float = 1.0, stop_after: float | None = None) -> None:
    """Settle ``root`` on every inotify event in the handled directories and every ``period`` seconds."""
    # only the watcher needs these
    import ctypes  # pylint: disable=import-outside-toplevel
    import ctypes.util  # pylint: disable=import-outside-toplevel
    import select  # pylint: disable=import-outside-toplevel
    import struct  # pylint: disable=import-outside-toplevel
    root = Path(root)
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1 failed")
    mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF
    watched: dict = {}
    started = time.monotonic()
    try:
        while stop_after is None or time.monotonic() - started < stop_after:
            settle(root)
            for d in _watch_dirs(root):
                if d not in watched.values():
                    wd = libc.inotify_add_watch(fd, os.fsencode(d), mask)
                    if wd >= 0:
                        watched[wd] = d
            ready = select.select([fd], [], [], period)[0]
            if ready:
                time.sleep(0.002)   # let a writer finish a multi-write sequence
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    data = b""
                offset = 0
                while offset + 16 <= len(data):
                    wd, ev_mask, _cookie, length = struct.unpack_from("iIII", data, offset)
                    if ev_mask & IN_IGNORED:
                        watched.pop(wd, None)
                    offset += 16 + length
    finally:
        os.close(fd)
