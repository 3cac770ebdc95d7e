"""Write a sysfs tree laid out like a real mlx5 host under a root directory that stands for /sys.

Layout (paths relative to the root, as on a real kernel):

    devices/pciDDDD:UU/DDDD:UU:01.0/<DDDD:BB:DD.F>/           PCI function behind its root port (UU = BB - 1)
        vendor device class subsystem_* revision numa_node resource vpd current_link_* driver -> subsystem ->
        config (256 bytes: ids, class, header type with the multi-function bit) acpi_index (onboard devices only)
        infiniband/<dev>/  node_guid sys_image_guid fw_ver hca_type hw_rev board_id node_type node_desc
                           device -> ../../../<pci>   ports/<n>/{state,phys_state,rate,link_layer,lid,sm_lid,sm_sl,
                           lid_mask_count,cap_mask,gids/,gid_attrs/{types,ndevs}/,pkeys/,counters/,hw_counters/}
        infiniband_verbs/uverbs<N>/  infiniband_mad/umad<N>/
        net/<netdev>/      mtu operstate carrier speed address type dev_port dev_id ... device -> ../../../<pci>
    devices/virtual/net/{lo,eth0}/
    class/infiniband/<dev>, class/net/<if>, class/infiniband_verbs/uverbs<N>, class/infiniband_mad/umad<N>
                                                             relative symlinks into devices/, as the kernel makes them
    bus/pci/devices/<pci>, bus/pci/drivers/mlx5_core/<pci>   relative symlinks
    module/<name>/{initstate,refcnt,srcversion,version?,parameters/,holders/}
    kernel/config/rdma_cm/                                   when rdma_cm is loaded (configfs subsystem dir)
    .simhost/profile.json, .simhost/state/                   the simulator's own files (not in a real /sys);
                                                             profile.json: the devices' booted names (naming.py)
                                                             state/firmware.json: the cards' Current NV configuration
    MLNX_OFED/DOCA only: class/net/<if>/ecn/roce_{np,rp}/, class/infiniband/<dev>/tc/<port>/traffic_class
                                                             (written by kernelfs.write_boot_files)

Kernel semantics that a plain file tree cannot show, and how they are represented:
- reading gid_attrs/types/<i> or gid_attrs/ndevs/<i> of an EMPTY GID entry fails with EINVAL on a real kernel:
  here the file is ABSENT (ENOENT). Readers must treat EINVAL and ENOENT alike.
- gid_attrs/ndevs/<i> of an InfiniBand port fails with EINVAL (no netdev): here it is absent.
- gids/<i> of an empty entry reads as all zeros (the kernel prints a zero GID), so gids/ holds the full table.
- a netdev with carrier down reports speed -1 (SPEED_UNKNOWN), as mlx5 does while the interface is up.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from . import driver, firmware
from . import kernelfs
from . import kmod
from . import naming
from . import profile as profile_mod
from . import sysfs

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
MARKER = ".simhost"

# Names as in the real dump (tests/fixtures/real/rdma-outputs/sysfs-class-infiniband-01.txt)
PMA_COUNTERS = [
    "VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
    "local_link_integrity_errors", "multicast_rcv_packets", "multicast_xmit_packets", "port_rcv_constraint_errors",
    "port_rcv_data", "port_rcv_errors", "port_rcv_packets", "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors", "port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards",
    "port_xmit_packets", "port_xmit_wait", "symbol_error", "unicast_rcv_packets", "unicast_xmit_packets",
]
HW_COUNTERS = [
    "duplicate_request", "implied_nak_seq_err", "lifespan", "local_ack_timeout_err", "out_of_buffer",
    "out_of_sequence", "packet_seq_err", "req_cqe_error", "req_cqe_flush_error", "req_remote_access_errors",
    "req_remote_invalid_request", "resp_cqe_error", "resp_cqe_flush_error", "resp_local_length_error",
    "resp_remote_access_errors", "rnr_nak_retry_err", "roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart",
    "roce_slow_restart_cnps", "roce_slow_restart_trans", "rx_atomic_requests", "rx_dct_connect",
    "rx_icrc_encapsulated", "rx_read_requests", "rx_write_requests",
]
# mlx5 congestion counters, present on RoCE ports (mlx5_ib_cong_cnts); the real dump does not include them
HW_COUNTERS_ROCE_CC = ["np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled", "rp_cnp_ignored"]
HW_COUNTER_DEFAULTS = {"lifespan": 12}

IPOIB_BROADCAST = "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"
OFED_MODULE_VERSIONED = {"mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "ib_ipoib", "rdma_cm", "ib_umad", "mlx_compat"}


_MADE: set = set()


def _mkdir(d: Path) -> None:
    if d not in _MADE:
        d.mkdir(parents=True, exist_ok=True)
        _MADE.add(d)


def _w(path: Path, text: str) -> None:
    _mkdir(path.parent)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")


def _link(link: Path, target_abs: Path) -> None:
    """Relative symlink ``link`` -> ``target_abs``, like the kernel's class/bus links.

    The kernel always climbs to the target's parent and names the target (``device -> ../../../0000:18:00.0``
    even from inside that very PCI function), so the link text is built the same way.
    """
    _mkdir(link.parent)
    link.symlink_to(os.path.join(os.path.relpath(target_abs.parent, link.parent), target_abs.name))


def _guid_groups(hex16: str) -> str:
    return ":".join(hex16[i:i + 4] for i in range(0, 16, 4))


def _vpd(description: str, part_number: str, serial: str) -> bytes:
    """PCI VPD: ID string (0x82), VPD-R (0x90) with PN/EC/SN/V0 and RV checksum, end tag (0x78)."""
    ident = description.encode()
    out = bytearray([0x82, len(ident) & 0xFF, len(ident) >> 8]) + ident
    fields = b""
    for kw, val in ((b"PN", part_number), (b"EC", "A7"), (b"SN", serial), (b"V0", "PCIeGen5 x16")):
        v = val.encode()
        fields += kw + bytes([len(v)]) + v
    body = fields + b"RV" + bytes([1])
    length = len(body) + 1  # + checksum byte
    start = bytes([0x90, length & 0xFF, length >> 8])
    partial = out + start + body
    checksum = (-sum(partial)) & 0xFF
    return bytes(partial + bytes([checksum]) + bytes([0x78]))


def _safe_reset(root: Path) -> None:
    real = root.resolve()
    if str(real) in ("/", "/sys") or real == Path.home():
        raise ValueError(f"refusing to build a simulated tree at {real}")
    if real.exists():
        if any(real.iterdir()) and not (real / MARKER).is_dir():
            raise ValueError(f"{real} is not empty and was not made by simhost (no {MARKER}/); refusing to wipe it")
        shutil.rmtree(real)
    real.mkdir(parents=True)


def boot_profile(profile: dict, host_index: int | None = None, root=None) -> dict:
    """The expanded profile as this boot makes it, without writing a tree: the firmware NV store and the cables
    (``persist_dir()``) shape the hardware, the running kernel's driver picks the stack (simhost/driver.py), and the
    devices are named by the profile's ``rdma_naming`` pin, else by the udev rules on the host's disk over the booted
    stack's (simhost/naming.py). ``root``: the tree of this boot (its running kernel is kept beside it); None reads
    the newest installed kernel and keeps nothing."""
    exp = profile_mod.expand(profile, host_index)
    overrides = firmware.boot_overrides(exp)
    if root is not None:
        release = driver.running_kernel(root)
    else:
        kernels = driver.installed_kernels()
        release = kernels[-1] if kernels else os.uname().release
    stack = driver.boot_stack(exp["stack"], release)
    overrides["naming"] = naming.boot_rules(exp["rdma_naming"]["pin"], stack["provider"])
    exp = profile_mod.expand(profile, host_index, boot=overrides)
    exp["stack"] = stack
    return exp


def booted_names(profile: dict, host_index: int | None = None) -> list[dict]:
    """What a boot of ``profile`` names its RDMA devices (boot_profile; the udev rules under naming.udev_root()),
    in index (PCI) order: ``[{index, pci, kernel_name, name, named_by, link_layer, netdevs}]``."""
    exp = boot_profile(profile, host_index)
    return [{"index": d["index"], "pci": d["pci"], "kernel_name": d["kernel_name"], "name": d["name"],
             "named_by": d["named_by"], "link_layer": d["ports"][0]["link_layer"],
             "netdevs": [p["netdev"] for p in d["ports"]]}
            for d in sorted(exp["devices"], key=lambda d: d["index"])]


def build_tree(profile: dict, root, host_index: int | None = None) -> dict:
    """(Re)build the tree for ``profile`` under ``root``; return the expanded profile.

    ``host_index`` (0..255) makes GUIDs, MACs, LIDs and IPv4 addresses distinct per host; None means the
    profile's own ``host_index`` key, else 0.  The previous tree at ``root`` is removed first (a driver reload).
    This is a boot: the cards' firmware NV configuration becomes their Current one and shapes the hardware (VPI link
    types, SR-IOV, the OFED ECN defaults), the cables unplugged in ``persist_dir()`` leave their ports down
    (simhost/firmware.py), and the RDMA devices get the names udev's rdma_rename gives them (boot_profile).
    """
    root = Path(root)
    exp = boot_profile(profile, host_index, root)
    _safe_reset(root)
    _MADE.clear()
    meta = root / MARKER
    (meta / "state").mkdir(parents=True)
    _w(meta / "profile.json", json.dumps(exp, indent=2, sort_keys=True))
    fw_current = firmware.save_boot_state(root, exp)
    vfs = {card["slot"]: firmware.sriov(fw_current[card["pci"]]) for card in firmware.cards(exp)}

    ifindex = 1
    _write_netdev(root, root / "devices/virtual/net/lo", {"name": "lo", "mtu": 65536, "mac": "00:00:00:00:00:00"},
                  ifindex, kind="loopback")
    for oob in exp["oob_netdevs"]:
        ifindex += 1
        _write_netdev(root, root / "devices/virtual/net" / oob["name"], oob, ifindex, kind="veth")

    for di, dev in enumerate(exp["devices"]):
        dom, bus = dev["pci"].split(":")[0:2]
        if int(bus, 16) == 0:
            fn_dir = root / "devices" / f"pci{dom}:00" / dev["pci"]
        else:  # behind a root port on the bus below, as discrete adapters are
            up = f"{int(bus, 16) - 1:02x}"
            fn_dir = root / "devices" / f"pci{dom}:{up}" / f"{dom}:{up}:01.0" / dev["pci"]
        _write_pci_function(root, fn_dir, dev, di, exp, vfs[firmware.slot_of(dev["pci"])])
        ib_dir = fn_dir / "infiniband" / dev["name"]
        _write_ib_device(root, ib_dir, fn_dir, dev)
        for port in dev["ports"]:
            ifindex += 1
            _write_netdev(root, fn_dir / "net" / port["netdev"], port, ifindex,
                          kind="ipoib" if port["link_layer"] == "InfiniBand" else "mlx5", fn_dir=fn_dir,
                          dev_port=port["port"] - 1, port=port, enhanced=exp.get("ipoib_enhanced", True))
        for sub, cls, extra in (("infiniband_verbs", f"uverbs{di}", {"abi_version": "1"}),
                                ("infiniband_mad", f"umad{di}", {"port": "1"})):
            d = fn_dir / sub / cls
            _w(d / "ibdev", dev["name"])
            for k, v in extra.items():
                _w(d / k, v)
            _link(d / "device", fn_dir)
            _link(root / "class" / sub / cls, d)

    if exp["devices"]:
        _w(root / "class/infiniband_verbs/abi_version", "6")
        _w(root / "class/infiniband_mad/abi_version", "5")
    modules = exp["kernel_modules"]
    if "ib_core" in modules:
        (root / "class/infiniband").mkdir(parents=True, exist_ok=True)
    (root / "kernel/config").mkdir(parents=True, exist_ok=True)
    # module/<name>/ of the profile's modules (and the GPU driver's), with their dependencies, holders and the
    # /proc/modules view (simhost/kmod.py); rdma_cm registers its configfs subsystem (kernel/config/rdma_cm/) at
    # load; per-device dirs appear only when an admin mkdirs them
    kmod.boot(root, exp)
    kernelfs.write_boot_files(root, exp)  # MLNX_OFED/DOCA-only ecn/ and tc/ attribute files (kernelfs.py)
    return exp


def _write_pci_function(root: Path, fn_dir: Path, dev: dict, di: int, exp: dict, total_vfs: int | None) -> None:
    ll = dev["ports"][0]["link_layer"]
    _w(fn_dir / "vendor", "0x15b3")
    _w(fn_dir / "device", f"0x{dev['pci_device_id']:04x}")
    _w(fn_dir / "subsystem_vendor", "0x15b3")
    _w(fn_dir / "subsystem_device", "0x0041")
    _w(fn_dir / "class", "0x020700" if ll == "InfiniBand" else "0x020000")
    _w(fn_dir / "revision", "0x00")
    _w(fn_dir / "numa_node", str(dev["numa_node"]))
    _w(fn_dir / "current_link_speed", dev["pcie"])
    _w(fn_dir / "max_link_speed", dev["pcie"])
    _w(fn_dir / "current_link_width", "16")
    _w(fn_dir / "max_link_width", "16")
    if total_vfs:  # the SR-IOV capability exists only with firmware SRIOV_EN=True and NUM_OF_VFS > 0 (at boot)
        _w(fn_dir / "sriov_totalvfs", str(total_vfs))
        _w(fn_dir / "sriov_numvfs", "0")
    bar = 0xE000000000 + ((exp["host_index"] * 64 + di) << 26)
    lines = [f"0x{bar:016x} 0x{bar + 0x1FFFFFF:016x} 0x000000000014220c"] + ["0x0000000000000000 0x0000000000000000 0x0000000000000000"] * 12
    _w(fn_dir / "resource", "\n".join(lines))
    if dev["part_number"]:
        serial = "MT" + hashlib.sha256(dev["node_guid"].encode()).hexdigest()[:10].upper()
        (fn_dir / "vpd").write_bytes(_vpd(dev["description"] or dev["part_number"], dev["part_number"], serial))
    _w(fn_dir / "uevent", f"DRIVER=mlx5_core\nPCI_CLASS={'20700' if ll == 'InfiniBand' else '20000'}\n"
       f"PCI_ID=15B3:{dev['pci_device_id']:04X}\nPCI_SLOT_NAME={dev['pci']}")
    (fn_dir / "config").write_bytes(_config_space(dev, ll))
    if dev.get("acpi_index") is not None:   # an onboard device: its ACPI _DSM index (rdma_rename NAME_ONBOARD)
        _w(fn_dir / "acpi_index", str(dev["acpi_index"]))
    _mkdir(root / "bus/pci")
    _link(fn_dir / "subsystem", root / "bus/pci")
    drv = root / "bus/pci/drivers/mlx5_core"
    _link(fn_dir / "driver", drv)
    _link(drv / dev["pci"], fn_dir)
    _link(root / "bus/pci/devices" / dev["pci"], fn_dir)


def _config_space(dev: dict, link_layer: str) -> bytes:
    """The function's PCI config space as sysfs ``config`` shows it (256 bytes): the type 0 header's vendor,
    device, class code (0x0207 InfiniBand / 0x0200 Ethernet), header type with the multi-function bit (0x80) on the
    functions of a card that has several (what rdma_rename's is_pci_multifunction reads), subsystem ids; BARs,
    capabilities and the rest are zero (not modelled)."""
    cfg = bytearray(256)
    cfg[0:4] = (0x15B3).to_bytes(2, "little") + dev["pci_device_id"].to_bytes(2, "little")
    cfg[0x04:0x08] = (0x0406).to_bytes(2, "little") + (0x0010).to_bytes(2, "little")   # command, status
    cfg[0x09:0x0C] = bytes([0x00, 0x07 if link_layer == "InfiniBand" else 0x00, 0x02])  # prog-if, subclass, class
    cfg[0x0E] = 0x80 if dev.get("multi_function") else 0x00
    cfg[0x2C:0x30] = (0x15B3).to_bytes(2, "little") + (0x0041).to_bytes(2, "little")
    return bytes(cfg)


def _write_ib_device(root: Path, ib_dir: Path, fn_dir: Path, dev: dict) -> None:
    _w(ib_dir / "node_guid", _guid_groups(dev["node_guid"]))
    _w(ib_dir / "sys_image_guid", _guid_groups(dev["sys_image_guid"]))
    _w(ib_dir / "fw_ver", dev["fw_ver"])
    _w(ib_dir / "hca_type", dev["hca_type"])
    _w(ib_dir / "hw_rev", dev["hw_rev"])
    _w(ib_dir / "board_id", dev["board_id"])
    _w(ib_dir / "node_type", "1: CA")
    _w(ib_dir / "node_desc", dev["node_desc"])
    _link(ib_dir / "device", fn_dir)
    _link(root / "class/infiniband" / dev["name"], ib_dir)
    for port in dev["ports"]:
        _write_port(ib_dir / "ports" / str(port["port"]), port)


def _write_port(pdir: Path, port: dict) -> None:
    is_ib = port["link_layer"] == "InfiniBand"
    _w(pdir / "state", f"{sysfs.PORT_STATES[port['state']]}: {port['state']}")
    _w(pdir / "phys_state", f"{sysfs.PHYS_STATES[port['phys_state']]}: {port['phys_state']}")
    _w(pdir / "rate", port["rate"])
    _w(pdir / "link_layer", port["link_layer"])
    _w(pdir / "lid", f"0x{port['lid']:x}")
    _w(pdir / "sm_lid", f"0x{port['sm_lid']:x}")
    _w(pdir / "sm_sl", str(port["sm_sl"]))
    _w(pdir / "lid_mask_count", str(port["lmc"]))
    _w(pdir / "cap_mask", f"0x{port['cap_mask']:08x}")
    for i in range(port["gid_tbl_len"]):
        entry = port["gids"].get(i)
        _w(pdir / "gids" / str(i), entry["gid"] if entry else ZERO_GID)
        if entry:
            _w(pdir / "gid_attrs/types" / str(i), entry["type"])
            if entry["ndev"]:
                _w(pdir / "gid_attrs/ndevs" / str(i), entry["ndev"])
    (pdir / "gid_attrs/types").mkdir(parents=True, exist_ok=True)
    (pdir / "gid_attrs/ndevs").mkdir(parents=True, exist_ok=True)
    for i in range(port["pkey_tbl_len"]):
        _w(pdir / "pkeys" / str(i), "0xffff" if i == 0 else "0x0000")
    for name in PMA_COUNTERS:
        _w(pdir / "counters" / name, str(port["counters"].get(name, 0)))
    hw_names = HW_COUNTERS + ([] if is_ib else HW_COUNTERS_ROCE_CC)
    for name in hw_names:
        _w(pdir / "hw_counters" / name, str(port["hw_counters"].get(name, HW_COUNTER_DEFAULTS.get(name, 0))))


def _write_netdev(root: Path, ndir: Path, nd: dict, ifindex: int, kind: str, fn_dir: Path | None = None,
                  dev_port: int = 0, port: dict | None = None, enhanced: bool = True) -> None:
    name = ndir.name
    up = True if port is None else port["state"] == "ACTIVE"
    if kind == "ipoib":
        # 20-byte IPoIB hardware address: flags+QPN, then the port GID. Byte 0 bit 0x80 (IPOIB_FLAGS_RC) = the
        # netdev can do connected mode; enhanced IPoIB (mlx5 rdma_netdev, the default) has it clear
        address = kernelfs.ipoib_address(port["port_guid"], 0x001087, enhanced=enhanced)
        _w(ndir / "type", "32")
        _w(ndir / "addr_len", "20")
        _w(ndir / "broadcast", IPOIB_BROADCAST)
        _w(ndir / "mode", "datagram")
        _w(ndir / "pkey", "0xffff")
        _w(ndir / "umcast", "0")
        for attr in ("create_child", "delete_child"):   # write-only attributes (a read fails with EACCES): empty
            (ndir / attr).write_bytes(b"")
        speed = str(sysfs.speed_mbps(port["rate"])) if up else "-1"
    else:
        address = nd["mac"]
        _w(ndir / "type", "772" if kind == "loopback" else "1")
        _w(ndir / "addr_len", "6")
        _w(ndir / "broadcast", "00:00:00:00:00:00" if kind == "loopback" else "ff:ff:ff:ff:ff:ff")
        if kind == "mlx5":
            speed = str(sysfs.speed_mbps(port["rate"])) if up else "-1"
        else:
            speed = "10000" if kind == "veth" else None
    _w(ndir / "address", address)
    _w(ndir / "mtu", str(nd["mtu"]))
    _w(ndir / "operstate", "unknown" if kind == "loopback" else ("up" if up else "down"))
    _w(ndir / "carrier", "1" if up else "0")
    if speed is not None:
        _w(ndir / "speed", speed)
        _w(ndir / "duplex", "full" if up else "unknown")
    _w(ndir / "ifindex", str(ifindex))
    _w(ndir / "iflink", str(ifindex))
    _w(ndir / "dev_id", "0x0")
    _w(ndir / "dev_port", str(dev_port))
    _w(ndir / "flags", "0x9" if kind == "loopback" else "0x1003")
    _w(ndir / "tx_queue_len", "1000")
    _w(ndir / "carrier_changes", "1" if up else "0")
    for stat in ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_errors", "tx_errors", "rx_dropped", "tx_dropped"):
        _w(ndir / "statistics" / stat, "0")
    if fn_dir is not None:
        _link(ndir / "device", fn_dir)
    _link(root / "class/net" / name, ndir)


def _write_module(mdir: Path, name: str, stack: dict) -> None:  # kept for callers; kmod.write_module_dir is used
    _w(mdir / "initstate", "live")
    _w(mdir / "refcnt", "0")
    _w(mdir / "srcversion", hashlib.sha256(name.encode()).hexdigest()[:23].upper())
    (mdir / "parameters").mkdir(parents=True, exist_ok=True)
    (mdir / "holders").mkdir(parents=True, exist_ok=True)
    if stack["provider"] in ("mlnx_ofed", "doca") and name in OFED_MODULE_VERSIONED:
        # out-of-tree (MLNX_OFED / DOCA-OFED) modules carry MODULE_VERSION; inbox ones do not
        _w(mdir / "version", stack["version"])
