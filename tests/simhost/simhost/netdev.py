"""Real netdevs for simulated RoCE ports: adopt the container links Docker attached per rail, mirror them into the tree.

Stand-in for two pieces of a real host that a container cannot have:

* **udev's renaming** of the HCA's netdev to its predictable name: at boot the container has ``eth1``, ``eth2`` (one
  Docker network per rail); :func:`plan_adoption` picks, for each Ethernet port of the profile, the link whose IPv4
  is in the subnet of the port's profile ``ipv4`` (or that already has the port's MAC), and :func:`adoption_argv`
  renames it to the profile's netdev name, gives it the port's MAC and the boot MTU 1500 and removes Docker's IPv4, so
  that the host starts like a fresh one: netdev present, no rail address, GIDs 0/1 (link-local) only.
* **the kernel's roce_gid_mgmt** (``drivers/infiniband/core/roce_gid_mgmt.c`` + ``cache.c``): :func:`plan_gid_update`
  adds an IPv4-mapped GID of each RoCE type (v1, then v2) at the lowest free indexes when an IPv4 address appears on
  the port's netdev and empties those entries when it goes; entries of other addresses never move. Default
  (link-local) GIDs follow the netdev's MAC. :func:`netdev_attrs` / :func:`port_state` give the ``class/net/<if>``
  attributes and the port ``state``/``phys_state`` that the real link implies.

IPoIB: an InfiniBand port with a profile ``ipv4`` is a rail as well (``link_layer: InfiniBand`` in
:func:`rail_ports`): adopted by subnet only, boot MTU = the port's (2044), the link's MAC kept (the tree's 20-byte
``address`` stays); :func:`sync_tree` mirrors mtu/operstate/flags/carrier of it and of the P_Key children that
``create_child`` made (simhost/kernelfs.py), and never touches the IB port state (the subnet manager's).

Everything here except :func:`read_links` and :func:`run_argv` is a pure function or writes only into the tree, so
the unit tests run it on a temp tree with made-up link states. The daemon is ``simhost/netsync.py``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from pathlib import Path

from . import firmware
from . import profile as profile_mod
from . import statefile, sysfs

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
ROCE_GID_TYPES = ("IB/RoCE v1", "RoCE v2")   # order of ib_cache_gid_add over the port's gid type mask
BOOT_MTU = 1500                              # a freshly registered Ethernet netdev (ether_setup)
IP = "ip"

# net/core/dev.c IFF_* bits shown in class/net/<if>/flags (dev->flags; ip's LOWER_UP is not in it)
IFF_BITS = {"UP": 0x1, "BROADCAST": 0x2, "DEBUG": 0x4, "LOOPBACK": 0x8, "POINTOPOINT": 0x10, "NOTRAILERS": 0x20,
            "NOARP": 0x80, "PROMISC": 0x100, "ALLMULTI": 0x200, "MASTER": 0x400, "SLAVE": 0x800,
            "MULTICAST": 0x1000, "PORTSEL": 0x2000, "AUTOMEDIA": 0x4000, "DYNAMIC": 0x8000}


# ------------------------------------------------------------------------------------------------ data
def ipv4_gid(addr: str) -> str:
    """IPv4-mapped GID of a dotted address, as the kernel prints it: 10.0.1.11 -> 0000:...:ffff:0a00:010b."""
    return profile_mod.gid_from_ipv6("::ffff:" + str(ipaddress.IPv4Address(addr)))


def link_local_gid(mac: str) -> str:
    """Default GID of a RoCE port: fe80::/64 + EUI-64 of the netdev's MAC."""
    return profile_mod._mac_to_link_local(mac.lower())  # pylint: disable=protected-access


def rail_ports(exp: dict) -> list[dict]:
    """The Ethernet ports of an expanded profile: what netsync adopts and mirrors.

    Each: ``{dev, pci, port, netdev, mac, ipv4, subnet (str or None), state, phys_state, default_gids: [index...]}``;
    ``subnet`` is the network of the port's profile ``ipv4`` (10.0.1.11/24 -> 10.0.1.0/24), the rail it is cabled to.
    """
    out = []
    for dev in exp.get("devices", []):
        for port in dev["ports"]:
            if port["link_layer"] != "Ethernet":
                if port.get("ipv4"):   # an IB port with an IPoIB address: its netdev is a real link on an IB rail
                    out.append({"dev": dev["name"], "pci": dev["pci"], "port": int(port["port"]),
                                "netdev": port["netdev"], "mac": None,
                                "ipv4": port["ipv4"], "subnet": str(ipaddress.IPv4Interface(port["ipv4"]).network),
                                "state": port["state"], "phys_state": port["phys_state"], "default_gids": [],
                                "link_layer": "InfiniBand", "mtu": int(port.get("mtu") or 2044)})
                continue
            ll = link_local_gid(port["mac"])
            defaults = sorted(int(i) for i, g in port.get("gids", {}).items() if g and g.get("gid") == ll)
            subnet = str(ipaddress.IPv4Interface(port["ipv4"]).network) if port.get("ipv4") else None
            out.append({"dev": dev["name"], "pci": dev["pci"], "port": int(port["port"]), "netdev": port["netdev"],
                        "mac": port["mac"],
                        "ipv4": port.get("ipv4"), "subnet": subnet, "state": port["state"], "phys_state": port["phys_state"],
                        "default_gids": defaults, "link_layer": "Ethernet", "mtu": BOOT_MTU})
    return out


def rail_network(subnet: str) -> dict:
    """Docker IPAM for a rail: gateway = first address, Docker's own addresses from the upper half of the subnet,
    so they never collide with the profile's host addresses (10.0.1.11 + host index) that networkd will set."""
    net = ipaddress.IPv4Network(subnet)
    upper = list(net.subnets(prefixlen_diff=1))[1] if net.prefixlen < 30 else net
    return {"subnet": str(net), "gateway": str(net.network_address + 1), "iprange": str(upper)}


def parse_links(ip_json) -> list[dict]:
    """``ip -j address show`` (text or parsed) -> ``[{ifindex, name, mac, mtu, operstate, flags: [..], ipv4: [..]}]``.

    ``ipv4`` lists ``a.b.c.d/len`` in the order ip prints them (primary addresses in the order they were added).
    """
    data = json.loads(ip_json) if isinstance(ip_json, (str, bytes)) else ip_json
    links = []
    for item in data or []:
        if not isinstance(item, dict) or "ifname" not in item:
            continue
        ipv4 = [f"{a['local']}/{a['prefixlen']}" for a in item.get("addr_info", [])
                if a.get("family") == "inet" and "local" in a]
        links.append({"ifindex": int(item.get("ifindex", 0)), "name": item["ifname"],
                      "mac": (item.get("address") or "").lower(), "mtu": int(item.get("mtu", 0)),
                      "operstate": str(item.get("operstate", "UNKNOWN")), "flags": list(item.get("flags", [])),
                      "ipv4": ipv4})
    return links


# ------------------------------------------------------------------------------------------------ adoption
def plan_adoption(rails: list[dict], links: list[dict]) -> tuple[list[dict], list[str]]:
    """Which container link becomes which port netdev: ``(steps, warnings)``; pure.

    A rail whose netdev name already exists is done (a second run, or a netsync restart, changes nothing and keeps
    the addresses networkd gave it). Otherwise its link is the one with the port's MAC, else the one with an IPv4 in
    the port's subnet (lowest ifindex if several); links named like another rail's netdev, and ``lo``, are never
    taken. Each step: ``{link, ifindex, netdev, mac, mtu, strip: [Docker's IPv4 addresses]}``.
    """
    steps, warnings = [], []
    names = {ln["name"] for ln in links}
    rail_names = {r["netdev"] for r in rails}
    taken = set()
    for rail in rails:
        if rail["netdev"] in names:
            continue
        cands = [ln for ln in links if ln["name"] != "lo" and ln["name"] not in rail_names and ln["ifindex"] not in taken]
        by_mac = [ln for ln in cands if rail["mac"] and ln["mac"] == rail["mac"].lower()]
        by_net = []
        if rail["subnet"]:
            net = ipaddress.IPv4Network(rail["subnet"])
            by_net = [ln for ln in cands if any(ipaddress.IPv4Interface(a).ip in net for a in ln["ipv4"])]
        pick = sorted(by_mac or by_net, key=lambda ln: ln["ifindex"])
        if not pick:
            warnings.append(f"{rail['dev']} port {rail['port']}: no container link on rail {rail['subnet'] or '(no ipv4)'} "
                            f"or with MAC {rail['mac']}; {rail['netdev']} stays simulated only")
            continue
        if len(pick) > 1:
            warnings.append(f"{rail['dev']} port {rail['port']}: links {', '.join(ln['name'] for ln in pick)} are all on "
                            f"rail {rail['subnet']}; taking {pick[0]['name']}")
        link = pick[0]
        taken.add(link["ifindex"])
        # an IPoIB netdev keeps the link's 6-byte MAC (its 20-byte address lives in the tree) and boots at the
        # broadcast group's MTU (the profile port's mtu, 2044)
        steps.append({"link": link["name"], "ifindex": link["ifindex"], "netdev": rail["netdev"], "mac": rail["mac"],
                      "mtu": rail.get("mtu", BOOT_MTU), "strip": list(link["ipv4"])})
    return steps, warnings


def adoption_argv(step: dict, ip: str = IP) -> list[list[str]]:
    """The ``ip`` commands (argv lists, no shell) that turn Docker's link into the port's fresh netdev."""
    old, new = step["link"], step["netdev"]
    cmds = [[ip, "link", "set", "dev", old, "down"]]
    cmds += [[ip, "address", "del", addr, "dev", old] for addr in step["strip"]]
    if old != new:
        cmds.append([ip, "link", "set", "dev", old, "name", new])
    if step.get("mac"):
        cmds.append([ip, "link", "set", "dev", new, "address", step["mac"]])
    cmds += [[ip, "link", "set", "dev", new, "mtu", str(step["mtu"])],
             [ip, "link", "set", "dev", new, "up"]]
    return cmds


# ------------------------------------------------------------------------------------------------ GID table
def read_gid_table(pdir: Path) -> dict[int, dict]:
    """``{index: {gid, type, ndev}}`` for every entry of a port's table (zero GIDs included, type/ndev None)."""
    out = {}
    gdir, tdir, ndir = (os.path.join(str(pdir), sub) for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"))
    for name in os.listdir(gdir):  # plain os calls: 256 entries x 2 ports per sync
        if not name.isdigit():
            continue
        gid = _fast_read(os.path.join(gdir, name)) or ZERO_GID
        if gid == ZERO_GID:  # an empty entry has no type/ndev (EINVAL on a real kernel, absent here)
            out[int(name)] = {"gid": gid, "type": None, "ndev": None}
        else:
            out[int(name)] = {"gid": gid, "type": _fast_read(os.path.join(tdir, name)),
                              "ndev": _fast_read(os.path.join(ndir, name))}
    return dict(sorted(out.items()))


def _fast_read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode().rstrip("\n")
    except (FileNotFoundError, NotADirectoryError):
        return None


def _is_ipv4_mapped(gid: str) -> bool:
    try:
        return ipaddress.IPv6Address(gid).ipv4_mapped is not None
    except ValueError:
        return False


def plan_gid_update(table: dict[int, dict], netdev: str, ipv4: list[str], mac: str | None = None,
                    default_indexes: list[int] = (), gid_types=ROCE_GID_TYPES) -> dict[int, dict | None]:
    """Changes that bring a port's GID table in line with its netdev's IPv4 addresses: ``{index: entry or None}``.

    As roce_gid_mgmt: an address that is gone empties its entries (None: zero GID, no type/ndev files); an address
    that is new gets one entry per type in ``gid_types`` order, each at the lowest free index; nothing else moves.
    ``ipv4`` holds ``a.b.c.d[/len]``. With ``mac``, the ``default_indexes`` (link-local) entries follow it. Pure.
    """
    changes: dict[int, dict | None] = {}
    want = []
    for a in ipv4:
        gid = ipv4_gid(a.split("/", 1)[0])
        if gid not in want:
            want.append(gid)
    cur = {i: dict(e) for i, e in table.items()}
    if mac:
        ll = link_local_gid(mac)
        for i in default_indexes:
            if i in cur and cur[i]["gid"] != ZERO_GID and cur[i]["gid"] != ll:
                changes[i] = {**cur[i], "gid": ll}
                cur[i] = changes[i]
    for i, e in cur.items():
        if e["ndev"] == netdev and e["gid"] != ZERO_GID and _is_ipv4_mapped(e["gid"]) and e["gid"] not in want:
            changes[i] = None
            cur[i] = {"gid": ZERO_GID, "type": None, "ndev": None}
    for gid in want:
        for gtype in gid_types:
            if any(e["gid"] == gid and e["type"] == gtype and e["ndev"] == netdev for e in cur.values()):
                continue
            free = [i for i, e in cur.items() if e["gid"] == ZERO_GID and i not in default_indexes]
            if not free:
                break  # table full: the kernel logs and skips (-ENOSPC)
            entry = {"gid": gid, "type": gtype, "ndev": netdev}
            changes[free[0]] = entry
            cur[free[0]] = entry
    return changes


def write_gid_changes(pdir: Path, changes: dict[int, dict | None], tmp_dir: Path) -> None:
    """Apply :func:`plan_gid_update` to a port dir. A reader never sees a half-written value (atomic renames),
    nor a non-zero GID without its type/ndev (attributes first on add, GID first on delete)."""
    for i, entry in sorted(changes.items()):
        name = str(i)
        if entry is None:
            _put(pdir / "gids" / name, ZERO_GID, tmp_dir)
            for sub in ("types", "ndevs"):
                try:
                    (pdir / "gid_attrs" / sub / name).unlink()
                except FileNotFoundError:
                    pass
        else:
            _put(pdir / "gid_attrs/types" / name, entry["type"], tmp_dir)
            if entry.get("ndev"):
                _put(pdir / "gid_attrs/ndevs" / name, entry["ndev"], tmp_dir)
            _put(pdir / "gids" / name, entry["gid"], tmp_dir)


# ------------------------------------------------------------------------------------------------ netdev + port
def netdev_attrs(link: dict, port_active: bool = True) -> dict[str, str | None]:
    """``class/net/<if>`` files implied by the real link (None = the file must be absent).

    The kernel fails reads of ``carrier``/``speed``/``duplex`` with EINVAL while the interface is down (absent
    here); speed is the simulated port's (mlx5: -1 while up without carrier). ``port_active`` False (a profile port
    that is not ACTIVE: no cable) masks the real carrier.
    """
    flags = set(link["flags"])
    admin_up = "UP" in flags
    carrier = admin_up and "LOWER_UP" in flags and port_active
    oper = link["operstate"].lower()
    if not admin_up or not carrier:
        oper = "down" if oper in ("up", "unknown") else oper
    value = 0
    for f in flags:
        value |= IFF_BITS.get(f, 0)
    return {
        "mtu": str(link["mtu"]), "address": link["mac"], "operstate": oper, "flags": f"0x{value:x}",
        "carrier": ("1" if carrier else "0") if admin_up else None,
        "duplex": ("full" if carrier else "unknown") if admin_up else None,
        "speed": "__port__" if carrier else ("-1" if admin_up else None),
    }


def port_state(link: dict | None, rail: dict) -> tuple[str, str]:
    """(state, phys_state) file texts of a RoCE port whose netdev is ``link``: mlx5 follows the netdev."""
    if link is None:
        return (f"{sysfs.PORT_STATES[rail['state']]}: {rail['state']}",
                f"{sysfs.PHYS_STATES[rail['phys_state']]}: {rail['phys_state']}")
    flags = set(link["flags"])
    if "UP" not in flags:
        return "1: DOWN", "3: Disabled"
    if "LOWER_UP" in flags and rail["state"] == "ACTIVE":
        return "4: ACTIVE", "5: LinkUp"
    phys = rail["phys_state"] if rail["phys_state"] != "LinkUp" else "Polling"
    return "1: DOWN", f"{sysfs.PHYS_STATES[phys]}: {phys}"


def sync_tree(root, links: list[dict], exp: dict | None = None) -> dict:
    """Mirror the real links into the tree at ``root``: netdev files, port state, GID table. Returns a report
    ``{netdev: {"link": bool, "changed": [...files], "gids": {index: gid or None}}}``; writes only what differs.
    A rail with no link (no Docker network attached for it) shows as a port without a cable: netdev down, port
    DOWN/Disabled, no IPv4 GIDs."""
    root = Path(root)
    if exp is None:
        exp = sysfs.simhost_profile(root, required=True)  # no tree: fail, do not mirror into nothing
    tmp_dir = root / ".simhost/tmp"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    by_name = {ln["name"]: ln for ln in links}
    report = {}
    cut = firmware.unplugged_ports(exp)
    for rail in rail_ports(exp):
        if (rail["dev"], rail["port"]) in cut:  # cable pulled at run time: the port stays DOWN over a live link
            rail = dict(rail, state="DOWN", phys_state="Polling")
        link = by_name.get(rail["netdev"])
        rep = {"link": link is not None, "changed": [], "gids": {}}
        report[rail["netdev"]] = rep
        # by the PCI function: a device renamed at run time (rdma dev set) keeps its ports
        dev_name = sysfs.ib_name_of_pci(rail["pci"], root) or rail["dev"] if rail.get("pci") else rail["dev"]
        pdir = root / "class/infiniband" / dev_name / "ports" / str(rail["port"])
        ndir = root / "class/net" / rail["netdev"]
        if not pdir.is_dir() or not ndir.is_dir():
            continue
        if rail.get("link_layer") == "InfiniBand":
            _sync_ipoib(rail, link, pdir, ndir, tmp_dir, rep)
            continue
        if link is None:  # no Docker network for this rail: a port with no cable, netdev down and unconfigured
            link = {"name": rail["netdev"], "mac": rail["mac"], "mtu": int(_read(ndir / "mtu") or BOOT_MTU),
                    "operstate": "DOWN", "flags": ["BROADCAST", "MULTICAST"], "ipv4": []}
        attrs = netdev_attrs(link, rail["state"] == "ACTIVE")
        if attrs["speed"] == "__port__":
            attrs["speed"] = str(_speed_of(pdir))
        for fname, val in attrs.items():
            if _set(ndir / fname, val, tmp_dir):
                rep["changed"].append(f"class/net/{rail['netdev']}/{fname}")
        state, phys = port_state(link, rail)
        for fname, val in (("state", state), ("phys_state", phys)):
            if _set(pdir / fname, val, tmp_dir):
                rep["changed"].append(f"ports/{rail['port']}/{fname}")
        changes = plan_gid_update(read_gid_table(pdir), rail["netdev"], link["ipv4"], link["mac"] or None,
                                  rail["default_gids"])
        write_gid_changes(pdir, changes, tmp_dir)
        rep["gids"] = {i: (e["gid"] if e else None) for i, e in changes.items()}
    # P_Key children (create_child, simhost/kernelfs.py): their stand-in macvlan links
    for name in sorted(os.listdir(root / "class/net")) if (root / "class/net").is_dir() else []:
        cdir = root / "class/net" / name
        parent = _read(cdir / "parent")
        if parent is None or name in report:
            continue
        rep = {"link": name in by_name, "changed": [], "gids": {}}
        report[name] = rep
        pdir = _ipoib_port_dir(root, exp, parent)
        _sync_ipoib({"netdev": name}, by_name.get(name), pdir, cdir, tmp_dir, rep)
    return report


def _ipoib_port_dir(root: Path, exp: dict, netdev: str) -> Path | None:
    for dev in exp.get("devices", []):
        for port in dev["ports"]:
            if port["netdev"] == netdev:
                name = sysfs.ib_name_of_pci(dev["pci"], root) or dev["name"]
                return root / "class/infiniband" / name / "ports" / str(port["port"])
    return None


def _sync_ipoib(rail: dict, link: dict | None, pdir: Path | None, ndir: Path, tmp_dir: Path, rep: dict) -> None:
    """An IPoIB netdev (parent on an IB rail, or a P_Key child) whose stand-in is a real link: mtu, operstate,
    flags, carrier follow the link; the 20-byte ``address`` and ``type`` 32 stay (a veth/macvlan cannot carry them);
    the IB port's state is the subnet manager's, never the link's. IPoIB has carrier only while the port is ACTIVE."""
    if link is None:
        return  # no link (yet): the tree keeps what the profile / create_child wrote
    port_active = pdir is None or (_read(pdir / "state") or "").endswith("ACTIVE")
    attrs = netdev_attrs(link, port_active)
    attrs.pop("address", None)
    if attrs["speed"] == "__port__":
        attrs["speed"] = str(_speed_of(pdir)) if pdir is not None else None
    for fname, val in attrs.items():
        if _set(ndir / fname, val, tmp_dir):
            rep["changed"].append(f"class/net/{rail['netdev']}/{fname}")


# ------------------------------------------------------------------------------------------------ I/O helpers
def read_links(ip: str = IP) -> list[dict]:
    """The container's links and their IPv4 addresses, from ``ip -j address show``."""
    out = subprocess.run([ip, "-j", "address", "show"], capture_output=True, text=True, check=True, timeout=30)
    return parse_links(out.stdout)


def run_argv(cmds: list[list[str]]) -> None:
    for argv in cmds:
        subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30)


def _speed_of(pdir: Path) -> int:
    return sysfs.speed_mbps(_read(pdir / "rate") or "400 Gb/sec (4X NDR)")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").rstrip("\n")
    except (FileNotFoundError, NotADirectoryError):
        return None


def _put(path: Path, text: str, tmp_dir: Path) -> None:
    statefile.write_text(path, text + "\n", tmp_dir=tmp_dir)


def _set(path: Path, text: str | None, tmp_dir: Path) -> bool:
    """Make ``path`` hold ``text`` (None: absent); True when it changed."""
    cur = _read(path)
    if text is None:
        if cur is None:
            return False
        path.unlink()
        return True
    if cur == text:
        return False
    _put(path, text, tmp_dir)
    return True
