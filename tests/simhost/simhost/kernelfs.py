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

from . import firmware, statefile, sysfs

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
    statefile.write_json(sysfs.state_dir(root) / name, data, indent=1, sort_keys=True, mkdir=True)


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


# ------------------------------------------------------------------------------------------------ IPoIB
# drivers/infiniband/ulp/ipoib: ipoib_main.c (create_child/delete_child/pkey, ipoib_set_mode), ipoib_vlan.c
# (ipoib_vlan_add: child "<parent>.%04x", -ENOTUNIQ for a P_Key the parent or a child already has; ipoib_vlan_delete:
# -ENODEV when no child has it), ipoib_cm.c (connected mode needs IPOIB_FLAGS_RC in the hardware address).
IPOIB_FLAGS_RC = 0x80
IPOIB_CM_MTU = 65520          # ipoib_cm_max_mtu(): 0x10000 - 0x10
IPOIB_STATE = "ipoib.json"


def ipoib_address(port_guid: str, qpn: int, enhanced: bool = True) -> str:
    """The 20-byte IPoIB hardware address: flags byte (0x80 = RC, connected mode possible; enhanced IPoIB has no
    RC), 24-bit QPN, then the port GID (fe80::/64 + port GUID), as ``ip link`` / ``address`` show it."""
    flags = 0 if enhanced else IPOIB_FLAGS_RC
    head = [flags, (qpn >> 16) & 0xFF, (qpn >> 8) & 0xFF, qpn & 0xFF, 0xfe, 0x80, 0, 0, 0, 0, 0, 0]
    return ":".join(f"{b:02x}" for b in head) + ":" + ":".join(port_guid[i:i + 2] for i in range(0, 16, 2))


def ipoib_broadcast(pkey: int) -> str:
    """Broadcast address of a P_Key's IPoIB link (the broadcast MGID ff12:401b:<pkey>::ffff:ffff, QPN 0xffffff)."""
    return f"00:ff:ff:ff:ff:12:40:1b:{pkey >> 8:02x}:{pkey & 0xFF:02x}:00:00:00:00:00:00:ff:ff:ff:ff"


def scanf_i(text: str):
    """C sscanf("%i"): leading blanks, a sign, 0x hex / 0 octal / decimal, stops at the first non-digit; None when
    nothing converts (the store returns -EINVAL)."""
    m = re.match(r"^\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)
    if not m:
        return None
    digits = m.group(2)
    val = int(digits, 16) if digits[:2].lower() == "0x" else (int(digits, 8) if digits.startswith("0") else int(digits))
    return -val if m.group(1) == "-" else val


def _ip(argv: list) -> tuple:
    import subprocess  # pylint: disable=import-outside-toplevel
    res = subprocess.run(["ip"] + argv, capture_output=True, text=True, check=False, timeout=30)
    return res.returncode, (res.stderr or res.stdout).strip()


# The real-link side of an IPoIB change (hosts with real_netdevs: the netdevs are container links): None on a tree
# without real links (unit tests, static profiles). Tests may replace it with a recorder.
IP_RUNNER = _ip


def _real_links(root: Path) -> bool:
    return bool(sysfs.simhost_profile(root).get("real_netdevs"))


def _link_exists(name: str) -> bool:
    return IP_RUNNER(["link", "show", "dev", name])[0] == 0


def ipoib_netdevs(root: Path) -> list[str]:
    """IPoIB parents (type 32, with create_child) in class/net."""
    out = []
    for name in sysfs.ls(root / "class/net"):
        nd = root / "class/net" / name
        if sysfs.read(nd / "type") == "32" and (nd / "create_child").exists():
            out.append(name)
    return out


def ipoib_children(root: Path, parent: str) -> dict:
    """{pkey: child netdev} of a parent (children have a ``parent`` file)."""
    out = {}
    for name in sysfs.ls(root / "class/net"):
        nd = root / "class/net" / name
        if sysfs.read(nd / "parent") == parent:
            out[int(sysfs.read(nd / "pkey") or "0", 16)] = name
    return out


def _ipoib_mcast_mtu(root: Path, parent: str) -> int:
    """The broadcast group's MTU minus 4: the profile port's boot MTU (2044 for a 2048 partition MTU)."""
    for dev in sysfs.simhost_profile(root).get("devices", []):
        for port in dev["ports"]:
            if port.get("netdev") == parent:
                return min(int(port.get("mtu") or 2044), 4092)
    return 2044


def _next_ifindex(root: Path) -> int:
    return 1 + max([int(sysfs.read(root / "class/net" / n / "ifindex") or 0) for n in sysfs.ls(root / "class/net")] or [0])


def create_ipoib_child(root: Path, parent: str, pkey: int) -> str:
    """What ipoib_vlan_add leaves in sysfs: ``<parent>.%04x`` next to the parent (same PCI function), type 32, its
    own QPN, the P_Key's broadcast address, ``pkey``/``mode``/``umcast``/``parent``, down until someone sets it up."""
    pdir = (root / "class/net" / parent).resolve()
    name = f"{parent}.{pkey:04x}"
    cdir = pdir.parent / name
    addr = sysfs.read(pdir / "address") or ipoib_address("0" * 16, 0x001089)
    qpn = int("".join(addr.split(":")[1:4]), 16) + 2 * (1 + len(ipoib_children(root, parent)))
    enhanced = not int(addr.split(":")[0], 16) & IPOIB_FLAGS_RC
    files = {
        "type": "32", "addr_len": "20", "address": ipoib_address("".join(addr.split(":")[12:]), qpn, enhanced),
        "broadcast": ipoib_broadcast(pkey), "mode": "datagram", "pkey": f"0x{pkey:04x}", "umcast": "0",
        "parent": parent, "mtu": str(_ipoib_mcast_mtu(root, parent)), "operstate": "down", "flags": "0x1002",
        "ifindex": str(_next_ifindex(root)), "iflink": sysfs.read(pdir / "ifindex") or "0", "dev_id": "0x0",
        "dev_port": sysfs.read(pdir / "dev_port") or "0", "tx_queue_len": "256", "carrier_changes": "0",
    }
    for fname, text in files.items():
        _w(cdir / fname, text + "\n")
    for stat in ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_errors", "tx_errors", "rx_dropped", "tx_dropped"):
        _w(cdir / "statistics" / stat, "0\n")
    if (pdir / "device").is_symlink() and not os.path.lexists(cdir / "device"):
        os.symlink(os.readlink(pdir / "device"), cdir / "device")
    link = root / "class/net" / name
    if not os.path.lexists(link):
        os.symlink(os.path.relpath(cdir, link.parent), link)
    return name


def delete_ipoib_child(root: Path, name: str) -> None:
    link = root / "class/net" / name
    target = link.resolve()
    if os.path.lexists(link):
        link.unlink()
    shutil.rmtree(target, ignore_errors=True)


def _settle_ipoib(root: Path) -> None:  # noqa: C901
    parents = ipoib_netdevs(root)
    if not parents:
        return
    state = _state(root, IPOIB_STATE)
    changed = False
    real = None
    for parent in parents:
        nd = root / "class/net" / parent
        state.setdefault(parent, {"mode": "datagram"})
        # mode (parent and children): "connected\n" / "datagram\n" exactly (strcmp in ipoib_set_mode)
        for netdev in [parent] + sorted(ipoib_children(root, parent).values()):
            mdir = root / "class/net" / netdev
            mode_now = state.get(netdev, {}).get("mode", "datagram")
            raw = _raw(mdir / "mode")
            if raw is None or raw == mode_now + "\n":
                continue
            addr = sysfs.read(mdir / "address") or ""
            cm_ok = bool(addr) and bool(int(addr.split(":")[0], 16) & IPOIB_FLAGS_RC)
            if raw == "connected\n" and cm_ok:
                new_mode, mtu = "connected", IPOIB_CM_MTU
            elif raw == "datagram\n":
                new_mode = "datagram"
                mtu = min(_ipoib_mcast_mtu(root, parent), int(sysfs.read(mdir / "mtu") or 2044))
            else:
                why = ("enhanced IPoIB: no connected mode (IPOIB_FLAGS_RC clear in the hardware address)"
                       if raw == "connected\n" else "not 'connected\\n' or 'datagram\\n'")
                _log(root, "class/net/%s/mode: write %r refused (EINVAL, %s); file restored" % (netdev, raw, why))
                _w(mdir / "mode", mode_now + "\n")
                continue
            state.setdefault(netdev, {})["mode"] = new_mode
            changed = True
            _w(mdir / "mode", new_mode + "\n")
            if mode_now != new_mode:
                _w(mdir / "mtu", "%d\n" % mtu)
                if real is None:
                    real = _real_links(root)
                if real and _link_exists(netdev):
                    IP_RUNNER(["link", "set", "dev", netdev, "mtu", str(mtu)])
        # create_child / delete_child (write-only: left empty after the store ran)
        for attr in ("create_child", "delete_child"):
            raw = _raw(nd / attr)
            if not raw:
                continue
            _w(nd / attr, "")
            pkey = scanf_i(raw)
            children = ipoib_children(root, parent)
            if attr == "create_child":
                if pkey is None or pkey <= 0 or pkey > 0xFFFF or pkey == 0x8000:
                    err = "EINVAL"
                elif pkey == int(sysfs.read(nd / "pkey") or "0xffff", 16) or pkey in children:
                    err = "ENOTUNIQ"
                else:
                    err = None
                    name = create_ipoib_child(root, parent, pkey)
                    state[name] = {"mode": "datagram"}
                    changed = True
                    if real is None:
                        real = _real_links(root)
                    if real and _link_exists(parent):
                        # no ipoib link type in this kernel: a macvlan on the parent's link stands in (same L2)
                        rc, msg = IP_RUNNER(["link", "add", name, "link", parent, "type", "macvlan", "mode", "bridge"])
                        if rc == 0:
                            IP_RUNNER(["link", "set", "dev", name, "mtu", sysfs.read(root / "class/net" / name / "mtu")])
                        else:
                            _log(root, "ip link add %s (macvlan on %s) failed: %s" % (name, parent, msg))
            else:
                if pkey is None or pkey < 0 or pkey > 0xFFFF:
                    err = "EINVAL"
                elif pkey not in children:
                    err = "ENODEV"
                else:
                    err = None
                    name = children[pkey]
                    delete_ipoib_child(root, name)
                    state.pop(name, None)
                    changed = True
                    if real is None:
                        real = _real_links(root)
                    if real and _link_exists(name):
                        IP_RUNNER(["link", "del", "dev", name])
            if err:
                _log(root, "class/net/%s/%s: write %r refused (%s)" % (parent, attr, raw, err))
            else:
                _log(root, "class/net/%s/%s: %r accepted" % (parent, attr, raw))
    if changed:
        _save(root, IPOIB_STATE, state)


# --------------------------------------------------------------------------------------------- settle
def settle(root: Path | None = None) -> None:
    """Bring every handled file to what the kernel would show (see the module docstring)."""
    root = Path(root) if root is not None else sysfs.root()
    if not (root / ".simhost").is_dir():
        return
    _settle_rdma_cm(root)
    _settle_traffic_class(root)
    _settle_ecn(root)
    _settle_ipoib(root)


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
    for netdev in ipoib_netdevs(root):   # mode, create_child, delete_child (and the children's mode)
        dirs.append(str((root / "class/net" / netdev).resolve()))
        for child in ipoib_children(root, netdev).values():
            dirs.append(str((root / "class/net" / child).resolve()))
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
