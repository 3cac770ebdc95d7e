"""simhost-ibsync: mirror an ibsim fabric into the simulated sysfs, as the kernel's mad/cache code keeps
``ports/<p>/{state,phys_state,lid,sm_lid,sm_sl,lid_mask_count,pkeys/<i>}`` up to date from the port's PortInfo and
P_Key table.

Every second while the fabric changes, backing off to every ``IDLE_INTERVAL`` s while it is quiet (``python3 -m
simhost.ibsync run --root /run/simhost/sys``; ``next_interval``), for each fabric port of the host (profile
``ib_fabric``, IB link layer at boot, cable in): run the REAL infiniband-diags under umad2sim
(``SIM_HOST="<hostname> <dev>" smpquery -D portinfo 0 <port>`` and ``smpquery -D pkeys 0 <port>``, at the ibsim
of the device's rail: one ibsim per rail, ``fabric.server_env(exp, rail)``), parse their
output (``parse_portinfo``, ``parse_pkeys``: the dotted layout of tests/fixtures/real/ib-stack/smpquery-*.txt) and
write the files whose text changed (``mirror``). The port's IPoIB netdev follows the port: carrier/operstate up
only while the port is ACTIVE (ipoib's carrier follows the port's state).

Fabric unreachable (ibsim down: ``ctl failed(read)``, or a query fails ``FAIL_LIMIT`` times in a row): the port
shows what a port with a link but no SM shows: ``2: INIT`` / ``5: LinkUp``, lid 0x0, sm_lid 0x0, default P_Key
table (0xffff at index 0). A port whose cable is out (``python3 -m simhost cable unplug``) is left alone.
With ``--watch-opensm`` (the unit sets it) it also checks every ``SM_CHECK_EVERY`` s that each running
``opensm@0x<port guid>.service`` of the host still answers SMInfo on its port (``sminfo -D 0``): an opensm whose
ibsim restarted under it (fabric container restarted) is no client of the new ibsim any more and would never sweep
again; after ``SM_FAIL_LIMIT`` failed checks in a row the unit is restarted, as ibsim cannot re-attach clients.
Stdlib only. See README.md, "InfiniBand fabric and subnet manager".
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from . import fabric, firmware, statefile, sysfs

# infiniband-diags (libibmad dump.c) LinkState / PhysLinkState names -> the kernel's sysfs text
LINK_STATES = {"NoChange": "0: NOP", "Down": "1: DOWN", "Initialize": "2: INIT", "Armed": "3: ARMED",
               "Active": "4: ACTIVE"}
PHYS_STATES = {"Sleep": "1: Sleep", "Polling": "2: Polling", "Disabled": "3: Disabled",
               "PortConfigurationTraining": "4: PortConfigurationTraining", "LinkUp": "5: LinkUp",
               "LinkErrorRecovery": "6: LinkErrorRecovery", "PhyTest": "7: Phy Test"}
NO_SM = {"state": "2: INIT", "phys_state": "5: LinkUp", "lid": "0x0", "sm_lid": "0x0", "sm_sl": "0",
         "lid_mask_count": "0"}
FAIL_LIMIT = 3
QUERY_TIMEOUT = 8.0
SM_CHECK_EVERY = 5.0
SM_FAIL_LIMIT = 4
# The model's delay: the kernel sees a port change at once (the SM's Set(PortInfo) reaches the SMA); this sync sees it
# within a second while the fabric changes and within IDLE_INTERVAL s once it has been quiet. Each sync spawns two
# smpquery clients a port (an ibsim connect each), so a quiet fabric is asked less often: on a loaded 2-core machine
# the polling of every second took CPU from the SMs and delayed ibsim's answers to them.
IDLE_INTERVAL = 4.0
_FIELD_RE = re.compile(r"^([A-Za-z0-9_]+):\.+(.*)$")
_PKEY_ROW_RE = re.compile(r"^\s*(\d+):((?:\s+0x[0-9a-fA-F]{4})+)\s*$")
_CAPACITY_RE = re.compile(r"^(\d+) pkeys capacity for this port$")


def parse_portinfo(text: str) -> dict:
    """``smpquery portinfo`` output -> {field: value}; the flag lines under CapMask go to ``CapMaskFlags``."""
    out: dict = {}
    last = None
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = _FIELD_RE.match(line)
        if m:
            last = m.group(1)
            out[last] = m.group(2).strip()
        elif line.startswith("\t") and last:
            out.setdefault(last + "Flags", []).append(line.strip())
    return out


def parse_pkeys(text: str) -> tuple[list[int], int | None]:
    """``smpquery pkeys`` output -> (table, capacity): rows ``   0: 0xffff 0x0000 ...`` and the last line
    ``64 pkeys capacity for this port``."""
    table: dict[int, int] = {}
    capacity = None
    for line in text.splitlines():
        m = _PKEY_ROW_RE.match(line)
        if m:
            base = int(m.group(1))
            for i, word in enumerate(m.group(2).split()):
                table[base + i] = int(word, 16)
            continue
        m = _CAPACITY_RE.match(line.strip())
        if m:
            capacity = int(m.group(1))
    return [table.get(i, 0) for i in range(max(table) + 1 if table else 0)], capacity


def port_files(portinfo: dict, pkeys: list[int] | None, pkey_tbl_len: int) -> dict[str, str]:
    """The sysfs texts of a port from the parsed PortInfo and P_Key table (``pkeys`` None: keep the table)."""
    files = {
        "state": LINK_STATES.get(portinfo.get("LinkState", ""), NO_SM["state"]),
        "phys_state": PHYS_STATES.get(portinfo.get("PhysLinkState", ""), NO_SM["phys_state"]),
        "lid": f"0x{int(portinfo.get('Lid', '0'), 0):x}",
        "sm_lid": f"0x{int(portinfo.get('SMLid', '0'), 0):x}",
        "sm_sl": str(int(portinfo.get("SMSL", "0"), 0)),
        "lid_mask_count": str(int(portinfo.get("LMC", "0"), 0)),
    }
    if pkeys is not None:
        files.update(pkey_files(pkeys, pkey_tbl_len))
    return files


def pkey_files(pkeys: list[int], pkey_tbl_len: int) -> dict[str, str]:
    """``pkeys/<i>`` texts, kernel format (``0xffff``, ``0x0000`` for an empty entry), ``pkey_tbl_len`` entries."""
    return {f"pkeys/{i}": f"0x{(pkeys[i] if i < len(pkeys) else 0):04x}" for i in range(pkey_tbl_len)}


def no_sm_files(pkey_tbl_len: int) -> dict[str, str]:
    return dict(NO_SM, **pkey_files([0xFFFF], pkey_tbl_len))


def _write_if_changed(path: Path, text: str) -> bool:
    old = sysfs.read(path)
    if old == text or not path.parent.is_dir():
        return False
    statefile.write_text(path, text + "\n")
    return True


def mirror(root: Path, dev: str, port: dict, files: dict[str, str], real_netdev: bool = False) -> list[str]:
    """Write ``files`` (relative to the port dir) that differ from the tree; the port's netdev follows ACTIVE,
    unless it is a real link (``real_netdev``: netsync mirrors it and reads the port state itself).
    Returns the changed paths relative to the root."""
    pdir = sysfs.port_dir(dev, port["port"], root)
    changed = [f"{pdir.relative_to(root)}/{rel}" for rel, text in files.items() if _write_if_changed(pdir / rel, text)]
    if "state" in files and port.get("netdev") and not real_netdev:
        ndir = root / "class/net" / port["netdev"]
        if ndir.is_dir():
            up = files["state"] == "4: ACTIVE"
            want = {"carrier": "1" if up else "0", "operstate": "up" if up else "down"}
            if (ndir / "speed").exists() or up:
                want["speed"] = str(sysfs.speed_mbps(port["rate"])) if up else "-1"
                want["duplex"] = "full" if up else "unknown"
            changed += [f"class/net/{port['netdev']}/{k}" for k, v in want.items() if _write_if_changed(ndir / k, v)]
    return changed


def query(tool_args: list[str], exp: dict, node_id: str, runner=subprocess.run, tool: str = "smpquery",
          rail: int = 0) -> str | None:
    """Run ``/usr/sbin/<tool> <args>`` as node ``node_id`` of the fabric, against the ibsim of ``rail`` (the node's
    device's rail: each rail is a subnet with its own ibsim); stdout, or None on failure."""
    env = dict(os.environ, **fabric.server_env(exp, rail), SIM_HOST=node_id)
    try:
        res = runner([os.path.join(fabric.REAL_TOOLS_DIR, tool)] + tool_args, env=env, capture_output=True,
                     text=True, timeout=QUERY_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 else None


class Syncer:
    """One sync pass per ``step()``; keeps the failure counts between passes."""

    def __init__(self, root: Path, runner=subprocess.run, watch_opensm: bool = False):
        self.root = Path(root)
        self.runner = runner
        self.fails: dict = {}
        self.last: dict = {}
        self.watch_opensm = watch_opensm
        self.sm_fails: dict = {}
        self.sm_checked = 0.0

    def check_opensm(self, exp: dict) -> list[str]:
        """Restart an opensm@<guid>.service of this host that no longer answers SMInfo on its port."""
        if not self.watch_opensm or time.monotonic() - self.sm_checked < SM_CHECK_EVERY:
            return []
        self.sm_checked = time.monotonic()
        restarted = []
        rails = fabric.device_rails(exp)
        for dev, port in fabric.fabric_ports(exp):
            unit = f"opensm@0x{port['port_guid']}.service"
            active = self.runner(["systemctl", "is-active", "--quiet", unit], check=False).returncode == 0
            if not active:
                self.sm_fails.pop(unit, None)
                continue
            answer = query(["-D", "0"], exp, dev["node_desc"], self.runner, tool="sminfo", rail=rails[dev["name"]])
            if answer is not None:
                self.sm_fails[unit] = 0
                continue
            self.sm_fails[unit] = self.sm_fails.get(unit, 0) + 1
            if self.sm_fails[unit] >= SM_FAIL_LIMIT:
                self.sm_fails[unit] = 0
                self.runner(["systemctl", "restart", "--no-block", unit], check=False)
                restarted.append(unit)
        return restarted

    def step(self) -> list[str]:
        exp = sysfs.simhost_profile(self.root)
        changed: list[str] = []
        out = firmware.unplugged_ports(exp)
        rails = fabric.device_rails(exp)
        for dev, port in fabric.fabric_ports(exp):
            key = (dev["name"], port["port"])
            if key in out:
                continue
            # an IPoIB port with an address is a real link when real_netdevs (netsync, README "IPoIB netdevs")
            real = bool(exp.get("real_netdevs") and port.get("ipv4"))
            pnum = str(port["port"])
            rail = rails[dev["name"]]
            text = query(["-D", "portinfo", "0", pnum], exp, dev["node_desc"], self.runner, rail=rail)
            pk_text = query(["-D", "pkeys", "0", pnum], exp, dev["node_desc"], self.runner, rail=rail) if text else None
            if text is None:
                self.fails[key] = self.fails.get(key, 0) + 1
                if self.fails[key] >= FAIL_LIMIT:
                    changed += mirror(self.root, dev["name"], port, no_sm_files(port["pkey_tbl_len"]), real)
                    self.last[f"{dev['name']}/{pnum}"] = {"reachable": False}
                continue
            self.fails[key] = 0
            if key in firmware.unplugged_ports(exp):  # the cable came out while the SM was asked: the port stays DOWN
                continue
            info = parse_portinfo(text)
            pkeys = parse_pkeys(pk_text)[0] if pk_text else None
            files = port_files(info, pkeys, port["pkey_tbl_len"])
            changed += mirror(self.root, dev["name"], port, files, real)
            self.last[f"{dev['name']}/{pnum}"] = {"reachable": True, **{k: files[k] for k in NO_SM}}
        for unit in self.check_opensm(exp):
            print(f"simhost-ibsync: {unit} answers no SMInfo on its port (its ibsim restarted?): restarted",
                  flush=True)
        if changed or not (sysfs.state_dir(self.root) / "ibsync.json").exists():
            self._save(changed)
        return changed

    def _save(self, changed: list[str]) -> None:
        sdir = sysfs.state_dir(self.root)
        if not sdir.is_dir():
            return
        data = {"time": time.time(), "ports": self.last, "last_changed": changed}
        statefile.write_json(sdir / "ibsync.json", data, indent=2, sort_keys=True)


def next_interval(current: float, changed: bool, base: float, idle: float = IDLE_INTERVAL) -> float:
    """The wait before the next sync: ``base`` after a sync that changed something, else twice the last, at most
    ``idle`` (and never below ``base``)."""
    return base if changed else max(base, min(idle, current * 2))


def run(root: Path, interval: float = 1.0, once: bool = False, watch_opensm: bool = False) -> int:
    syncer = Syncer(root, watch_opensm=watch_opensm)
    wait = interval
    while True:
        start = time.monotonic()
        try:
            changed = syncer.step()
            for path in changed:
                print(f"simhost-ibsync: {path} = {sysfs.read(root / path)}", flush=True)
            busy = bool(changed)
        except (OSError, ValueError) as exc:  # a tree being rebuilt: try again next second
            print(f"simhost-ibsync: {exc}", file=sys.stderr, flush=True)
            busy = True
        if once:
            return 0
        wait = next_interval(wait, busy, interval)
        time.sleep(max(0.1, wait - (time.monotonic() - start)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m simhost.ibsync", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="mirror the fabric into the tree (every second while it changes)")
    r.add_argument("--root", default=sysfs.DEFAULT_ROOT)
    r.add_argument("--interval", type=float, default=1.0)
    r.add_argument("--once", action="store_true")
    r.add_argument("--watch-opensm", action="store_true", help="restart an opensm@ unit orphaned by an ibsim restart")
    args = parser.parse_args(argv)
    return run(Path(args.root), args.interval, args.once, args.watch_opensm)


if __name__ == "__main__":
    sys.exit(main())
