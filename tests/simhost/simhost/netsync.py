"""simhost-netsync: keep the simulated RoCE ports in step with the container's real netdevs (stand-in for the kernel).

    python3 -m simhost.netsync run   [--root /run/simhost/sys] [--interval 30] [--settle 0.5]   (the daemon)
    python3 -m simhost.netsync once  [--root ...] [--no-adopt]     (adopt + one sync, then exit; for tests)
    python3 -m simhost.netsync rails --profile NAME|PATH [--host-index N]   (the profile's rails as JSON)

``run`` adopts the links Docker attached per rail (rename to the profile's netdev, profile MAC, MTU 1500, Docker's
IPv4 removed: see simhost/netdev.py), mirrors them into the tree, tells systemd it is ready (Type=notify, before
network-pre.target, so systemd-networkd only ever sees the final names), then waits for rtnetlink link and IPv4
address events (RTMGRP_LINK | RTMGRP_IPV4_IFADDR) and re-syncs after each burst; a link that Docker hot-plugs later
(``docker network connect``) is adopted too. Without netlink it polls every second. Every ``--interval`` seconds it
re-syncs anyway. It acts only when the profile has ``real_netdevs: true``. IB ports with a profile ``ipv4`` are rails
too (IPoIB netdevs: adopted by subnet, MTU 2044, the tree keeps their 20-byte address and type 32; P_Key children made
through ``create_child`` are mirrored as well; README "IPoIB netdevs"). Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import time
from pathlib import Path

from . import netdev, statefile, sysfs
from .profile import ProfileError, expand, load

RTMGRP_LINK = 0x1
RTMGRP_IPV4_IFADDR = 0x10
POLL_INTERVAL = 1.0
BURST_QUIET = 0.02      # an event burst ends after this much silence ...
BURST_MAX = 0.25        # ... or after this long


def log(msg: str) -> None:
    print(f"simhost-netsync: {msg}", flush=True)


def sd_notify(text: str) -> None:
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(addr)
        sock.sendall(text.encode())


def open_netlink():
    """A socket subscribed to link and IPv4 address changes, or None (then we poll)."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.bind((0, RTMGRP_LINK | RTMGRP_IPV4_IFADDR))
        sock.setblocking(False)
        return sock
    except (OSError, AttributeError) as exc:
        log(f"no rtnetlink ({exc}); polling every {POLL_INTERVAL:g} s")
        return None


def drain(sock) -> int:
    """Read what is queued; count messages (ENOBUFS, a lost burst, counts as one: we re-read everything anyway)."""
    n = 0
    while True:
        try:
            if not sock.recv(1 << 16):
                return n
            n += 1
        except BlockingIOError:
            return n
        except OSError:
            n += 1


class NetSync:
    def __init__(self, root: Path, settle: float = 0.5, adopt: bool = True):
        self.root = Path(root)
        self.settle = settle
        self.adopt = adopt
        self.exp = sysfs.simhost_profile(self.root, required=True)  # no tree: fail, do not mirror into nothing
        self.rails = netdev.rail_ports(self.exp)
        self.state = {"pid": os.getpid(), "mode": None, "adopted": [], "warnings": [], "syncs": 0,
                      "last_sync": None, "last_sync_ms": None}
        self._warned = set()

    def adopt_links(self, links: list[dict], hotplug: bool) -> list[dict]:
        if not self.adopt:
            return links
        steps, warnings = netdev.plan_adoption(self.rails, links)
        if steps and hotplug and self.settle:
            time.sleep(self.settle)  # let Docker finish configuring a link it just plugged in
            links = netdev.read_links()
            steps, warnings = netdev.plan_adoption(self.rails, links)
        for w in warnings:
            if w not in self._warned:
                self._warned.add(w)
                self.state["warnings"].append(w)
                log(w)
        for step in steps:
            try:  # one bad link must not stop the others
                netdev.run_argv(netdev.adoption_argv(step))
            except Exception as exc:  # pylint: disable=broad-except
                detail = getattr(exc, "stderr", "") or exc
                log(f"adopting {step['link']} as {step['netdev']} failed: {detail}")
                continue
            step = {**step, "at": time.time()}
            self.state["adopted"].append(step)
            log(f"{step['link']} -> {step['netdev']} (mac {step['mac']}, mtu {step['mtu']}, removed Docker's "
                f"{', '.join(step['strip']) or 'nothing'})")
        return netdev.read_links() if steps else links

    def sync(self, hotplug: bool = False) -> None:
        t0 = time.monotonic()
        links = self.adopt_links(netdev.read_links(), hotplug)
        report = netdev.sync_tree(self.root, links, self.exp)
        ms = (time.monotonic() - t0) * 1000
        self.state.update(syncs=self.state["syncs"] + 1, last_sync=time.time(), last_sync_ms=round(ms, 1))
        for name, rep in report.items():
            if rep["changed"] or rep["gids"]:
                gids = ", ".join(f"{i}={'-' if g is None else g}" for i, g in sorted(rep["gids"].items()))
                log(f"{name}: {' '.join(c.rsplit('/', 1)[1] for c in rep['changed'])}{' gids ' + gids if gids else ''}"
                    f" ({ms:.0f} ms)")
        self.save_state()

    def save_state(self) -> None:
        statefile.write_json(sysfs.state_dir(self.root) / "netsync.json", self.state, indent=1, sort_keys=True,
                             mkdir=True)


def cmd_run(args) -> int:
    root = Path(args.root)
    ns = NetSync(root, settle=args.settle)
    if not ns.exp.get("real_netdevs"):
        log("profile has no real_netdevs: nothing to do")
        sd_notify("READY=1\nSTATUS=idle (profile has no real_netdevs)")
        return 0
    stop = []
    wake_r, wake_w = socket.socketpair()   # a signal wakes select() at once (PEP 475 would resume it)
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno())
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    sock = open_netlink()   # subscribe before the first read: no change between the two is lost
    ns.state["mode"] = "netlink" if sock else "poll"
    ns.sync()
    sd_notify(f"READY=1\nSTATUS=mirroring {', '.join(r['netdev'] for r in ns.rails)} ({ns.state['mode']})")
    watch = [wake_r] + ([sock] if sock else [])
    while not stop:
        # netlink: wait for an event, re-sync every --interval anyway; no netlink: poll
        ready = select.select(watch, [], [], args.interval if sock else POLL_INTERVAL)[0]
        if stop:
            break
        if wake_r in ready:
            drain(wake_r)
            if sock not in ready:
                continue
        if sock in ready:
            end = time.monotonic() + BURST_MAX
            drain(sock)
            while time.monotonic() < end and select.select([sock], [], [], BURST_QUIET)[0]:
                drain(sock)
        try:  # keep mirroring: the next event or the periodic re-sync retries
            ns.sync(hotplug=True)
        except Exception as exc:  # pylint: disable=broad-except
            log(f"sync failed: {exc}")
    log("stopping")
    return 0


def cmd_once(args) -> int:
    ns = NetSync(Path(args.root), settle=0, adopt=not args.no_adopt)
    ns.state["mode"] = "once"
    ns.sync()
    print(json.dumps(ns.state, indent=1, sort_keys=True))
    return 0


def cmd_rails(args) -> int:
    exp = expand(load(args.profile), args.host_index)
    rails = [{**r, "docker": netdev.rail_network(r["subnet"]) if r["subnet"] else None} for r in netdev.rail_ports(exp)]
    print(json.dumps(rails, indent=1))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m simhost.netsync", description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("run", "once"):
        p = sub.add_parser(name)
        p.add_argument("--root", default=os.environ.get("SIMHOST_SYSFS_ROOT", sysfs.DEFAULT_ROOT))
        if name == "run":
            p.add_argument("--interval", type=float, default=30.0, help="full re-sync period in seconds")
            p.add_argument("--settle", type=float, default=0.5, help="wait before adopting a hot-plugged link")
        else:
            p.add_argument("--no-adopt", action="store_true", help="mirror only, rename nothing")
    r = sub.add_parser("rails")
    r.add_argument("--profile", required=True)
    r.add_argument("--host-index", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        return {"run": cmd_run, "once": cmd_once, "rails": cmd_rails}[args.cmd](args)
    except (ProfileError, OSError, ValueError) as exc:
        print(f"simhost-netsync: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
