"""An InfiniBand fabric for simulated hosts: one ibsim process (Debian's ibsim-utils) per IB rail of a named fabric
(each rail is a separate subnet), and the glue that lets the REAL opensm and infiniband-diags run against it through
libumad2sim.so (LD_PRELOAD).

- Rails: a device's rail is its position among the host's IB devices (mlx5_0 of every host on rail 0, mlx5_1 on
  rail 1). Each rail is its own subnet with its own SMs, so it gets its own ibsim: LIDs are per subnet (every rail's
  SM assigns them from 1) and ibsim keeps ONE LID table per process, so rails sharing one ibsim would overwrite
  each other's LIDs and LID-routed MADs (SMInfo between SMs, sminfo) would reach the wrong subnet.
- Ports: rail N's ibsim listens on ``rail_port(base, N) = base + 20 * N`` (base: the fabric's port, 7070). ibsim
  answers client i on its port + 1 + i, at most 10 clients, so 20 apart keeps the rails' port ranges disjoint.
- ``netfile(hosts, title, rail)`` / ``netfiles(hosts, title)``: the ibsim topology of the hosts whose profiles
  point to this fabric: one switch ``sw-rail<N>`` per rail, one CA per IB device named ``"<hostname> <dev>"`` (its
  NodeDescription), ``caguid`` = port GUID - 1 so that ibsim's port GUID (node GUID + port number) is the
  profile's port GUID; with ``rail`` only that rail's switch and CAs (what rail N's ibsim loads).
- ``env_files(exp)``: ``/etc/simhost/ibsim.env`` (LD_PRELOAD, IBSIM_SERVER_NAME, rail 0's IBSIM_SERVER_PORT) and
  one ``/etc/simhost/opensm/<port guid>.env`` (SIM_HOST, the port's rail's IBSIM_SERVER_PORT) per IB port, read in
  that order by the opensm@.service drop-in (the later file wins).
- ``exec_tool(name, argv)``: the ``sminfo``/``smpquery``/``saquery``/``ibnetdiscover``/``iblinkinfo`` launchers: exec the real
  /usr/sbin tool with the umad2sim environment; ``-C mlx5_N`` / ``-P n`` pick SIM_HOST (umad2sim has one CA,
  ``ibsim0``, attached at the node SIM_HOST names) and the ibsim of that device's rail.
Stdlib only (runs in the containers). See README.md, "InfiniBand fabric and subnet manager".
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
from pathlib import Path

from . import profile as profile_mod
from . import statefile, sysfs

UMAD2SIM_GLOB = "/usr/lib/*/umad2sim/libumad2sim.so"
UMAD2SIM_DEFAULT = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
DEFAULT_PORT = 7070
# include/ibsim.h of ibsim 0.10: at most 10 clients (umad processes: each opensm, each smpquery/sminfo run) at a time
IBSIM_MAX_CLIENTS = 10
# ibsim uses its port and port + 1 + client id (0..9): rails 20 ports apart never share a port
RAIL_PORT_STEP = 20
NETFILE_RE = re.compile(r"^fabric-rail(\d+)\.net$")
REAL_TOOLS_DIR = "/usr/sbin"
TOOLS = ("sminfo", "smpquery", "saquery", "ibnetdiscover", "iblinkinfo")


def umad2sim_lib() -> str:
    found = sorted(glob.glob(UMAD2SIM_GLOB))
    return found[0] if found else UMAD2SIM_DEFAULT


def fabric_ports(exp: dict) -> list[tuple[dict, dict]]:
    """(device, port) of every port of the expanded profile that is on the host's fabric (IB ports, boot link layer)."""
    if not exp.get("ib_fabric"):
        return []
    return [(dev, port) for dev in exp["devices"] for port in dev["ports"] if port.get("fabric")]


def ib_devices(exp: dict) -> list[dict]:
    """The host's devices with at least one fabric port, in profile order: the index is the device's rail."""
    seen, out = set(), []
    for dev, _port in fabric_ports(exp):
        if dev["name"] not in seen:
            seen.add(dev["name"])
            out.append(dev)
    return out


def _load_host(item) -> dict:
    """An expanded profile from a path (JSON: the tree's .simhost/profile.json, or a raw profile with ib_fabric) or
    a {host, profile} mapping; raw profiles are expanded here."""
    host = None
    if isinstance(item, dict) and "profile" in item:
        host, prof = item.get("host"), item["profile"]
    else:
        prof = item
    if isinstance(prof, (str, Path)):
        prof = profile_mod.load(str(prof))
    expanded = bool(prof.get("devices")) and all("port_guid" in p for d in prof["devices"] for p in d["ports"])
    if not expanded:
        if host and "ib_fabric" not in prof:  # a {host, profile} item of the fabric's host list
            prof = dict(prof, ib_fabric={"server": "fabric", "hostname": host})
        prof = profile_mod.expand(prof)
    return prof


def rail_port(base: int, rail: int) -> int:
    """UDP port of rail ``rail``'s ibsim: ``base + 20 * rail``. ibsim also uses port + 1 + client id (at most 10
    clients), so rails 20 apart never share a port."""
    port = int(base) + RAIL_PORT_STEP * int(rail)
    if not 1 <= port <= 65535 - 1 - IBSIM_MAX_CLIENTS:
        raise ValueError(f"rail {rail}: ibsim port {port} (fabric port {base} + {RAIL_PORT_STEP} x rail) is out of "
                         f"range 1..{65535 - 1 - IBSIM_MAX_CLIENTS}")
    return port


def device_rails(exp: dict) -> dict[str, int]:
    """{device name: rail} of the host's fabric devices (see ib_devices)."""
    return {dev["name"]: rail for rail, dev in enumerate(ib_devices(exp))}


def _topology(hosts: list) -> tuple[dict[int, list[tuple[str, int]]], list[tuple]]:
    """(rails, cas) of ``hosts``: rail -> [(node id, ca port)] in switch port order; cas = [(rail, node id, caguid,
    number of ports, [(ca port, switch port)])]. Raises ValueError on duplicate node ids or GUIDs (over all rails)."""
    rails: dict[int, list[tuple[str, int]]] = {}
    cas = []
    seen_ids, seen_guids = {}, {}
    for exp in (_load_host(h) for h in hosts):
        if not exp.get("ib_fabric"):
            continue
        for rail, dev in enumerate(ib_devices(exp)):
            node_id = dev["node_desc"]
            if node_id in seen_ids:
                raise ValueError(f"node id {node_id!r} of {exp['ib_fabric']['hostname']} is already taken by "
                                 f"{seen_ids[node_id]} (host names must differ)")
            seen_ids[node_id] = exp["ib_fabric"]["hostname"]
            ports = [p for p in dev["ports"] if p.get("fabric")]
            first = dev["ports"][0]
            caguid = int(first["port_guid"], 16) - first["port"]
            for p in dev["ports"]:
                if int(p["port_guid"], 16) != caguid + p["port"]:
                    raise ValueError(f"{node_id}: port {p['port']} GUID {p['port_guid']} is not node GUID + port "
                                     "(ibsim numbers port GUIDs so)")
            for p in ports:
                if p["port_guid"] in seen_guids:
                    raise ValueError(f"{node_id}: port GUID 0x{p['port_guid']} is also {seen_guids[p['port_guid']]}")
                seen_guids[p["port_guid"]] = node_id
            links = []
            sw = rails.setdefault(rail, [])
            for p in ports:
                sw.append((node_id, p["port"]))
                links.append((p["port"], len(sw)))
            cas.append((rail, node_id, caguid, len(dev["ports"]), links))
    return rails, cas


def _render(rails: dict, cas: list, title: str, rail: int | None) -> str:
    where = (f": fabric {title}" if title else "") + (f", rail {rail}" if rail is not None else "")
    scope = (f"# rail {rail} only: one subnet, one ibsim process (LIDs are per subnet; ibsim's LID table is global)"
             if rail is not None else "# one switch per IB rail (separate subnets)")
    out = ["# ibsim netfile written by simhost (python3 -m simhost fabric netfile)" + where,
           scope + "; one CA per IB device \"<hostname> <dev>\";",
           "# caguid = port GUID - 1: ibsim's port GUID (node GUID + port number) is the profile's port GUID", ""]
    for num in sorted(rails):
        if rail is not None and num != rail:
            continue
        members = rails[num]
        out.append(f"switchguid=0x{0x0002c90300fab000 + num:016x}")
        out.append(f'Switch {max(len(members), 2)} "sw-rail{num}"')
        for i, (node_id, ca_port) in enumerate(members, 1):
            out.append(f'[{i}] "{node_id}"[{ca_port}]')
        out.append("")
    for ca_rail, node_id, caguid, nports, links in cas:
        if rail is not None and ca_rail != rail:
            continue
        out.append(f"caguid=0x{caguid:016x}")
        out.append(f'Hca {nports} "{node_id}"')
        for ca_port, sw_port in links:
            out.append(f'[{ca_port}] "sw-rail{ca_rail}"[{sw_port}]')
        out.append("")
    return "\n".join(out)


def netfile(hosts: list, title: str = "", rail: int | None = None) -> str:
    """The ibsim netfile of ``hosts`` (see the module doc): every rail, or with ``rail`` only that rail's switch and
    CAs (what that rail's ibsim loads). Raises ValueError on duplicate node ids or GUIDs, or a rail no host has."""
    rails, cas = _topology(hosts)
    if rail is not None and rail not in rails:
        raise ValueError(f"rail {rail}: no IB port of these hosts is on it (rails: "
                         f"{', '.join(map(str, sorted(rails))) or 'none'})")
    return _render(rails, cas, title, rail)


def netfiles(hosts: list, title: str = "") -> dict[int, str]:
    """{rail: netfile of that rail} for every rail of ``hosts`` (one ibsim process per rail)."""
    rails, cas = _topology(hosts)
    return {rail: _render(rails, cas, title, rail) for rail in sorted(rails)}


def fabric_port(hosts: list) -> int:
    """The fabric's base port: the ``ib_fabric.port`` of its hosts (DEFAULT_PORT without hosts). Raises ValueError
    when they differ (each host would look for the ibsim of its rail at another port)."""
    ports: dict[int, list[str]] = {}
    for exp in (_load_host(h) for h in hosts):
        if exp.get("ib_fabric"):
            ports.setdefault(int(exp["ib_fabric"]["port"]), []).append(exp["ib_fabric"]["hostname"])
    if len(ports) > 1:
        raise ValueError("the hosts of one fabric name different ib_fabric ports (simhost_ib_fabric_port): "
                         + "; ".join(f"{port}: {', '.join(names)}" for port, names in sorted(ports.items())))
    return next(iter(ports), DEFAULT_PORT)


def server_env(exp: dict, rail: int = 0) -> dict:
    """The umad2sim client environment of a host on a fabric (without SIM_HOST): the ibsim of rail ``rail``."""
    fab = exp["ib_fabric"]
    return {"LD_PRELOAD": umad2sim_lib(), "IBSIM_SERVER_NAME": fab["server"],
            "IBSIM_SERVER_PORT": str(rail_port(fab["port"], rail))}


def env_files(exp: dict) -> dict[str, str]:
    """{relative path: content} of the environment files under /etc/simhost (empty without a fabric).
    ``ibsim.env`` points to rail 0's ibsim; each port's ``opensm/0x<guid>.env`` sets its rail's IBSIM_SERVER_PORT
    (the drop-in reads it after ibsim.env, so it wins)."""
    if not exp.get("ib_fabric"):
        return {}
    files = {"ibsim.env": "# umad2sim client environment (simhost fabric); read by opensm@.service.d/simhost.conf\n"
             "# IBSIM_SERVER_PORT: rail 0's ibsim; opensm/0x<port guid>.env sets the port's rail's\n"
             + "".join(f"{k}={v}\n" for k, v in server_env(exp).items())}
    rails = device_rails(exp)
    for dev, port in fabric_ports(exp):
        rail = rails[dev["name"]]
        files[f"opensm/0x{port['port_guid']}.env"] = (
            f"# opensm@0x{port['port_guid']}.service binds {dev['name']} port {port['port']}: its ibsim node, "
            f"and the ibsim of rail {rail} (its subnet)\n"
            f'SIM_HOST="{dev["node_desc"]}"\n'
            f"IBSIM_SERVER_PORT={rail_port(exp['ib_fabric']['port'], rail)}\n")
    return files


def write_env_files(exp: dict, etc: Path) -> list[str]:
    """Write env_files(exp) under ``etc`` (only what changed) and remove stale opensm/*.env; return changed paths."""
    want = env_files(exp)
    changed = []
    for rel, text in want.items():
        path = etc / rel
        if statefile.write_if_changed(path, text, mkdir=True):
            changed.append(str(path))
    stale = [etc / "ibsim.env"] if "ibsim.env" not in want else []
    stale += [p for p in (etc / "opensm").glob("*.env") if f"opensm/{p.name}" not in want]
    for path in stale:
        if path.exists():
            path.unlink()
            changed.append(str(path))
    return changed


_SMINFO_RE = re.compile(r"^sminfo: sm lid (\d+) sm guid (0x[0-9a-f]+), activity count (\d+) priority (\d+) "
                        r"state (\d+) (SMINFO_\w+)$")


def parse_sminfo(text: str) -> dict | None:
    """``sminfo: sm lid 1 sm guid 0x..., activity count 72 priority 10 state 3 SMINFO_MASTER`` -> dict; None for
    anything else (``sminfo: iberror: failed: query``: no SM answers)."""
    for line in text.splitlines():
        m = _SMINFO_RE.match(line.strip())
        if m:
            return {"lid": int(m.group(1)), "guid": m.group(2), "activity": int(m.group(3)),
                    "priority": int(m.group(4)), "state": int(m.group(5)), "state_name": m.group(6)}
    return None


# ------------------------------------------------------------------------------------------- tool launchers
def _split_opts(argv: list[str]) -> tuple[list[str], str | None, str | None]:
    """Remove -C/--Ca and -P/--Port (all spellings) from argv; return (rest, ca, port)."""
    rest, ca, port = [], None, None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        for short, long_ in (("-C", "--Ca"), ("-P", "--Port")):
            val = None
            if arg in (short, long_) and i + 1 < len(argv):
                val, i = argv[i + 1], i + 1
            elif arg.startswith(long_ + "="):
                val = arg[len(long_) + 1:]
            elif arg.startswith(short) and len(arg) > 2 and not arg.startswith("--"):
                val = arg[2:]
            if val is not None:
                if short == "-C":
                    ca = val
                else:
                    port = val
                break
        else:
            rest.append(arg)
        i += 1
    return rest, ca, port


def tool_command(name: str, argv: list[str], exp: dict, environ: dict | None = None) -> tuple[list[str], dict]:
    """(argv, env) to exec for simulated tool ``name`` called as ``argv`` (argv[0] = the launcher)."""
    env = dict(os.environ if environ is None else environ)
    real = os.path.join(REAL_TOOLS_DIR, name)
    args = list(argv[1:])
    ports = fabric_ports(exp)
    if not ports:  # no fabric: the real tool as on a host without IB hardware
        return [real] + args, env
    rest, ca, port = _split_opts(args)
    chosen = None
    for dev, p in ports:
        if (ca is None or dev["name"] == ca) and (port is None or str(p["port"]) == port.strip()):
            chosen = (dev, p)
            break
    if chosen is None and ca is not None:
        return [real] + args, env  # a CA that is no fabric device: the real tool's own error for it
    if chosen is None:  # -P n with no such port on the first device: let the real tool say so
        chosen = ports[0]
        rest = ["-P", port] + rest
    elif port is not None and chosen[1]["port"] != 1:
        rest = ["-P", port] + rest
    env.update(server_env(exp, device_rails(exp)[chosen[0]["name"]]))  # the ibsim of the device's rail
    env["SIM_HOST"] = chosen[0]["node_desc"]
    return [real] + rest, env


def exec_tool(name: str, argv: list[str]) -> int:
    try:
        exp = sysfs.simhost_profile()
    except (OSError, ValueError):
        exp = {}
    cmd, env = tool_command(name, argv, exp)
    try:
        os.execve(cmd[0], [name] + cmd[1:], env)
    except OSError as exc:
        print(f"{name}: {cmd[0]}: {exc.strerror} (install infiniband-diags)", file=sys.stderr)
        return 127
    return 0  # not reached


# ---------------------------------------------------------------------------------------------------- CLI
def write_netfiles(hosts: list, title: str, out_dir: Path) -> dict:
    """Write ``fabric-rail<N>.net`` of every rail into ``out_dir`` (only those whose text changed), remove the
    ``fabric-rail*.net`` of rails no host has any more. Returns {"rails": [{rail, port, netfile, changed}],
    "removed": [paths], "changed": bool}; ``port`` is the rail's ibsim port (rail_port of the hosts' fabric port)."""
    base = fabric_port(hosts)
    texts = netfiles(hosts, title)
    ports = {rail: rail_port(base, rail) for rail in texts}  # all in range before anything is written
    rails = []
    for rail, text in texts.items():
        path = out_dir / f"fabric-rail{rail}.net"
        rails.append({"rail": rail, "port": ports[rail], "netfile": str(path),
                      "changed": statefile.write_if_changed(path, text)})
    removed = []
    for path in sorted(out_dir.glob("fabric-rail*.net")):
        m = NETFILE_RE.match(path.name)
        if m and int(m.group(1)) not in texts:
            path.unlink()
            removed.append(str(path))
    return {"rails": rails, "removed": removed, "changed": bool(removed) or any(r["changed"] for r in rails)}


def main(argv=None) -> int:
    import argparse  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(prog="python3 -m simhost fabric", description="simulated InfiniBand fabric")
    sub = parser.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("netfile", help="the ibsim netfile(s) of the hosts on one fabric (one ibsim per rail)")
    n.add_argument("--profile", action="append", default=[], help="a host's profile JSON (expanded or with ib_fabric)")
    n.add_argument("--hosts", help="JSON list of {host, profile} (a path, or - for stdin)")
    n.add_argument("--title", default="", help="fabric name for the header comment")
    n.add_argument("--rail", type=int, help="only this rail's switch and CAs (default: every rail in one file)")
    out = n.add_mutually_exclusive_group()
    out.add_argument("--output", help="write here (only when changed) instead of printing")
    out.add_argument("--output-dir", help="write fabric-rail<N>.net of every rail here (only when changed), remove "
                     "stale fabric-rail*.net, print a JSON line {rails: [{rail, port, netfile, changed}], removed, "
                     "changed}")
    e = sub.add_parser("env", help="write /etc/simhost/ibsim.env and opensm/<guid>.env for a host")
    e.add_argument("--root", default="/run/simhost/sys", help="the host's tree (its .simhost/profile.json)")
    e.add_argument("--etc", default="/etc/simhost")
    args = parser.parse_args(argv)
    if args.cmd == "netfile":
        hosts = list(args.profile)
        if args.hosts:
            text = sys.stdin.read() if args.hosts == "-" else Path(args.hosts).read_text(encoding="utf-8")
            hosts += json.loads(text)
        if args.output_dir:
            if args.rail is not None:
                parser.error("--rail and --output-dir exclude each other (--output-dir writes every rail)")
            print(json.dumps(write_netfiles(hosts, args.title, Path(args.output_dir)), sort_keys=True))
            return 0
        text = netfile(hosts, args.title, args.rail)
        if args.output:
            path = Path(args.output)
            changed = statefile.write_if_changed(path, text)
            print(f"simhost: wrote {path} (changed)" if changed else f"simhost: {path} unchanged")
        else:
            sys.stdout.write(text)
    else:
        changed = write_env_files(sysfs.simhost_profile(Path(args.root)), Path(args.etc))
        print(f"simhost: {len(changed)} environment file(s) changed" + (": " + ", ".join(changed) if changed else ""))
    return 0
